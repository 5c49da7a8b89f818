"""Execute course notebooks in place, the way they are committed: top to bottom, in their own
folder, with the current Python's kernel, widget state stripped (it is noise in diffs).

Usage: ``python -m lmcore.course.build.nbtools notebooks/03_*.ipynb`` (or ``make notebooks NB=03_*``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

__all__ = ["QUIET_KERNEL", "execute_notebook", "strip_widget_state", "run_cells"]

# The kernel's own log at ERROR: ipykernel warns at every start that its TCP sockets (bound to
# 127.0.0.1 here) are not encrypted, which buried a grading run's lines (32 of 47).
QUIET_KERNEL = ["--IPKernelApp.log_level=ERROR"]


def strip_widget_state(nb) -> None:
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def execute_notebook(path, *, timeout: int = 600, write: bool = True, allow_errors: bool = False):
    """Run every cell of ``path``; cells tagged ``raises-exception`` may raise. Returns the notebook."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    # ipykernel's own display name: JupyterLab then has nothing to rewrite when a notebook opens
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        extra_arguments=QUIET_KERNEL,
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    client.execute()
    # A loaded machine can flush one print in two stream outputs; nbval compares them merged,
    # and merged they are one checked output whatever the load (nbpolicy counts them).
    CoalesceStreamsPreprocessor().preprocess(nb, {})
    strip_widget_state(nb)
    if write:
        nbformat.write(nb, path)
    return nb


def run_cells(nb, cwd, *, timeout: int = 600) -> list[dict]:
    """Run ``nb``'s code cells in a fresh kernel started in ``cwd``, the way nbval does.

    Returns one dict per code cell: ``index``, ``text`` (stdout/stderr and plain-text results),
    ``error`` (``"Name: message"`` or None) and ``expected`` (tagged ``raises-exception``).
    Unlike nbclient it does not track widget state, which is all a "does it run" test needs
    (nbclient's widget-output tracking occasionally stalls an ``interact`` cell until its timeout).
    """
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", cwd=str(cwd), extra_arguments=QUIET_KERNEL)
    results = []
    try:
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            chunks = []

            def hook(msg, chunks=chunks):
                content = msg["content"]
                if msg["msg_type"] == "stream":
                    chunks.append(content["text"])
                elif msg["msg_type"] in ("execute_result", "display_data"):
                    chunks.append(content["data"].get("text/plain", ""))

            reply = kc.execute_interactive(cell.source, timeout=timeout, output_hook=hook, allow_stdin=False)[
                "content"
            ]
            error = f"{reply.get('ename')}: {reply.get('evalue')}" if reply["status"] == "error" else None
            results.append(
                {
                    "index": index,
                    "text": "".join(chunks),
                    "error": error,
                    "expected": "raises-exception" in cell.metadata.get("tags", []),
                }
            )
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return results


if __name__ == "__main__":
    paths = sorted({p for arg in sys.argv[1:] for p in (Path().glob(arg) if "*" in arg else [Path(arg)])})
    if not paths:
        sys.exit("usage: python -m lmcore.course.build.nbtools notebooks/NN_*.ipynb ...")
    for p in paths:
        t0 = time.perf_counter()
        execute_notebook(p)
        print(f"executed {p} in {time.perf_counter() - t0:.1f} s")
