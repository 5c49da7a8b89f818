"""The causal-LM loss: logits (N, L, V) and labels (N, L) -> one scalar, weighted by tokens.

``causal_lm_loss`` follows Hugging Face's causal-LM loss: pass ``labels = input_ids`` and it
shifts inside (through :func:`lmcore.shift.shift_for_next_token`, the one place that shifts).
``chunked_causal_lm_loss`` gives the same value and gradients from hidden states (N, L, D) and
the output weight (V, D) without ever holding the whole (N, L, V) logits or their gradient.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ._validate import (require_float, require_int, require_labels_in_range,
                        require_positive_int, require_tensor)
from .shift import IGNORE_INDEX, shift_for_next_token

__all__ = ["causal_lm_loss", "chunked_causal_lm_loss"]

_REDUCTIONS = ("mean", "sum", "none")
# Below this many logits the chunked loss just takes the dense path (nothing to save).
_DENSE_MAX_ELEMENTS = 1 << 22
# Auto chunk size: rows per chunk so that one chunk of logits holds about this many elements.
_CHUNK_ELEMENTS = 1 << 23


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """bf16/fp16 are reduced in float32; float32 and float64 stay as they are."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _denominator(reduction: str, n_valid: int, num_items):
    """What the summed NLL is divided by: 1 for "sum", else num_items or the valid count."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}; got {reduction!r}.")
    if num_items is not None:
        if reduction != "mean":
            raise ValueError(f"num_items only applies to reduction='mean'; got reduction={reduction!r}.")
        n = float(num_items.item() if isinstance(num_items, torch.Tensor) else num_items)
        if not n > 0:
            raise ValueError(f"num_items must be a positive count of valid targets; got {num_items!r}.")
        return n
    if reduction == "mean":
        if n_valid == 0:
            raise ValueError("no valid target: every label after the shift is ignore_index, so the "
                             "mean is 0/0. Check the labels (is everything padding?) or pass "
                             "num_items (the whole accumulated batch's count).")
        return float(n_valid)
    return 1.0


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor, *, ignore_index: int = IGNORE_INDEX,
                   reduction: str = "mean", num_items=None) -> torch.Tensor:
    """Next-token cross-entropy of ``logits`` (N, L, V) against ``labels`` (N, L).

    ``labels`` is aligned with the input (usually ``input_ids`` with ``ignore_index`` at
    padding); the shift happens here. ``"mean"`` divides the summed NLL by the number of valid
    targets, or by ``num_items`` when given (gradient accumulation: the count of the whole
    accumulated batch). ``"sum"`` returns the sum; ``"none"`` returns (N, L-1) with 0 at ignored
    targets. Low-precision logits are reduced in float32.
    """
    require_tensor("logits", logits, 3, "(N, L, V)")
    require_float("logits", logits)
    shift_logits, shift_labels = shift_for_next_token(logits, labels)
    V = logits.shape[-1]
    require_labels_in_range("labels", shift_labels, V, ignore_index)
    if not bool(torch.isfinite(shift_logits).all()):
        raise ValueError("logits contain NaN or inf; the loss would be NaN. The model's forward "
                         "pass diverged (check the learning rate, the init, or fp16 overflow).")
    valid = shift_labels != ignore_index
    denom = _denominator(reduction, int(valid.sum()), num_items)
    nll = F.cross_entropy(shift_logits.reshape(-1, V).to(_compute_dtype(logits.dtype)),
                          shift_labels.reshape(-1), ignore_index=ignore_index, reduction="none")
    nll = nll.view(shift_labels.shape)
    if reduction == "none":
        return nll
    return nll.sum() / denom


class _ChunkedLinearCE(torch.autograd.Function):
    """Summed cross-entropy of ``h @ w.T`` with its gradient computed chunk by chunk in forward.

    h (T, D), w (V, D), y (T,). Each chunk of rows forms its (C, V) logits, the NLL, and
    ``scale * (softmax - onehot)``, then folds that into grad_h (T, D) and grad_w (V, D) and
    throws the chunk away. Backward only multiplies the stored gradients by grad_output.
    """

    @staticmethod
    def forward(ctx, h, w, y, chunk_size, ignore_index, scale, need_grad):
        dt = _compute_dtype(h.dtype)
        w32 = w.to(dt)
        total = torch.zeros((), dtype=dt, device=h.device)
        grad_h = torch.zeros_like(h, dtype=dt) if need_grad else None
        grad_w = torch.zeros_like(w32) if need_grad else None
        for start in range(0, h.shape[0], chunk_size):
            hc, yc = h[start:start + chunk_size].to(dt), y[start:start + chunk_size]
            valid = yc != ignore_index
            safe_y = torch.where(valid, yc, 0)
            z = hc @ w32.T                                       # (C, V)
            lse = torch.logsumexp(z, dim=-1)
            nll = lse - z.gather(1, safe_y[:, None]).squeeze(1)
            total += nll[valid].sum()
            if need_grad:
                z.sub_(lse[:, None]).exp_()                      # softmax, in place
                z[torch.arange(z.shape[0], device=z.device), safe_y] -= 1.0
                z.mul_((valid.to(dt) * scale)[:, None])          # 0 at ignored targets
                grad_h[start:start + chunk_size] = z @ w32
                grad_w.addmm_(z.T, hc)
        if need_grad:
            ctx.save_for_backward(grad_h.to(h.dtype), grad_w.to(w.dtype))
        return total * scale

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out, grad_w * grad_out, None, None, None, None, None


def chunked_causal_lm_loss(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, *,
                           chunk_size: int | None = None, ignore_index: int = IGNORE_INDEX,
                           reduction: str = "mean", num_items=None) -> torch.Tensor:
    """``causal_lm_loss(hidden @ weight.T, labels)`` without the whole (N, L, V) logits.

    ``hidden`` (N, L, D) are the final hidden states, ``weight`` (V, D) the output projection
    (the tied embedding), ``labels`` (N, L) as for :func:`causal_lm_loss`. Rows are processed
    ``chunk_size`` at a time (default: about 8M logits per chunk); the gradients of ``hidden``
    and ``weight`` are computed in the same pass. Small problems, and ``reduction="none"``,
    take the dense path.
    """
    require_tensor("hidden", hidden, 3, "(N, L, D)")
    require_float("hidden", hidden)
    require_tensor("weight", weight, 2, "(V, D)")
    require_float("weight", weight)
    require_tensor("labels", labels, 2, "(N, L)")
    require_int("labels", labels)
    N, L, D = hidden.shape
    V = weight.shape[0]
    if weight.shape[1] != D:
        raise ValueError(f"weight must have shape (V, D) with D = {D} (hidden's last dim); got "
                         f"{tuple(weight.shape)}. Pass the output projection, e.g. model.lm_head.weight.")
    if tuple(labels.shape) != (N, L):
        raise ValueError(f"labels must have shape (N, L) = {(N, L)} to match hidden; got "
                         f"{tuple(labels.shape)}.")
    if chunk_size is not None:
        require_positive_int("chunk_size", chunk_size)
    if reduction == "none" or N * (L - 1) * V <= _DENSE_MAX_ELEMENTS:
        return causal_lm_loss(hidden @ weight.T, labels, ignore_index=ignore_index,
                              reduction=reduction, num_items=num_items)
    if L < 2:
        raise ValueError(f"a sequence needs L >= 2 tokens to give a next-token target; got L = {L}.")
    y = labels[:, 1:].reshape(-1)
    require_labels_in_range("labels", y[None], V, ignore_index)
    denom = _denominator(reduction, int((y != ignore_index).sum()), num_items)
    h = hidden[:, :-1].reshape(-1, D)
    rows = chunk_size or max(1, _CHUNK_ELEMENTS // V)
    need_grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    loss = _ChunkedLinearCE.apply(h, weight, y, rows, ignore_index, 1.0 / denom, need_grad)
    if not bool(torch.isfinite(loss)):
        raise ValueError("hidden or weight contain NaN or inf; the loss would be NaN.")
    return loss
