"""Notebook 07's toy task: the documents, the batches every pipeline trains on, and the loss
floor. Each document counts up from a random start to 15 in steps of 1 or 2 (a coin flip), then
EOS (PAD 0, EOS 1, numbers 2..15). Its exact entropy per target is the loss floor."""

from __future__ import annotations

import math

import torch

from ...shift import pack_documents
from ..toys import EOS, PAD

__all__ = ["V", "L", "STEPS", "ROWS", "documents", "entropy_floor", "padded_batch", "training_batch"]

V, L, STEPS, ROWS = 16, 16, 60, 16  # PAD 0 and EOS 1: the kit's convention (toys)


def documents(n: int, seed: int) -> list:
    """``n`` documents that count up by 1 or 2 (a fair coin) from a start in 2..9 to 15."""
    g = torch.Generator().manual_seed(seed)
    docs = []
    for s in torch.randint(2, 10, (n,), generator=g).tolist():
        doc = [s]
        while doc[-1] < V - 1:
            big = doc[-1] < V - 2 and bool(torch.rand((), generator=g) < 0.5)
            doc.append(doc[-1] + (2 if big else 1))
        docs.append(doc)
    return docs


def entropy_floor(docs) -> float:
    """The lowest possible mean next-token loss on ``docs`` (+ EOS): ln 2 per coin flip."""
    targets = sum(len(d) for d in docs)  # (len - 1) numbers + EOS each
    flips = sum(sum(1 for x in d if x < V - 2) for d in docs)
    return flips * math.log(2) / targets


def padded_batch(docs, *, eos_id: int = EOS, pad_id: int = PAD):
    """``(input_ids, attention_mask)`` (N, L): each document + EOS, right-padded with pad_id."""
    rows = [d + [eos_id] for d in docs]
    ids = torch.tensor([r + [pad_id] * (L - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (L - len(r)) for r in rows])
    return ids, mask


def training_batch(kind: str, step: int):
    """The ``(input_ids, attention_mask)`` (N, L) of training step ``step`` for a pipeline whose
    batches are ``kind``: "padded", "packed" (two steps' documents packed) or "eos_pad" (PAD = EOS)."""
    docs = documents(ROWS, seed=1000 + step)
    if kind == "packed":
        packed = pack_documents(docs + documents(ROWS, seed=5000 + step), L, eos_id=EOS, pad_id=PAD)
        return packed.input_ids[:ROWS], packed.attention_mask[:ROWS]
    return padded_batch(docs, pad_id=EOS if kind == "eos_pad" else PAD)
