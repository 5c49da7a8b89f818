"""Notebook 08, section 4: how large a learning rate? The same small GPT trained at several
constant learning rates on the course's character corpus, side by side: too small crawls, too
large diverges, and the useful rates lie in a band between. Its plot: :func:`plot_lr_sweep`.

The model is small on purpose (one layer, 32 wide, a context of 32 characters, batches of 8) so
that a sweep costs seconds; the band it finds is this model's, not the preset's (a wider, deeper
model is usually trained at a smaller rate).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..._validate import require_int_scalar, require_real
from ...loss import causal_lm_loss
from ...train.devices import cpu_threads
from ..autograding import grading
from ..style import COLORS, new_figure
from ..toys import fit, toy_gpt
from .reference import REFERENCE_DIR, REFERENCE_PRESET, SWEEP_CALLS, SWEEPS, _sweep_key, recorded_sweep
from .run import eval_windows

__all__ = ["lr_sweep", "plot_lr_sweep", "Ledger", "LEDGER", "record_sweeps", "main"]

_BLOCK, _BATCH, _WIDTH = 32, 8, 32


class Ledger:
    """When things happened in this kernel, for judging a prediction against a sweep: the stamp
    of each sweep's start and finish (given by :func:`lr_sweep`) and of each prediction recorded
    (``lr_prediction``). Stamps are the monotonic clock in nanoseconds, raised by 1 where it would
    repeat, so what happened first has the smaller stamp, even across a reloaded module."""

    _last = 0  # the last stamp given: a tie on the clock becomes +1 (a reloaded module's new class starts at
    # 0 again; its stamps still come later than the old ones because the monotonic clock does)

    def __init__(self) -> None:
        self.finished: list[int] = []  # when each sweep of this kernel finished (its results then printed)

    def stamp(self) -> int:
        Ledger._last = max(time.monotonic_ns(), Ledger._last + 1)
        return Ledger._last

    def first_finished(self) -> int | None:
        """When the first sweep of this kernel finished: a prediction recorded after it was made
        with a sweep's results in view, whatever sweep it is then judged against."""
        return self.finished[0] if self.finished else None


LEDGER = Ledger()


def lr_sweep(
    corpus,
    lrs: Sequence[float],
    *,
    steps: int = 200,
    seed: int = 0,
    n_val: int = 64,
    batch_size: int = _BATCH,
    recorded: bool | None = None,
) -> dict:
    """Train one fresh GPT (``toy_gpt``: 1 layer, width 32, context 32, seeded by ``seed``) per
    learning rate in ``lrs`` for ``steps`` AdamW steps at that constant rate, on the same batches
    of ``corpus``'s training split (``batch_size`` rows of 32 characters, 8 by default, drawn from
    a generator seeded by ``seed``). Returns ``{"lrs", "curves": {lr: training losses}, "val": {lr: held-out loss on
    n_val validation windows}, "ln_v", "started"}`` (``started``: when the sweep began, on the
    counter ``lr_prediction`` stamps each recorded prediction with); a run whose loss became non-finite keeps its curve up to
    there and scores ``inf``. ``recorded`` (default: under nbgrader's autograder): return the
    sweep recorded with lmcore for this very call on this corpus, where there is one
    (:func:`lmcore.course.training.reference.recorded_sweep`; notebook 08's sweeps), instead of
    training; it is stamped as a sweep run now."""
    if isinstance(lrs, (str, bytes)) or not isinstance(lrs, Sequence) or not lrs:
        raise TypeError(f"lrs must be a non-empty sequence of learning rates; got {lrs!r}.")
    lrs = [require_real("lrs", lr, min=0.0, min_inclusive=False, hint="(a learning rate)") for lr in lrs]
    require_int_scalar("steps", steps, min=1)
    require_int_scalar("seed", seed, min=0)
    require_int_scalar("n_val", n_val, min=1)
    require_int_scalar("batch_size", batch_size, min=1)
    if recorded is not None and not isinstance(recorded, bool):
        raise TypeError(f"recorded must be True, False or None; got {recorded!r}.")
    started = LEDGER.stamp()
    if grading() if recorded is None else recorded:
        sweep = recorded_sweep(corpus, lrs, steps, seed, n_val, batch_size)
        if sweep is not None:
            LEDGER.finished.append(LEDGER.stamp())
            return {**sweep, "started": started}
    V = corpus.vocab_size
    val = eval_windows(corpus, n_val, _BLOCK)
    curves, scores = {}, {}
    for lr in lrs:
        model = toy_gpt(V, block_size=_BLOCK, n_layer=1, n_head=2, n_embd=_WIDTH, seed=seed)
        data = torch.Generator().manual_seed(seed)
        batch = lambda step, data=data: corpus.batch("train", batch_size, _BLOCK, generator=data)["input_ids"]
        curves[lr] = fit(model, batch, steps=steps, lr=lr)
        with torch.no_grad(), cpu_threads(1):
            model.eval()
            loss = float(causal_lm_loss(model(val), val))
        scores[lr] = loss if math.isfinite(loss) and all(map(math.isfinite, curves[lr])) else math.inf
    LEDGER.finished.append(LEDGER.stamp())
    return {"lrs": lrs, "curves": curves, "val": scores, "ln_v": math.log(V), "started": started}


def plot_lr_sweep(sweep: dict, *, smooth: int = 10, title: str = "One model, several learning rates"):
    """Each learning rate's training loss (a running mean of ``smooth`` steps), ln V dotted; the
    y axis stops a nat above ln V; a curve that goes above it (a diverging run) is drawn dashed
    at the top edge where it is off the scale, and its label says so."""
    require_int_scalar("smooth", smooth, min=1)
    import matplotlib.pyplot as plt

    fig, ax = new_figure(width=7.0, height=3.8)
    cmap = plt.get_cmap("plasma")  # ordered by rate; stops at 0.85, before plasma's pale yellow
    top = sweep["ln_v"] + 1
    for k, lr in enumerate(sweep["lrs"]):
        curve = np.asarray(sweep["curves"][lr], dtype=float)
        w = min(smooth, len(curve))
        kernel = np.ones(w) / w
        shown = np.convolve(curve, kernel, mode="valid")
        off = ~(shown <= top)  # above the axis, or not a number
        ax.plot(
            np.arange(w - 1, len(curve)),
            np.where(off, top, shown),
            color=cmap(0.85 * k / max(1, len(sweep["lrs"]) - 1)),
            linestyle="--" if off.any() else "-",
            clip_on=False,
            label=f"lr {lr:g} (off the scale, drawn at the top)" if off.any() else f"lr {lr:g}",
        )
    ax.axhline(sweep["ln_v"], color=COLORS["anchor"], linestyle=":", label="ln V")
    ax.set_ylim(bottom=0, top=top)  # a loss is never negative
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return fig


def record_sweeps(corpus, dest=REFERENCE_DIR, calls=SWEEP_CALLS) -> Path:
    """Run notebook 08's sweeps (``reference.SWEEP_CALLS``, under a minute on two idle cores) and
    write them to ``dest/sweeps.json``, which :func:`lr_sweep` reads under the autograder (``inf``
    and ``nan`` as JSON's Python extensions Infinity and NaN)."""
    entries = []
    for call in calls:
        sweep = lr_sweep(corpus, **call, recorded=False)
        entries.append(
            {
                "key": _sweep_key(corpus, **call),
                "curves": {repr(float(lr)): [float(v) for v in c] for lr, c in sweep["curves"].items()},
                "val": {repr(float(lr)): float(v) for lr, v in sweep["val"].items()},
                "ln_v": sweep["ln_v"],
            }
        )
    path = Path(dest) / SWEEPS
    path.write_text(json.dumps(entries) + "\n", encoding="utf-8")
    return path


def main(argv=None) -> int:
    """``python -m lmcore.course.training.lr_sweep --record``: record notebook 08's sweeps."""
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["--record"]:
        sys.exit(
            "usage: python -m lmcore.course.training.lr_sweep --record  (notebook 08's sweeps, for grading)"
        )
    from ...data import load_corpus
    from ...train import PRESETS

    path = record_sweeps(load_corpus(PRESETS[REFERENCE_PRESET].corpus))
    print(f"wrote section 4's {len(SWEEP_CALLS)} sweeps into {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
