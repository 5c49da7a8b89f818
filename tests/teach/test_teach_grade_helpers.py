"""The grader's own pieces that need no nbgrader: columns, feedback lines, notes, adopted metadata."""

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from lmcore.course.build.grade import _copy_submission, grade_submissions
from lmcore.course.build.grade_report import column as _column
from lmcore.course.build.grade_report import explain as _explain
from lmcore.course.build.grade_report import notes_for as _notes
from lmcore.course.build.nbgrader_meta import stamp_notebook

SOLUTION = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"


def _source(tmp_path):
    nb = new_notebook(
        cells=[new_code_cell("import x"), new_code_cell(SOLUTION), new_code_cell("check_double(double)")]
    )
    nb = nbformat.from_dict(nbformat.reads(nbformat.writes(nb), as_version=4))
    stamp_notebook(nb)
    nbformat.write(nb, tmp_path / "01_t.ipynb")
    return nb


def test_columns_are_notebook_number_and_function():
    assert _column("01_softmax_and_nll", "test_stable_softmax") == "01_stable_softmax"
    assert _column("extra", "test_f_2") == "extra_f_2"


@pytest.mark.parametrize(
    "outputs, expected",
    [
        (
            [
                new_output("stream", text="✗ fail f: on input (1): expected 2. Hint: h\n"),
                new_output("error", ename="NotPassed", evalue="f", traceback=[]),
            ],
            "✗ fail f: on input (1): expected 2. Hint: h",
        ),
        (
            [new_output("error", ename="CellTimeoutError", evalue="", traceback=[])],
            "stopped after the 9 s limit",
        ),
        (
            [new_output("error", ename="NameError", evalue="name 'f' is not defined", traceback=[])],
            "syntax error",
        ),
        ([new_output("stream", name="stderr", text="warning\n")], "stderr"),
    ],
)
def test_feedback_explains_each_outcome(outputs, expected):
    assert expected in _explain(new_code_cell("check_f(f)", outputs=outputs), 9)


def test_notes_flag_edited_locked_cells_and_redefined_checks(tmp_path):
    source = _source(tmp_path)
    sub = nbformat.from_dict(nbformat.reads(nbformat.writes(source), as_version=4))
    sub.cells[1].source += "\ncheck_double = lambda f: True"
    sub.cells[2].source = "print('✓ pass')"
    nbformat.write(sub, tmp_path / "sub.ipynb")
    notes = " ".join(_notes(tmp_path / "sub.ipynb", tmp_path / "01_t.ipynb"))
    assert "test_double was edited" in notes and "check_double =" in notes
    nbformat.write(source, tmp_path / "same.ipynb")
    assert _notes(tmp_path / "same.ipynb", tmp_path / "01_t.ipynb") == []


def test_a_submission_without_metadata_adopts_it_by_cell_id(tmp_path):
    source = _source(tmp_path)
    bare = nbformat.from_dict(nbformat.reads(nbformat.writes(source), as_version=4))
    for cell in bare.cells:
        del cell.metadata["nbgrader"]
    nbformat.write(bare, tmp_path / "bare.ipynb")
    _copy_submission(tmp_path / "bare.ipynb", tmp_path / "copied.ipynb", tmp_path / "01_t.ipynb")
    copied = nbformat.read(tmp_path / "copied.ipynb", as_version=4)
    assert [c.metadata["nbgrader"] for c in copied.cells] == [c.metadata["nbgrader"] for c in source.cells]


def test_empty_or_unknown_submissions_are_refused(tmp_path):
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    pytest.importorskip("nbgrader")
    with pytest.raises(ValueError, match="no .*<student>/<notebook>.ipynb"):
        grade_submissions(tmp_path / "subs", tmp_path / "out")
    (tmp_path / "subs" / "ann" / "99_nothing.ipynb").write_text("{}")
    with pytest.raises(ValueError, match="not in notebooks"):
        grade_submissions(tmp_path / "subs", tmp_path / "out")
