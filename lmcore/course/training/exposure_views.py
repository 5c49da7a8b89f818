"""Notebook 08, section 9: the plots of the exposure-bias measurements of
:mod:`lmcore.course.training.exposure`."""

from __future__ import annotations

import numpy as np

from ..style import COLORS, new_figure

__all__ = ["plot_mistake_effect", "plot_free_running"]


def plot_mistake_effect(extra, position: int):
    """Bars of :func:`lmcore.course.training.exposure.single_mistake_effect`'s extra loss against the target's position."""
    fig, ax, x = *new_figure(width=7.0, height=3.0), np.arange(1, len(extra) + 1)  # t scores t+1
    ax.bar(x, extra, color=[COLORS["wrong"] if t > position else COLORS["input"] for t in x])
    ax.axvline(position, color=COLORS["ignored"], ls="--", label=f"wrong input at position {position}")
    ax.set(
        xlabel="position of the target character",
        ylabel="extra loss (nats)",
        title="One wrong input character: the cost on the real text after it",
    )
    ax.legend()
    return fig


def plot_free_running(fr: dict, *, title: str = "Reading its own text vs reading real text"):
    """Both curves of :func:`lmcore.course.training.exposure.free_running_loss`
    against the number of tokens written so far."""
    fig, ax = new_figure(width=7.0, height=3.2)
    k = np.arange(1, len(fr["own"]) + 1)
    ax.plot(k, fr["real"], color=COLORS["val"], label="real continuation (teacher forcing)")
    ax.plot(k, fr["own"], color=COLORS["wrong"], label="its own continuation (free running)")
    ax.set(xlabel="k: the k-th token after the prompt", ylabel="mean loss (nats)", title=title)
    ax.legend()
    return fig
