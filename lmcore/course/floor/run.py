"""Notebook 09, the floor run: a small float64 GPT trained on chat arithmetic, whose loss the
notebook compares with the exact floor of :mod:`lmcore.course.floor.lesson`, and the cached short runs
behind the floor explorer (``floor_views``).
"""

from __future__ import annotations

import torch

from ...data import load_corpus
from ...model import GPT
from ...train import train
from ...train.presets import TrainConfig, model_config

__all__ = ["floor_config", "float64_run", "train_floor_run", "short_curve"]


def floor_config(**overrides):
    """The notebook's run: a 2-layer, 32-wide GPT, 300 steps of 64 rows of 32 tokens, on the
    CPU with one thread (a few seconds); every field spelled out, ``overrides`` go on top."""
    model = dict(corpus="chat-arithmetic", n_layer=2, n_head=2, n_embd=32, block_size=32, dropout=0.0)
    batches = dict(batch_size=64, grad_accum=1, max_steps=300, eval_interval=25, eval_batches=8, seed=0)
    optimiser = dict(
        lr=1.5e-2, min_lr=1.5e-3, warmup_steps=20, weight_decay=0.1, betas=(0.9, 0.99), grad_clip=1.0
    )
    machine = dict(device="cpu", dtype="float32", compile=False, num_threads=1, progress=False)
    base = {**model, **batches, **optimiser, **machine}
    return TrainConfig(**{**base, **overrides})


def float64_run(corpus, seed: int, overrides: dict):
    """:func:`lmcore.train.train` of :func:`floor_config` on ``corpus`` with a float64 GPT."""
    cfg = floor_config(seed=seed, **overrides)
    torch.manual_seed(seed)
    model = GPT(model_config(cfg, corpus.vocab_size)).double()
    return train(cfg, corpus, model=model)


def train_floor_run(
    *, low: int = 0, high: int = 9, ops=("+",), n_documents: int = 4000, seed: int = 0, **overrides
):
    """Train on ``n_documents`` chat-arithmetic turns; returns :class:`lmcore.train.TrainResult`
    (its ``corpus`` has the validation turns).

    The model is float64, which keeps kernel differences small; they are not zero (summation
    order differs between vector kernels and the run amplifies it), so the notebook checks the
    result against tolerances, not digits.
    """
    corpus = load_corpus(
        "chat-arithmetic", n_documents=n_documents, seed=seed, low=low, high=high, ops=tuple(ops)
    )
    return float64_run(corpus, seed, overrides)


_CURVES: dict = {}


def short_curve(high: int, ops: str = "+", steps: int = 150) -> list:
    """The history of a short floor run on operands 0..high (cached: trained once per setting)."""
    key = (high, ops, steps)
    if key not in _CURVES:
        _CURVES[key] = train_floor_run(
            high=high, ops=tuple(ops), max_steps=steps, eval_interval=max(1, steps // 10)
        ).history
    return _CURVES[key]
