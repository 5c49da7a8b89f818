"""Notebook 09's pictures and widget: the floor run against H(p), the per-slot breakdown, and
the operand-range explorer (a short run per setting, committed by
:mod:`lmcore.course.floor.explorer_runs`, against its exact floor)."""

from __future__ import annotations

import math

from ...data import chat_arithmetic_entropy
from ..style import COLORS, new_figure
from ..widgets import live_figure
from .explorer_runs import STEPS, committed_exact_match, short_curve
from .lesson import RANGES
from .tokens import ROLES

__all__ = [
    "plot_loss_floor",
    "plot_slot_breakdown",
    "plot_floor_explorer",
    "floor_explorer",
    "plot_loss_and_exact_match",
]


def plot_loss_floor(history, floor: float, *, ln_v: float | None = None, title: str | None = None):
    """Train and validation loss against the step, the floor H(p) as a line, the gap shaded."""
    fig, ax = new_figure(width=6.4, height=3.6)
    steps = [h["step"] for h in history]
    val = [h["val_loss"] for h in history]
    ax.plot(steps, [h["train_loss"] for h in history], color=COLORS["train"], label="train loss")
    ax.plot(steps, val, "o-", ms=3, color=COLORS["val"], label="validation loss")
    ax.axhline(floor, color=COLORS["floor"], lw=2, ls="--", label=f"floor H(p) = {floor:.3f}")
    if ln_v is not None:
        ax.axhline(ln_v, color=COLORS["anchor"], lw=1, ls=":", label=f"ln V = {ln_v:.2f}")
    ax.fill_between(steps, floor, val, color=COLORS["val"], alpha=0.12)
    ax.annotate(
        f"gap {val[-1] - floor:+.4f}",
        xy=(steps[-1], val[-1]),
        ha="right",
        va="bottom",
        xytext=(0, 8),
        textcoords="offset points",
        fontsize=9,
    )
    ax.set_ylim(0, max(max(val), ln_v or 0) * 1.08)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("loss per target (nats)")
    ax.set_title(title or "The loss falls to the data's entropy, not to 0")
    ax.legend(loc="upper right", fontsize=8)
    return fig


def plot_slot_breakdown(rows, *, title: str | None = None):
    """Bars: the model's mean NLL per slot (or role); black ticks: the exact entropy there."""
    fig, ax = new_figure(width=6.4, height=3.4)
    names = [r[0] for r in rows]
    colors = [
        COLORS["input"]
        if ROLES.get(n) == "prompt digits" or n == "prompt digits"
        else COLORS["target"]
        if n in ("c", "answer")
        else COLORS["ignored"]
        for n in names
    ]
    bars = ax.bar(names, [r[2] for r in rows], color=colors, label="model (validation)")
    ax.bar_label(bars, labels=[f"{r[2]:.2f}" for r in rows], padding=2, fontsize=8)
    ax.scatter(
        names, [r[3] for r in rows], marker="_", s=900, color="black", zorder=3, label="exact entropy H"
    )
    ax.set_ylim(0, max(max(r[2] for r in rows), math.log(10)) * 1.2)
    ax.set_ylabel("mean NLL per token (nats)")
    ax.set_title(title or "Random prompt digits stay at ln 10; the rest goes to 0")
    ax.legend(fontsize=8)
    return fig


def plot_floor_explorer(high: int = 9, ops: str = "+", *, history=None, steps: int = 150):
    """Left: a short run on operands 0..high against its exact floor. Right: the floor per
    target for every range in :data:`RANGES`, this one marked; the explorer's run also prints its
    greedy exact match on questions seen and never seen in training. ``history`` (a run's
    records) is drawn instead of the explorer's run for this setting (without exact match)."""
    explorers_run = history is None  # the committed run, whose exact match is on record too
    history = short_curve(high, ops, steps) if explorers_run else history
    floor = chat_arithmetic_entropy(high=high, ops=tuple(ops))
    fig, (ax, bx) = new_figure(1, 2, width=9.6, height=3.6)
    steps_ = [h["step"] for h in history]
    ax.plot(
        steps_, [h["val_loss"] for h in history], "o-", ms=3, color=COLORS["val"], label="validation loss"
    )
    ax.axhline(floor, color=COLORS["floor"], lw=2, ls="--", label=f"H(p) = {floor:.3f}")
    ax.set_ylim(0, max(h["val_loss"] for h in history) * 1.08)
    ax.set(
        xlabel="optimiser step",
        ylabel="nats per target",
        title=f"0..{high}, ops {' '.join(ops)}, {history[-1]['step']} steps: gap {history[-1]['val_loss'] - floor:+.4f}",
    )
    ax.legend(fontsize=8)
    if explorers_run and (em := committed_exact_match(high, ops, steps)) is not None:
        unseen = (
            f"{em['unseen']:.0%} of {em['n_unseen']} never seen"
            if em["unseen"] is not None
            else "training held every question"
        )
        exact = f"greedy exact match: {em['seen']:.0%} of {em['n_seen']} seen in training, {unseen}"
        ax.set_title(f"{ax.get_title()}\n{exact}", fontsize=9)  # above the axes: never over the curve
    for o, style in (("+", "-"), ("+-*", "--")):
        bx.plot(
            RANGES,
            [chat_arithmetic_entropy(high=h, ops=tuple(o)) for h in RANGES],
            style,
            marker=".",
            color=COLORS["floor"],
            label=f"ops {' '.join(o)}",
        )
    bx.plot([high], [floor], "o", ms=9, color=COLORS["wrong"])
    bx.set_xscale("log")
    bx.set(
        xlabel="largest operand (log scale)",
        ylabel="floor H(p), nats per target",
        title="Wider ranges, higher floor",
    )
    bx.legend(fontsize=8)
    return fig


def floor_explorer():
    """Operand range, operators and run length -> :func:`plot_floor_explorer`, on the run that
    :mod:`lmcore.course.floor.explorer_runs` committed for that setting (drawn at once)."""
    import ipywidgets as widgets

    high = widgets.SelectionSlider(
        options=[(f"0..{h}", h) for h in RANGES], value=9, description="operands", continuous_update=False
    )
    ops = widgets.ToggleButtons(options=["+", "+-*"], value="+", description="ops")
    steps = widgets.ToggleButtons(options=list(STEPS), value=STEPS[0], description="steps")
    return widgets.VBox(
        [
            widgets.HBox([high, ops, steps]),
            live_figure(plot_floor_explorer, {"high": high, "ops": ops, "steps": steps}),
        ]
    )


def plot_loss_and_exact_match(tracker, *, title: str | None = None):
    """An :class:`lmcore.course.floor.exact_match.AnswerTracker`'s records: the mean answer-token
    loss (left axis) and the share of sums answered exactly (right axis) against the step."""
    fig, ax = new_figure(width=6.4, height=3.4)
    steps = tracker.series("step")
    ax.plot(steps, tracker.series("answer_nll"), color=COLORS["val"], label="answer-token loss (nats)")
    ax.set(xlabel="optimiser step", ylabel="mean answer-token loss (nats)")
    ax.set_ylim(0, None)
    bx = ax.twinx()
    bx.plot(steps, tracker.series("exact"), "o-", ms=2, color=COLORS["correct"], label="exact match")
    bx.set_ylim(0, 1.05)
    bx.set_ylabel("share of sums answered exactly")
    lines = ax.get_lines() + bx.get_lines()
    ax.legend(lines, [ln.get_label() for ln in lines], fontsize=8, loc="center right")
    ax.set_title(title or "The answer loss falls, unevenly; exact match waits, then jumps")
    return fig
