"""Notebook 04 (the initial-loss anchor), the picture behind its widget: ln V against V with a
fresh GPT's first loss, and the loss against the logits' spread sigma (ln V + sigma^2/2)."""

from __future__ import annotations

import math

import torch

from ..style import COLORS, new_figure
from .lesson import WELL_KNOWN_VOCABS, first_loss, iid_logit_loss

__all__ = ["plot_first_loss"]


def plot_first_loss(vocab_size: int = 50_257, init_std: float = 0.02, *, n_embd: int = 16):
    """Left: ln V against V with a fresh GPT's first loss marked. Right: loss against the logit
    std sigma at that V: the ln V + sigma^2/2 prediction, i.i.d. logits, and the GPT."""
    m = first_loss(vocab_size, init_std=init_std, n_embd=n_embd)
    fig, (ax1, ax2) = new_figure(1, 2, width=10.5, height=3.8)
    vs = torch.logspace(0.3, 5.4, 60, dtype=torch.float64)
    ax1.plot(vs, vs.log(), color=COLORS["anchor"], label="ln V (uniform guess)")
    ax1.plot(
        vs,
        vs.log() + m["sigma"] ** 2 / 2,
        "--",
        color=COLORS["target"],
        label=f"ln V + σ²/2 (σ = {m['sigma']:.2f})",
    )
    known = list(WELL_KNOWN_VOCABS.values())
    ax1.plot(
        known,
        [math.log(v) for v in known],
        "|",
        color=COLORS["anchor"],
        ms=12,
        label="V = 5, 32,000, 50,257, 128,256",
    )
    ax1.plot(
        [vocab_size], [m["loss"]], "o", color=COLORS["wrong"], ms=8, label=f"fresh GPT: {m['loss']:.2f} nats"
    )
    ax1.set_xscale("log")
    ax1.set(
        xlabel="vocabulary size V (log scale)",
        ylabel="first loss (nats)",
        title=f"V = {vocab_size:,}: ln V = {m['ln_v']:.2f}",
    )
    ax1.legend(loc="upper left", fontsize=8)
    sig = torch.linspace(0, max(3.0, 1.2 * m["sigma"]), 40, dtype=torch.float64)
    ax2.plot(sig, math.log(vocab_size) + sig**2 / 2, "--", color=COLORS["target"], label="ln V + σ²/2")
    pts = [0.5 * k for k in range(int(2 * float(sig[-1])) + 1)]
    ax2.plot(
        pts,
        [iid_logit_loss(vocab_size, s, rows=4) for s in pts],
        "s",
        color=COLORS["input"],
        label="i.i.d. normal logits",
    )
    ax2.plot([m["sigma"]], [m["loss"]], "o", color=COLORS["wrong"], ms=8, label="fresh GPT")
    ax2.axhline(math.log(vocab_size), color=COLORS["anchor"], lw=1, label="ln V")
    ax2.set(
        xlabel="std σ of the logits",
        ylabel="loss (nats)",
        title=f"init_std = {init_std:g}: σ = {m['sigma']:.2f}",
    )
    ax2.legend(loc="upper left", fontsize=8)
    import matplotlib.pyplot as plt

    plt.close(fig)  # shown once: the notebook displays the returned Figure
    return fig
