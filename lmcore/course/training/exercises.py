"""Notebook 08's learning-rate exercise: the schedule ``train()`` follows (linear warmup, then a
cosine down to ``min_lr``, then ``min_lr``), written by the learner and checked against
:func:`lmcore.train.lr_at` on cases that separate the plausible wrong schedules: a warmup off by
one, a cosine that counts from step 0 or decays to 0, a cosine that rises again after
``max_steps``, a straight-line decay. Calling ``lr_at`` is rejected.
"""

from __future__ import annotations

import numpy as np

from ...train import lr_at
from ..checks import Case, apart, check, float32_atol

__all__ = ["lr_schedule_cases", "check_lr_schedule"]

_FORBID = {"lmcore.train.optim.lr_at": "write the schedule yourself (this is lmcore's own)"}


def lr_schedule_cases() -> list[Case]:
    """Steps at the edges of each phase and a quarter into the cosine (where a straight line and
    a cosine differ most), for a few settings (keyword arguments as ``lr_at``'s)."""
    cases = []
    settings = [
        dict(lr=1.0, min_lr=0.1, warmup_steps=10, max_steps=110),  # round numbers: readable failures
        dict(lr=3e-3, min_lr=3e-4, warmup_steps=50, max_steps=1500),  # the cpu preset
        dict(lr=2.0, min_lr=0.0, warmup_steps=0, max_steps=40),  # no warmup, down to 0
    ]
    for kw in settings:
        w, m = kw["warmup_steps"], kw["max_steps"]
        marks = (0, 1, max(w - 1, 0), w, w + (m - w) // 4, (w + m) // 2, m, 2 * m + 7, w + 1, m - 1, m + 1)
        steps = list(dict.fromkeys(marks))  # the telling steps first: a failure names one of them
        for s in steps:
            label = f"step {s} of lr={kw['lr']}, min_lr={kw['min_lr']}, warmup_steps={w}, max_steps={m}"
            cases.append(Case((s,), dict(kw), label=label))
    return cases


def _lr_atol(step, *, lr, **_) -> float:
    """A schedule computed in float32 is right: a few float32 spacings of ``lr``, the largest
    rate of the setting (the values of the lr=3e-3 setting sit far below the kit's 1e-6)."""
    return float32_atol(np.asarray(lr, dtype=np.float64), floor=1e-15)


def _off(fn, step: int, want: float, kw: dict) -> float | None:
    """``fn``'s rate at ``step`` when it is not ``want`` (to a float32 tolerance), else None."""
    got = float(fn(step, **kw))
    return None if abs(got - want) <= _lr_atol(step, **kw) + 1e-6 * abs(want) else got


def _explain_schedule(fn, case, expected, got) -> str:
    """Which part of the schedule a wrong rate belongs to, asked about on this case's setting."""
    (step,), kw = case.args, case.kwargs
    lr, low, w, m = kw["lr"], kw["min_lr"], kw["warmup_steps"], kw["max_steps"]
    if step < w:
        return (
            f"step {step} is in the warmup (warmup_steps = {w}) and yours is {float(got):.4g}: "
            f"which rate does step 0 get, and at which step does the ramp reach lr = {lr}?"
        )
    if step >= m:
        return f"step {step} is past max_steps = {m} and yours is {float(got):.4g}: what happens after the decay?"
    top = _off(fn, w, lr, kw)
    if top is not None:
        return f"at step {w}, where the decay starts, yours is {top:.4g}: which rate must it start from?"
    quarter = w + (m - w) // 4
    line = low + (lr - low) * (1 - (quarter - w) / max(1, m - w))
    if _off(fn, quarter, line, kw) is None:
        return (
            f"a quarter into the decay (step {quarter}) yours is the straight line's value: what "
            "shape does the decay between lr and min_lr take?"
        )
    for last in (m, m - 1) if m - 1 > w else (m,):
        end = _off(fn, last, lr_at(last, **kw), kw)
        if end is not None:
            a, b = apart(end, lr_at(last, **kw))
            return (
                f"at step {last}, the decay's {'end' if last == m else 'last step'}, yours is {a} where the "
                f"schedule is at {b}: where must the decay land (which argument names it), and over how many steps does it run?"
            )
    return ""


def check_lr_schedule(fn, *, quiet: bool = False):
    """Grade ``fn(step, *, lr, min_lr, warmup_steps, max_steps) -> learning rate`` against
    :func:`lmcore.train.lr_at` (which ``fn`` must not call)."""
    return check(
        "learning-rate schedule",
        fn,
        lr_at,
        lr_schedule_cases(),
        hint=(
            "look at the first step of each phase: which step reaches lr, where the cosine starts, "
            "and what happens after max_steps.",
            "warmup: lr * (step + 1) / warmup_steps for step < warmup_steps; then "
            "progress = (step - warmup_steps) / max(1, max_steps - warmup_steps) and "
            "min_lr + (lr - min_lr) * (1 + cos(pi * progress)) / 2; min_lr from max_steps on.",
        ),
        atol=_lr_atol,
        rtol=1e-6,
        forbid=_FORBID,
        explain=_explain_schedule,
        quiet=quiet,
    )
