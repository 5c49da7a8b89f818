"""Notebook 04's leaking data pipeline: nanoGPT-style pre-shifted targets cut one token short
(targets equal to inputs), lmcore's fix, a short run of each, and the exercise's checker.
Re-exported by :mod:`lmcore.course.anchor`."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..model import GPT, GPTConfig
from ..train.devices import cpu_threads
from .checks import Case, check

__all__ = ["get_batch_leaky", "get_batch_reference", "pipeline_run", "check_get_batch"]


def get_batch_leaky(data: torch.Tensor, starts, block_size: int):
    """The provided pipeline: inputs and targets (N, block_size) cut from a 1-D token stream."""
    chunks = torch.stack([data[s: s + block_size + 1] for s in starts])    # (N, block_size + 1)
    x = chunks[:, :-1]
    y = chunks[:, :block_size]
    return x, y


def get_batch_reference(data: torch.Tensor, starts, block_size: int):
    """Reference fix: the target of input position t is the token at t+1."""
    chunks = torch.stack([data[s: s + block_size + 1] for s in starts])
    return chunks[:, :-1], chunks[:, 1:]


def pipeline_run(get_batch, *, vocab_size: int = 65, steps: int = 20, block_size: int = 32,
                 batch: int = 16, seed: int = 0) -> list[float]:
    """Train a fresh GPT on a random token stream with ``get_batch`` and nanoGPT's loss
    ``F.cross_entropy(logits, y)`` (targets arrive pre-shifted). Returns the loss per step;
    losses[0] is the first loss. Random tokens: an honest pipeline cannot go below ln V."""
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(vocab_size, (20_000,), generator=g)
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=1, n_head=2,
                          n_embd=32))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    losses = []
    with cpu_threads(1):
        for _ in range(steps):
            starts = torch.randint(len(data) - block_size - 1, (batch,), generator=g).tolist()
            x, y = get_batch(data, starts, block_size)
            loss = F.cross_entropy(model(x).reshape(-1, vocab_size), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    return losses


def check_get_batch(fn, quiet: bool = False) -> bool:
    """Grade ``fn(data (T,), starts, block_size) -> (x, y)``, each (N, block_size)."""
    g = torch.Generator().manual_seed(5)
    cases = []
    for T, n, B in ((40, 3, 4), (100, 5, 9), (64, 2, 16), (25, 4, 1)):
        data = torch.randint(50, (T,), generator=g)
        starts = torch.randint(T - B - 1, (n,), generator=g).tolist()
        cases.append(Case((data, starts, B), label=f"stream of {T} tokens, starts {starts}, "
                                                  f"block_size {B}"))
    return check("get_batch", fn, get_batch_reference, cases, quiet=quiet, atol=0, rtol=0,
                 hint="y must be x moved one token to the left: target t is the token at t+1, "
                      "which x[:, t] has not seen.")
