"""The checks on the model (causality, reading the padding, left padding, the first loss), and
the eval mode they run under.

Each ``check_*`` calls ``forward(input_ids, attention_mask)`` through ``call`` and returns
``(passed, detail)`` (check_first_loss also the loss); ``passed`` is None for a skipped check.
``module_of`` finds the module behind ``forward``; ``eval_mode`` switches every submodule to eval
mode and restores each one's mode after.
"""

from __future__ import annotations

import contextlib
import math

import torch

from .probes import loss_value


class NotFiniteLogits(ArithmeticError):
    """forward gave NaN or an infinity at a position the attention mask lets a real token use."""


def real_logits(logits: torch.Tensor, mask: torch.Tensor):
    """(logits with every position the mask excludes set to 0, how many excluded positions held
    NaN/inf); NotFiniteLogits where a real position does."""
    bad = ~torch.isfinite(logits).all(-1)
    real = mask == 1
    if bool((bad & real).any()):
        n, t = (int(i) for i in (bad & real).nonzero()[0])
        raise NotFiniteLogits(f"forward gives NaN/inf logits at real token (row {n}, t = {t})")
    return logits.masked_fill(~real[..., None], 0.0), int((bad & ~real).sum())


def check_finite_logits(forward_raw, probes):
    """probes: [(what, ids, mask)]; the logits must be finite wherever the mask has a real token
    (NaN at positions it excludes, such as the queries of left padding, is ignored)."""
    excluded = 0
    for what, ids, mask in probes:
        try:
            excluded += real_logits(forward_raw(ids, mask), mask)[1]
        except NotFiniteLogits as err:
            return False, (
                f"{err} for {what}. Likely causes: NaN/inf weights or an init that overflows "
                "(fp16 activations); an attention row whose every key is masked (a mask that hides "
                "a real token from itself); a division by a count of 0 inside the model"
            )
    text = "the logits are finite at every real token"
    if excluded:
        text += (
            f"; NaN/inf at {excluded} positions the attention mask excludes (padding queries, as in "
            "nn.TransformerEncoderLayer's eval fast path with left padding) are ignored: no real "
            "token reads them and no check uses them"
        )
    return True, text


__all__ = [
    "module_of",
    "eval_mode",
    "NotFiniteLogits",
    "real_logits",
    "check_finite_logits",
    "check_future",
    "check_padding_unread",
    "check_left_padding",
    "check_first_loss",
]


def module_of(forward, model):
    """The module whose mode the model checks switch: ``model``, else ``forward`` itself if it is
    a module, else the module a bound method belongs to, else None."""
    if model is not None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"model must be a torch.nn.Module (the one forward calls); got {type(model).__name__}."
            )
        return model
    if isinstance(forward, torch.nn.Module):
        return forward
    owner = getattr(forward, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


@contextlib.contextmanager
def eval_mode(module):
    """Every submodule in eval mode inside; each one's previous mode restored after."""
    modes = [(m, m.training) for m in module.modules()] if module is not None else []
    for m, _ in modes:
        m.training = False
    try:
        yield
    finally:
        for m, was in modes:
            m.training = was


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
                f"position {cut} on change: the model sees the future. Likely causes: no causal "
                "mask (an attention called with only the padding mask, is_causal=False), a mask "
                "off by one, inputs that are the labels, a non-causal layer (bidirectional "
                "convolution, a normalisation over the sequence)"
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
        "the real tokens' logits change when only the padding in front of them changes: the model "
        "reads the padding. Likely causes: the attention mask is ignored (model(input_ids) "
        "without it) or inverted (1 taken as 'masked'). Under right padding alone a causal "
        "model never reads the padding: if this pipeline never left-pads, pass left_padding=False"
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
                "same row without padding. Likely causes: positions are not reset (position_ids "
                "= attention_mask.cumsum(-1) - 1) with absolute positions; the padding is read "
                "(see padding_unread). If this pipeline never left-pads, pass left_padding=False"
            )
    return True, "left-padded rows give the logits of the same rows without padding"


def check_first_loss(call, loss_fn, ids, mask, V, tol, pretrained: bool, ratio: float = 1.0):
    if pretrained:
        return None, "skipped: pretrained=True (a trained start is not expected near ln V)", None
    value, ln_v = loss_value(loss_fn, call(ids, mask), ids, mask), math.log(V)
    target = ln_v / ratio
    name = f"ln V = {ln_v:.2f}" if ratio == 1 else f"ln V / num_items_ratio = {target:.2f}"
    text = f"first loss within {tol * target:.2f} of {name} (before training)"
    if abs(value - target) <= tol * target:
        return True, text, value
    head = f"first loss {value:.2f}, not within {tol * target:.2f} of {name}"
    if value < target:
        return (
            False,
            f"{head}: far below at init. Likely causes: the target leaks into the input (check the "
            "shift and the causal mask: see alignment, future); the model is already trained "
            "(pass pretrained=True); the loss is scaled down (see zero_logits)",
            value,
        )
    return (
        False,
        f"{head}: far above. Likely causes: the initial logits are too large (check the init "
        "scale of the output layer); the loss is scaled up (see zero_logits); the model is already "
        "trained on other data (pass pretrained=True)",
        value,
    )
