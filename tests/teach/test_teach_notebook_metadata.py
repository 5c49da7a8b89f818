"""The committed notebooks carry nbgrader's metadata, exactly as the stamping tool derives it.

If this fails, stamp them: ``.venv/bin/python -m lmcore.course.build.nbgrader_meta notebooks/*.ipynb``
(then re-run nbval on the notebooks the tool split: it says "stamped").
"""

import copy
from pathlib import Path

import nbformat
import pytest

from lmcore.course.build.nbgrader_meta import exercises, stamp_notebook

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
STAMP = ".venv/bin/python -m lmcore.course.build.nbgrader_meta notebooks/*.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_has_nbgrader_metadata(path):
    nb = nbformat.read(path, as_version=4)
    missing = [i for i, c in enumerate(nb.cells) if "nbgrader" not in c.metadata]
    assert not missing, f"{path.name}: cells {missing[:5]} have no nbgrader metadata; run {STAMP}"
    meta = [c.metadata["nbgrader"] for c in nb.cells]
    ids = [m["grade_id"] for m in meta]
    assert len(ids) == len(set(ids)), f"{path.name}: grade_ids not unique"
    assert all(m["schema_version"] == 3 for m in meta)
    tests = [m for m in meta if m["grade"]]
    assert tests and all(m.get("points", 0) > 0 and m["locked"] and not m["solution"] for m in tests)
    for ex in exercises(nb):
        fn = ex["function"]
        assert meta[ex["solution"]] == {
            "grade": False,
            "grade_id": fn,
            "locked": False,
            "schema_version": 3,
            "solution": True,
        }
        assert any(meta[i]["grade"] for i in ex["tests"]), f"{path.name}: {fn} has no graded test cell"
    assert not stamp_notebook(copy.deepcopy(nb)), f"{path.name}: metadata is stale; run {STAMP}"
