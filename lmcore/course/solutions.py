"""Hints and reference solutions on request, after trying: ``show_solution("my_ce_grad")``.

Each call for an exercise (named by the function the learner writes) goes one step further, and
says how many steps remain: first the nudge (the first half of the ``hint=`` pair of the check
that grades it: what property to look at, as a question), then the fuller hint (its second
half), then the reference solution, the function's cell from the instructor edition
(``notebooks/`` of the repository lmcore is installed from, or ``$LMCORE_NOTEBOOKS``). The
learner edition names the call above each exercise's stub. While nbgrader's autograder runs a
notebook, the call only prints that it is off, so it can never earn points.

In the graded-class edition (``make student SOLUTIONS=0`` writes ``.lmcore/edition.json`` with
``{"solutions": false}`` beside its notebooks; the nearest such file in the current folder or a
folder above it decides, and a kernel runs in its notebook's folder), or with
``LMCORE_NO_SOLUTIONS=1``, the help stops after the fuller hint: a further call says the reference
solutions are off in this edition and never prints a line of one.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
from pathlib import Path

import nbformat

from .autograding import grading
from .build.paths import course_root

__all__ = [
    "OFF_WHILE_GRADING",
    "OFF_IN_THIS_EDITION",
    "EDITION",
    "NO_SOLUTIONS_ENV",
    "solutions_off",
    "instructor_notebooks",
    "find_exercise",
    "exercises_by_check",
    "hints_of",
    "hint_stages",
    "show_solution",
]

OFF_WHILE_GRADING = "show_solution is off while grading: nothing shown (the grader records this line)."
OFF_IN_THIS_EDITION = (
    "The reference solutions are off in this edition (a graded class): the nudge and the fuller "
    "hint are all the help it gives. Reread them, then the check's message when you run it."
)
EDITION = ".lmcore/edition.json"  # {"solutions": false}: the graded-class edition
NO_SOLUTIONS_ENV = "LMCORE_NO_SOLUTIONS"
_COURSE = Path(__file__).resolve().parent
_ASKED: dict[str, int] = {}
_CHECK_CALL = re.compile(r"\b(check_\w+)\s*\(")


def instructor_notebooks() -> Path:
    """The folder of the instructor edition: ``$LMCORE_NOTEBOOKS``, else the course's ``notebooks/``
    (the repository's in a clone, the installed copy from a wheel: :mod:`lmcore.course.build.paths`)."""
    folder = Path(os.environ.get("LMCORE_NOTEBOOKS") or course_root() / "notebooks")
    if not any(folder.glob("*.ipynb")):
        raise FileNotFoundError(
            f"the instructor edition is not at {folder}: install lmcore from a clone of the repository "
            "(pip install -e .) or set LMCORE_NOTEBOOKS to its notebooks/ folder"
        )
    return folder


def solutions_off(here=None, env=None) -> bool:
    """Whether the reference solutions are off: ``$LMCORE_NO_SOLUTIONS`` set (to anything but
    ``""``, ``0``, ``false`` or ``no``), or the nearest ``.lmcore/edition.json`` in ``here`` (the
    current folder) or a folder above it says ``"solutions": false``. A marker that cannot be
    read counts as off: a graded class fails closed."""
    env = os.environ if env is None else env
    if env.get(NO_SOLUTIONS_ENV, "").strip().lower() not in ("", "0", "false", "no"):
        return True
    here = Path.cwd() if here is None else Path(here)
    for folder in (here.resolve(), *here.resolve().parents):
        marker = folder / EDITION
        if marker.is_file():
            try:
                data = json.loads(marker.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return True
            return not (isinstance(data, dict) and data.get("solutions") is True)
    return False


def _course_exercises():
    """(notebook path, notebook, exercise) for every exercise of the instructor edition, in order."""
    from .build.nbgrader_meta import exercises

    for path in sorted(instructor_notebooks().glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for ex in exercises(nb):
            yield path, nb, ex


def exercise_names() -> list[str]:
    """The function names of every exercise, the names ``show_solution`` takes, in course order."""
    return [ex["function"] for _, _, ex in _course_exercises()]


def find_exercise(name: str) -> dict:
    """``{"notebook", "solution" (the cell's source), "checks" (check_* names)}`` of the exercise
    whose function is ``name``; ValueError naming the closest exercises when there is none."""
    known = []
    for path, nb, ex in _course_exercises():
        known.append(ex["function"])
        if ex["function"] == name:
            calls = [c for i in ex["tests"] for c in _CHECK_CALL.findall(nb.cells[i].source)]
            return {"notebook": path.name, "solution": nb.cells[ex["solution"]].source, "checks": calls}
    close = difflib.get_close_matches(name, known, n=3) or known[:5]
    raise ValueError(f"name: no exercise writes a function {name!r}; did you mean one of {close}?")


def exercises_by_check() -> dict[str, str]:
    """``{check call: exercise function}`` over the course: ``"check_top_p"`` gives ``"top_p_filter"``,
    the function of the exercise whose check cell calls it."""
    return {
        call: ex["function"]
        for _, nb, ex in _course_exercises()
        for i in ex["tests"]
        for call in _CHECK_CALL.findall(nb.cells[i].source)
    }


def hints_of(check_name: str) -> list[str]:
    """The ``hint=`` texts (strings, or (nudge, full) pairs) inside ``def check_name`` in the course's modules."""
    return [
        text for value in _hint_values(check_name) for text in ([value] if isinstance(value, str) else value)
    ]


def hint_stages(check_name: str) -> tuple[list[str], list[str]]:
    """``(nudges, fuller hints)`` of ``check_name``: the halves of its (nudge, full) hint pairs; a
    hint given as one string counts as a fuller hint (it has no nudge)."""
    nudges, fulls = [], []
    for value in _hint_values(check_name):
        if isinstance(value, str):
            fulls.append(value)
        else:
            nudges.append(value[0])
            fulls += list(value[1:])
    return nudges, fulls


def _hint_values(check_name: str) -> list:
    """Every literal ``hint=`` value inside ``def check_name``: a string or a tuple of strings."""
    found = []
    for path in sorted(_COURSE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if f"def {check_name}(" not in text:
            continue
        for fn in ast.walk(ast.parse(text)):
            if isinstance(fn, ast.FunctionDef) and fn.name == check_name:
                found += [value for node in _hint_nodes(fn) for value in _literal_hints(node)]
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


def _literal_hints(node) -> list:
    """A ``hint=`` written as a string, or as a (nudge, full) pair of strings; [] for anything else."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return []
    if isinstance(value, str) or (isinstance(value, tuple) and all(isinstance(v, str) for v in value)):
        return [value]
    return []


def _steps(ex: dict) -> list[tuple[str, str]]:
    """(what, text) for each step of an exercise's help: its nudges, its fuller hints, its solution."""
    nudges, fulls = [], []
    for check in ex["checks"]:
        n, f = hint_stages(check)
        nudges += [h for h in n if h not in nudges]
        fulls += [h for h in f if h not in fulls]
    solution = "\n".join(
        line for line in ex["solution"].splitlines() if "### " not in line or "SOLUTION" not in line
    )
    steps = [("a nudge", " / ".join(nudges)), ("the fuller hint", " / ".join(fulls))]
    return [(what, text) for what, text in steps if text] + [
        (f"the reference solution (from the instructor edition, {ex['notebook']})", solution)
    ]


def show_solution(name: str) -> None:
    """One more step of help for exercise ``name`` (its function's name) on each call: a nudge,
    then the fuller hint, then the reference solution; each says how many steps remain. Where
    the solutions are off (:func:`solutions_off`), the hints only, then :data:`OFF_IN_THIS_EDITION`."""
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"name must be the exercise's function name as a string, got {name!r}")
    if grading():
        print(OFF_WHILE_GRADING)
        return
    ex = find_exercise(name)
    off = solutions_off()
    steps = _steps(ex)[:-1] if off else _steps(ex)  # off: the solution is never even in reach
    _ASKED[name] = _ASKED.get(name, 0) + 1
    if off and _ASKED[name] > len(steps):
        print(f"{name} ({ex['notebook']}): {OFF_IN_THIS_EDITION}")
        return
    k = min(_ASKED[name], len(steps))
    what, text = steps[k - 1]
    sep = ":\n\n" if k == len(steps) and not off else ": "
    print(f"{name} ({ex['notebook']}), step {k} of {len(steps)}, {what}{sep}{text}")
    if k < len(steps):
        left = len(steps) - k
        print(
            f"Try once more with it. {left} more step{'s' if left > 1 else ''}: "
            f'show_solution("{name}") again gives {steps[k][0].split(" (")[0]}.'
        )
    elif off:
        print("That was the last hint: the reference solutions are off in this edition.")
