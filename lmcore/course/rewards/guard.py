"""Notebook 10's exercises: while a check runs the learner's function, the course's reference
functions named for that exercise raise instead of answering, and warnings are silenced (a right
answer never writes to stderr, which nbgrader would score 0)."""

from __future__ import annotations

import functools
import warnings

import numpy as np

__all__ = ["REFUSED", "refuse", "own_work"]

REFUSED: set[str] = set()  # reference names a learner's exercise call may not use


def refuse(name: str) -> None:
    """Raise if ``name`` is refused (inside a learner's call during a check)."""
    if name in REFUSED:
        raise RuntimeError(f"this exercise asks for your own code, not a call to lmcore's {name}()")


def own_work(fn, refused):
    """``fn`` wrapped so that, during its call, the references named in ``refused`` raise and
    warnings go nowhere (a right answer never writes to stderr)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        before = set(REFUSED)
        REFUSED.update(refused)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                return fn(*args, **kwargs)
        finally:
            REFUSED.clear()
            REFUSED.update(before)

    return call
