"""Stamp nbgrader's cell metadata onto the course notebooks, derived from their structure.

One source of truth: the notebooks already mark each exercise with ``### BEGIN SOLUTION`` /
``### END SOLUTION`` inside a function and grade it with a check cell ``check_<x>(fn)``. This
tool turns that into nbgrader's metadata (schema 3), so ``nbgrader generate_assignment`` and
``nbgrader autograde`` work on ``notebooks/`` unchanged:

- a code cell with a solution region is a **solution cell**, ``grade_id`` = the function's name;
- a later code cell (before the next solution) that calls ``check_*(`` on that function is an
  **autograded test cell**, locked, ``grade_id`` = ``test_<function>`` (``_2``, ... for more),
  worth ``metadata["lmcore"]["points"][function]`` points (default 1);
- every other cell is **read-only** (locked), ``grade_id`` = ``cell-<cell id>``.

A cell holding both a solution and its check call is split in two (the check, with the outputs,
goes to a new cell ``<id>-check``), because nbgrader grades a test cell only apart from the
answer. Only the ``nbgrader`` key is written (no ``editable: false``: learners who open the
source notebooks can still edit them); ``nbgrader generate_assignment`` locks the released
cells. Re-running changes nothing (idempotent). Usage:
``python -m lmcore.course.build.nbgrader_meta notebooks/*.ipynb`` (``--check``: report, write nothing).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

__all__ = ["SCHEMA_VERSION", "DEFAULT_POINTS", "exercises", "stamp_notebook", "stamp_file", "graded_cells"]

SCHEMA_VERSION = 3
DEFAULT_POINTS = 1
_MARKER_RE = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")
_DEF_RE = re.compile(r"^(\s*)def\s+([A-Za-z_]\w*)\s*\(")
_CHECK_RE = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*(check_\w+)\s*\(")


def _solution_function(source: str, where: str) -> str | None:
    """The name of the function whose body holds the cell's solution region, or None."""
    lines = source.splitlines()
    for n, line in enumerate(lines):
        if "BEGIN SOLUTION" in line or "END SOLUTION" in line:
            if not _MARKER_RE.match(line):
                raise ValueError(
                    f"{where}, line {n + 1}: {line.strip()!r} mentions a solution "
                    "marker but is not one (nbgrader would cut it anyway)"
                )
    begins = [n for n, line in enumerate(lines) if _MARKER_RE.match(line) and "BEGIN" in line]
    if not begins:
        return None
    indent = len(lines[begins[0]]) - len(lines[begins[0]].lstrip())
    for line in reversed(lines[: begins[0]]):
        m = _DEF_RE.match(line)
        if m and len(m.group(1)) < indent:
            return m.group(2)
    raise ValueError(f"{where}: the solution region is not inside a function")


def _split_solution_and_check(cell) -> tuple | None:
    """(solution part, check part) of a cell that also calls a check after the function."""
    lines = cell.source.splitlines()
    end = max(n for n, line in enumerate(lines) if _MARKER_RE.match(line) and "END" in line)
    for n in range(end + 1, len(lines)):
        if lines[n].strip() and not lines[n][0].isspace():
            rest = "\n".join(lines[n:])
            if _CHECK_RE.search(rest):
                return "\n".join(lines[:n]).rstrip(), rest
            return None
    return None


def _split_combined_cells(nb) -> bool:
    changed, cells = False, []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and _solution_function(cell.source, f"cell {i}"):
            parts = _split_solution_and_check(cell)
            if parts:
                check = nbformat.v4.new_code_cell(parts[1])
                check.id = f"{cell.get('id', i)}-check"[:64]
                check.outputs, check.execution_count = cell.outputs, cell.execution_count
                check.metadata = {k: v for k, v in cell.metadata.items() if k != "nbgrader"}
                cell.source, cell.outputs = parts[0], []  # both keep the execution count
                cells += [cell, check]
                changed = True
                continue
        cells.append(cell)
    nb.cells = cells
    return changed


def exercises(nb) -> list[dict]:
    """One dict per exercise: ``function``, ``solution`` (cell index), ``tests`` (cell indices)."""
    found, current = [], None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        fn = _solution_function(cell.source, f"cell {i}")
        if fn:
            current = {"function": fn, "solution": i, "tests": []}
            found.append(current)
        elif current and any(
            re.search(rf"\b{re.escape(current['function'])}\b", cell.source[m.end() :])
            for m in _CHECK_RE.finditer(cell.source)
        ):
            current["tests"].append(i)
    names = [e["function"] for e in found]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"two exercises define the same function: {dupes}")
    return found


def _meta(grade_id: str, *, solution=False, grade=False, locked=True, points=None) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": SCHEMA_VERSION,
        "solution": solution,
    }
    if points is not None:
        meta["points"] = points
    return meta


def stamp_notebook(nb, where: str = "notebook") -> bool:
    """Write nbgrader metadata into every cell of ``nb`` (in place); True if anything changed."""
    changed = _split_combined_cells(nb)
    points = nb.metadata.get("lmcore", {}).get("points", {})
    wanted = {}
    for ex in exercises(nb):
        fn = ex["function"]
        if not ex["tests"]:
            raise ValueError(f"{where}: exercise {fn!r} has no check cell calling check_*({fn})")
        wanted[ex["solution"]] = _meta(fn, solution=True, locked=False)
        for k, i in enumerate(ex["tests"]):
            wanted[i] = _meta(
                f"test_{fn}" + (f"_{k + 1}" if k else ""), grade=True, points=points.get(fn, DEFAULT_POINTS)
            )
    for i, cell in enumerate(nb.cells):
        if "id" not in cell:
            raise ValueError(f"{where}, cell {i}: no cell id (nbformat >= 4.5 needed)")
        meta = wanted.get(i, _meta(f"cell-{cell.id}"))
        if cell.metadata.get("nbgrader") != meta:
            cell.metadata["nbgrader"] = meta
            changed = True
    return changed


def graded_cells(nb) -> list[dict]:
    """The nbgrader metadata of ``nb``'s solution and test cells, in order (for tests, reports)."""
    return [
        dict(c.metadata["nbgrader"], cell_type=c.cell_type)
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution") or c.metadata.get("nbgrader", {}).get("grade")
    ]


def stamp_file(path, *, write: bool = True) -> bool:
    """Stamp one notebook file; writes only when something changed. True if it changed."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    changed = stamp_notebook(nb, where=path.name)
    if changed and write:
        nbformat.write(nb, path)
    return changed


if __name__ == "__main__":
    args = sys.argv[1:]
    check_only = "--check" in args
    paths = [Path(a) for a in args if a != "--check"]
    if not paths:
        sys.exit("usage: python -m lmcore.course.build.nbgrader_meta [--check] notebooks/*.ipynb")
    stale = [p for p in paths if stamp_file(p, write=not check_only)]
    for p in paths:
        n = len(graded_cells(nbformat.read(p, as_version=4))) if not check_only else None
        print(
            f"{p}: {'needs stamping' if check_only and p in stale else 'stamped' if p in stale else 'up to date'}"
            + (f" ({n} solution/test cells)" if n is not None else "")
        )
    sys.exit(1 if check_only and stale else 0)
