"""Notebook 07's pipelines: the classic ways to train where "the loss falls but the target is
wrong", each a row of ``PIPELINES`` (how batches are built, how the GPT is called, which loss).
The losses themselves: ``losses``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .losses import (
    loss_batch_means,
    loss_correct,
    loss_double_shift,
    loss_eos_is_pad,
    loss_padding_scored,
    loss_same_position,
    loss_softmax_first,
)

__all__ = ["Pipeline", "PIPELINES"]


@dataclass(frozen=True)
class Pipeline:
    """One way to train: how batches are built, how the model is called, how the loss is taken."""

    key: str
    title: str
    symptom: str
    consequence: str
    loss_fn: Callable
    batch: str = "padded"  # "padded", "packed" or "eos_pad"
    call: str = "masked"  # how forward calls the GPT: see debugging.build()
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
