"""Notebook 03, section 4: what one attention head computes, and the causal mask drawn as an
L x L grid (the lower triangle). Plain tensors, one head, no batching tricks: the same
arithmetic as ``F.scaled_dot_product_attention(q, k, v, is_causal=True)``.
"""

from __future__ import annotations

import math

import torch

from ..._validate import require_float, require_int_scalar, require_tensor

__all__ = ["causal_mask", "attention", "format_mask", "format_weights"]


def causal_mask(length: int) -> torch.Tensor:
    """Bool (L, L): True where query position i may attend to key position j, i.e. j <= i."""
    require_int_scalar("length", length, min=1)
    return torch.ones(length, length, dtype=torch.bool).tril()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True):
    """One head: ``weights = softmax(q k^T / sqrt(d))`` over the keys, with the scores of future
    keys set to -inf when ``causal``; returns ``(weights @ v, weights)``.

    q, k: (L, d); v: (L, d_v). Row i of ``weights`` (L, L) says how much position i takes from
    each position j; it sums to 1 and, with the causal mask, is 0 for every j > i.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_tensor(name, t, 2, "(L, d)")
        require_float(name, t)
    if q.shape != k.shape or v.shape[0] != q.shape[0]:
        raise ValueError(
            f"q and k must both be (L, d) and v (L, d_v); got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}."
        )
    scores = q @ k.T / math.sqrt(q.shape[-1])  # (L, L)
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[0]), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def format_mask(tokens) -> str:
    """The causal mask as a grid: one row per query position, one column per key position,
    ``x`` where attending is allowed and ``.`` where the key lies in the future."""
    tokens = [str(t) for t in tokens]
    w = max(len(t) for t in tokens) + 1
    mask = causal_mask(len(tokens))
    lines = [" " * (w + 8) + "".join(f"{t:>{w}}" for t in tokens) + "   <- key j"]
    for i, t in enumerate(tokens):
        cells = "".join(f"{'x' if mask[i, j] else '.':>{w}}" for j in range(len(tokens)))
        lines.append(f"query {i} {t:>{w}}{cells}")
    return "\n".join(lines)


def format_weights(weights: torch.Tensor, tokens) -> str:
    """Attention weights (L, L) as a table with two decimals, one row per query position."""
    tokens = [str(t) for t in tokens]
    w = max(max(len(t) for t in tokens) + 1, 6)
    lines = [" " * (w + 1) + "".join(f"{t:>{w}}" for t in tokens)]
    for i, t in enumerate(tokens):
        lines.append(f"{t:>{w}} " + "".join(f"{float(x):>{w}.2f}" for x in weights[i]))
    return "\n".join(lines)
