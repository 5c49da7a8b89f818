"""Gradient accumulation over micro-batches and ranks: the gradients of one big batch.

A step's gradient must be that of the mean loss over every valid target of the whole batch,
however the batch is cut into micro-batches (``grad_accum``) and processes (``torchrun``), and
however unevenly its rows are padded. So each micro-batch's *summed* NLL is divided by the
valid targets of the whole global batch (counted on the host, all-reduced across ranks) and
multiplied by the world size, because DistributedDataParallel averages gradients over ranks.
"""

from __future__ import annotations

import contextlib

import torch

from ..loss import causal_lm_loss
from ..shift import num_valid_targets
from .distributed import DistContext, all_reduce_sum, no_sync

__all__ = ["NonFiniteLossError", "accumulate_gradients", "backward_micro_batches", "model_kwargs"]


class NonFiniteLossError(FloatingPointError):
    """A training step's logits, loss or gradient is NaN or inf (the update is not applied)."""


def model_kwargs(batch: dict) -> dict:
    return {k: batch[k] for k in ("document_ids", "position_ids") if k in batch}


def backward_micro_batches(model, micro_batches, autocast, ctx: DistContext, device):
    """Backward over this rank's micro-batches; returns (its summed NLL, the global count).

    Each micro-batch's summed NLL is multiplied by world_size / (valid targets of every
    micro-batch on every rank): DDP averages gradients over ranks, so the total gradient is
    that of the mean over the whole global batch. No host sync here except the loss's checks.
    """
    local = sum(num_valid_targets(b["labels"]) for b in micro_batches)  # on the host's batches
    if local == 0 and not ctx.enabled:
        raise ValueError("no valid target in this step's micro-batches: every label is -100.")
    acc = torch.float32 if device.type == "mps" else torch.float64
    count = all_reduce_sum(torch.full((), float(local), dtype=acc, device=device), ctx)  # a fill
    total = torch.zeros((), dtype=acc, device=device)
    for i, b in enumerate(micro_batches):
        b = {k: v.to(device, non_blocking=True) for k, v in b.items()}
        last = i == len(micro_batches) - 1
        with contextlib.nullcontext() if last else no_sync(model):  # all-reduce once per step
            with autocast():
                logits = model(b["input_ids"], **model_kwargs(b))
            try:
                nll = causal_lm_loss(logits, b["labels"], reduction="sum")  # sync: its input checks
            except ValueError:
                if bool(torch.isfinite(logits.detach()).all()):  # sync, only on this failure
                    raise
                if not ctx.enabled:
                    raise NonFiniteLossError("the model produced NaN/inf logits") from None
                # Other ranks are about to all-reduce their gradients: join them with a NaN
                # loss, so every rank sees a NaN norm and all stop at the same step.
                nll = logits.float().sum() * float("nan")
            (nll * ctx.world_size / count.to(nll.dtype)).backward()  # world 1: nll / count
        total += nll.detach().to(acc)
    return total, count


def accumulate_gradients(
    model, micro_batches, autocast=contextlib.nullcontext, *, ctx: DistContext | None = None
) -> tuple:
    """Backward over ``micro_batches`` so the gradients equal those of their concatenation.

    Each micro-batch's summed NLL is divided by ``num_items``, the valid targets of *all*
    micro-batches together (of all ranks, under ``ctx``), not by its own count (that would
    weight a padded micro-batch like a full one). Returns ``(total_nll, num_items)`` of the
    whole (global) batch. Raises :class:`NonFiniteLossError` on NaN/inf logits.
    """
    device = next(model.parameters()).device
    ctx = ctx or DistContext(device=device)
    total, count = backward_micro_batches(model, micro_batches, autocast, ctx, device)
    return float(all_reduce_sum(total, ctx)), int(count.item())
