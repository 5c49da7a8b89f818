"""The individual checks behind :func:`lmcore.diagnose.run_checks`: the loss-value checks
(a finite loss, the alignment, the perfect- and zero-logit losses) here, and every other
check re-exported from :mod:`lmcore.diagnose_mask_checks` (which targets are scored, with what
weight) and :mod:`lmcore.diagnose_model_checks` (the model), with the probes of
:mod:`lmcore.diagnose_probes` they share.

Each ``check_*`` returns ``(passed, detail)``; ``passed`` is None for a check that was skipped
(the detail says why). Loss checks call ``loss_fn(logits, input_ids, attention_mask)`` with
hand-made logits; model checks call ``forward(input_ids, attention_mask)``.
"""

from __future__ import annotations

import math

import torch

from .diagnose_mask_checks import (
    check_coverage,
    check_eos_scored,
    check_equal_weights,
    check_padding_unscored,
)
from .diagnose_model_checks import check_first_loss, check_future, check_left_padding, check_padding_unread
from .diagnose_probes import BIG, NotFinite, loss_value, place

__all__ = [
    "BIG",
    "NotFinite",
    "loss_value",
    "place",
    "check_finite",
    "check_alignment",
    "check_perfect",
    "check_zero",
    "check_coverage",
    "check_equal_weights",
    "check_padding_unscored",
    "check_eos_scored",
    "check_future",
    "check_padding_unread",
    "check_left_padding",
    "check_first_loss",
]


def check_finite(loss_fn, inputs):
    """inputs: [(what, logits, ids, mask)]; the first non-finite loss fails the row."""
    for what, logits, ids, mask in inputs:
        try:
            loss_value(loss_fn, logits, ids, mask)
        except NotFinite as err:
            return False, (
                f"{err} for {what}: the loss is not finite, so no other loss check can "
                "be read (a 0/0 from dividing by a count of 0 valid targets? log of a "
                "probability 0? logits that overflow?)"
            )
    return True, "the loss is finite for zero, random and perfect logits, ragged rows included"


def check_alignment(loss_fn, ids, mask, V):
    losses = {k: loss_value(loss_fn, place(ids, k, V), ids, mask) for k in (-1, 0, 1, 2, 3)}
    best = min(losses, key=losses.get)
    shown = ", ".join(str(int(i)) for i in ids[0, :4])
    got = ", ".join(str(int(i)) for i in ids[0, best : best + 3]) if best >= 0 else "earlier tokens"
    text = f"ids {shown}, ... are scored against {got}, ..."
    if best == 1 and all(v > losses[1] + 1e-3 for k, v in losses.items() if k != 1):
        return True, f"{text} (position t against token t+1)"
    cause = {
        0: "the shift is missing: each position is compared with its own token, so the "
        "model learns to copy its input",
        2: "the labels are shifted twice (pre-shifted labels passed to a loss that shifts "
        "again): the model learns to predict t+2",
    }
    return False, f"{text}: " + cause.get(best, f"position t is scored against token t{best:+d}")


def _perfect_expected(V, smoothing, z_loss):
    """The loss of logits BIG on the target and 0 elsewhere, with label smoothing and z-loss."""
    log_z = math.log(math.exp(BIG) + V - 1)
    return (1 - smoothing) * (log_z - BIG) + smoothing * (log_z - BIG / V) + z_loss * log_z**2


def check_perfect(loss_fn, ids, mask, V, *, smoothing=0.0, z_loss=0.0, aux_loss=False):
    if aux_loss:
        return None, "skipped: aux_loss=True (an auxiliary term of unknown size moves this loss)"
    value, expected = (
        loss_value(loss_fn, place(ids, 1, V), ids, mask),
        _perfect_expected(V, smoothing, z_loss),
    )
    known = [f"label smoothing {smoothing:g}"] * bool(smoothing) + [f"z-loss {z_loss:g}"] * bool(z_loss)
    text = f"loss {value:.2f} for logits perfect on the next token (expected " + (
        f"{expected:.2f} with {' and '.join(known)})" if known else "about 0)"
    )
    if abs(value - expected) < 0.01:
        return True, text
    softmaxed = math.log(V - 1 + math.e) - 1
    half = loss_value(loss_fn, place(ids, 1, V) / 2, ids, mask)  # the same answer, half as sure
    if not known and abs(value - softmaxed) < 0.05 and abs(half - value) < 0.05:
        return False, (
            f"{text}: ln(V - 1 + e) - 1 = {softmaxed:.2f} is the loss of probabilities "
            "taken as logits: softmax is applied before the loss (cross-entropy does "
            "log-softmax itself)"
        )
    if half + 0.01 < value < BIG / 4:  # not the misaligned ~BIG
        return False, (
            f"{text}: the loss grows with the size of a correct logit, as label smoothing "
            "or a logit penalty (z-loss) does: pass label_smoothing= or z_loss= if it is "
            "intended, aux_loss=True for another term"
        )
    return False, (
        f"{text}: the loss does not score position t against token t+1 (see "
        "alignment) or transforms the logits (softmax, scaling, an unreported label "
        "smoothing or auxiliary loss: pass label_smoothing=, z_loss= or aux_loss=True)"
    )


def check_zero(loss_fn, ids, mask, V, *, z_loss=0.0, aux_loss=False):
    if aux_loss:
        return None, "skipped: aux_loss=True (an auxiliary term of unknown size moves this loss)"
    value, ln_v = loss_value(loss_fn, torch.zeros(*ids.shape, V, device=ids.device), ids, mask), math.log(V)
    expected = ln_v + z_loss * ln_v**2
    target = f"ln V = {ln_v:.2f}" + (f" + z-loss {z_loss:g} x (ln V)^2 = {expected:.4f}" if z_loss else "")
    if abs(value - expected) < 1e-3:
        return (
            True,
            f"loss {value:.4f} for zero logits = {target}"
            if z_loss
            else f"loss {value:.2f} for zero logits = {target}",
        )
    ratio = value / ln_v
    cause = (
        "the loss is in bits (log base 2), not nats"
        if abs(ratio - 1 / math.log(2)) < 1e-3
        else f"the loss is summed over {round(ratio)} targets, not averaged"
        if ratio > 1.5 and abs(ratio - round(ratio)) < 1e-3
        else "the loss rescales or transforms the logits, adds an unreported term (pass "
        "z_loss= or aux_loss=True), or is not a cross-entropy"
    )
    return False, f"loss {value:.4f} for zero logits, expected {target}: {cause}"
