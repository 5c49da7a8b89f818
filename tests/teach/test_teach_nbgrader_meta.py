"""The nbgrader metadata stamp: derived from the notebooks' structure, stable, idempotent."""

import copy
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from lmcore.course.build.nbgrader_meta import exercises, graded_cells, stamp_file, stamp_notebook
from lmcore.course.build.nbtools import execute_notebook
from lmcore.course.build.student import student_notebook

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
SOLUTION = 'def double(x):\n    "Twice x."\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION'


def _nb(*cells, points=None):
    nb = new_notebook(cells=list(cells))
    if points:
        nb.metadata["lmcore"] = {"points": points}
    return nbformat.from_dict(json.loads(json.dumps(nb)))


def _course_nb(**kw):
    return _nb(
        new_markdown_cell("# intro"),
        new_code_cell("from lmcore.course.start.lesson import check_surprise"),
        new_code_cell(SOLUTION),
        new_code_cell("check_double(double)"),
        new_code_cell("print('after')"),
        **kw,
    )


def test_solution_test_and_read_only_cells_get_nbgraders_metadata():
    nb = _course_nb(points={"double": 3})
    assert stamp_notebook(nb)
    meta = [c.metadata["nbgrader"] for c in nb.cells]
    assert meta[2] == {
        "grade": False,
        "grade_id": "double",
        "locked": False,
        "schema_version": 3,
        "solution": True,
    }
    assert meta[3] == {
        "grade": True,
        "grade_id": "test_double",
        "locked": True,
        "points": 3,
        "schema_version": 3,
        "solution": False,
    }
    for i in (0, 1, 4):
        assert meta[i] == {
            "grade": False,
            "grade_id": f"cell-{nb.cells[i].id}",
            "locked": True,
            "schema_version": 3,
            "solution": False,
        }
    assert all("editable" not in c.metadata and "deletable" not in c.metadata for c in nb.cells)


def test_default_points_and_a_second_check_cell():
    nb = _nb(
        new_code_cell(SOLUTION),
        new_code_cell("check_double(double)"),
        new_code_cell("x = 1"),
        new_code_cell("other.check_double_again(double, 2)"),
    )
    stamp_notebook(nb)
    assert [(g["grade_id"], g.get("points")) for g in graded_cells(nb)] == [
        ("double", None),
        ("test_double", 1),
        ("test_double_2", 1),
    ]


def test_stamping_is_idempotent_and_ids_do_not_depend_on_position():
    nb = _course_nb()
    stamp_notebook(nb)
    again = copy.deepcopy(nb)
    assert not stamp_notebook(again) and again == nb
    nb.cells.insert(0, new_markdown_cell("a new first cell"))
    stamp_notebook(nb)
    assert [g["grade_id"] for g in graded_cells(nb)] == ["double", "test_double"]


def test_a_cell_with_solution_and_check_is_split_and_keeps_the_outputs():
    cell = new_code_cell(
        SOLUTION + "\n\n\ncheck_double(double)",
        execution_count=4,
        outputs=[nbformat.v4.new_output("stream", text="✓ pass double\n")],
    )
    cell.id = "abc123"
    nb = _nb(cell)
    stamp_notebook(nb)
    sol, test = nb.cells
    assert sol.source == SOLUTION and sol.outputs == [] and sol.id == "abc123"
    assert sol.execution_count == 4  # still "executed top to bottom" until re-executed
    assert test.source == "check_double(double)" and test.id == "abc123-check"
    assert test.outputs[0]["text"] == "✓ pass double\n" and test.execution_count == 4
    assert test.metadata["nbgrader"]["grade_id"] == "test_double"
    assert not stamp_notebook(nb)


@pytest.mark.parametrize(
    "cells, match",
    [
        ([SOLUTION, "print(double(2))"], "'double' has no check cell"),
        (["### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "check_x(x)"], "not inside a function"),
        ([SOLUTION, "check_double(double)", SOLUTION, "check_double(double)"], "same function"),
        (["s = 'the ### BEGIN SOLUTION marker'"], "mentions a solution marker"),
    ],
)
def test_bad_structure_is_refused_with_the_reason(cells, match):
    with pytest.raises(ValueError, match=match):
        stamp_notebook(_nb(*[new_code_cell(s) for s in cells]))


def test_make_notebooks_and_make_student_keep_the_metadata(tmp_path):
    nb = _nb(
        new_code_cell(SOLUTION),
        new_code_cell("def check_double(f):\n    return f(2) == 4"),
        new_code_cell("check_double(double)"),
    )
    stamp_notebook(nb)
    before = [c.metadata["nbgrader"] for c in nb.cells]
    nbformat.write(nb, tmp_path / "t.ipynb")
    executed = execute_notebook(tmp_path / "t.ipynb", timeout=120)
    assert [c.metadata["nbgrader"] for c in executed.cells] == before
    assert executed.cells[2].outputs[0]["data"]["text/plain"] == "True"
    assert not stamp_file(tmp_path / "t.ipynb")
    assert [c.metadata["nbgrader"] for c in student_notebook(executed).cells] == before


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_course_notebook_can_be_stamped(path, tmp_path):
    shutil.copy(path, tmp_path / path.name)
    stamp_file(tmp_path / path.name)
    nb = nbformat.read(tmp_path / path.name, as_version=4)
    found = exercises(nb)
    assert found and all(e["tests"] for e in found)
    assert not stamp_file(tmp_path / path.name)
    ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells]
    assert len(ids) == len(set(ids)) == len(nb.cells)
