"""Notebook 08's learning-rate exercise: a schedule designed from goals, not copied from a formula.

The learner writes ``my_lr_at(step, *, lr, min_lr, warmup_steps, max_steps)``; the checker reads
the whole schedule it gives for a few settings and judges it against the goals the exercise
states (:func:`schedule_fault`), so every schedule that meets them passes: lmcore's cosine, a
smoothstep, a cosine that reaches ``min_lr`` a step early. The plausible wrong ones fail on the
goal they miss: a warmup from 0, a straight-line decay, a quarter cosine, a cosine that climbs
back after ``max_steps``, a decay to 0, a cut to ``min_lr`` in one step, a hold-line-hold with
corners. Calling ``lr_at`` is rejected.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..._validate import require_int_scalar, require_real
from ..checks import Case, apart, check, float32_atol

__all__ = ["lr_schedule_cases", "schedule_fault", "check_lr_schedule", "GENTLE", "STEEPEST", "CORNER"]

_FORBID = {"lmcore.train.optim.lr_at": "write the schedule yourself (this is lmcore's own)"}

GENTLE = (1 / 20, 1 / 50)  # the first and last twentieth of the decay each cover under a fiftieth of it
STEEPEST = 2.0  # no step of the decay drops more than twice the average step
CORNER = 8.0  # from one step to the next, the drop changes by at most 8 (lr - min_lr) / n^2: no corner


def lr_schedule_cases() -> list[Case]:
    """Settings ``(lr, min_lr, warmup_steps, max_steps)``: round numbers (readable failures), the
    ``cpu`` preset's, a single warmup step, and no warmup with a decay to 0."""
    settings = [
        (1.0, 0.1, 10, 110),
        (3e-3, 3e-4, 50, 1500),
        (0.5, 0.05, 1, 61),
        (2.0, 0.0, 0, 40),
    ]
    return [
        Case(s, label=f"lr={s[0]}, min_lr={s[1]}, warmup_steps={s[2]}, max_steps={s[3]}") for s in settings
    ]


def _steps_after(max_steps: int, warmup_steps: int) -> int:
    """How far past ``max_steps`` the schedule is read: far enough for a cosine left running to
    climb back up."""
    return max(20, max_steps - warmup_steps)


def _rates(fn):
    """``fn``, a per-step schedule, as a function of a setting that returns the whole schedule
    (steps 0 to well past ``max_steps``); it keeps ``fn``'s name, which the hints use."""

    @functools.wraps(fn)
    def schedule(lr, min_lr, warmup_steps, max_steps):
        last = max_steps + _steps_after(max_steps, warmup_steps)
        return [
            fn(s, lr=lr, min_lr=min_lr, warmup_steps=warmup_steps, max_steps=max_steps)
            for s in range(last + 1)
        ]

    return schedule


def _as_floats(rates) -> np.ndarray | None:
    try:
        r = np.array([float(x) for x in rates], dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return r


def schedule_fault(lr, min_lr, warmup_steps, max_steps, rates) -> tuple[str, str]:
    """The first goal the schedule ``rates`` (its rate at steps 0, 1, ...) misses for this setting,
    and a question about it; ``("", "")`` when it meets every goal:

    - warmup (steps before ``warmup_steps``): above 0 at step 0, rising in equal steps, ``lr`` at
      step ``warmup_steps - 1``;
    - decay (``warmup_steps`` to ``max_steps``): ``lr`` at its start and ``min_lr`` at its end, never
      rising; gentle at both ends (its first and its last twentieth each cover less than a fiftieth
      of the drop); no step dropping more than twice the average step; no corner (from one step
      to the next the drop changes by at most :data:`CORNER` (lr - min_lr) / (max_steps -
      warmup_steps)^2);
    - after ``max_steps``: ``min_lr``.
    """
    lr = require_real("lr", lr, min=0.0, min_inclusive=False)
    min_lr = require_real("min_lr", min_lr, min=0.0, hint="(at least 0, below lr)")
    if min_lr >= lr:
        raise ValueError(f"min_lr must be below lr = {lr}; got {min_lr}.")
    warmup_steps = require_int_scalar("warmup_steps", warmup_steps, min=0)
    max_steps = require_int_scalar("max_steps", max_steps, min=warmup_steps + 1, hint="(after warmup_steps)")
    r = _as_floats(rates)
    if r is None or r.ndim != 1 or len(r) <= max_steps:
        return (
            "the function did not return one number per step",
            "what does your function return for one step?",
        )
    if not np.isfinite(r).all():
        s = int(np.flatnonzero(~np.isfinite(r))[0])
        return f"step {s} gives {r[s]}", f"which operation at step {s} leaves the real numbers?"
    tol = float32_atol(np.float64(lr), floor=1e-15) + 1e-6 * lr  # a schedule in float32 is right
    for fault in (
        _warmup_fault(r, lr, warmup_steps, tol),
        _decay_fault(r, lr, min_lr, warmup_steps, max_steps, tol),
        _after_fault(r, min_lr, max_steps, tol),
    ):
        if fault[0]:
            return fault
    return "", ""


def _warmup_fault(r, lr, w, tol) -> tuple[str, str]:
    if w < 1:
        return "", ""
    if r[0] <= tol:
        return (
            f"step 0, the first update, gets rate {r[0]:.4g}",
            "what does an update at that rate change, and what should the warmup's first step give?",
        )
    if abs(r[w - 1] - lr) > tol:
        a, b = apart(r[w - 1], lr)
        span = f"steps 0 to {w - 1}" if w > 1 else "step 0 alone"
        return (
            f"at step {w - 1}, the warmup's last, yours is {a} where the warmup ends at lr = {b}",
            f"at which step does your ramp reach lr, when the warmup is {span}?",
        )
    d = np.diff(r[:w])
    if len(d) and (d.min() <= 0 or d.max() - d.min() > 1e-4 * d.mean() + 2 * tol):
        i, j = int(np.argmin(d)), int(np.argmax(d))
        a, b = apart(d[i], d[j])
        return (
            f"the warmup does not rise in equal steps: step {i} to {i + 1} adds {a}, step {j} to {j + 1} adds {b}",
            "what shape is a ramp whose steps are all equal?",
        )
    return "", ""


def _decay_fault(r, lr, min_lr, w, m, tol) -> tuple[str, str]:
    if abs(r[w] - lr) > tol:
        a, b = apart(r[w], lr)
        return (
            f"at step {w}, where the decay starts, yours is {a}, not lr = {b}",
            "which rate must the decay start from?",
        )
    if abs(r[m] - min_lr) > tol:
        a, b = apart(r[m], min_lr)
        return (
            f"at step {m} (max_steps), where the decay ends, yours is {a}, not min_lr = {b}",
            "where must the decay land, and at which step?",
        )
    decay, drop = r[w : m + 1], lr - min_lr
    rises = np.diff(decay)
    if rises.max() > 2 * tol:
        s = w + int(np.argmax(rises))
        return (
            f"the decay rises from step {s} to {s + 1}",
            "what happens to the rate over the decay, and does your curve ever turn back up?",
        )
    part, share = GENTLE
    k = max(1, math.floor((m - w) * part))
    for where, covered, a, b in (("first", lr - r[w + k], w, w + k), ("last", r[m - k] - min_lr, m - k, m)):
        if covered > share * drop + 2 * tol:
            return (
                f"the {where} twentieth of the decay (steps {a} to {b}) covers {covered / drop:.1%} of the drop, "
                f"more than a fiftieth",
                f"how does a curve {'leave its start' if where == 'first' else 'arrive at its end'} with no slope at all?",
            )
    steps, average = -rises, drop / max(1, m - w)
    if steps.max() > STEEPEST * average + 2 * tol:
        s = w + int(np.argmax(steps))
        return (
            f"step {s} to {s + 1} drops {steps.max() / average:.2f} times the average step",
            "where does your decay spend its drop, and how would it spread it over the whole phase?",
        )
    turns, unit = np.abs(np.diff(steps)), drop / max(1, m - w) ** 2
    if len(turns) and turns.max() > CORNER * unit + 4 * tol:
        s = w + 1 + int(np.argmax(turns))
        return (
            f"at step {s} the drop per step changes by {turns.max() / unit:.1f} (lr - min_lr) / (max_steps - "
            f"warmup_steps)^2 from the step before, more than {CORNER:g}: a corner",
            "where does your curve change direction all at once, and which curve turns gradually?",
        )
    return "", ""


def _after_fault(r, min_lr, m, tol) -> tuple[str, str]:
    after = np.flatnonzero(np.abs(r[m + 1 :] - min_lr) > tol)
    if not len(after):
        return "", ""
    s = m + 1 + int(after[0])
    a, b = apart(r[s], min_lr)
    return (
        f"step {s}, after max_steps = {m}, gives {a}, not min_lr = {b}",
        "what should the rate do once the decay is over?",
    )


def check_lr_schedule(fn, *, quiet: bool = False):
    """Grade ``fn(step, *, lr, min_lr, warmup_steps, max_steps) -> learning rate`` against the
    exercise's goals (:func:`schedule_fault`), read over the whole schedule of each setting;
    ``fn`` must not call :func:`lmcore.train.lr_at`."""
    return check(
        "learning-rate schedule",
        _rates(fn),
        None,
        lr_schedule_cases(),
        judge=schedule_fault,
        hint=(
            "which goal does the line name, and which part of your schedule is responsible for it?",
            "one schedule that meets every goal: warmup lr * (step + 1) / warmup_steps for step < "
            "warmup_steps; then half a cosine, min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2 with "
            "t = (step - warmup_steps) / (max_steps - warmup_steps); min_lr from max_steps on.",
        ),
        forbid=_FORBID,
        quiet=quiet,
    )
