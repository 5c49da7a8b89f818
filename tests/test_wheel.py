"""The course as a package: the wheel carries what a learner without a clone opens, and the
course finds it there (lmcore.course.build.paths). The install itself, in a fresh venv outside
the repository, is ``make test-wheel`` (CI runs it)."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lmcore.course.build import paths, wheel_check

ROOT = Path(__file__).resolve().parents[1]


def _tracked(pattern: str) -> set[str]:
    out = subprocess.run(["git", "ls-files", pattern], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return set(out.stdout.split())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return wheel_check.build_wheel(tmp_path_factory.mktemp("wheel"), log=lambda line: None)


def test_the_wheel_carries_every_notebook_figure_and_the_runs_they_load(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "lmcore-0.1.0.data/data/share/lmcore/"
    for rel in (
        _tracked("notebooks/*.ipynb")
        | _tracked("zh/notebooks/*.ipynb")
        | _tracked("figures/*.png")
        | {"README.md", "zh/README.md"}
    ):
        assert data + rel in names, rel
    for rel in _tracked("lmcore/*"):  # every file of the package, the reference run included
        assert rel in names, rel
    assert not [n for n in names if "/runs/" in n or "workspace/" in n]  # no run output, no learner's work


def test_in_a_clone_the_course_is_the_repository():
    assert paths.IN_CLONE and paths.course_root() == ROOT
    assert paths.DEFAULT_WORKSPACE == ROOT / "workspace" and paths.LAB_STATE == ROOT / ".lab"


def test_from_a_wheel_the_course_is_the_installed_copy(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, "IN_CLONE", False)
    monkeypatch.setattr(paths.sysconfig, "get_path", lambda name, *scheme: str(tmp_path / "prefix"))
    monkeypatch.setattr(paths.sys, "prefix", str(tmp_path / "nowhere"))
    monkeypatch.setattr(paths.site, "getuserbase", lambda: str(tmp_path / "user"))
    with pytest.raises(FileNotFoundError, match="lmcore\\[course\\]"):
        paths.course_root()
    installed = tmp_path / "prefix" / "share" / "lmcore"
    (installed / "notebooks").mkdir(parents=True)
    (installed / "notebooks" / "00_start_here.ipynb").write_text("{}")
    assert paths.course_root() == installed


def test_venv_bin_names_the_scripts_of_this_os(tmp_path):
    python = wheel_check.venv_bin(tmp_path, "python")
    if sys.platform == "win32":
        assert python == tmp_path / "Scripts" / "python.exe"
    else:
        assert python == tmp_path / "bin" / "python"


def test_a_failing_step_raises_with_its_output():
    with pytest.raises(RuntimeError, match="(?s)a step failed:.*boom"):
        wheel_check._run(
            "a step", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], lambda line: None
        )
