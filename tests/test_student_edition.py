"""The student edition: solutions stubbed, nothing of them left (Run All reaching the end of each
student notebook is tests/teach/test_teach_student_edition.py's, run by ``make test-teach``)."""

import re
from pathlib import Path

import nbformat
import pytest

from lmcore.course.build.nbtools import run_cells
from lmcore.course.build.student import BEGIN, END, STUB, strip_solutions
from lmcore.course.build.workspace import build_student_edition

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_strip_keeps_indentation_and_code_around():
    src = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\nprint(2)"
    assert strip_solutions(src) == f"def f(x):\n    y = 1\n    {STUB}\nprint(2)"


@pytest.mark.parametrize(
    "bad",
    [
        f"{BEGIN}\nx = 1\n{END}",  # top level: would stop Run All
        f"def f():\n    {BEGIN}\n    return 1",  # no END
        f"def f():\n    return 1\n    {END}",  # no BEGIN
    ],
)
def test_strip_rejects_bad_markers(bad):
    with pytest.raises(ValueError):
        strip_solutions(bad)


def solution_lines(nb):
    lines = []
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            if BEGIN in line:
                inside = True
            elif END in line:
                inside = False
            elif inside and len(line.strip()) > 12:
                lines.append(line.strip())
    return lines


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    build_student_edition(NOTEBOOKS[0].parent, out)
    return out


def test_every_notebook_has_exercises():
    assert NOTEBOOKS, "no notebooks found"
    for path in NOTEBOOKS:
        assert solution_lines(nbformat.read(path, as_version=4)), f"{path.name} has no exercise"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_student_edition_has_no_solution_and_no_output(path, student_dir):
    """Run All of each student notebook (it reaches the end) is tests/teach's, run by make test-teach."""
    source = nbformat.read(path, as_version=4)
    student = nbformat.read(student_dir / path.name, as_version=4)
    text = "\n".join(c.source for c in student.cells if c.cell_type == "code")
    assert BEGIN not in text and END not in text
    leaked = [line for line in solution_lines(source) if re.search(re.escape(line), text)]
    assert not leaked, f"solution code left in the student edition: {leaked[:3]}"
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")


def test_run_cells_reports_errors_and_output(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("print('hi')"), nbformat.v4.new_code_cell("1 / 0")]
    )
    first, second = run_cells(nb, tmp_path, timeout=60)
    assert first["text"] == "hi\n" and first["error"] is None
    assert second["error"].startswith("ZeroDivisionError")


def test_the_learner_edition_shows_no_nbval_marker():
    """``# NBVAL_IGNORE_OUTPUT`` and its kin are for nbval's run of the instructor edition; the
    learner's cells carry none of them, and nothing else of a cell is lost (issue 40)."""
    from pathlib import Path

    import nbformat

    from lmcore.course.build.student import student_notebook

    dropped = 0
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        out = student_notebook(nb, notes=True)
        for before, after in zip(nb.cells, out.cells):
            assert "NBVAL_" not in after.source, (path.name, after.source[:80])
            if before.cell_type == "code" and "BEGIN SOLUTION" not in before.source:
                kept = [x for x in before.source.splitlines() if not x.strip().startswith("# NBVAL_")]
                assert after.source.splitlines() == kept, (path.name, before.source[:80])
                dropped += len(before.source.splitlines()) - len(kept)
    assert dropped > 50  # the notebooks do carry markers: the test saw them go


def test_strip_nbval_markers_keeps_every_other_line():
    from lmcore.course.build.student import strip_nbval_markers

    src = "# NBVAL_IGNORE_OUTPUT\nx = 1  # NBVAL_SKIP stays: not a marker line\n  # NBVAL_SKIP\nprint(x)\n# NBVAL_CHECK_OUTPUT"
    assert strip_nbval_markers(src) == "x = 1  # NBVAL_SKIP stays: not a marker line\nprint(x)\n"
    assert strip_nbval_markers("print(1)") == "print(1)"
