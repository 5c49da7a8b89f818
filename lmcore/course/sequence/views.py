"""Notebook 03 (from a sequence to one loss), the picture: the label shift, each input pointing
at the token it is scored against."""

from __future__ import annotations

from ..style import COLORS, new_figure
from .lesson import words

__all__ = ["plot_label_shift"]


def plot_label_shift(tokens=None):
    """Inputs on the top row, targets on the bottom row, each input pointing at its target."""
    tokens = list(tokens) if tokens is not None else words("The cat sat on the mat", bos=True)
    L = len(tokens)
    fig, ax = new_figure(width=max(5.0, 1.1 * L), height=2.6)
    box = dict(boxstyle="round,pad=0.3", ec="none")
    for t, tok in enumerate(tokens):
        inp = t < L - 1
        ax.text(
            t,
            1,
            tok,
            ha="center",
            va="center",
            color="white",
            bbox={**box, "fc": COLORS["input"] if inp else COLORS["ignored"]},
        )
        if t >= 1:
            ax.text(t, 0, tok, ha="center", va="center", color="white", bbox={**box, "fc": COLORS["target"]})
            ax.annotate(
                "", xy=(t - 0.15, 0.2), xytext=(t - 1, 0.8), arrowprops=dict(arrowstyle="->", color="0.3")
            )
    ax.text(-0.9, 1, "input", ha="right", va="center")
    ax.text(-0.9, 0, "target", ha="right", va="center")
    ax.set_xlim(-2.2, L - 0.4)
    ax.set_ylim(-0.5, 1.5)
    ax.axis("off")
    ax.set_title(f"{L} tokens give {L - 1} (input -> next token) pairs; the last input is unused")
    import matplotlib.pyplot as plt

    plt.close(fig)  # shown once: the notebook displays the returned Figure
    return fig
