"""Naming a notebook runs it under nbval: ``pytest notebooks/05_*.ipynb`` checks its outputs.

``pytest tests/`` is the fast unit suite (pyproject's addopts: no nbval, no slow tests). When an
argument is a notebook or the notebooks folder and nbval is not on, this turns it on with the
options ``make test`` passes (the Makefile's ``NBVAL``; tests/test_packaging.py keeps them equal).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent
NOTEBOOKS = ROOT / "notebooks"
SANITIZE = NOTEBOOKS / "sanitize.cfg"
CELL_TIMEOUT = 900.0  # s: notebook 08's training cell under the non-vectorised kernels


def _names_a_notebook(args) -> bool:
    for arg in args:
        path = Path(arg.split("::")[0])
        if path.suffix == ".ipynb" or (path.is_dir() and path.resolve() == NOTEBOOKS):
            return True
    return False


def pytest_configure(config):
    opt = config.option
    if getattr(opt, "nbval", None) is None or opt.nbval or opt.nbval_lax:
        return  # nbval not installed, or the caller chose its options
    if not _names_a_notebook(config.args):
        return
    opt.nbval = True
    opt.nbval_current_env = True
    if opt.nbval_sanitize_with is None:
        opt.nbval_sanitize_with = str(SANITIZE)
    opt.nbval_cell_timeout = CELL_TIMEOUT
