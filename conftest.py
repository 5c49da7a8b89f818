"""What a named path asks for: a notebook runs under nbval, a named test runs even if slow.

``pytest tests/`` is the fast unit suite (pyproject's addopts: no nbval, ``-m "not slow"``).
- When an argument is a notebook or the notebooks folder, nbval is turned on:
  ``pytest notebooks/05_*.ipynb`` checks that notebook's outputs.
- Whenever nbval runs (turned on here, or by ``--nbval``/``--nbval-lax``, as the Makefile's
  ``NBVAL`` does), it gets the project's options, defined here only: the current environment's
  kernel, ``notebooks/sanitize.cfg`` and ``CELL_TIMEOUT``; an option the caller set is kept.
- When an argument names a test (``path::test``), the default ``-m "not slow"`` is dropped, so
  ``pytest tests/test_train.py::test_x`` runs ``test_x`` even if it is marked slow.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parent
NOTEBOOKS = ROOT / "notebooks"
SANITIZE = NOTEBOOKS / "sanitize.cfg"
CELL_TIMEOUT = 900.0  # s: notebook 08's training cell under the non-vectorised kernels
NBVAL_DEFAULT_TIMEOUT = 2000  # nbval's own default (--nbval-cell-timeout not given)


def _names_a_notebook(args) -> bool:
    for arg in args:
        path = Path(arg.split("::")[0])
        if path.suffix == ".ipynb" or (path.is_dir() and path.resolve() == NOTEBOOKS):
            return True
    return False


DEFAULT_MARKEXPR = "not slow"  # pyproject's addopts


def pytest_configure(config):
    opt = config.option
    if opt.markexpr == DEFAULT_MARKEXPR and any("::" in arg for arg in config.args):
        opt.markexpr = ""
    if getattr(opt, "nbval", None) is None:
        return  # nbval not installed
    if not (opt.nbval or opt.nbval_lax):
        if not _names_a_notebook(config.args):
            return
        opt.nbval = True
    _project_nbval_options(opt)


def _project_nbval_options(opt) -> None:
    """The one place of the project's nbval options; where the caller gave one, theirs stays."""
    if opt.nbval_kernel_name is None:  # a kernel the caller named stays (current env would win)
        opt.nbval_current_env = True
    if opt.nbval_sanitize_with is None:
        opt.nbval_sanitize_with = str(SANITIZE)
    if opt.nbval_cell_timeout == NBVAL_DEFAULT_TIMEOUT:
        opt.nbval_cell_timeout = CELL_TIMEOUT
