"""Hints and reference solutions on request, after trying: ``show_solution("my_ce_grad")``.

The first call for an exercise (named by the function the learner writes) prints its hint: the
``hint=`` text of the check that grades it. The next call prints the reference solution, the
function's cell from the instructor edition (``notebooks/`` of the repository lmcore is installed
from, or ``$LMCORE_NOTEBOOKS``). The learner edition names the call above each exercise's stub.
While nbgrader's autograder runs a notebook, the call only prints that it is off, so it can
never earn points.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
from pathlib import Path

import nbformat

from .autograding import grading

__all__ = ["OFF_WHILE_GRADING", "instructor_notebooks", "find_exercise", "hints_of", "show_solution"]

OFF_WHILE_GRADING = "show_solution is off while grading: nothing shown (the grader records this line)."
_COURSE = Path(__file__).resolve().parent
_ASKED: dict[str, int] = {}
_CHECK_CALL = re.compile(r"\b(check_\w+)\s*\(")


def instructor_notebooks() -> Path:
    """The folder of the instructor edition: ``$LMCORE_NOTEBOOKS``, else the repository's ``notebooks/``."""
    folder = Path(os.environ.get("LMCORE_NOTEBOOKS") or _COURSE.parents[1] / "notebooks")
    if not any(folder.glob("*.ipynb")):
        raise FileNotFoundError(
            f"the instructor edition is not at {folder}: install lmcore from a clone of the repository "
            "(pip install -e .) or set LMCORE_NOTEBOOKS to its notebooks/ folder"
        )
    return folder


def find_exercise(name: str) -> dict:
    """``{"notebook", "solution" (the cell's source), "checks" (check_* names)}`` of the exercise
    whose function is ``name``; ValueError naming the closest exercises when there is none."""
    from .build.nbgrader_meta import exercises

    known = []
    for path in sorted(instructor_notebooks().glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for ex in exercises(nb):
            known.append(ex["function"])
            if ex["function"] == name:
                calls = [c for i in ex["tests"] for c in _CHECK_CALL.findall(nb.cells[i].source)]
                return {"notebook": path.name, "solution": nb.cells[ex["solution"]].source, "checks": calls}
    close = difflib.get_close_matches(name, known, n=3) or known[:5]
    raise ValueError(f"name: no exercise writes a function {name!r}; did you mean one of {close}?")


def hints_of(check_name: str) -> list[str]:
    """The ``hint=`` texts (strings, or (nudge, full) pairs) inside ``def check_name`` in the course's modules."""
    found = []
    for path in sorted(_COURSE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if f"def {check_name}(" not in text:
            continue
        for fn in ast.walk(ast.parse(text)):
            if isinstance(fn, ast.FunctionDef) and fn.name == check_name:
                found += [text for node in _hint_nodes(fn) for text in _literal_hints(node)]
    return found


def _hint_nodes(fn: ast.FunctionDef) -> list:
    """The values given as ``hint=`` in ``fn``'s calls, and those assigned to a local ``hint``."""
    nodes = [
        kw.value
        for node in ast.walk(fn)
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "hint" and not isinstance(kw.value, ast.Name)
    ]
    return nodes + [
        node.value
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "hint" for t in node.targets)
    ]


def _literal_hints(node) -> list[str]:
    """A ``hint=`` written as a string, or as a (nudge, full) pair of strings; [] for anything else."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    return []


def show_solution(name: str) -> None:
    """Print the hint for exercise ``name`` (its function's name); called again, the reference solution."""
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"name must be the exercise's function name as a string, got {name!r}")
    if grading():
        print(OFF_WHILE_GRADING)
        return
    ex = find_exercise(name)
    hints = [h for c in ex["checks"] for h in hints_of(c)]
    _ASKED[name] = _ASKED.get(name, 0) + 1
    print(
        f"Hint for {name} ({ex['notebook']}): " + (" / ".join(hints) or "none; re-read the exercise's text.")
    )
    if _ASKED[name] == 1:
        print(f'Try once more with it. Run show_solution("{name}") again for the reference solution.')
        return
    print(f"Reference solution (from the instructor edition, {ex['notebook']}):\n")
    print(
        "\n".join(
            line for line in ex["solution"].splitlines() if "### " not in line or "SOLUTION" not in line
        )
    )
