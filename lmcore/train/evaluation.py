"""Evaluation over a corpus split: the token-weighted mean NLL of its first evaluation batches.

:func:`lmcore.train.train` calls it at every evaluation (on the uncompiled model, on rank 0
only); it is public so that a notebook measures a model exactly as training does.
"""

from __future__ import annotations

import contextlib

import torch

from ..perplexity import PerplexityMeter
from .accumulate import NonFiniteLossError, model_kwargs

__all__ = ["evaluate"]


@torch.no_grad()
def evaluate(
    model,
    corpus,
    split: str = "val",
    *,
    batch_size: int = 16,
    block_size: int | None = None,
    max_batches: int | None = 8,
    device=None,
    autocast=contextlib.nullcontext,
):
    """A :class:`PerplexityMeter` over the first ``max_batches`` evaluation batches of ``split``
    (token-weighted: mean_nll, perplexity, bits_per_token). ``block_size`` defaults to the
    model's. The corpus's ``eval_batches`` checks ``split``, ``batch_size``, ``block_size`` and
    ``max_batches`` (:func:`lmcore.data.base.eval_args`); the model's mode is restored on every exit."""
    device = device or next(model.parameters()).device
    block_size = model.config.block_size if block_size is None else block_size
    was_training = model.training
    model.eval()
    meter = PerplexityMeter()
    try:
        for b in corpus.eval_batches(split, batch_size, block_size, max_batches):
            b = {k: v.to(device) for k, v in b.items()}
            with autocast():
                logits = model(b["input_ids"], **model_kwargs(b))
            try:
                meter.update(logits.float(), b["labels"])  # sync: the meter sums on the host
            except ValueError:
                if not bool(torch.isfinite(logits).all()):  # sync, only on this failure
                    raise NonFiniteLossError(f"the model gives NaN/inf logits on the {split} split") from None
                raise
    finally:
        model.train(was_training)
    if meter.n_tokens == 0:
        raise ValueError(
            f"the {split} split has no row of block_size = {block_size} tokens with a "
            "target to score; use a smaller block_size or more text."
        )
    return meter
