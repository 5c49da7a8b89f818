"""Notebook 10, section 1: when is a fact learned? A run on the city world watched every few steps:
the mean loss over all its training targets against the answer loss of the facts themselves.

:class:`RecallTracker` is a training callback (``train(..., callback=tracker)``); it reads the model
in eval mode and draws no random numbers, so the run is the same with or without it.
:func:`learning_order` reads its records: the step by which the mean loss had made most of its
drop, the answer loss of the facts at that step, and the share of the drop still to come when the
facts were finally recalled. :func:`plot_recall` draws the records.
"""

from __future__ import annotations

import math
import statistics

import torch

from ..._validate import require_int_scalar, require_real
from ...loss import causal_lm_loss
from ..style import COLORS, new_figure
from .lesson import answer_nll

__all__ = ["RecallTracker", "packed_loss", "learning_order", "plot_recall"]


class RecallTracker:
    """Every ``every`` steps (and at step 1): the mean loss over every training target of
    ``world`` (its packed training split) and the mean answer loss of each group in ``groups``
    (the first true answer of each person), appended to ``records`` as ``{"step", "mean",
    group: loss}``."""

    def __init__(self, world, block_size: int, *, every: int = 10, groups=("common", "rare")):
        self.every = require_int_scalar("every", every, min=1)
        require_int_scalar("block_size", block_size, min=2)
        missing = [g for g in groups if g not in world.groups]
        if missing:
            raise ValueError(f"groups: the world has no group {missing[0]!r}; it has {sorted(world.groups)}")
        self.world, self.groups, self.records = world, tuple(groups), []
        self.packed = world.corpus.packed("train", block_size)

    @torch.no_grad()
    def __call__(self, step: int, model) -> bool:
        if step == 1 or step % self.every == 0:
            was = model.training
            model.eval()
            record = {"step": int(step), "mean": packed_loss(model, self.packed)}
            w = self.world
            for g in self.groups:
                people = w.groups[g]
                record[g] = float(
                    answer_nll(model, w.tokenizer, people, [w.truth[x][0] for x in people]).mean()
                )
            self.records.append(record)
            model.train(was)
        return False


@torch.no_grad()
def packed_loss(model, packed) -> float:
    """The mean loss of ``model`` over every target of ``packed`` (a
    :class:`~lmcore.shift.PackedBatch`), each document reading only itself from position 0, as
    it trained; in eval mode, the model's own mode restored."""
    was = model.training
    model.eval()
    logits = model(packed.input_ids, document_ids=packed.document_ids, position_ids=packed.position_ids)
    model.train(was)
    return float(causal_lm_loss(logits, packed.labels))


def learning_order(
    records: list[dict], *, group: str = "common", share: float = 0.8, recalled: float = 1.0
) -> dict:
    """When the mean loss fell, against when ``group``'s facts were recalled: ``{"early_step"``
    (the first record by which the mean loss had made ``share`` of its whole drop), ``"answer_then"``
    (``group``'s answer loss there), ``"recall_step"`` (the first record where that answer loss is
    below ``recalled`` nats, None if never), ``"drop_left"`` (the share of the mean loss's drop still
    to come at that step), "plateau"`` (the median mean loss of the records between the two
    steps, None if there are none)}``."""
    if not records:
        raise ValueError("records: empty; train with the tracker first.")
    require_real("share", share, min=0.0, max=1.0)
    require_real("recalled", recalled, min=0.0, min_inclusive=False)
    first, last = records[0]["mean"], records[-1]["mean"]
    drop = first - last
    early = next(r for r in records if first - r["mean"] >= share * drop)
    recall = next((r for r in records if r[group] < recalled), None)
    left = None if recall is None or drop <= 0 else (recall["mean"] - last) / drop
    between = [r["mean"] for r in records if early["step"] < r["step"] < (recall or records[-1])["step"]]
    return {
        "early_step": early["step"],
        "answer_then": early[group],
        "recall_step": None if recall is None else recall["step"],
        "drop_left": left,
        "plateau": statistics.median(between) if between else None,
    }


def plot_recall(records: list[dict], *, n_answers: int = 10, title: str | None = None):
    """The mean training loss and each group's answer loss against the step, ln(n_answers) dotted."""
    fig, ax = new_figure(width=7.0, height=3.6)
    steps = [r["step"] for r in records]
    ax.plot(steps, [r["mean"] for r in records], color=COLORS["anchor"], lw=2, label="mean loss, all targets")
    colors = {"common": COLORS["correct"], "rare": COLORS["wrong"]}
    for g in [k for k in records[0] if k not in ("step", "mean")]:
        ax.plot(
            steps,
            [r[g] for r in records],
            color=colors.get(g, COLORS["input"]),
            label=f"answer loss, {g} facts",
        )
    ax.axhline(math.log(n_answers), color=COLORS["floor"], ls=":", label=f"ln {n_answers}: a blind guess")
    ax.set(
        xlabel="step", ylabel="loss (nats)", title=title or "The mean loss and the answer losses over a run"
    )
    ax.legend(fontsize=8)
    return fig
