"""Notebook 02 (gradients): the widget's state, finite differences and the checkers. The figure
and the widget are in :mod:`lmcore.course.gradients.views`.

``gradient_state`` is what the widget shows (the loss along one logit, the current point, its
slope and the gradient); ``gradient_explorer`` only wires controls to it.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ... import handcalc
from ..._validate import require_int_scalar, require_real
from ..checks import Case, check, compare, float32_atol, only_match, random_logit_cases
from ..checks.guard import AUTOGRAD
from ..checks.report import ratio_of

__all__ = [
    "numerical_grad",
    "gradient_state",
    "smoothed_ce_grad_autograd",
    "check_ce_grad",
    "check_finite_difference",
    "check_smoothed_ce_grad",
]


def _by_hand(extra=()) -> dict[str, str]:
    msg = {name: "autograd does the work the exercise asks of you: use the formula" for name in AUTOGRAD}
    return msg | {name: "that is the reference this exercise replaces: write it yourself" for name in extra}


def numerical_grad(f, z, eps: float = 1e-5) -> np.ndarray:
    """Central differences: g_i = (f(z + eps e_i) - f(z - eps e_i)) / (2 eps), for scalar ``f``.

    The error shrinks like eps**2 (a forward difference's only like eps), until rounding, which
    grows like 1/eps, takes over; eps = 1e-5 suits float64 functions of size ~1.
    """
    if not callable(f):
        raise TypeError(f"f must be a function of the logits returning a number; got {f!r:.60}.")
    if not (isinstance(eps, (int, float)) and eps > 0):
        raise ValueError(f"eps must be a positive step size; got {eps!r}.")
    z = np.asarray(z, dtype=np.float64)
    g = np.empty_like(z)
    for i in range(z.size):
        up, down = z.copy(), z.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (float(f(up)) - float(f(down))) / (2 * eps)
    return g


def gradient_state(
    logits=(2.0, 1.0, 0.0),
    target: int = 1,
    index: int = 1,
    value=None,
    lo: float = -10.0,
    hi: float = 10.0,
    n: int = 201,
) -> dict:
    """What the gradient widget shows when logit ``index`` is set to ``value`` (default: as is)
    and the other logits stay put: the loss along that logit over [lo, hi] (``xs``, ``losses``),
    the current ``z``, ``loss`` and ``grad`` = softmax(z) - onehot(target), the ``slope`` of the
    curve at the current point (= grad[index]) and the ``tangent`` line over ``xs``."""
    z = np.array(logits, dtype=np.float64)
    index = require_int_scalar("index", index, min=0, max=z.size - 1, hint="(a logit index)")
    if value is not None:
        z[index] = float(value)
    xs = np.linspace(lo, hi, n)
    moved = np.repeat(z[None], n, axis=0)
    moved[:, index] = xs
    losses = np.array([handcalc.nll(row, target) for row in moved])
    loss, grad = handcalc.nll(z, target), handcalc.ce_grad(z, target)
    slope = float(grad[index])
    return {
        "z": z,
        "index": int(index),
        "target": int(target),
        "xs": xs,
        "losses": losses,
        "loss": loss,
        "grad": grad,
        "slope": slope,
        "tangent": loss + slope * (xs - z[index]),
    }


# ---------------------------------------------------------------- exercise checkers


def _logit_cases(seed: int) -> list[Case]:
    cases = [
        Case((np.array([2.0, 1.0, 0.0]), 1), label="z=[2, 1, 0], y=1"),
        Case((np.array([1000.0, 999.0, 998.0]), 2), label="z=[1000, 999, 998], y=2"),
        Case((np.array([-1000.0, 0.0, 1000.0]), 0), label="z=[-1000, 0, 1000], y=0"),
        Case((np.array([0.0, 8.0, 0.0]), 1), label="z=[0, 8, 0], y=1 (confident, right)"),
        Case((np.array([0.0, 0.0, 0.0, 0.0]), 2), label="z=[0, 0, 0, 0], y=2"),
    ]
    return cases + random_logit_cases(seed)


def _overflow_question(z, g: np.ndarray) -> str:
    return (
        f"on logits as large as {np.abs(z).max():.0f} your gradient holds {g[~np.isfinite(g)][0]}: "
        "what does exp give there, and what did notebook 01 do about it?"
    )


def _explain_smoothed(fn, case, expected, got) -> str:
    """A smoothed gradient that is not finite: the softmax computed without the max trick."""
    g = np.asarray(got, dtype=np.float64)
    if g.shape == np.shape(expected) and not np.isfinite(g).all():
        return _overflow_question(case.args[0], g)
    return ""


def _explain_ce_grad(fn, case, expected, got) -> str:
    """The property of the NLL's gradient that ``got`` breaks on this case, as a question."""
    z, y = case.args
    g = np.asarray(got, dtype=np.float64)
    if g.shape != np.shape(expected):
        return ""
    if not np.isfinite(g).all():
        return _overflow_question(z, g)
    total = float(g.sum())
    if abs(total) > 1e-5:
        return (
            f"your gradient's entries sum to {total:.4g}: adding the same amount to every logit leaves "
            "the loss unchanged, so what must the entries sum to?"
        )
    if not g[y] < 0:
        return (
            f"the target's entry (index {y}) is {g[y]:.4g}: raising the target's logit lowers the "
            "loss, so which sign must its entry have?"
        )
    k = next((k for k in range(len(g)) if k != y and g[k] < 0), None)
    if k is not None:
        return (
            f"entry {k}, not the target, is {g[k]:.4g}: what does raising a wrong token's logit do to "
            "the loss?"
        )
    c = ratio_of(np.asarray(expected, dtype=np.float64), g)
    if c is not None:
        return (
            f"every entry has the right sign and the entries sum to 0, but each is {c:.4g}x its size: "
            "when the model gives the target a probability near 0, how much does raising the target's "
            "logit by a small step lower the loss, per unit of step?"
        )
    return ""


def check_ce_grad(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(z, y) -> d nll / d z`` against ``lmcore.handcalc.ce_grad``."""
    return check(
        "ce_grad",
        fn,
        handcalc.ce_grad,
        _logit_cases(seed=2),
        hint=(
            "Test two properties of your gradient: do its entries sum to 0, and which entry is "
            "negative? What does a small increase of one logit do to the loss?",
            "the gradient is softmax(z) (stable: subtract max(z)) minus 1 at index y; "
            "only the target's entry is negative and the entries sum to 0.",
        ),
        # a float32 answer is right: p_y - 1 is known to float32 spacings of 1 (and of the logits)
        atol=lambda z, y: float32_atol(z),
        rtol=1e-6,
        quiet=quiet,
        forbid=_by_hand(["lmcore.handcalc.ce_grad"])
        | {
            "lmcore.course.gradients.lesson.numerical_grad": "that estimates the gradient numerically: derive it"
        },
        explain=_explain_ce_grad,
        ratio_hints={
            -1.0: "The sign is flipped: raising the target's logit lowers the loss, so what sign must its entry have?"
        },
    )


def _grad_nll(z):
    return handcalc.ce_grad(z, 1)


def _grad_logsumexp(z):
    return handcalc.softmax(z)


def _grad_sum_sin(z):
    return np.cos(z)


def _grad_quadratic(z):
    return 1000.0 * (z - 1.0)


# name -> (function of the logits, its exact gradient, a bound on |d^3 f / dz_i^3|). The exact
# gradients are the check's reference: reading them from this table is refused like any other
# reference call. The third derivative of logsumexp along one coordinate is p (1 - p) (1 - 2 p),
# at most 1 / (6 sqrt 3) < 0.1, and so is nll's (they differ by a linear term).
_FUNCTIONS = {
    "nll(z, y=1)": (lambda z: handcalc.nll(z, 1), _grad_nll, 0.1),
    "logsumexp(z)": (handcalc.logsumexp, _grad_logsumexp, 0.1),
    "sum(sin(z))": (lambda z: float(np.sin(z).sum()), _grad_sum_sin, 1.0),
    "500 * sum((z - 1)**2)": (lambda z: float(500.0 * ((z - 1.0) ** 2).sum()), _grad_quadratic, 0.0),
}
_EXACT_GRADIENTS = [f"lmcore.course.gradients.lesson.{g.__name__}" for _, g, _ in _FUNCTIONS.values()]
_STEPS = (0.1, 0.05, 1e-2, 1e-3, 1e-5)


def _fd_cases() -> list[Case]:
    rng = np.random.default_rng(3)
    cases = [
        Case(("nll(z, y=1)", np.array([2.0, 1.0, 0.0]), 0.1), label="f = nll(z, y=1), z=[2, 1, 0], eps=0.1"),
        Case(
            ("nll(z, y=1)", np.array([1000.0, 999.0, 998.0]), 1e-3),
            label="f = nll(z, y=1), z=[1000, 999, 998], eps=0.001",
        ),
    ]
    for k, name in enumerate(_FUNCTIONS):
        for j in range(2):
            z = 1.0 + rng.normal(0.0, 0.02 if name.startswith("500") else 2.0, size=int(rng.integers(2, 6)))
            eps = _STEPS[(2 * k + j) % len(_STEPS)]
            cases.append(Case((name, z, eps), label=f"f = {name}, z={np.round(z, 3).tolist()}, eps={eps:g}"))
    return cases


def _fd_allowed(key: str, eps: float) -> float:
    """The error a second-order estimate may have at step ``eps``: a central difference's is at
    most eps**2 / 6 times the third derivative; a third of it, plus 1e-6 for rounding."""
    return 1e-6 + _FUNCTIONS[key][2] * eps**2 / 3


def _fd_fault(key: str, z: np.ndarray, eps: float, got) -> tuple[str, str]:
    """``got`` is (the learner's estimate, how far from ``z`` it evaluated f): the estimate must be
    within :func:`_fd_allowed` of the exact gradient, and f must have been evaluated ``eps`` away."""
    estimate, reach = got
    exact = _FUNCTIONS[key][1](z)
    what = compare(exact, estimate, atol=_fd_allowed(key, eps), rtol=1e-6)
    if what:
        return what, _fd_question(key, z, eps, exact, estimate)
    if reach < eps / 2:
        return (
            f"your estimate is accurate, but your function evaluated f no further than {reach:.1g} "
            f"from z when it was given eps = {eps:g}",
            "does it step by the eps it is given?",
        )
    return "", ""


def _quotients(key: str, z: np.ndarray, eps: float) -> dict[str, np.ndarray]:
    """The estimates of the plausible mistakes at step ``eps``, by name."""
    f, n = _FUNCTIONS[key][0], len(z)
    steps = [eps * np.eye(n)[i] for i in range(n)]
    relative = [eps * max(1.0, abs(z[i])) * np.eye(n)[i] for i in range(n)]
    return {
        "one-sided": np.array([(f(z + e) - f(z)) / eps for e in steps]),
        "backward": np.array([(f(z) - f(z - e)) / eps for e in steps]),
        "no half": 2 * numerical_grad(f, z, eps),
        "double step": numerical_grad(f, z, 2 * eps),
        "relative": np.array([(f(z + e) - f(z - e)) / (2 * e.max()) for e in relative]),
        "float32": np.array([_float32_central(f, z, i, eps) for i in range(n)]),
    }


def _float32_central(f, z, i, eps) -> float:
    """A central difference with z kept in float32: at |z_i| = 1000 the step z_i + eps rounds."""
    up, down = z.astype(np.float32), z.astype(np.float32)
    up[i] += np.float32(eps)
    down[i] -= np.float32(eps)
    return float((f(up.astype(np.float64)) - f(down.astype(np.float64))) / (2 * eps))


_FD_QUESTIONS = {
    "one-sided": (
        "your estimate is off by {off:.2g} at eps = {eps:g}, as the one-sided difference is; halve eps "
        "and that error only halves. Which term of the Taylor series of f(z + eps e_i) stays in your "
        "quotient, and how could a second value of f cancel it?"
    ),
    "backward": (
        "your estimate is off by {off:.2g} at eps = {eps:g}, as the one-sided difference "
        "(f(z) - f(z - eps e_i)) / eps is; halve eps and that error only halves. Which term of the "
        "Taylor series of f(z - eps e_i) stays in your quotient, and how could a second value of f "
        "cancel it?"
    ),
    "no half": "twice the expected: over what distance does your difference quotient step?",
    "double step": (
        "your estimate's error falls like eps^2, but it is four times a central difference's at "
        "eps = {eps:g}: how far from z does your function step, and is that the eps it is given?"
    ),
    "float32": (
        "your estimate matches a central difference taken with z in float32: is z_i + eps, in "
        "float32 at z_i = {zmax:g}, still eps away from z_i?"
    ),
    "relative": (
        "your estimate matches steps of eps * max(1, |z_i|), larger than eps where |z_i| > 1: does "
        "your function step by the eps it is given?"
    ),
}


def _fd_question(key, z, eps, exact, estimate) -> str:
    """The mistake a wrong estimate matches, as a question (``""`` unless exactly one matches)."""
    try:
        estimate = np.asarray(estimate, dtype=np.float64)
        off = float(np.abs(estimate - exact).max())
        named = {
            name
            for name, value in _quotients(key, z, eps).items()
            if estimate.shape == value.shape and np.allclose(estimate, value, rtol=1e-4, atol=1e-9)
        }
    except (TypeError, ValueError):
        return ""
    return only_match(_FD_QUESTIONS[name] for name in named).format(
        off=off, eps=eps, zmax=float(np.abs(z).max())
    )


def check_finite_difference(fn, *, quiet: bool = False):
    """Grade ``fn(f, z, eps) -> gradient estimate`` against exact gradients of four functions, at
    steps eps from 0.1 to 1e-5: its error must fall like eps**2 (a central difference's, or a
    better stencil's; a forward difference's falls only like eps), and f must be evaluated eps
    away from z (an estimate that ignores ``eps`` fails)."""

    def run(key, z, eps):
        f, reach = _FUNCTIONS[key][0], [0.0]

        def recorded(x):
            reach[0] = max(reach[0], float(np.abs(np.asarray(x, dtype=np.float64) - z0).max(initial=0.0)))
            return f(x)

        z0 = np.array(z, dtype=np.float64)
        return fn(recorded, z, eps), reach[0]

    return check(
        "finite-difference gradient",
        run,
        None,
        _fd_cases(),
        hint=(
            "how does your estimate's error change when eps is halved: does it halve, or fall to a "
            "quarter? Which term of the Taylor series of f(z + eps e_i) does your quotient keep?",
            "use central differences (f(z + eps e_i) - f(z - eps e_i)) / (2 eps), on a copy of z "
            "for each i: the f''(z) eps^2 / 2 terms of f(z + eps e_i) and f(z - eps e_i) cancel, "
            "and the error is about eps^2 / 6 times the third derivative; a forward difference is "
            "off by about eps / 2 times the curvature.",
        ),
        quiet=quiet,
        forbid=_by_hand(["lmcore.course.gradients.lesson.numerical_grad", *_EXACT_GRADIENTS]),
        judge=_fd_fault,
    )


def smoothed_ce_grad_autograd(z, y: int, eps: float) -> np.ndarray:
    """d/dz of the label-smoothed NLL ``F.cross_entropy(z, y, label_smoothing=eps)`` by autograd
    (float64): the target is the soft distribution (1 - eps) onehot(y) + eps / V."""
    require_real("eps", eps, min=0, max=1)
    handcalc.nll(z, y)  # validates z and y
    zt = torch.tensor(np.asarray(z, dtype=np.float64), requires_grad=True)
    with torch.enable_grad():
        loss = F.cross_entropy(zt[None], torch.tensor([int(y)]), label_smoothing=float(eps))
        (grad,) = torch.autograd.grad(loss, zt)
    return grad.numpy()


def check_smoothed_ce_grad(fn, *, quiet: bool = False):
    """Grade ``fn(z, y, eps) -> d loss / d z`` for the NLL with label smoothing ``eps``, against
    autograd on ``F.cross_entropy(..., label_smoothing=eps)``; autograd itself is rejected."""
    base = _logit_cases(seed=4)
    cases = [Case((np.array([2.0, 1.0, 0.0]), 1, 0.1), label="z=[2, 1, 0], y=1, eps=0.1")]
    cases += [Case((np.array([0.0, 0.0, 0.0, 0.0, 0.0]), 3, 0.5), label="z=[0]*5, y=3, eps=0.5")]
    cases += [Case((np.array([1.0, -1.0]), 0, 1.0), label="z=[1, -1], y=0, eps=1 (the target is uniform)")]
    cases += [
        Case((c.args[0], c.args[1], e), label=f"{c.describe()}, eps={e}")
        for c, e in zip(base, [0.0, 0.2, 0.05, 0.3] * 4)
    ]
    return check(
        "label-smoothing gradient",
        fn,
        smoothed_ce_grad_autograd,
        cases,
        hint=(
            "where should this gradient be zero? Does your smoothed target give every token its "
            "share, the target token included, and do its entries add up to 1?",
            "q = (1 - eps) onehot(y) + eps / V, so the gradient is softmax(z) - q: every token gets "
            "eps / V, the target (1 - eps) on top; V is len(z).",
        ),
        atol=1e-9,
        rtol=1e-6,
        quiet=quiet,
        forbid=_by_hand(
            ["torch.nn.functional.cross_entropy", "lmcore.course.gradients.lesson.smoothed_ce_grad_autograd"]
        ),
        explain=_explain_smoothed,
    )
