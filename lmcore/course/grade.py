"""Grade a folder of submitted notebooks with nbgrader's autograder; write grades.csv and feedback.

Layout: ``SUBMISSIONS/<student>/<notebook>.ipynb`` (notebook names as in ``notebooks/``). The
course notebooks named by any submission are stamped (:mod:`lmcore.course.nbgrader_meta`) into a
scratch nbgrader course (``OUT/course``: ``source/``, ``release/``, ``submitted/``,
``autograded/`` and the SQLite gradebook ``gradebook.db``, no server), released with
``nbgrader generate_assignment`` (solutions replaced by the same stub as ``make student``) and
every submission is run by ``nbgrader autograde`` with a per-cell timeout. nbgrader restores the
instructor's locked and test cells before running. Writes ``OUT/grades.csv`` (one row per
student, one column per exercise, total) and ``OUT/feedback/<student>.md`` (the check's own line
with its hint, per exercise). Usage (needs the ``teach`` extra, ``pip install -e .[teach]``):
``python -m lmcore.course.grade SUBMISSIONS [--out grades] [--timeout 120]`` or
``make grade SUBMISSIONS=dir``.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import sys
import time
import warnings
from pathlib import Path

import nbformat

from .nbgrader_meta import stamp_notebook
from .student import STUB

__all__ = ["ASSIGNMENT", "nbgrader_config", "prepare_course", "grade_submissions", "main"]

ASSIGNMENT = "lmcore"
_CHECK_LINE = re.compile(r"^[✓✗…] .*$", re.M)
_SUSPECT = re.compile(r"^\s*(def\s+check_\w+|[\w.]*check_\w+\s*=(?!=)|[\w.]*lmcore[\w.]*\.\w+\s*=(?!=)|"
                      r"setattr\(|import\s+builtins)", re.M)


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
    c.OverwriteCells.add_missing_cells = True  # a deleted test cell comes back and runs
    return c


def prepare_course(course_dir, notebooks, source_dir="notebooks", assignment=ASSIGNMENT) -> list[str]:
    """Stamp copies of ``notebooks`` (names) from ``source_dir`` into ``course/source/<assignment>``."""
    dest = Path(course_dir) / "source" / assignment
    dest.mkdir(parents=True, exist_ok=True)
    for name in notebooks:
        nb = nbformat.read(Path(source_dir) / f"{name}.ipynb", as_version=4)
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


def _column(notebook: str, grade_id: str) -> str:
    prefix = notebook.split("_")[0] if notebook[:2].isdigit() else notebook
    return f"{prefix}_{grade_id.removeprefix('test_')}"


def _explain(cell, timeout: int) -> str:
    """One line for a graded cell of an autograded notebook: the check's line, or why it errored."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    lines = _CHECK_LINE.findall(text)
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if lines and (not errors or errors[0].get("ename") in ("NotPassed", "AssertionError")):
        return " ".join(lines)
    if not errors:
        return "ran without error" if not any(o.get("name") == "stderr" for o in cell.get("outputs", [])) \
            else "the cell wrote to stderr (nbgrader gives no points then)"
    ename, evalue = errors[0].get("ename", ""), errors[0].get("evalue", "")
    if ename in ("CellTimeoutError", "KeyboardInterrupt"):
        return f"stopped after the {timeout} s limit per cell (an endless loop?)"
    if ename == "NameError":
        return (f"{ename}: {evalue} (the cell that defines it failed, e.g. a syntax error, "
                "or was deleted)")
    return f"{ename}: {evalue}"


def _notes(submitted: Path, source: Path) -> list[str]:
    """What in a submission the instructor may want to look at: edited locked cells, redefinitions."""
    notes = []
    sub, src = nbformat.read(submitted, as_version=4), nbformat.read(source, as_version=4)
    originals = {c.metadata["nbgrader"]["grade_id"]: c for c in src.cells if "nbgrader" in c.metadata}
    for cell in sub.cells:
        meta = cell.metadata.get("nbgrader", {})
        orig = originals.get(meta.get("grade_id"))
        if orig is not None and orig.metadata["nbgrader"].get("locked") and \
                cell.source.strip() != orig.source.strip():
            notes.append(f"{submitted.stem}: locked cell {meta['grade_id']} was edited; graded with "
                         "the original")
        elif (orig is None or not orig.metadata["nbgrader"].get("locked")) and cell.cell_type == "code":
            for m in _SUSPECT.finditer(cell.source):
                notes.append(f"{submitted.stem}: a cell of the student's has `{m.group(1).strip()}`; "
                             "graded with the instructor's checkers (review it)")
    return notes


def grade_submissions(submissions, out="grades", *, source_dir="notebooks", timeout: int = 120,
                      assignment: str = ASSIGNMENT, log=print) -> dict:
    """Autograde every ``submissions/<student>/*.ipynb``; returns {"columns", "rows", "seconds", ...}."""
    with warnings.catch_warnings():  # nbgrader 0.9 + SQLAlchemy 2 warn about session autoflush
        warnings.filterwarnings("ignore", message=".*not in session.*")
        warnings.filterwarnings("ignore", message="Cell is missing an id field")  # re-added test cells
        return _grade(submissions, out, source_dir, timeout, assignment, log)


def _grade(submissions, out, source_dir, timeout, assignment, log) -> dict:
    from nbgrader.api import Gradebook
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
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{result.get('log')}\n{result.get('error')}")
    seconds, notes = {}, {}
    for student in students:
        dest = course / "submitted" / student / assignment
        dest.mkdir(parents=True)
        for f in (submissions / student).glob("*.ipynb"):
            _copy_submission(f, dest / f.name, course / "source" / assignment / f.name)
        t0 = time.perf_counter()
        result = api.autograde(assignment, student, force=True, create=True)
        seconds[student] = time.perf_counter() - t0
        if not result["success"]:
            raise RuntimeError(f"nbgrader autograde failed for {student}:\n{result.get('error') or result.get('log')}")
        notes[student] = [n for f in sorted(dest.glob("*.ipynb"))
                          for n in _notes(f, course / "source" / assignment / f.name)]
        log(f"graded {student} in {seconds[student]:.1f} s")

    db_url = f"sqlite:///{(course / 'gradebook.db').resolve()}"
    columns, maxima, rows = [], {}, []
    with Gradebook(db_url) as gb:
        for nb in sorted(gb.find_assignment(assignment).notebooks, key=lambda n: n.name):
            order = [c.metadata["nbgrader"]["grade_id"] for c in
                     nbformat.read(course / "source" / assignment / f"{nb.name}.ipynb", as_version=4).cells
                     if c.metadata.get("nbgrader", {}).get("grade")]
            for grade_id in order:
                columns.append((nb.name, grade_id))
                maxima[(nb.name, grade_id)] = gb.find_grade_cell(grade_id, nb.name, assignment).max_score
        for student in students:
            scores = {key: gb.find_grade(key[1], key[0], assignment, student).score for key in columns}
            rows.append((student, scores))

    out.mkdir(parents=True, exist_ok=True)
    fmt = lambda x: f"{x:g}"  # noqa: E731
    header = ["student"] + [_column(*k) for k in columns] + ["total"]
    with open(out / "grades.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for student, scores in rows:
            writer.writerow([student] + [fmt(scores[k]) for k in columns] + [fmt(sum(scores.values()))])
    (out / "feedback").mkdir(exist_ok=True)
    total_max = sum(maxima.values())
    for student, scores in rows:
        lines = [f"# Feedback for {student}: {fmt(sum(scores.values()))} / {fmt(total_max)} points", ""]
        for nb_name in dict.fromkeys(k[0] for k in columns):
            graded = course / "autograded" / student / assignment / f"{nb_name}.ipynb"
            cells = {}
            if graded.exists():
                cells = {c.metadata["nbgrader"]["grade_id"]: c for c in nbformat.read(graded, as_version=4).cells
                         if c.metadata.get("nbgrader", {}).get("grade")}
            lines.append(f"## {nb_name}")
            for key in (k for k in columns if k[0] == nb_name):
                why = _explain(cells[key[1]], timeout) if key[1] in cells else "notebook not submitted"
                lines.append(f"- **{key[1].removeprefix('test_')}**: {fmt(scores[key])} / "
                             f"{fmt(maxima[key])}. {why}")
            lines.append("")
        if notes[student]:
            lines += ["## Notes for the instructor"] + [f"- {n}" for n in notes[student]] + [""]
        (out / "feedback" / f"{student}.md").write_text("\n".join(lines))
    return {"columns": header, "rows": [[s] + [scores[k] for k in columns] + [sum(scores.values())]
                                        for s, scores in rows],
            "max": total_max, "seconds": seconds, "notes": notes, "course": course}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmcore.course.grade", description=__doc__.split("\n")[0])
    parser.add_argument("submissions", help="folder of <student>/<notebook>.ipynb")
    parser.add_argument("--out", default="grades", help="where grades.csv, feedback/ and course/ go")
    parser.add_argument("--notebooks", default="notebooks", help="the course's source notebooks")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per cell (default 120)")
    args = parser.parse_args(argv)
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        sys.exit("nbgrader is not installed: pip install -e .[teach]  (or make grade)")
    report = grade_submissions(args.submissions, args.out, source_dir=args.notebooks, timeout=args.timeout)
    for student, note in report["notes"].items():
        for n in note:
            print(f"note: {student}: {n}")
    print(f"wrote {Path(args.out) / 'grades.csv'} ({len(report['rows'])} students, "
          f"{len(report['columns']) - 2} exercises, {report['max']:g} points) and {Path(args.out) / 'feedback'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
