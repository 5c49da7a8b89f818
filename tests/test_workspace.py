"""The learner's workspace: built once, refreshed without ever replacing what the learner changed."""

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from lmcore.course import solutions
from lmcore.course.build import workspace as ws
from lmcore.course.build.lab import lab_command, lab_settings
from lmcore.course.build.lab import main as lab_main
from lmcore.course.build.student import NOTE, NOTE_HINTS_ONLY
from lmcore.course.build.workspace import build_student_edition

REPO = Path(__file__).resolve().parent.parent


def _course(folder: Path, title="", n=2) -> Path:
    """A small instructor edition: ``n`` notebooks with one exercise each."""
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_markdown_cell(f"# {k:02d} {title}"),
            nbformat.v4.new_code_cell(
                f"import math\n\n\ndef f{k}(p):\n    ### BEGIN SOLUTION\n    return -math.log(p)\n    ### END SOLUTION"
            ),
            nbformat.v4.new_code_cell(
                f"from lmcore.course.start.lesson import check_surprise\n\ncheck_surprise(f{k})"
            ),
        ]
        nbformat.write(nb, folder / f"{k:02d}_n.ipynb")
    return folder


def _edit(path: Path) -> bytes:
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].source = nb.cells[1].source.replace(
        "raise NotImplementedError", "return 1.0  # mine\n    raise"
    )
    nbformat.write(nb, path)
    return path.read_bytes()


def test_first_build_is_the_learner_edition_with_notes(tmp_path):
    src = _course(tmp_path / "src")
    actions = ws.build_workspace(tmp_path / "w", src)
    assert {a.what for a in actions} == {"added"}
    nb = nbformat.read(tmp_path / "w" / "notebooks" / "00_n.ipynb", as_version=4)
    assert "BEGIN SOLUTION" not in nb.cells[1].source and "-math.log" not in nb.cells[1].source
    assert NOTE.format(name="f0").splitlines()[1].strip() in nb.cells[1].source
    assert (tmp_path / "w" / "START_HERE.md").read_text().count("notebooks/00_n.ipynb") >= 1
    manifest = json.loads((tmp_path / "w" / ws.MANIFEST).read_text())["files"]
    data = (tmp_path / "w" / "notebooks" / "00_n.ipynb").read_bytes()
    assert manifest["notebooks/00_n.ipynb"] == hashlib.sha256(data).hexdigest()


def test_every_writing_command_keeps_an_edited_notebook_byte_for_byte(tmp_path):
    src = _course(tmp_path / "src")
    folder = tmp_path / "w"
    ws.build_workspace(folder, src)
    mine = _edit(folder / "notebooks" / "00_n.ipynb")
    untouched = (folder / "notebooks" / "01_n.ipynb").read_bytes()
    # rerun, then the course changes upstream (both notebooks, and a new one), then rerun again
    ws.build_workspace(folder, src)
    _course(src, title="upstream changed", n=3)
    actions = {a.path: a for a in ws.build_workspace(folder, src)}
    ws.build_workspace(folder, src, dry_run=True)
    assert (folder / "notebooks" / "00_n.ipynb").read_bytes() == mine
    assert actions["notebooks/00_n.ipynb"].what == "beside"
    beside = folder / actions["notebooks/00_n.ipynb"].beside
    assert beside.name.startswith("00_n.course-update-") and "upstream changed" in beside.read_text()
    assert actions["notebooks/01_n.ipynb"].what == "updated"
    assert (folder / "notebooks" / "01_n.ipynb").read_bytes() != untouched
    assert actions["notebooks/02_n.ipynb"].what == "added"
    # the beside copy is never rewritten, the learner's file still not
    before = beside.read_bytes()
    again = {a.path: a for a in ws.build_workspace(folder, src)}
    assert again["notebooks/00_n.ipynb"].what == "beside" and beside.read_bytes() == before
    assert (folder / "notebooks" / "00_n.ipynb").read_bytes() == mine
    assert "you changed it" in ws.report(again.values(), "w")


def test_make_student_keeps_an_edited_notebook(tmp_path):
    src, out = _course(tmp_path / "src"), tmp_path / "student"
    build_student_edition(src, out)
    mine = _edit(out / "00_n.ipynb")
    build_student_edition(src, out)
    _course(src, title="v2")
    build_student_edition(src, out)
    assert (out / "00_n.ipynb").read_bytes() == mine
    assert list(out.glob("00_n.course-update-*.ipynb"))


def _run(path: Path, *, add_cell: bool = False) -> bytes:
    """What running a notebook in Jupyter changes: outputs, execution counts, metadata (and, with
    ``add_cell``, a cell the learner added)."""
    nb = nbformat.read(path, as_version=4)
    for n, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        cell.execution_count = n + 1
        cell.outputs = [nbformat.v4.new_output("stream", text=f"ran {n}\n")]
        cell.metadata["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00Z"}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if add_cell:
        nb.cells.append(nbformat.v4.new_code_cell("print('my own try')"))
    nbformat.write(nb, path)
    return path.read_bytes()


def test_a_notebook_only_run_gets_the_update_with_outputs_cleared(tmp_path):
    src, folder = _course(tmp_path / "src"), tmp_path / "w"
    ws.build_workspace(folder, src)
    nb_path = folder / "notebooks" / "00_n.ipynb"
    ran = _run(nb_path)
    # the course unchanged: the run notebook keeps its outputs
    same = {a.path: a for a in ws.build_workspace(folder, src)}
    assert same["notebooks/00_n.ipynb"].what == "kept" and nb_path.read_bytes() == ran
    _course(src, title="upstream changed")
    actions = {a.path: a for a in ws.build_workspace(folder, src)}
    a = actions["notebooks/00_n.ipynb"]
    assert a.what == "updated" and a.ran and a.beside is None
    nb = nbformat.read(nb_path, as_version=4)
    assert "upstream changed" in nb.cells[0].source
    assert all(c.outputs == [] and c.execution_count is None for c in nb.cells if c.cell_type == "code")
    assert not list((folder / "notebooks").glob("*course-update*"))
    text = ws.report(actions.values(), "w")
    assert "updated   notebooks/00_n.ipynb (you had only run it; outputs cleared)" in text
    assert "updated   notebooks/01_n.ipynb (you had not changed it)" in text
    assert "w/: 0 added, 2 updated" in text
    manifest = json.loads((folder / ws.MANIFEST).read_text())
    assert manifest["cells"]["notebooks/00_n.ipynb"] == ws.cells_sha(nb_path.read_bytes())


@pytest.mark.parametrize("change", ["added cell", "edited source"])
def test_a_notebook_with_an_added_cell_or_an_edited_source_stays_the_learners(tmp_path, change):
    src, folder = _course(tmp_path / "src"), tmp_path / "w"
    ws.build_workspace(folder, src)
    nb_path = folder / "notebooks" / "00_n.ipynb"
    if change == "added cell":
        mine = _run(nb_path, add_cell=True)
    else:
        _edit(nb_path)
        mine = _run(nb_path)
    _course(src, title="upstream changed")
    a = {a.path: a for a in ws.build_workspace(folder, src)}["notebooks/00_n.ipynb"]
    assert a.what == "beside" and not a.ran and nb_path.read_bytes() == mine
    assert "upstream changed" in (folder / a.beside).read_text()


def test_an_unreadable_notebook_is_the_learners(tmp_path):
    src, folder = _course(tmp_path / "src"), tmp_path / "w"
    ws.build_workspace(folder, src)
    nb_path = folder / "notebooks" / "00_n.ipynb"
    broken = nb_path.read_bytes()[:-40]
    nb_path.write_bytes(broken)
    assert ws.cells_sha(broken) is None and ws.cells_sha(b'{"cells": 3}') is None
    _course(src, title="upstream changed")
    a = {a.path: a for a in ws.build_workspace(folder, src)}["notebooks/00_n.ipynb"]
    assert a.what == "beside" and nb_path.read_bytes() == broken


def test_an_old_manifest_without_cells_falls_back_to_bytes(tmp_path):
    src, folder = _course(tmp_path / "src"), tmp_path / "w"
    ws.build_workspace(folder, src)
    manifest = folder / ws.MANIFEST
    old = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({"about": "old", "files": old["files"]}))
    nb_path = folder / "notebooks" / "00_n.ipynb"
    ran = _run(nb_path)
    _course(src, title="upstream changed")
    actions = {a.path: a for a in ws.build_workspace(folder, src)}
    assert actions["notebooks/00_n.ipynb"].what == "beside" and nb_path.read_bytes() == ran
    assert actions["notebooks/01_n.ipynb"].what == "updated"  # by its bytes, as before
    # the rewrite records the cells of what it wrote or found unchanged
    assert set(json.loads(manifest.read_text())["cells"]) == {"notebooks/01_n.ipynb"}


def test_a_dry_run_writes_nothing_for_a_notebook_only_run(tmp_path):
    src, folder = _course(tmp_path / "src"), tmp_path / "w"
    ws.build_workspace(folder, src)
    ran = _run(folder / "notebooks" / "00_n.ipynb")
    _course(src, title="upstream changed")
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    actions = {a.path: a for a in ws.build_workspace(folder, src, dry_run=True)}
    assert actions["notebooks/00_n.ipynb"].what == "updated" and actions["notebooks/00_n.ipynb"].ran
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert (folder / "notebooks" / "00_n.ipynb").read_bytes() == ran


def test_the_start_page_help_line_imports_and_agrees_with_the_stubs():
    """The import the start page tells the learner to type runs, and is the stubs' own."""
    (line,) = re.findall(r"`(from [\w.]+ import show_solution)`", ws.START_PAGE)
    namespace = {}
    exec(line, namespace)  # noqa: S102 -- the start page's own line
    assert callable(namespace["show_solution"])
    assert line in NOTE


def _stub_notes(folder: Path) -> str:
    """Every comment line of every code cell of the notebooks in ``folder``: what the stubs say."""
    return "\n".join(
        line
        for path in sorted(folder.glob("*.ipynb"))
        for cell in nbformat.read(path, as_version=4).cells
        if cell.cell_type == "code"
        for line in cell.source.splitlines()
        if line.strip().startswith("#")
    )


# the reference solution show_solution prints of f0 (the fuller hint quotes -math.log(p) itself)
_SOLUTION_LINES = ("return -math.log(p)", "def f0(p):", "SOLUTION")


def _ask(folder: Path, src: Path, monkeypatch, capsys, times: int) -> list[str]:
    """``show_solution("f0")`` called ``times`` times in ``folder`` (a kernel's folder), fresh."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("LMCORE_NOTEBOOKS", str(src))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(solutions, "_ASKED", {})
    outs = []
    for _ in range(times):
        solutions.show_solution("f0")
        outs.append(capsys.readouterr().out)
    return outs


def test_the_graded_edition_has_no_route_to_the_solutions(tmp_path, monkeypatch, capsys):
    src, out = _course(tmp_path / "src"), tmp_path / "graded"
    monkeypatch.delenv(solutions.NO_SOLUTIONS_ENV, raising=False)
    run = subprocess.run(  # what make student SOLUTIONS=0 runs
        [".venv/bin/python", "-m", "lmcore.course.build.workspace", "--student", "--no-solutions"]
        + ["--src", str(src), str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "graded-class edition (no reference solutions): 2 notebooks" in run.stdout
    notes = _stub_notes(out)
    assert NOTE_HINTS_ONLY.format(name="f0").splitlines()[1].strip() in notes
    assert "reference solution" not in notes.lower() and "then solution" not in notes
    assert json.loads((out / ws.EDITION).read_text())["solutions"] is False
    outs = _ask(out, src, monkeypatch, capsys, times=12)
    assert not any(line in o for o in outs for line in _SOLUTION_LINES)
    assert "step 1 of 2, a nudge" in outs[0] and "step 2 of 2, the fuller hint" in outs[1]
    assert "natural log" in outs[1] and "solutions are off in this edition" in outs[1]
    assert all(solutions.OFF_IN_THIS_EDITION in o for o in outs[2:])
    assert solutions.solutions_off(out / "a" / "b", env={})  # a notebook in a folder below it
    refused = subprocess.run(  # the workspace has no graded mode: refused, not ignored
        [".venv/bin/python", "-m", "lmcore.course.build.workspace", "--no-solutions", str(tmp_path / "w")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "--no-solutions goes with --student" in refused.stderr
    assert not (tmp_path / "w").exists()


def test_the_default_edition_is_unchanged_and_reaches_the_solution(tmp_path, monkeypatch, capsys):
    src, out = _course(tmp_path / "src"), tmp_path / "practice"
    monkeypatch.delenv(solutions.NO_SOLUTIONS_ENV, raising=False)
    build_student_edition(src, out)
    assert NOTE.format(name="f0").splitlines()[1].strip() in _stub_notes(out)
    assert json.loads((out / ws.EDITION).read_text())["solutions"] is True
    outs = _ask(out, src, monkeypatch, capsys, times=3)
    assert "step 3 of 3, the reference solution" in outs[2] and "return -math.log(p)" in outs[2]
    # the environment variable turns them off anywhere, the marker notwithstanding
    monkeypatch.setenv(solutions.NO_SOLUTIONS_ENV, "1")
    outs = _ask(out, src, monkeypatch, capsys, times=6)
    assert not any(line in o for o in outs for line in _SOLUTION_LINES)
    assert solutions.OFF_IN_THIS_EDITION in outs[-1]


def test_a_graded_edition_rebuilt_for_practice_turns_the_solutions_back_on(tmp_path, monkeypatch):
    src, out = _course(tmp_path / "src"), tmp_path / "s"
    build_student_edition(src, out, solutions=False)
    assert solutions.solutions_off(out, env={})
    build_student_edition(src, out, dry_run=True)
    assert solutions.solutions_off(out, env={})  # a dry run writes nothing, the marker neither
    build_student_edition(src, out)
    assert not solutions.solutions_off(out, env={})
    assert NOTE.format(name="f0").splitlines()[1].strip() in _stub_notes(out)
    assert not solutions.solutions_off(tmp_path, env={})  # no marker anywhere above: on


@pytest.mark.parametrize("text", ["{not json", '{"solutions": "no"}', "[]"])
def test_an_unreadable_edition_marker_counts_as_off(tmp_path, text):
    (tmp_path / ".lmcore").mkdir()
    (tmp_path / solutions.EDITION).write_text(text)
    assert solutions.solutions_off(tmp_path, env={})


def test_a_crash_mid_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "a.ipynb"
    target.write_bytes(b"old")

    def boom(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        ws.atomic_write(target, b"new and longer")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.ipynb"]


def test_a_file_it_never_wrote_is_kept(tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "x.txt").write_bytes(b"the learner's")
    actions = ws.sync_files({"x.txt": b"course"}, tmp_path / "w")
    assert actions[0].what == "beside" and (tmp_path / "w" / "x.txt").read_bytes() == b"the learner's"


@pytest.mark.parametrize("files", [{"../x": b"a"}, {"/abs": b"a"}, {"x": "text"}])
def test_sync_rejects_paths_outside_and_non_bytes(tmp_path, files):
    with pytest.raises(ValueError):
        ws.sync_files(files, tmp_path)


def test_lab_dry_run_builds_the_workspace_and_names_the_command(tmp_path, capsys):
    folder = tmp_path / "workspace"
    assert lab_main(["--workspace", str(folder), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert (folder / "notebooks" / "00_start_here.ipynb").is_file() and (folder / "START_HERE.md").is_file()
    assert f"--ServerApp.root_dir={folder.resolve()}" in out and "START_HERE.md" in out
    assert lab_main(["--workspace", str(folder), "--dry-run"]) == 0
    assert " 0 added, 0 updated" in capsys.readouterr().out


@pytest.mark.skipif(not any((REPO / "zh" / "notebooks").glob("*.ipynb")), reason="no Chinese notebook yet")
def test_lab_lang_zh_builds_the_chinese_workspace(tmp_path, capsys):
    folder = tmp_path / "workspace-zh"
    assert lab_main(["--lang", "zh", "--workspace", str(folder), "--dry-run"]) == 0
    start = (folder / "START_HERE.md").read_text(encoding="utf-8")
    assert "你的 lmcore 工作区" in start and "notebooks/00_start_here.ipynb" in start
    made = sorted(p.name for p in (folder / "notebooks").glob("*.ipynb"))
    assert made == sorted(p.name for p in (REPO / "zh" / "notebooks").glob("*.ipynb"))
    if (REPO / "zh" / "README.md").is_file():  # the README's learner sections, translated
        assert (folder / "README.md").read_bytes() == (REPO / "zh" / "README.md").read_bytes()
        assert (folder / "README.en.md").read_text(encoding="utf-8").startswith("# lmcore")
    english = ws.learner_files(prefix="", extras=False)
    chinese = ws.learner_files(prefix="", extras=False, lang="zh")
    for name in made:  # the learner edition of a Chinese notebook: English code, Chinese text
        en, zh = (json.loads(files[name]) for files in (english, chinese))
        for a, b in zip(en["cells"], zh["cells"], strict=True):
            assert a["id"] == b["id"] and (a == b or a["cell_type"] == "markdown")
    with pytest.raises(ValueError, match="lang"):
        ws.notebooks_dir("fr")


def test_lab_settings_turn_news_off_and_autosave_only_for_the_learner():
    learner, instructor = lab_settings("learner"), lab_settings("instructor")
    notify = "@jupyterlab/apputils-extension/notification.jupyterlab-settings"
    docs = "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings"
    assert learner[notify]["fetchNews"] == "false" and learner[notify]["checkForUpdates"] is False
    assert learner[docs]["autosave"] is True and instructor[docs]["autosave"] is False
    cmd = lab_command("instructor", REPO)
    assert f"--ServerApp.root_dir={REPO}" in cmd and any("NeverCheckForUpdate" in c for c in cmd)
    with pytest.raises(ValueError):
        lab_settings("teacher")


def test_make_lab_dry_run_from_the_makefile(tmp_path):
    up_to_date = subprocess.run(["make", "-q", ".venv/.installed"], cwd=REPO, capture_output=True)
    if up_to_date.returncode != 0:  # make lab would (re)install .venv first: not in a test
        pytest.skip("make's .venv is not set up (or not up to date) here")
    run = subprocess.run(
        ["make", "-s", "lab", "DRY_RUN=1", "EDITION=instructor"], cwd=REPO, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert "would run:" in run.stdout and f"--ServerApp.root_dir={REPO}" in run.stdout
    # LANG=zh on the command line picks the Chinese edition; a locale in the environment does not
    env = dict(os.environ, LANG="zh_CN.UTF-8")
    for args, root in ((["LANG=zh"], REPO / "zh"), ([], REPO)):
        run = subprocess.run(
            ["make", "-s", "lab", "DRY_RUN=1", "EDITION=instructor", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            env=env,
        )
        assert run.returncode == 0, run.stderr
        assert f"--ServerApp.root_dir={root} " in run.stdout, run.stdout
    for args, command in (
        (["LANG=zh"], "lmcore-course progress workspace-zh --instructor zh/notebooks"),
        ([], "lmcore-course progress workspace"),
    ):  # make progress the same way (-n: the command, not its run)
        run = subprocess.run(
            ["make", "-n", "--no-print-directory", "progress", "-o", ".venv/.installed", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            env=env,
        )
        assert any(line.strip().endswith(command) for line in run.stdout.splitlines()), run.stdout


def test_a_replace_refused_while_the_file_is_open_is_retried_where_windows_refuses_it(tmp_path, monkeypatch):
    """Windows refuses os.replace onto a file another program holds open, for a moment; the
    write retries there (REPLACE_TRIES), and still raises when the refusal lasts."""
    target = tmp_path / "a.ipynb"
    target.write_bytes(b"old")
    real, calls = os.replace, []

    def refuse_twice(src, dst):
        calls.append(dst)
        if len(calls) <= 2:
            raise PermissionError(13, "The process cannot access the file", str(dst))
        real(src, dst)

    monkeypatch.setattr(ws.time, "sleep", lambda s: None)
    monkeypatch.setattr(ws.os, "replace", refuse_twice)
    monkeypatch.setattr(ws, "REPLACE_TRIES", 3)
    ws.atomic_write(target, b"new")
    assert target.read_bytes() == b"new" and len(calls) == 3
    calls.clear()
    monkeypatch.setattr(ws, "REPLACE_TRIES", 2)  # refused twice, two tries: the error stands
    with pytest.raises(PermissionError):
        ws.atomic_write(target, b"newer")
    assert target.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["a.ipynb"]


def test_only_windows_retries_a_refused_replace():
    """On POSIX a PermissionError from os.replace is final (a folder not writable): no waiting."""
    assert ws.REPLACE_TRIES == (8 if os.name == "nt" else 1)


def test_the_learners_readme_leaves_out_the_results_that_answer_predicts():
    """The README's Results section quotes the notebooks' outcomes (09's final loss, the held-out
    sums), which answer Predict prompts: the workspace's copy replaces it with a note, and keeps
    every other section as it is."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
    mine = ws.learner_files()["README.md"].decode("utf-8")
    assert "## Results" in readme and "0.5498" in readme
    assert "0.5498" not in mine and "leaves them out" in mine
    sections = re.findall(r"^## (.+)$", readme, flags=re.M)
    assert re.findall(r"^## (.+)$", mine, flags=re.M) == sections
    after = readme.index("\n## ", readme.index("\n## Using lmcore in your own code\n") + 1)
    assert mine.endswith(readme[after:]) and mine.startswith(readme[: readme.index("\n## Results\n")])
    # and the API examples, whose accumulation line names 05's denominator
    assert "num_items=n_valid_in_whole_accumulated_batch" in readme
    assert "num_items=n_valid_in_whole_accumulated_batch" not in mine
    # the figures (06's block-diagonal mask and reset positions, 09's floor) are left out too
    assert "packing_block_diagonal.png" in readme and "packing_block_diagonal.png" not in mine
    # ...and so are their image files: only the figures the learner's README still shows ship
    shipped = {k for k in ws.learner_files() if k.startswith("figures/")}
    assert "figures/packing_block_diagonal.png" not in shipped and "figures/loss_floor.png" not in shipped
    assert shipped and all(k in mine for k in shipped)
    assert ws.learner_readme("# x\n## A\na\n") == "# x\n## A\na\n"
    assert ws.learner_readme("# x\n## Results\nr\n") == "# x\n" + ws._LEFT_OUT["Results"]
    assert (
        ws.learner_readme("# x\n## Figures\nf\n## B\nb\n") == "# x\n" + ws._LEFT_OUT["Figures"] + "## B\nb\n"
    )
