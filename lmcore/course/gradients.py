"""Notebook 02 (gradients): the widget's state, finite differences and the checkers. The figure
and the widget are in :mod:`lmcore.course.gradients_views`.

``gradient_state`` is what the widget shows (the loss along one logit, the current point, its
slope and the gradient); ``gradient_explorer`` only wires controls to it.
"""

from __future__ import annotations

import numpy as np

from .. import handcalc
from .._validate import require_int_scalar
from .checks import FAIL, Case, check, random_logit_cases

__all__ = [
    "numerical_grad",
    "gradient_state",
    "check_ce_grad",
    "check_finite_difference",
    "check_descent_step",
]


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


def check_ce_grad(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(z, y) -> d nll / d z`` against ``lmcore.handcalc.ce_grad``."""
    return check(
        "ce_grad",
        fn,
        handcalc.ce_grad,
        _logit_cases(seed=2),
        hint="the gradient is softmax(z) (stable: subtract max(z)) minus 1 at index y; "
        "only the target's entry is negative and the entries sum to 0.",
        atol=1e-9,
        rtol=1e-6,
        quiet=quiet,
    )


# name -> (function of the logits, its exact gradient)
_FUNCTIONS = {
    "nll(z, y=1)": (lambda z: handcalc.nll(z, 1), lambda z: handcalc.ce_grad(z, 1)),
    "logsumexp(z)": (handcalc.logsumexp, handcalc.softmax),
    "sum(sin(z))": (lambda z: float(np.sin(z).sum()), np.cos),
    "500 * sum((z - 1)**2)": (lambda z: float(500.0 * ((z - 1.0) ** 2).sum()), lambda z: 1000.0 * (z - 1.0)),
}


def check_finite_difference(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(f, z) -> gradient estimate`` against exact gradients of four functions.

    Central differences with eps ~ 1e-5 pass; forward differences or a large eps do not."""
    rng = np.random.default_rng(3)
    cases = [
        Case(("nll(z, y=1)", np.array([2.0, 1.0, 0.0])), label="f = nll(z, y=1), z=[2, 1, 0]"),
        Case(("nll(z, y=1)", np.array([1000.0, 999.0, 998.0])), label="f = nll(z, y=1), z=[1000, 999, 998]"),
    ]
    for name in _FUNCTIONS:
        for _ in range(2):
            z = 1.0 + rng.normal(0.0, 0.02 if name.startswith("500") else 2.0, size=int(rng.integers(2, 6)))
            cases.append(Case((name, z), label=f"f = {name}, z={np.round(z, 3).tolist()}"))
    name, atol, rtol = "finite-difference gradient", 1e-6, 1e-6
    hint = (
        "use central differences (f(z + eps e_i) - f(z - eps e_i)) / (2 eps) with eps around "
        "1e-5, on a copy of z for each i; a forward difference or a large eps is off by about "
        "eps * curvature, and an eps below ~1e-8 drowns in rounding error."
    )
    learner = lambda key, z: fn(_FUNCTIONS[key][0], z)  # noqa: E731
    exact = lambda key, z: _FUNCTIONS[key][1](z)  # noqa: E731
    if not quiet:  # an estimate that is close but not close enough: say by how much
        for case in cases:
            try:
                got = np.asarray(learner(case.args[0], case.args[1].copy()), dtype=np.float64)
            except Exception:  # noqa: BLE001 - check() below reports stubs and errors
                break
            want = exact(*case.args)
            if (
                got.shape == want.shape
                and np.all(np.isfinite(got))
                and not np.allclose(got, want, atol=atol, rtol=rtol)
            ):
                print(
                    f"{FAIL} {name}: on input {case.describe()}: your estimate is off by up to "
                    f"{np.abs(got - want).max():.1e} (allowed about {atol:.0e}). Hint: {hint}"
                )
                return False
    return check(name, learner, exact, cases, hint=hint, atol=atol, rtol=rtol, quiet=quiet)


def _descent_reference(z, y, lr):
    return np.asarray(z, dtype=np.float64) - lr * handcalc.ce_grad(z, y)


def check_descent_step(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(z, y, lr) -> new logits`` (one gradient-descent step on the NLL)."""
    cases = [
        Case((c.args[0], c.args[1], lr), label=f"{c.describe()}, lr={lr}")
        for c, lr in zip(_logit_cases(seed=4), [1.0, 0.5, 0.1, 2.0] * 4)
    ]
    return check(
        "descent step",
        fn,
        _descent_reference,
        cases,
        hint="new z = z - lr * (softmax(z) - onehot(y)): step against the gradient, and "
        "return a new array instead of changing z in place.",
        atol=1e-9,
        rtol=1e-7,
        quiet=quiet,
    )
