"""Notebook 08's training as a learner meets it in Lab: the progress bar moves, the curve draws,
*Kernel > Interrupt* stops the run, and the notebook goes on with no error (issue 40).

:func:`watch_then_interrupt` runs while Run All is under way: it waits for the training cell's
progress bar to show a step count out of the total and then a larger one, and for the cell's
curve (an image in its output), then interrupts the kernel from the menu bar. The Run All that
follows is checked like any other (no error in any cell; the partial-run message printed).
"""

from __future__ import annotations

import re
import time

from lab_page import TestFailure, menu

__all__ = ["INTERRUPTED_LINE", "TRAINING_CELL", "watch_then_interrupt"]

INTERRUPTED_LINE = "the partial run is kept as `partial`"
TRAINING_CELL = "train_watched("

# The training cell's rendered output: its text (the tqdm widget's labels included) and whether
# an image (the live curve) is in it; None until the cell exists.
_TRAINING_OUTPUT = """(marker) => {
  const w = window.jupyterapp.shell.currentWidget;
  const cell = w.content.widgets.find(c => c.model.type === 'code'
      && c.model.sharedModel.getSource().includes(marker));
  if (!cell) return null;
  cell.node.scrollIntoView();
  const area = cell.node.querySelector('.jp-OutputArea');
  return [area ? area.innerText : '', !!(area && area.querySelector('img'))];
}"""

_STEPS = re.compile(r"(\d+)/(\d+)\s+\[")  # tqdm's "862/1500 [09:09<07:46, ...]" (spaces are &nbsp;)


def _training_output(page):
    return page.evaluate(_TRAINING_OUTPUT, TRAINING_CELL)


def watch_then_interrupt(page, deadline) -> str:
    """Wait for the bar to move and the curve to draw, then Kernel > Interrupt Kernel. Returns
    what it saw, e.g. "bar 12/1500 -> 31/1500, curve drawn, interrupted"."""
    first, last, curve = None, None, False
    while True:
        deadline.check(
            f"waiting for 08's progress bar to move and its curve to draw (bar {first} -> {last}, curve {curve})"
        )
        seen = _training_output(page)
        if seen is not None:
            text, curve = seen
            steps = _STEPS.findall(text)
            if steps:
                now = tuple(map(int, steps[-1]))
                first = first or now
                last = now
        if first and last and last[0] > first[0] and curve:
            break
        time.sleep(0.5)
    if last[1] <= 1 or last[0] >= last[1]:
        raise TestFailure(f"08's progress bar shows no total to go: {last}")
    menu(page, "Kernel", "Interrupt Kernel")
    return f"bar {first[0]}/{first[1]} -> {last[0]}/{last[1]}, curve drawn, interrupted"
