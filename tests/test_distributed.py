"""Data-parallel training with torch.distributed on the CPU (gloo, 2 processes): gradients equal
one process on the concatenated batch, and a run trains and resumes, from Python and the CLI."""

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lmcore.model import GPT, GPTConfig

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from ddp_worker import ragged_batch  # noqa: E402

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available(), reason="torch.distributed is not available"
)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (torchrun starts each worker in a session of its own)."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def torchrun(*args, timeout=300):
    """``python -m torch.distributed.run --standalone --nproc_per_node=2 ARGS`` on one thread each.

    On a hang the workers, then the agent, get SIGABRT, so Python's faulthandler prints where
    each one stood, and the test fails with those stacks."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent), "PYTHONFAULTHANDLER": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *args]
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in [*_descendants(proc.pid), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGABRT)
        try:
            stdout, stderr = proc.communicate(timeout=20)
        finally:
            for pid in [*_descendants(proc.pid), proc.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        pytest.fail(
            f"torchrun did not finish in {timeout} s; where each process stood:\n"
            f"{stdout[-3000:]}\n{stderr[-12000:]}"
        )
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def test_two_ranks_give_the_gradients_of_the_concatenated_batch(tmp_path):
    out = tmp_path / "grads.pt"
    torchrun(str(HERE / "ddp_worker.py"), "grads", str(out))
    got = torch.load(out, weights_only=True)
    torch.manual_seed(0)
    ref = GPT(GPTConfig(vocab_size=9, block_size=12, n_layer=1, n_head=2, n_embd=16)).double()
    x, labels = ragged_batch()
    logits = ref(x)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, 9), labels[:, 1:].reshape(-1), ignore_index=-100)
    loss.backward()
    assert got["world_size"] == 2 and got["n"] == int((labels[:, 1:] != -100).sum()) == 27
    assert got["total"] / got["n"] == pytest.approx(loss.item(), abs=1e-9)
    for name, p in ref.named_parameters():
        torch.testing.assert_close(got["grads"][name], p.grad, rtol=0, atol=1e-6, msg=name)
    # control: each rank's own mean, averaged by DDP (11 and 16 targets), is a different gradient
    ref.zero_grad()
    for rows in (slice(0, 2), slice(2, 4)):
        lg = ref(x[rows])
        (F.cross_entropy(lg[:, :-1].reshape(-1, 9), labels[rows, 1:].reshape(-1)) / 2).backward()
    assert (ref.wte.weight.grad - got["grads"]["wte.weight"]).abs().max() > 1e-4


@pytest.mark.slow
def test_two_rank_run_resumes_exactly_and_stops_together_on_nan(tmp_path):
    torchrun(str(HERE / "ddp_worker.py"), "resume", str(tmp_path))
    r = json.loads((tmp_path / "result.json").read_text())
    assert r["status"] == ["finished", "stopped", "finished"]
    assert r["same_weights"] and r["same_history"] and r["steps"] == [0, 2, 4, 6]
    assert r["world_size"] == 2 and r["rank_rng"] == 2
    assert r["tokens"] == 6 * 2 * 2 * 8 * 32  # steps x ranks x grad_accum x batch x block
    assert r["nan"] == ["nan", "stopped at step 3: t"]  # NaN on one rank stops both, same step


@pytest.mark.slow
def test_torchrun_cli_trains_and_resumes(tmp_path):
    out = tmp_path / "cli"
    base = [
        "-m",
        "lmcore.train",
        "--preset",
        "smoke",
        "--corpus",
        "chat-arithmetic",
        "--out",
        str(out),
        "--device",
        "cpu",
    ]
    first = torchrun(*base, "--max-steps", "2")
    summary = json.loads((out / "history.json").read_text())
    assert summary["status"] == "finished" and summary["world_size"] == 2
    assert first.stdout.count("wrote") == 1  # only rank 0 reports
    torchrun(*base, "--max-steps", "4", "--resume")
    summary = json.loads((out / "history.json").read_text())
    assert [r["step"] for r in summary["history"]][-1] == 4
    assert math.isfinite(summary["history"][-1]["val_loss"])
