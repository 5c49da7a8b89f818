"""What a named path asks for: a notebook runs under nbval, a named test runs even if slow.

``pytest tests/`` is the fast unit suite (pyproject's addopts: no nbval, ``-m "not slow"``).
- When an argument is a notebook or the notebooks folder, nbval is turned on:
  ``pytest notebooks/05_*.ipynb`` checks that notebook's outputs.
- Whenever nbval runs (turned on here, or by ``--nbval``/``--nbval-lax``, as the Makefile's
  ``NBVAL`` does), it gets the project's options, defined here only: the current environment's
  kernel, ``notebooks/sanitize.cfg`` and ``CELL_TIMEOUT``; an option the caller set is kept.
- When an argument names a test (``path::test``), the default ``-m "not slow"`` is dropped, so
  ``pytest tests/test_train.py::test_x`` runs ``test_x`` even if it is marked slow.
- No notebook cell passes without being checked. nbval interrupts a cell that outlives the
  timeout; a cell that catches the KeyboardInterrupt (08's ``train()`` ends cleanly, as it should
  for a learner's Ctrl-C) would pass, and nbval marks every later cell of that notebook as an
  expected failure, so the run would end green with nothing after it compared. Here the timed-out
  cell fails, naming its index and the timeout, and every later cell of its notebook fails as
  "not checked"; a cell nbval skips (``NBVAL_SKIP``) fails too.
- Under pytest-xdist (``make test``'s ``-n``), every kernel a worker starts gets one thread
  (``OMP_NUM_THREADS=1`` unless set): kernels running side by side with torch's default threads
  spin-wait on each other and take three times as long.
- Under nbval, ``LMCORE_USE_REFERENCE_RUN`` is removed from the environment: nbval verifies the
  real training path of notebook 08, never the committed run that the student-edition and
  browser runs may load in its place.
"""

import os
from pathlib import Path

import pytest

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


def _parallel(config) -> bool:
    """True in a pytest-xdist run with workers (in the controller and in each worker)."""
    return hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None) not in (None, 0)


def pytest_configure(config):
    opt = config.option
    if _parallel(config):
        # Each worker runs its own notebook kernels (nbval, the student edition): with torch's
        # default threads each, two kernels on two cores spin-wait on each other (08's training
        # cell took 303 s instead of about 100). One thread each, unless the caller set it.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    if opt.markexpr == DEFAULT_MARKEXPR and any("::" in arg for arg in config.args):
        opt.markexpr = ""
    if getattr(opt, "nbval", None) is None:
        return  # nbval not installed
    if not (opt.nbval or opt.nbval_lax):
        if not _names_a_notebook(config.args):
            return
        opt.nbval = True
    _project_nbval_options(opt)
    from lmcore.course.training.reference import REFERENCE_ENV

    if os.environ.pop(REFERENCE_ENV, None) is not None:
        print(f"nbval: {REFERENCE_ENV} ignored (nbval checks notebook 08's own training)")


def _project_nbval_options(opt) -> None:
    """The one place of the project's nbval options; where the caller gave one, theirs stays."""
    if opt.nbval_kernel_name is None:  # a kernel the caller named stays (current env would win)
        opt.nbval_current_env = True
    if opt.nbval_sanitize_with is None:
        opt.nbval_sanitize_with = str(SANITIZE)
    if opt.nbval_cell_timeout == NBVAL_DEFAULT_TIMEOUT:
        opt.nbval_cell_timeout = CELL_TIMEOUT


def _nbval_cell(item) -> bool:
    return hasattr(getattr(item, "parent", None), "timed_out") and hasattr(item, "cell_num")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if _nbval_cell(item):
        item._lmcore_late = item.parent.timed_out  # an earlier cell of this notebook timed out
    yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """A notebook cell that timed out, ran after one that did, or was skipped fails the run."""
    outcome = yield
    if not _nbval_cell(item):
        return
    report = outcome.get_result()
    why = None
    if call.when == "call" and getattr(item, "_lmcore_late", False):
        why = "not checked: an earlier cell of this notebook timed out (see the first failure above)"
    elif call.when == "call" and item.parent.timed_out:
        timeout = item.config.option.nbval_cell_timeout
        why = (
            f"cell {item.cell_num} timed out after {float(timeout):g} s: nbval interrupted the kernel "
            "(a cell that catches the KeyboardInterrupt would pass), so this cell's outputs and "
            "every later cell's go unchecked. On a slow machine, raise --nbval-cell-timeout"
        )
    elif report.skipped and call.when in ("setup", "call"):
        why = f"cell {item.cell_num} was skipped (NBVAL_SKIP): every cell must run and be checked"
    if why is not None:
        report.outcome, report.longrepr = "failed", why
        if hasattr(report, "wasxfail"):
            del report.wasxfail
