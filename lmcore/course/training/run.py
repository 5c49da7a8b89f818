"""Notebook 08's view of whichever corpus its preset trains on: the same few questions asked of
a one-stream text corpus (``python-docs``, the ``cpu`` preset) and of a packed stream of
documents (``python-stdlib``, the ``gpu`` preset), so that one notebook runs on either."""

from __future__ import annotations

import contextlib
import itertools
import re

import torch

from ...train.evaluation import score_batches

__all__ = ["split_tokens", "corpus_summary", "eval_windows", "first_batches_loss", "training_words"]


def split_tokens(corpus, split: str) -> torch.Tensor:
    """The token stream (1-D) of ``split`` ("train" or "val")."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val'; got {split!r}.")
    stream = getattr(corpus, split, None)
    if isinstance(stream, torch.Tensor):
        return stream
    if hasattr(corpus, "num_tokens"):  # a packed stream of documents
        return corpus._split(split)[0]
    raise TypeError(f"corpus must be a TextCorpus or a packed-stream corpus; got {type(corpus).__name__}.")


def corpus_summary(corpus) -> dict:
    """Token counts (all, train, val), the vocabulary size and the validation share."""
    n_train, n_val = len(split_tokens(corpus, "train")), len(split_tokens(corpus, "val"))
    return {
        "tokens": len(corpus.ids),
        "train": n_train,
        "val": n_val,
        "V": corpus.vocab_size,
        "val_share": n_val / (n_train + n_val),
    }


def eval_windows(corpus, n: int, block_size: int, split: str = "val") -> torch.Tensor:
    """The first ``n`` full windows (n, block_size) of ``split``'s stream, in order."""
    data = split_tokens(corpus, split)
    if n < 1 or n * block_size > len(data):
        raise ValueError(f"n must be in [1, {len(data) // block_size}] for block_size {block_size}; got {n}.")
    return data[: n * block_size].view(n, block_size)


def first_batches_loss(
    model,
    corpus,
    split: str,
    n_batches: int,
    *,
    batch_size: int,
    block_size: int,
    autocast=contextlib.nullcontext,
) -> float:
    """The token-weighted mean NLL of the first ``n_batches`` consecutive batches of ``split``
    (``corpus.eval_batches``, from the split's start): a slice of one part of the text, what
    a "first few batches" evaluation measures (:func:`lmcore.train.evaluate` draws its windows
    from the whole split)."""
    if isinstance(n_batches, bool) or not isinstance(n_batches, int) or n_batches < 1:
        raise ValueError(f"n_batches must be a positive int; got {n_batches!r}.")
    batches = itertools.islice(corpus.eval_batches(split, batch_size, block_size), n_batches)
    return score_batches(model, batches, split=split, block_size=block_size, autocast=autocast).mean_nll


def training_words(corpus, max_tokens: int = 2_000_000) -> set:
    """Every word (a run of 2+ ASCII letters) in the first ``max_tokens`` of the training split."""
    return set(
        re.findall(r"[A-Za-z]{2,}", corpus.tokenizer.decode(split_tokens(corpus, "train")[:max_tokens]))
    )
