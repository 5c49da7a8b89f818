"""Notebook 03's exercise checkers: the label shift, and a causal-LM loss built by hand
(log_softmax, gather, mask, divide by the count), graded with ``F.cross_entropy`` and
``F.nll_loss`` switched off so that their ``ignore_index`` cannot do the masking.
Re-exported by :mod:`lmcore.course.sequence`."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from ..loss import causal_lm_loss
from ..shift import IGNORE_INDEX, shift_for_next_token
from .checks import Case, check

__all__ = ["builtin_losses_off", "check_shift", "check_causal_lm_loss"]

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


def _random_cases(seed: int, with_ignored: bool):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for N, L, V in ((1, 2, 3), (2, 5, 7), (3, 9, 4), (4, 6, 11), (1, 12, 5)):
        logits = torch.randn(N, L, V, generator=g)
        labels = torch.randint(V, (N, L), generator=g)
        if with_ignored:
            drop = torch.rand(N, L, generator=g) < 0.35
            drop[0, -1] = True  # at least one ignored target...
            drop[0, 1] = False  # ...and at least one valid one
            labels[drop] = IGNORE_INDEX
        cases.append(Case((logits, labels), label=f"logits (N, L, V) = {(N, L, V)}"))
    return cases


def check_shift(fn, quiet: bool = False) -> bool:
    """Grade ``fn(logits (N, L, V), labels (N, L)) -> (logits (N, L-1, V), labels (N, L-1))``."""
    return check(
        "shift_for_next_token",
        fn,
        shift_for_next_token,
        _random_cases(3, with_ignored=False),
        quiet=quiet,
        hint="position t predicts token t+1: drop the LAST logit and the FIRST label.",
    )


def check_causal_lm_loss(fn, quiet: bool = False) -> bool:
    """Grade ``fn(logits (N, L, V), labels (N, L) with -100s) -> scalar`` against lmcore's, with
    the built-in losses switched off while ``fn`` runs (:func:`builtin_losses_off`)."""

    def by_hand(logits, labels):
        with builtin_losses_off():
            return fn(logits, labels)

    return check(
        "causal_lm_loss",
        by_hand,
        lambda z, y: causal_lm_loss(z, y),
        _random_cases(4, with_ignored=True),
        quiet=quiet,
        atol=1e-5,
        hint="shift first (logits[:, :-1] vs labels[:, 1:]); log_softmax over V; gather "
        "each target's log-probability (replace -100 by any valid index first); "
        "zero the ignored targets with the mask; divide the sum by the number of "
        "valid targets, not by all positions.",
    )
