"""A device must agree with the CPU before it trains (lmcore.train.device_check).

There is no GPU here, so the device is a stand-in: the check's ``forward`` (what the device side
runs) is the model with its logits perturbed, and for train() ``device_needs_check`` is patched
to call the CPU a device. The CPU side stays the real float32 deep copy; the expected losses come
from ``F.cross_entropy`` in float64 on the model's own logits, never from lmcore's loss.
"""

import dataclasses
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import lmcore.train.cli as cli
import lmcore.train.loop as loop
from lmcore.data import load_corpus
from lmcore.model import GPT
from lmcore.train import (
    DeviceDisagreesError,
    check_device_agrees,
    model_config,
    preset,
    train,
    validate_config,
)
from lmcore.train.agreement import TOLERANCES, Tolerance

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def chat():
    return load_corpus("chat-arithmetic", n_documents=400, seed=0)


def smoke(**kw):
    return preset("smoke", progress=False, device="cpu", **kw)


@pytest.fixture
def model(chat):
    torch.manual_seed(0)
    return GPT(model_config(smoke(dropout=0.1), chat.vocab_size))


@pytest.fixture
def batch(chat):
    return chat.batch("train", 8, 32, generator=torch.Generator().manual_seed(1))


def reference_loss(model, batch, rows=4, scale=1.0) -> float:
    """float64 cross-entropy of the first ``rows`` rows, the shift done here, dropout off."""
    b = {k: v[:rows] for k, v in batch.items()}
    was = model.training
    model.eval()
    with torch.no_grad():
        logits = model(b["input_ids"], document_ids=b["document_ids"], position_ids=b["position_ids"])
    model.train(was)
    logits, labels = logits[:, :-1].double() * scale, b["labels"][:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100).item()


def scaled(model, s):
    return lambda ids, **kw: model(ids, **kw) * s


def test_an_unperturbed_device_passes_and_reports_the_cpu_loss(model, batch):
    r = check_device_agrees(model, batch, "cpu")
    assert r.passed and r.precision == "float32" and r.tolerance == TOLERANCES["float32"]
    assert r.loss_cpu == pytest.approx(reference_loss(model, batch), rel=1e-5)
    assert r.loss_device == pytest.approx(r.loss_cpu, rel=1e-6) and r.grad_rel_diff < 1e-6
    assert r.grad_cosine == pytest.approx(1.0, abs=1e-9)
    assert r.targets == int((batch["labels"][:4, 1:] != -100).sum())
    assert "agrees with the CPU" in r.line()


def test_a_perturbed_device_is_refused_naming_the_device_and_the_numbers(model, batch):
    with pytest.raises(DeviceDisagreesError) as err:
        check_device_agrees(model, batch, "cpu", forward=scaled(model, 5.0))
    r, msg = err.value.result, str(err.value)
    expected_device = reference_loss(model, batch, scale=5.0)
    expected_cpu = reference_loss(model, batch)
    assert r.loss_device == pytest.approx(expected_device, rel=1e-4) and not r.passed
    assert r.loss_cpu == pytest.approx(expected_cpu, rel=1e-5)
    assert isinstance(err.value, RuntimeError)
    for part in (
        "cpu (float32) DISAGREES",
        f"loss {expected_device:.4f} vs {expected_cpu:.4f}",
        f"difference {abs(expected_device - expected_cpu):.2e}",
        f"allowed {1e-5 + 1e-4 * expected_cpu:.2e}",
        "TrainConfig(device='cpu')",
        "--device cpu",
        "check_device=False",
    ):
        assert part in msg, (part, msg)


def test_noise_or_nan_on_the_device_is_refused(model, batch):
    g = torch.Generator().manual_seed(0)
    noisy = lambda ids, **kw: (lambda x: x + 0.05 * torch.randn(x.shape, generator=g))(model(ids, **kw))
    assert not check_device_agrees(model, batch, "cpu", forward=noisy, raise_on_failure=False).passed
    r = check_device_agrees(model, batch, "cpu", forward=scaled(model, float("nan")), raise_on_failure=False)
    assert not r.passed and "loss nan" in r.line()


def test_bf16_autocast_passes_its_own_tolerance_and_no_tighter_one(model, batch):
    r = check_device_agrees(model, batch, "cpu", autocast_dtype=torch.bfloat16)
    assert r.passed and r.precision == "bfloat16" and r.tolerance == TOLERANCES["bfloat16"]
    assert 0 < r.grad_rel_diff < 0.02  # bf16 rounding is visible, and far inside 0.15
    strict = check_device_agrees(
        model,
        batch,
        "cpu",
        autocast_dtype=torch.bfloat16,
        tolerance=TOLERANCES["float32"],
        raise_on_failure=False,
    )
    assert not strict.passed  # float32's tolerance would refuse a correct bf16 device


def test_bf16_autocast_refuses_a_perturbation_beyond_its_tolerance(model, batch):
    assert check_device_agrees(
        model, batch, "cpu", autocast_dtype=torch.bfloat16, forward=scaled(model, 1.001)
    ).passed
    with pytest.raises(DeviceDisagreesError, match=r"cpu \(bfloat16\) DISAGREES"):
        check_device_agrees(model, batch, "cpu", autocast_dtype=torch.bfloat16, forward=scaled(model, 1.5))


def test_the_check_leaves_the_model_and_the_random_state_alone(model, batch):
    model.train()
    next(model.parameters()).grad = torch.ones_like(next(model.parameters()))
    state = torch.get_rng_state()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    check_device_agrees(model, batch, "cpu", rows=None)
    assert model.training and torch.equal(torch.get_rng_state(), state)
    assert torch.equal(next(model.parameters()).grad, torch.ones_like(next(model.parameters())))
    assert all(p.grad is None for p in list(model.parameters())[1:])
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


BAD = [
    (dict(model="gpt"), TypeError, "model"),
    (dict(batch=[1, 2]), TypeError, "batch"),
    (dict(batch={"input_ids": torch.zeros(2, 4, dtype=torch.long)}), TypeError, r"batch\['labels'\]"),
    (
        dict(
            batch={
                "input_ids": torch.zeros(2, 4, dtype=torch.long),
                "labels": torch.zeros(2, 3, dtype=torch.long),
            }
        ),
        ValueError,
        "labels",
    ),
    (dict(device=3), TypeError, "device"),
    (dict(device="warp-drive"), ValueError, "device"),
    (dict(device="cuda"), ValueError, "device is cuda but the model's parameters are on cpu"),
    (dict(autocast_dtype=torch.float64), ValueError, "autocast_dtype"),
    (dict(forward=3), TypeError, "forward"),
    (dict(rows=0), ValueError, "rows"),
    (dict(rows=1.5), TypeError, "rows"),
    (dict(tolerance=1e-3), TypeError, "tolerance"),
    (dict(tolerance=Tolerance(-1.0, 0.0, 0.1, 0.9)), ValueError, "tolerance.loss_rtol"),
    (dict(tolerance=Tolerance(0.1, 0.0, 0.1, 2.0)), ValueError, "tolerance.min_cosine"),
]


@pytest.mark.parametrize("bad, error, name", BAD)
def test_bad_arguments_name_the_argument(model, batch, bad, error, name):
    args = dict(model=model, batch=batch, device="cpu") | bad
    with pytest.raises(error, match=name):
        check_device_agrees(args.pop("model"), args.pop("batch"), args.pop("device"), **args)


def test_check_device_is_a_validated_config_field():
    assert smoke().check_device is True
    with pytest.raises(TypeError, match="TrainConfig.check_device"):
        validate_config(smoke(check_device="no"))


@pytest.fixture
def stand_in(monkeypatch):
    """The CPU counts as a device to check; each call's arguments are kept, and ``scale``
    perturbs the device side's logits."""
    state, real = SimpleNamespace(scale=1.0, calls=[]), loop.check_device_agrees
    monkeypatch.setattr(loop, "device_needs_check", lambda device: True)

    def check(model, batch, device, **kw):
        state.calls.append(dict(batch=batch, device=device, **kw))
        return real(model, batch, device, forward=scaled(model, state.scale), **kw)

    monkeypatch.setattr(loop, "check_device_agrees", check)
    return state


def test_train_on_a_disagreeing_device_stops_before_any_step(chat, stand_in, tmp_path):
    stand_in.scale, records = 5.0, []
    with pytest.raises(DeviceDisagreesError, match="DISAGREES"):
        train(smoke(max_steps=4), chat, out_dir=tmp_path, on_eval=records.append)
    assert len(stand_in.calls) == 1 and records == [] and not (tmp_path / "checkpoint.pt").exists()


def test_train_checks_the_first_batch_and_then_trains_as_without_the_check(chat, stand_in, capsys):
    cfg = smoke(max_steps=6, eval_interval=3, dropout=0.1)  # dropout: the global RNG matters
    checked = train(cfg, chat)
    (call,) = stand_in.calls
    first = chat.batch(
        "train", cfg.batch_size, cfg.block_size, generator=torch.Generator().manual_seed(cfg.seed + 1)
    )
    assert all(torch.equal(call["batch"][k], first[k]) for k in first)  # the run's own first batch
    assert call["device"] == torch.device("cpu") and call["autocast_dtype"] is None
    assert checked.device_check.passed and "device check: cpu (float32) agrees" in capsys.readouterr().out
    unchecked = train(dataclasses.replace(cfg, check_device=False), chat)
    assert len(stand_in.calls) == 1 and unchecked.device_check is None
    assert checked.history and [
        {k: h[k] for k in ("step", "train_loss", "val_loss")} for h in checked.history
    ] == [{k: h[k] for k in ("step", "train_loss", "val_loss")} for h in unchecked.history]
    assert all(torch.equal(a, b) for a, b in zip(checked.model.parameters(), unchecked.model.parameters()))


def test_train_on_the_cpu_runs_no_check(chat, monkeypatch):
    monkeypatch.setattr(loop, "check_device_agrees", lambda *a, **k: pytest.fail("checked on the CPU"))
    assert train(smoke(max_steps=2), chat).device_check is None


def test_the_cli_says_why_and_exits_3_or_skips_the_check(monkeypatch, tmp_path, capsys, chat):
    seen = []

    def refuse(cfg, corpus, **kw):
        seen.append(cfg.check_device)
        r = check_device_agrees(
            GPT(model_config(cfg, corpus.vocab_size)),
            corpus.batch("train", 2, 32),
            "cpu",
            raise_on_failure=False,
        )
        raise DeviceDisagreesError(dataclasses.replace(r, loss_device=r.loss_cpu + 1))

    monkeypatch.setattr(cli, "train", refuse)
    monkeypatch.setattr(cli, "load_corpus", lambda name: chat)
    args = ["--preset", "smoke", "--out", str(tmp_path), "--device", "cpu"]
    assert cli.main(args) == 3 and "--device cpu" in capsys.readouterr().err
    assert cli.main([*args, "--no-device-check"]) == 3 and seen == [True, False]


@pytest.mark.parametrize("scale, code", [(1.0, 0), (5.0, 3)])
def test_gpu_check_reports_the_device_check(stand_in, tmp_path, capsys, scale, code):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    stand_in.scale = scale
    out = tmp_path / "out"
    argv = ["--preset", "smoke", "--device", "cpu", "--max-steps", "2", "--sample-tokens", "8"]
    assert gpu_check.main([*argv, "--out", str(out), "--run-dir", str(tmp_path / "run")]) == code
    report, shown = json.loads((out / "gpu_check.json").read_text()), capsys.readouterr()
    assert report["device_check"]["passed"] is (code == 0) and report["device_check"]["device"] == "cpu"
    assert report["status"] == ("finished" if code == 0 else "device_disagrees")
    assert "device check: cpu (float32) " + ("agrees" if code == 0 else "DISAGREES") in shown.out + shown.err
