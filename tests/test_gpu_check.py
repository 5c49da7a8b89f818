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
