"""Regenerate every picture in ``figures/`` from the same plotting functions the notebooks call.

Usage: ``python -m lmcore.course.build.figures [OUT_DIR] [--quick]`` (``make figures``). ``--quick``
trains the loss-curve figures for a few seconds (for tests); without it, the training curve is
notebook 08's committed reference run (the ``cpu`` preset's run) and the floor run trains in full.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

__all__ = ["FIGURES", "build_figures"]


def _label_shift(quick):
    from ..sequence.views import plot_label_shift

    return plot_label_shift()


def _softmax_nll(quick):
    from ..softmax_nll.views import plot_softmax_state

    return plot_softmax_state()


def _anchor(quick):
    from ..anchor.views import plot_first_loss

    return plot_first_loss()


def _padding(quick):
    from ..padding.views import plot_padding_masks

    return plot_padding_masks()


def _packing(quick):
    from ..packing.views import plot_packing

    return plot_packing("block_diagonal")


def _training(quick):
    """The ``cpu`` preset's run: notebook 08's committed reference run (the run that preset
    trains, tied to the preset, the model and the data by tests/course/test_training_reference.py;
    nbval verifies the training itself), or ``--quick``: the ``smoke`` preset trained here."""
    from ...train import train
    from ...train.presets import preset
    from ..training.views import plot_loss_curves

    if quick:
        result = train(preset("smoke", progress=False))
        history, corpus = result.history, result.corpus
    else:
        from ...data import load_corpus
        from ..training.reference import REFERENCE_DIR, REFERENCE_PRESET, reference_fits

        corpus = load_corpus(preset(REFERENCE_PRESET).corpus)
        why = reference_fits(corpus, REFERENCE_PRESET)
        if why is not None:
            raise ValueError(f"the reference run cannot be drawn here: {why}.")
        history = json.loads((REFERENCE_DIR / "history.json").read_text(encoding="utf-8"))
    return plot_loss_curves(
        history,
        math.log(corpus.vocab_size),
        corpus.unigram_entropy,
        title=f"Training on the Python docs ({'smoke' if quick else 'cpu'} preset)",
    )


def _floor(quick):
    from ...data import chat_arithmetic_entropy
    from ..floor.run import train_floor_run
    from ..floor.views import plot_loss_floor

    result = train_floor_run(max_steps=40 if quick else 300)
    return plot_loss_floor(result.history, chat_arithmetic_entropy(), ln_v=math.log(result.corpus.vocab_size))


# name -> builder(quick) -> matplotlib Figure; each is the notebooks' own plotting function.
FIGURES = {
    "label_shift": _label_shift,
    "softmax_nll": _softmax_nll,
    "initial_loss_anchor": _anchor,
    "padding_masks": _padding,
    "packing_block_diagonal": _packing,
    "training_loss_curve": _training,
    "loss_floor": _floor,
}


def build_figures(out_dir="figures", *, quick: bool = False, names=None) -> list[Path]:
    """Write ``<name>.png`` for every figure (or those in ``names``) to ``out_dir``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or FIGURES:
        if name not in FIGURES:
            raise ValueError(f"unknown figure {name!r}; choose from {sorted(FIGURES)}.")
        t0 = time.perf_counter()
        fig = FIGURES[name](quick)
        path = out / f"{name}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
        print(f"wrote {path} ({time.perf_counter() - t0:.1f} s)")
    return written


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    build_figures(args[0] if args else "figures", quick="--quick" in sys.argv)
