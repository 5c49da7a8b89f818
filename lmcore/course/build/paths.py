"""Where the course lives: in a clone, the repository (``notebooks/``, ``figures/``, ``README.md``);
from a wheel (``pip install "lmcore[course]"``, no clone), the copy the wheel installed under
``<prefix>/share/lmcore`` (pyproject's ``data-files``). The learner's workspace defaults to
``workspace/`` in the repository in a clone, and to ``workspace/`` in the current folder
otherwise. Standard library only, so ``lmcore-course doctor`` can name these before it knows
whether the notebook stack is installed.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from pathlib import Path

__all__ = ["REPO", "IN_CLONE", "DEFAULT_WORKSPACE", "LAB_STATE", "installed_course", "course_root"]

REPO = Path(__file__).resolve().parents[3]
IN_CLONE = (REPO / "notebooks").is_dir() and (REPO / "pyproject.toml").is_file()
DEFAULT_WORKSPACE = REPO / "workspace" if IN_CLONE else Path("workspace")
LAB_STATE = REPO / ".lab" if IN_CLONE else Path(".lmcore-lab")  # JupyterLab's settings, per edition


def installed_course() -> Path | None:
    """``share/lmcore`` under the data path of this interpreter's install scheme (a venv's, the
    system's, or the user's for ``pip install --user``) holding the notebooks; None if none does."""
    schemes = [sysconfig.get_path("data"), sys.prefix]
    user = f"{os.name}_user" if os.name != "posix" or sys.platform != "darwin" else "osx_framework_user"
    if user in sysconfig.get_scheme_names():
        schemes.append(sysconfig.get_path("data", user))
    schemes.append(site.getuserbase())
    for base in schemes:
        folder = Path(base) / "share" / "lmcore"
        if any((folder / "notebooks").glob("*.ipynb")):
            return folder
    return None


def course_root() -> Path:
    """The folder holding the course's ``notebooks/``, ``figures/`` and ``README.md``."""
    if IN_CLONE:
        return REPO
    folder = installed_course()
    if folder is None:
        raise FileNotFoundError(
            "the course's notebooks are not installed with this lmcore: install the course "
            '(pip install "lmcore[course]") or work in a clone of the repository (pip install -e .)'
        )
    return folder
