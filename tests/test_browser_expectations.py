"""What the browser test requires Run All to print (it stands in for the student edition's Run All
in CI), tied to the strings the kit and notebook 08 really print."""

import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "browser"))

import run_browser_test as B  # noqa: E402

from lmcore.course.build.student import strip_nbval_markers  # noqa: E402
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


def test_two_lanes_hold_every_pair_once_in_order_and_about_equal_in_size():
    sizes = {"00": 13, "01": 178, "04": 140, "07": 351, "08": 593, "09": 325, "10": 286}
    items = [("instructor", "00"), ("instructor", "01")] + [("learner", n) for n in sizes]
    first, second = B.split_lanes(items, lambda it: sizes[it[1]])
    assert sorted(first + second) == sorted(items)
    assert first == [it for it in items if it in first] and second == [it for it in items if it in second]
    load = [sum(sizes[n] for _, n in lane) for lane in (first, second)]
    assert abs(load[0] - load[1]) <= max(sizes.values())
    assert ("learner", "08") in first and ("learner", "07") in second  # the two largest apart


def test_a_second_lanes_items_round_trip_and_a_bad_one_is_refused():
    items = [("instructor", "00_start_here.ipynb"), ("learner", "08_training_run.ipynb")]
    assert B._decode(B._encode(items)) == items
    for bad in ("teacher:00.ipynb", "00.ipynb"):
        with pytest.raises(ValueError, match="--items"):
            B._decode(bad)


def test_every_widget_cell_is_the_same_in_both_editions(tmp_path):
    # CI moves the widgets in the learner edition only (the instructor edition runs 00 and 01);
    # the same code, but for nbval's marker lines, which the learner edition drops
    def widget_cells(path):
        nb = nbformat.read(path, as_version=4)
        code = [strip_nbval_markers("".join(c.source)) for c in nb.cells if c.cell_type == "code"]
        return [src for src in code if B.WIDGET_CODE.search(src)]

    learner = B.learner_workspace(tmp_path, REPO / "notebooks")
    for path in B.widget_notebooks(REPO / "notebooks"):
        assert widget_cells(path), path.name
        assert widget_cells(learner / path.name) == widget_cells(path), path.name


def test_the_site_test_names_each_page_by_its_edition_and_knows_every_edition():
    import site_test as S

    base = "http://127.0.0.1:8000/"
    assert S._page(base, base + "index.html") == ("", "index.html")
    assert S._page(base, base + "zh/03_x.html") == ("zh/", "03_x.html")
    assert S._page(base, base + "zh/") == ("zh/", "index.html")
    assert S._page(base, base + "_static/x.html") == ("", "_static/x.html")
    for prefix, folder in S.EDITIONS.items():  # each edition the site test knows, the site builds
        assert prefix in S.SEARCH and (REPO / folder).is_dir()
