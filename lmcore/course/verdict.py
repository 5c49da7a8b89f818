"""The printing policy's one helper: a measurement is shown as a verdict that holds on any machine.

A number that a training run or a long float reduction produces changes in its last digits with
the CPU's vector kernels and with the device, and rounding does not fix that (a value near a
rounding boundary flips). So a notebook never prints such a number where nbval compares it.
It prints a *verdict* instead: the claim, the tolerance or range it is checked against, and
``yes``/``NO`` (or, for an intended failure, "..., as expected"). The raw value may be shown next to it in a cell whose output nbval ignores.

    >>> in_range("final val loss (nats/char)", 1.43, 1.2, 1.6)
    final val loss (nats/char) in [1.2, 1.6]: yes
    True
    >>> near("first loss", 4.6301, math.log(103), 0.05, target_text="ln 103 = 4.635")
    first loss within 0.05 of ln 103 = 4.635: yes
    True

Where the point of an experiment is that something *fails* (the per-micro-batch mean breaks
equivalence), pass ``expect=False``: the line states the failure and says it was expected, and
the verdict is true when it failed::

    >>> below("per-micro-batch mean: max |Δ grad| vs the full batch", 0.03, 1e-10, expect=False)
    per-micro-batch mean: max |Δ grad| vs the full batch not below 1e-10, as expected
    True

Exact values (counts, values computed from fixed inputs without training, worked examples)
are printed as they are; they need no verdict.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

__all__ = ["in_range", "near", "holds", "below", "above", "YES", "NO", "fmt"]

YES, NO = "yes", "NO"


def _number(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, Real):
        try:  # a 0-d tensor or NumPy scalar
            x = x.item()
        except Exception:  # noqa: BLE001 - reported below
            raise TypeError(f"{name} must be a real number; got {type(x).__name__} {x!r}") from None
        if isinstance(x, bool) or not isinstance(x, Real):
            raise TypeError(f"{name} must be a real number; got {type(x).__name__} {x!r}")
    return float(x)


def _fmt(x: float) -> str:
    return f"{x:g}"


def _say(what: str, relation: str, ok: bool, quiet: bool, expect: bool = True) -> bool:
    """Print the verdict and return whether the outcome is the expected one.

    ``expect=True``: "<what> <relation>: yes" or ": NO". ``expect=False`` (a failure is the point):
    "<what> not <relation>, as expected", or "<what> <relation>: yes, where a failure was expected: NO".
    """
    if not isinstance(expect, bool):
        raise TypeError(f"expect must be True or False; got {expect!r}")
    sep = " " if relation else ""
    if expect:
        text = f"{what}{sep}{relation}: {YES if ok else NO}"
    elif not ok:
        text = f"{what}{sep}not {relation}, as expected" if relation else f"{what}: no, as expected"
    else:
        text = f"{what}{sep}{relation}: yes, where a failure was expected: {NO}"
    if not quiet:
        print(text)
    return ok == expect


def in_range(what: str, value, lo, hi, *, unit: str = "", quiet: bool = False, expect: bool = True) -> bool:
    """Print ``"<what> in [lo, hi]<unit>: yes"`` (or ``NO``) and return whether it holds.

    A NaN or infinite ``value`` is never in range.
    """
    v, a, b = _number("value", value), _number("lo", lo), _number("hi", hi)
    if not a <= b:
        raise ValueError(f"lo must be <= hi; got lo={a}, hi={b}")
    ok = math.isfinite(v) and a <= v <= b
    return _say(what, f"in [{_fmt(a)}, {_fmt(b)}]{unit}", ok, quiet, expect)


def near(
    what: str,
    value,
    target,
    tol,
    *,
    target_text: str | None = None,
    unit: str = "",
    quiet: bool = False,
    expect: bool = True,
) -> bool:
    """Print ``"<what> within <tol><unit> of <target>: yes"`` (or ``NO``)."""
    v, t, e = _number("value", value), _number("target", target), _number("tol", tol)
    if not (math.isfinite(e) and e >= 0):
        raise ValueError(f"tol must be a finite number >= 0; got {e}")
    ok = math.isfinite(v) and abs(v - t) <= e
    return _say(what, f"within {_fmt(e)}{unit} of {target_text or _fmt(t)}", ok, quiet, expect)


def below(
    what: str,
    value,
    bound,
    *,
    bound_text: str | None = None,
    unit: str = "",
    quiet: bool = False,
    expect: bool = True,
) -> bool:
    """Print ``"<what> below <bound>: yes"``: a strict upper bound, NaN never passes."""
    v, b = _number("value", value), _number("bound", bound)
    ok = not math.isnan(v) and v < b
    return _say(what, f"below {bound_text or _fmt(b)}{unit}", ok, quiet, expect)


def above(
    what: str,
    value,
    bound,
    *,
    bound_text: str | None = None,
    unit: str = "",
    quiet: bool = False,
    expect: bool = True,
) -> bool:
    """Print ``"<what> above <bound>: yes"``: a strict lower bound, NaN never passes."""
    v, b = _number("value", value), _number("bound", bound)
    ok = not math.isnan(v) and v > b
    return _say(what, f"above {bound_text or _fmt(b)}{unit}", ok, quiet, expect)


def holds(what: str, condition, *, quiet: bool = False, expect: bool = True) -> bool:
    """Print ``"<what>: yes"`` for a claim already decided (``condition`` must be a bool);
    with ``expect=False``, ``"<what>: no, as expected"`` when it does not hold."""
    if hasattr(condition, "item") and not isinstance(condition, bool):
        condition = condition.item()
    if not isinstance(condition, bool):
        raise TypeError(f"condition must be a bool; got {type(condition).__name__} {condition!r}")
    return _say(what, "", condition, quiet, expect)


def fmt(values, nd: int = 3) -> str:
    """``[0.665, 0.245, 0.090]``: exact values (from fixed inputs) printed with ``nd`` decimals,
    ``-0.000`` as ``0.000``. Measurements go through the verdicts above instead."""
    text = [f"{float(v):.{nd}f}" for v in np.ravel(values)]
    return "[" + ", ".join(t[1:] if t.startswith("-") and float(t) == 0 else t for t in text) + "]"
