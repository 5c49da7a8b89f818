"""The class report on a hand-made class: statuses from points and feedback lines, failure reasons
counted, timeouts and broken files listed, the grid in markdown and as a PNG. (The same report on
a class graded by nbgrader: tests/teach/test_teach_grading_e2e.py.)"""

import struct

import pytest

from lmcore.course.build.class_report import class_summary, failure_reason, status_of, write_class_report

A, B = ("01_softmax_and_nll", "stable_softmax"), ("01_softmax_and_nll", "nll_from_logits")
NAN_LINE = (
    "✗ fail stable softmax: on input z=[1000, 999, 998]: got non-finite values (nan/inf). "
    "Hint: subtract the largest logit before np.exp."
)
SHAPE_LINE = "✗ fail stable softmax: on input z=[1, 2]: shape (1,) instead of (2,). Hint: subtract the largest logit before np.exp."
LINES = {
    "ann": {A: "✓ pass stable softmax: matches the reference on all 9 cases.", B: "✓ pass NLL: all 4."},
    "bob": {A: NAN_LINE, B: "✓ pass NLL: all 4."},
    "cy": {A: NAN_LINE, B: "stopped after the 20 s limit per cell (an endless loop?)"},
    "dee": {A: SHAPE_LINE, B: "… not attempted yet NLL: replace the stub, then re-run."},
    "eve": {A: "notebook not submitted", B: "notebook not submitted"},
    "fay": {
        A: "NameError: name 'stable_softmax' is not defined (the cell that defines it failed)",
        B: NAN_LINE,
    },
}
SCORES = {"ann": (1, 1), "bob": (0, 1), "cy": (0, 0), "dee": (0, 0), "eve": (0, 0), "fay": (0, 0)}
ROWS = [(s, {A: a, B: b}) for s, (a, b) in SCORES.items()]
MAXIMA = {A: 1, B: 1}


def test_status_of_reads_points_first_then_the_line():
    assert status_of(1, 1, NAN_LINE) == "pass"  # points decide a pass
    assert [status_of(0, 1, LINES[s][A]) for s in ("bob", "dee", "eve", "fay")] == [
        "fail",
        "fail",
        "missing",
        "error",
    ]
    assert status_of(0, 1, LINES["cy"][B]) == "timeout"
    assert status_of(0, 1, LINES["dee"][B]) == "todo"
    assert status_of(0, 1, "ran without error") == "error"


def test_failure_reason_keeps_what_differed_and_the_hints_misconception():
    assert failure_reason(NAN_LINE) == (
        "on input z=[1000, 999, 998]: got non-finite values (nan/inf) "
        "(hint: subtract the largest logit before np.exp)"
    )
    # several checks in one cell: the first failed one is the reason
    assert failure_reason("✓ pass a: fine. " + NAN_LINE).startswith("on input z=[1000")
    assert failure_reason("x" * 300, limit=20) == "x" * 19 + "…"


def test_class_summary_counts_pass_rates_reasons_and_trouble():
    s = class_summary([A, B], MAXIMA, ROWS, LINES)
    assert s["per_exercise"][A]["passed"] == 1 and s["per_exercise"][B]["passed"] == 2
    reasons = dict(s["per_exercise"][A]["reasons"])
    assert reasons[failure_reason(NAN_LINE)] == 2 and reasons[failure_reason(SHAPE_LINE)] == 1
    assert s["per_exercise"][A]["reasons"][0] == (failure_reason(NAN_LINE), 2)  # most frequent first
    assert s["per_exercise"][B]["statuses"]["todo"] == 1
    assert s["trouble"] == {"cy": [B], "eve": [A, B]}
    assert s["grid"]["fay"] == {A: "error", B: "fail"}


def test_write_class_report_writes_markdown_and_a_png(tmp_path):
    notes = {"eve": ["01_softmax_and_nll: not a readable notebook (JSONDecodeError); scored 0"]}
    write_class_report(tmp_path, [A, B], MAXIMA, ROWS, LINES, notes, labels=["01_softmax", "01_nll"])
    md = (tmp_path / "class.md").read_text()
    assert "# Class report: 6 students, 2 exercises" in md
    assert "| 01_softmax | 1 / 6 (17%) | 0 | 2× on input z=[1000" in md
    assert "| 01_nll | 2 / 6 (33%) | 1 |" in md
    assert "- **cy**: 01_nll: stopped after the 20 s limit" in md
    assert (
        "- **eve**: not graded (notebook not submitted or unreadable): 01_softmax, 01_nll; 01_softmax_and_nll: not a readable notebook"
        in md
    )
    assert "| ann | ✓ | ✓ | 2 |" in md and "| cy | ✗ | ⏱ | 0 |" in md and "| eve | — | — | 0 |" in md
    png = (tmp_path / "class.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 200 and height > 150


@pytest.mark.parametrize("bad", ["| pipe |"])
def test_a_pipe_in_a_reason_does_not_break_the_table(tmp_path, bad):
    lines = {"ann": {A: f"✗ fail stable softmax: on input {bad}: wrong.", B: "✓ pass"}}
    write_class_report(tmp_path, [A, B], MAXIMA, [("ann", {A: 0, B: 1})], lines, {})
    row = next(r for r in (tmp_path / "class.md").read_text().splitlines() if r.startswith("| ('01"))
    assert "\\| pipe \\|" in row


def test_passed_and_failed_differ_without_hue():
    """class.png was red and green only: the pass and fail colours now differ in lightness too
    (a reader who cannot tell red from green still can), and every cell also carries its symbol."""
    from lmcore.course.build.class_report import STATUSES

    def luminance(hex_colour):
        r, g, b = (int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
        lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    assert abs(luminance(STATUSES["pass"][2]) - luminance(STATUSES["fail"][2])) > 0.15
