"""Notebook 08's plots and the sampling widget: the loss curves of a run (with ln V, the unigram
entropy and the phases of :func:`lmcore.course.training.lesson.read_phases`; the first steps measured
densely), the next-token bars of
:func:`lmcore.course.training.lesson.sampling_state`, and the sampling explorer.

``python -m lmcore.course.training.views runs/NAME`` draws ``runs/NAME/loss.png`` from the
``history.json`` that ``python -m lmcore.train`` wrote.
"""

from __future__ import annotations

import argparse
import html
import json
import math
from pathlib import Path

import numpy as np

from ..style import COLORS, new_figure
from ..widgets import figure_png, on_change
from .lesson import sampling_state, show_char

__all__ = [
    "plot_loss_curves",
    "plot_first_steps",
    "plot_next_token_distribution",
    "sampling_explorer",
    "plot_run",
    "main",
]


def plot_loss_curves(
    history,
    ln_v: float | None = None,
    unigram_entropy: float | None = None,
    *,
    phases: dict | None = None,
    dense=None,
    best_step: int | None = None,
    title: str = "Training on the Python docs, one character per token",
    legend_loc: str = "outside",
):
    """Train and validation loss against step, with ln V and the unigram entropy as lines; with
    ``dense`` (records with ``step`` and ``loss``, e.g. a retrained start measured every few steps)
    those points too; given :func:`lmcore.course.training.lesson.read_phases`'s result, the three
    phases shaded (on a log step axis); with ``best_step``, a line at the best record."""
    fig, ax = new_figure(width=7.0, height=4.0)
    steps = [r["step"] for r in history]
    ax.plot(
        steps[1:],
        [r["train_loss"] for r in history[1:]],
        color=COLORS["train"],
        marker=".",
        label="train (mean over the last interval)",
    )
    val = [(r["step"], r["val_loss"]) for r in history]
    if dense:  # the dense points stand in for the records they cover
        val = [(r["step"], r["loss"]) for r in dense] + [v for v in val if v[0] > dense[-1]["step"]]
    ax.plot(*zip(*val), color=COLORS["val"], label="validation")
    ax.plot(steps, [r["val_loss"] for r in history], color=COLORS["val"], marker="o", ms=3, ls="none")
    if dense:
        ax.plot(
            [r["step"] for r in dense],
            [r["loss"] for r in dense],
            color=COLORS["val"],
            marker="x",
            ms=4,
            ls="none",
            label="validation, the start retrained",
        )
    if ln_v is not None:
        ax.axhline(ln_v, ls="--", color=COLORS["anchor"], label=f"ln V = {ln_v:.2f} (uniform guess)")
    if unigram_entropy is not None:
        ax.axhline(
            unigram_entropy,
            ls=":",
            color=COLORS["floor"],
            label=f"unigram entropy = {unigram_entropy:.2f} (no context)",
        )
    if best_step is not None:
        ax.axvline(best_step, color="black", lw=1, ls="-.", label=f"best record (step {best_step}): best.pt")
    s = (phases or {}).get("steps")
    if s:  # a log step axis (linear below 10 steps) gives the short first phase its room
        ax.set_xscale("symlog", linthresh=10)
    for k, text in enumerate(("1 frequencies", "2 context", "3 flattening") if s else ()):
        ax.axvspan(s[k], s[k + 1], color="gray", alpha=0.08 * (k % 2 + 1), lw=0)
        middle = (s[k] + s[k + 1]) / 2 if k else s[1] / 2
        ax.text(
            math.sqrt(max(s[k], 1) * s[k + 1]) if k else middle,
            (0.04, 0.90, 0.80)[k],  # phase 1 under its high curve, the later ones above their low one,
            text,  # under the ln V line and at two heights, so that neighbours do not overlap
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom" if k == 0 else "top",
            bbox={"facecolor": "white", "alpha": 0.8, "lw": 0},
        )
    xlabel = "optimiser step" + (" (log scale above 10)" if s else "")
    ax.set(xlabel=xlabel, ylabel="loss (nats per character)", title=title)
    if legend_loc == "outside":  # beside the axes: it covers no curve and no line
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    else:
        ax.legend(loc=legend_loc)
    return fig


def plot_first_steps(dense, ln_v: float | None = None, *, title: str = "The first steps, measured every few"):
    """The validation loss of a retrained start, the loss of the model's mean forecast (what it
    would score reading no context) and the entropy of the targets' frequencies: the gap between
    the last two is the frequency gap, between the first two what context gains."""
    fig, ax = new_figure(width=7.0, height=3.6)
    steps = [r["step"] for r in dense]
    ax.plot(steps, [r["loss"] for r in dense], color=COLORS["val"], marker="o", ms=3, label="validation loss")
    ax.plot(
        steps,
        [r["freq_entropy"] + r["frequency_gap"] for r in dense],
        color=COLORS["train"],
        marker=".",
        label="loss of its mean forecast (no context)",
    )
    ax.axhline(dense[0]["freq_entropy"], ls=":", color=COLORS["floor"], label="entropy of the frequencies")
    if ln_v is not None:
        ax.axhline(ln_v, ls="--", color=COLORS["anchor"], label=f"ln V = {ln_v:.2f}")
    ax.set(xlabel="optimiser step", ylabel="nats per character", title=title)
    ax.legend(loc="lower left")
    return fig


def plot_next_token_distribution(state: dict, tokenizer, *, k: int = 30, title: str = ""):
    """Bars of the ``k`` most likely next tokens: kept ones in colour (probability after the
    filters), removed ones in grey at their probability before the filters."""
    order = np.argsort(-state["raw"], kind="stable")[:k]
    kept = state["probs"][order] > 0
    fig, ax = new_figure(width=7.0, height=3.2)
    x = np.arange(len(order))
    ax.bar(x[kept], state["probs"][order][kept], color=COLORS["input"], label="kept (renormalised)")
    if (~kept).any():
        ax.bar(
            x[~kept],
            state["raw"][order][~kept],
            color=COLORS["ignored"],
            hatch="//",
            label="removed (before the filters)",
        )
    ax.set_xticks(x, [show_char(tokenizer.decode([int(i)])) for i in order])
    ax.set_ylim(0, 1.15 * max(state["probs"].max(), state["raw"].max()))
    ax.set(
        xlabel=f"the {len(order)} most likely next characters",
        ylabel="probability",
        title=title or f"{state['kept']} characters can be drawn",
    )
    ax.legend(loc="upper right")
    return fig


def sampling_explorer(model, tokenizer, prompt: str = "The ", *, n_new: int = 120):
    """Temperature, top-k and top-p sliders, a prompt box and a seed: each change draws a fresh
    sample and redraws the next-token bars (:func:`lmcore.course.training.lesson.sampling_state`).
    Returns the widget."""
    import ipywidgets as w

    c = {
        "prompt": w.Text(value=prompt, description="prompt", continuous_update=False),
        "temperature": w.FloatSlider(value=1.0, min=0.0, max=2.0, step=0.05, description="T"),
        "top_k": w.IntSlider(value=0, min=0, max=tokenizer.vocab_size, description="top-k (0: off)"),
        "top_p": w.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p"),
        "seed": w.BoundedIntText(value=0, min=0, max=10**9, description="seed"),
    }
    image, text = w.Image(format="png"), w.HTML()

    def redraw(_change=None):
        v = {name: ctl.value for name, ctl in c.items()}
        try:
            s = sampling_state(model, tokenizer, v.pop("prompt"), n_new=n_new, **v)
        except ValueError as err:
            text.value = f"<b>{html.escape(str(err))}</b>"
            return
        image.value = figure_png(plot_next_token_distribution(s, tokenizer), dpi=80)
        text.value = f"<pre>{html.escape(c['prompt'].value)}<b>{html.escape(s['sample'])}</b></pre>"

    on_change(c, redraw)
    return w.VBox([w.HBox([w.VBox(list(c.values())), image]), text])


# ---------------------------------------------------------------- the CLI


def plot_run(out_dir) -> Path:
    """Draw ``out_dir/loss.png`` from ``out_dir/history.json``; return its path."""
    out_dir = Path(out_dir)
    src = out_dir / "history.json"
    if not src.is_file():
        raise FileNotFoundError(
            f"{src} does not exist: pass the --out folder of a finished python -m lmcore.train run."
        )
    run = json.loads(src.read_text(encoding="utf-8"))
    vocab = run.get("vocab_size")
    fig = plot_loss_curves(
        run["history"],
        math.log(vocab) if vocab else None,
        run.get("unigram_entropy"),
        title=f"{run.get('preset', '?')} preset on {run.get('corpus', '?')}",
    )
    fig.savefig(out_dir / "loss.png", dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return out_dir / "loss.png"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lmcore.course.training.views",
        description="Plot the loss curves of a python -m lmcore.train run.",
    )
    p.add_argument("out", help="the --out folder of the run (holds history.json)")
    print(f"wrote {plot_run(p.parse_args(argv).out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
