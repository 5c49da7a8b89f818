"""Where the course lives: the repository's root (``notebooks/``, ``figures/``) and the learner's
default workspace in it. No dependency beyond the standard library, so ``lmcore-course doctor``
can name the workspace before it knows whether the notebook stack is installed."""

from __future__ import annotations

from pathlib import Path

__all__ = ["REPO", "DEFAULT_WORKSPACE"]

REPO = Path(__file__).resolve().parents[3]
DEFAULT_WORKSPACE = REPO / "workspace"
