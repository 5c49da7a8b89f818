"""Notebook 09, the floor run: a small float64 GPT trained on chat arithmetic, whose loss the
notebook compares with the exact floor of :mod:`lmcore.course.floor.lesson` (the floor explorer's
short runs, trained the same way, are committed by :mod:`lmcore.course.floor.explorer_runs`).
"""

from __future__ import annotations

import torch

from ...data import load_corpus
from ...model import GPT
from ...train import train
from ...train.presets import model_config, preset

__all__ = ["N_DOCUMENTS", "floor_config", "floor_corpus", "float64_run", "train_floor_run"]

N_DOCUMENTS = 4000  # chat-arithmetic turns per run: 3,600 to train on, 400 to validate


def floor_config(**overrides):
    """The notebook's run: the ``tiny`` preset (a 2-layer, 32-wide GPT, 300 steps, one CPU thread)
    on chat arithmetic with 64 rows per step; ``overrides`` go on top."""
    base = dict(
        corpus="chat-arithmetic", batch_size=64, lr=1.5e-2, min_lr=1.5e-3, eval_interval=25, eval_batches=8
    )
    return preset("tiny", **{**base, **overrides})


def floor_corpus(*, low: int = 0, high: int = 9, ops=("+",), n_documents: int = N_DOCUMENTS, seed: int = 0):
    """The chat-arithmetic turns a floor run trains and validates on (the last 10% validate)."""
    return load_corpus(
        "chat-arithmetic", n_documents=n_documents, seed=seed, low=low, high=high, ops=tuple(ops)
    )


def float64_run(corpus, seed: int, overrides: dict, callback=None):
    """:func:`lmcore.train.train` of :func:`floor_config` on ``corpus`` with a float64 GPT;
    ``callback(step, model)`` runs after every step (it must not consume random numbers)."""
    cfg = floor_config(seed=seed, **overrides)
    torch.manual_seed(seed)
    model = GPT(model_config(cfg, corpus.vocab_size)).double()
    return train(cfg, corpus, model=model, callback=callback)


def train_floor_run(
    *,
    low: int = 0,
    high: int = 9,
    ops=("+",),
    n_documents: int = N_DOCUMENTS,
    seed: int = 0,
    callback=None,
    **overrides,
):
    """Train on ``n_documents`` chat-arithmetic turns; returns :class:`lmcore.train.TrainResult`
    (its ``corpus`` has the validation turns).

    The model is float64, which keeps kernel differences small; they are not zero (summation
    order differs between vector kernels and the run amplifies it), so the notebook checks the
    result against tolerances, not digits.
    """
    corpus = floor_corpus(low=low, high=high, ops=ops, n_documents=n_documents, seed=seed)
    return float64_run(corpus, seed, overrides, callback)
