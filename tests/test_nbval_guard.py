"""No notebook check passes without checking: the root conftest's guard around nbval.

A tiny notebook whose second cell outlives a short timeout while catching the KeyboardInterrupt
(as ``train()`` does for a learner's Ctrl-C) must fail the run, name that cell, and fail the
cell after it as unchecked; nbval alone passes it and marks the rest as expected failures.
"""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow  # two kernels: about 15 s


def _notebook(path: Path, middle: str) -> None:
    cells = [nbformat.v4.new_code_cell("print('start')"), nbformat.v4.new_code_cell(middle)]
    cells.append(nbformat.v4.new_code_cell("print(6 * 7)"))
    for n, (cell, out) in enumerate(zip(cells, ["start\n", "", "42\n"]), start=1):
        cell.execution_count = n
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=out)] if out else []
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def _nbval(path: Path, *options) -> subprocess.CompletedProcess:
    """pytest --nbval on ``path`` with the root conftest loaded as a plugin (``path`` lies
    outside the repository, where that conftest would not apply by itself)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "conftest", "--nbval", "-q", "-rA", *options, str(path)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


SLEEPS_AND_CATCHES = """# NBVAL_IGNORE_OUTPUT
import time
try:
    time.sleep(60)
except KeyboardInterrupt:
    print("stopped cleanly")"""


def test_a_cell_that_times_out_and_catches_the_interrupt_fails_the_run(tmp_path):
    nb = tmp_path / "slow.ipynb"
    _notebook(nb, SLEEPS_AND_CATCHES)
    run = _nbval(nb, "--nbval-cell-timeout", "3")
    text = run.stdout + run.stderr
    assert run.returncode == 1, text
    assert "cell 1 timed out after 3 s" in text, text
    assert "not checked: an earlier cell of this notebook timed out" in text, text
    assert "2 failed, 1 passed" in text, text  # cell 0 checked; 1 timed out; 2 never compared


def test_a_skipped_cell_fails_the_run(tmp_path):
    nb = tmp_path / "skip.ipynb"
    _notebook(nb, "# NBVAL_SKIP\nprint('never run')")
    run = _nbval(nb)
    assert run.returncode == 1 and "cell 1 was skipped (NBVAL_SKIP)" in run.stdout, run.stdout


def test_a_notebook_within_its_timeout_passes(tmp_path):
    nb = tmp_path / "fine.ipynb"
    _notebook(nb, "x = 1")
    run = _nbval(nb, "--nbval-cell-timeout", "60")
    assert run.returncode == 0 and "3 passed" in run.stdout, run.stdout + run.stderr
