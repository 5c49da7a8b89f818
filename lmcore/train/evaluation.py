"""Evaluation over a corpus split: the token-weighted mean NLL of windows that represent it.

``max_batches`` batches of windows drawn at random from the whole split (``corpus.batch``, the
way training draws them) by a generator seeded with ``seed``: every call scores the very same
windows, so the records of a run, ``best.pt`` and a notebook's measurement compare models on one
sample of each split (nanoGPT's ``estimate_loss`` draws random batches too, fresh at each call).
``max_batches=None`` scores the whole split, in order. The first batches of a split are no
substitute: they are one stretch of the text (a few topics), which can be much harder or easier
than the split as a whole.

:func:`lmcore.train.train` calls it at every evaluation (on the uncompiled model, on rank 0
only); it is public so that a notebook measures a model exactly as training does.
"""

from __future__ import annotations

import contextlib

import torch

from .._validate import require_int_scalar
from ..perplexity import PerplexityMeter
from .accumulate import NonFiniteLossError, model_kwargs

__all__ = ["evaluate", "evaluation_batches", "score_batches"]


def evaluation_batches(corpus, split: str, batch_size: int, block_size: int, max_batches, seed: int = 0):
    """The batches :func:`evaluate` scores: the whole split in order (``max_batches=None``), or
    ``max_batches`` batches of random windows from a generator seeded with ``seed`` (the same
    windows at every call). The arguments are checked here, at the call (the corpus checks
    ``split``, ``batch_size``, ``block_size`` and ``max_batches``); the batches come lazily."""
    require_int_scalar("seed", seed, min=0)
    if not callable(getattr(corpus, "eval_batches", None)) or not callable(getattr(corpus, "batch", None)):
        raise TypeError(
            f"corpus must be an lmcore corpus (with batch and eval_batches); got {type(corpus).__name__}."
        )
    in_order = iter(corpus.eval_batches(split, batch_size, block_size, max_batches))
    head = next(in_order, None)  # runs the corpus's checks now; None: not one full row
    return (
        _in_order(head, in_order)
        if max_batches is None
        else _drawn(corpus, head, split, batch_size, block_size, max_batches, seed)
    )


def _in_order(head, rest):
    if head is not None:
        yield head
        yield from rest


def _drawn(corpus, head, split, batch_size, block_size, max_batches, seed):
    if head is None:
        return  # not one full row: evaluate() says so
    generator = torch.Generator().manual_seed(seed)  # the same windows at every call
    for _ in range(max_batches):
        yield corpus.batch(split, batch_size, block_size, generator=generator)


@torch.no_grad()
def evaluate(
    model,
    corpus,
    split: str = "val",
    *,
    batch_size: int = 16,
    block_size: int | None = None,
    max_batches: int | None = 8,
    seed: int = 0,
    device=None,
    autocast=contextlib.nullcontext,
):
    """A :class:`PerplexityMeter` (token-weighted: mean_nll, perplexity, bits_per_token) over
    ``max_batches`` batches of windows drawn at random from the whole of ``split`` by a
    generator seeded with ``seed`` (the same windows at every call), or over the whole split,
    in order, with ``max_batches=None``. ``block_size`` defaults to the model's. The corpus's
    ``eval_batches`` checks ``split``, ``batch_size``, ``block_size`` and ``max_batches``
    (:func:`lmcore.data.base.eval_args`); the model's mode is restored on every exit."""
    require_int_scalar("seed", seed, min=0)
    block_size = model.config.block_size if block_size is None else block_size
    batches = evaluation_batches(corpus, split, batch_size, block_size, max_batches, seed)
    return score_batches(model, batches, split=split, block_size=block_size, device=device, autocast=autocast)


@torch.no_grad()
def score_batches(
    model, batches, *, split: str, block_size: int, device=None, autocast=contextlib.nullcontext
):
    """A :class:`PerplexityMeter` over ``batches`` (dicts with ``input_ids``, ``labels`` and
    what the model also reads), the model in eval mode and its mode restored on every exit:
    the scoring loop :func:`evaluate` runs on its windows, for a caller that picks other ones.
    ``split`` and ``block_size`` only word the errors."""
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    meter = PerplexityMeter()
    try:
        for b in batches:
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
