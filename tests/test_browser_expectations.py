"""What the browser test requires Run All to print (it stands in for the student edition's Run All
in CI), tied to the strings the kit and notebook 08 really print."""

import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "browser"))

import run_browser_test as B  # noqa: E402

from lmcore.course.checks import TODO  # noqa: E402


def test_learner_notebooks_must_say_not_attempted_and_08_its_reference_run():
    nb03, nb08 = REPO / "notebooks/03_sequence_to_loss.ipynb", REPO / "notebooks/08_training_run.ipynb"
    assert B.expected_text("learner", nb03, train=False) == [B.NOT_ATTEMPTED]
    assert B.expected_text("instructor", nb03, train=False) == []
    assert B.expected_text("learner", nb08, train=False) == [B.NOT_ATTEMPTED, B.REFERENCE_LINE]
    assert B.expected_text("instructor", nb08, train=True) == []


def test_the_expected_strings_are_what_the_kit_and_08_print():
    assert B.NOT_ATTEMPTED in TODO
    source = "".join(c.source for c in nbformat.read(REPO / "notebooks/08_training_run.ipynb", 4).cells)
    assert B.REFERENCE_LINE in source
