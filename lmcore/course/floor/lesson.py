"""Notebook 09 (the loss floor): entropy and KL, the floor of a sample, the floors of models
that read less (one token back, nothing), and the exact per-token floor of chat arithmetic
(the exercise checkers live in :mod:`lmcore.course.floor.exercises`, the training run in
:mod:`lmcore.course.floor.run`, the per-target scoring in ``tokens``, plots and the widget
in ``views``).

The floor is exact: :func:`lmcore.data.chat_arithmetic_entropy` for the whole corpus, and
:func:`oracle_probs` (every turn enumerated) for each token, so a trained model's loss can be
compared with what no model can beat, token by token.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from functools import lru_cache

import numpy as np

from ...data import chat_arithmetic_entropy
from ...data.arithmetic import _OPS
from ...data.tokenizers import ChatTokenizer

__all__ = [
    "entropy",
    "kl_divergence",
    "gap_by_token",
    "cross_entropy",
    "sample_floors",
    "context_free_floor",
    "previous_token_floor",
    "SLOTS",
    "token_slots",
    "oracle_probs",
    "exact_slot_entropy",
    "RANGES",
]

TOK = ChatTokenizer()
SLOTS = ("a", "op", "b", "=", "<assistant>", "c", ".", "EOS")  # c: the answer's tokens
RANGES = (1, 2, 4, 9, 19, 49, 99)  # operands 0..high in the widget


def _dist(name, p):
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or np.any(p < 0) or abs(p.sum() - 1) > 1e-9:
        raise ValueError(f"{name} must be a 1-D probability vector (>= 0, summing to 1); got {p!r}.")
    return p


def entropy(p) -> float:
    """H(p) = -sum p ln p in nats, with 0 ln 0 = 0."""
    p = _dist("p", p)
    nz = p > 0
    return float(-(p[nz] * np.log(p[nz])).sum())


def _pair(p, q):
    p, q = _dist("p", p), _dist("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same length; got {p.size} and {q.size}.")
    nz = p > 0
    return p[nz], q[nz]


def cross_entropy(p, q) -> float:
    """-sum p ln q in nats: the expected loss of a model q on data drawn from p."""
    p, q = _pair(p, q)
    return float(-(p * np.log(q)).sum()) if np.all(q > 0) else math.inf


def kl_divergence(p, q) -> float:
    """KL(p || q) = sum p ln(p / q) in nats = cross_entropy(p, q) - entropy(p) >= 0."""
    p, q = _pair(p, q)
    return float((p * np.log(p / q)).sum()) if np.all(q > 0) else math.inf


def gap_by_token(p, q) -> np.ndarray:
    """Token x's share of the gap: its term of H(p, q) minus its term of H(p), p(x) ln(p(x) / q(x))
    in nats (0 where p(x) = 0). Entries can be negative (where q(x) > p(x)); they add up to
    :func:`kl_divergence`, which is not."""
    p, q = _pair(p, q)
    if not np.all(q[p > 0] > 0):
        raise ValueError("q must be > 0 wherever p > 0.")
    out = np.zeros_like(p)
    k = p > 0
    out[k] = p[k] * np.log(p[k] / q[k])
    return out


def sample_floors(p, n: int, *, samples: int = 2000, seed: int = 0) -> dict:
    """Draw ``samples`` samples of ``n`` tokens from ``p``; for each, the lowest mean loss a
    context-free model q reaches on that sample (q = its frequencies f, the loss H(f)), and
    what that fitted q pays on new data drawn from p, H(p, f) (inf where the sample missed a
    token p draws). Returns ``floor`` and ``held_out`` arrays (one entry per sample) and
    ``missed``, the share of samples that missed a token."""
    p = _dist("p", p)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an int >= 1; got {n!r}.")
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be an int >= 1; got {samples!r}.")
    counts = np.random.default_rng(seed).multinomial(int(n), p, size=int(samples))  # (samples, V)
    f = counts / n
    f_log_f = np.where(f > 0, f * np.log(np.where(f > 0, f, 1.0)), 0.0)
    with np.errstate(divide="ignore"):
        held_out = -(p * np.log(f)).sum(axis=1, where=p > 0)  # -inf terms where f = 0 < p
    missed = ((counts == 0) & (p > 0)).any(axis=1)
    return {
        "floor": -f_log_f.sum(axis=1),
        "held_out": np.where(missed, math.inf, held_out),
        "missed": missed.mean(),
    }


def _operand_range(high) -> int:
    if isinstance(high, bool) or not isinstance(high, (int, np.integer)) or not 0 <= high <= 999:
        raise ValueError(f"high must be an int in [0, 999]; got {high!r}.")
    return int(high)


def _pairs_of_turns(high: int) -> Counter:
    """How often each (previous token, target) pair comes over every ``a + b`` turn with a, b on
    0..high, each turn once. Targets as in section 2: every token after ``<user>``, plus EOS."""
    pairs: Counter = Counter()
    for a in range(high + 1):
        for b in range(high + 1):
            ids = TOK.encode(f"<user> {a} + {b} = <assistant> {a + b} .") + [TOK.eos_id]
            pairs.update(zip(ids[:-1], ids[1:]))
    return pairs


def _conditional_entropy(pairs: Counter) -> float:
    """The entropy of the target given its context, in nats, on counted (context, target) pairs:
    -sum n(c, x) / n ln(n(c, x) / n(c)), each context's frequencies being its best model."""
    before: Counter = Counter()
    for (c, _), k in pairs.items():
        before[c] += k
    n = sum(pairs.values())
    return float(-sum(k / n * math.log(k / before[c]) for (c, _), k in pairs.items()))


def context_free_floor(high: int = 9) -> float:
    """The lowest loss, in nats per target, of a model that gives every target the same
    distribution whatever came before, on a long corpus of ``<user> a + b = <assistant> c .``
    turns (a, b uniform on 0..high): the entropy of the targets' token frequencies."""
    targets: Counter = Counter()
    for (_, x), k in _pairs_of_turns(_operand_range(high)).items():
        targets[x] += k
    return _conditional_entropy(Counter({(None, x): k for x, k in targets.items()}))


def previous_token_floor(high: int = 9) -> float:
    """The lowest loss, in nats per target, of a model that reads only the token before each
    target (a bigram model) on the same corpus: the entropy of each previous token's targets,
    weighted by how often it comes (the first target's previous token is ``<user>``)."""
    return _conditional_entropy(_pairs_of_turns(_operand_range(high)))


# ---------------------------------------------------------------- the exact per-token floor


def token_slots(ids) -> list[str]:
    """The slot of each chat-arithmetic token: ``<user>``, a, op, b, =, <assistant>, c, ., EOS
    (PAD for padding). Works on one turn or a packed stream of several."""
    out, state = [], None
    for i in ids.tolist() if hasattr(ids, "tolist") else ids:
        tok = TOK.VOCAB[i]
        if tok in ("<user>", "PAD", "EOS", "=", "<assistant>", "."):
            state = {"<user>": "a", "=": None, "<assistant>": "c"}.get(tok)
            out.append(tok)
        elif state == "a" and out[-1] != "<user>" and not tok.isdigit():
            state = "b"
            out.append("op")
        else:
            out.append(state or "?")
    return out


def _turns(low: int, high: int, ops):
    """Every turn (token ids + EOS), each (a, op, b) once."""
    for a in range(low, high + 1):
        for op in ops:
            for b in range(low, high + 1):
                c = _OPS[op](a, b)
                yield TOK.encode(f"<user> {a} {op} {b} = <assistant> {c} .") + [TOK.eos_id]


@lru_cache(maxsize=16)
def oracle_probs(low: int = 0, high: int = 9, ops=("+",)) -> dict:
    """The true next-token distribution after every prefix of a turn: {prefix: {token: p}}.

    Every (a, op, b) is enumerated once (they are equally likely), so this is the model with
    zero KL: its loss on any turn is the floor, token by token.
    """
    chat_arithmetic_entropy(low=low, high=high, ops=tuple(ops))  # validates the arguments
    counts = defaultdict(Counter)
    for seq in _turns(low, high, tuple(ops)):
        for t in range(1, len(seq)):
            counts[tuple(seq[:t])][seq[t]] += 1
    return {pre: {k: v / sum(c.values()) for k, v in c.items()} for pre, c in counts.items()}


def exact_slot_entropy(low: int = 0, high: int = 9, ops=("+",)) -> dict:
    """Per slot: ``(targets per turn, nats per turn)`` of the perfect model, averaged over all
    turns. The nats add up to ``chat_arithmetic_entropy(per="document")``."""
    probs, sums, turns = oracle_probs(low, high, tuple(ops)), defaultdict(lambda: [0.0, 0.0]), 0
    for seq in _turns(low, high, tuple(ops)):
        slots = token_slots(seq)
        for t in range(1, len(seq)):
            sums[slots[t]][0] += 1
            sums[slots[t]][1] -= math.log(probs[tuple(seq[:t])][seq[t]])
        turns += 1
    return {s: (sums[s][0] / turns, sums[s][1] / turns) for s in SLOTS if s in sums}
