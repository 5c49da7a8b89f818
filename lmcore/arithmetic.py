"""The chat-arithmetic corpus and its exact entropy: a corpus whose loss floor is known.

Each document is one chat turn, ``<user> 2 + 3 = <assistant> 5 .`` (EOS is added by packing).
The operands are uniform, so the information per turn is exactly known and so is the lowest
mean loss any model can reach: :func:`chat_arithmetic_entropy`.
"""
from __future__ import annotations

import math
import random

import numpy as np

from ._validate import require_positive_int

__all__ = ["chat_arithmetic", "chat_arithmetic_entropy"]

_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _check_operands(low, high, ops):
    if isinstance(low, bool) or isinstance(high, bool) or not (isinstance(low, int) and isinstance(high, int)) \
            or not 0 <= low <= high:
        raise ValueError(f"operands must satisfy 0 <= low <= high (ints); got low={low!r}, high={high!r}.")
    if isinstance(ops, str) or not ops or any(op not in _OPS for op in ops) or len(set(ops)) != len(ops):
        raise ValueError(f"ops must be a non-empty tuple of distinct operators from {tuple(_OPS)}; got {ops!r}.")


def chat_arithmetic(n: int, *, seed: int = 0, low: int = 0, high: int = 9, ops=("+",)) -> list[str]:
    """``n`` chat turns ``"<user> a + b = <assistant> c ."`` with a, b uniform in [low, high].

    The operator is uniform over ``ops``. EOS is not in the text: packing appends it. Encode
    with :class:`ChatTokenizer` (one token per digit).
    """
    require_positive_int("n", n)
    _check_operands(low, high, ops)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, op, b = rng.randint(low, high), rng.choice(tuple(ops)), rng.randint(low, high)
        out.append(f"<user> {a} {op} {b} = <assistant> {_OPS[op](a, b)} .")
    return out


def chat_arithmetic_entropy(*, low: int = 0, high: int = 9, ops=("+",), per: str = "target") -> float:
    """The exact entropy (nats) of the chat-arithmetic corpus: the floor no model can beat.

    A turn is fixed by (a, op, b), and different triples give different token sequences, so the
    tokens of one turn carry exactly H = 2 ln K + ln |ops| nats (K = high - low + 1); everything
    after ``=`` is determined. ``per="document"`` returns H; ``per="target"`` (default) divides
    by the expected number of targets per turn (every token after ``<user>``, plus the EOS),
    which is the token-weighted mean loss a perfect model reaches when each turn is seen whole
    (e.g. :func:`pack_whole_documents`). For 0..9 and "+": 2 ln 10 / 8.45 = 0.545 nats.
    """
    _check_operands(low, high, ops)
    if per not in ("target", "document"):
        raise ValueError(f"per must be 'target' or 'document'; got {per!r}.")
    K = high - low + 1
    h_doc = 2 * math.log(K) + math.log(len(ops))
    if per == "document":
        return h_doc
    vals = np.arange(low, high + 1, dtype=np.int64)
    a, b = np.meshgrid(vals, vals, indexing="ij")
    digits = lambda x: np.char.str_len(np.abs(x).astype(str)) + (x < 0)   # '-' is one token
    fixed = 5          # <user>, op, =, <assistant>, . (EOS replaces the unscored <user>)
    mean_len = np.mean([digits(a) + digits(b) + digits(_OPS[op](a, b)) + fixed for op in ops])
    return h_doc / float(mean_len)
