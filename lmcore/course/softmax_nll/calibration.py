"""Notebook 01's Exercise 4: temperature scaling, the one-number fit of a model's confidence.

Dividing every logit by one temperature ``T`` never changes which token a row ranks first, only
how sure the model is. The ``T`` that makes a held-out batch's mean NLL smallest is the standard
calibration step ("temperature scaling", Guo et al. 2017). In ``beta = 1 / T`` the loss is convex:

    f(beta)   = mean over scored rows of  logsumexp(beta z) - beta z_y
    f'(beta)  = mean of  E_p[z] - z_y          (p = softmax(beta z))
    f''(beta) = mean of  Var_p(z)  >= 0,

so the best ``T`` is where the model's expected logit, averaged over the rows, equals the target's.
The check grades the loss at the learner's ``T`` against the smallest any ``T`` reaches, and the
loss they report against the batch's loss at their ``T`` (valid rows only, in the denominator too).
"""

from __future__ import annotations

import math

import numpy as np

from ..checks import Case, apart, check, float32_atol, real_pair
from .lesson import _LOSSES, _forbid, mean_nll_reference

__all__ = ["best_temperature", "check_fit_temperature"]

_EXCESS = 1e-6  # nats above the smallest loss: T to about three significant digits


def _scored(Z, y) -> tuple[np.ndarray, np.ndarray]:
    Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y)
    keep = y != -100
    return Z[keep], y[keep]


def _slope(S: np.ndarray, t: np.ndarray, beta: float) -> float:
    """f'(beta): the mean over rows of E_p[z] - z_y, p = softmax(beta z) (rows S, target logits t)."""
    a = beta * S
    p = np.exp(a - a.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return float(((p * S).sum(axis=1) - t).mean())


def best_temperature(Z, y) -> float:
    """The T > 0 that minimises the mean NLL of softmax(Z / T) over the rows whose target ``y`` is
    not -100 (``Z`` (N, V)), by bisection on f'(1/T) = 0 in log(1/T). Raises ``ValueError`` when
    no finite T is best: every scored target is its row's top logit (the loss falls as T -> 0), or
    the targets sit at or below their rows' mean logit (it falls as T grows)."""
    S, y = _scored(Z, y)
    if S.ndim != 2 or not len(S):
        raise ValueError("Z must be (N, V) with at least one row whose target y is not -100.")
    t = S[np.arange(len(S)), y]
    if _slope(S, t, 0.0) >= 0:
        raise ValueError("the loss falls as T grows: no finite T is best for this batch.")
    if float((S.max(axis=1) - t).mean()) <= 0:
        raise ValueError("every scored target is its row's top logit: the loss falls as T -> 0.")
    lo, hi = -60.0, 60.0  # log(beta); the cases' best T lie far inside
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _slope(S, t, math.exp(mid)) < 0 else (lo, mid)
    return 1.0 / math.exp((lo + hi) / 2)


def _cases(seed: int = 11) -> list[Case]:
    """Batches with an interior best T: small logits, logits in the hundreds (T* in the hundreds),
    logits of spread 40, logits around 500 whose best T is below 1 (e^(500 / T) overflows without
    the max trick), and batches whose -100 rows, were they scored, would move T* far."""
    rng = np.random.default_rng(seed)
    a = np.array
    cases = [
        Case(
            (a([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 2.0], [2.0, 0.0, 1.0]]), a([0, 1, 1, 2])),
            label="Z (4, 3) of small logits, y = [0, 1, 1, 2]",
        ),
        Case(
            (
                a([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0], [3.0, 0.0, 0.0], [0.0, 3.0, 0.0]]),
                a([0, 1, 2, -100, 0]),
            ),
            label="Z (5, 3), y = [0, 1, 2, -100, 0] (one row not scored)",
        ),
    ]

    def sampled(N, V, scale, T_true, ignore=0.0, level=0.0):
        while True:
            Z = level + rng.normal(0.0, scale, size=(N, V))
            p = np.exp((Z - Z.max(1, keepdims=True)) / T_true)
            p /= p.sum(1, keepdims=True)
            y = np.array([rng.choice(V, p=row) for row in p])
            y[1:][rng.random(N - 1) < ignore] = -100
            try:
                best_temperature(Z, y)
            except ValueError:
                continue
            return Z, y

    for N, V, scale, T_true, ignore, level, what in (
        (8, 5, 1.0, 0.7, 0.0, 0.0, "logits of spread 1"),
        (10, 6, 300.0, 250.0, 0.3, 0.0, "logits in the hundreds, some rows not scored"),
        (12, 4, 40.0, 0.5, 0.0, 0.0, "logits of spread 40"),
        (6, 9, 2.0, 1.5, 0.5, 0.0, "half the rows not scored"),
        (10, 6, 1.0, 0.4, 0.2, 500.0, "logits around 500, a best T below 1"),
    ):
        Z, y = sampled(N, V, scale, T_true, ignore, level)
        cases.append(Case((Z, y), label=f"Z {Z.shape} of {what}, y = {y.tolist()}"))
    return cases


def _judge(Z, y, got) -> tuple[str, str]:
    """(what failed, the question): T must be within _EXCESS nats of the best, and the loss reported
    must be the batch's loss at that T."""
    fit = real_pair(got)
    if fit is None:
        return f"expected two numbers (T, loss), got {got!r}", "what does your function return?"
    T, loss = fit
    if not (math.isfinite(T) and T > 0):
        return f"your T is {T}", "a temperature divides the logits: which values can it take?"
    best = best_temperature(Z, y)
    f_best, f_T = mean_nll_reference(Z, y, best), mean_nll_reference(Z, y, T)
    if f_T > f_best + _EXCESS:
        if _fits_the_unmasked_batch(Z, y, T):
            return (
                f"the batch's loss at your T = {T:.4g} is {f_T:.6g} nats, more than a better T reaches",
                "your T is the best for this batch with its -100 rows scored too: which rows does the "
                "loss leave out?",
            )
        if abs(T * best - 1) < 1e-3 and abs(best - 1) > 0.05:
            return (
                f"the batch's loss at your T = {T:.4g} is {f_T:.6g} nats, more than a better T reaches",
                "your T is 1 over the best: does the softmax divide the logits by T, or multiply them?",
            )
        a, b = apart(f_T, f_best)
        what = (
            f"the batch's loss at your T = {T:.4g} is {a} nats, {f_T - f_best:.2g} above the lowest a "
            f"better T reaches ({b}; the goal is within {_EXCESS:g})"
        )
        reach = float(np.abs(np.asarray(Z, dtype=np.float64)).max()) / best
        if reach > 700:
            return what, (
                f"Near the best T these logits divided by T "
                f"reach about {reach:,.0f}: is every loss your search compares there a finite number, and "
                "one precise enough to tell apart losses that differ in the sixth decimal (float32 keeps "
                "about 7 significant digits)?"
            )
        return what, (
            "how does your search know it has arrived at the bottom, and how close to it does it get?"
        )
    a, b = apart(f_T, loss)
    if abs(loss - f_T) > float32_atol(np.asarray(Z) / T) + 1e-6 * abs(f_T):
        n_valid, n = int((np.asarray(y) != -100).sum()), len(np.asarray(y))
        if n_valid != n and abs(loss - f_T * n_valid / n) < 1e-6 * (1 + abs(f_T)):
            why = "which count did you divide by, and which rows does it include?"
        elif abs(loss - mean_nll_reference(Z, y, 1.0)) < 1e-6 * (1 + abs(f_T)):
            why = "your loss is the batch's at T = 1: at which temperature does the loss you return belong?"
        else:
            why = "is the loss you return the batch's mean NLL at the T you return?"
        return f"your T is right, and the batch's loss at it is {a} nats; you returned {b}", why
    return "", ""


def _fits_the_unmasked_batch(Z, y, T) -> bool:
    """Whether ``T`` is the best temperature of the batch with its -100 rows scored too, against
    label 0, the row's top token, or index -100 read from the end (NumPy's negative indexing)."""
    Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y)
    ignored = y == -100
    if not ignored.any():
        return False
    for stand_in in (np.zeros_like(y), Z.argmax(1), np.full_like(y, -100 % Z.shape[1])):
        try:
            if abs(T / best_temperature(Z, np.where(ignored, stand_in, y)) - 1) < 1e-3:
                return True
        except ValueError:
            continue
    return False


def check_fit_temperature(fn, *, quiet: bool = False):
    """Grade ``fn(Z (N, V), y (N,)) -> (T, loss)``: T within 1e-6 nats of the best temperature's
    loss, and the batch's mean NLL at T (valid rows only), from NumPy and the learner's own code."""
    own = ["lmcore.course.softmax_nll.calibration.best_temperature"]
    return check(
        "temperature scaling",
        fn,
        None,
        _cases(),
        judge=_judge,
        hint=(
            "Print the batch's loss at a range of T, from 0.01 to 1000: which rows does it count (a "
            "target of -100 is no token), where is it smallest, and how would you home in on that "
            "point without trying every T?",
            "with beta = 1 / T the loss is convex in beta and its slope is the mean over scored rows of "
            "E_p[z] - z_y: bisect on its sign (or golden-section search the loss in log T), then "
            "return that T and the mean loss of the scored rows at it.",
        ),
        quiet=quiet,
        forbid=_forbid(_LOSSES + own + ["lmcore.course.softmax_nll.lesson.mean_nll_reference"]),
    )
