"""``make student`` and ``nbgrader generate_assignment`` remove the same things."""

import nbformat
import pytest

pytest.importorskip("nbgrader", reason="the teach extra is not installed (make test-teach)")

from _submissions import NOTEBOOKS, release  # noqa: E402

from lmcore.course.build.student import student_notebook  # noqa: E402

NAMES = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    return course, release(course, NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_release_and_student_edition_agree(released, name):
    course, folder = released
    source = nbformat.read(course / "source" / "lmcore" / f"{name}.ipynb", as_version=4)
    student = student_notebook(source)
    nbgrader = nbformat.read(folder / f"{name}.ipynb", as_version=4)
    assert [c.cell_type for c in nbgrader.cells] == [c.cell_type for c in student.cells]
    for i, (a, b) in enumerate(zip(nbgrader.cells, student.cells)):
        assert a.source == b.source, f"{name}, cell {i}: nbgrader and make student differ"
        assert "# NBVAL_" not in a.source, f"{name}, cell {i}: nbval's marker in the release"
        assert not a.get("outputs") and not b.get("outputs")
        assert a.metadata["nbgrader"]["grade_id"] == b.metadata["nbgrader"]["grade_id"]
        if a.metadata["nbgrader"]["locked"]:
            assert a.metadata.get("editable") is False and a.metadata.get("deletable") is False
