"""Grading the graders: generated submissions go through nbgrader's autograder (make grade).

Notebooks 00 and 01 (five exercises: surprise, stable_softmax, nll_from_logits, double_softmax_band,
fit_temperature) are stamped,
released with ``nbgrader generate_assignment`` and answered in seven ways (plus one unreadable file); every submission is
graded once by :func:`lmcore.course.build.grade.grade_submissions` with a 20 s limit per cell.
"""

import csv

import nbformat
import pytest

pytest.importorskip("nbgrader", reason="the teach extra is not installed (make test-teach)")

from _submissions import answer, edit_test_cell, reference_body, release  # noqa: E402

from lmcore.course.build.grade import grade_submissions  # noqa: E402

pytestmark = pytest.mark.slow

NAMES = ["00_start_here", "01_softmax_and_nll"]
EXERCISES = [
    "00_surprise",
    "01_stable_softmax",
    "01_nll_from_logits",
    "01_double_softmax_band",
    "01_fit_temperature",
]
TIMEOUT = 20


def _submissions(tmp):
    released = release(tmp / "release-course", NAMES, TIMEOUT)
    source = {
        n: nbformat.read(tmp / "release-course" / "source" / "lmcore" / f"{n}.ipynb", as_version=4)
        for n in NAMES
    }
    ref = {
        (n, ex): reference_body(source[n], ex)
        for n, ex in [
            (NAMES[0], "surprise"),
            (NAMES[1], "stable_softmax"),
            (NAMES[1], "nll_from_logits"),
            (NAMES[1], "double_softmax_band"),
            (NAMES[1], "fit_temperature"),
        ]
    }

    def submission(student, changes=()):
        """Every exercise answered with the reference, then ``changes`` applied: (nb, fn)->edit."""
        out = tmp / "submissions" / student
        out.mkdir(parents=True)
        for name in NAMES:
            nb = nbformat.read(released / f"{name}.ipynb", as_version=4)
            for (n, fn), body in ref.items():
                if n == name and (n, fn) not in dict(changes):
                    answer(nb, fn, body)
            for (n, fn), edit in changes:
                if n == name:
                    edit(nb, fn)
            nbformat.write(nb, out / f"{name}.ipynb")

    submission("reference")
    (tmp / "submissions" / "untouched").mkdir(parents=True)
    for name in NAMES:
        (tmp / "submissions" / "untouched" / f"{name}.ipynb").write_bytes(
            (released / f"{name}.ipynb").read_bytes()
        )
    naive = ["    e = np.exp(z)", "    return e / e.sum()"]
    submission("one_wrong", [((NAMES[1], "stable_softmax"), lambda nb, fn: answer(nb, fn, naive))])
    submission(
        "endless_loop",
        [((NAMES[1], "nll_from_logits"), lambda nb, fn: answer(nb, fn, ["    while True:", "        pass"]))],
    )
    submission(
        "syntax_error",
        [
            (
                (NAMES[1], "stable_softmax"),
                lambda nb, fn: answer(nb, fn, ["    e = np.exp(z - np.max(z)", "    return e / e.sum()"]),
            )
        ],
    )

    def fake_surprise(nb, fn):
        answer(
            nb,
            fn,
            ["    return 0.0"],
            after="import lmcore.course.start.lesson as _s\n"
            "_s.check_surprise = lambda fn: print('✓ pass surprise') or True",
        )

    def fake_softmax(nb, fn):
        answer(
            nb,
            fn,
            ["    return z"],
            after="def check_stable_softmax(fn):\n    print('✓ pass stable softmax')\n    return True",
        )

    def edited_test(nb, fn):
        answer(nb, fn, ["    return 0.0"])
        edit_test_cell(nb, "test_nll_from_logits", "print('✓ pass NLL from logits')")

    def deleted_test(nb, fn):
        answer(nb, fn, naive)
        nb.cells = [c for c in nb.cells if c.metadata["nbgrader"]["grade_id"] != f"test_{fn}"]

    submission("deleted_test", [((NAMES[1], "stable_softmax"), deleted_test)])
    submission(
        "cheater",
        [
            ((NAMES[0], "surprise"), fake_surprise),
            ((NAMES[1], "stable_softmax"), fake_softmax),
            ((NAMES[1], "nll_from_logits"), edited_test),
        ],
    )
    (tmp / "submissions" / "broken").mkdir()
    (tmp / "submissions" / "broken" / f"{NAMES[0]}.ipynb").write_text('{"cells": [')  # cut off; no 01
    return tmp / "submissions"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grading")
    lines = []
    report = grade_submissions(_submissions(tmp), tmp / "grades", timeout=TIMEOUT, log=lines.append)
    report["lines"] = lines
    with open(tmp / "grades" / "grades.csv") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    feedback = {p.stem: p.read_text() for p in (tmp / "grades" / "feedback").glob("*.md")}
    return report, rows, feedback


def _scores(rows, student):
    return [float(rows[student][c]) for c in EXERCISES] + [float(rows[student]["total"])]


def test_grades_csv_has_one_row_per_student_and_one_column_per_exercise(graded):
    report, rows, feedback = graded
    assert report["columns"] == ["student"] + EXERCISES + ["total"]
    assert (
        sorted(rows)
        == sorted(feedback)
        == sorted(
            [
                "reference",
                "untouched",
                "one_wrong",
                "endless_loop",
                "syntax_error",
                "deleted_test",
                "cheater",
                "broken",
            ]
        )
    )
    assert report["max"] == 5


def test_reference_solutions_score_full_marks(graded):
    _, rows, feedback = graded
    assert _scores(rows, "reference") == [1, 1, 1, 1, 1, 5]
    assert feedback["reference"].count("✓ pass") == 5


def test_untouched_student_edition_scores_zero_everywhere(graded):
    _, rows, feedback = graded
    assert _scores(rows, "untouched") == [0, 0, 0, 0, 0, 0]
    assert feedback["untouched"].count("not attempted yet") == 5


def test_one_wrong_answer_loses_exactly_that_exercise(graded):
    _, rows, feedback = graded
    assert _scores(rows, "one_wrong") == [1, 0, 1, 1, 1, 4]
    assert "✗ fail stable softmax" in feedback["one_wrong"] and "Hint:" in feedback["one_wrong"]


def test_an_endless_loop_times_out_and_loses_only_that_exercise(graded):
    report, rows, feedback = graded
    assert _scores(rows, "endless_loop") == [1, 1, 0, 1, 1, 4]
    assert f"stopped after the {TIMEOUT} s limit per cell" in feedback["endless_loop"]
    assert report["seconds"]["endless_loop"] >= TIMEOUT


def test_a_syntax_error_loses_only_what_depends_on_it(graded):
    _, rows, feedback = graded
    assert _scores(rows, "syntax_error") == [1, 0, 1, 1, 1, 4]
    assert "NameError" in feedback["syntax_error"]


def test_redefined_checks_and_edited_or_deleted_test_cells_are_graded_by_the_instructors_cells(graded):
    report, rows, feedback = graded
    assert _scores(rows, "deleted_test") == [1, 0, 1, 1, 1, 4]
    assert "✗ fail stable softmax" in feedback["deleted_test"]
    assert _scores(rows, "cheater") == [0, 0, 0, 1, 1, 2]  # the band and fit_temperature answered honestly
    text = feedback["cheater"]
    assert "✗ fail surprise" in text and "✗ fail stable softmax" in text and "✗ fail NLL" in text
    notes = " ".join(report["notes"]["cheater"])
    assert "test_nll_from_logits was edited" in notes and "def check_stable_softmax" in notes
    assert "_s.check_surprise =" in notes
    assert not report["notes"]["reference"]


def test_an_unreadable_or_missing_notebook_scores_zero_and_grading_goes_on(graded):
    report, rows, feedback = graded
    assert _scores(rows, "broken") == [0, 0, 0, 0, 0, 0]
    assert "not a readable notebook" in feedback["broken"]


def test_the_class_report_counts_pass_rates_reasons_timeouts_and_broken_files(graded):
    report, rows, _ = graded
    out = report["course"].parent
    md = (out / "class.md").read_text()
    assert md.startswith("# Class report: 8 students, 5 exercises")
    table = {r.split(" | ")[0].lstrip("| "): r for r in md.splitlines() if r.startswith("| 0")}
    # stable softmax: reference and endless_loop pass; the naive softmax fails twice (one_wrong,
    # deleted_test) on the same input: the most frequent reason, with its hint's misconception
    assert table["01_stable_softmax"].startswith(
        "| 01_stable_softmax | 2 / 8 (25%) | 1 | 2× on input z=[1000"
    )
    nudges = (
        "(hint: Try z = [1000, 999]: does np.exp overflow?",
        "(hint: on z=[1000, 999, 998] your result is not finite",
    )
    assert any(
        n in table["01_stable_softmax"] for n in nudges
    )  # the hint's question: the nudge or the diagnosis
    assert "1× NameError" in table["01_stable_softmax"]  # the syntax error
    assert table["00_surprise"].startswith("| 00_surprise | 5 / 8 (62%) | 1 |")
    trouble = md.split("## Timeouts and broken or missing files")[1].split("## Students x exercises")[0]
    assert "**endless_loop**: 01_nll_from_logits: stopped after the 20 s limit" in trouble
    assert "**broken**:" in trouble and "not a readable notebook" in trouble
    assert "**reference**" not in trouble and "**one_wrong**" not in trouble
    assert "| reference | ✓ | ✓ | ✓ | ✓ | ✓ | 5 |" in md and "| endless_loop | ✓ | ✓ | ⏱ | ✓ | ✓ | 4 |" in md
    assert "| broken | — | — | — | — | — | 0 |" in md and "| untouched | … | … | … | … | … | 0 |" in md
    assert (out / "class.png").read_bytes()[:4] == b"\x89PNG"


def test_grading_says_each_notebook_as_it_is_graded_with_its_time(graded):
    """An instructor watches it: a line per student and notebook with its seconds, then the
    student's total (issue 40; the bar goes to stderr)."""
    lines = graded[0]["lines"]
    assert any(line.startswith(f"  reference: {NAMES[1]} in ") and line.endswith(" s") for line in lines)
    at = lines.index(next(x for x in lines if x.startswith("graded reference in ")))
    assert [x.split(":")[1].split()[0] for x in lines[at - 2 : at]] == NAMES  # its two notebooks first
    assert not any("broken:" in x for x in lines)  # its one file was unreadable: nothing to run


def test_grading_kernels_do_not_warn_about_tcp(tmp_path, capfd):
    """ipykernel's "running over TCP without encryption" warning once filled 32 of 47 lines."""
    subs = tmp_path / "subs" / "one"
    subs.mkdir(parents=True)
    released = release(tmp_path / "release-course", NAMES[:1], TIMEOUT)
    nbformat.write(nbformat.read(released / f"{NAMES[0]}.ipynb", as_version=4), subs / f"{NAMES[0]}.ipynb")
    grade_submissions(tmp_path / "subs", tmp_path / "grades", timeout=TIMEOUT, log=lambda line: None)
    out, err = capfd.readouterr()
    assert "without encryption" not in out + err
    assert "grading" in err  # the progress bar
