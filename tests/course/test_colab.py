"""The Colab cell: first in every notebook, folded in JupyterLab, and one documented place for
the repository address, with a check that says when it is still the placeholder (issue 40)."""

from pathlib import Path

import nbformat
import pytest

from lmcore.course import colab
from lmcore.course.build.student import student_notebook

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_colab_cell_is_first_and_folded_in_both_editions(path):
    nb = nbformat.read(path, as_version=4)
    for edition in (nb, student_notebook(nb, notes=True)):
        first = next(c for c in edition.cells if c.cell_type == "code")
        assert first.source == colab.colab_cell_source()
        assert first.metadata["jupyter"]["source_hidden"] is True


def test_insert_folds_an_old_cell_and_is_idempotent():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(colab.COLAB_MARK + " (old)")])
    assert colab.insert_colab_cell(nb) and nb.cells[0].metadata["jupyter"]["source_hidden"] is True
    assert not colab.insert_colab_cell(nb)
    fresh = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t")])
    assert colab.insert_colab_cell(fresh) and fresh.cells[1].metadata["jupyter"]["source_hidden"] is True


def test_the_placeholder_is_said(capsys):
    assert "placeholder" in colab.placeholder_warning(colab.PLACEHOLDER_URL)
    assert colab.placeholder_warning("https://github.com/someone/lmcore") is None
    code = colab.main([])
    out = capsys.readouterr().out
    if colab.REPO_URL == colab.PLACEHOLDER_URL:
        assert code == 1 and "set REPO_URL in lmcore/course/colab.py" in out
    else:
        assert code == 0 and colab.REPO_URL in out


def test_the_readme_links_follow_the_address():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert colab.colab_url(path.name) in readme


@pytest.mark.parametrize("url", ["http://github.com/x/y", "github.com/x/y", 3])
def test_bad_addresses_are_refused(url):
    with pytest.raises(ValueError, match="url"):
        colab.colab_url("00_start_here.ipynb", url)
    with pytest.raises(ValueError, match="url"):
        colab.colab_cell_source(url)
