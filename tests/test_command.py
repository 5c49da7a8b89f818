"""``lmcore-course``: one command for the learner's and instructor's actions; make only calls it."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from lmcore.course.build import command

ROOT = Path(__file__).resolve().parents[1]


def test_usage_lists_every_command_and_an_unknown_one_exits_2(capsys):
    assert command.main([]) == 2 and command.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in command.COMMANDS:
        assert f"  {name}" in out
    assert command.main(["train-me"]) == 2
    assert "unknown command 'train-me'" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(command.COMMANDS))
def test_every_command_has_help_under_its_own_name(name, capsys):
    with pytest.raises(SystemExit) as done:
        command.main([name, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: lmcore-course {name}")


def test_the_package_installs_the_command():
    text = (ROOT / "pyproject.toml").read_text()
    scripts = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^lmcore-course = "lmcore\.course\.build\.command:main"', scripts, re.M), scripts


def test_the_makefile_targets_only_call_the_command():
    """One implementation: each learner or instructor target's recipe is one lmcore-course call."""
    text = (ROOT / "Makefile").read_text()
    for target, sub in [
        ("lab", "lab"),
        ("progress", "progress"),
        ("doctor", "doctor"),
        ("student", "student"),
        ("grade", "grade"),
    ]:
        recipe = re.search(rf"^{target}:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M).group(1)
        calls = [line for line in recipe.splitlines() if "lmcore" in line]
        assert calls == [next(line for line in calls if f"$(BIN)/lmcore-course {sub}" in line)], (
            target,
            recipe,
        )


def test_student_writes_the_edition_through_the_command(tmp_path, capsys):
    out = tmp_path / "student"
    assert command.main(["student", str(out), "--src", str(ROOT / "notebooks")]) == 0
    assert "student edition: " in capsys.readouterr().out
    assert sorted(p.name for p in out.glob("*.ipynb")) == sorted(
        p.name for p in (ROOT / "notebooks").glob("*.ipynb")
    )
    assert (
        command.main(
            ["student", str(tmp_path / "graded"), "--src", str(ROOT / "notebooks"), "--no-solutions"]
        )
        == 0
    )
    assert '"solutions": false' in (tmp_path / "graded" / ".lmcore" / "edition.json").read_text()


def test_lab_dry_run_through_the_command_runs_outside_the_repository(tmp_path):
    folder = tmp_path / "my workspace"
    run = subprocess.run(
        [sys.executable, "-m", "lmcore.course.build.command", "lab", "--workspace", str(folder), "--dry-run"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert (folder / "notebooks" / "00_start_here.ipynb").is_file() and "would run:" in run.stdout
