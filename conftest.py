"""What a named path asks for: a notebook runs under nbval, a named test runs even if slow.

``pytest tests/`` is the fast unit suite (pyproject's addopts: no nbval, ``-m "not slow"``).
- When an argument is a notebook or the notebooks folder and nbval is not on, nbval is turned on
  with the options ``make test`` passes (the Makefile's ``NBVAL``; tests/test_tooling.py keeps
  them equal): ``pytest notebooks/05_*.ipynb`` checks that notebook's outputs.
- When an argument names a test (``path::test``), the default ``-m "not slow"`` is dropped, so
  ``pytest tests/test_train.py::test_x`` runs ``test_x`` even if it is marked slow.
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


DEFAULT_MARKEXPR = "not slow"  # pyproject's addopts


def pytest_configure(config):
    opt = config.option
    if opt.markexpr == DEFAULT_MARKEXPR and any("::" in arg for arg in config.args):
        opt.markexpr = ""
    if getattr(opt, "nbval", None) is None or opt.nbval or opt.nbval_lax:
        return  # nbval not installed, or the caller chose its options
    if not _names_a_notebook(config.args):
        return
    opt.nbval = True
    opt.nbval_current_env = True
    if opt.nbval_sanitize_with is None:
        opt.nbval_sanitize_with = str(SANITIZE)
    opt.nbval_cell_timeout = CELL_TIMEOUT
