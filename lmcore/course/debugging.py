"""Notebook 07 (debugging label bugs): the classic pipelines where "the loss falls but the target
is wrong", each trained a few steps with a tiny GPT, their diagnoses, and the measurements for
the bugs ``run_checks`` cannot see (in ``debugging_measure``). Figures and the
widget: ``debugging_views``; the two exercises and their checkers: ``debugging_exercises``.

The corpus: each document counts up from a random start to 15 in steps of 1 or 2 (a coin flip),
then EOS (PAD 0, EOS 1, numbers 2..15). Its exact entropy per target is the loss floor.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..diagnose import run_checks
from ..loss import causal_lm_loss
from ..model import GPT
from ..shift import labels_from_attention_mask, pack_documents
from ..train.devices import cpu_threads
from .debugging_losses import (
    loss_batch_means,
    loss_correct,
    loss_double_shift,
    loss_eos_is_pad,
    loss_padding_scored,
    loss_same_position,
    loss_softmax_first,
)
from .toys import EOS, PAD, fit, forward_with_mask, forward_without_causal_mask, toy_gpt
from .verdict import below

__all__ = [
    "PAD",
    "EOS",
    "V",
    "L",
    "STEPS",
    "ROWS",
    "Pipeline",
    "PIPELINES",
    "documents",
    "padded_batch",
    "entropy_floor",
    "pipeline_gpt",
    "build",
    "train_pipeline",
    "loss_verdict",
    "floor_comparison",
    "below_floor",
    "diagnose_pipeline",
    "loss_correct",
]

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


def pipeline_gpt(seed: int = 0) -> GPT:
    """The GPT every pipeline trains: one layer, two heads, 32 wide, V = L = 16, seeded."""
    return toy_gpt(V, block_size=L, n_layer=1, n_head=2, n_embd=32, seed=seed)


@dataclass(frozen=True)
class Pipeline:
    """One way to train: how batches are built, how the model is called, how the loss is taken."""

    key: str
    title: str
    symptom: str
    consequence: str
    loss_fn: Callable
    batch: str = "padded"  # "padded", "packed" or "eos_pad"
    call: str = "masked"  # how forward calls the GPT: see build()
    caught_by: str = "run_checks"


PIPELINES = {
    p.key: p
    for p in [
        Pipeline(
            "correct",
            "correct: shift once, ignore padding",
            "loss falls",
            "learns the next token",
            loss_correct,
        ),
        Pipeline(
            "same_position",
            "logits compared with the same position",
            "loss falls fast",
            "learns to copy its input",
            loss_same_position,
        ),
        Pipeline(
            "double_shift",
            "shifted outside and inside the loss",
            "converges too",
            "predicts t+2, not t+1",
            loss_double_shift,
        ),
        Pipeline(
            "softmax_first",
            "softmax before the cross-entropy",
            "runs without error",
            "probabilities taken as logits",
            loss_softmax_first,
        ),
        Pipeline(
            "padding_scored",
            "padding not ignored",
            "the loss looks great",
            "learns PAD -> PAD transitions",
            loss_padding_scored,
        ),
        Pipeline(
            "batch_means",
            "per-row means averaged",
            "smooth curve",
            "short rows weigh more per token",
            loss_batch_means,
        ),
        Pipeline(
            "packed_causal",
            "packed documents under a plain causal mask",
            "high throughput",
            "documents read each other",
            loss_correct,
            batch="packed",
            caught_by="measurement: leak across documents",
        ),
        Pipeline(
            "eos_is_pad",
            "EOS ignored by its id (PAD = EOS)",
            "odd generations",
            "never learns to stop",
            loss_eos_is_pad,
            batch="eos_pad",
            caught_by="run_checks + measurement: EOS targets and p(stop)",
        ),
        Pipeline(
            "sees_future",
            "the model sees the future (no causal mask)",
            "loss below the floor",
            "cannot generate",
            loss_correct,
            call="future",
        ),
        Pipeline(
            "ignores_mask",
            "the model is called without the attention mask",
            "trains as well",
            "left-padded prompts read their padding",
            loss_correct,
            call="plain",
        ),
        Pipeline(
            "no_position_reset",
            "left padding without position reset",
            "trains as well",
            "left-padded prompts get shifted positions",
            loss_correct,
            call="no_reset",
        ),
    ]
}


def _batch(kind: str, step: int):
    docs = documents(ROWS, seed=1000 + step)
    if kind == "packed":
        packed = pack_documents(docs + documents(ROWS, seed=5000 + step), L, eos_id=EOS, pad_id=PAD)
        return packed.input_ids[:ROWS], packed.attention_mask[:ROWS]
    return padded_batch(docs, pad_id=EOS if kind == "eos_pad" else PAD)


def build(key: str, seed: int = 0):
    """``(model, forward, loss_fn)`` for pipeline ``key``, with a freshly initialised tiny GPT."""
    p = PIPELINES[key]
    model = pipeline_gpt(seed)
    forward = {
        "masked": lambda ids, mask: forward_with_mask(model, ids, mask),
        "future": lambda ids, mask: forward_without_causal_mask(model, ids, mask),
        "plain": lambda ids, mask: model(ids),
        "no_reset": lambda ids, mask: forward_with_mask(model, ids, mask, reset_positions=False),
    }[p.call]
    return model, forward, p.loss_fn


def _honest_loss(forward, ids, mask) -> float:
    """Deployment-style next-token loss: position t sees only tokens 0..t (one call per prefix)."""
    with torch.no_grad():
        logits = torch.stack(
            [forward(ids[:, : t + 1], mask[:, : t + 1])[:, -1] for t in range(ids.shape[1])], 1
        )
    return causal_lm_loss(logits, labels_from_attention_mask(ids, mask)).item()


@functools.cache
def train_pipeline(key: str, steps: int = STEPS, lr: float = 1e-2, seed: int = 0):
    """Train pipeline ``key``: ``(model, losses, honest)`` where ``losses`` is what the pipeline
    reports at each step and ``honest`` is [(step, next-token loss on held-out documents)]."""
    model, forward, loss_fn = build(key, seed)
    held_out = padded_batch(documents(ROWS, seed=99))
    honest = []

    def evaluate(step, _model):
        if step % 10 == 0:
            honest.append((step, _honest_loss(forward, *held_out)))

    with cpu_threads(1):
        losses = fit(
            model,
            lambda step: _batch(PIPELINES[key].batch, step),
            steps=steps,
            lr=lr,
            loss_fn=lambda _model, batch: loss_fn(forward(*batch), *batch),
            on_step=evaluate,
        )
        honest.append((steps, _honest_loss(forward, *held_out)))
    return model, tuple(losses), tuple(honest)


def loss_verdict(key: str, *, quiet: bool = False) -> dict:
    """Two verdicts about a pipeline's training (they read the same on any CPU): did the loss
    it reports fall, and did it learn the next token (held-out loss near the entropy floor)?"""
    _, losses, honest = train_pipeline(key)
    floor = entropy_floor(documents(ROWS, seed=99))
    fell = below(
        f"{key}: reported loss, mean of the last 5 steps",
        sum(losses[-5:]) / 5,
        losses[0] - 0.25,
        bound_text="its first loss - 0.25",
        quiet=quiet,
    )
    learned = below(
        f"{key}: held-out next-token loss after {len(losses)} steps",
        honest[-1][1],
        floor + 0.3,
        bound_text=f"the entropy floor {floor:.2f} + 0.3",
        quiet=quiet,
    )
    return {"fell": fell, "learned": learned}


def floor_comparison(key: str) -> dict:
    """The arguments of a ``below`` verdict: the loss pipeline ``key`` reports (mean of its last
    5 steps) against the entropy floor of those same 5 training batches (padded pipelines)."""
    losses = train_pipeline(key)[1]
    floor = (
        sum(entropy_floor(documents(ROWS, seed=1000 + s)) for s in range(len(losses) - 5, len(losses))) / 5
    )
    return dict(
        what=f"{key}: reported loss, mean of the last 5 steps",
        value=sum(losses[-5:]) / 5,
        bound=floor,
        bound_text=f"the entropy floor of those batches ({floor:.2f})",
    )


def below_floor(key: str) -> bool:
    """Verdict: does the reported loss end below the entropy floor of its own batches? No honest
    next-token loss can: only a leak of the answer into the input, or targets that are not in
    the data (padding), get there."""
    return below(**floor_comparison(key))


@functools.cache
def diagnose_pipeline(key: str, seed: int = 0):
    """``run_checks`` on a freshly initialised pipeline (checks belong before training)."""
    model, forward, loss_fn = build(key, seed)
    with cpu_threads(1):
        return run_checks(
            forward,
            loss_fn,
            vocab_size=V,
            seq_len=L,
            eos_id=EOS,
            model=model,
            pad_id=EOS if PIPELINES[key].batch == "eos_pad" else PAD,
        )
