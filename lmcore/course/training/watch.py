"""Notebook 08's run, watched: a progress bar, the loss curve redrawn at every record, and what
an interrupt leaves.

:func:`train_watched` calls :func:`lmcore.train.train` with a progress bar (:class:`ProgressBar`,
tqdm: the step out of the total, the rate and the time left; a widget in a notebook, redrawn at
most once a second, and one line of text once the run ends) and an ``on_eval`` that prints each
record and redraws the curve in place (:class:`LiveCurve`). A learner who interrupts the kernel gets the partial run back, a message
that says what happened, and, where the committed reference run fits this machine's preset, that
run for the rest of the notebook: no later cell trains this run again or fails on half a run.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

from .reference import REFERENCE_PRESET, reference_fits, reference_run

__all__ = [
    "show_record",
    "LiveCurve",
    "ProgressBar",
    "RunInterrupted",
    "interrupted_message",
    "train_watched",
]


class RunInterrupted(RuntimeError):
    """The run was interrupted and no reference run can stand in for it (another preset)."""


def show_record(r: dict) -> None:
    """One line per history record: step, mean training loss, validation loss, rate, speed."""
    print(
        f"step {r['step']:5d}  train {r['train_loss']:.3f}  val {r['val_loss']:.3f}  "
        f"lr {r['lr']:.1e}  {r['tokens_per_s']:8,.0f} tokens/s"
    )


def _display_handle_available() -> bool:
    """Whether this runs in a notebook kernel (IPython with a kernel), where displays update."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def _display_handle():
    """An IPython display handle to draw into, or None outside a notebook kernel."""
    if not _display_handle_available():
        return None
    from IPython.display import display

    return display(display_id=True)


class LiveCurve:
    """``on_eval`` for :func:`lmcore.train.train`: prints each record (:func:`show_record`) and,
    in a notebook, redraws the run's loss curve in one place below the cell's first lines."""

    def __init__(self, max_steps: int, ln_v: float | None = None, *, draw: bool = True):
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int; got {max_steps!r}.")
        self.max_steps, self.ln_v, self.history = max_steps, ln_v, []
        self.draw, self.handle = draw, None

    def __call__(self, record: dict) -> None:
        self.history.append(record)
        show_record(record)
        if self.draw and self.handle is None:  # made at the first record: below train()'s bar
            self.handle = _display_handle()
        if self.handle is not None:
            self.redraw()

    def redraw(self, title: str | None = None) -> None:
        """Draw the records so far (in place in a notebook)."""
        import matplotlib.pyplot as plt

        from .views import plot_loss_curves

        step = self.history[-1]["step"] if self.history else 0
        fig = plot_loss_curves(self.history, self.ln_v, title=title or f"step {step} of {self.max_steps}")
        self.handle.update(fig)
        plt.close(fig)


def interrupted_message(partial, steps_done: int, max_steps: int, seconds: float, *, reference: bool) -> str:
    """What a learner reads after interrupting the run."""
    n = len(partial.history)
    records = f"{n} record{'s' if n != 1 else ''}, its curve above"
    head = f"Interrupted after {steps_done} of {max_steps} steps ({seconds / 60:.1f} min): " + (
        f"the partial run is kept as `partial` ({records})."
        if reference  # without a reference run the cell raises, and nothing is assigned
        else f"the partial run stopped there ({records})."
    )
    if reference:
        return head + (
            " The rest of this notebook reads the reference run, committed with lmcore (not trained "
            "here), so no cell below trains this run again. Run this cell again to train; set "
            "USE_REFERENCE_RUN = True to skip training from the start."
        )
    return head + (
        f" No reference run fits this machine's preset (only the {REFERENCE_PRESET!r} preset has one), "
        "so the cells below would read half a run: run this cell again to train to the end."
    )


class ProgressBar:
    """A tqdm bar over the run's steps (done of total, rate, time left), redrawn at most once a
    second. In a notebook it is a widget in a display of its own, replaced by one line of text
    when the run ends (a saved notebook then shows that line, not a widget that needs a kernel)."""

    def __init__(self, total: int, desc: str = "training"):
        kw = dict(total=total, desc=desc, unit="step", mininterval=1.0)
        self.handle, self.t0 = None, time.monotonic()
        if _display_handle_available():
            from IPython.display import display
            from tqdm.notebook import tqdm

            self.bar = tqdm(**kw, display=False)
            self.handle = display(self.bar.container, display_id=True)
        else:
            from tqdm.auto import tqdm

            self.bar = tqdm(**kw)

    def step(self, step, model=None) -> bool:
        """``callback`` for :func:`lmcore.train.train`: one step done; never asks to stop."""
        self.bar.update(1)
        return False

    def close(self) -> str:
        """Close the bar; returns (and, in a notebook, shows in its place) the line that stays."""
        n, total = self.bar.n, self.bar.total
        self.bar.close()
        line = f"{self.bar.desc}: {n} of {total} steps in {(time.monotonic() - self.t0) / 60:.1f} min"
        if self.handle is not None:
            self.handle.update({"text/plain": line}, raw=True)
        return line


def train_watched(cfg, corpus, *, model, out_dir, ln_v=None, device="cpu", preset_name=REFERENCE_PRESET):
    """``(result, partial)``: the run trained with its progress bar and live curve, and None;
    or, when interrupted, the reference run (its checkpoints in ``out_dir``, the partial run's
    moved to ``<out_dir>.interrupted``) and the partial run. Raises :class:`RunInterrupted`
    when interrupted and no reference run fits ``preset_name`` and the corpus."""
    from ...train import train

    out_dir = Path(out_dir)
    bar, live, t0 = ProgressBar(cfg.max_steps), LiveCurve(cfg.max_steps, ln_v), time.monotonic()
    try:
        result = train(
            replace(cfg, progress=False),
            corpus,
            model=model,
            out_dir=out_dir,
            on_eval=live,
            callback=bar.step,
        )
    finally:
        bar.close()
    if result.status != "interrupted":
        return result, None
    fits = reference_fits(corpus, preset_name) is None
    done = max(
        [bar.bar.n] + [r["step"] for r in result.history]
    )  # a record's step counts before its callback
    message = interrupted_message(result, done, cfg.max_steps, time.monotonic() - t0, reference=fits)
    print(message)
    if not fits:
        raise RunInterrupted(message)
    kept = out_dir.with_name(out_dir.name + ".interrupted")
    shutil.rmtree(kept, ignore_errors=True)
    if out_dir.exists():
        shutil.move(str(out_dir), str(kept))
    return reference_run(out_dir, corpus, device), result
