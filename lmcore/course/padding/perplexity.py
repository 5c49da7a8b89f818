"""Notebook 05, section 4: perplexity of one fixed evaluation set however it is batched (the
widget's state: :func:`compare_batchings`), and the perplexity of a text longer than the context
with a sliding window (:func:`sliding_window_perplexity`, on :class:`LookbackLM`, a fixed toy LM
that gets better with context)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ...loss import causal_lm_loss
from ...perplexity import PerplexityMeter
from ...shift import IGNORE_INDEX, num_valid_targets
from .lesson import EOS, TOKENS, context_logits, right_padded

__all__ = [
    "eval_rows",
    "batch_rows",
    "three_perplexities",
    "compare_batchings",
    "BATCH_SIZES",
    "LookbackLM",
    "long_text",
    "window_sums",
    "sliding_window_perplexity",
]

BATCH_SIZES = (1, 2, 3, 4, 6, 8, 12, 24)


def eval_rows(n_rows: int = 24, longest: int = 32, vocab_size: int = 50, *, seed: int = 0):
    """One fixed evaluation set: ``n_rows`` rows of real lengths from 3 to ``longest``, each with
    its own logits ``(length, V)`` from :func:`~lmcore.course.padding.lesson.context_logits` (short rows
    cost more per token). Returns a list of ``(logits (length, V), ids (length,))``."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.linspace(longest, 3, n_rows).round().long()
    rows = []
    for r, n in enumerate(lengths.tolist()):
        ids = torch.randint(3, vocab_size, (1, n), generator=g)
        rows.append((context_logits(ids, vocab_size, seed=seed * 1000 + r)[0], ids[0]))
    return rows


def batch_rows(rows, batch_size: int, order: str = "sorted", *, seed: int = 0):
    """The same rows cut into batches of ``batch_size``, each right-padded to its longest row
    (logits 0 and label -100 on the padding). ``order``: "sorted" (longest first, as a
    length-bucketing loader does) or "shuffled" (a fixed random order). List of (logits, labels)."""
    if order not in ("sorted", "shuffled"):
        raise ValueError(f"order must be 'sorted' or 'shuffled'; got {order!r}.")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int; got {batch_size!r}.")
    idx = sorted(range(len(rows)), key=lambda i: -len(rows[i][1]))
    if order == "shuffled":
        idx = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).tolist()
    out = []
    for b in range(0, len(idx), batch_size):
        chunk = [rows[i] for i in idx[b : b + batch_size]]
        L, V = max(len(ids) for _, ids in chunk), chunk[0][0].shape[-1]
        logits = torch.zeros(len(chunk), L, V, dtype=torch.float64)
        ids = torch.zeros(len(chunk), L, dtype=torch.long)
        for n, (lg, row) in enumerate(chunk):
            logits[n, : len(row)], ids[n, : len(row)] = lg, row
        out.append((logits, right_padded(ids, torch.tensor([len(r) for _, r in chunk]))[1]))
    return out


def three_perplexities(batches) -> dict:
    """Token-weighted perplexity exp(ΣNLL/Σtokens) (via :class:`PerplexityMeter`), exp(mean of
    batch mean losses) and the mean of per-batch perplexities, for a list of (logits, labels)."""
    meter, means = PerplexityMeter(), []
    for logits, labels in batches:
        total = meter.update(logits, labels)
        means.append(total / num_valid_targets(labels))
    return {
        "token_weighted": meter.perplexity,
        "mean_of_batch_means": math.exp(np.mean(means)),
        "mean_of_batch_perplexities": float(np.mean(np.exp(means))),
        "n_tokens": meter.n_tokens,
        "n_batches": len(batches),
    }


def compare_batchings(batch_size: int = 4, order: str = "sorted", *, rows=None) -> dict:
    """The widget's state: :func:`three_perplexities` of :func:`eval_rows` (always the same
    rows) batched by ``batch_size`` in ``order``, plus the fraction of positions that are padding."""
    batches = batch_rows(eval_rows() if rows is None else rows, batch_size, order)
    real = sum(int((lab != IGNORE_INDEX).sum()) for _, lab in batches)
    return {
        **three_perplexities(batches),
        "padding_fraction": 1 - real / sum(lab.numel() for _, lab in batches),
    }


# ---------------------------------------------------------------- a text longer than the context


class LookbackLM:
    """A fixed toy LM (no training) that gets better with context, like a real one: a fixed
    random bigram table, plus ``bonus`` on the token that followed the previous occurrence of the
    current token inside the window (what an induction head does). Causal; float64; refuses
    inputs longer than ``block_size``, like :class:`lmcore.model.GPT`."""

    def __init__(
        self, vocab_size: int = len(TOKENS), block_size: int = 16, *, bonus: float = 4.0, seed: int = 0
    ):
        self.vocab_size, self.block_size, self.bonus = vocab_size, block_size, bonus
        g = torch.Generator().manual_seed(seed)
        self.table = torch.randn(vocab_size, vocab_size, generator=g, dtype=torch.float64)

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            raise ValueError(
                f"input_ids must be a (N, L) tensor; got {getattr(input_ids, 'shape', input_ids)!r}."
            )
        N, L = input_ids.shape
        if L > self.block_size:
            raise ValueError(f"input of length {L} is longer than the context block_size={self.block_size}.")
        logits = self.table[input_ids].clone()  # (N, L, V)
        for t in range(1, L):
            seen = torch.where(input_ids[:, :t] == input_ids[:, t : t + 1], torch.arange(t), -1).amax(-1)
            rows = torch.nonzero(seen >= 0)[:, 0]
            logits[rows, t, input_ids[rows, seen[rows] + 1]] += self.bonus
        return logits


def long_text(n_tokens: int = 200, *, seed: int = 0) -> torch.Tensor:
    """A 1-D stream of ``n_tokens`` ids: short sentences of the toy vocabulary, picked at random
    from four, each followed by EOS (so the same phrases come back, as in real text)."""
    sentences = [[7, 8, 9, 10, 11], [3, 4, 5, 6], [7, 8, 9, 10, 3], [3, 4, 11]]
    g, out = torch.Generator().manual_seed(seed), []
    while len(out) < n_tokens:
        out += sentences[int(torch.randint(len(sentences), (1,), generator=g))] + [EOS]
    return torch.tensor(out[:n_tokens])


def _check_window_args(ids, block_size, stride):
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or len(ids) < 2:
        raise ValueError("ids must be a 1-D tensor of at least 2 token ids.")
    if not (isinstance(block_size, int) and isinstance(stride, int) and 1 <= stride <= block_size):
        raise ValueError(
            f"need ints 1 <= stride <= block_size; got stride={stride!r}, block_size={block_size!r}."
        )


def window_sums(model, ids, block_size: int, step: int, *, masked=True, cut=0, stop=None) -> list:
    """(summed NLL, targets) of each window of a sliding window over the 1-D text ``ids``: windows
    start at 0, ``step``, 2·``step``, ... (each ``block_size`` long, shorter at the end) and each
    scores only the tokens no earlier window scored (the others are -100). The checker of notebook
    05's Exercise 2 rebuilds its mistakes with one thing changed: no such mask (``masked=False``),
    the mask ``cut`` positions too long (+1) or short (-1), or no window starting at ``stop`` or
    later (the text's end then never reached). A window with no target adds (0.0, 0)."""
    out, scored_up_to = [], 0
    for begin in range(0, len(ids) if stop is None else max(0, stop), step):
        end = min(begin + block_size, len(ids))
        window = ids[begin:end][None]
        labels = window.clone()
        if masked:  # already scored by an earlier window
            labels[:, : max(0, scored_up_to - begin + cut)] = IGNORE_INDEX
        count = num_valid_targets(labels)
        with torch.no_grad():
            total = float(causal_lm_loss(model(window), labels, reduction="sum")) if count else 0.0
        out.append((total, count))
        scored_up_to = end
        if end == len(ids):
            break
    return out


def sliding_window_perplexity(model, ids: torch.Tensor, block_size: int, stride: int) -> float:
    """Perplexity of the 1-D text ``ids`` under ``model`` (ids (N, L) -> logits (N, L, V)), whose
    context holds at most ``block_size`` tokens. Windows start at 0, stride, 2·stride, ... (each
    ``block_size`` long, shorter at the end); each window scores only the tokens no earlier window
    scored (the others are -100), so each token after the first is scored once, with the longest
    context the windows give it (:func:`window_sums`). Token-weighted: exp(ΣNLL / Σtargets)."""
    _check_window_args(ids, block_size, stride)
    parts = window_sums(model, ids, block_size, stride)
    return math.exp(sum(total for total, _ in parts) / sum(count for _, count in parts))
