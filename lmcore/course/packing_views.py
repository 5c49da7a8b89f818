"""Notebook 06 (packing and boundaries), the picture behind its widget: one packed row under a
policy (inputs, position ids, scored targets) next to its attention mask. The tensors come from
:func:`lmcore.course.packing.pack_with_policy`."""

from __future__ import annotations

from ..shift import IGNORE_INDEX
from .packing import EOS, POLICIES, VOCAB, pack_with_policy
from .style import COLORS, draw_grid, new_figure

__all__ = ["plot_packing"]

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
