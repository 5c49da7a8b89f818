"""Notebook 08's learning-rate exercise: a schedule judged against the goals the exercise states.
Every schedule that meets them passes (lmcore's cosine, a smoothstep, one in float32, a decorated
one); lmcore's own lr_at is refused however it is reached; each plausible wrong schedule fails on
the goal it misses, and the goals themselves are tested against an independent reading."""

import functools
import math

import numpy as np
import pytest
from _answers_07_10 import _lr_float32 as _solution_float32  # the matrix's float32 schedule
from _answers_07_10 import _lr_shaped as _shaped  # warmup, then a decay of the given shape

import lmcore.train
from lmcore.course.training import exercises as X
from lmcore.train.optim import lr_at as lr_at_from_optim


def _solution(step, *, lr, min_lr, warmup_steps, max_steps):
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)


RIGHT = {
    "lmcore's cosine, written out": _solution,
    "in float32": _solution_float32,
    "decorated": functools.wraps(_solution)(lambda step, **kw: _solution(step, **kw)),
    "smoothstep": _shaped(lambda t: 1 - t * t * (3 - 2 * t)),
    "smootherstep": _shaped(lambda t: 1 - t**3 * (10 - 15 * t + 6 * t * t)),
    "a numpy tensor of one value": lambda step, **kw: np.float64(_solution(step, **kw)),
}


@pytest.mark.parametrize("fn", RIGHT.values(), ids=RIGHT.keys())
def test_every_schedule_that_meets_the_goals_passes(fn, capsys):
    assert X.check_lr_schedule(fn)
    assert "✓ pass" in capsys.readouterr().out


def test_lmcores_lr_at_meets_its_own_goals():
    for case in X.lr_schedule_cases():
        lr, low, w, m = case.args
        rates = [
            lmcore.train.lr_at(s, lr=lr, min_lr=low, warmup_steps=w, max_steps=m) for s in range(2 * m + 1)
        ]
        assert X.schedule_fault(*case.args, rates) == ("", "")


@pytest.mark.parametrize(
    "call",
    [
        lambda s, **kw: lmcore.train.lr_at(s, **kw),
        lambda s, **kw: lr_at_from_optim(s, **kw),
        lmcore.train.lr_at,
    ],
    ids=["lmcore.train.lr_at", "lmcore.train.optim.lr_at", "the function itself"],
)
def test_calling_lmcores_lr_at_is_rejected(call, capsys):
    assert not X.check_lr_schedule(call)
    assert "called lmcore.train.optim.lr_at" in capsys.readouterr().out


WRONG = {
    "warmup from 0": (
        _shaped(lambda t: (1 + math.cos(math.pi * t)) / 2, warm=lambda s, lr, w: lr * s / w),
        "step 0",
    ),
    "warmup one step too long": (
        _shaped(lambda t: (1 + math.cos(math.pi * t)) / 2, warm=lambda s, lr, w: lr * (s + 1) / (w + 1)),
        "the warmup's last",
    ),
    "a straight-line decay": (_shaped(lambda t: 1 - t), "first twentieth"),
    "a quarter cosine": (_shaped(lambda t: math.cos(math.pi * t / 2)), "last twentieth"),
    "a full period": (_shaped(lambda t: (1 + math.cos(2 * math.pi * t)) / 2), "rises"),
    "lr, then min_lr from halfway": (_shaped(lambda t: 1.0 if t < 0.5 else 0.0), "times the average step"),
    "hold, straight line, hold": (
        _shaped(lambda t: 1.0 if t <= 0.05 else 0.0 if t >= 0.95 else 1 - (t - 0.05) / 0.9),
        "a corner",
    ),
    "a cosine to 0, clipped at min_lr": (
        lambda s, *, lr, min_lr, warmup_steps, max_steps: max(
            min_lr, _solution(s, lr=lr, min_lr=0.0, warmup_steps=warmup_steps, max_steps=max_steps)
        ),
        "a corner",
    ),
    "the cosine counts from step 0": (
        lambda s, *, lr, min_lr, warmup_steps, max_steps: (
            _solution(s, lr=lr, min_lr=min_lr, warmup_steps=warmup_steps, max_steps=max_steps)
            if s < warmup_steps or s >= max_steps
            else min_lr + (lr - min_lr) * (1 + math.cos(math.pi * s / max_steps)) / 2
        ),
        "where the decay starts",
    ),
    "the cosine left running": (
        lambda s, *, lr, min_lr, warmup_steps, max_steps: (
            lr * (s + 1) / warmup_steps
            if s < warmup_steps
            else min_lr
            + (lr - min_lr) * (1 + math.cos(math.pi * (s - warmup_steps) / (max_steps - warmup_steps))) / 2
        ),
        "after max_steps",
    ),
}


@pytest.mark.parametrize("fn, says", WRONG.values(), ids=WRONG.keys())
def test_each_plausible_wrong_schedule_fails_on_the_goal_it_misses(fn, says, capsys):
    assert not X.check_lr_schedule(fn)
    line = capsys.readouterr().out
    assert "✗ fail" in line and says in line.split("Hint:")[0] and line.count("\n") == 1


def test_a_stub_reads_as_not_attempted(capsys):
    def stub(step, *, lr, min_lr, warmup_steps, max_steps):
        raise NotImplementedError

    assert not X.check_lr_schedule(stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_a_function_that_returns_nothing_fails_with_a_question(capsys):
    assert not X.check_lr_schedule(lambda step, **kw: None)
    out = capsys.readouterr().out
    assert "one number per step" in out and "Hint: what does your function return" in out


# ---------------------------------------------------------------- the goals, read independently


def _goals_by_loop(lr, min_lr, w, m, rates):
    """The exercise's goals, each written as a plain loop over the steps (no numpy)."""
    tol = 1e-9 * lr
    if w and not (rates[0] > tol and abs(rates[w - 1] - lr) <= tol):
        return False
    incs = [rates[s + 1] - rates[s] for s in range(w - 1)]
    if incs and (min(incs) <= 0 or max(incs) - min(incs) > 1e-6 * lr):
        return False
    if abs(rates[w] - lr) > tol or abs(rates[m] - min_lr) > tol:
        return False
    if any(rates[s + 1] > rates[s] + tol for s in range(w, m)):
        return False
    k = max(1, (m - w) // 20)
    if lr - rates[w + k] >= (lr - min_lr) / 50 or rates[m - k] - min_lr >= (lr - min_lr) / 50:
        return False
    if any(rates[s] - rates[s + 1] > 2 * (lr - min_lr) / (m - w) + tol for s in range(w, m)):
        return False
    drops = [rates[s] - rates[s + 1] for s in range(w, m)]
    if any(abs(b - a) > 8 * (lr - min_lr) / (m - w) ** 2 + tol for a, b in zip(drops, drops[1:])):
        return False
    return all(abs(rates[s] - min_lr) <= tol for s in range(m + 1, len(rates)))


@pytest.mark.parametrize("shape_power", [0.5, 1.0, 1.5, 2.0, 3.0, 0.8, 1.2])
@pytest.mark.parametrize("case", X.lr_schedule_cases(), ids=lambda c: c.label)
def test_the_judge_agrees_with_a_loop_over_the_goals(case, shape_power):
    """A family of curves (cosine raised to a power: some gentle at both ends, some not) graded by
    ``schedule_fault`` and by the loop above agree on each."""
    lr, low, w, m = case.args

    def shape(t):
        c = (1 + math.cos(math.pi * t)) / 2
        return c**shape_power if shape_power >= 1 else 1 - (1 - c) ** (1 / shape_power)

    fn = _shaped(shape)
    rates = [fn(s, lr=lr, min_lr=low, warmup_steps=w, max_steps=m) for s in range(2 * m + 20)]
    assert (X.schedule_fault(*case.args, rates)[0] == "") == _goals_by_loop(lr, low, w, m, rates)


@pytest.mark.parametrize(
    "args, exc, name",
    [
        (("1", 0.1, 10, 110), TypeError, "lr"),
        ((0.0, 0.0, 10, 110), ValueError, "lr"),
        ((1.0, 1.0, 10, 110), ValueError, "min_lr"),
        ((1.0, -0.1, 10, 110), ValueError, "min_lr"),
        ((1.0, 0.1, 1.5, 110), TypeError, "warmup_steps"),
        ((1.0, 0.1, 10, 10), ValueError, "max_steps"),
        ((1.0, 0.1, -1, 110), ValueError, "warmup_steps"),
    ],
)
def test_schedule_fault_refuses_bad_settings_by_name(args, exc, name):
    with pytest.raises(exc, match=name):
        X.schedule_fault(*args, [0.5] * 300)
