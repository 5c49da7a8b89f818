"""Notebook 07 (debugging label bugs): what the notebook shows. The figures of a pipeline's
training and of the bugs' signatures, the pipeline explorer widget, and the two exercises: name
the bug of six mystery pipelines, write a loss_fn that passes ``run_checks``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..diagnose import CHECK_NAMES, run_checks
from ..train.devices import cpu_threads
from ..shift import IGNORE_INDEX
from .checks import Case, check, check_choices
from .debugging import (L, PIPELINES, ROWS, V, diagnose_pipeline, documents, entropy_floor,
                        loss_correct, loss_verdict, pipeline_gpt, train_pipeline)
from .style import COLORS, new_figure
from .toys import EOS, PAD, forward_with_mask, forward_without_causal_mask

__all__ = ["plot_pipeline", "plot_signatures", "pipeline_explorer", "BUG_CHOICES",
           "mystery_pipelines", "mystery_report", "check_mystery", "check_loss_fn"]


def plot_pipeline(key: str = "same_position"):
    """The loss a pipeline reports while training, its held-out next-token loss, ln V, the floor."""
    p, (_, losses, honest) = PIPELINES[key], train_pipeline(key)
    fig, ax = new_figure(width=8.0, height=3.6)
    ax.plot(range(1, len(losses) + 1), losses, color=COLORS["train"], label="loss the pipeline reports")
    ax.plot([s for s, _ in honest], [h for _, h in honest], "o--", color=COLORS["val"],
            label="next-token loss, held out")
    ax.axhline(math.log(V), color=COLORS["anchor"], ls=":", label="ln V")
    ax.axhline(entropy_floor(documents(ROWS, seed=99)), color=COLORS["floor"], ls=":",
               label="entropy floor")
    failed = diagnose_pipeline(key).failed
    verdict = ("run_checks: fails " + ", ".join(failed)) if failed else "run_checks: all pass"
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (nats)")
    ax.set_title(p.title)
    legend = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title=verdict,
                       title_fontsize=8, alignment="left")
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

    menu = widgets.Dropdown(options=[(p.title, k) for k, p in PIPELINES.items()], value=key,
                            description="pipeline", layout=widgets.Layout(width="420px"))
    return widgets.VBox([menu, widgets.interactive_output(draw, {"key": menu})])


# ----------------------------------------------------------------------------- exercises

BUG_CHOICES = {k: p.title for k, p in PIPELINES.items()}


def _mystery_loss_a(logits, ids, mask):                  # "ignore the special tokens": EOS too
    labels = ids.masked_fill((mask == 0) | (ids == PAD) | (ids == EOS), IGNORE_INDEX)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:])


def _mystery_loss_c(logits, ids, mask):                  # correct: log-probabilities are fine logits
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)[:, 1:]
    logp = F.log_softmax(logits[:, :-1], dim=-1)
    return F.nll_loss(logp.reshape(-1, V), labels.reshape(-1))


def _mystery_loss_d(logits, ids, mask):                  # the collator shifted, the loss too
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)[:, 1:]
    return F.cross_entropy(logits[:, :-2].reshape(-1, V), labels[:, 1:].reshape(-1))


def _mystery_loss_e(logits, ids, mask):                  # micro-batches of two rows, averaged
    return torch.stack([loss_correct(logits[i:i + 2], ids[i:i + 2], mask[i:i + 2])
                        for i in range(0, len(ids), 2)]).mean()


_MYSTERY_ANSWERS = {"A": "eos_is_pad", "B": "sees_future", "C": "correct", "D": "double_shift",
                    "E": "batch_means", "F": "no_position_reset"}


def mystery_pipelines(seed: int = 0) -> dict:
    """Six pipelines ``{letter: (forward, loss_fn)}`` on one fresh tiny GPT, fed padded (never
    packed) batches; which bug does each have? Run them with :func:`mystery_report`."""
    model = pipeline_gpt(seed)
    masked = lambda ids, mask: forward_with_mask(model, ids, mask)                 # noqa: E731
    pads_as_documents = lambda ids, mask: model(ids, document_ids=mask - 1)       # noqa: E731
    # B: the padding mask is applied, the causal part of the mask forgotten
    padding_only = lambda ids, mask: forward_without_causal_mask(model, ids, mask)  # noqa: E731
    return {"A": (masked, _mystery_loss_a), "B": (padding_only, loss_correct),
            "C": (masked, _mystery_loss_c), "D": (masked, _mystery_loss_d),
            "E": (masked, _mystery_loss_e), "F": (pads_as_documents, loss_correct)}


def mystery_report(letter: str, seed: int = 0):
    """``run_checks`` on mystery pipeline ``letter`` (PAD 0, EOS 1, as for every pipeline here)."""
    forward, loss_fn = mystery_pipelines(seed)[letter]
    with cpu_threads(1):
        return run_checks(forward, loss_fn, vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS)


def check_mystery(answers_fn) -> bool:
    """Grade ``answers_fn() -> {letter: pipeline key}`` for the six mystery pipelines."""
    hints = {}
    for letter in _MYSTERY_ANSWERS:
        failed = mystery_report(letter).failed
        hints[letter] = (f"it fails {', '.join(failed)}: find the pipeline that fails exactly these "
                         "rows in the grid of section 5" if failed else
                         "it passes every check; of the pipelines that pass everything, only one "
                         "is possible for padded rows (none of the mysteries packs documents)")
    return check_choices("name_the_bugs", answers_fn, _MYSTERY_ANSWERS, hints)


def _loss_cases():
    g = torch.Generator().manual_seed(7)
    cases = []
    for n, length, vocab, short in [(2, 6, 5, 6), (3, 8, 7, 3), (1, 5, 4, 2), (4, 10, 11, 4)]:
        ids = torch.randint(1, vocab, (n, length), generator=g)
        lengths = torch.tensor([length] + [short] * (n - 1))
        mask = (torch.arange(length)[None] < lengths[:, None]).long()
        ids = ids.masked_fill(mask == 0, 0)
        logits = 2 * torch.randn(n, length, vocab, generator=g)
        cases.append(Case((logits, ids, mask), label=f"N={n}, L={length}, V={vocab}, rows of {lengths.tolist()}"))
    return cases


def check_loss_fn(fn) -> bool:
    """Grade ``fn(logits, input_ids, attention_mask) -> scalar`` against lmcore's loss, then run
    ``run_checks`` on it with a tiny GPT."""
    ok = check("my_loss_fn", fn, loss_correct, _loss_cases(), atol=1e-5,
               hint="shift once (logits[:, :-1] vs ids[:, 1:]), set padded targets to -100, "
                    "pass raw logits, and average over valid targets only.")
    if ok:
        model = pipeline_gpt(0)
        with cpu_threads(1):
            report = run_checks(lambda ids, mask: forward_with_mask(model, ids, mask), fn,
                                vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS)
        print(f"{'✓' if report.passed else '✗'} run_checks on your loss: {str(report).splitlines()[0]}")
        ok = report.passed
    return ok
