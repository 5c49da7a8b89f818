"""Notebook 10, compute and generation: what one training step costs (C = 6 N D, counted by
PyTorch's FLOP counter, and attention's own products that it leaves out), how many targets a
causal and a masked LM get per sequence, the extra loss after one wrong token in the prefix
(exposure bias) at any temperature, and the held-out loss of count models that read no context
or one previous token (what a model that uses little context is measured against).
"""

from __future__ import annotations

import torch

from ..._validate import (
    require_ids_in_range,
    require_int_scalar,
    require_real,
    require_tensor,
    require_token_ids,
)

__all__ = [
    "training_flops",
    "supervised_targets",
    "counted_train_flops",
    "weight_matrix_entries",
    "attention_pair_flops",
    "injected_error_gap",
    "count_model_loss",
]


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


def weight_matrix_entries(model) -> int:
    """Entries of the weight matrices of the model's ``nn.Linear`` layers (a tied matrix once):
    the parameters that take part in a matmul, without biases, LayerNorm gains or embeddings
    that are only looked up."""
    seen, total = set(), 0
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) and id(m.weight) not in seen:
            seen.add(id(m.weight))
            total += m.weight.numel()
    return total


def attention_pair_flops(n_layer: int, n_embd: int, n_rows: int, length: int) -> int:
    """FLOPs of attention's own products over every (query, key) pair of ``n_rows`` rows of
    ``length`` tokens, forward and backward: ``Q K^T`` and the weighted sum of ``V``, each
    ``2 L^2 D`` per layer and row forward, three times that with the backward:
    ``12 n_layer N L^2 D``. No weight takes part, so ``6 N D`` leaves them out."""
    n_layer, n_embd, n_rows, length = (
        require_int_scalar(name, v, min=1)
        for name, v in (("n_layer", n_layer), ("n_embd", n_embd), ("n_rows", n_rows), ("length", length))
    )
    return 12 * n_layer * n_rows * length**2 * n_embd


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


def count_model_loss(train_ids, eval_ids, vocab_size: int, *, context: int = 1, k: float = 0.5) -> float:
    """Mean loss (nats per token) on ``eval_ids`` of a count model built from ``train_ids``: the
    next token's frequencies after the ``context`` tokens before it (0: none, the unigram model;
    1: the previous token, the bigram model), each count plus ``k`` (add-k smoothing, so no token
    gets probability 0). The first ``context`` tokens of ``eval_ids`` are not scored."""
    V = require_int_scalar("vocab_size", vocab_size, min=1)
    c = require_int_scalar("context", context, min=0, max=2)
    k = require_real("k", k, min=0.0, min_inclusive=False)
    train_ids, eval_ids = (
        require_ids_in_range(name, require_token_ids(name, ids).flatten(), V)
        for name, ids in (("train_ids", train_ids), ("eval_ids", eval_ids))
    )
    for name, ids in (("train_ids", train_ids), ("eval_ids", eval_ids)):
        if len(ids) <= c:
            raise ValueError(f"{name} must hold more than context = {c} ids; got {len(ids)}.")

    def index(ids):  # each scored position: its context and itself as one number in [0, V^(c+1))
        n = len(ids) - c
        out = torch.zeros(n, dtype=torch.long)
        for j in range(c + 1):
            out = out * V + ids[j : j + n]
        return out

    counts = torch.bincount(index(train_ids), minlength=V ** (c + 1)).double().view(-1, V)
    probs = (counts + k) / (counts.sum(1, keepdim=True) + k * V)
    return float(-probs.view(-1)[index(eval_ids)].log().mean())
