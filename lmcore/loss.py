"""The causal-LM loss: logits (N, L, V) and labels (N, L) -> one scalar, weighted by tokens.

``causal_lm_loss`` follows Hugging Face's causal-LM loss: pass ``labels = input_ids`` and it
shifts inside (through :func:`lmcore.shift.shift_for_next_token`, the one place that shifts).
``chunked_causal_lm_loss`` gives the same value and gradients from hidden states (N, L, D) and
the output weight (V, D) without ever holding the whole (N, L, V) logits or their gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._validate import (
    require_float,
    require_int,
    require_labels_in_range,
    require_positive_int,
    require_real,
    require_tensor,
    require_values,
)
from .loss_rules import compute_dtype, denominator, require_finite, require_ignore_index
from .shift import IGNORE_INDEX, shift_for_next_token

__all__ = ["causal_lm_loss", "chunked_causal_lm_loss"]

# Below this many logits the chunked loss just takes the dense path (nothing to save).
_DENSE_MAX_ELEMENTS = 1 << 22
# Auto chunk size: rows per chunk so that one chunk of logits holds about this many elements
# (64 MiB in float32; larger chunks mean fewer passes over grad_w (V, D), smaller less memory).
_CHUNK_ELEMENTS = 1 << 24


def causal_lm_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    ignore_index: int = IGNORE_INDEX,
    reduction: str = "mean",
    num_items=None,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """Next-token cross-entropy of ``logits`` (N, L, V) against ``labels`` (N, L).

    ``labels`` is aligned with the input (usually ``input_ids`` with ``ignore_index`` at
    padding); the shift happens here. ``"mean"`` divides the summed NLL by the number of valid
    targets, or by ``num_items`` when given (gradient accumulation: the count of the whole
    accumulated batch). ``"sum"`` returns the sum; ``"none"`` returns (N, L-1) with 0 at ignored
    targets. Low-precision logits are reduced in float32.

    ``label_smoothing`` (0 to 1) trains each valid target against
    ``q = (1 - label_smoothing) * onehot(target) + label_smoothing / V``, as
    ``F.cross_entropy(..., label_smoothing=)`` does (notebook 03's second exercise).
    """
    require_tensor("logits", logits, 3, "(N, L, V)")
    require_float("logits", logits)
    require_values("logits", logits)
    if isinstance(labels, torch.Tensor):
        require_values("labels", labels)
    ignore_index = require_ignore_index(ignore_index)
    label_smoothing = require_real("label_smoothing", label_smoothing, min=0, max=1)
    shift_logits, shift_labels = shift_for_next_token(logits, labels)
    V = logits.shape[-1]
    if V == 0:
        raise ValueError(
            f"logits must score at least one token (V >= 1); got shape "
            f"{tuple(logits.shape)}. The last dimension is the vocabulary."
        )
    require_labels_in_range("labels", shift_labels, V, ignore_index)
    require_finite("logits", shift_logits)
    valid = shift_labels != ignore_index
    denom = denominator(reduction, int(valid.sum()), num_items)
    nll = F.cross_entropy(
        shift_logits.reshape(-1, V).to(compute_dtype(logits.dtype)),
        shift_labels.reshape(-1).long(),
        ignore_index=ignore_index,
        reduction="none",
        label_smoothing=label_smoothing,
    )
    nll = nll.view(shift_labels.shape)
    if reduction == "none":
        return nll
    return nll.sum() / denom


class _ChunkedLinearCE(torch.autograd.Function):
    """Summed cross-entropy of ``h @ w.T`` with its gradient computed chunk by chunk in forward.

    h (T, D), w (V, D), y (T,). Only the valid rows (y != ignore_index) are computed: ignored
    targets contribute neither loss nor gradient. Each chunk of rows forms its (C, V) logits,
    turns them in place into ``scale * (softmax - onehot)``, folds that into grad_h (T, D) and
    grad_w (V, D), and is thrown away. Backward only multiplies the stored gradients by
    grad_output.
    """

    @staticmethod
    def forward(ctx, h, w, y, chunk_size, ignore_index, scale, need_grad):
        dt = compute_dtype(h.dtype)
        need_h = need_grad and ctx.needs_input_grad[0]
        need_w = need_grad and ctx.needs_input_grad[1]
        idx = (y != ignore_index).nonzero().squeeze(1)
        hv, yv = h.index_select(0, idx), y.index_select(0, idx)  # (T_valid, D), (T_valid,)
        wc = w.to(dt)
        total = torch.zeros((), dtype=dt, device=h.device)
        grad_hv = torch.empty_like(hv, dtype=dt) if need_h else None
        grad_w = torch.zeros_like(wc) if need_w else None
        for start in range(0, hv.shape[0], chunk_size):
            hc, yc = hv[start : start + chunk_size].to(dt), yv[start : start + chunk_size, None]
            z = hc @ wc.T  # (C, V) logits
            z_y = z.gather(1, yc)  # (C, 1) target logits
            m = z.amax(dim=1, keepdim=True)
            z.sub_(m).exp_()
            s = z.sum(dim=1, keepdim=True)
            total += (s.log() + m - z_y).sum()  # logsumexp - z_y
            if need_h or need_w:
                z.mul_(scale / s)  # scale * softmax, in place
                z.scatter_add_(1, yc, torch.full_like(z_y, -scale))  # - scale * onehot
                if need_h:
                    torch.matmul(z, wc, out=grad_hv[start : start + chunk_size])
                if need_w:
                    grad_w.addmm_(z.T, hc)
        grad_h = None
        if need_h:
            grad_h = torch.zeros(h.shape, dtype=h.dtype, device=h.device)
            grad_h.index_copy_(0, idx, grad_hv.to(h.dtype))
        if need_w:
            grad_w = grad_w.to(w.dtype)
        ctx.save_for_backward(grad_h, grad_w)
        return total * scale

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        if not bool(grad_out == 1):  # usually loss.backward(): 1
            grad_h = None if grad_h is None else grad_h * grad_out
            grad_w = None if grad_w is None else grad_w * grad_out
        return grad_h, grad_w, None, None, None, None, None


def chunked_causal_lm_loss(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    *,
    chunk_size: int | None = None,
    ignore_index: int = IGNORE_INDEX,
    reduction: str = "mean",
    num_items=None,
) -> torch.Tensor:
    """``causal_lm_loss(hidden @ weight.T, labels)`` without the whole (N, L, V) logits.

    ``hidden`` (N, L, D) are the final hidden states, ``weight`` (V, D) the output projection
    (the tied embedding), ``labels`` (N, L) as for :func:`causal_lm_loss`. Rows are processed
    ``chunk_size`` rows at a time (default: about 16M logits, 64 MiB in float32, per chunk);
    the gradients of ``hidden`` and ``weight`` are computed in the same pass, so backward only
    scales them. Ignored targets are skipped. Small problems (at most ~4M logits) and
    ``reduction="none"`` take the dense path.

    PyTorch 2.13 ships the same idea as ``torch.nn.functional.linear_cross_entropy(h, weight, y,
    options=torch.nn.LinearCrossEntropyOptions())``: chunks, gradients inside the forward, no
    full logits. It does not shift: pass ``hidden[:, :-1].reshape(-1, D)`` and
    ``labels[:, 1:].reshape(-1)`` (tests/test_native_loss.py checks both agree in value and
    gradients). Use this one to read how it works, on older torch, or for ``num_items``; the
    native one in production (see the README's loss-memory table for which is faster).
    """
    require_tensor("hidden", hidden, 3, "(N, L, D)")
    require_float("hidden", hidden)
    require_tensor("weight", weight, 2, "(V, D)")
    require_float("weight", weight)
    require_tensor("labels", labels, 2, "(N, L)")
    require_int("labels", labels)
    for name, x in (("hidden", hidden), ("weight", weight), ("labels", labels)):
        require_values(name, x)
    ignore_index = require_ignore_index(ignore_index)
    N, L, D = hidden.shape
    V = weight.shape[0]
    if V == 0:
        raise ValueError(
            f"weight must have at least one row (V >= 1, shape (V, D)); got shape {tuple(weight.shape)}."
        )
    if weight.shape[1] != D:
        raise ValueError(
            f"weight must have shape (V, D) with D = {D} (hidden's last dim); got "
            f"{tuple(weight.shape)}. Pass the output projection, e.g. model.lm_head.weight."
        )
    if tuple(labels.shape) != (N, L):
        raise ValueError(
            f"labels must have shape (N, L) = {(N, L)} to match hidden; got {tuple(labels.shape)}."
        )
    if weight.dtype != hidden.dtype:
        raise TypeError(
            f"weight must have hidden's dtype {hidden.dtype}; got {weight.dtype}. "
            "Cast one of them (e.g. under torch.autocast both come out alike)."
        )
    if chunk_size is not None:
        chunk_size = require_positive_int("chunk_size", chunk_size)
    if reduction == "none" or N * max(L - 1, 0) * V <= _DENSE_MAX_ELEMENTS:
        # Small (or per-token) problems: plain logits through the dense loss, nothing to save.
        return causal_lm_loss(
            hidden @ weight.T, labels, ignore_index=ignore_index, reduction=reduction, num_items=num_items
        )
    shift_hidden, shift_labels = shift_for_next_token(hidden, labels)  # (N, L-1, D), (N, L-1)
    require_labels_in_range("labels", shift_labels, V, ignore_index)
    y = shift_labels.reshape(-1).long()  # (N * (L-1),)
    denom = denominator(reduction, int((y != ignore_index).sum()), num_items)
    h = shift_hidden.reshape(-1, D)  # (N * (L-1), D)
    rows = chunk_size or max(1, _CHUNK_ELEMENTS // V)
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    loss = _ChunkedLinearCE.apply(h, weight, y, rows, ignore_index, 1.0 / denom, need_grad)
    if not bool(torch.isfinite(loss)):
        raise ValueError("hidden or weight contain NaN or inf; the loss would be NaN.")
    return loss
