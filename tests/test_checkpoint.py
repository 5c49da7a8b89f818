"""Checkpoints: every file that is not an lmcore checkpoint is a ValueError naming the file; a
pickle that would run code is refused without suggesting to switch the safety off; models load
on map_location; resume checks model size, world size and RNG states; saves leave no .tmp."""

import os
import pickle
import zipfile

import pytest
import torch

import lmcore.train.checkpoint as ckmod
import lmcore.train.resume as resmod
from lmcore.data import load_corpus
from lmcore.train import preset, train
from lmcore.train.checkpoint import load_checkpoint, load_model, save_checkpoint, tokenizer_state


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo this-should-never-run",))


@pytest.fixture(scope="module")
def chat():
    return load_corpus("chat-arithmetic", n_documents=200, seed=0)


@pytest.fixture(scope="module")
def run(chat, tmp_path_factory):
    """A real 4-step run: (its folder, its checkpoint dict, the config)."""
    out = tmp_path_factory.mktemp("run")
    cfg = preset("smoke", progress=False, max_steps=4, eval_interval=2, eval_batches=1)
    train(cfg, chat, out_dir=out)
    return out, torch.load(out / "checkpoint.pt", weights_only=True), cfg


def _write(path, what, run):
    """Create one kind of not-an-lmcore-checkpoint file at ``path``."""
    out, ck, _ = run
    if what == "random bytes":
        path.write_bytes(bytes(range(256)) * 8)
    elif what == "empty":
        path.write_bytes(b"")
    elif what == "text file":
        path.write_text("step,loss\n1,4.6\n" * 20)
    elif what == "truncated checkpoint":
        data = (out / "checkpoint.pt").read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif what == "zip of text":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("notes.txt", "hello")
    elif what == "another program's state dict":
        torch.save({"layer.weight": torch.ones(2, 2), "layer.bias": torch.zeros(2)}, path)
    elif what == "a list":
        torch.save([1, 2, 3], path)
    elif what == "a tensor":
        torch.save(torch.ones(3), path)
    elif what == "torch file that runs code":
        torch.save({"model": _RunsCode()}, path)
    elif what == "bare pickle that runs code":
        path.write_bytes(pickle.dumps({"model": _RunsCode()}))
    elif what == "bare pickle of a dict":
        path.write_bytes(pickle.dumps({"model": {}, "model_config": {}, "tokenizer": {}}))
    elif what == "another format version":
        torch.save({**ck, "format": "lmcore-checkpoint-v99"}, path)
    else:
        raise AssertionError(what)


NOT_CHECKPOINTS = [
    "random bytes",
    "empty",
    "text file",
    "truncated checkpoint",
    "zip of text",
    "another program's state dict",
    "a list",
    "a tensor",
    "torch file that runs code",
    "bare pickle that runs code",
    "bare pickle of a dict",
    "another format version",
]


@pytest.mark.parametrize("what", NOT_CHECKPOINTS)
@pytest.mark.parametrize("loader", ["load_checkpoint", "load_model"])
def test_not_a_checkpoint_is_a_value_error_naming_the_file(tmp_path, run, what, loader, capfd):
    path = tmp_path / "suspect.pt"
    _write(path, what, run)
    with pytest.raises(ValueError) as info:
        (load_checkpoint if loader == "load_checkpoint" else load_model)(path)
    msg = str(info.value)
    assert str(path) in msg and "not" in msg
    assert "weights_only" not in msg and "weights_only" not in repr(info.value.__cause__)
    if "runs code" in what:
        assert "refused" in msg and "code" in msg and info.value.__cause__ is None
        assert info.value.__context__ is None or info.value.__suppress_context__
    assert "this-should-never-run" not in capfd.readouterr().out


def test_a_folder_and_a_missing_file(tmp_path):
    with pytest.raises(ValueError, match="folder"):
        load_checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        load_checkpoint(tmp_path / "nope.pt")


@pytest.mark.parametrize(
    "damage", ["model_config field", "missing weight", "wrong shape", "tokenizer kind", "char vocabulary"]
)
def test_damaged_lmcore_checkpoint_fails_in_load_model_naming_the_file(tmp_path, run, damage):
    _, ck, _ = run
    ck = {**ck, "model": dict(ck["model"]), "model_config": dict(ck["model_config"])}
    if damage == "model_config field":
        ck["model_config"]["n_wings"] = 2
    elif damage == "missing weight":
        ck["model"].pop("ln_f.weight")
    elif damage == "wrong shape":
        ck["model_config"]["n_embd"] = 64
    elif damage == "tokenizer kind":
        ck["tokenizer"] = {"kind": "unknown"}
    else:
        ck["tokenizer"] = {"kind": "char", "chars": ["b", "a"]}
    path = tmp_path / "damaged.pt"
    torch.save(ck, path)
    with pytest.raises(ValueError, match="damaged.pt"):
        load_model(path)


def test_load_model_builds_on_map_location(run):
    out, _, _ = run
    model, tok, ck = load_model(out / "checkpoint.pt", map_location="meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert model.lm_head.weight is model.wte.weight and not model.training
    cpu_model, _, _ = load_model(out / "checkpoint.pt", map_location=torch.device("cpu"))
    assert {p.device.type for p in cpu_model.parameters()} == {"cpu"}
    torch.testing.assert_close(cpu_model.state_dict()["wte.weight"], ck["model"]["wte.weight"])


def test_failed_save_leaves_no_tmp_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "checkpoint.pt", model={}, model_config={}, tokenizer={})
    before = path.read_bytes()

    def broken_save(obj, f, *a, **k):
        open(f, "wb").write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(ckmod.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, model={}, model_config={}, tokenizer={})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_unknown_tokenizer_refused_at_save_time():
    class Other:
        vocab_size = 3

    with pytest.raises(ValueError, match="Other"):
        tokenizer_state(Other())


# ---- resume -----------------------------------------------------------------------------


def _resume(path, cfg, chat, **kw):
    return train(cfg.__class__(**{**cfg.__dict__, "max_steps": 6, **kw}), chat, resume=path)


def test_resume_from_another_model_size_names_field_and_file(run, chat):
    out, _, cfg = run
    with pytest.raises(ValueError, match=r"n_embd.*") as info:
        _resume(out / "checkpoint.pt", cfg, chat, n_embd=48)
    assert "checkpoint.pt" in str(info.value) and "another model size" in str(info.value)


@pytest.mark.parametrize(
    "key,bad",
    [
        ("data_rng", torch.zeros(10, dtype=torch.int64)),
        ("torch_rng", [1, 2, 3]),
        ("data_rng", None),
        ("torch_rng", torch.zeros(2, 5, dtype=torch.uint8)),
    ],
)
def test_rng_state_that_is_not_a_cpu_byte_tensor(tmp_path, run, chat, key, bad):
    out, ck, cfg = run
    path = tmp_path / "bad_rng.pt"
    torch.save({**ck, key: bad}, path)
    with pytest.raises(ValueError) as info:
        _resume(path, cfg, chat)
    assert key in str(info.value) and "bad_rng.pt" in str(info.value)


def test_resume_needs_the_training_state(tmp_path, run, chat):
    out, ck, cfg = run
    path = tmp_path / "weights_only.pt"
    torch.save({k: ck[k] for k in ("format", "model", "model_config", "tokenizer")}, path)
    with pytest.raises(ValueError, match="optimizer"):
        _resume(path, cfg, chat)


def test_resume_from_another_world_size(tmp_path, run, chat):
    out, ck, cfg = run
    path = tmp_path / "two_ranks.pt"
    torch.save({**ck, "world_size": 2, "rank_rng": [ck, ck]}, path)
    with pytest.raises(ValueError, match="nproc_per_node=2"):
        _resume(path, cfg, chat)


def test_resume_loads_to_the_cpu_and_hands_cpu_byte_states(run, chat, monkeypatch):
    """Whatever the training device, the checkpoint is loaded to the CPU and every RNG state
    reaches set_state as a CPU uint8 tensor (torch's setters accept nothing else). The states
    are first moved to "meta", a stand-in for a device set_state cannot read, when anything but
    the CPU is asked for."""
    out, _, cfg = run
    seen, real_load = [], ckmod.torch.load

    def load(path, map_location=None, **kw):
        seen.append(map_location)
        ck = real_load(path, map_location="cpu", **kw)
        if str(map_location) != "cpu":
            ck = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in ck.items()}
        return ck

    states, real_state, real_set = [], resmod.rng_state, torch.set_rng_state
    monkeypatch.setattr(ckmod.torch, "load", load)
    monkeypatch.setattr(resmod, "rng_state", lambda *a: (states.append(real_state(*a)), states[-1])[1])
    monkeypatch.setattr(torch, "set_rng_state", lambda s: (states.append(s), real_set(s))[1])
    res = _resume(out / "checkpoint.pt", cfg, chat)
    assert res.status == "finished" and res.history[-1]["step"] == 6
    assert seen and all(str(m) == "cpu" for m in seen)
    assert len(states) == 3  # data_rng, torch_rng, and what reached torch.set_rng_state
    assert all(s.device.type == "cpu" and s.dtype == torch.uint8 for s in states)


def test_checkpoint_written_on_cuda_resumes_on_the_cpu(tmp_path, run, chat):
    """A CUDA run stores a cuda_rng state too; on the CPU it is ignored, not an error."""
    out, ck, cfg = run
    path = tmp_path / "from_cuda.pt"
    torch.save(
        {
            **ck,
            "cuda_rng": torch.zeros(16, dtype=torch.uint8),
            "train_config": {**ck["train_config"], "device": "cuda"},
        },
        path,
    )
    res = _resume(path, cfg, chat)
    assert res.status == "finished" and res.history[-1]["step"] == 6
    model, _, _ = load_model(path, map_location="cpu")
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_best_checkpoint_tracks_the_lowest_val_loss(chat, tmp_path):
    cfg = preset("smoke", progress=False, max_steps=8, eval_interval=2, eval_batches=1)
    res = train(cfg, chat, out_dir=tmp_path)
    later = res.history[1:]
    best = min(later, key=lambda r: r["val_loss"])
    assert (res.best_step, res.best_val_loss) == (best["step"], best["val_loss"])
    assert res.best_path == tmp_path / "best.pt"
    ck = load_checkpoint(res.best_path)
    assert ck["step"] == best["step"] and ck["best_val_loss"] == best["val_loss"]
    assert load_checkpoint(tmp_path / "checkpoint.pt")["step"] == 8
    assert not list(tmp_path.glob("*.tmp"))
    res2 = train(cfg.__class__(**{**cfg.__dict__, "keep_best": False}), chat, out_dir=tmp_path / "nb")
    assert res2.best_path is None and not (tmp_path / "nb" / "best.pt").exists()
    assert res2.best_step == res.best_step


def test_resume_keeps_tracking_the_best(chat, tmp_path):
    cfg = preset("smoke", progress=False, max_steps=8, eval_interval=2, eval_batches=1)
    full = train(cfg, chat, out_dir=tmp_path / "a")
    train(cfg, chat, out_dir=tmp_path / "b", callback=lambda s, m: s == 4)
    resumed = train(cfg, chat, out_dir=tmp_path / "b", resume=tmp_path / "b" / "checkpoint.pt")
    assert (resumed.best_step, resumed.best_val_loss) == (full.best_step, full.best_val_loss)
    assert load_checkpoint(tmp_path / "b" / "best.pt")["step"] == full.best_step
    assert resmod.load_checkpoint is ckmod.load_checkpoint
