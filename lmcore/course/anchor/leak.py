"""Notebook 04's leaking data pipeline: nanoGPT-style pre-shifted targets cut one token short
(targets equal to inputs), lmcore's fix and a short run of each.
Re-exported by :mod:`lmcore.course.anchor.lesson`."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..toys import fit, toy_gpt

__all__ = ["get_batch_leaky", "get_batch_reference", "pipeline_run"]


def get_batch_leaky(data: torch.Tensor, starts, block_size: int):
    """The provided pipeline: inputs and targets (N, block_size) cut from a 1-D token stream."""
    chunks = torch.stack([data[s : s + block_size + 1] for s in starts])  # (N, block_size + 1)
    x = chunks[:, :-1]
    y = chunks[:, :block_size]
    return x, y


def get_batch_reference(data: torch.Tensor, starts, block_size: int):
    """Reference fix: the target of input position t is the token at t+1."""
    chunks = torch.stack([data[s : s + block_size + 1] for s in starts])
    return chunks[:, :-1], chunks[:, 1:]


def pipeline_run(
    get_batch, *, vocab_size: int = 65, steps: int = 20, block_size: int = 32, batch: int = 16, seed: int = 0
) -> list[float]:
    """Train a fresh GPT on a random token stream with ``get_batch`` and nanoGPT's loss
    ``F.cross_entropy(logits, y)`` (targets arrive pre-shifted). Returns the loss per step;
    losses[0] is the first loss. Random tokens: an honest pipeline cannot go below ln V."""
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(vocab_size, (20_000,), generator=g)
    model = toy_gpt(vocab_size, block_size=block_size, n_embd=32, seed=seed)

    def next_batch(step):
        starts = torch.randint(len(data) - block_size - 1, (batch,), generator=g).tolist()
        return get_batch(data, starts, block_size)  # (x, y), pre-shifted

    return fit(
        model,
        next_batch,
        steps=steps,
        lr=1e-2,
        loss_fn=lambda m, xy: F.cross_entropy(m(xy[0]).reshape(-1, vocab_size), xy[1].reshape(-1)),
    )
