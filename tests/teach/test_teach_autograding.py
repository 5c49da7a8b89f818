"""Under nbgrader (NBGRADER_EXECUTION set) checks raise instead of returning False; otherwise nothing changes."""

import ast
import math

import pytest

import lmcore.course.start.lesson as start
from lmcore.course import autograding
from lmcore.course.autograding import NotPassed, graded_call, when_grading


@pytest.fixture
def fresh_registry(monkeypatch):
    monkeypatch.setattr(autograding, "_ORIGINALS", {})
    monkeypatch.setattr(autograding, "_ATTRS", {})


def _no(*args):
    return False


def test_outside_nbgrader_checks_are_untouched(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert when_grading(_no) is _no and not autograding.grading()


@pytest.mark.parametrize("mode", ["autograde", "validate"])
def test_under_nbgrader_a_failed_check_raises(monkeypatch, mode):
    monkeypatch.setenv("NBGRADER_EXECUTION", mode)
    with pytest.raises(NotPassed, match="my check: not passed"):
        when_grading(_no)("my check")
    assert when_grading(lambda *a: True)("ok") is True
    assert issubclass(NotPassed, AssertionError)


def _run(source, namespace):
    tree = autograding._GradeCheckCalls().visit(ast.parse(source))
    exec(compile(tree, "<cell>", "exec"), namespace)


def test_check_calls_use_lmcores_checker_and_raise_when_it_fails(fresh_registry, capsys):
    fake = lambda fn: True  # noqa: E731 - what a learner might define to fake a pass
    with pytest.raises(NotPassed, match="check_surprise"):
        _run("check_surprise(wrong)", {"check_surprise": fake, "wrong": lambda p: 0.0})
    assert "✗ fail surprise" in capsys.readouterr().out
    namespace = {"check_surprise": fake, "right": lambda p: -math.log(p)}
    _run("check_surprise(right)", namespace)
    assert "✓ pass surprise" in capsys.readouterr().out


def test_a_monkeypatched_checker_is_put_back(fresh_registry, monkeypatch, capsys):
    genuine = start.check_surprise
    autograding._record_and_restore()
    monkeypatch.setattr(start, "check_surprise", lambda fn: True)
    with pytest.raises(NotPassed):
        _run("import lmcore.course.start.lesson as s\ns.check_surprise(lambda p: 0.0)", {})
    assert start.check_surprise is genuine


def test_other_calls_and_values_pass_through(fresh_registry):
    namespace = {"check_thing": lambda: {"a": 1}, "f": lambda: False}
    _run("out = [f()]\ncheck_thing()", namespace)
    assert graded_call("check_thing", namespace["check_thing"]) == {"a": 1}
    assert graded_call("check_ok", lambda: True) is None
    with pytest.raises(NotPassed):
        graded_call("check_no", lambda: False)
