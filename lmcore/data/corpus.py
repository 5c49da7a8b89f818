"""Corpora and batches, all offline: chat arithmetic, the Python docs, any UTF-8 file.

A batch is a dict with ``input_ids`` and ``labels`` (N, L), ``labels = input_ids`` up to
masking (the loss shifts), plus ``document_ids`` and ``position_ids`` for packed documents.
Documents are packed by :func:`lmcore.shift.pack_documents` (the contract's home for packing);
the ``python-stdlib`` corpus is :mod:`lmcore.data.stdlib`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch

from .._validate import (
    _describe,
    require_documents,
    require_generator,
    require_ids_in_range,
    require_int,
    require_positive_int,
    require_real,
    require_tensor,
    require_token_ids,
)
from ..shift import PackedBatch, pack_documents
from .arithmetic import chat_arithmetic
from .base import CorpusBase, eval_args, packed_rows
from .download import KNOWN_CORPORA, download_corpus
from .stdlib import load_python_stdlib
from .tokenizers import ByteTokenizer, CharTokenizer, ChatTokenizer

__all__ = [
    "python_docs_text",
    "read_text_file",
    "train_val_split",
    "random_windows",
    "TextCorpus",
    "DocumentCorpus",
    "load_corpus",
    "CORPORA",
]

CORPORA = ("python-docs", "python-stdlib", "chat-arithmetic", "file", "tinyshakespeare")


def python_docs_text() -> str:
    """The English help topics that ship with CPython (``pydoc_data.topics``), ~0.5 MB.

    Topics are joined in sorted order, so the text is fixed for a given Python version (it
    differs a little between versions).
    """
    try:
        from pydoc_data.topics import topics
    except ImportError as err:  # some distributions strip it
        raise RuntimeError(
            "pydoc_data is missing from this Python installation; use "
            "load_corpus('file', path=...) or 'chat-arithmetic'."
        ) from err
    return "\n\n".join(topics[k] for k in sorted(topics))


def read_text_file(path) -> str:
    """The whole file as text; a clear error if it is not UTF-8."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path (str or pathlib.Path); got {_describe(path)}.")
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path} is not valid UTF-8 (byte {err.start}); convert it, e.g. "
            "iconv -t utf-8, or read it with ByteTokenizer."
        ) from None


def train_val_split(data, val_fraction: float = 0.1):
    """Split a 1-D token tensor (or a list of documents) into its first and last parts."""
    if not 0 < require_real("val_fraction", val_fraction, finite=False) < 1:
        raise ValueError(f"val_fraction must be in (0, 1); got {val_fraction!r}.")
    if not (
        (isinstance(data, torch.Tensor) and data.dim() >= 1)
        or (isinstance(data, Sequence) and not isinstance(data, (str, bytes)))
    ):
        raise TypeError(f"data must be a 1-D token tensor or a list of documents; got {_describe(data)}.")
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
        raise ValueError(
            f"data must be a 1-D token tensor with at least block_size = {block_size} "
            f"tokens; got shape {tuple(data.shape)}."
        )
    starts = torch.randint(0, len(data) - block_size + 1, (batch_size,), generator=generator)
    return data[starts[:, None] + torch.arange(block_size)].long()


class TextCorpus(CorpusBase):
    """One token stream, split into train/val; batches are random windows (labels = input_ids)."""

    def __init__(self, name: str, tokenizer, ids, val_fraction: float = 0.1):
        self.name, self.tokenizer = name, tokenizer
        self.ids = require_token_ids("ids", ids)
        if self.ids.dim() != 1:
            raise ValueError(f"ids must be one token stream (1-D); got shape {tuple(self.ids.shape)}.")
        require_ids_in_range("ids", self.ids, self.vocab_size, "Encode the text with this tokenizer.")
        self.train, self.val = train_val_split(self.ids, val_fraction)

    def _split(self, split):
        return self.train if self._check_split(split) == "train" else self.val

    def batch(self, split: str, batch_size: int, block_size: int, *, generator=None) -> dict:
        x = random_windows(self._split(split), batch_size, block_size, generator=generator)
        return {"input_ids": x, "labels": x}

    def eval_batches(self, split: str, batch_size: int, block_size: int, max_batches: int | None = None):
        """Consecutive non-overlapping windows from the start of the split (deterministic).

        A split shorter than one row yields nothing (the caller decides whether that is an error).
        """
        data = self._split(split)
        batch_size, block_size, max_batches = eval_args(batch_size, block_size, max_batches)
        n = (len(data) - 1) // block_size
        rows = data[: n * block_size].view(n, block_size)
        for k, i in enumerate(range(0, n, batch_size)):
            if max_batches is not None and k >= max_batches:
                return
            yield {"input_ids": rows[i : i + batch_size], "labels": rows[i : i + batch_size]}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, tokens={len(self.ids)}, vocab_size={self.vocab_size}, "
            f"unigram_entropy={self.unigram_entropy:.3f} nats)"
        )


class DocumentCorpus(TextCorpus):
    """Separate documents, packed whole into rows with EOS, document_ids and position_ids."""

    def __init__(self, name: str, tokenizer, documents, val_fraction: float = 0.1):
        self.name, self.tokenizer = name, tokenizer
        self.documents = require_documents("documents", documents)
        for k, d in enumerate(self.documents):
            if max(d) >= self.vocab_size:
                raise ValueError(
                    f"documents[{k}] holds {max(d)}, outside the tokenizer's "
                    f"vocabulary [0, {self.vocab_size}). Encode it with this tokenizer."
                )
        self.ids = torch.tensor([t for d in self.documents for t in d + [tokenizer.eos_id]])
        self.train, self.val = train_val_split(self.documents, val_fraction)
        self._packed = {}

    def packed(self, split: str, block_size: int) -> PackedBatch:
        key = (split, block_size)
        if key not in self._packed:
            self._packed[key] = pack_documents(
                self._split(split),
                block_size,
                policy="whole",
                eos_id=self.tokenizer.eos_id,
                pad_id=self.tokenizer.pad_id,
            )
        return self._packed[key]

    def batch(self, split: str, batch_size: int, block_size: int, *, generator=None) -> dict:
        batch_size = require_positive_int("batch_size", batch_size)
        require_generator(generator)
        pb = self.packed(split, block_size)
        return packed_rows(pb, torch.randint(0, len(pb.input_ids), (batch_size,), generator=generator))

    def eval_batches(self, split: str, batch_size: int, block_size: int, max_batches: int | None = None):
        batch_size, block_size, max_batches = eval_args(batch_size, block_size, max_batches)
        pb = self.packed(split, block_size)
        for k, i in enumerate(range(0, len(pb.input_ids), batch_size)):
            if max_batches is not None and k >= max_batches:
                return
            yield packed_rows(pb, slice(i, i + batch_size))


def load_corpus(
    name: str,
    *,
    path=None,
    tokenizer: str = "char",
    n_documents: int = 20000,
    seed: int = 0,
    low: int = 0,
    high: int = 9,
    ops=("+",),
    val_fraction: float = 0.1,
):
    """A ready corpus by name: 'python-docs', 'chat-arithmetic', 'file' (with ``path``) or
    'tinyshakespeare' (downloaded once, checksummed). Text corpora use a
    :class:`CharTokenizer` built from the text, or ``tokenizer="byte"``."""
    if name == "python-stdlib":  # the interpreter's own .py files, one per document
        return load_python_stdlib()
    if name == "chat-arithmetic":
        tok = ChatTokenizer()
        docs = [tok.encode(t) for t in chat_arithmetic(n_documents, seed=seed, low=low, high=high, ops=ops)]
        return DocumentCorpus(name, tok, docs, val_fraction)
    source = None  # the file the text comes from, named in errors
    if name == "python-docs":
        text = python_docs_text()
    elif name == "file":
        if path is None:
            raise ValueError("corpus 'file' needs path=... (a UTF-8 text file).")
        source, text = path, read_text_file(path)
    elif name in KNOWN_CORPORA:
        source = download_corpus(name)
        text = read_text_file(source)
    else:
        raise ValueError(f"unknown corpus {name!r}; choose one of {CORPORA}.")
    if tokenizer not in ("char", "byte"):
        raise ValueError(f"tokenizer must be 'char' or 'byte'; got {tokenizer!r}.")
    if source is not None and not text:
        raise ValueError(
            f"the corpus file {source} is empty: give load_corpus a UTF-8 text file with text in it."
        )
    tok = CharTokenizer(text) if tokenizer == "char" else ByteTokenizer()
    try:
        return TextCorpus(name, tok, tok.encode(text), val_fraction)
    except ValueError as err:  # e.g. too short to split: say which file
        if source is None:
            raise
        raise ValueError(f"the corpus file {source}: {err}") from None
