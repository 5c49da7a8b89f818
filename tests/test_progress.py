"""make progress and show_solution, on a workspace with one solved, one wrong and one untouched
exercise; the workspace is not changed."""

import hashlib
from pathlib import Path

import nbformat
import pytest

from lmcore.course import solutions
from lmcore.course.build.workspace import build_workspace
from lmcore.course.progress import format_table, workspace_progress


def _instructor(folder: Path) -> Path:
    folder.mkdir()
    cells = [nbformat.v4.new_markdown_cell("# 00 test"), nbformat.v4.new_code_cell("import math")]
    for name in ("solved", "wrong", "untouched"):
        cells.append(
            nbformat.v4.new_code_cell(
                f"def {name}(p):\n    ### BEGIN SOLUTION\n    return -math.log(p)\n    ### END SOLUTION"
            )
        )
        cells.append(
            nbformat.v4.new_code_cell(
                f"from lmcore.course.start.lesson import check_surprise\n\ncheck_surprise({name})"
            )
        )
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / "00_test.ipynb")
    return folder


def _answer(path: Path, name: str, body: str) -> None:
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if c.source.startswith(f"def {name}(")]
    cell.source = f"def {name}(p):\n    {body}"
    nbformat.write(nb, path)


def _tree(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    instructor = _instructor(root / "notebooks")
    build_workspace(root / "workspace", instructor)
    mine = root / "workspace" / "notebooks" / "00_test.ipynb"
    _answer(mine, "solved", "return -math.log(p)")
    _answer(mine, "wrong", "return -math.log2(p)")
    return root, instructor


def test_progress_table_solved_wrong_untouched(course):
    root, instructor = course
    before = _tree(root / "workspace")
    rows = workspace_progress(root / "workspace", instructor, jobs=1)
    assert [(r.exercise, r.status) for r in rows] == [
        ("solved", "pass"),
        ("wrong", "fail"),
        ("untouched", "todo"),
    ]
    assert "Hint" in rows[1].reason and "surprise" in rows[1].reason
    table = format_table(rows, width=200)
    assert "✓" in table and "✗ " in table and "… not attempted yet" in table
    assert table.splitlines()[-1] == "total: 1 of 3 passed, 1 failed, 1 not attempted yet"
    assert _tree(root / "workspace") == before


def test_a_missing_notebook_reads_as_not_in_the_workspace(course, tmp_path):
    _, instructor = course
    (tmp_path / "notebooks").mkdir()
    rows = workspace_progress(tmp_path, instructor)
    assert {r.status for r in rows} == {"todo"} and "not in your workspace" in format_table(rows)


def test_show_solution_escalates_nudge_hint_solution_and_counts_the_steps(course, monkeypatch, capsys):
    _, instructor = course
    monkeypatch.setenv("LMCORE_NOTEBOOKS", str(instructor))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(solutions, "_ASKED", {})
    outs = []
    for _ in range(4):
        solutions.show_solution("wrong")
        outs.append(capsys.readouterr().out)
    first, second, third, fourth = outs
    assert "wrong (00_test.ipynb), step 1 of 3, a nudge" in first and "2 more steps" in first
    assert "grow without bound" in first and "math.log" not in first and "natural log" not in first
    assert "step 2 of 3, the fuller hint" in second and "natural log" in second and "1 more step:" in second
    assert "return -math.log(p)" not in second
    assert "step 3 of 3, the reference solution" in third and "return -math.log(p)" in third
    assert "BEGIN SOLUTION" not in third and "more step" not in third
    assert fourth == third  # it stays at the solution
    with pytest.raises(ValueError, match="did you mean"):
        solutions.show_solution("wrongg")
    with pytest.raises(TypeError):
        solutions.show_solution(3)


def test_show_solution_is_off_while_grading(course, monkeypatch, capsys):
    _, instructor = course
    monkeypatch.setenv("LMCORE_NOTEBOOKS", str(instructor))
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.setattr(solutions, "_ASKED", {"wrong": 5})
    solutions.show_solution("wrong")
    out = capsys.readouterr().out
    assert out.strip() == solutions.OFF_WHILE_GRADING and "math.log" not in out


def test_every_course_exercise_is_found_with_a_hint():
    from lmcore.course.build.nbgrader_meta import exercises

    folder = solutions.instructor_notebooks()
    names = [
        e["function"]
        for p in sorted(folder.glob("*.ipynb"))
        for e in exercises(nbformat.read(p, as_version=4))
    ]
    assert names
    for name in names:
        assert solutions.find_exercise(name)["solution"]


def _solution_lines(source: str) -> set:
    """The reference solution's lines worth hiding: code between the SOLUTION markers, 6+ characters."""
    inside, lines = False, set()
    for line in source.splitlines():
        text = line.strip()
        if "BEGIN SOLUTION" in text or "END SOLUTION" in text:
            inside = "BEGIN" in text
            continue
        if inside and len(text) >= 6 and not text.startswith("#"):
            lines.add(text)
    return lines


def test_every_exercise_teaches_before_it_tells():
    """Every exercise's help has a nudge, a fuller hint and the solution, and the nudge (what a first
    failure and a first show_solution print) contains no line of the reference solution."""
    from lmcore.course.build.nbgrader_meta import exercises

    folder = solutions.instructor_notebooks()
    seen = 0
    for path in sorted(folder.glob("*.ipynb")):
        for e in exercises(nbformat.read(path, as_version=4)):
            ex = solutions.find_exercise(e["function"])
            steps = solutions._steps(ex)
            assert [s[0] for s in steps[:2]] == ["a nudge", "the fuller hint"] and len(steps) == 3, (
                f"{e['function']} ({path.name}): help steps {[s[0] for s in steps]}"
            )
            leaked = [line for line in _solution_lines(ex["solution"]) if line in steps[0][1]]
            assert not leaked, f"{e['function']}: the nudge shows the solution's line {leaked[0]!r}"
            seen += 1
    assert seen >= 34


def test_an_untouched_notebook_is_not_run(course, tmp_path, monkeypatch):
    from lmcore.course import progress

    _, instructor = course
    build_workspace(tmp_path / "fresh", instructor)

    def no_kernel(*args, **kwargs):
        raise AssertionError("an untouched notebook must not start a kernel")

    monkeypatch.setattr(progress, "run_cells", no_kernel)
    rows = workspace_progress(tmp_path / "fresh", instructor)
    assert [(r.exercise, r.status) for r in rows] == [
        ("solved", "todo"),
        ("wrong", "todo"),
        ("untouched", "todo"),
    ]


def test_an_exercise_the_course_added_later_is_named_so(course, tmp_path):
    root, instructor = course
    newer = tmp_path / "notebooks"
    newer.mkdir()
    nb = nbformat.read(instructor / "00_test.ipynb", as_version=4)
    nb.cells += [
        nbformat.v4.new_code_cell(
            "def extra(p):\n    ### BEGIN SOLUTION\n    return -math.log(p)\n    ### END SOLUTION"
        ),
        nbformat.v4.new_code_cell(
            "from lmcore.course.start.lesson import check_surprise\n\ncheck_surprise(extra)"
        ),
    ]
    nbformat.write(nb, newer / "00_test.ipynb")
    rows = workspace_progress(root / "workspace", newer, jobs=1)
    assert [(r.exercise, r.status) for r in rows][-1] == ("extra", "todo")
    assert "new in the course since your copy" in format_table(rows, width=200)


def test_a_two_part_hint_is_found_nudge_first():
    """check_fit_temperature's hint is a (nudge, full) pair: show_solution gives both, the nudge first."""
    hints = solutions.hints_of("check_fit_temperature")
    assert len(hints) == 2 and hints[0].startswith("Print the batch's loss at a range of T")
    assert "bisect on its sign" in hints[1]


def test_every_function_exercise_has_a_hint_for_show_solution():
    """show_solution's first answer is the check's hint: every exercise has one (the choice
    exercise of 07 excepted: its hints are per answer, and would name the answers)."""
    from lmcore.course.build.nbgrader_meta import exercises

    folder = solutions.instructor_notebooks()
    missing = []
    for p in sorted(folder.glob("*.ipynb")):
        for e in exercises(nbformat.read(p, as_version=4)):
            ex = solutions.find_exercise(e["function"])
            if e["function"] != "name_the_bugs" and not any(solutions.hints_of(c) for c in ex["checks"]):
                missing.append(e["function"])
    assert not missing, missing


def test_a_long_reason_wraps_and_is_never_cut():
    """A ✗ line's useful part (the hint) comes last: it wraps under itself instead of being cut."""
    from lmcore.course.progress import Row, format_table

    reason = (
        "fail ce_grad: on input z=[2, 1, 0], y=1: first difference at [0] "
        + "x" * 60
        + " The sign is flipped."
    )
    table = format_table([Row("02_gradients", "my_ce_grad", "fail", reason)], width=80)
    assert "The sign is flipped." in table and "…" not in table
    assert all(len(line) <= 80 for line in table.splitlines())


def test_progress_finds_the_workspace_from_inside_it(tmp_path):
    """JupyterLab's terminal starts in the workspace: progress reads it from there (or below)."""
    from lmcore.course.build.workspace import MANIFEST
    from lmcore.course.progress import default_workspace

    ws = tmp_path / "workspace"
    (ws / MANIFEST).parent.mkdir(parents=True)
    (ws / MANIFEST).write_text("{}")
    (ws / "notebooks").mkdir()
    assert default_workspace(ws) == str(ws.resolve())
    assert default_workspace(ws / "notebooks") == str(ws.resolve())
    assert default_workspace(tmp_path) == str((tmp_path / "workspace").resolve())
