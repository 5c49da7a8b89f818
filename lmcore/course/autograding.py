"""What changes while nbgrader's autograder runs a notebook; outside it, nothing.

nbgrader awards a test cell's points when the cell runs without an error, but a course check
prints "✗ fail" or "… not attempted yet" and returns False, so that *Run All* always reaches the
end. nbgrader sets ``NBGRADER_EXECUTION`` (``autograde``, ``validate``) for the kernel it runs;
only then:

- ``lmcore.course.checks.check`` and ``check_choices`` raise :class:`NotPassed` (an
  ``AssertionError``) instead of returning False, after printing their usual line;
- each top-level ``check_*(...)`` call in a cell raises :class:`NotPassed` if it returns
  False (for checkers that add their own steps), and calls the instructor's checker of that
  name from lmcore (not whatever the notebook's namespace now holds under that name), after
  putting back any lmcore function or class a cell replaced.

That last part defends against a solution cell that redefines or monkeypatches a checker; it
does not defend against code that patches NumPy, PyTorch or Python itself (see the README).
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import sys

__all__ = ["GRADING_MODES", "NotPassed", "grading", "when_grading", "graded_call", "install"]

GRADING_MODES = ("autograde", "validate")
_ORIGINALS: dict[str, list] = {}  # check_* name -> the functions lmcore defines
_ATTRS: dict[tuple[str, str], object] = {}  # (module, name) -> function/class first seen there
_installed = False


class NotPassed(AssertionError):
    """A check did not pass while grading (the test cell loses its points)."""


def grading() -> bool:
    """True inside a kernel run by nbgrader's autograder or validator."""
    return os.environ.get("NBGRADER_EXECUTION") in GRADING_MODES


def when_grading(fn):
    """``fn`` itself when not grading; while grading, ``fn`` raising NotPassed where it returns False."""
    if not grading():
        return fn
    install()

    @functools.wraps(fn)
    def graded(*args, **kwargs):
        ok = fn(*args, **kwargs)
        if not ok:
            raise NotPassed(f"{args[0] if args else fn.__name__}: not passed (see the line above)")
        return ok

    return graded


def _record_and_restore() -> None:
    for modname, mod in list(sys.modules.items()):
        if not (modname == "lmcore" or modname.startswith("lmcore.")) or mod is None:
            continue
        for name, obj in list(vars(mod).items()):
            key = (modname, name)
            if key in _ATTRS:
                if obj is not _ATTRS[key]:
                    setattr(mod, name, _ATTRS[key])
            elif (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(
                obj, "__module__", ""
            ).startswith("lmcore"):
                _ATTRS[key] = obj
                if name.startswith("check_") and obj.__module__ == modname:
                    _ORIGINALS.setdefault(name, []).append(obj)


def graded_call(name: str, fallback, *args, **kwargs):
    """Run the instructor's checker ``name`` (``fallback`` if lmcore has none); raise unless it passes."""
    _record_and_restore()
    genuine = _ORIGINALS.get(name, [])
    ok = (fallback if fallback in genuine or not genuine else genuine[0])(*args, **kwargs)
    verdict = ok is True or ok is False or type(ok).__name__ in ("bool_", "CheckResult")
    if verdict and not ok:
        raise NotPassed(f"{name}: not passed (see the line above)")
    return None if verdict else ok


def _check_name(func) -> str | None:
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name if name.startswith("check_") else None


class _GradeCheckCalls(ast.NodeTransformer):
    """Rewrites a cell's top-level ``check_x(args)`` into ``graded_call("check_x", check_x, args)``."""

    def visit_Module(self, node):
        _record_and_restore()
        for stmt in node.body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Call)
                and _check_name(stmt.value.func)
            ):
                call = stmt.value
                module = ast.Call(
                    ast.Name("__import__", ast.Load()),
                    [ast.Constant(__name__)],
                    [ast.keyword("fromlist", ast.List([ast.Constant("graded_call")], ast.Load()))],
                )
                stmt.value = ast.Call(
                    ast.Attribute(module, "graded_call", ast.Load()),
                    [ast.Constant(_check_name(call.func)), call.func, *call.args],
                    call.keywords,
                )
        return ast.fix_missing_locations(node)


def install() -> None:
    """Register the cell rewriter in the running IPython kernel (once; a no-op outside IPython)."""
    global _installed
    if _installed:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.ast_transformers.append(_GradeCheckCalls())
        _installed = True
