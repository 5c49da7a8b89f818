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

from .diagnose_probes import loss_value

__all__ = [
    "module_of",
    "eval_mode",
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
