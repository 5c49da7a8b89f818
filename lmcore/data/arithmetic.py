"""The chat-arithmetic corpus and its exact entropy: a corpus whose loss floor is known.

Each document is one chat turn, ``<user> 2 + 3 = <assistant> 5 .`` (EOS is added by packing).
The operands are uniform, so the information per turn is exactly known and so is the lowest
mean loss any model can reach: :func:`chat_arithmetic_entropy`.
"""

from __future__ import annotations

import math
import numbers
import random

import numpy as np

from .._validate import require_int_scalar, require_positive_int

__all__ = ["chat_arithmetic", "chat_arithmetic_entropy"]

_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


_MAX_OPERANDS = 10**7  # operand values per side for the exact entropy (arrays of this size)


def _check_operands(low, high, ops):
    """``(low, high, ops)`` as ints and a tuple; TypeError for a wrong type, ValueError else."""
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise TypeError(f"operands must satisfy 0 <= low <= high (ints); got {name}={v!r}.")
    low, high = int(low), int(high)
    if not 0 <= low <= high:
        raise ValueError(f"operands must satisfy 0 <= low <= high (ints); got low={low!r}, high={high!r}.")
    what = f"ops must be a non-empty tuple of distinct operators from {tuple(_OPS)}"
    if not isinstance(ops, (tuple, list)) or not all(isinstance(op, str) for op in ops):
        raise TypeError(f"{what} (an ordered tuple, so a seed always gives the same corpus); got {ops!r}.")
    if not ops or any(op not in _OPS for op in ops) or len(set(ops)) != len(ops):
        raise ValueError(f"{what}; got {ops!r}.")
    return low, high, tuple(ops)


def chat_arithmetic(n: int, *, seed: int = 0, low: int = 0, high: int = 9, ops=("+",)) -> list[str]:
    """``n`` chat turns ``"<user> a + b = <assistant> c ."`` with a, b uniform in [low, high].

    The operator is uniform over ``ops``. EOS is not in the text: packing appends it. Encode
    with :class:`ChatTokenizer` (one token per digit).
    """
    n = require_positive_int("n", n)
    seed = require_int_scalar("seed", seed, hint="A fixed int makes the corpus reproducible.")
    low, high, ops = _check_operands(low, high, ops)
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
    (``pack_documents(..., policy="whole")``). For 0..9 and "+": 2 ln 10 / 8.45 = 0.545 nats.
    """
    low, high, ops = _check_operands(low, high, ops)
    if per not in ("target", "document"):
        raise ValueError(f"per must be 'target' or 'document'; got {per!r}.")
    K = high - low + 1
    h_doc = 2 * math.log(K) + math.log(len(ops))
    if per == "document":
        return h_doc
    if K > _MAX_OPERANDS or high > 10**9:
        raise ValueError(
            f"high - low + 1 = {K} operand values (high = {high}): the exact mean "
            f"length is computed for at most {_MAX_OPERANDS} values up to 10**9; "
            "use a smaller high."
        )
    fixed = 5  # <user>, op, =, <assistant>, . (EOS replaces the unscored <user>)
    total = sum(_answer_tokens(low, high, op) for op in ops)  # over all K * K pairs
    total += len(ops) * (2 * K * int(_tokens(np.arange(low, high + 1)).sum()) + fixed * K * K)
    return h_doc / (total / (len(ops) * K * K))


def _tokens(x: np.ndarray) -> np.ndarray:
    """Tokens of each integer as chat arithmetic writes it: one per digit, '-' one more."""
    a, d, p = np.abs(x), np.ones(x.shape, dtype=np.int64), 10
    while a.size and p <= int(a.max()):
        d += a >= p
        p *= 10
    return d + (x < 0)


def _answer_tokens(low: int, high: int, op: str) -> int:
    """Total answer tokens over every pair (a, b) in [low, high]^2, without listing the pairs."""
    K = high - low + 1
    if op in "+-":  # a + b (or a - b) = s is hit by K - |s - centre| pairs
        centre = low + high if op == "+" else 0
        s = np.arange(centre - (K - 1), centre + K, dtype=np.int64)
        return int(((K - np.abs(s - centre)) * _tokens(s)).sum())
    a = np.arange(low, high + 1, dtype=np.int64)  # a * b for b in [low, high], per a
    total, p = K * K, 10  # one token each, plus one per 10^j passed
    while p <= high * high:
        below = np.zeros_like(a)  # b with a * b < p
        nz = a > 0
        below[nz] = np.clip(-(-p // a[nz]) - low, 0, K)
        below[~nz] = K
        total += int((K - below).sum())
        p *= 10
    return total
