"""Execute course notebooks in place, the way they are committed: top to bottom, in their own
folder, with the current Python's kernel, widget state stripped (it is noise in diffs).

Usage: ``python -m lmcore.course.nbtools notebooks/03_*.ipynb`` (or ``make notebooks NB=03_*``).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

__all__ = ["execute_notebook", "strip_widget_state"]


def strip_widget_state(nb) -> None:
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def execute_notebook(path, *, timeout: int = 600, write: bool = True, allow_errors: bool = False):
    """Run every cell of ``path``; cells tagged ``raises-exception`` may raise. Returns the notebook."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=allow_errors,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    client.execute()
    strip_widget_state(nb)
    if write:
        nbformat.write(nb, path)
    return nb


if __name__ == "__main__":
    paths = sorted({p for arg in sys.argv[1:] for p in (Path().glob(arg) if "*" in arg else [Path(arg)])})
    if not paths:
        sys.exit("usage: python -m lmcore.course.nbtools notebooks/NN_*.ipynb ...")
    for p in paths:
        t0 = time.perf_counter()
        execute_notebook(p)
        print(f"executed {p} in {time.perf_counter() - t0:.1f} s")
