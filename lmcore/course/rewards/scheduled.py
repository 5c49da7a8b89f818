"""Notebook 10's scheduled sampling: the char model of the duplicates runs trained twice by one
short loop, once with teacher forcing and once with a share of its input characters replaced by
its own argmax guess (the labels stay the true text), then probed with one injected wrong
character (:func:`lmcore.course.rewards.compute.injected_error_gap`).

Both runs use the same loop (the kit's :func:`lmcore.course.toys.fit`), seed, batches and schedule
(AdamW, the cosine of :func:`lmcore.train.optim.lr_at`, gradient clipping at 1), so the only
difference is what the model reads.
"""

from __future__ import annotations

from functools import lru_cache, partial

import torch

from ..._validate import require_int_scalar, require_real, require_tensor
from ...model import GPT, GPTConfig
from ...train.optim import lr_at
from ..toys import fit
from .compute import injected_error_gap
from .data import _python_docs, split_loss

__all__ = ["own_guesses", "sampling_run", "scheduled_comparison"]


@torch.no_grad()
def own_guesses(model: GPT, x: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    """``x`` (N, L) with each input character after the first replaced, with probability ``p``,
    by the model's argmax guess for it (the guess made at the position before, from the true
    prefix). Position 0 is never replaced."""
    x = require_tensor("x", x, 2, "(N, L)")
    p = require_real("p", p, min=0.0, max=1.0)
    if p == 0:
        return x.clone()
    was = model.training
    model.eval()
    guess = model(x).argmax(-1)  # (N, L): guess[:, t] is the model's pick for x[:, t + 1]
    model.train(was)
    swap = torch.rand(x[:, 1:].shape, generator=generator) < p
    out = x.clone()
    out[:, 1:] = torch.where(swap, guess[:, :-1], x[:, 1:])
    return out


def sampling_run(train_ids: torch.Tensor, *, p: float, steps: int = 200, seed: int = 0) -> GPT:
    """A 2-layer, 64-wide char GPT (rows of 64, 16 rows a step) trained ``steps`` steps on random
    windows of ``train_ids``; each step's input has a share ``p`` of its characters replaced by
    :func:`own_guesses`, the loss is on the true next characters."""
    train_ids = require_tensor("train_ids", train_ids, 1, "(T,)")
    steps = require_int_scalar("steps", steps, min=1)
    p = require_real("p", p, min=0.0, max=1.0)
    torch.manual_seed(seed)
    V, L = _python_docs().vocab_size, 64
    if int(train_ids.max()) >= V or int(train_ids.min()) < 0:
        raise ValueError(f"train_ids must be ids of the Python docs' vocabulary [0, {V}).")
    model = GPT(GPTConfig(vocab_size=V, block_size=L, n_layer=2, n_head=2, n_embd=64))
    g = torch.Generator().manual_seed(seed)

    def batch(step):  # random windows; the input with its share p of own guesses
        starts = torch.randint(0, len(train_ids) - L, (16,), generator=g)
        x = torch.stack([train_ids[s : s + L] for s in starts.tolist()])
        return own_guesses(model, x, p, g), x  # the loss is on the true next characters

    schedule = partial(lr_at, lr=3e-3, min_lr=3e-4, warmup_steps=20, max_steps=steps)
    fit(
        model,
        batch,
        steps=steps,
        lr=3e-3,
        weight_decay=0.1,
        lr_at=schedule,
        grad_clip=1.0,
        betas=(0.9, 0.99),
        threads=None,
    )
    return model.eval()


@lru_cache(maxsize=2)
def scheduled_comparison(p: float = 0.2, steps: int = 200, seed: int = 0) -> dict:
    """Teacher forcing against ``p`` of the inputs replaced, on the Python docs: for each run the
    held-out loss per character (clean text) and the extra loss on the 16 characters after one
    random wrong one at position 30 of 64 held-out rows."""
    docs = _python_docs()
    probe = docs.val[: 64 * 64].view(64, 64)
    out = {}
    for name, share in (("teacher forcing", 0.0), (f"{p:.0%} own guesses", p)):
        model = sampling_run(docs.train[:200_000], p=share, steps=steps, seed=seed)
        r = injected_error_gap(model, probe, at=30, horizon=16)
        out[name] = {"held_out": split_loss(model, docs.val), "extra": (r["corrupted"] - r["clean"]).tolist()}
    return out
