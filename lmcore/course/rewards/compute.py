"""Notebook 10, compute and generation: what one training step costs (C = 6 N D, counted by
PyTorch's FLOP counter), how many targets a causal and a masked LM get per sequence, and the
extra loss after one wrong token in the prefix (exposure bias) at any temperature.
"""

from __future__ import annotations

import torch

from ..._validate import require_int_scalar, require_real, require_tensor

__all__ = ["training_flops", "supervised_targets", "counted_train_flops", "injected_error_gap"]


def training_flops(n_params: int, n_tokens: int) -> int:
    """C = 6 N D: forward (2 per parameter per token) plus backward (4)."""
    return (
        6 * require_int_scalar("n_params", n_params, min=0) * require_int_scalar("n_tokens", n_tokens, min=0)
    )


def supervised_targets(length: int, objective: str = "causal", mask_rate: float = 0.15) -> float:
    """Targets one sequence of ``length`` tokens gives: ``length - 1`` for a causal LM, the
    masked share ``mask_rate * length`` for a masked LM (BERT's 15%)."""
    length = require_int_scalar("length", length, min=2)
    if objective == "causal":
        return float(length - 1)
    if objective == "masked":
        return require_real("mask_rate", mask_rate, min=0.0, max=1.0) * length
    raise ValueError(f"objective must be 'causal' or 'masked'; got {objective!r}.")


def counted_train_flops(model, input_ids) -> int:
    """Matmul FLOPs of one forward + backward of the LM loss, as PyTorch's FlopCounterMode
    counts them (on the CPU it counts the weight matmuls, not attention's score products)."""
    from torch.utils.flop_counter import FlopCounterMode

    from ...loss import causal_lm_loss

    with FlopCounterMode(display=False) as counter:
        causal_lm_loss(model(input_ids), input_ids).backward()
    model.zero_grad(set_to_none=True)
    return int(counter.get_total_flops())


@torch.no_grad()
def injected_error_gap(
    model, rows, *, at: int, horizon: int = 5, temperature: float = 1.0, seed: int = 0
) -> dict:
    """Loss of the ``horizon`` true tokens after position ``at``, with the true prefix
    (``"clean"``) and with the token at ``at`` replaced by a random wrong one
    (``"corrupted"``): two (horizon,) means over the rows (N, L), under
    ``softmax(logits / temperature)``."""
    rows = require_tensor("rows", rows, 2, "(N, L)")
    horizon = require_int_scalar("horizon", horizon, min=1)
    at = require_int_scalar("at", at, min=0, max=rows.shape[1] - horizon - 1)
    t = require_real("temperature", temperature, min=1e-3)
    gen = torch.Generator().manual_seed(seed)
    bad = rows.clone()
    shift = torch.randint(1, model.config.vocab_size, (len(rows),), generator=gen)
    bad[:, at] = (rows[:, at] + shift) % model.config.vocab_size
    was = model.training
    model.eval()
    out = {}
    for name, x in (("clean", rows), ("corrupted", bad)):
        lp = torch.log_softmax(model(x).double() / t, dim=-1)[:, at : at + horizon]  # (N, h, V)
        out[name] = -lp.gather(2, rows[:, at + 1 : at + 1 + horizon, None])[..., 0].mean(0)
    model.train(was)
    return out
