"""Notebook 04 (the initial-loss anchor), the picture behind its widget: the first loss's excess
over ln V against V at the init's logit spread sigma, and the loss against sigma at that V
(ln V + sigma^2/2)."""

from __future__ import annotations

import math

import torch

from ..style import COLORS, new_figure
from .lesson import first_loss, iid_logit_loss

__all__ = ["excess_over_vocab", "plot_first_loss"]

_VOCABS = (2, 5, 20, 100, 1_000, 10_000, 128_256)


def excess_over_vocab(sigma: float, vocabs=_VOCABS, *, draws: int = 2**15) -> list[tuple[int, float]]:
    """For each V in ``vocabs``: the loss of i.i.d. N(0, sigma^2) logits over V tokens minus ln V
    (averaged over every target and over about ``draws`` logits in all, at least 2 rows)."""
    return [(V, iid_logit_loss(V, sigma, rows=max(2, draws // V)) - math.log(V)) for V in vocabs]


def plot_first_loss(vocab_size: int = 50_257, init_std: float = 0.02, *, n_embd: int = 16):
    """Left: the excess of the loss over ln V against V, at the sigma this init gives: sigma^2/2,
    i.i.d. logits, and the fresh GPT at ``vocab_size``. Right: loss against the logit std sigma at
    that V: the ln V + sigma^2/2 prediction, i.i.d. logits, and the GPT. The GPT's loss is averaged
    over every target (no sampling noise)."""
    m = first_loss(vocab_size, init_std=init_std, n_embd=n_embd)
    s = m["sigma"]
    fig, (ax1, ax2) = new_figure(1, 2, width=10.5, height=3.8)
    pts = excess_over_vocab(s)
    ax1.axhline(s**2 / 2, ls="--", color=COLORS["target"], label=f"σ²/2 = {s**2 / 2:.4f}")
    ax1.plot(
        [v for v, _ in pts], [e for _, e in pts], "s", color=COLORS["input"], label="i.i.d. normal logits"
    )
    ax1.plot(
        [vocab_size],
        [m["expected"] - m["ln_v"]],
        "o",
        color=COLORS["wrong"],
        ms=8,
        label="fresh GPT at this V",
    )
    ax1.axhline(0.0, color=COLORS["anchor"], lw=1, label="ln V (no excess)")
    ax1.set_xscale("log")
    ax1.set(
        xlabel="vocabulary size V (log scale)",
        ylabel="first loss − ln V (nats)",
        title=f"σ = {s:.2f}: excess over ln V (V = {vocab_size:,} marked)",
    )
    ax1.legend(loc="lower right", fontsize=8)
    sig = torch.linspace(0, max(3.0, 1.2 * s), 40, dtype=torch.float64)
    ax2.plot(sig, math.log(vocab_size) + sig**2 / 2, "--", color=COLORS["target"], label="ln V + σ²/2")
    grid = [0.5 * k for k in range(int(2 * float(sig[-1])) + 1)]
    ax2.plot(
        grid,
        [iid_logit_loss(vocab_size, g, rows=4) for g in grid],
        "s",
        color=COLORS["input"],
        label="i.i.d. normal logits",
    )
    ax2.plot([s], [m["expected"]], "o", color=COLORS["wrong"], ms=8, label="fresh GPT")
    ax2.axhline(math.log(vocab_size), color=COLORS["anchor"], lw=1, label="ln V")
    ax2.set(
        xlabel="std σ of the logits",
        ylabel="loss (nats)",
        title=f"V = {vocab_size:,}, init_std = {init_std:g}: σ = {s:.2f}",
    )
    ax2.legend(loc="upper left", fontsize=8)
    import matplotlib.pyplot as plt

    plt.close(fig)  # shown once: the notebook displays the returned Figure
    return fig
