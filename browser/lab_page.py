"""Driving one open notebook in JupyterLab: menus, kernel state, cell errors.

Everything here goes through what a learner sees and uses: the menu bar, the cell prompts,
the rendered outputs. The notebook widget (``window.jupyterapp``, exposed by the server flag
``expose_app_in_browser``) is read only to know the kernel's status and each cell's tags.
"""

from __future__ import annotations

import time

__all__ = [
    "Deadline",
    "menu",
    "wait_kernel_ready",
    "run_all_and_wait",
    "cell_errors",
    "output_text",
    "TestFailure",
]


class TestFailure(Exception):
    """A check on the page failed; the message says which and what was seen."""


class Deadline:
    """A per-notebook time budget shared by every wait."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self, what: str) -> None:
        if self.left() <= 0:
            raise TestFailure(f"timed out {what}")


_KERNEL_STATUS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!w || !w.sessionContext) return 'no-notebook';
  return w.sessionContext.kernelDisplayStatus;
}"""

# Per code cell: its number, type, prompt ("[3]:", "[*]:", or "" if never run) and whether it has
# code. The prompt comes from the model's execution count where the cell's input is folded (the
# Colab cell: JupyterLab then renders no input prompt), from the rendered prompt otherwise.
_PROMPTS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  return w.content.widgets.map((c, i) => {
    const shown = (c.node.querySelector('.jp-InputPrompt') || {}).textContent || '';
    const n = c.model.executionCount;
    const prompt = shown.trim() ? shown : (n === null || n === undefined ? '' : `[${n}]:`);
    return [i + 1, c.model.type, prompt, c.model.sharedModel.getSource().trim().length > 0];
  }).filter(r => r[1] === 'code');
}"""

# Per cell: its index, whether it is tagged raises-exception, and every error it shows:
# error outputs in the model, and rendered stderr/error text containing a traceback
# (which also catches a traceback printed inside a widget's Output area).
_CELL_ERRORS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const found = [];
  w.content.widgets.forEach((cell, i) => {
    if (cell.model.type !== 'code') return;
    const tags = cell.model.getMetadata('tags') || [];
    const expected = tags.includes('raises-exception');
    const msgs = [];
    const outs = cell.model.outputs;
    for (let k = 0; k < outs.length; k++) {
      const o = outs.get(k).toJSON();
      if (o.output_type === 'error') msgs.push(`${o.ename}: ${o.evalue}`);
    }
    cell.node.querySelectorAll(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
      .forEach(el => {
        const t = el.textContent || '';
        if (t.includes('Traceback')) {
          const lines = t.trim().split('\\n').filter(l => l.trim());
          msgs.push(lines[lines.length - 1].slice(0, 200));
        }
      });
    cell.node.querySelectorAll('.jp-OutputArea-output').forEach(el => {
      const t = el.textContent || '';
      if (t.startsWith('Error displaying widget')) msgs.push(t.slice(0, 200));
    });
    if (msgs.length && !expected) found.push([i + 1, Array.from(new Set(msgs))]);
  });
  return found;
}"""


def menu(page, top: str, label: str) -> None:
    """Click a menu bar entry, then the item with exactly this label (e.g. Run > Run All Cells)."""
    page.click(f".lm-MenuBar-item:has(.lm-MenuBar-itemLabel:text-is('{top}'))")
    page.click(f".lm-Menu-item:has(.lm-Menu-itemLabel:text-is('{label}'))")


def kernel_status(page) -> str:
    return page.evaluate(_KERNEL_STATUS)


def _accept_dialog(page) -> None:
    """A kernel-selection (or any) dialog blocks the notebook: take its default choice."""
    button = page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept")
    if button.count():
        button.first.click()


def wait_kernel_ready(page, deadline: Deadline) -> None:
    """Wait for the notebook to be open and its kernel started and idle."""
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=max(1.0, deadline.left()) * 1000)
    while kernel_status(page) != "idle":
        deadline.check(f"waiting for the kernel to start (status {kernel_status(page)!r})")
        _accept_dialog(page)
        time.sleep(0.25)


def run_all_and_wait(page, deadline: Deadline, *, settle: float = 1.0, during=None) -> tuple:
    """Clear all outputs, Run > Run All Cells, then ``during(page, deadline)`` if given (what a
    learner does while it runs), then wait until the kernel is idle with no cell queued or
    running. Returns ``(ran, unrun)``: how many code cells ran, and the numbers (1-based, as in
    Lab's status bar) of non-empty code cells that never ran."""
    menu(page, "Edit", "Clear Outputs of All Cells")
    menu(page, "Run", "Run All Cells")
    if during is not None:
        during(page, deadline)
    stable_since = None
    while True:
        deadline.check("running all cells")
        prompts = page.evaluate(_PROMPTS)
        busy = kernel_status(page) != "idle" or any("*" in p for _, _, p, _ in prompts)
        if busy:
            stable_since = None
        elif stable_since is None:
            stable_since = time.monotonic()
        elif time.monotonic() - stable_since >= settle:
            break
        time.sleep(0.25)
    ran = sum(1 for _, _, p, _ in prompts if any(ch.isdigit() for ch in p))
    unrun = [i for i, _, p, nonempty in prompts if nonempty and not any(ch.isdigit() for ch in p)]
    return ran, unrun


def cell_errors(page) -> list:
    """``[(cell_number, [messages])]`` (1-based) for cells showing an error they are not
    tagged to raise."""
    return page.evaluate(_CELL_ERRORS)


# Every code cell's stream and text/plain outputs, from the notebook model (cells Lab has not
# rendered, being out of view, count too).
_OUTPUT_TEXT = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const parts = [];
  w.content.widgets.forEach(cell => {
    if (cell.model.type !== 'code') return;
    const outs = cell.model.outputs;
    for (let k = 0; k < outs.length; k++) {
      const o = outs.get(k).toJSON();
      const t = o.text ?? (o.data || {})['text/plain'] ?? '';
      parts.push(Array.isArray(t) ? t.join('') : String(t));
    }
  });
  return parts.join('\\n');
}"""


def output_text(page) -> str:
    """The text every code cell of the open notebook printed or returned (from Lab's model)."""
    return page.evaluate(_OUTPUT_TEXT)
