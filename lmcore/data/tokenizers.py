"""Tokenizers: text <-> token ids. Characters, UTF-8 bytes, and the chat-arithmetic words.

All three share ``encode(text) -> list[int]``, ``decode(ids) -> str`` and ``vocab_size``.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable

import numpy as np
import torch

from .._validate import require_bool, require_int

__all__ = ["CharTokenizer", "ByteTokenizer", "ChatTokenizer"]


def _ids_list(ids, vocab_size: int) -> list[int]:
    """Accept a list/tuple/iterable of ints or a 1-D int64/int32 tensor or array; return a list
    of Python ints, each checked against the vocabulary. Floats and bools are never coerced."""
    if isinstance(ids, (torch.Tensor, np.ndarray)):
        if isinstance(ids, torch.Tensor):
            require_int("ids", ids)
        elif ids.dtype not in (np.int64, np.int32):
            raise TypeError(
                f"ids must be int token ids; got a NumPy array of dtype {ids.dtype}. "
                "Convert with ids.astype(np.int64)."
            )
        if ids.ndim != 1:
            raise ValueError(
                f"ids must be 1-D (one sequence of token ids); got shape "
                f"{tuple(ids.shape)}. Decode one row at a time, e.g. ids[0]."
            )
        ids = ids.tolist()
    if isinstance(ids, (str, bytes, set, frozenset, dict)) or not isinstance(ids, Iterable):
        raise TypeError(
            f"ids must be a sequence of token ids (list or 1-D tensor); got {type(ids).__name__}."
        )
    ids = list(ids)
    for k, i in enumerate(ids):
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, numbers.Integral):
            raise TypeError(
                f"ids[{k}] = {i!r} is not an int token id; ids must hold ints (never floats or bools)."
            )
        if not 0 <= i < vocab_size:
            raise ValueError(f"ids[{k}] = {i!r} is not a token id in [0, {vocab_size}).")
    return [int(i) for i in ids]


class CharTokenizer:
    """One token per character, the vocabulary being the sorted characters of ``text``."""

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"text must be a non-empty str; got {type(text).__name__} {text!r:.40}.")
        if not text:
            raise ValueError(
                "text must be a non-empty str; got ''. The vocabulary is built from "
                "its characters, so give it the training text."
            )
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}.")
        try:
            return [self.stoi[c] for c in text]
        except KeyError as err:
            pos = next(k for k, c in enumerate(text) if c not in self.stoi)
            raise ValueError(
                f"character {err.args[0]!r} at position {pos} is not in this "
                f"tokenizer's vocabulary of {self.vocab_size} characters (built "
                "from the training text). Build the tokenizer from a text that "
                "contains it, or use ByteTokenizer, which covers any text."
            ) from None

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in _ids_list(ids, self.vocab_size))

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


class ByteTokenizer:
    """The 256 UTF-8 byte values, then the special tokens BOS = 256, EOS = 257, PAD = 258.

    Any text encodes; decoding drops special tokens unless ``keep_special=True`` (then they
    read ``<BOS>``, ``<EOS>``, ``<PAD>``) and replaces an invalid byte sequence with U+FFFD.
    """

    SPECIALS = ("<BOS>", "<EOS>", "<PAD>")
    bos_id, eos_id, pad_id = 256, 257, 258
    vocab_size = 259

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}.")
        add_bos, add_eos = require_bool("add_bos", add_bos), require_bool("add_eos", add_eos)
        try:
            ids = list(text.encode("utf-8"))
        except UnicodeEncodeError as err:
            raise ValueError(
                f"text holds {text[err.start]!r} at position {err.start}, a lone "
                "surrogate that UTF-8 cannot encode. Fix the text's decoding (e.g. "
                "read files with encoding='utf-8')."
            ) from None
        return [self.bos_id] * add_bos + ids + [self.eos_id] * add_eos

    def decode(self, ids, *, keep_special: bool = False) -> str:
        keep_special = require_bool("keep_special", keep_special)
        out, run = [], bytearray()
        for i in _ids_list(ids, self.vocab_size):
            if i < 256:
                run.append(i)
                continue
            out.append(run.decode("utf-8", errors="replace"))
            run = bytearray()
            if keep_special:
                out.append(self.SPECIALS[i - 256])
        out.append(run.decode("utf-8", errors="replace"))
        return "".join(out)

    def __repr__(self) -> str:
        return "ByteTokenizer(vocab_size=259, bos_id=256, eos_id=257, pad_id=258)"


class ChatTokenizer:
    """The chat-arithmetic vocabulary: role markers, operators, punctuation and single digits.

    ``"<user> 12 + 3 = <assistant> 15 ."`` -> ``<user> 1 2 + 3 = <assistant> 1 5 .`` (each
    digit one token, whitespace ignored). ``PAD`` (id 0) and ``EOS`` (id 1) are tokens too.
    """

    VOCAB = ("PAD", "EOS", "<user>", "<assistant>", "+", "-", "*", "=", ".") + tuple("0123456789")
    pad_id, eos_id = 0, 1
    vocab_size = len(VOCAB)
    _PATTERN = re.compile(r"<user>|<assistant>|EOS|PAD|\d|[+\-*=.]|\S")

    def __init__(self):
        self.stoi = {t: i for i, t in enumerate(self.VOCAB)}

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}.")
        ids = []
        for m in self._PATTERN.finditer(text):
            if m.group() not in self.stoi:
                raise ValueError(
                    f"{m.group()!r} at position {m.start()} is not a chat-arithmetic "
                    f"token; the vocabulary is {' '.join(self.VOCAB)}."
                )
            ids.append(self.stoi[m.group()])
        return ids

    def decode(self, ids) -> str:
        """Tokens joined by spaces, except that consecutive digits form one number."""
        out = []
        for i in _ids_list(ids, self.vocab_size):
            tok = self.VOCAB[i]
            sign = out[-1:] == ["-"] and out[-2:-1] == ["<assistant>"]  # a negative answer
            if tok.isdigit() and out and (out[-1].lstrip("-").isdigit() or sign):
                out[-1] += tok
            else:
                out.append(tok)
        return " ".join(out)

    def tokens(self, ids) -> list[str]:
        """The token strings, one per id (for tables and plots)."""
        return [self.VOCAB[i] for i in _ids_list(ids, self.vocab_size)]

    def __repr__(self) -> str:
        return f"ChatTokenizer(vocab_size={self.vocab_size})"
