"""Notebook 07 (debugging label bugs): each pipeline of ``pipelines`` trained a few
steps with a tiny GPT, the verdicts on its loss, and its diagnosis by ``run_checks``. The toy
task (documents, batches, entropy floor): ``data``; the measurements for the bugs
``run_checks`` cannot see: ``measure``. Figures and the widget: ``views``;
the two exercises and their checkers: ``exercises``. The names of the task and of the
table are importable from here too, as notebook 07 uses them (``D.documents``, ``D.V``).
"""

from __future__ import annotations

import functools

import torch

from ...diagnose import run_checks
from ...loss import causal_lm_loss
from ...model import GPT
from ...shift import labels_from_attention_mask
from ...train.devices import cpu_threads
from ..toys import EOS, PAD, fit, forward_with_mask, forward_without_causal_mask, toy_gpt
from ..verdict import below
from .data import ROWS, STEPS, L, V, documents, entropy_floor, padded_batch, training_batch
from .losses import loss_correct
from .pipelines import PIPELINES, Pipeline

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
    "overfit_one_batch",
    "loss_verdict",
    "LEARNS_NEXT_TOKEN",
    "floor_comparison",
    "below_floor",
    "diagnose_pipeline",
    "loss_correct",
]


def pipeline_gpt(seed: int = 0) -> GPT:
    """The GPT every pipeline trains: one layer, two heads, 32 wide, V = L = 16, seeded."""
    return toy_gpt(V, block_size=L, n_layer=1, n_head=2, n_embd=32, seed=seed)


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
            lambda step: training_batch(PIPELINES[key].batch, step),
            steps=steps,
            lr=lr,
            loss_fn=lambda _model, batch: loss_fn(forward(*batch), *batch),
            on_step=evaluate,
        )
        honest.append((steps, _honest_loss(forward, *held_out)))
    return model, tuple(losses), tuple(honest)


def overfit_one_batch(key: str, batch, steps: int = 150, lr: float = 1e-2, seed: int = 0) -> list:
    """Train pipeline ``key`` (a fresh tiny GPT) on the one ``batch`` ``(input_ids,
    attention_mask)`` at every step; return its reported loss at each step (the "overfit one
    batch" check: a pipeline that can learn drives it far below the batch's entropy floor)."""
    model, forward, loss_fn = build(key, seed)
    with cpu_threads(1):
        return fit(
            model, lambda step: batch, steps=steps, lr=lr, loss_fn=lambda _m, b: loss_fn(forward(*b), *b)
        )


# The pipelines whose model still learns the next token (held-out loss near the entropy floor)
# in spite of their bug: the claim loss_verdict's second line checks, "as expected" for the rest.
LEARNS_NEXT_TOKEN = frozenset(
    {"correct", "padding_scored", "batch_means", "packed_causal", "ignores_mask", "no_position_reset"}
)


def loss_verdict(key: str, *, quiet: bool = False) -> dict:
    """Two verdicts about a pipeline's training (they read the same on any CPU): did the loss
    it reports fall, and did it learn the next token (held-out loss near the entropy floor)? The
    second is expected only of :data:`LEARNS_NEXT_TOKEN`; for the others "not below, as expected"."""
    _, losses, honest = train_pipeline(key)
    floor = entropy_floor(documents(ROWS, seed=99))
    fell = below(
        f"{key}: reported loss, mean of the last 5 steps",
        sum(losses[-5:]) / 5,
        losses[0] - 0.25,
        bound_text="its first loss - 0.25",
        quiet=quiet,
    )
    learns = key in LEARNS_NEXT_TOKEN
    as_expected = below(
        f"{key}: held-out next-token loss after {len(losses)} steps",
        honest[-1][1],
        floor + 0.3,
        bound_text=f"the entropy floor {floor:.2f} + 0.3",
        quiet=quiet,
        expect=learns,
    )
    return {"fell": fell, "learned": as_expected == learns}


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
