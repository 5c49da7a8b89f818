"""The student edition: solutions stubbed, nothing of them left, and Run All reaches the end."""

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


def _solution_lines(nb):
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
        assert _solution_lines(nbformat.read(path, as_version=4)), f"{path.name} has no exercise"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_student_edition_has_no_solution_and_runs_to_the_end(path, student_dir):
    source = nbformat.read(path, as_version=4)
    student = nbformat.read(student_dir / path.name, as_version=4)
    text = "\n".join(c.source for c in student.cells if c.cell_type == "code")
    assert BEGIN not in text and END not in text
    leaked = [line for line in _solution_lines(source) if re.search(re.escape(line), text)]
    assert not leaked, f"solution code left in the student edition: {leaked[:3]}"
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    results = run_cells(student, path.parent, timeout=600)
    errors = [(r["index"], r["error"]) for r in results if r["error"] and not r["expected"]]
    assert not errors, f"the student edition stops with an error: {errors[:2]}"
    assert "not attempted yet" in "".join(r["text"] for r in results)


def test_run_cells_reports_errors_and_output(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("print('hi')"), nbformat.v4.new_code_cell("1 / 0")]
    )
    first, second = run_cells(nb, tmp_path, timeout=60)
    assert first["text"] == "hi\n" and first["error"] is None
    assert second["error"].startswith("ZeroDivisionError")
