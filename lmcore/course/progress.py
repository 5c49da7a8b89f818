"""``make progress``: every check of the learner's workspace, run headlessly, as one table.

Each notebook of the workspace that the course has runs top to bottom in a fresh kernel, in a
temporary folder (so nothing is written into the workspace), the way nbgrader's autograder runs
a submission: ``NBGRADER_EXECUTION=autograde`` (the instructor's checkers run, whatever a cell
redefined; notebook 08 loads its committed reference run instead of training) and the check
cells taken from the instructor edition (by cell id). Per exercise it reads the check's own line:
``✓``, ``✗`` with the reason, or "not attempted yet". A notebook whose exercise cells are all
still the learner edition's stubs is not run (each of its checks would say "not attempted
yet"), so a run costs only the notebooks the learner has started. Usage:
``python -m lmcore.course.progress [workspace] [--jobs N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .build.nbgrader_meta import exercises
from .build.nbtools import run_cells
from .build.paths import course_root
from .build.student import strip_solutions
from .build.workspace import MANIFEST

__all__ = ["Row", "notebook_progress", "workspace_progress", "format_table", "default_workspace", "main"]

NEWER = "new in the course since your copy (make lab adds the newer notebook)"
_LINE = re.compile(r"^([✓✗…]) (.*)$", re.M)


@dataclass(frozen=True)
class Row:
    """One exercise: ``status`` is ``pass``, ``fail`` or ``todo``; ``reason`` the check's line."""

    notebook: str
    exercise: str
    status: str
    reason: str = ""


def _status(result: dict | None) -> tuple[str, str]:
    if result is None:
        return "fail", "the check cell did not run (the notebook stopped before it)"
    lines = _LINE.findall(result["text"])
    if lines:
        mark, text = lines[-1]
        status = {"✓": "pass", "…": "todo"}.get(mark, "fail")
        if status == "pass" and result["error"] and not result["error"].startswith("NotPassed"):
            return "fail", result["error"]
        return status, text
    return ("fail", result["error"]) if result["error"] else ("fail", "the check printed no verdict")


def _untouched(learner, instructor, found) -> bool:
    """True when every exercise cell of ``learner`` is still the learner edition's stub: then
    every check says "not attempted yet", and the notebook need not run (the common case)."""
    mine = {c.get("id"): c.source for c in learner.cells}
    for e in found:
        cell = instructor.cells[e["solution"]]
        stubs = {strip_solutions(cell.source, notes=n) for n in (True, False)}
        if mine.get(cell.get("id")) not in stubs:
            return False
    return True


@contextlib.contextmanager
def _grading_env():
    old = os.environ.get("NBGRADER_EXECUTION")
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("NBGRADER_EXECUTION", None)
        else:
            os.environ["NBGRADER_EXECUTION"] = old


def notebook_progress(learner_path, instructor_path, *, timeout: int = 300) -> list[Row]:
    """The rows of one notebook (call inside :func:`_grading_env`, as :func:`workspace_progress` does)."""
    learner = nbformat.read(learner_path, as_version=4)
    instructor = nbformat.read(instructor_path, as_version=4)
    name, found = Path(instructor_path).stem, exercises(instructor)
    if _untouched(learner, instructor, found):
        return [Row(name, e["function"], "todo") for e in found]
    originals = {
        c.get("id"): c.source for i, c in enumerate(instructor.cells) if any(i in e["tests"] for e in found)
    }
    for cell in learner.cells:
        if cell.get("id") in originals:
            cell.source = originals[cell.id]
    index_of = {c.get("id"): i for i, c in enumerate(learner.cells)}
    with tempfile.TemporaryDirectory(prefix="lmcore-progress-") as tmp:
        try:
            results = {r["index"]: r for r in run_cells(learner, tmp, timeout=timeout)}
        except Exception as exc:  # noqa: BLE001 - a stuck or crashed kernel fails this notebook only
            why = f"the notebook stopped: {type(exc).__name__}: {exc}".splitlines()[0]
            return [Row(name, e["function"], "fail", why) for e in found]
    rows = []
    for e in found:
        tests = [index_of.get(instructor.cells[i].get("id")) for i in e["tests"]]
        if instructor.cells[e["solution"]].get("id") not in index_of:
            rows.append(Row(name, e["function"], "todo", NEWER))
            continue
        if None in tests:
            rows.append(Row(name, e["function"], "fail", "its check cell is missing from your notebook"))
            continue
        outcomes = [_status(results.get(i)) for i in tests]
        worst = next(
            (o for o in outcomes if o[0] == "fail"),
            next((o for o in outcomes if o[0] == "todo"), outcomes[0]),
        )
        rows.append(Row(name, e["function"], *worst))
    return rows


def workspace_progress(workspace, instructor=None, *, jobs: int = 2, timeout: int = 300) -> list[Row]:
    """Rows for every course notebook, in order; a notebook missing from ``workspace`` reads as
    not attempted. Nothing under ``workspace`` is written."""
    folder = Path(workspace)
    folder = folder / "notebooks" if (folder / "notebooks").is_dir() else folder
    source = Path(instructor) if instructor is not None else course_root() / "notebooks"
    pairs = [(folder / p.name, p) for p in sorted(source.glob("*.ipynb"))]
    if not pairs:
        raise ValueError(f"instructor: no notebooks in {source}")

    def one(pair):
        mine, theirs = pair
        if not mine.is_file():
            nb = nbformat.read(theirs, as_version=4)
            return [Row(theirs.stem, e["function"], "todo", "not in your workspace") for e in exercises(nb)]
        return notebook_progress(mine, theirs, timeout=timeout)

    with _grading_env(), ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return [row for rows in pool.map(one, pairs) for row in rows]


def _wrapped(lead: str, text: str, width: int) -> list[str]:
    """``lead + text``, the text wrapped under itself: a reason is never cut (its useful part,
    the hint, comes last)."""
    room = max(30, width - len(lead))
    parts = textwrap.wrap(text, room, break_long_words=True, break_on_hyphens=False) or [""]
    return [lead + parts[0]] + [" " * len(lead) + part for part in parts[1:]]


def format_table(rows, *, width: int | None = None) -> str:
    """The table: notebook, exercise, ✓ / ✗ reason / not attempted yet; then the totals."""
    width = width or shutil.get_terminal_size((120, 20)).columns
    nb_w = max([len("notebook")] + [len(r.notebook) for r in rows])
    ex_w = max([len("exercise")] + [len(r.exercise) for r in rows])
    lines, last = (
        [f"{'notebook':<{nb_w}}  {'exercise':<{ex_w}}  result", "-" * min(width, nb_w + ex_w + 40)],
        None,
    )
    for r in rows:
        mark = {"pass": "✓", "fail": "✗ " + r.reason, "todo": "… not attempted yet"}[r.status]
        if r.status == "todo" and r.reason in ("not in your workspace", NEWER):
            mark = "… " + r.reason
        lead = f"{r.notebook if r.notebook != last else '':<{nb_w}}  {r.exercise:<{ex_w}}  "
        lines += _wrapped(lead, mark, width)
        last = r.notebook
    n = {s: sum(r.status == s for r in rows) for s in ("pass", "fail", "todo")}
    lines.append(
        f"total: {n['pass']} of {len(rows)} passed, {n['fail']} failed, {n['todo']} not attempted yet"
    )
    return "\n".join(lines)


def default_workspace(here=".") -> str:
    """The workspace to read when none is named: the current folder when it is one (JupyterLab's
    terminal starts there) or lies inside one, else ``workspace/`` below it (the repository)."""
    here = Path(here).resolve()
    for folder in (here, *here.parents):
        if (folder / MANIFEST).is_file():
            return str(folder)
    return str(here / "workspace")


def main(argv=None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument(
        "workspace", nargs="?", default=None, help="default: this folder if it is one, else workspace/"
    )
    parser.add_argument("--instructor", default=None, help="the instructor edition (default: notebooks/)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks run at the same time (default 2)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell (default 300)")
    args = parser.parse_args(argv)
    args.workspace = args.workspace or default_workspace()
    if not Path(args.workspace).is_dir():
        print(
            f"no workspace at {args.workspace}/: run `lmcore-course lab` (or `make lab`) first: it creates it"
        )
        return 2
    t0 = time.perf_counter()
    print(
        format_table(
            workspace_progress(args.workspace, args.instructor, jobs=args.jobs, timeout=args.timeout)
        )
    )
    print(f"({time.perf_counter() - t0:.0f} s; your workspace was not changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
