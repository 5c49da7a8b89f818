"""Training loop: schedule, decay groups, accumulation, evaluation, checkpoints, resume, stops, CLI."""

import copy
import json
import math
import sys

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lmcore.data import load_corpus
from lmcore.model import GPT, GPTConfig
from lmcore.train import accumulate_gradients, evaluate, model_config, preset, train
from lmcore.train.checkpoint import load_model
from lmcore.train.cli import main
from lmcore.train.optim import configure_optimizer, lr_at


@pytest.fixture(scope="module")
def chat():
    return load_corpus("chat-arithmetic", n_documents=400, seed=0)


def smoke(**kw):
    return preset("smoke", progress=False, **kw)


def test_lr_schedule():
    kw = dict(lr=1.0, min_lr=0.1, warmup_steps=10, max_steps=110)
    assert [lr_at(s, **kw) for s in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0])
    assert lr_at(10, **kw) == pytest.approx(1.0)
    assert lr_at(60, **kw) == pytest.approx(0.1 + 0.45)  # cosine midpoint
    assert lr_at(110, **kw) == pytest.approx(0.1) and lr_at(500, **kw) == pytest.approx(0.1)
    vals = [lr_at(s, **kw) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(vals, vals[1:]))


def test_weight_decay_only_on_matrices():
    model = GPT(GPTConfig())
    opt = configure_optimizer(model, lr=1e-3, weight_decay=0.1)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(p.dim() == 2 for p in decay["params"])
    assert {names[id(p)].rsplit(".", 1)[-1] for p in no_decay["params"]} == {"weight", "bias"}
    assert all(p.dim() == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))
    assert sum(p is model.wte.weight for p in decay["params"]) == 1  # tied weight once


def test_accumulated_gradients_equal_the_full_batch_with_uneven_padding():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=9, block_size=12, n_layer=1, n_head=2, n_embd=16))
    x = torch.randint(0, 9, (4, 12))
    labels = x.clone()
    labels[0, 3:] = -100  # micro-batch 1 has 2 + 3 targets, micro-batch 2 has 22
    labels[1, 4:] = -100
    ref_model = GPT(model.config).double()
    ref_model.load_state_dict(model.state_dict())
    logits = ref_model(x)
    ref = F.cross_entropy(logits[:, :-1].reshape(-1, 9), labels[:, 1:].reshape(-1), ignore_index=-100)
    ref.backward()
    micro = [{"input_ids": x[:2], "labels": labels[:2]}, {"input_ids": x[2:], "labels": labels[2:]}]
    total, n = accumulate_gradients(model, micro)
    assert n == 27 and total / n == pytest.approx(float(ref.detach()), rel=1e-5)
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.grad.double(), q.grad, rtol=1e-4, atol=1e-6, msg=name)
    # the naive way (mean per micro-batch, then average) gives a different gradient
    model.zero_grad()
    for b in micro:
        lg = model(b["input_ids"])
        (F.cross_entropy(lg[:, :-1].reshape(-1, 9), b["labels"][:, 1:].reshape(-1)) / 2).backward()
    assert (model.wte.weight.grad.double() - ref_model.wte.weight.grad).abs().max() > 1e-4


def test_evaluate_is_token_weighted(chat):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=chat.vocab_size, block_size=32, n_embd=32)).eval()
    meter = evaluate(model, chat, "val", batch_size=3, block_size=32, max_batches=None)
    tot, cnt = 0.0, 0
    with torch.no_grad():
        for b in chat.eval_batches("val", 3, 32):
            lg = model(b["input_ids"], document_ids=b["document_ids"], position_ids=b["position_ids"])
            tot += float(
                F.cross_entropy(
                    lg[:, :-1].double().reshape(-1, lg.shape[-1]),
                    b["labels"][:, 1:].reshape(-1),
                    reduction="sum",
                )
            )
            cnt += int((b["labels"][:, 1:] != -100).sum())
    assert meter.n_tokens == cnt and meter.mean_nll == pytest.approx(tot / cnt, rel=1e-5)


def test_smoke_preset_lowers_the_loss():
    res = train(smoke())
    h = res.history
    assert res.status == "finished" and [r["step"] for r in h] == [0, 20, 40]
    assert abs(h[0]["val_loss"] - math.log(res.corpus.vocab_size)) < 0.1
    assert h[-1]["val_loss"] < h[0]["val_loss"] - 1.0
    assert h[-1]["tokens"] == 40 * 8 * 32 and h[-1]["lr"] > 0


def test_chat_corpus_trains_with_document_masks_and_bf16_autocast(chat):
    res = train(smoke(n_embd=32, max_steps=30, eval_interval=15, dtype="bfloat16"), chat)
    assert res.status == "finished"
    assert res.history[-1]["val_loss"] < res.history[0]["val_loss"] - 0.5


def test_resume_continues_exactly(chat, tmp_path):
    cfg = smoke(max_steps=16, eval_interval=4, dropout=0.1, grad_accum=2)
    full = train(cfg, chat, out_dir=tmp_path / "a")
    part = train(cfg, chat, out_dir=tmp_path / "b", callback=lambda step, m: step == 6)
    assert part.status == "stopped" and part.history[-1]["step"] == 4
    resumed = train(cfg, chat, out_dir=tmp_path / "b", resume=tmp_path / "b" / "checkpoint.pt")
    for (name, p), q in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(p, q), name
    assert [r["val_loss"] for r in full.history] == [r["val_loss"] for r in resumed.history]
    ck = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    assert ck["step"] == 16
    model, tok, _ = load_model(tmp_path / "b" / "checkpoint.pt")
    x = torch.tensor([tok.encode("<user> 2 + 3 = <assistant>")])
    torch.testing.assert_close(model(x), full.model(x))


def test_nan_stops_and_keeps_last_good_checkpoint(chat, tmp_path, capsys):
    def poison(step, model):
        if step == 5:
            with torch.no_grad():
                model.blocks[0].mlp.c_fc.weight[0, 0] = float("nan")

    res = train(smoke(max_steps=20, eval_interval=4), chat, out_dir=tmp_path, callback=poison)
    assert res.status == "nan" and "NaN" in res.message and "step 6" in res.message
    assert "NaN" in capsys.readouterr().out
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert ck["step"] == 4 and all(torch.isfinite(v).all() for v in ck["model"].values())


def test_keyboard_interrupt_returns_history(chat):
    def interrupt(step, model):
        if step == 3:
            raise KeyboardInterrupt

    res = train(smoke(max_steps=20, eval_interval=2), chat, callback=interrupt)
    assert res.status == "interrupted" and [r["step"] for r in res.history] == [0, 2]


def test_cli_writes_history_and_checkpoint_and_the_course_plots_them(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(["--preset", "smoke", "--corpus", "chat-arithmetic", "--out", str(out), "--max-steps", "10"])
        == 0
    )
    summary = json.loads((out / "history.json").read_text())
    assert summary["status"] == "finished" and summary["history"][-1]["step"] == 10
    assert summary["vocab_size"] == 19 and not (out / "loss.png").exists()  # the core never plots
    assert f"python -m lmcore.course.training.views {out}" in capsys.readouterr().out
    from lmcore.course.training.views import main as plot_main

    assert plot_main([str(out)]) == 0 and (out / "loss.png").stat().st_size > 1000
    assert torch.load(out / "checkpoint.pt", weights_only=True)["step"] == 10


def test_core_imports_without_matplotlib_or_tqdm():
    """Re-import lmcore with matplotlib and tqdm hidden, then put the original modules back."""
    saved = {k: v for k, v in sys.modules.items() if k == "lmcore" or k.startswith("lmcore.")}
    hidden = {k: sys.modules.get(k) for k in ("matplotlib", "matplotlib.pyplot", "tqdm", "tqdm.auto")}
    try:
        for k in saved:
            del sys.modules[k]
        sys.modules.update({k: None for k in hidden})
        import lmcore.data
        import lmcore.sample  # noqa: F401,E401
        import lmcore.train as fresh

        r = fresh.train(fresh.preset("smoke", max_steps=2, eval_interval=1, eval_batches=1))
        assert r.status == "finished" and fresh is not saved["lmcore.train"]
        assert not any(k.startswith("lmcore.course") for k in sys.modules)  # the core never plots
    finally:
        for k in [k for k in sys.modules if k == "lmcore" or k.startswith("lmcore.")]:
            del sys.modules[k]
        sys.modules.update(saved)
        for k, v in hidden.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def test_whole_loop_under_bf16_autocast_on_the_cpu(chat):
    """dtype="bfloat16" runs every forward of train() under autocast (what CUDA does). The first
    loss is then a bf16 measurement: it must sit near ln V and near the float32 loss of the same
    initial weights within bf16's precision (0.05 nats), not within 1e-4."""
    cfg = smoke(n_embd=32, max_steps=20, eval_interval=10, dtype="bfloat16")
    init = GPT(model_config(cfg, chat.vocab_size))
    fp32_first = evaluate(
        init,
        chat,
        "train",
        batch_size=cfg.batch_size,
        block_size=cfg.block_size,
        max_batches=cfg.eval_batches,
    ).mean_nll
    res = train(cfg, chat, model=copy.deepcopy(init))
    first = res.history[0]
    assert res.status == "finished"
    assert abs(first["train_loss"] - fp32_first) < 0.05
    assert abs(first["val_loss"] - math.log(chat.vocab_size)) < 0.1
    assert res.history[-1]["val_loss"] < first["val_loss"] - 0.3


@pytest.mark.slow
def test_one_step_with_torch_compile_on_the_cpu(chat):
    """About 75 s on a busy 2-core machine with a cold inductor cache (C++ codegen of the
    forward and backward graphs; evaluation stays uncompiled), under 20 s warm."""
    pytest.importorskip("torch._inductor")
    res = train(smoke(max_steps=1, eval_interval=1, eval_batches=1, compile=True), chat)
    assert res.status == "finished" and math.isfinite(res.history[-1]["val_loss"])


@pytest.mark.slow
def test_gpu_preset_code_path_on_the_cpu(tmp_path):
    """The `gpu` preset's code path (python-stdlib, 6 x 384, context 256, dropout) for 2 steps on
    the CPU; batch and evaluation shrunk so it takes seconds, not minutes."""
    out = tmp_path / "gpu"
    assert (
        main(
            [
                "--preset",
                "gpu",
                "--corpus",
                "python-stdlib",
                "--device",
                "cpu",
                "--max-steps",
                "2",
                "--batch-size",
                "2",
                "--eval-batches",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    summary = json.loads((out / "history.json").read_text())
    assert summary["corpus"] == "python-stdlib" and summary["history"][-1]["step"] == 2
    assert abs(summary["history"][0]["val_loss"] - math.log(259)) < 0.1
    model, tok, ck = load_model(out / "best.pt")
    assert model.config.n_layer == 6 and model.config.block_size == 256 and ck["step"] == 2


@settings(max_examples=15)
@given(lengths=st.lists(st.integers(1, 10), min_size=2, max_size=6), data=st.data())
def test_accumulation_equals_the_full_batch_for_any_padding_and_split(lengths, data):
    """Rows with any number of real tokens (the rest -100), cut into any consecutive micro-batches:
    accumulate_gradients gives the float64 gradient of F.cross_entropy on the whole batch."""
    torch.manual_seed(len(lengths))
    model = GPT(GPTConfig(vocab_size=7, block_size=10, n_layer=1, n_head=1, n_embd=8)).double()
    x = torch.randint(0, 7, (len(lengths), 10))
    labels = x.clone()
    for row, n in enumerate(lengths):
        labels[row, n:] = -100
    if int((labels[:, 1:] != -100).sum()) == 0:
        labels[0, :2] = x[0, :2]
    cuts = sorted(data.draw(st.sets(st.integers(1, len(lengths) - 1), max_size=len(lengths) - 1)))
    bounds = [0, *cuts, len(lengths)]
    micro = [{"input_ids": x[a:b], "labels": labels[a:b]} for a, b in zip(bounds, bounds[1:])]
    total, n = accumulate_gradients(model, micro)
    got = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    ref = F.cross_entropy(model(x)[:, :-1].reshape(-1, 7), labels[:, 1:].reshape(-1), ignore_index=-100)
    ref.backward()
    assert n == int((labels[:, 1:] != -100).sum()) and total / n == pytest.approx(ref.item(), rel=1e-12)
    for k, p in model.named_parameters():
        torch.testing.assert_close(got[k], p.grad, rtol=1e-10, atol=1e-12, msg=k)
