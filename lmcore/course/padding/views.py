"""Notebook 05 (padding and perplexity), the pictures: the three grids of one padded batch
(inputs, attention mask, scored targets) and the bars of the three perplexity averages. The
numbers come from :mod:`lmcore.course.padding.lesson`."""

from __future__ import annotations

from ...shift import IGNORE_INDEX, labels_from_attention_mask, num_valid_targets
from ..style import COLORS, draw_grid, new_figure
from .lesson import EOS, PAD, TOKENS, example_batch
from .perplexity import BATCH_SIZES, compare_batchings

__all__ = ["plot_padding_masks", "plot_perplexities", "perplexity_y_top"]


def plot_padding_masks(
    input_ids=None, attention_mask=None, *, pad_id: int = PAD, eos_id: int = EOS, names=TOKENS
):
    """Three grids for one padded batch: the inputs, what attention reads (the attention mask)
    and what the loss scores (the target each position predicts; -100 in grey)."""
    if input_ids is None:
        input_ids, attention_mask = example_batch(pad_id, eos_id)
    labels = labels_from_attention_mask(input_ids, attention_mask)
    N, L = input_ids.shape
    fig, axes = new_figure(3, 1, width=6.4, height=1.2 + 1.1 * N * 3 / 2)

    ids, m = input_ids.tolist(), attention_mask.tolist()
    role = [
        [COLORS["pad"] if not k else COLORS["eos"] if i == eos_id else COLORS["input"] for i, k in zip(a, b)]
        for a, b in zip(ids, m)
    ]
    draw_grid(axes[0], role, [[names[i] for i in a] for a in ids], "input_ids (grey = PAD, purple = EOS)")
    draw_grid(
        axes[1],
        [[COLORS["correct"] if k else COLORS["pad"] for k in b] for b in m],
        [[str(k) for k in b] for b in m],
        "attention_mask: what the model may read",
    )
    tgt = labels[:, 1:].tolist()
    draw_grid(
        axes[2],
        [
            [COLORS["target"] if y != IGNORE_INDEX else COLORS["ignored"] for y in r] + [COLORS["pad"]]
            for r in tgt
        ],
        [[names[y] if y != IGNORE_INDEX else "-100" for y in r] + ["—"] for r in tgt],
        f"target predicted at each position: {num_valid_targets(labels)} scored, grey = -100",
    )
    axes[2].set_xlabel("position t (its target is token t+1)")
    return fig


_KINDS = [
    ("token_weighted", "token-weighted\nexp(ΣNLL / Σtokens)", "correct"),
    ("mean_of_batch_means", "exp(mean of\nbatch means)", "target"),
    ("mean_of_batch_perplexities", "mean of batch\nperplexities", "wrong"),
]


def perplexity_y_top() -> float:
    """One y-range for every setting of the widget, so bars compare across settings."""
    return 1.1 * max(
        compare_batchings(b, o)["mean_of_batch_perplexities"]
        for b in BATCH_SIZES
        for o in ("sorted", "shuffled")
    )


def plot_perplexities(batch_size: int = 4, order: str = "sorted", *, y_top: float | None = None):
    """Bars of the three ways to average perplexity over one fixed evaluation set, batched by
    ``batch_size`` rows in ``order``; the y-axis is the same for every setting."""
    r = compare_batchings(batch_size, order)
    fig, ax = new_figure(width=6.0, height=3.4)
    bars = ax.bar([k[1] for k in _KINDS], [r[k[0]] for k in _KINDS], color=[COLORS[k[2]] for k in _KINDS])
    ax.bar_label(bars, labels=[f"{r[k[0]]:.2f}" for k in _KINDS], padding=2)
    ax.set_ylabel("perplexity")
    ax.set_ylim(0, y_top if y_top is not None else perplexity_y_top())
    ax.set_title(
        f"The same {r['n_tokens']} targets in {r['n_batches']} batches of {batch_size} ({order}): "
        f"{r['padding_fraction']:.0%} padding",
        fontsize=9,
    )
    return fig
