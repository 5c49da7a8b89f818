"""The checks of which targets a loss scores and how much each weighs (labels and masking).

Each ``check_*`` calls ``loss_fn(logits, input_ids, attention_mask)`` with hand-made logits and
returns ``(passed, detail)``; ``passed`` is None for a skipped check (the detail says why).
"""

from __future__ import annotations

from fractions import Fraction

import torch

from .diagnose_probes import loss_value

__all__ = ["check_coverage", "check_equal_weights", "check_padding_unscored", "check_eos_scored"]


def check_coverage(loss_fn, ids, mask, V, gen):
    """Which positions' logits move the loss: L tokens should give targets at 0..L-2."""
    N, L = ids.shape
    base = torch.randn(N, L, V, generator=gen).to(ids.device)
    ref, scored = loss_value(loss_fn, base, ids, mask), []
    for t in range(L):
        other = base.clone()
        other[:, t] = 3.0 * torch.randn(N, V, generator=gen).to(ids.device)
        if abs(loss_value(loss_fn, other, ids, mask) - ref) > 1e-5 * max(1.0, abs(ref)):
            scored.append(t)
    missing = [t for t in range(L - 1) if t not in scored]
    last = (
        (True, f"the last position (t = {L - 1}) is not scored: it has no next token")
        if L - 1 not in scored
        else (
            False,
            f"the last position (t = {L - 1}) is scored, though it has no next token in "
            "the row: the shift is missing (each position compared with its own token)",
        )
    )
    every = (
        (True, f"positions 0..{L - 2} are all scored: {L} tokens give {L - 1} targets")
        if not missing
        else (
            False,
            f"positions {missing} are not scored, though {L} tokens give {L - 1} targets:"
            " a double shift drops the last target; masking by token id drops real tokens",
        )
    )
    return last, every


def _ratio_text(r: float) -> str:
    f = Fraction(r).limit_denominator(64)
    return f"{f.numerator}/{f.denominator}" if abs(float(f) - r) < 1e-4 * r else f"{r:.3g}"


def check_equal_weights(weight, mask):
    scored = weight > 1e-6 * weight.max()
    if not bool(scored.any()):
        return False, "no position is scored: the loss does not depend on the logits"
    if float(weight[scored].max() / weight[scored].min()) < 1.001:
        return True, "every scored target gets the same weight in the loss"
    per_row = [(float(w[s].mean()), int(s.sum())) for w, s in zip(weight, scored) if s.any()]
    (hi, n_hi), (lo, n_lo) = max(per_row), min(per_row)
    return False, (
        f"a target in the row of {n_hi} targets weighs {_ratio_text(hi / lo)} times one "
        f"in the row of {n_lo}: the loss averages per-row or per-batch means; divide "
        "the summed NLL by the number of valid targets (num_items when accumulating)"
    )


def check_padding_unscored(loss_fn, ids, mask, V, gen):
    """Logits at padding positions (whose targets are padding) must not move the loss."""
    logits = torch.randn(*ids.shape, V, generator=gen).to(ids.device)
    pad = mask == 0
    pad[:, -1] = False  # the last position has no target anyway
    other = logits.clone()
    other[pad] = 5.0 * torch.randn(int(pad.sum()), V, generator=gen).to(ids.device)
    a, b = loss_value(loss_fn, logits, ids, mask), loss_value(loss_fn, other, ids, mask)
    if abs(a - b) <= 1e-6 * max(1.0, abs(a)):
        return True, "the logits at padding positions do not move the loss: padding is never a target"
    return False, (
        "the logits at padding positions move the loss: padding is scored as targets "
        "(PAD -> PAD); set labels to -100 where attention_mask is 0"
    )


def check_eos_scored(loss_fn, ids, mask, V, eos_id, gen):
    if eos_id is None:
        return None, "skipped: pass eos_id= to check that the EOS target of each row is scored"
    logits = torch.randn(*ids.shape, V, generator=gen).to(ids.device)
    before = (ids[:, 1:] == eos_id) & (mask[:, 1:] == 1)  # (N, L-1): t predicts EOS
    other = logits.clone()
    other[:, :-1][before] += 5.0 * torch.randn(int(before.sum()), V, generator=gen).to(ids.device)
    if abs(loss_value(loss_fn, logits, ids, mask) - loss_value(loss_fn, other, ids, mask)) > 1e-6:
        return True, f"the target EOS (id {eos_id}) after each row's last token is scored"
    return False, (
        f"the EOS targets (id {eos_id}) are not scored: EOS is ignored by id (PAD = EOS "
        "with the pad id ignored, or every special token masked), so the model never "
        "learns to stop; find padding by the attention mask (or the targets are misaligned: see "
        "alignment)"
    )
