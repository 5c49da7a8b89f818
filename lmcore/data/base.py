"""What every corpus shares: the unigram entropy, the split check, the evaluation arguments and
the batch of a packed corpus.

A corpus has ``name``, ``tokenizer``, ``ids`` (every token, for statistics), ``batch(split,
batch_size, block_size, generator=...)`` and ``eval_batches(split, batch_size, block_size,
max_batches)``; :class:`CorpusBase` gives it ``vocab_size`` and ``unigram_entropy``.
"""

from __future__ import annotations

import hashlib

import torch

from .._validate import require_ids_in_range, require_int_scalar, require_positive_int, require_token_ids

__all__ = [
    "SPLITS",
    "PACKED_KEYS",
    "unigram_entropy",
    "corpus_fingerprint",
    "eval_args",
    "packed_rows",
    "CorpusBase",
]

SPLITS = ("train", "val")
PACKED_KEYS = ("input_ids", "labels", "document_ids", "position_ids")  # a packed corpus's batch


def unigram_entropy(ids, vocab_size: int | None = None) -> float:
    """Entropy (nats) of the token frequencies in ``ids``: the loss of the best context-free model."""
    ids = require_token_ids("ids", ids).flatten()
    if vocab_size is not None:
        vocab_size = require_int_scalar("vocab_size", vocab_size, min=1)
    if ids.numel() == 0:
        raise ValueError("ids is empty: the entropy of no tokens is undefined. Pass a token stream.")
    require_ids_in_range(
        "ids", ids, vocab_size, "Drop padding and -100 before counting, and pass the tokenizer's vocab_size."
    )
    counts = torch.bincount(ids, minlength=vocab_size or 0).double()
    p = counts[counts > 0] / counts.sum()
    return float(-(p * p.log()).sum())


def corpus_fingerprint(corpus) -> str:
    """SHA-256 of the corpus's token ids (int64): equal only for the very same text and vocabulary
    (what a committed run records, so that a test can tell when its data changed)."""
    ids = getattr(corpus, "ids", None)
    if not isinstance(ids, torch.Tensor):
        raise TypeError(
            f"corpus must be a corpus with token ids (.ids, a tensor); got {type(corpus).__name__}."
        )
    return hashlib.sha256(ids.to(torch.int64).contiguous().numpy().tobytes()).hexdigest()


def eval_args(batch_size, block_size, max_batches):
    """``(batch_size, block_size, max_batches)`` checked: ints >= 1 (``block_size`` >= 2, a row
    with a target), ``max_batches`` or None. The one check of the evaluation arguments, which
    :func:`lmcore.train.evaluate` leaves to the corpus."""
    batch_size = require_positive_int("batch_size", batch_size)
    block_size = require_int_scalar(
        "block_size", block_size, min=2, hint="A row needs 2 tokens: an input and its next-token target."
    )
    if max_batches is not None:
        max_batches = require_int_scalar(
            "max_batches", max_batches, min=1, hint="Use None for every batch of the split."
        )
    return batch_size, block_size, max_batches


def packed_rows(packed, index=None) -> dict:
    """The batch of a packed corpus: :data:`PACKED_KEYS` of a :class:`lmcore.shift.PackedBatch`,
    its rows ``index`` (an index tensor or a slice; every row when None)."""
    return {k: getattr(packed, k) if index is None else getattr(packed, k)[index] for k in PACKED_KEYS}


class CorpusBase:
    """``vocab_size`` from the tokenizer, ``unigram_entropy`` of ``ids``, the split check."""

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def unigram_entropy(self) -> float:
        return unigram_entropy(self.ids, self.vocab_size)

    @staticmethod
    def _check_split(split) -> str:
        if not isinstance(split, str) or split not in SPLITS:
            raise ValueError(f"split must be 'train' or 'val'; got {split!r}.")
        return split
