"""Corpora and batches, all offline: chat arithmetic, the Python docs, any UTF-8 file.

A batch is a dict with ``input_ids`` and ``labels`` (N, L), ``labels = input_ids`` up to
masking (the loss shifts), plus ``document_ids`` and ``position_ids`` for packed documents.
The tokenizers live in :mod:`lmcore.tokenizers` and the download helper in
:mod:`lmcore.download`; both are re-exported here.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import torch

from ._validate import (_describe, require_generator, require_ids_in_range, require_int,
                        require_int_scalar, require_positive_int, require_real, require_tensor,
                        require_token_ids)
from .arithmetic import chat_arithmetic, chat_arithmetic_entropy
from .download import KNOWN_CORPORA, download, download_corpus
from .shift import (PackedBatch, _packing_inputs, labels_from_attention_mask,
                    mask_cross_document_targets)
from .tokenizers import ByteTokenizer, CharTokenizer, ChatTokenizer

__all__ = ["CharTokenizer", "ByteTokenizer", "ChatTokenizer", "KNOWN_CORPORA", "download",
           "download_corpus", "python_docs_text", "read_text_file", "chat_arithmetic",
           "chat_arithmetic_entropy", "unigram_entropy", "train_val_split", "random_windows",
           "pack_whole_documents", "TextCorpus", "DocumentCorpus", "load_corpus", "CORPORA"]

CORPORA = ("python-docs", "python-stdlib", "chat-arithmetic", "file", "tinyshakespeare")


def python_docs_text() -> str:
    """The English help topics that ship with CPython (``pydoc_data.topics``), ~0.5 MB.

    Topics are joined in sorted order, so the text is fixed for a given Python version (it
    differs a little between versions).
    """
    try:
        from pydoc_data.topics import topics
    except ImportError as err:   # some distributions strip it
        raise RuntimeError("pydoc_data is missing from this Python installation; use "
                           "load_corpus('file', path=...) or 'chat-arithmetic'.") from err
    return "\n\n".join(topics[k] for k in sorted(topics))


def read_text_file(path) -> str:
    """The whole file as text; a clear error if it is not UTF-8."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path (str or pathlib.Path); got {_describe(path)}.")
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not valid UTF-8 (byte {err.start}); convert it, e.g. "
                         "iconv -t utf-8, or read it with ByteTokenizer.") from None


def unigram_entropy(ids, vocab_size: int | None = None) -> float:
    """Entropy (nats) of the token frequencies in ``ids``: the loss of the best context-free model."""
    ids = require_token_ids("ids", ids).flatten()
    if vocab_size is not None:
        vocab_size = require_int_scalar("vocab_size", vocab_size, min=1)
    if ids.numel() == 0:
        raise ValueError("ids is empty: the entropy of no tokens is undefined. Pass a token stream.")
    require_ids_in_range("ids", ids, vocab_size, "Drop padding and -100 before counting, and "
                         "pass the tokenizer's vocab_size.")
    counts = torch.bincount(ids, minlength=vocab_size or 0).double()
    p = counts[counts > 0] / counts.sum()
    return float(-(p * p.log()).sum())


def train_val_split(data, val_fraction: float = 0.1):
    """Split a 1-D token tensor (or a list of documents) into its first and last parts."""
    if not 0 < require_real("val_fraction", val_fraction, finite=False) < 1:
        raise ValueError(f"val_fraction must be in (0, 1); got {val_fraction!r}.")
    if not ((isinstance(data, torch.Tensor) and data.dim() >= 1)
            or (isinstance(data, Sequence) and not isinstance(data, (str, bytes)))):
        raise TypeError(f"data must be a 1-D token tensor or a list of documents; got "
                        f"{_describe(data)}.")
    n_val = max(1, int(round(len(data) * val_fraction)))
    if n_val >= len(data):
        raise ValueError(f"data has only {len(data)} items: too few to split off a validation part.")
    return data[:-n_val], data[-n_val:]


def random_windows(data: torch.Tensor, batch_size: int, block_size: int, *, generator=None):
    """``input_ids`` (N, L): N windows of L consecutive tokens at uniform random offsets."""
    require_tensor("data", data, 1, "(a 1-D token stream)")
    require_int("data", data)
    batch_size = require_positive_int("batch_size", batch_size)
    block_size = require_positive_int("block_size", block_size)
    require_generator(generator)
    if len(data) < block_size:
        raise ValueError(f"data must be a 1-D token tensor with at least block_size = {block_size} "
                         f"tokens; got shape {tuple(data.shape)}.")
    starts = torch.randint(0, len(data) - block_size + 1, (batch_size,), generator=generator)
    return data[starts[:, None] + torch.arange(block_size)].long()


def pack_whole_documents(documents, block_size: int, *, eos_id: int, pad_id: int) -> PackedBatch:
    """Like :func:`lmcore.shift.pack_documents`, but no document is cut across two rows.

    Documents (each followed by EOS) are placed greedily in order; a row is closed and padded
    when the next one would not fit. Each document is then scored with its full context.
    """
    documents, block_size, eos_id, pad_id = _packing_inputs(documents, block_size, eos_id, pad_id)
    ids, docs, pos, row_ids, row_docs, row_pos = [], [], [], [], [], []

    def close_row():
        n_pad = block_size - len(row_ids)
        ids.append(row_ids + [pad_id] * n_pad)
        docs.append(row_docs + [-1] * n_pad)
        pos.append(row_pos + list(range(n_pad)))

    for k, doc in enumerate(documents):
        if len(doc) + 1 > block_size:
            raise ValueError(f"documents[{k}] has {len(doc)} tokens; each needs 1 to block_size - 1 "
                             f"= {block_size - 1} tokens (plus its EOS).")
        if len(row_ids) + len(doc) + 1 > block_size:
            close_row()
            row_ids, row_docs, row_pos = [], [], []
        row_ids += doc + [eos_id]
        row_docs += [k] * (len(doc) + 1)
        row_pos += list(range(len(doc) + 1))
    close_row()
    input_ids, document_ids = torch.tensor(ids, dtype=torch.long), torch.tensor(docs)
    attention_mask = (document_ids >= 0).long()
    labels = mask_cross_document_targets(labels_from_attention_mask(input_ids, attention_mask),
                                         document_ids)
    return PackedBatch(input_ids, labels, document_ids, torch.tensor(pos), attention_mask)


def _eval_args(batch_size, block_size, max_batches):
    batch_size = require_positive_int("batch_size", batch_size)
    block_size = require_positive_int("block_size", block_size)
    if max_batches is not None:
        max_batches = require_int_scalar("max_batches", max_batches, min=1,
                                         hint="Use None for every batch of the split.")
    return batch_size, block_size, max_batches


class TextCorpus:
    """One token stream, split into train/val; batches are random windows (labels = input_ids)."""

    def __init__(self, name: str, tokenizer, ids, val_fraction: float = 0.1):
        self.name, self.tokenizer = name, tokenizer
        self.ids = require_token_ids("ids", ids)
        if self.ids.dim() != 1:
            raise ValueError(f"ids must be one token stream (1-D); got shape {tuple(self.ids.shape)}.")
        require_ids_in_range("ids", self.ids, self.vocab_size, "Encode the text with this tokenizer.")
        self.train, self.val = train_val_split(self.ids, val_fraction)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def unigram_entropy(self) -> float:
        return unigram_entropy(self.ids, self.vocab_size)

    def _split(self, split):
        if not isinstance(split, str) or split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val'; got {split!r}.")
        return self.train if split == "train" else self.val

    def batch(self, split: str, batch_size: int, block_size: int, *, generator=None) -> dict:
        x = random_windows(self._split(split), batch_size, block_size, generator=generator)
        return {"input_ids": x, "labels": x}

    def eval_batches(self, split: str, batch_size: int, block_size: int, max_batches: int | None = None):
        """Consecutive non-overlapping windows from the start of the split (deterministic).

        A split shorter than one row yields nothing (the caller decides whether that is an error).
        """
        data = self._split(split)
        batch_size, block_size, max_batches = _eval_args(batch_size, block_size, max_batches)
        n = (len(data) - 1) // block_size
        rows = data[:n * block_size].view(n, block_size)
        for k, i in enumerate(range(0, n, batch_size)):
            if max_batches is not None and k >= max_batches:
                return
            yield {"input_ids": rows[i:i + batch_size], "labels": rows[i:i + batch_size]}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.name!r}, tokens={len(self.ids)}, vocab_size={self.vocab_size}, "
                f"unigram_entropy={self.unigram_entropy:.3f} nats)")


class DocumentCorpus(TextCorpus):
    """Separate documents, packed whole into rows with EOS, document_ids and position_ids."""

    def __init__(self, name: str, tokenizer, documents, val_fraction: float = 0.1):
        self.name, self.tokenizer = name, tokenizer
        self.documents = _packing_inputs(documents, 2, tokenizer.eos_id, tokenizer.pad_id)[0]
        for k, d in enumerate(self.documents):
            if max(d) >= self.vocab_size:
                raise ValueError(f"documents[{k}] holds {max(d)}, outside the tokenizer's "
                                 f"vocabulary [0, {self.vocab_size}). Encode it with this tokenizer.")
        self.ids = torch.tensor([t for d in self.documents for t in d + [tokenizer.eos_id]])
        self.train, self.val = train_val_split(self.documents, val_fraction)
        self._packed = {}

    def packed(self, split: str, block_size: int) -> PackedBatch:
        key = (split, block_size)
        if key not in self._packed:
            self._packed[key] = pack_whole_documents(self._split(split), block_size,
                                                     eos_id=self.tokenizer.eos_id,
                                                     pad_id=self.tokenizer.pad_id)
        return self._packed[key]

    @staticmethod
    def _rows(pb: PackedBatch, index) -> dict:
        return {"input_ids": pb.input_ids[index], "labels": pb.labels[index],
                "document_ids": pb.document_ids[index], "position_ids": pb.position_ids[index]}

    def batch(self, split: str, batch_size: int, block_size: int, *, generator=None) -> dict:
        batch_size = require_positive_int("batch_size", batch_size)
        require_generator(generator)
        pb = self.packed(split, block_size)
        return self._rows(pb, torch.randint(0, len(pb.input_ids), (batch_size,), generator=generator))

    def eval_batches(self, split: str, batch_size: int, block_size: int, max_batches: int | None = None):
        batch_size, block_size, max_batches = _eval_args(batch_size, block_size, max_batches)
        pb = self.packed(split, block_size)
        for k, i in enumerate(range(0, len(pb.input_ids), batch_size)):
            if max_batches is not None and k >= max_batches:
                return
            yield self._rows(pb, slice(i, i + batch_size))


def load_corpus(name: str, *, path=None, tokenizer: str = "char", n_documents: int = 20000,
                seed: int = 0, low: int = 0, high: int = 9, ops=("+",), val_fraction: float = 0.1):
    """A ready corpus by name: 'python-docs', 'chat-arithmetic', 'file' (with ``path``) or
    'tinyshakespeare' (downloaded once, checksummed). Text corpora use a
    :class:`CharTokenizer` built from the text, or ``tokenizer="byte"``."""
    if name == "python-stdlib":                  # the interpreter's own .py files, one per document
        from .stdlib_corpus import load_python_stdlib
        return load_python_stdlib()
    if name == "chat-arithmetic":
        tok = ChatTokenizer()
        docs = [tok.encode(t) for t in chat_arithmetic(n_documents, seed=seed, low=low, high=high, ops=ops)]
        return DocumentCorpus(name, tok, docs, val_fraction)
    if name == "python-docs":
        text = python_docs_text()
    elif name == "file":
        if path is None:
            raise ValueError("corpus 'file' needs path=... (a UTF-8 text file).")
        text = read_text_file(path)
    elif name in KNOWN_CORPORA:
        text = read_text_file(download_corpus(name))
    else:
        raise ValueError(f"unknown corpus {name!r}; choose one of {CORPORA}.")
    if tokenizer not in ("char", "byte"):
        raise ValueError(f"tokenizer must be 'char' or 'byte'; got {tokenizer!r}.")
    tok = CharTokenizer(text) if tokenizer == "char" else ByteTokenizer()
    return TextCorpus(name, tok, tok.encode(text), val_fraction)
