"""The optimiser and the learning-rate schedule used by :mod:`lmcore.train`.

AdamW with weight decay on matrices only (linear weights and embeddings; never biases or
LayerNorm gains), fused on CUDA; linear warmup then cosine decay to ``min_lr``.
"""

from __future__ import annotations

import math

import torch

from .._validate import require_int_scalar, require_real

__all__ = ["configure_optimizer", "lr_at"]


def configure_optimizer(
    model: torch.nn.Module, *, lr: float, weight_decay: float, betas=(0.9, 0.99), device_type: str = "cpu"
) -> torch.optim.AdamW:
    """AdamW over ``model``'s parameters, decaying only those with 2 or more dimensions."""
    require_real("lr", lr, min=0.0, min_inclusive=False)
    require_real("weight_decay", weight_decay, min=0.0)
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"betas must be a pair (beta1, beta2); got {betas!r}.")
    for k, b in enumerate(betas):
        if require_real(f"betas[{k}]", b, min=0.0, max=1.0) == 1.0:
            raise ValueError(f"betas[{k}] must be below 1; got 1.0.")
    params = [p for p in model.parameters() if p.requires_grad]  # a tied weight appears once
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    extra = {"fused": True} if device_type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), **extra)


def lr_at(step: int, *, lr: float, min_lr: float, warmup_steps: int, max_steps: int) -> float:
    """Learning rate for optimiser step ``step`` (0-based).

    Linear warmup from lr/warmup_steps to lr over the first ``warmup_steps`` steps, then a
    cosine from lr down to ``min_lr`` at ``max_steps``; ``min_lr`` after that.
    """
    require_int_scalar("step", step, min=0)
    require_int_scalar("warmup_steps", warmup_steps, min=0)
    require_int_scalar("max_steps", max_steps, min=0)
    require_real("lr", lr, min=0.0)
    require_real("min_lr", min_lr, min=0.0, max=float(lr))
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)
