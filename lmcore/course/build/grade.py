"""Grade a folder of submitted notebooks with nbgrader's autograder; write grades.csv and feedback.

Layout: ``SUBMISSIONS/<student>/<notebook>.ipynb`` (notebook names as in ``notebooks/``). The
course notebooks named by any submission are stamped (:mod:`lmcore.course.build.nbgrader_meta`) into a
scratch nbgrader course (``OUT/course``: ``source/``, ``release/``, ``submitted/``,
``autograded/`` and the SQLite gradebook ``gradebook.db``, no server), released with
``nbgrader generate_assignment`` (solutions replaced by the same stub as ``make student``) and
every submission is run by ``nbgrader autograde`` with a per-cell timeout. nbgrader restores the
instructor's locked and test cells before running. Writes ``OUT/grades.csv`` (one row per
student, one column per exercise, total), ``OUT/feedback/<student>.md`` (the check's own line
with its hint, per exercise) and the class report ``OUT/class.md`` + ``OUT/class.png`` (per
exercise the pass rate and the most frequent failure reasons, timeouts and broken files, a
students x exercises grid: :mod:`lmcore.course.build.class_report`). Usage (needs the ``teach`` extra, ``pip install -e .[teach]``):
``python -m lmcore.course.build.grade SUBMISSIONS [--out grades] [--timeout 300]`` or
``make grade SUBMISSIONS=dir``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

import nbformat

from .grade_report import notes_for, write_report
from .nbgrader_meta import stamp_notebook
from .nbtools import QUIET_KERNEL
from .student import STUB, strip_nbval_markers

__all__ = ["ASSIGNMENT", "nbgrader_config", "prepare_course", "grade_submissions", "main"]

ASSIGNMENT = "lmcore"


def _say(line: str) -> None:
    print(line, flush=True)  # at once, also when the output goes to a file


def nbgrader_config(course_dir, timeout: int):
    """The traitlets config: a local course, SQLite gradebook, ``make student``'s stub, a cell timeout."""
    from traitlets.config import Config

    # nbgrader runs the `alembic` command to create the gradebook: find it next to this Python
    bindir = str(Path(sys.executable).parent)
    if shutil.which("alembic") is None and bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    c = Config()
    c.CourseDirectory.root = str(Path(course_dir).resolve())
    c.CourseDirectory.course_id = "lmcore"
    c.ClearSolutions.code_stub = {"python": STUB}
    c.Execute.timeout = int(timeout)
    c.Execute.interrupt_on_timeout = True
    c.Execute.extra_arguments = list(QUIET_KERNEL)  # no "running over TCP" warning per kernel
    c.OverwriteCells.add_missing_cells = True  # a deleted test cell comes back and runs
    return c


def prepare_course(course_dir, notebooks, source_dir="notebooks", assignment=ASSIGNMENT) -> list[str]:
    """Stamp copies of ``notebooks`` (names) from ``source_dir`` into ``course/source/<assignment>``,
    nbval's markers dropped from their code cells (as ``make student`` drops them: the release,
    the locked cells restored for grading and the learner's edition are the same cells)."""
    dest = Path(course_dir) / "source" / assignment
    dest.mkdir(parents=True, exist_ok=True)
    for name in notebooks:
        nb = nbformat.read(Path(source_dir) / f"{name}.ipynb", as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.source = strip_nbval_markers(cell.source)
        stamp_notebook(nb, where=name)
        nbformat.write(nb, dest / f"{name}.ipynb")
    return list(notebooks)


def _copy_submission(path: Path, dest: Path, source: Path) -> None:
    """Copy a submission; one without any nbgrader metadata (made from unstamped notebooks)
    gets it from the source cells with the same cell ids, so nbgrader can still grade it."""
    nb = nbformat.read(path, as_version=4)
    if not any("nbgrader" in c.metadata for c in nb.cells):
        by_id = {c.id: c.metadata["nbgrader"] for c in nbformat.read(source, as_version=4).cells}
        for cell in nb.cells:
            if cell.get("id") in by_id:
                cell.metadata["nbgrader"] = dict(by_id[cell.id])
    nbformat.write(nb, dest)


def grade_submissions(
    submissions,
    out="grades",
    *,
    source_dir="notebooks",
    timeout: int = 300,
    assignment: str = ASSIGNMENT,
    log=None,
) -> dict:
    """Autograde every ``submissions/<student>/*.ipynb``; returns {"columns", "rows", "seconds", ...}."""
    with warnings.catch_warnings():  # nbgrader 0.9 + SQLAlchemy 2 warn about session autoflush
        warnings.filterwarnings("ignore", message=".*not in session.*")
        warnings.filterwarnings("ignore", message="Cell is missing an id field")  # re-added test cells
        return _grade(submissions, out, source_dir, timeout, assignment, log or _say)


def _grade(submissions, out, source_dir, timeout, assignment, log) -> dict:
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    submissions, out = Path(submissions), Path(out)
    students = sorted(p.name for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    names = sorted({f.stem for s in students for f in (submissions / s).glob("*.ipynb")})
    if not names:
        raise ValueError(f"submissions: no {submissions}/<student>/<notebook>.ipynb found")
    unknown = [n for n in names if not (Path(source_dir) / f"{n}.ipynb").exists()]
    if unknown:
        raise ValueError(f"submissions: notebooks not in {source_dir}/: {unknown}")
    course = out / "course"
    shutil.rmtree(course, ignore_errors=True)
    prepare_course(course, names, source_dir, assignment)
    config = nbgrader_config(course, timeout)
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    result = api.generate_assignment(assignment, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(
            f"nbgrader generate_assignment failed:\n{result.get('log')}\n{result.get('error')}"
        )
    seconds, notes = {}, {}
    bar = _progress_bar(sum(len(list((submissions / s).glob("*.ipynb"))) for s in students))
    for student in students:
        dest = course / "submitted" / student / assignment
        dest.mkdir(parents=True)
        notes[student] = []
        for f in (submissions / student).glob("*.ipynb"):
            try:
                _copy_submission(f, dest / f.name, course / "source" / assignment / f.name)
                notes[student] += notes_for(dest / f.name, course / "source" / assignment / f.name)
            except Exception as exc:  # noqa: BLE001 - one unreadable file must not stop the class
                notes[student].append(f"{f.stem}: not a readable notebook ({type(exc).__name__}); scored 0")
                (dest / f.name).unlink(missing_ok=True)
        seconds[student], failed = _autograde(
            api, assignment, student, sorted(dest.glob("*.ipynb")), bar, log
        )
        notes[student] += [f"nbgrader could not grade {name}: {why}" for name, why in failed]
        log(f"graded {student} in {seconds[student]:.1f} s" + (" (failed)" if failed else ""))
    bar.close()

    rows, header, total_max = write_report(course, assignment, students, notes, out, timeout)
    return {
        "columns": header,
        "rows": rows,
        "max": total_max,
        "seconds": seconds,
        "notes": notes,
        "course": course,
    }


def _progress_bar(total: int):
    """A tqdm bar over the (student, notebook) pairs: how many are graded, the rate, the time left."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="grading", unit="notebook", mininterval=2.0, file=sys.stderr)


def _autograde(api, assignment, student, paths, bar, log) -> tuple[float, list]:
    """Autograde one student's notebooks one at a time (nbgrader's ``notebook_id``), a line and a
    bar step each. Returns (seconds, [(notebook, why) for each that nbgrader could not grade])."""
    total, failed = 0.0, []
    try:
        for path in paths:
            api.coursedir.notebook_id = path.stem
            t0 = time.perf_counter()
            result = api.autograde(assignment, student, force=True, create=True)
            took = time.perf_counter() - t0
            total += took
            if not result["success"]:
                last = (result.get("error") or result.get("log") or "").strip().splitlines()[-1:]
                failed.append((path.stem, " ".join(last)))
            bar.update(1)
            log(f"  {student}: {path.stem} in {took:.1f} s" + ("" if result["success"] else " (failed)"))
    finally:
        api.coursedir.notebook_id = "*"
    return total, failed


def main(argv=None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=prog or "python -m lmcore.course.build.grade", description=__doc__.split("\n")[0]
    )
    parser.add_argument("submissions", help="folder of <student>/<notebook>.ipynb")
    parser.add_argument("--out", default="grades", help="where grades.csv, feedback/ and course/ go")
    parser.add_argument("--notebooks", default="notebooks", help="the course's source notebooks")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell (default 300, as nbval)")
    args = parser.parse_args(argv)
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        sys.exit("nbgrader is not installed: pip install -e .[teach]  (or make grade)")
    report = grade_submissions(args.submissions, args.out, source_dir=args.notebooks, timeout=args.timeout)
    for student, note in report["notes"].items():
        for n in note:
            print(f"note: {student}: {n}")
    print(
        f"wrote {Path(args.out) / 'grades.csv'} ({len(report['rows'])} students, "
        f"{len(report['columns']) - 2} exercises, {report['max']:g} points), {Path(args.out) / 'feedback'}/ "
        f"and the class report {Path(args.out) / 'class.md'} (+ class.png)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
