"""Notebook 10, data policy: how much context the targets of a block get, how many targets a
padded or packed batch really scores, and the char-level runs on the Python docs (the
duplicated-data experiment lives in ``duplicates``, the checkers in
``exercises``).

The counts are closed forms; the tests rebuild the same batches with :mod:`lmcore.shift`
(``labels_from_attention_mask``, ``pack_documents``) and count their valid targets.
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

import torch

from ..._validate import require_choice, require_int_scalar, require_real
from ...data import TextCorpus, load_corpus
from ...loss import causal_lm_loss
from .lesson import train_tiny

__all__ = [
    "context_coverage",
    "document_lengths",
    "valid_targets",
    "valid_target_ratio",
    "BLOCK_SIZES",
    "text_run",
    "split_loss",
]

BLOCK_SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048)


def context_coverage(block_size: int, k: int) -> float:
    """Share of the ``block_size - 1`` targets of one row that see at least ``k`` earlier
    tokens. The target at position t (1..L-1) sees exactly t tokens."""
    L = require_int_scalar("block_size", block_size, min=2)
    k = require_int_scalar("k", k, min=0)
    return max(0, L - max(k, 1)) / (L - 1)


def document_lengths(n: int = 400, *, median: int = 300, spread: float = 1.2, seed: int = 0) -> list:
    """``n`` document lengths in tokens, log-normal around ``median`` (web text is like that:
    many short pages, a few very long ones). Python's ``random``, so the same on any machine."""
    n = require_int_scalar("n", n, min=1)
    median = require_int_scalar("median", median, min=1)
    spread = require_real("spread", spread, min=0.0)
    rng = random.Random(seed)
    return [max(1, round(rng.lognormvariate(math.log(median), spread))) for _ in range(n)]


def _check_lengths(lengths) -> list:
    lengths = [require_int_scalar(f"lengths[{i}]", n, min=1) for i, n in enumerate(lengths)]
    if not lengths:
        raise ValueError("lengths must hold at least one document length.")
    return lengths


def valid_targets(lengths, block_size: int, policy: str = "pad") -> tuple[int, int]:
    """``(valid targets, target slots)`` for documents of these lengths, each followed by EOS.

    ``"pad"``: every document starts a new row; a long one is cut into rows of ``block_size``
    and its last row is padded. ``"pack"``: the documents are concatenated and cut into rows
    (only the very last row padded), and the target that would cross into the next document
    is ignored, as in :func:`lmcore.shift.pack_documents`. Slots are ``rows * (L - 1)``.
    """
    lengths = _check_lengths(lengths)
    L = require_int_scalar("block_size", block_size, min=2)
    policy = require_choice("policy", policy, ("pad", "pack"))
    if policy == "pad":
        rows = valid = 0
        for n in lengths:
            r = math.ceil((n + 1) / L)
            rows, valid = rows + r, valid + (n + 1) - r  # each row loses its first token
        return valid, rows * (L - 1)
    total = sum(n + 1 for n in lengths)
    rows = math.ceil(total / L)
    start, crossings = 0, 0
    for n in lengths:
        crossings += start % L != 0  # a new document inside a row
        start += n + 1
    return total - rows - crossings, rows * (L - 1)


def valid_target_ratio(lengths, block_size: int, policy: str = "pad") -> float:
    """Valid targets / target slots: the share of the computed positions that get a loss."""
    valid, slots = valid_targets(lengths, block_size, policy)
    return valid / slots


# ---------------------------------------------------------------- duplicated data


@lru_cache(maxsize=1)
def _python_docs():
    return load_corpus("python-docs")


def text_run(train_ids: torch.Tensor, *, steps: int = 200, seed: int = 0, **overrides):
    """A char-level run on the Python docs whose training split is ``train_ids`` (validation:
    the docs' usual held-out split). 2 layers, 64 wide, rows of 64, 16 rows per step."""
    base = _python_docs()
    corpus = TextCorpus("python-docs", base.tokenizer, base.ids)
    corpus.train = train_ids
    kw = dict(n_embd=64, block_size=64, lr=3e-3, min_lr=3e-4, eval_interval=50, eval_batches=4)
    return train_tiny(corpus, max_steps=steps, seed=seed, **{**kw, **overrides})


@torch.no_grad()
def split_loss(model, ids: torch.Tensor, *, rows: int = 64) -> float:
    """Mean loss per target over the first ``rows`` consecutive rows of ``ids`` (no overlap)."""
    L = model.config.block_size
    x = ids[: rows * L].view(-1, L)
    was = model.training
    model.eval()
    out = float(causal_lm_loss(model(x), x))
    model.train(was)
    return out
