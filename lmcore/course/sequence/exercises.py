"""Notebook 03's exercise checkers: per-position losses through ``F.cross_entropy``'s
``(N, C, ...)`` layout, and a causal-LM loss built by hand (log_softmax, gather, mask, divide by
the count), graded with ``F.cross_entropy`` and ``F.nll_loss`` switched off so that their
``ignore_index`` cannot do the masking. Both refuse lmcore's own shift and loss, and both have a
case that separates the plausible wrong answers (L - 1 = V; logits of +-150 in float32).
Re-exported by :mod:`lmcore.course.sequence.lesson`."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from ...loss import causal_lm_loss
from ...shift import IGNORE_INDEX
from ..checks import Case, check

__all__ = ["builtin_losses_off", "check_per_position_nll", "check_causal_lm_loss"]

_BUILTIN_LOSSES = ("cross_entropy", "nll_loss")


@contextlib.contextmanager
def builtin_losses_off():
    """Within the block, ``F.cross_entropy`` and ``F.nll_loss`` (and so ``nn.CrossEntropyLoss``,
    ``nn.NLLLoss`` and ``lmcore.causal_lm_loss``, which call them) raise a RuntimeError."""
    saved = {name: getattr(F, name) for name in _BUILTIN_LOSSES}

    def refuse(name):
        def refused(*args, **kwargs):
            raise RuntimeError(
                f"F.{name} is switched off in this check: build the loss yourself "
                "from log_softmax, gather, the mask and a division by the count"
            )

        return refused

    try:
        for name in _BUILTIN_LOSSES:
            setattr(F, name, refuse(name))
        yield
    finally:
        for name, fn in saved.items():
            setattr(F, name, fn)


_NO_LMCORE = {
    "lmcore.loss.causal_lm_loss": "that is lmcore's loss, the one you are rebuilding: write it yourself",
    "lmcore.shift.shift_for_next_token": "write the shift yourself (it is one slice of each tensor)",
}


def _random_cases(
    seed: int, with_ignored: bool, shapes=((1, 2, 3), (2, 5, 7), (3, 9, 4), (4, 6, 11), (1, 12, 5))
):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for N, L, V in shapes:
        logits = torch.randn(N, L, V, generator=g)
        labels = torch.randint(V, (N, L), generator=g)
        if with_ignored:
            drop = torch.rand(N, L, generator=g) < 0.35
            drop[0, -1] = True  # at least one ignored target...
            drop[0, 1] = False  # ...and at least one valid one
            labels[drop] = IGNORE_INDEX
        cases.append(Case((logits, labels), label=f"logits (N, L, V) = {(N, L, V)}"))
    return cases


def _ragged_large_case(seed: int = 11) -> Case:
    """Rows with 5, 2 and 0 of 6 targets valid (right padding), logits of spread 100 in float32
    and one target at -150 next to a +150 logit: p(target) = e^-300, 0 in float32."""
    g = torch.Generator().manual_seed(seed)
    N, L, V = 3, 7, 6
    logits = 100 * torch.randn(N, L, V, generator=g)
    labels = torch.randint(V, (N, L), generator=g)
    for n, valid in enumerate((5, 2, 0)):
        labels[n, 1 + valid :] = IGNORE_INDEX
    logits[0, 0] = 0.0
    logits[0, 0, labels[0, 1]], logits[0, 0, (labels[0, 1] + 1) % V] = -150.0, 150.0
    return Case((logits, labels), label="3 rows with 5, 2 and 0 valid targets, logits of +-150 (float32)")


def check_per_position_nll(fn, quiet: bool = False):
    """Grade ``fn(logits (N, L, V), labels (N, L) with -100s) -> (N, L-1)``: each target's NLL
    (0 where ignored), against ``causal_lm_loss(..., reduction="none")``; one case has L - 1 = V,
    where ``F.cross_entropy`` on (N, L-1, V) runs but scores the positions as classes."""
    cases = _random_cases(3, with_ignored=True, shapes=((2, 5, 4), (1, 2, 3), (3, 9, 11), (2, 8, 7)))
    cases[0].label = "logits (N, L, V) = (2, 5, 4): after the shift L - 1 = V = 4"
    cases.append(_ragged_large_case())
    return check(
        "per_position_nll",
        fn,
        lambda z, y: causal_lm_loss(z, y, reduction="none"),
        cases,
        forbid=_NO_LMCORE,
        quiet=quiet,
        atol=1e-5,
        hint="shift first; F.cross_entropy wants the classes (V) on dim 1, so flatten to (N*(L-1), V) "
        "and reshape back (a slice is not contiguous: .view needs .contiguous(), .reshape does not), "
        "or move V to dim 1; reduction='none'.",
    )


def check_causal_lm_loss(fn, quiet: bool = False):
    """Grade ``fn(logits (N, L, V), labels (N, L) with -100s) -> scalar`` against lmcore's, with
    the built-in losses switched off while ``fn`` runs (:func:`builtin_losses_off`); one case
    has ragged rows and logits of +-150 in float32, where log(softmax(.)) gives inf."""

    def by_hand(logits, labels):
        with builtin_losses_off():
            return fn(logits, labels)

    return check(
        "causal_lm_loss",
        by_hand,
        lambda z, y: causal_lm_loss(z, y),
        _random_cases(4, with_ignored=True) + [_ragged_large_case()],
        quiet=quiet,
        atol=1e-5,
        forbid=_NO_LMCORE,
        hint="shift first; take log-probabilities in one stable step (not log of softmax: notebook 01); "
        "pick each target's entry (-100 is not an index); zero the ignored targets; divide by "
        "the number of valid targets.",
    )
