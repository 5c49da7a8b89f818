"""benchmarks/gpu_check.py stays runnable without a GPU: its dry run (smoke preset, CPU) writes
a report with the fields the README promises, epochs seen and the best validation loss included."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_dry_run_writes_the_report(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    assert (
        gpu_check.main(
            [
                "--preset",
                "smoke",
                "--device",
                "cpu",
                "--max-steps",
                "20",
                "--out",
                str(tmp_path / "out"),
                "--run-dir",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    r = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    for key in (
        "tokens_per_s",
        "mfu",
        "first_val_loss",
        "ln_V",
        "best_val_loss",
        "best_step",
        "bits_per_character",
        "epochs_seen",
        "train_tokens",
        "sample",
    ):
        assert key in r, key
    assert r["best_val_loss"] == min(h["val_loss"] for h in r["history"][1:])
    assert r["epochs_seen"] == pytest.approx(r["tokens_seen"] / r["train_tokens"])
    assert (tmp_path / "run" / "best.pt").exists() and (tmp_path / "out" / "gpu_check_loss.png").exists()


def test_gpu_check_refuses_the_gpu_preset_without_cuda(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    assert gpu_check.main(["--device", "cpu"]) == 2
    assert "needs a GPU" in capsys.readouterr().out


# The rehearsal of the GPU machine (torch 2.11 there; `make test-torch TORCH=2.11.0` runs this
# file on it): a plain copy of lmcore/ and benchmarks/, PYTHONPATH=., matplotlib unimportable.
NO_MATPLOTLIB = (
    "import runpy, sys; sys.modules['matplotlib'] = None; sys.argv = ['gpu_check.py', *sys.argv[1:]]; "
    "runpy.run_path('benchmarks/gpu_check.py', run_name='__main__')"
)


def plain_copy(tmp_path):
    """lmcore/ and benchmarks/ as a plain folder (no install, no egg-info, no caches)."""
    import shutil

    copy = tmp_path / "repo"
    for d in ("lmcore", "benchmarks"):
        shutil.copytree(
            ROOT / d, copy / d, ignore=shutil.ignore_patterns("__pycache__", "results", "*.egg-info")
        )
    return copy


def run_check(copy, *args, **popen):
    import os
    import subprocess

    env = dict(os.environ, PYTHONPATH=".", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-c", NO_MATPLOTLIB, "--preset", "smoke", "--device", "cpu", "--out", "out", *args]
    return subprocess.Popen(
        cmd, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen
    )


def test_gpu_check_runs_from_a_plain_copy_without_matplotlib_and_stops_at_its_budget(tmp_path):
    copy = plain_copy(tmp_path)
    # A budget already spent: the first step's callback stops the run (it never reaches an
    # evaluation), and the final model is still evaluated and sampled.
    proc = run_check(copy, "--budget-s", "0", "--max-steps", "1000", "--sample-tokens", "20")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    r = json.loads((copy / "out" / "gpu_check.json").read_text())
    assert r["status"] == "stopped" and r["steps"] == 1 and r["max_steps"] == 1000, r["status"]
    assert r["plot"] is None and not (copy / "out" / "gpu_check_loss.png").exists()
    assert [h["step"] for h in r["history"]] == [0]  # only the first evaluation ran in the loop
    assert r["final_val_loss"] != r["first_val_loss"]  # re-evaluated after the step, not copied
    assert r["torch"] == __import__("torch").__version__
    curve = (copy / "out" / "gpu_check_curve.csv").read_text().splitlines()
    assert curve[0].split(",")[:4] == ["step", "tokens", "train_loss", "val_loss"] and len(curve) == 2
    assert (copy / "out" / "gpu_check_sample.txt").read_text()


def test_gpu_check_writes_its_report_when_stopped_by_sigterm(tmp_path):
    import signal
    import time

    copy = plain_copy(tmp_path)
    proc = run_check(copy, "--max-steps", "100000", "--budget-s", "3600")
    report = copy / "out" / "gpu_check.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if report.exists() and json.loads(report.read_text())["status"] == "running":
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    r = json.loads(report.read_text())
    assert r["status"] == "interrupted" and r["history"] and r["history"][0]["step"] == 0
    assert (copy / "out" / "gpu_check_curve.csv").exists()


def test_gpu_check_called_again_counts_its_budget_from_the_call(tmp_path, monkeypatch):
    # A test process imports the module once: an import long ago must not spend a later call's
    # budget (CI stopped a 20-step dry run after one step when the import was 555 s old).
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    monkeypatch.setattr(gpu_check, "T_START", gpu_check.T_START - 10_000.0)
    argv = ["--preset", "smoke", "--device", "cpu", "--max-steps", "3", "--sample-tokens", "5"]
    assert gpu_check.main([*argv, "--out", str(tmp_path / "o"), "--run-dir", str(tmp_path / "r")]) == 0
    r = json.loads((tmp_path / "o" / "gpu_check.json").read_text())
    assert r["status"] != "stopped" and r["wall_s"] < 10_000.0
