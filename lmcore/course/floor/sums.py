"""Notebook 09, section 5: did the floor model learn to add, or a table of 100 sums?

Every sum of 0..9 + 0..9 occurs in the training turns dozens of times, and the validation turns
are the same 100 sums, so a low validation loss cannot tell adding from remembering. Here some
sums (both orders) are kept out of training, and every sum is scored on its own afterwards.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import torch

from ..._validate import require_int_scalar, require_positive_int
from ...data import DocumentCorpus, chat_arithmetic
from .lesson import TOK
from .run import float64_run

__all__ = [
    "held_out_sums",
    "training_sum_counts",
    "train_held_out_run",
    "answer_scores",
    "compare_seen_and_held_out",
    "turn_key",
    "new_turns",
    "exact_match",
    "exact_rows",
]


def held_out_sums(n_pairs: int = 10, *, seed: int = 0, high: int = 9) -> frozenset:
    """``n_pairs`` random unordered pairs a < b from 0..high, in both orders: sums to keep out
    of training (both orders, so that a + b = b + a cannot give one away)."""
    pairs = [(a, b) for a in range(high + 1) for b in range(a + 1, high + 1)]
    if not 0 < n_pairs <= len(pairs):
        raise ValueError(f"n_pairs must be in [1, {len(pairs)}]; got {n_pairs!r}.")
    pick = random.Random(seed).sample(pairs, n_pairs)
    return frozenset(pick) | frozenset((b, a) for a, b in pick)


def _operands(text: str) -> tuple:
    a, _, b = turn_key(text)
    return a, b


def training_sum_counts(corpus) -> Counter:
    """How often each sum ``(a, b)`` occurs among the training turns of a chat-arithmetic
    ``corpus`` (any operator): a Counter of the operand pairs that occur, so ``len`` of it is
    the number of distinct sums the training turns hold."""
    return Counter(_operands(TOK.decode(d)) for d in corpus.train)


def train_held_out_run(held_out, *, n_documents: int = 4000, seed: int = 0, **overrides):
    """The floor run with the sums ``held_out`` ((a, b) pairs) removed from the *training*
    turns; the validation turns (the last 10%) are unchanged. Operands 0..9, "+"."""
    held_out = frozenset(tuple(p) for p in held_out)
    texts = chat_arithmetic(n_documents, seed=seed)
    n_val = max(1, round(0.1 * n_documents))
    train_docs = [TOK.encode(t) for t in texts[:-n_val] if _operands(t) not in held_out]
    val_docs = [TOK.encode(t) for t in texts[-n_val:]]
    corpus = DocumentCorpus(
        "chat-arithmetic", TOK, train_docs + val_docs, val_fraction=n_val / (len(train_docs) + n_val)
    )
    assert len(corpus.val) == n_val, "the validation split must be exactly the last turns"
    return float64_run(corpus, seed, overrides)


@torch.no_grad()
def answer_scores(model, *, high: int = 9) -> dict:
    """Every sum ``a + b`` (a, b in 0..high), each turn scored alone: the model's mean NLL per
    answer token (nats), whether greedy decoding writes the right answer (every answer token
    and the closing ``.`` the argmax after the true prefix) and the digits greedy decoding
    writes after ``<assistant>``."""
    was_training = model.training
    model.eval()
    out = {"a": [], "b": [], "answer_nll": [], "correct": [], "greedy": []}
    for a in range(high + 1):
        for b in range(high + 1):
            ids = TOK.encode(f"<user> {a} + {b} = <assistant> {a + b} .") + [TOK.eos_id]
            x = torch.tensor([ids], device=next(model.parameters()).device)
            logits = model(x)[0, :-1].double()  # (L-1, V): target t+1
            start = ids.index(TOK.stoi["<assistant>"])  # logits here predict c's 1st
            ans = slice(start, start + len(str(a + b)))
            nll = -torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), x[0, 1:]]
            seq, digits = ids[: start + 1], ""
            for _ in range(3):  # greedy: its digits
                nxt = int(model(torch.tensor([seq], device=x.device))[0, -1].argmax())
                if not TOK.VOCAB[nxt].isdigit():
                    break
                seq.append(nxt)
                digits += TOK.VOCAB[nxt]
            out["a"].append(a)
            out["b"].append(b)
            out["answer_nll"].append(float(nll[ans].mean()))
            out["greedy"].append(digits)
    model.train(was_training)
    turns = [f"<user> {a} + {b} = <assistant> {a + b} ." for a, b in zip(out["a"], out["b"])]
    out["correct"] = exact_rows(model, turns)
    return {k: np.array(v) for k, v in out.items()}


def compare_seen_and_held_out(scores: dict, held_out) -> dict:
    """:func:`answer_scores` split into the sums seen in training and those ``held_out``:
    per group the number of sums, the mean answer NLL per token, the share answered right, and
    the wrong answers as ``(a, b, written)``; plus ``near_misses``: the share of wrong held-out
    answers that are a number within 1 of the true sum."""
    held_out = frozenset(tuple(p) for p in held_out)
    held = np.array([(int(a), int(b)) in held_out for a, b in zip(scores["a"], scores["b"])])
    out = {}
    for name, sel in (("seen", ~held), ("held_out", held)):
        wrong = [
            (int(a), int(b), str(g))
            for a, b, g, ok in zip(
                scores["a"][sel], scores["b"][sel], scores["greedy"][sel], scores["correct"][sel]
            )
            if not ok
        ]
        out[name] = {
            "n": int(sel.sum()),
            "answer_nll": float(scores["answer_nll"][sel].mean()),
            "correct": float(scores["correct"][sel].mean()),
            "wrong": wrong,
        }
    misses = out["held_out"]["wrong"]
    close = [g.isdigit() and abs(int(g) - (a + b)) <= 1 for a, b, g in misses]
    out["near_misses"] = float(np.mean(close)) if close else float("nan")
    return out


def turn_key(text: str) -> tuple:
    """``(a, op, b)`` of a chat-arithmetic turn ``"<user> a op b = <assistant> c ."``."""
    parts = text.split()
    return int(parts[1]), parts[2], int(parts[3])


def new_turns(corpus, *, high: int, ops=("+",), seen: bool = False, n: int = 200, seed: int = 1) -> list:
    """Up to ``n`` distinct turns on operands 0..``high`` with ``ops`` (drawn by the generator with
    ``seed``) whose ``(a, op, b)`` is absent from ``corpus``'s training turns, or, with ``seen``,
    present in them: the questions never seen in training, and as many seen ones to compare."""
    n = require_positive_int("n", n)
    seed = require_int_scalar("seed", seed)
    trained = {turn_key(TOK.decode(d)) for d in corpus.train}
    out = {}
    for text in chat_arithmetic(50 * n, seed=seed, high=high, ops=tuple(ops)):
        if (turn_key(text) in trained) == bool(seen):
            out.setdefault(turn_key(text), text)
            if len(out) == n:
                break
    return list(out.values())


def exact_match(model, turns) -> float:
    """The share of ``turns`` whose answer greedy decoding writes exactly (:func:`exact_rows`)."""
    rows = exact_rows(model, turns)
    return sum(rows) / len(rows)


@torch.no_grad()
def exact_rows(model, turns) -> list:
    """For each of ``turns``, whether greedy decoding writes its answer exactly: every answer token
    and the closing ``.`` the argmax after the true prefix (what greedy decoding writes, one token
    at a time, as long as it is right), in one forward over the turns padded at their end (a causal
    model's earlier positions cannot see the padding)."""
    turns = list(turns)
    if not turns or not all(isinstance(t, str) for t in turns):
        raise ValueError("turns must be a non-empty list of chat-arithmetic turns (str).")
    rows = [TOK.encode(t) for t in turns]
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [TOK.pad_id] * (width - len(r)) for r in rows])
    was_training = model.training
    model.eval()
    guess = model(ids.to(next(model.parameters()).device)).argmax(-1).cpu()  # guess[:, t] for token t + 1
    model.train(was_training)
    right = []
    for k, r in enumerate(rows):
        start = r.index(TOK.stoi["<assistant>"]) + 1  # the answer's first token
        right.append(bool((guess[k, start - 1 : len(r) - 1] == ids[k, start : len(r)]).all()))
    return right
