"""Notebook 09 (the loss floor): entropy and KL, the exact per-token floor of chat arithmetic,
the floor run, its plots, the operand-range widget and the exercise checkers.

The floor is exact: :func:`lmcore.data.chat_arithmetic_entropy` for the whole corpus, and
:func:`oracle_probs` (every turn enumerated) for each token, so a trained model's loss can be
compared with what no model can beat, token by token.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from functools import lru_cache

import numpy as np
import torch

from ..data import chat_arithmetic_entropy, load_corpus
from ..loss import causal_lm_loss
from ..perplexity import bits_per_byte
from ..shift import IGNORE_INDEX
from ..tokenizers import ChatTokenizer
from .checks import Case, check

__all__ = ["entropy", "kl_divergence", "cross_entropy", "SLOTS", "token_slots", "oracle_probs",
           "exact_slot_entropy", "floor_config", "train_floor_run", "per_target_nll",
           "slot_breakdown", "RANGES", "ROLES",
           "check_entropy", "check_kl_gap",
           "check_bits_per_byte"]

TOK = ChatTokenizer()
SLOTS = ("a", "op", "b", "=", "<assistant>", "c", ".", "EOS")   # c: the answer's tokens
RANGES = (1, 2, 4, 9, 19, 49, 99)                                # operands 0..high in the widget


def _dist(name, p):
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or np.any(p < 0) \
            or abs(p.sum() - 1) > 1e-9:
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


# ---------------------------------------------------------------- the exact per-token floor

def token_slots(ids) -> list[str]:
    """The slot of each chat-arithmetic token: ``<user>``, a, op, b, =, <assistant>, c, ., EOS
    (PAD for padding). Works on one turn or a packed stream of several."""
    out, state = [], None
    for i in (ids.tolist() if hasattr(ids, "tolist") else ids):
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
                c = {"+": a + b, "-": a - b, "*": a * b}[op]
                yield TOK.encode(f"<user> {a} {op} {b} = <assistant> {c} .") + [TOK.eos_id]


@lru_cache(maxsize=16)
def oracle_probs(low: int = 0, high: int = 9, ops=("+",)) -> dict:
    """The true next-token distribution after every prefix of a turn: {prefix: {token: p}}.

    Every (a, op, b) is enumerated once (they are equally likely), so this is the model with
    zero KL: its loss on any turn is the floor, token by token.
    """
    chat_arithmetic_entropy(low=low, high=high, ops=tuple(ops))   # validates the arguments
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


# ---------------------------------------------------------------- the floor run

def floor_config(**overrides):
    """The notebook's run: a 2-layer, 32-wide GPT, 300 steps of 64 rows of 32 tokens, on the
    CPU with one thread (a few seconds); every field spelled out, ``overrides`` go on top."""
    from ..presets import TrainConfig

    base = dict(corpus="chat-arithmetic", n_layer=2, n_head=2, n_embd=32, block_size=32,
                dropout=0.0, batch_size=64, grad_accum=1, max_steps=300, lr=1.5e-2, min_lr=1.5e-3,
                warmup_steps=20, weight_decay=0.1, betas=(0.9, 0.99), grad_clip=1.0,
                eval_interval=25, eval_batches=8, seed=0, device="cpu", dtype="float32",
                compile=False, num_threads=1, progress=False)
    return TrainConfig(**{**base, **overrides})


def train_floor_run(*, low: int = 0, high: int = 9, ops=("+",), n_documents: int = 4000,
                    seed: int = 0, **overrides):
    """Train on ``n_documents`` chat-arithmetic turns; returns :class:`lmcore.train.TrainResult`
    (its ``corpus`` has the validation turns).

    The model is float64: in float32 the last steps' rounding differs between CPUs (AVX2 vs
    AVX-512 kernels) and the final loss moves in the third decimal; in float64 it does not.
    """
    from ..model import GPT, GPTConfig
    from ..train import train

    corpus = load_corpus("chat-arithmetic", n_documents=n_documents, seed=seed, low=low,
                         high=high, ops=tuple(ops))
    cfg = floor_config(seed=seed, **overrides)
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=corpus.vocab_size, block_size=cfg.block_size,
                          n_layer=cfg.n_layer, n_head=cfg.n_head, n_embd=cfg.n_embd)).double()
    return train(cfg, corpus, model=model)


@torch.no_grad()
def per_target_nll(model, corpus, *, low: int = 0, high: int = 9, ops=("+",),
                   split: str = "val", block_size: int = 32) -> dict:
    """Every scored target of ``split``: its slot, the model's NLL and the perfect model's
    NLL (nats), as arrays of equal length. Turns are packed whole, as in training."""
    pb = corpus.packed(split, block_size)
    was_training = model.training
    model.eval()
    logits = torch.cat([model(pb.input_ids[i:i + 256], document_ids=pb.document_ids[i:i + 256],
                              position_ids=pb.position_ids[i:i + 256])
                        for i in range(0, len(pb.input_ids), 256)])
    model.train(was_training)
    nll = causal_lm_loss(logits.double(), pb.labels, reduction="none")        # (N, L-1)
    probs = oracle_probs(low, high, tuple(ops))
    slots, mine, best = [], [], []
    for r, row in enumerate(pb.input_ids.tolist()):
        for j in range(1, len(row)):
            if int(pb.labels[r, j]) == IGNORE_INDEX:
                continue
            start = j - int(pb.position_ids[r, j])
            slots.append(token_slots(row[start:j + 1])[-1])
            mine.append(float(nll[r, j - 1]))
            best.append(-math.log(probs[tuple(row[start:j])][row[j]]))
    return {"slot": np.array(slots), "model": np.array(mine), "oracle": np.array(best)}


ROLES = {"a": "prompt digits", "b": "prompt digits", "c": "answer"}   # the rest: formatting


def slot_breakdown(table: dict, *, by: str = "slot", low: int = 0, high: int = 9, ops=("+",)):
    """Rows ``(name, share of targets, model mean NLL, exact entropy per token)`` per slot (or
    per role with ``by="role"``); the exact values come from :func:`exact_slot_entropy`."""
    if by not in ("slot", "role"):
        raise ValueError(f"by must be 'slot' or 'role'; got {by!r}.")
    key = (lambda s: s) if by == "slot" else (lambda s: ROLES.get(s, "formatting"))
    exact = defaultdict(lambda: [0.0, 0.0])
    for s, (n, nats) in exact_slot_entropy(low, high, ops).items():
        exact[key(s)][0] += n
        exact[key(s)][1] += nats
    names = np.array([key(s) for s in table["slot"]])
    order = list(dict.fromkeys(key(s) for s in SLOTS))
    return [(g, float((names == g).mean()), float(table["model"][names == g].mean()),
             exact[g][1] / exact[g][0]) for g in order if (names == g).any()]


# ---------------------------------------------------------------- plots and the widget


def _prob_cases(seed: int, pairs: bool) -> list[Case]:
    fixed = [[0.5, 0.25, 0.125, 0.125], [0.1] * 10, [1.0, 0.0, 0.0], [0.7, 0.0, 0.3], [0.5, 0.5]]
    rng = np.random.default_rng(seed)
    ps = [np.array(p) for p in fixed] + [rng.dirichlet(np.full(k, a)) for k, a in
                                         ((3, 1.0), (5, 0.3), (8, 2.0), (12, 0.5))]
    if not pairs:
        return [Case((p,)) for p in ps]
    return [Case((p, q)) for p in ps for q in (np.full(p.size, 1 / p.size),
                                                rng.dirichlet(np.ones(p.size)) * 0.9 + 0.1 / p.size)]


def check_entropy(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(p) -> H(p)`` in nats (1-D NumPy probabilities, zeros allowed)."""
    return check("entropy H(p)", fn, entropy, _prob_cases(0, False), atol=1e-9, rtol=1e-7,
                 hint="H(p) = -sum p ln p with the natural log (nats, not bits); skip the zero "
                      "entries (0 ln 0 = 0), e.g. p = p[p > 0].", quiet=quiet)


def check_kl_gap(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(p, q) -> KL(p || q)`` in nats (q > 0 everywhere, p may have zeros)."""
    return check("KL gap KL(p || q)", fn, kl_divergence, _prob_cases(1, True), atol=1e-9,
                 rtol=1e-7, quiet=quiet,
                 hint="KL(p || q) = sum p ln(p / q), weighted by the data p (not by q); it is the "
                      "cross-entropy minus H(p), in nats; skip the entries where p = 0.")


def _bpb_cases() -> list[Case]:
    return [Case((2.0, 1000, 3940), label="loss 2.0 nats, 1000 tokens, 3940 bytes"),
            Case((0.545, 8450, 31450)), Case((1.1, 500, 500), label="one byte per token"),
            Case((3.3, 64, 700)), Case((0.0, 10, 40), label="a perfect model")]


def check_bits_per_byte(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(mean_loss_nats, n_tokens, n_bytes) -> bits per byte`` against
    :func:`lmcore.perplexity.bits_per_byte`."""
    return check("bits per byte", fn, lambda m, n, b: bits_per_byte(m * n, b), _bpb_cases(),
                 atol=1e-9, rtol=1e-7, quiet=quiet,
                 hint="total bits = mean loss x tokens / ln 2; then divide by the bytes.")
