"""``lmcore-course doctor``: one line per item a learner's machine needs, each failure with its fix.

The device is a stand-in, as in test_device_agreement: ``device_needs_check`` is patched to call
the CPU a device, and the device side's logits are perturbed; the CPU side is the real check.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmcore.course.build import doctor
from lmcore.course.build.doctor import Finding
from lmcore.train.agreement import FALLBACK

ROOT = Path(__file__).resolve().parents[1]


def test_python_below_the_floor_fails_with_its_fix():
    assert doctor.check_python((3, 12, 1)).status == "ok"
    f = doctor.check_python((3, 9, 18))
    assert f.status == "FAIL" and "3.9.18" in f.detail and "3.10" in f.fix


def test_the_floors_are_the_ones_pyproject_declares():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'requires-python = ">={doctor.MIN_PYTHON[0]}.{doctor.MIN_PYTHON[1]}"' in text
    assert f'"torch>={doctor.TORCH_FLOOR[0]}.{doctor.TORCH_FLOOR[1]}"' in text


@pytest.mark.parametrize(
    "version, status", [("2.13.0+cpu", "ok"), ("2.11.0", "ok"), ("2.10.2+cu128", "FAIL")]
)
def test_torch_is_checked_against_the_floor(monkeypatch, version, status):
    monkeypatch.setattr(torch, "__version__", version)
    f = doctor.check_torch()
    assert f.status == status and version in f.detail
    if status == "FAIL":
        assert "torch>=2.11" in f.fix


def test_the_cpu_alone_is_a_warning_that_needs_nothing():
    f = doctor.check_device("cpu")
    assert f.status == "ok" and "cpu" in f.detail
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():  # no GPU here
        assert doctor.check_device("auto").status == "warn"


@pytest.fixture
def stand_in(monkeypatch):
    """The CPU counts as a device; ``state["scale"]`` scales the device side's logits."""
    state, real = {"scale": 1.0}, doctor.check_device_agrees
    monkeypatch.setattr(doctor, "device_needs_check", lambda device: True)

    def check(model, batch, device, **kw):
        return real(model, batch, device, forward=lambda ids, **k: model(ids, **k) * state["scale"], **kw)

    monkeypatch.setattr(doctor, "check_device_agrees", check)
    return state


def test_a_device_that_agrees_with_the_cpu_passes(stand_in):
    f = doctor.check_device("cpu")
    assert f.status == "ok" and "agrees with the CPU" in f.detail


def test_a_perturbed_device_fails_naming_the_difference_and_the_way_back(stand_in):
    stand_in["scale"] = 1.05
    f = doctor.check_device("cpu")
    assert f.status == "FAIL" and "DISAGREES" in f.detail and "cpu" in f.detail
    assert f.fix == FALLBACK and "device='cpu'" in f.line()


def test_a_device_that_cannot_run_the_check_fails_instead_of_crashing(monkeypatch):
    monkeypatch.setattr(doctor, "device_needs_check", lambda device: True)

    def broken(*a, **k):
        raise RuntimeError("CUDA error: no kernel image is available")

    monkeypatch.setattr(doctor, "check_device_agrees", broken)
    f = doctor.check_device("cpu")
    assert f.status == "FAIL" and "no kernel image" in f.detail and f.fix == FALLBACK


def test_a_missing_notebook_package_fails_with_the_install_line(monkeypatch):
    assert doctor.check_notebook_stack().status == "ok"
    monkeypatch.setattr(doctor, "NOTEBOOK_STACK", (*doctor.NOTEBOOK_STACK, "no_such_package_lmcore"))
    f = doctor.check_notebook_stack()
    assert f.status == "FAIL" and "no_such_package_lmcore" in f.detail and "lmcore[course]" in f.fix


def test_widgets_without_jupyterlabs_extension_fail(monkeypatch, tmp_path):
    assert doctor.check_widgets().status == "ok"
    import jupyter_core.paths

    monkeypatch.setattr(jupyter_core.paths, "jupyter_path", lambda *parts: [str(tmp_path)])
    f = doctor.check_widgets()
    assert f.status == "FAIL" and "show as text" in f.detail and "jupyterlab_widgets" in f.fix


def test_a_workspace_where_nothing_can_be_written_fails(monkeypatch, tmp_path):
    assert doctor.check_workspace(tmp_path / "w" / "x").status == "ok"
    assert not (tmp_path / "w").exists()  # the check creates nothing
    (tmp_path / "file").write_text("")
    assert doctor.check_workspace(tmp_path / "file").status == "FAIL"

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(doctor.tempfile, "TemporaryFile", refuse)
    f = doctor.check_workspace(tmp_path)
    assert f.status == "FAIL" and "Permission denied" in f.detail and "--workspace" in f.fix


def test_too_little_disk_fails(tmp_path):
    assert doctor.check_disk(tmp_path, min_gb=1e-9).status == "ok"
    f = doctor.check_disk(tmp_path, min_gb=1e9)
    assert f.status == "FAIL" and "GB free" in f.detail


def test_a_finding_refuses_an_unknown_status_and_shows_a_fix_only_when_needed():
    with pytest.raises(ValueError, match="status"):
        Finding("x", "bad", "")
    assert "->" not in Finding("x", "ok", "fine", "do this").line()
    assert Finding("x", "FAIL", "broken", "do this").line().endswith("-> do this")


def test_the_command_prints_a_line_per_item_and_fails_on_a_failure(monkeypatch, tmp_path, capsys):
    assert doctor.main(["--workspace", str(tmp_path), "--device", "cpu"]) == 0
    out = capsys.readouterr().out.splitlines()
    names = ["python", "torch", "device", "notebooks", "widgets", "workspace", "disk"]
    assert [line.split()[1] for line in out[:-1]] == names and out[-1] == "ready for the course"
    monkeypatch.setattr(
        doctor, "check_disk", lambda folder: Finding("disk", "FAIL", "0 GB free", "free some")
    )
    assert doctor.main(["--workspace", str(tmp_path), "--device", "cpu"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "1 item(s) to fix before the course works"


def test_lmcore_course_doctor_runs_as_a_process(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "lmcore.course.build.command",
            "doctor",
            "--workspace",
            str(tmp_path),
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == "ready for the course"
