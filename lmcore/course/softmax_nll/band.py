"""Notebook 01's Exercise 3: the band the double-softmax bug traps the loss in.

``F.cross_entropy(softmax(z), y)`` is ``logsumexp(p) - p_y`` with every ``p_v`` in [0, 1] and
``sum p = 1``. It is smallest as ``p_y -> 1`` (the others -> 0): ``ln(e + V - 1) - 1 =
ln(1 + (V - 1) / e)``; and largest as another token takes all the mass: ``ln(e + V - 1)``. Both ends
are approached, never reached (a softmax is never exactly one-hot). The check tries vocabularies
from 2 to a million and, on a wrong band, shows a buggy loss outside it or asks how close the loss
can come to an end it names.
"""

from __future__ import annotations

import math

import numpy as np

from ..._validate import require_int_scalar
from ..checks import Case, apart, check, real_pair
from ..checks.guard import available
from .lesson import double_softmax

__all__ = ["double_softmax_band_reference", "check_double_softmax_band"]

# the vocabularies the check tries: tiny ones, where V and V - 1 differ most, to GPT-2's and beyond
_VOCABS = (3, 2, 5, 10, 100, 1_000, 50_257, 1_000_000)


def _tol(V: int) -> float:
    """How far an end may be off: 1e-6, plus what float32 loses summing V exponentials (the bug
    evaluated in float32 at V = 1,000,000 is off by about 4e-4)."""
    return 1e-6 + 2e-9 * V


def double_softmax_band_reference(V: int) -> tuple[float, float]:
    """(low, high): the infimum and the supremum of ``F.cross_entropy(softmax(z), y)`` over every
    logits ``z`` (V,) and target ``y``, in nats."""
    V = require_int_scalar("V", V, min=2)
    high = math.log(math.e + V - 1)
    return high - 1.0, high


def _first_past(V: int, end: float, top: int) -> float:
    """The bug's loss (target 0) with one logit raised (``top`` 0: the target's, 1: another's) by
    the smallest gap of a doubling grid that takes it past ``end``: a point outside the learner's
    band, found without naming the extreme."""
    for gap in (0.5 * 2**k for k in range(8)):  # 0.5 to 64
        loss = _buggy_loss(V, top, gap)
        if (loss < end) if top == 0 else (loss > end):
            return loss
    return _buggy_loss(V, top, 64.0)


def _buggy_loss(V: int, top: int, gap: float) -> float:
    """The bug's loss (lesson's ``double_softmax``) for logits ``gap`` at index ``top``, 0 elsewhere, target 0."""
    z = np.zeros(V)
    z[top] = gap
    return double_softmax(z, 0)["loss_wrong"]


def _judge(V: int, got) -> tuple[str, str]:
    """The learner's (low, high) against the band's ends; the question names the property it breaks
    (an end that some loss passes, or an end no loss comes near), never the formula."""
    band = real_pair(got)
    if band is None:
        return f"expected two numbers (low, high), got {got!r}", "what does your function return?"
    low, high = band
    true_low, true_high = double_softmax_band_reference(V)
    if not (math.isfinite(low) and math.isfinite(high)):
        return (
            f"your band at V = {V:,} is ({low}, {high})",
            "the second softmax reads numbers in [0, 1]: can the bug's loss grow without bound?",
        )
    if low > high:
        return (
            f"your low, {low:.4g}, is above your high, {high:.4g}, at V = {V:,}",
            "which end is which?",
        )
    ratio = high / true_high if true_high else 0.0
    if abs(ratio - 1 / math.log(2)) < 1e-4 and abs(low / true_low - ratio) < 1e-4:
        return (
            f"both ends are 1/ln 2 times the band's at V = {V:,}",
            "the loss is in nats: which logarithm did you take?",
        )
    if low > true_low + _tol(V):
        a, b = apart(_first_past(V, low, top=0), low)  # the target's logit raised until it passes
        return (
            f"at V = {V:,} some logits give the bug a loss of {a}, below your low of {b}",
            "so your low is no bound: how small can the bug's loss get at V tokens, and why there?",
        )
    if high < true_high - _tol(V):
        a, b = apart(_first_past(V, high, top=1), high)  # another token's logit raised until it passes
        return (
            f"at V = {V:,} some logits give the bug a loss of {a}, above your high of {b}",
            "so your high is no bound: how large can the bug's loss get at V tokens, and why there?",
        )
    if low < true_low - _tol(V):
        return (
            f"your low at V = {V:,} is {apart(low, true_low)[0]}, and no logits bring the buggy loss that low",
            "your low is below every loss the bug can give: which probabilities does the bug's "
            "cross-entropy read at its smallest, and what is its value there?",
        )
    if high > true_high + _tol(V):
        return (
            f"your high at V = {V:,} is {apart(high, true_high)[0]}, and no logits bring the buggy loss that high",
            "your high is above every loss the bug can give: which probabilities does the bug's "
            "cross-entropy read at its largest, and what is its value there?",
        )
    return "", ""


def _cases() -> list[Case]:
    return [Case((V,), label=f"V = {V:,}") for V in _VOCABS]


def check_double_softmax_band(fn, *, quiet: bool = False):
    """Grade ``fn(V) -> (low, high)``: the ends of the band ``F.cross_entropy(softmax(z), y)`` stays
    in, for vocabularies from 2 to a million, each within 1e-6 (more at large V, where float32 sums lose digits). Evaluating the bug at logits of
    your choosing is allowed; the course's own answer is not."""
    own = "lmcore.course.softmax_nll.band.double_softmax_band_reference"
    return check(
        "the double-softmax band",
        fn,
        None,
        _cases(),
        judge=_judge,
        hint=(
            "The bug's loss is the cross-entropy of probabilities fed in as logits. Try it on logits of "
            "your own at a small V: which logits push it down, which push it up, and does it stop?",
            "the loss is logsumexp(p) - p_y with every p_v in [0, 1]: smallest as p_y -> 1 (the others 0), "
            "ln(e + V - 1) - 1; largest as another token takes all of p, ln(e + V - 1).",
        ),
        quiet=quiet,
        forbid={name: "that is the course's own answer: find the band yourself" for name in available([own])},
    )
