"""Notebook 07 (debugging label bugs): what the notebook shows. The figures of a pipeline's
training and of the bugs' signatures, and the pipeline explorer widget. The exercises:
:mod:`lmcore.course.debugging.exercises`.
"""

from __future__ import annotations

import math

from ...diagnose import CHECK_NAMES
from ..style import COLORS, new_figure
from .data import ROWS, V, documents, entropy_floor
from .lesson import diagnose_pipeline, loss_verdict, train_pipeline
from .pipelines import PIPELINES

__all__ = ["plot_pipeline", "plot_signatures", "pipeline_explorer"]


def plot_pipeline(key: str = "same_position"):
    """The loss a pipeline reports while training, its held-out next-token loss, ln V, the floor."""
    p, (_, losses, honest) = PIPELINES[key], train_pipeline(key)
    fig, ax = new_figure(width=8.0, height=3.6)
    ax.plot(range(1, len(losses) + 1), losses, color=COLORS["train"], label="loss the pipeline reports")
    ax.plot(
        [s for s, _ in honest],
        [h for _, h in honest],
        "o--",
        color=COLORS["val"],
        label="next-token loss, held out",
    )
    ax.axhline(math.log(V), color=COLORS["anchor"], ls=":", label="ln V")
    ax.axhline(entropy_floor(documents(ROWS, seed=99)), color=COLORS["floor"], ls=":", label="entropy floor")
    failed = diagnose_pipeline(key).failed
    verdict = ("run_checks: fails " + ", ".join(failed)) if failed else "run_checks: all pass"
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (nats)")
    ax.set_title(p.title)
    legend = ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        title=verdict,
        title_fontsize=8,
        alignment="left",
    )
    legend.get_title().set_color(COLORS["wrong" if failed else "correct"])
    return fig


def plot_signatures(keys=None):
    """Which checks each pipeline fails: the bugs' signatures as a grid."""
    from matplotlib.patches import Rectangle

    keys = list(keys or PIPELINES)
    fig, ax = new_figure(width=8.0, height=0.45 * len(keys) + 1.6)
    for i, key in enumerate(keys):
        failed = set(diagnose_pipeline(key).failed)
        for j, name in enumerate(CHECK_NAMES):
            bad = name in failed
            ax.add_patch(Rectangle((j, -i - 1), 0.95, 0.9, color=COLORS["wrong" if bad else "correct"]))
            ax.text(j + 0.47, -i - 0.55, "✗" if bad else "✓", ha="center", va="center", color="white")
    ax.set_xlim(0, len(CHECK_NAMES))
    ax.set_ylim(-len(keys), 0)
    ax.set_xticks([j + 0.47 for j in range(len(CHECK_NAMES))], CHECK_NAMES, rotation=35, ha="right")
    ax.set_yticks([-i - 0.55 for i in range(len(keys))], keys)
    ax.grid(False)
    ax.set_title("Which checks each pipeline fails (run_checks before training)")
    return fig


def pipeline_explorer(key: str = "same_position"):
    """A dropdown of pipelines -> its loss curves (:func:`plot_pipeline`) and its diagnosis."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import display

    def draw(key):
        fig = plot_pipeline(key)
        display(fig)
        plt.close(fig)
        p = PIPELINES[key]
        print(f"symptom: {p.symptom}; what it really learns: {p.consequence}; caught by: {p.caught_by}")
        loss_verdict(key)
        print(diagnose_pipeline(key))

    menu = widgets.Dropdown(
        options=[(p.title, k) for k, p in PIPELINES.items()],
        value=key,
        description="pipeline",
        layout=widgets.Layout(width="420px"),
    )
    return widgets.VBox([menu, widgets.interactive_output(draw, {"key": menu})])
