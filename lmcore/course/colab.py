"""Open in Colab: the first code cell of every notebook, and the links the README gives.

The cell must run before lmcore exists on Colab, so it is self-contained (standard library
only): on Colab (``google.colab`` imported) it clones the repository, installs it with
``pip install -e`` (keeping Colab's own torch, NumPy, matplotlib and ipywidgets), puts it on
``sys.path`` and moves into ``notebooks/``; anywhere else it does nothing and prints nothing.
:func:`insert_colab_cell` puts it first in a notebook (once; it replaces an older version), its
code folded (``source_hidden``: JupyterLab shows one collapsed line in its place, so it does not
fill the first screen of a learner who is not on Colab).

The repository's address is :data:`REPO_URL`, the one place to set it (the notebooks' Colab cell,
the README's links and the site's buttons follow it); while it is still the placeholder,
``python -m lmcore.course.colab`` says so and exits 1 (:func:`placeholder_warning`).
"""

from __future__ import annotations

import re

import nbformat

__all__ = [
    "REPO_URL",
    "PLACEHOLDER_URL",
    "COLAB_MARK",
    "COLAB_METADATA",
    "colab_cell_source",
    "colab_url",
    "insert_colab_cell",
    "placeholder_warning",
    "main",
]

# The repository's public address: the one place to change when the course moves.
PLACEHOLDER_URL = "https://github.com/your-user/lmcore"
REPO_URL = PLACEHOLDER_URL
COLAB_METADATA = {"jupyter": {"source_hidden": True}}  # folded in JupyterLab: one line on screen
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


def colab_url(notebook: str, url: str = REPO_URL, branch: str = "main", folder: str = "notebooks") -> str:
    """The "Open in Colab" address of ``<folder>/<notebook>`` in the GitHub repository ``url``
    (``folder``: ``notebooks``, or ``zh/notebooks`` for the Chinese edition)."""
    if not isinstance(url, str) or not url.startswith("https://github.com/"):
        raise ValueError(f"url must be a https://github.com/ address, got {url!r}")
    if not isinstance(folder, str) or not re.fullmatch(r"[a-z]+(/[a-z]+)*", folder):
        raise ValueError(f"folder must be a folder of the repository like 'zh/notebooks', got {folder!r}")
    repo = url.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{repo}/blob/{branch}/{folder}/{notebook}"


def insert_colab_cell(nb, url: str = REPO_URL) -> bool:
    """Make the Colab cell the first code cell of ``nb`` (in place). True if ``nb`` changed."""
    source = colab_cell_source(url)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith(COLAB_MARK):
            hidden = cell.metadata.get("jupyter", {}).get("source_hidden") is True
            if cell.source == source and hidden:
                return False
            cell.source = source
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
            return True
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    cell = nbformat.v4.new_code_cell(source)
    cell.id = "colab-install"
    cell.metadata.update({k: dict(v) for k, v in COLAB_METADATA.items()})
    nb.cells.insert(first, cell)
    return True


def placeholder_warning(url: str = REPO_URL) -> str | None:
    """A line saying the Colab links still point at the placeholder repository, or None."""
    if url.rstrip("/") != PLACEHOLDER_URL:
        return None
    return (
        f"the Colab links and the Colab cell point at the placeholder {PLACEHOLDER_URL}: set REPO_URL "
        "in lmcore/course/colab.py to the course's public repository, then run "
        "python -m lmcore.course.colab --apply notebooks/*.ipynb (the README's links too)"
    )


def main(argv=None) -> int:
    """``python -m lmcore.course.colab [--apply NOTEBOOK ...]``: say whether the address is still
    the placeholder (exit 1 if so); with ``--apply``, write the Colab cell into the notebooks."""
    import argparse

    parser = argparse.ArgumentParser(description="The Colab cell and the repository address it opens.")
    parser.add_argument("--apply", nargs="+", default=[], metavar="NOTEBOOK")
    args = parser.parse_args(argv)
    for path in args.apply:
        nb = nbformat.read(path, as_version=4)
        if insert_colab_cell(nb):
            nbformat.write(nb, path)
            print(f"updated the Colab cell of {path}")
    warning = placeholder_warning()
    print(warning or f"the Colab links open {REPO_URL}")
    return 1 if warning else 0


if __name__ == "__main__":
    raise SystemExit(main())
