"""Notebook 06 (packing and boundaries), the picture behind its widget: one packed row under a
policy (inputs, position ids, scored targets) next to its attention mask (the tensors come from
:func:`lmcore.course.packing.lesson.pack_with_policy`), and the leak widget: the replacement A's length
and the two switches -> the measured leak into B."""

from __future__ import annotations

from ...shift import IGNORE_INDEX
from ..style import COLORS, draw_grid, new_figure
from ..widgets import live_figure
from .lesson import EOS, POLICIES, VOCAB, pack_with_policy

__all__ = ["plot_packing", "plot_leak_by_length", "leak_explorer"]

_DOC_COLORS = ["#4C72B0", "#64B5CD", "#55A868", "#CCB974"]


def plot_packing(
    policy: str = "block_diagonal", documents=None, block_size: int = 14, leak: float | None = None
):
    """One packed row under ``policy``: inputs, position ids and the target each position is
    scored on (grey = -100, red = scored across a boundary), next to the attention mask."""
    p = pack_with_policy(documents, block_size, policy)
    ids, doc, pos = (p[k][0].tolist() for k in ("input_ids", "document_ids", "position_ids"))
    lab, cross = p["labels"][0].tolist(), p["crossing"][0].tolist()
    L = len(ids)
    fig, (ax, ax2) = new_figure(1, 2, width=12.0, height=3.4, gridspec_kw={"width_ratios": [2.2, 1]})
    in_col = [
        COLORS["pad"] if d < 0 else COLORS["eos"] if i == EOS else _DOC_COLORS[d % 4]
        for i, d in zip(ids, doc)
    ]
    tg_col = [
        COLORS["ignored"] if y == IGNORE_INDEX else COLORS["wrong"] if c else COLORS["target"]
        for y, c in zip(lab[1:], cross[1:])
    ] + [COLORS["pad"]]
    draw_grid(
        ax,
        [in_col, [COLORS["pad"]] * L, tg_col],
        [
            [VOCAB[i] for i in ids],
            [str(q) for q in pos],
            [VOCAB[y] if y != IGNORE_INDEX else "-100" for y in lab[1:]] + ["—"],
        ],
        f"{POLICIES[policy]}: "
        + (
            "red = a target that crosses a boundary"
            if COLORS["wrong"] in tg_col
            else "no scored target crosses a boundary"
        ),
        row_names=["input", "position", "target"],
    )
    ax.set_xlabel("position t (its target is token t+1)")
    ax2.imshow(p["attention"][0].numpy(), cmap="Blues", vmin=0, vmax=1.4)
    ax2.set_xticks(range(0, L, 2))
    ax2.set_yticks(range(0, L, 2))
    ax2.set_xlabel("key j (read)")
    ax2.set_ylabel("query i (reading)")
    ax2.grid(False)
    ax2.set_title(
        "attention mask (blue = may read)"
        + ("" if leak is None else f"\nleak: max |Δ logits of B| = {leak:.3f}"),
        fontsize=10,
    )
    return fig


def plot_leak_by_length(
    leaks: dict, *, chosen: int, a_words: int = 6, block_diagonal: bool, reset_positions: bool
):
    """Bars: the leak into B for each length of the replacement A (``leaks`` from
    :func:`lmcore.course.packing.leak.leaks_by_length`), the ``chosen`` length highlighted."""
    fig, ax = new_figure(width=6.4, height=3.4)
    ns = sorted(leaks)
    colors = [COLORS["wrong"] if n == chosen else COLORS["input"] for n in ns]
    bars = ax.bar(ns, [leaks[n] for n in ns], color=colors)
    ax.bar_label(bars, labels=[f"{leaks[n]:.3f}" for n in ns], padding=2, fontsize=7)
    ax.axvline(a_words, color=COLORS["anchor"], ls=":", label=f"the original A: {a_words} words")
    switches = f"block-diagonal {'on' if block_diagonal else 'off'}, positions reset {'on' if reset_positions else 'off'}"
    ax.set(
        xlabel="words in the replacement A",
        ylabel="max |Δ logits of B|",
        xticks=ns,
        title=f"{switches}; A of {chosen} words: leak {leaks[chosen]:.3f}",
    )
    ax.set_ylim(0, max(1.0, 1.15 * max(leaks.values())))
    ax.legend(fontsize=8)
    return fig


def leak_explorer(model=None, *, a_words: int = 3):
    """The replacement A's length (slider) and the two switches (block-diagonal mask, positions
    reset) -> :func:`plot_leak_by_length`, measured on the leak model each time."""
    import ipywidgets as widgets

    from .leak import A_WORDS, leak_model, leaks_by_length

    model = model if model is not None else leak_model()
    n = widgets.IntSlider(
        value=a_words, min=1, max=len(A_WORDS), description="A's words", continuous_update=False
    )
    block = widgets.Checkbox(value=False, description="block-diagonal mask")
    reset = widgets.Checkbox(value=False, description="reset positions")

    def plot(n, block, reset):
        leaks = leaks_by_length(model, block_diagonal=block, reset_positions=reset)
        return plot_leak_by_length(leaks, chosen=n, block_diagonal=block, reset_positions=reset)

    return widgets.VBox(
        [widgets.HBox([n, block, reset]), live_figure(plot, {"n": n, "block": block, "reset": reset})]
    )
