"""Notebook 10's pictures and widget: answer losses per kind of fact, the data-policy explorer
(block length and context needed -> coverage; padded vs packed batches), the duplicated-data
curves and the reversal bars."""

from __future__ import annotations

import math

from ..style import COLORS, new_figure
from ..widgets import live_figure
from .data import BLOCK_SIZES, context_coverage, valid_target_ratio
from .duplicates import FRACTIONS, duplicate_run

__all__ = [
    "plot_answer_losses",
    "plot_policy",
    "policy_explorer",
    "plot_duplicates",
    "plot_duplicate_fraction",
    "duplicate_explorer",
    "plot_reversal",
]


def plot_answer_losses(means: dict, *, n_answers: int, title: str | None = None):
    """Bars: mean answer loss per group (``{group: (n, mean)}``), with ln(n_answers) and ln 2."""
    fig, ax = new_figure(width=6.4, height=3.4)
    names = [g for g in means if g != "all"]
    colors = [COLORS["correct"], COLORS["wrong"], COLORS["floor"], COLORS["input"]]
    bars = ax.bar(names, [means[g][1] for g in names], color=colors[: len(names)])
    ax.bar_label(bars, labels=[f"{means[g][1]:.2f}" for g in names], padding=2, fontsize=8)
    ax.axhline(
        math.log(n_answers), color=COLORS["anchor"], ls=":", label=f"ln {n_answers}: no idea which city"
    )
    ax.axhline(math.log(2), color=COLORS["floor"], ls="--", label="ln 2: two true answers")
    ax.set_ylabel("loss of the answer token (nats)")
    ax.set_title(title or "The same run: common facts learned, rare ones not")
    ax.legend(fontsize=8)
    return fig


def plot_policy(block_size: int = 64, k: int = 32, lengths=None):
    """Left: share of a row's targets with at least j tokens of context, for every j, at this
    block length (``k`` marked). Right: valid-target ratio of padded and packed batches of
    ``lengths`` for every block length in :data:`BLOCK_SIZES` (this one marked)."""
    fig, (ax, bx) = new_figure(1, 2, width=9.6, height=3.6)
    js = list(range(0, max(BLOCK_SIZES) + 1))
    ax.plot(js, [context_coverage(block_size, j) for j in js], color=COLORS["input"])
    share = context_coverage(block_size, k)
    ax.plot([k], [share], "o", ms=8, color=COLORS["wrong"])
    ax.set(
        xscale="symlog",
        xlabel="context needed, j tokens",
        ylim=(0, 1.05),
        ylabel="share of targets that see >= j",
        title=f"L = {block_size}: {share:.0%} of targets see {k} tokens",
    )
    if lengths is not None:
        for policy, style in (("pad", "o-"), ("pack", "s--")):
            bx.plot(
                BLOCK_SIZES,
                [valid_target_ratio(lengths, L, policy) for L in BLOCK_SIZES],
                style,
                ms=4,
                label=policy,
                color=COLORS["target" if policy == "pad" else "eos"],
            )
        bx.axvline(block_size, color=COLORS["wrong"], lw=1)
        bx.set(
            xscale="log",
            xlabel="block length L",
            ylabel="valid targets / computed slots",
            ylim=(0, 1.05),
            title="Padding wastes compute as L grows",
        )
        bx.legend(fontsize=8)
    return fig


def policy_explorer(lengths, block_size: int = 64, k: int = 32):
    """Block-length and context sliders -> :func:`plot_policy` (a live image widget)."""
    import ipywidgets as widgets

    size = widgets.SelectionSlider(
        options=list(BLOCK_SIZES), value=block_size, description="block L", continuous_update=False
    )
    need = widgets.IntSlider(
        value=k, min=0, max=max(BLOCK_SIZES), step=8, description="context j", continuous_update=False
    )
    return widgets.VBox(
        [
            widgets.HBox([size, need]),
            live_figure(
                lambda block_size, k: plot_policy(block_size, k, lengths), {"block_size": size, "k": need}
            ),
        ]
    )


def plot_duplicates(runs: dict, *, title: str | None = None):
    """Train and validation loss against the step for each named run's history."""
    fig, ax = new_figure(width=6.4, height=3.6)
    for (name, history), color in zip(runs.items(), (COLORS["input"], COLORS["wrong"])):
        steps = [h["step"] for h in history]
        ax.plot(steps, [h["train_loss"] for h in history], "--", color=color, label=f"{name}: train")
        ax.plot(steps, [h["val_loss"] for h in history], "o-", ms=3, color=color, label=f"{name}: held-out")
    ax.set(
        xlabel="optimiser step",
        ylabel="loss per character (nats)",
        title=title or "Duplicated data: train loss falls, held-out loss does not",
    )
    ax.legend(fontsize=8)
    return fig


def plot_duplicate_fraction(base: dict, other: dict, fraction: float):
    """Left: held-out loss against the step (the run's own evaluation, a few batches: noisier than
    the bars), all-distinct run vs the run with ``fraction`` of its characters duplicated. Right: both runs' loss on distinct training text, on the repeated
    slice and on held-out text (dicts from :func:`lmcore.course.rewards.duplicates.duplicate_run`)."""
    fig, (ax, bx) = new_figure(ncols=2, width=9.6, height=3.6)
    for r, name, color in (
        (base, "all distinct", COLORS["input"]),
        (other, f"{fraction:.0%} duplicated", COLORS["wrong"]),
    ):
        h = r["run"].history
        ax.plot([x["step"] for x in h], [x["val_loss"] for x in h], "o-", ms=3, color=color, label=name)
    ax.set(
        xlabel="optimiser step",
        ylabel="held-out loss (nats/char)",
        title="During the run: a few evaluation batches",
    )
    ax.legend(fontsize=8)
    keys = ("distinct", "repeated", "held_out")
    for j, (r, name, color) in enumerate(
        ((base, "all distinct", COLORS["input"]), (other, f"{fraction:.0%} duplicated", COLORS["wrong"]))
    ):
        xs = [i + (j - 0.5) * 0.38 for i in range(len(keys))]
        bars = bx.bar(xs, [r[k] for k in keys], width=0.36, color=color, label=name)
        bx.bar_label(bars, labels=[f"{r[k]:.2f}" for k in keys], padding=2, fontsize=7)
    bx.set_xticks(range(len(keys)), ["distinct train text", "the repeated slice", "held-out text"])
    bx.set(ylabel="loss (nats/char)", title="After it: each text scored whole")
    bx.legend(fontsize=8)
    return fig


def duplicate_explorer(base: dict, first: dict | None = None, fraction: float = FRACTIONS[-1]):
    """A duplicated-fraction slider: each new fraction trains its run (a few seconds, cached by
    :func:`duplicate_run`) and redraws :func:`plot_duplicate_fraction` against ``base``;
    ``first`` is the already trained run at ``fraction``."""
    import ipywidgets as widgets

    done = {fraction: first} if first is not None else {}
    pick = widgets.SelectionSlider(
        options=[f for f in FRACTIONS if f > 0],
        value=fraction,
        description="duplicated",
        continuous_update=False,
    )

    def plot(fraction):
        other = done.get(fraction) or duplicate_run(fraction)
        return plot_duplicate_fraction(base, other, fraction)

    return widgets.VBox([pick, live_figure(plot, {"fraction": pick})])


def plot_reversal(probs: dict, *, chance: float, title: str | None = None):
    """Bars: mean probability of the right answer per group of questions, chance as a line."""
    fig, ax = new_figure(width=6.4, height=3.4)
    names = list(probs)
    bars = ax.bar(
        names,
        [probs[g] for g in names],
        color=[COLORS["correct"], COLORS["input"], COLORS["wrong"]][: len(names)],
    )
    ax.bar_label(bars, labels=[f"{probs[g]:.2f}" for g in names], padding=2, fontsize=8)
    ax.axhline(chance, color=COLORS["anchor"], ls=":", label=f"chance, {chance:.3f}")
    ax.set(
        ylim=(0, 1.1),
        ylabel="p(right answer)",
        title=title or "Trained on 'A parent B': 'B child ?' does not follow",
    )
    ax.legend(fontsize=8)
    return fig
