"""Notebook 08's learning-rate exercise: the checker accepts schedules written in other ways,
rejects lmcore's own lr_at (however it is reached) and each plausible wrong schedule, one test each."""

import math

import numpy as np
import pytest

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


def _solution_numpy(step, *, lr, min_lr, warmup_steps, max_steps):  # another correct spelling
    warm = lr * (step + 1) / max(warmup_steps, 1)
    t = np.clip((step - warmup_steps) / max(1, max_steps - warmup_steps), 0.0, 1.0)
    cosine = min_lr + (lr - min_lr) * (np.cos(np.pi * t) + 1) / 2
    return float(warm if step < warmup_steps else cosine)


def _naive_cosine(step, *, lr, min_lr, warmup_steps, max_steps):
    """The schedule at every step, from the definition, by a loop over the phases."""
    out = []
    for s in range(step + 1):
        if s < warmup_steps:
            out.append(lr * (s + 1) / warmup_steps)
        elif s < max_steps:
            angle = math.pi * (s - warmup_steps) / max(1, max_steps - warmup_steps)
            out.append(min_lr + (lr - min_lr) * (1 + math.cos(angle)) / 2)
        else:
            out.append(min_lr)
    return out[-1]


def test_the_reference_matches_the_definition_on_every_case():
    for case in X.lr_schedule_cases():
        assert lmcore.train.lr_at(*case.args, **case.kwargs) == pytest.approx(
            _naive_cosine(*case.args, **case.kwargs), abs=1e-15
        )


def test_correct_schedules_pass(capsys):
    assert X.check_lr_schedule(_solution)
    assert X.check_lr_schedule(_solution_numpy)
    assert "✓ pass" in capsys.readouterr().out


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


def _warmup_from_zero(step, **kw):  # lr * step / warmup: step 0 trains at lr 0
    return _solution(step, **kw) if step >= kw["warmup_steps"] else kw["lr"] * step / kw["warmup_steps"]


def _cosine_from_step_0(step, *, lr, min_lr, warmup_steps, max_steps):  # progress ignores the warmup
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    return min_lr + 0.5 * (1 + math.cos(math.pi * step / max_steps)) * (lr - min_lr)


def _cosine_to_zero(step, *, lr, min_lr, warmup_steps, max_steps):  # forgets min_lr in the cosine
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * progress)) * lr


def _cosine_rises_again(step, *, lr, min_lr, warmup_steps, max_steps):  # no min_lr after max_steps
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)


def _linear_decay(step, *, lr, min_lr, warmup_steps, max_steps):  # a straight line, not a cosine
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return lr - progress * (lr - min_lr)


def _no_half(step, *, lr, min_lr, warmup_steps, max_steps):  # cos(pi t) without (1 + .) / 2
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + math.cos(math.pi * progress) * (lr - min_lr)


@pytest.mark.parametrize(
    "wrong, first_case",
    [
        (_warmup_from_zero, "step 0 of lr=1.0"),
        (_cosine_from_step_0, "step 10 of lr=1.0"),
        (_cosine_to_zero, "step 35 of lr=1.0"),
        (_cosine_rises_again, "step 227 of lr=1.0"),
        (_linear_decay, "step 35 of lr=1.0"),
        (_no_half, "step 35 of lr=1.0"),
    ],
    ids=lambda v: getattr(v, "__name__", "")[1:] if callable(v) else "",
)
def test_each_plausible_wrong_schedule_is_rejected_at_the_first_step_where_it_differs(
    wrong, first_case, capsys
):
    assert not X.check_lr_schedule(wrong)
    line = capsys.readouterr().out
    assert "✗ fail" in line and first_case in line and line.count("\n") == 1


def test_a_stub_reads_as_not_attempted(capsys):
    def stub(step, *, lr, min_lr, warmup_steps, max_steps):
        raise NotImplementedError

    assert not X.check_lr_schedule(stub)
    assert "not attempted yet" in capsys.readouterr().out


# ---------------------------------------------------------------- issue 38: the answer matrix's findings


def _solution_float32(step, *, lr, min_lr, warmup_steps, max_steps):
    f = np.float32
    if step < warmup_steps:
        return float(f(lr) * f(step + 1) / f(warmup_steps))
    if step >= max_steps:
        return float(f(min_lr))
    progress = f(step - warmup_steps) / f(max(1, max_steps - warmup_steps))
    return float(f(min_lr) + f(0.5) * (f(1) + np.cos(f(np.pi) * progress)) * (f(lr) - f(min_lr)))


def _decays_over_one_step_less(step, *, lr, min_lr, warmup_steps, max_steps):  # m - w - 1
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps - 1))
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)


def test_a_schedule_in_float32_and_a_decorated_one_pass(capsys):
    """Issue 38: atol 1e-12, rtol 1e-9 rejected the schedule computed in float32 ('expected 0.1, got
    0.100000001'); it is graded to a few float32 spacings of lr now."""
    import functools

    assert X.check_lr_schedule(_solution_float32)
    assert X.check_lr_schedule(functools.wraps(_solution)(lambda step, **kw: _solution(step, **kw)))
    assert capsys.readouterr().out.count("✓ pass") == 2


def test_a_cosine_over_one_step_less_still_fails(capsys):
    assert not X.check_lr_schedule(_decays_over_one_step_less)
    assert "step 35 of lr=1.0" in capsys.readouterr().out
