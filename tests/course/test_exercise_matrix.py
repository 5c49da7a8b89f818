"""Every exercise of the course, graded as a learner would meet it: its right answers written
differently pass (one in float32), its plausible wrong answers fail, and its reference and the
shortcut it rules out are refused with a line that says so (issue 38)."""

from __future__ import annotations

import re

import nbformat
import pytest
from _answers import Answers

from lmcore.course.build.nbgrader_meta import exercises
from lmcore.course.solutions import instructor_notebooks

MODULES = ["_answers_00_03", "_answers_04_06", "_answers_07_10"]


def _matrix() -> dict[str, Answers]:
    import importlib

    found: dict[str, Answers] = {}
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
            continue
        assert not set(found) & set(module.ANSWERS), f"{name} repeats an exercise"
        found.update(module.ANSWERS)
    return found


MATRIX = _matrix()


def _course_exercises() -> list[str]:
    names = []
    for path in sorted(instructor_notebooks().glob("*.ipynb")):
        names += [ex["function"] for ex in exercises(nbformat.read(path, as_version=4))]
    return names


# Exercises whose matrix is still to be written (issue 38). The list may only shrink: an exercise
# missing from the matrix and not listed here fails, and so does one listed here that has an entry.
NOT_YET: set[str] = set()  # every exercise has its matrix now


def test_every_exercise_of_the_course_has_its_answers():
    names = _course_exercises()
    missing = [n for n in names if n not in MATRIX and n not in NOT_YET]
    assert not missing, f"exercises without an answer matrix: {missing}"
    done = sorted(NOT_YET & set(MATRIX))
    assert not done, f"these now have a matrix: take them off NOT_YET: {done}"
    assert not NOT_YET - set(names), f"NOT_YET names no exercise: {sorted(NOT_YET - set(names))}"
    assert not set(MATRIX) - set(names), "an entry names no exercise"


def _cases():
    return sorted(MATRIX)


def _graded(check, fn, capsys) -> tuple[bool, str]:
    capsys.readouterr()
    passed = bool(check(fn))
    return passed, capsys.readouterr().out


@pytest.mark.parametrize("name", _cases())
def test_the_matrix_is_complete(name):
    a = MATRIX[name]
    assert len(a.right) >= 3, f"{name}: {len(a.right)} right answers, want three"
    assert len(a.wrong) >= 3, f"{name}: {len(a.wrong)} wrong answers, want three"
    assert len(a.refused) >= 2, f"{name}: want the reference and the ruled-out shortcut"
    assert a.no_float32 or any("float32" in k for k in a.right), f"{name}: no float32 right answer"


@pytest.mark.parametrize("name", _cases())
def test_right_answers_pass(name, capsys):
    for label, fn in MATRIX[name].right.items():
        passed, out = _graded(MATRIX[name].check, fn, capsys)
        assert passed, f"{name}: right answer {label!r} rejected: {out}"
        assert "✓ pass" in out


@pytest.mark.parametrize("name", _cases())
def test_wrong_answers_fail(name, capsys):
    for label, fn in MATRIX[name].wrong.items():
        passed, out = _graded(MATRIX[name].check, fn, capsys)
        assert not passed, f"{name}: wrong answer {label!r} passed: {out}"
        assert "✗" in out, out


@pytest.mark.parametrize("name", _cases())
def test_reference_and_shortcut_are_refused(name, capsys):
    for label, (fn, says) in MATRIX[name].refused.items():
        passed, out = _graded(MATRIX[name].check, fn, capsys)
        assert not passed, f"{name}: {label!r} was not refused: {out}"
        assert says in out, f"{name}: {label!r}: the line does not say {says!r}: {out}"


@pytest.mark.parametrize("name", _cases())
def test_no_failure_line_shows_two_equal_numbers(name, capsys):
    """'expected 7.054, got 7.054': a line that names two numbers shows them different."""
    pair = re.compile(r"expected (-?[\d.e+-]+)\S*,? got (-?[\d.e+-]+)")
    for label, fn in MATRIX[name].wrong.items():
        _, out = _graded(MATRIX[name].check, fn, capsys)
        for want, got in pair.findall(out):
            assert want != got, f"{name}: {label!r}: {out}"


@pytest.mark.parametrize("name", sorted(n for n in MATRIX if MATRIX[n].first_hints))
def test_the_first_hint_points_at_the_mistake_made(name, capsys):
    """A wrong answer's first failure asks about the property it broke, not another mistake's."""
    from lmcore.course.checks import _FAILED

    a = MATRIX[name]
    assert set(a.first_hints) <= set(a.wrong), f"{name}: first_hints names no wrong answer"
    for label, says in a.first_hints.items():
        _FAILED.clear()  # each one as a learner's first failure
        _, out = _graded(a.check, a.wrong[label], capsys)
        assert "Hint: " in out and says in out.split("Hint: ", 1)[1], f"{name}: {label!r}: {out}"
    _FAILED.clear()
