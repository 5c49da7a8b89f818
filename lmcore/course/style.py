"""One look for every course figure: a colour for each role, applied the same way everywhere."""

from __future__ import annotations

__all__ = ["COLORS", "apply_style", "new_figure", "draw_grid"]

COLORS = {
    "input": "#4C72B0",  # tokens the model reads
    "target": "#DD8452",  # tokens it is scored against
    "ignored": "#B0B0B0",  # IGNORE_INDEX (-100): not scored
    "pad": "#E5E5E5",  # padding
    "eos": "#8172B3",  # end of sequence / document boundary
    "correct": "#55A868",  # the correct token, a passing check
    "wrong": "#C44E52",  # a bug, a failing check
    "anchor": "#937860",  # ln V, the initial-loss anchor
    "floor": "#DA8BC3",  # the data's entropy H(p), the loss floor
    "train": "#4C72B0",
    "val": "#DD8452",
}


def apply_style() -> None:
    """Course-wide matplotlib defaults (imports matplotlib lazily)."""
    import matplotlib as mpl

    mpl.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": 120,
            "savefig.bbox": "tight",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.titlesize": 12,
            "axes.titleweight": "bold",
            "axes.labelsize": 10,
            "legend.frameon": False,
            "font.size": 10,
        }
    )


def new_figure(nrows: int = 1, ncols: int = 1, *, width: float = 6.4, height: float = 3.6, **kw):
    """``(fig, axes)`` with the course style; ``plt.subplots`` under the hood."""
    import matplotlib.pyplot as plt

    apply_style()
    return plt.subplots(nrows, ncols, figsize=(width, height), constrained_layout=True, **kw)


def draw_grid(ax, colors, texts, title, row_names=None):
    """Coloured cells with text: ``colors``/``texts`` are (R, C) nested lists."""
    from matplotlib.patches import Rectangle

    R, C = len(colors), len(colors[0])
    for r in range(R):
        for c in range(C):
            ax.add_patch(Rectangle((c, R - 1 - r), 0.95, 0.9, color=colors[r][c]))
            ax.text(
                c + 0.475, R - 1 - r + 0.45, texts[r][c], ha="center", va="center", fontsize=8, color="black"
            )
    ax.set_xlim(0, C)
    ax.set_ylim(0, R)
    ax.set_xticks([c + 0.475 for c in range(C)], [str(c) for c in range(C)])
    ax.set_yticks([R - 1 - r + 0.45 for r in range(R)], row_names or [f"row {r}" for r in range(R)])
    ax.grid(False)
    ax.set_title(title, fontsize=10)
