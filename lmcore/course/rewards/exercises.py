"""Notebook 10's exercises: a loss that accepts several right answers (stable at logits near
1000), the context coverage of a row, and the same coverage in a packed row whose documents
cannot see each other (the answer the notebook does not print).

Each checker runs the learner's function with the course's own reference refused and warnings
silenced (:func:`lmcore.course.rewards.guard.own_work`).
"""

from __future__ import annotations

import torch

from ..._validate import require_int_scalar
from ...shift import mask_cross_document_targets
from ..checks import Case, check
from .data import context_coverage
from .guard import own_work, refuse
from .lesson import set_nll

__all__ = [
    "check_set_nll",
    "check_context_coverage",
    "document_coverage",
    "check_document_coverage",
]


# ---------------------------------------------------------------- several right answers


def _set_cases() -> list[Case]:
    g = torch.Generator().manual_seed(10)
    cases = [
        Case((torch.tensor([2.0, 1.0, 0.0]), [1]), label="logits [2, 1, 0], acceptable [1]"),
        Case((torch.tensor([2.0, 1.0, 0.0]), [0, 1]), label="logits [2, 1, 0], acceptable [0, 1]"),
        Case((torch.tensor([0.0, 5.0, 5.0, -2.0]), [2, 1]), label="two equally likely right answers [2, 1]"),
        Case((torch.tensor([1000.0, 999.0, 0.0]), [1, 2]), label="logits near 1000"),
        Case((torch.tensor([1000.0, 0.0, -5.0]), [2]), label="logits [1000, 0, -5], acceptable [2]"),
        Case(
            (torch.tensor([-5.0, 1000.0, -7.0, 990.0], dtype=torch.float64), [0, 2]),
            label="float64 logits [-5, 1000, -7, 990], acceptable [0, 2]",
        ),
    ]
    for v, k in ((6, 2), (10, 3), (20, 5), (7, 1)):
        z = torch.randn(v, generator=g, dtype=torch.float64) * 3
        ids = torch.randperm(v, generator=g)[:k].tolist()
        cases.append(Case((z, ids)))
    return cases


def check_set_nll(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(logits (V,), acceptable ids) -> -ln(total probability of the acceptable ids)``."""
    return check(
        "loss with several right answers",
        own_work(fn, ("set_nll",)),
        set_nll,
        _set_cases(),
        atol=1e-6,
        rtol=1e-6,
        quiet=quiet,
        hint="add the probabilities of the acceptable answers first, then "
        "take -ln of the sum (a log-sum-exp over those logits minus the one over all); "
        "stay stable for logits near 1000: a probability of e^-1005 is 0 in floating point, its "
        "log is not.",
    )


# ---------------------------------------------------------------- context coverage


def _coverage_cases() -> list[Case]:
    pairs = [
        (8, 3),
        (8, 1),
        (8, 0),
        (8, 7),
        (8, 8),
        (8, 20),
        (64, 32),
        (2048, 1000),
        (2, 1),
        (1024, 513),
        (16, 15),
        (128, 100),
    ]
    return [Case((L, k), label=f"block_size={L}, k={k}") for L, k in pairs]


def check_context_coverage(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(block_size, k) -> share of a row's targets with at least k tokens of context``."""
    return check(
        "context coverage",
        own_work(fn, ("context_coverage",)),
        context_coverage,
        _coverage_cases(),
        atol=1e-12,
        rtol=1e-9,
        quiet=quiet,
        hint="a row of L tokens has L - 1 targets; the target at position t sees t "
        "earlier tokens (t = 1 .. L - 1). Count those with t >= k, and never "
        "return less than 0.",
    )


# ---------------------------------------------------------------- coverage in a packed row


def document_coverage(doc_lengths, k: int) -> float:
    """Share of the valid targets of one packed row that see at least ``k`` tokens of their own
    document. The row holds documents of ``doc_lengths`` tokens (each with its EOS) back to back,
    with a block-diagonal mask and positions reset, and each document's first token is no target
    (:func:`lmcore.shift.mask_cross_document_targets`); a target ``o`` tokens into its document
    sees those ``o`` tokens."""
    refuse("document_coverage")
    if not isinstance(doc_lengths, (list, tuple)) or not doc_lengths:
        raise TypeError(f"doc_lengths must be a non-empty list of ints; got {doc_lengths!r}.")
    lengths = [require_int_scalar("doc_lengths[i]", n, min=1) for n in doc_lengths]
    k = require_int_scalar("k", k, min=0)
    if sum(lengths) < 2:
        raise ValueError(f"the row needs at least 2 tokens; got doc_lengths={doc_lengths!r}.")
    doc = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))[None]  # (1, L)
    labels = mask_cross_document_targets(torch.zeros_like(doc), doc)[0]
    start = torch.cumsum(torch.tensor([0] + lengths[:-1]), 0)[doc[0]]  # each position's doc start
    seen = torch.arange(doc.shape[1]) - start  # tokens of its own document before position t
    valid = labels[1:] != -100
    n_valid = int(valid.sum())
    return int(((seen[1:] >= k) & valid).sum()) / n_valid if n_valid else 0.0


def _document_cases() -> list[Case]:
    rows = [
        ([64], 32),
        ([10, 10], 5),
        ([3, 20, 7], 4),
        ([5, 5, 5, 5], 1),
        ([1, 8], 2),
        ([12, 1, 1, 12], 0),
        ([30, 2, 30], 10),
        ([100, 28], 50),
        ([6, 9, 4, 13, 32], 7),
        ([40, 24], 40),
    ]
    return [Case((list(d), k), label=f"doc_lengths={d}, k={k}") for d, k in rows]


def check_document_coverage(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(doc_lengths, k) -> share of a packed row's valid targets with >= k tokens of
    their own document`` (the block-diagonal mask cuts each context at its document start)."""
    return check(
        "context coverage in a packed row",
        own_work(fn, ("document_coverage", "context_coverage")),
        document_coverage,
        _document_cases(),
        atol=1e-12,
        rtol=1e-9,
        quiet=quiet,
        hint="inside a document of n tokens the targets are its tokens 1 .. n - 1 (its first "
        "token is no target: it follows another document), and token o sees o tokens; count "
        "over every document, then divide by all valid targets of the row.",
    )
