"""The individual checks behind :func:`lmcore.diagnose.run_checks`.

Each ``check_*`` returns ``(passed, detail)``; ``passed`` is None for a check that was skipped
(the detail says why). Loss checks call ``loss_fn(logits, input_ids, attention_mask)`` with
hand-made logits; model checks call ``forward(input_ids, attention_mask)``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

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

BIG = 20.0  # the "perfect" logit: loss per target log(1 + (V-1) e^-20), about 0


class NotFinite(ArithmeticError):
    """loss_fn returned NaN or an infinity."""


def loss_value(loss_fn, logits, ids, mask) -> float:
    """loss_fn's value as a float, without building a graph; NotFinite for NaN/inf."""
    with torch.no_grad():
        value = loss_fn(logits, ids, mask)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"loss_fn must return a scalar (a one-element tensor or a float); got "
            f"{tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}."
        )
    if not math.isfinite(value):
        raise NotFinite(f"loss_fn returned {value}")
    return float(value)


def place(ids: torch.Tensor, offset: int, V: int) -> torch.Tensor:
    """Logits (N, L, V): BIG on ids[:, t + offset] at each position t where that exists, else 0."""
    N, L = ids.shape
    logits = torch.zeros(N, L, V, device=ids.device)
    for t in range(max(0, -offset), min(L, L - offset)):
        logits[torch.arange(N), t, ids[:, t + offset]] = BIG
    return logits


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


def _tol(out):
    return 1e-5 * max(1.0, float(out.abs().max()))


def check_future(call, ids, mask, draw, switched: bool):
    N, L = ids.shape
    out = call(ids, mask)
    if not torch.equal(out, call(ids, mask)):
        how = (
            "even in eval mode"
            if switched
            else "(dropout on? pass model= so run_checks can switch it to eval mode)"
        )
        return False, f"forward gives different logits for the same input {how}"
    for cut in sorted({1, L // 2, L - 1}):
        changed = ids.clone()
        changed[:, cut:] = draw(N, L - cut)
        changed[:, cut] = torch.where(changed[:, cut] == ids[:, cut], draw(N, 1)[:, 0], changed[:, cut])
        moved = ((call(changed, mask)[:, :cut] - out[:, :cut]).abs().amax(dim=(0, 2)) > _tol(out)).nonzero()
        if len(moved):
            return False, (
                f"the logits at position {int(moved[0])} change when only tokens from "
                f"position {cut} on change: the model sees the future (no causal "
                "mask, or its inputs are the labels)"
            )
    return True, "changing tokens from position c on leaves the logits before c unchanged"


def check_padding_unread(call, ids, mask, draw, enabled: bool):
    """Left-padded rows: what the padding contains must not move the real tokens' logits."""
    if not enabled:
        return None, "skipped: left_padding=False (the pipeline never sees left-padded rows)"
    out = call(ids, mask)
    other = torch.where(mask == 1, ids, draw(*ids.shape))
    if ((call(other, mask) - out).abs().amax(-1)[mask == 1] <= _tol(out)).all():
        return True, "changing what the padding holds leaves the real tokens' logits unchanged"
    return False, (
        "the real tokens' logits change when only the padding changes: the model reads "
        "the padding (the attention mask is ignored or inverted)"
    )


def check_left_padding(call, ids, mask, enabled: bool):
    """Each left-padded row's real tokens must get the logits of the same row without padding."""
    if not enabled:
        return None, "skipped: left_padding=False (the pipeline never sees left-padded rows)"
    out = call(ids, mask)
    for n in range(len(ids)):
        real = mask[n] == 1
        alone = call(ids[n : n + 1, real], torch.ones_like(ids[n : n + 1, real]))
        if (alone[0] - out[n, real]).abs().max() > _tol(out):
            return False, (
                f"a row with {int((~real).sum())} pads in front gets other logits than the "
                "same row without padding: positions are not reset (position_ids = "
                "attention_mask.cumsum(-1) - 1) or the padding is read"
            )
    return True, "left-padded rows give the logits of the same rows without padding"


def check_first_loss(call, loss_fn, ids, mask, V, tol, pretrained: bool):
    if pretrained:
        return None, "skipped: pretrained=True (a trained start is not expected near ln V)", None
    value, ln_v = loss_value(loss_fn, call(ids, mask), ids, mask), math.log(V)
    text = f"first loss within {tol * ln_v:.2f} of ln V = {ln_v:.2f} (before training)"
    if abs(value - ln_v) <= tol * ln_v:
        return True, text, value
    if value < ln_v:
        return (
            False,
            (
                f"first loss {value:.2f}, not within {tol * ln_v:.2f} of ln V = {ln_v:.2f}: far "
                "below ln V at init: the target leaks into the input (check the shift and "
                "the causal mask), or the model is already trained (pretrained=True)"
            ),
            value,
        )
    return (
        False,
        (
            f"first loss {value:.2f}, not within {tol * ln_v:.2f} of ln V = {ln_v:.2f}: far "
            "above ln V: the initial logits are too large (check the init scale)"
        ),
        value,
    )
