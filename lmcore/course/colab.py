"""Open in Colab: the first code cell of every notebook, and the links the README gives.

The cell must run before lmcore exists on Colab, so it is self-contained (standard library
only): on Colab (``google.colab`` imported) it clones the repository, installs it with
``pip install -e`` (keeping Colab's own torch, NumPy, matplotlib and ipywidgets), puts it on
``sys.path`` and moves into ``notebooks/``; anywhere else it does nothing and prints nothing.
:func:`insert_colab_cell` puts it first in a notebook (once; it replaces an older version).
"""

from __future__ import annotations

import nbformat

__all__ = ["REPO_URL", "COLAB_MARK", "colab_cell_source", "colab_url", "insert_colab_cell"]

# The repository's public address: the one place to change when the course moves.
REPO_URL = "https://github.com/your-user/lmcore"
COLAB_MARK = "# Colab only: install lmcore from its repository"

_CELL = """{mark} (elsewhere this cell does nothing).
import sys

if "google.colab" in sys.modules:
    import os
    import subprocess

    repo = "{url}"
    if not os.path.isdir("/content/lmcore"):
        subprocess.run(["git", "clone", "-q", "--depth", "1", repo, "/content/lmcore"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "/content/lmcore"], check=True)
    sys.path.insert(0, "/content/lmcore")
    os.chdir("/content/lmcore/notebooks")"""


def colab_cell_source(url: str = REPO_URL) -> str:
    """The source of the Colab install cell for the repository at ``url``."""
    if not isinstance(url, str) or not url.startswith("https://"):
        raise ValueError(f"url must be an https:// address of the repository, got {url!r}")
    return _CELL.format(mark=COLAB_MARK, url=url)


def colab_url(notebook: str, url: str = REPO_URL, branch: str = "main") -> str:
    """The "Open in Colab" address of ``notebooks/<notebook>`` in the GitHub repository ``url``."""
    if not url.startswith("https://github.com/"):
        raise ValueError(f"url must be a https://github.com/ address, got {url!r}")
    return f"https://colab.research.google.com/github/{url.removeprefix('https://github.com/')}/blob/{branch}/notebooks/{notebook}"


def insert_colab_cell(nb, url: str = REPO_URL) -> bool:
    """Make the Colab cell the first code cell of ``nb`` (in place). True if ``nb`` changed."""
    source = colab_cell_source(url)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith(COLAB_MARK):
            if cell.source == source:
                return False
            cell.source = source
            return True
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "colab-install"
    nb.cells.insert(first, cell)
    return True
