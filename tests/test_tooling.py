"""The tooling stays in step with itself: the `test` extra with the pins, the nbval options in
the root conftest only, the GitHub workflow with .ci/run (and actionlint, if installed)."""

import importlib.util
import re
import shutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path
from types import SimpleNamespace

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins(*names):
    pins = {}
    for name in names:
        for line in (ROOT / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if "==" in line:
                pkg, version = line.split("==")
                pins[pkg.strip().lower()] = version.strip()
    return pins


def _make_targets(text):
    return re.findall(r"^\s*(?:run:\s*)?make ([\w-]+)", text, flags=re.M)


def test_test_extra_pins_what_the_requirements_pin():
    pins = _pins("requirements.txt", "requirements-dev.txt")
    extra = PYPROJECT["project"]["optional-dependencies"]["test"]
    assert {"pytest", "hypothesis", "nbval", "ruff"} <= {r.split("==")[0] for r in extra}
    for req in extra:
        pkg, version = req.split("==")
        assert pins.get(pkg.lower()) == version, f"test extra {req}, requirements pin {pins.get(pkg.lower())}"


def test_console_script_resolves():
    scripts = PYPROJECT["project"]["scripts"]
    assert {"lmcore-train", "lmcore-course"} <= set(scripts)
    for target in scripts.values():
        module, name = target.split(":")
        assert callable(getattr(import_module(module), name))


def test_plain_pytest_is_the_fast_suite_and_make_test_runs_everything():
    opts = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert "--nbval" not in opts["addopts"] and "not slow" in opts["addopts"]
    assert opts["testpaths"] == ["tests"]
    makefile = (ROOT / "Makefile").read_text()
    test_recipe = re.search(r"^test: .*\n\t(.*)", makefile, flags=re.M).group(1)
    assert "$(ALL_TESTS) $(NBVAL) --ignore=tests/teach tests notebooks" in test_recipe
    teach_recipe = re.search(r"^test-teach: .*\n\t(.*)", makefile, flags=re.M).group(1)
    assert "$(ALL_TESTS)" in teach_recipe and teach_recipe.endswith(
        "tests/teach $(TEACH_ARGS)"
    )  # slow ones too
    for recipe in (test_recipe, teach_recipe):
        assert "$(XDIST)" in recipe  # pytest-xdist, a notebook's cells on one worker in order
    assert re.search(r"^XDIST := -n \$\(JOBS\) --dist loadfile$", makefile, flags=re.M)


def _nbval_defaults():
    """nbval's own option defaults, read from its addoption calls (what a bare run gets)."""
    nbval_plugin = pytest.importorskip("nbval.plugin")
    defaults = {}

    class Parser:
        def getgroup(self, *args, **kwargs):
            return self

        def addoption(self, *names, **kw):
            dest = kw.get("dest") or names[0].lstrip("-").replace("-", "_")
            defaults[dest] = kw.get("default", False if kw.get("action") == "store_true" else None)

        _addoption = addoption

    nbval_plugin.pytest_addoption(Parser())
    return defaults


def _configured(conftest, args, **given):
    opt = SimpleNamespace(**{**_nbval_defaults(), "markexpr": "not slow", **given})
    conftest.pytest_configure(SimpleNamespace(option=opt, args=args))
    return opt


def test_the_nbval_options_live_in_conftest_only():
    """make passes only --nbval; conftest gives every nbval run the same options, keeps the
    caller's, and leaves a run that names no notebook alone."""
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    nbval = re.search(r"^NBVAL := (.*)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1).split()
    assert nbval == ["--nbval"]
    assert _nbval_defaults()["nbval_cell_timeout"] == conftest.NBVAL_DEFAULT_TIMEOUT
    project = {
        "nbval": True,
        "nbval_current_env": True,
        "nbval_sanitize_with": str(ROOT / "notebooks" / "sanitize.cfg"),
        "nbval_cell_timeout": conftest.CELL_TIMEOUT,
    }
    for args, given in ((["tests", "notebooks"], {"nbval": True}), (["notebooks/03_x.ipynb"], {})):
        opt = _configured(conftest, args, **given)
        assert {k: getattr(opt, k) for k in project} == project, args
    mine = _configured(conftest, ["notebooks"], nbval_sanitize_with="my.cfg", nbval_cell_timeout="60")
    assert (mine.nbval_sanitize_with, mine.nbval_cell_timeout) == ("my.cfg", "60")
    assert not _configured(conftest, ["notebooks"], nbval_kernel_name="python3").nbval_current_env
    plain = _configured(conftest, ["tests"])
    assert not plain.nbval and plain.nbval_sanitize_with is None


def test_github_workflow_runs_the_ci_targets_in_order():
    ci = _make_targets((ROOT / ".ci" / "run").read_text())
    workflow = _make_targets((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    assert ci[0] == "lint" and "test" in ci
    # .ci/run installs the torch venvs early, beside make test (the workflow's test-torch installs its own)
    assert [t for t in workflow if t != "actionlint"] == [t for t in ci if t != "torch-venv"]


@pytest.mark.parametrize("workflow", ["ci.yml", "pages.yml"])
def test_actionlint_accepts_the_workflow(workflow):
    exe = Path(sys.executable).parent / "actionlint"
    exe = str(exe) if exe.exists() else shutil.which("actionlint")
    if exe is None:
        pytest.skip(
            "actionlint not installed (pip install -r requirements-dev.txt; make lint fails without it)"
        )
    out = subprocess.run(
        [exe, str(ROOT / ".github" / "workflows" / workflow)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _collected(*args):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # three pytest processes: about 10 s each on a busy machine
def test_naming_a_slow_test_runs_it_and_naming_a_notebook_runs_nbval():
    slow = "tests/test_train.py::test_one_step_with_torch_compile_on_the_cpu"
    assert _collected(slow).startswith("1 test collected")
    assert "deselected" in _collected("tests/test_train.py")
    notebook = sorted((ROOT / "notebooks").glob("00_*.ipynb"))[0].relative_to(ROOT)
    assert not _collected(str(notebook)).startswith(("no tests", "0 tests"))


def test_the_os_matrix_covers_every_learners_os_and_the_oldest_python():
    """Linux, macOS on Apple Silicon and Windows, the oldest Python pyproject allows and a newer
    one; each runs doctor, the fast suite, the wheel in a fresh venv and nbval, with no make."""
    yaml = pytest.importorskip("yaml")
    job = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())["jobs"]["os"]
    matrix = job["strategy"]["matrix"]
    assert {"ubuntu-latest", "macos-14", "windows-latest"} <= set(matrix["os"])
    floor = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    assert (
        floor in matrix["python"]
        and max(matrix["python"], key=lambda v: tuple(map(int, v.split(".")))) > floor
    )
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    for part in (
        "lmcore-course doctor",
        "lmcore.course.build.wheel_check",
        "--nbval",
        "pytest -q -n auto tests",
    ):
        assert part in runs, part
    assert not re.search(r"^\s*make ", runs, re.M)  # a stock Windows machine has no make
