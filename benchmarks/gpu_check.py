"""One GPU check: train the `gpu` preset within a wall-clock budget, evaluate, write a report.

Sized for a short slot on one GPU (about 15 minutes in all, 10 per command, start-up included):
the whole script, imports and corpus included, stops training when ``--budget-s`` (default
420 s) minus the time it keeps for the final evaluation and the sample has passed, then still
evaluates the final model and samples from the best checkpoint, so it ends within 8 minutes.
It needs only torch and NumPy (no matplotlib, nothing to install): run it from a plain copy of
the repository as ``PYTHONPATH=. python benchmarks/gpu_check.py``.

The arithmetic (the ``plan`` in the report, checked against the measured rate after the first
interval): the `gpu` preset (6 layers, 6 heads, 384 wide, context 256, batch 64, bf16 autocast,
TF32, fused AdamW, on ``python-stdlib``) trains 2000 steps x 16,384 tokens = 32.8M tokens; at
an assumed 150,000 tokens/s (a conservative guess for an H200 without ``torch.compile``; nanoGPT
reports about 450,000 for this size on an A100 with it) that is 218 s, plus 21 evaluations of
20 x 64 x 256 tokens (6.9M tokens forward, about a third of a training token's cost: 15 s),
the corpus (about 10 s), CUDA start-up and the sample: about 4.5 minutes. If the GPU is slower,
the budget stops the run early and the report says so (``status: "stopped"``).

It writes to ``--out`` (default ``benchmarks/results``), rewriting the report at every
evaluation and once more on SIGTERM/SIGINT or an exception, so a run stopped from outside still
leaves one:

* ``gpu_check.json``: status, device, the device check (one batch's loss and gradients against
  the CPU's, :mod:`lmcore.train.device_check`; status ``device_disagrees`` and exit 3, nothing
  trained, when they differ beyond its tolerance), torch, tokens/s, MFU (6N + attention FLOPs per token
  against the device's dense bf16 peak), first loss vs ln V, final (re-evaluated after the
  last step) and best validation loss, bits per token, epochs seen, wall time, peak memory,
  the plan, the history and a short sample from the best checkpoint;
* ``gpu_check_curve.csv``: the loss curve as data (step, tokens, train and val loss, lr,
  tokens/s, seconds since start);
* ``gpu_check_sample.txt``: the sample;
* ``gpu_check_loss.png``: the curves, only where matplotlib imports.

Checkpoints go to ``--run-dir`` (default ``runs/gpu_check``: ``checkpoint.pt``, ``best.pt``).

    PYTHONPATH=. python benchmarks/gpu_check.py                 # CUDA, the gpu preset, <= 8 min
    PYTHONPATH=. python benchmarks/gpu_check.py --budget-s 240 --compile
    PYTHONPATH=. python benchmarks/gpu_check.py --preset smoke --device cpu --out /tmp/check
"""

from __future__ import annotations

import time

T_START = time.perf_counter()  # the budget counts from here: imports and the corpus included

import argparse  # noqa: E402
import csv  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from train_throughput import bf16_peak_tflops  # noqa: E402

from lmcore.data import load_corpus  # noqa: E402
from lmcore.data.tokenizers import ByteTokenizer  # noqa: E402
from lmcore.perplexity import nats_to_bits  # noqa: E402
from lmcore.sample import generate  # noqa: E402
from lmcore.train import DeviceDisagreesError, pick_device, preset, train  # noqa: E402
from lmcore.train.checkpoint import load_model  # noqa: E402
from lmcore.train.devices import autocast_for  # noqa: E402
from lmcore.train.evaluation import evaluate  # noqa: E402

ASSUMED_TOKENS_PER_S = {"cuda": 150_000, "cpu": 5_000}  # for the plan before anything is measured
CURVE_FIELDS = ("step", "tokens", "train_loss", "val_loss", "lr", "tokens_per_s", "elapsed_s")


def elapsed() -> float:
    return time.perf_counter() - T_START


def train_tokens(corpus, block_size: int) -> int:
    """Tokens in one pass over the training split (what one epoch means for this corpus)."""
    if hasattr(corpus, "num_tokens"):
        return corpus.num_tokens("train")
    if isinstance(getattr(corpus, "train", None), torch.Tensor):
        return len(corpus.train)
    return sum(b["input_ids"].numel() for b in corpus.eval_batches("train", 1024, block_size))


def plan(cfg, tokens_per_s: float) -> dict:
    """Seconds the schedule needs at ``tokens_per_s``: training, plus the evaluations (a forward
    pass costs about a third of a training token)."""
    step_tokens = cfg.batch_size * cfg.block_size * cfg.grad_accum
    n_evals = cfg.max_steps // cfg.eval_interval + 2  # the first, every interval, the final one
    eval_tokens = n_evals * (cfg.eval_batches or 0) * cfg.batch_size * cfg.block_size
    train_s = cfg.max_steps * step_tokens / tokens_per_s
    eval_s = eval_tokens / (3 * tokens_per_s)
    return {
        "tokens_per_s": tokens_per_s,
        "step_tokens": step_tokens,
        "max_steps": cfg.max_steps,
        "train_s": train_s,
        "evaluations": n_evals,
        "eval_s": eval_s,
        "total_s": train_s + eval_s,
    }


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)  # never a half-written report


def write_curve(path: Path, history) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CURVE_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(history)


def try_plot(history, ln_v, entropy, title, path: Path) -> bool:
    """The loss-curve PNG where matplotlib imports; False (and nothing written) where it does not."""
    try:
        import matplotlib.pyplot  # noqa: F401  (training.views imports it only when it plots)

        from lmcore.course.training.views import plot_loss_curves
    except ImportError:
        return False
    plot_loss_curves(history, ln_v, entropy, title=title).savefig(path, dpi=120)
    return True


class _Stop(KeyboardInterrupt):
    """SIGTERM, raised where Python is (train() returns its history on a KeyboardInterrupt)."""


def _on_sigterm(signum, frame):
    raise _Stop(f"signal {signum}")


def main(argv=None, started=None):
    """Run the check; the budget counts from ``started`` (the script passes the time of its first
    import), else from this call (a test process imports the module once and calls it many times)."""
    global T_START
    T_START = time.perf_counter() if started is None else started
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="gpu")
    p.add_argument("--corpus", default=None, help="default: the preset's corpus")
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--budget-s", type=float, default=420.0, help="wall-clock budget from the start (default 420)"
    )
    p.add_argument("--max-steps", type=int, default=None, help="schedule length (default: the preset's)")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--sample-tokens", type=int, default=400)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--run-dir", default=str(ROOT / "runs" / "gpu_check"))
    a = p.parse_args(argv)
    device = pick_device(a.device)
    if device.type != "cuda" and a.preset == "gpu":
        print("no CUDA device: this check needs a GPU (use --preset smoke --device cpu for a dry run).")
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    over = {"max_steps": a.max_steps} if a.max_steps else {}
    cfg = preset(a.preset, device=str(device), compile=a.compile, progress=False, **over)
    history: list[dict] = []
    report = {
        "status": "starting",
        "device": name,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "preset": a.preset,
        "compile": a.compile,
        "budget_s": a.budget_s,
        "max_steps": cfg.max_steps,
        "plan": plan(cfg, ASSUMED_TOKENS_PER_S.get(device.type, ASSUMED_TOKENS_PER_S["cpu"])),
        "history": history,
    }

    def save(status=None):
        if status:
            report["status"] = status
        report["wall_s"] = elapsed()
        write_json(out / "gpu_check.json", report)
        write_curve(out / "gpu_check_curve.csv", history)

    old_handler = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        save()
        return _run(a, cfg, device, name, out, report, history, save)
    except KeyboardInterrupt as err:  # SIGINT, or SIGTERM via _on_sigterm, outside train()
        report["message"] = f"stopped from outside ({err or 'SIGINT'}) at {elapsed():.0f} s"
        save("interrupted")
        print(report["message"], file=sys.stderr)
        return 130
    except Exception as err:
        report["error"] = "".join(traceback.format_exception(type(err), err, err.__traceback__))[-4000:]
        save("error")
        raise
    finally:
        signal.signal(signal.SIGTERM, old_handler)


def _run(a, cfg, device, name, out, report, history, save):
    corpus = load_corpus(a.corpus or cfg.corpus)
    ln_v = math.log(corpus.vocab_size)
    unit = "byte" if isinstance(corpus.tokenizer, ByteTokenizer) else "character"
    report.update(corpus=corpus.name, vocab_size=corpus.vocab_size, token_unit=unit, ln_V=ln_v)
    report["corpus_loaded_s"] = elapsed()
    t_train = time.perf_counter()
    marks = {"first_eval_s": None, "step": 0}

    def on_eval(rec):
        rec = dict(rec, elapsed_s=elapsed())
        history.append(rec)
        if marks["first_eval_s"] is None:  # model built, CUDA warm, one evaluation of the train split
            marks["first_eval_s"] = time.perf_counter() - t_train
        elif len(history) == 3:  # the measured rate, against the plan
            report["plan_measured"] = plan(cfg, rec["tokens_per_s"])
        print(
            f"step {rec['step']:5d}  train {rec['train_loss']:.4f}  val {rec['val_loss']:.4f}  "
            f"{rec['tokens_per_s']:.0f} tok/s  {rec['elapsed_s']:.0f} s",
            flush=True,
        )
        save("running")

    def stop(step, model):
        """Stop when what is left of the budget is what the final evaluation and sample need."""
        marks["step"] = step
        reserve = 20.0 + 3 * (marks["first_eval_s"] or 10.0)
        report["reserve_s"] = reserve
        return elapsed() > a.budget_s - reserve

    try:  # train() first checks one batch on the device against the CPU and prints that line
        res = train(cfg, corpus, callback=stop, on_eval=on_eval, out_dir=a.run_dir)
    except DeviceDisagreesError as err:  # nothing trained: the report says why
        report["device_check"] = dict(dataclasses.asdict(err.result), passed=False)
        report["message"] = str(err)
        save("device_disagrees")
        print(err, file=sys.stderr)
        return 3
    check = res.device_check  # None on the CPU (nothing to compare with)
    report["device_check"] = dict(dataclasses.asdict(check), passed=True) if check is not None else None
    report["train_status"] = res.status
    report["message"] = res.message
    if res.status == "interrupted":  # stopped from outside: write what there is, add nothing
        save("interrupted")
        return 130
    h = history
    rates = [r["tokens_per_s"] for r in h[2:]] or [r["tokens_per_s"] for r in h[1:]]
    tok_s = statistics.median(rates) if rates else float("nan")
    model = res.model
    n_train = train_tokens(corpus, cfg.block_size)
    steps_done = marks["step"]
    final_val = h[-1]["val_loss"] if h[-1]["step"] == steps_done else None
    if final_val is None:  # the budget stopped it between evaluations: evaluate the final model
        ev = evaluate(
            model,
            corpus,
            "val",
            batch_size=cfg.batch_size,
            block_size=cfg.block_size,
            max_batches=cfg.eval_batches,
            device=device,
            autocast=autocast_for(device, cfg.dtype),
        )
        final_val = ev.mean_nll
    best_val = res.best_val_loss if res.best_val_loss is not None else final_val
    fpt = model.flops_per_token()
    peak = bf16_peak_tflops(name)
    report.update(
        params=model.num_parameters(),
        steps=steps_done,
        tokens_seen=steps_done * report["plan"]["step_tokens"],
        train_tokens=n_train,
        epochs_seen=steps_done * report["plan"]["step_tokens"] / n_train,
        tokens_per_s=tok_s,
        flops_per_token=fpt,
        bf16_peak_tflops=peak,
        mfu=tok_s * fpt / (peak * 1e12) if peak else None,
        first_val_loss=h[0]["val_loss"],
        first_loss_minus_ln_V=h[0]["val_loss"] - ln_v,
        final_val_loss=final_val,
        best_val_loss=best_val,
        best_step=res.best_step,
        unigram_entropy=corpus.unigram_entropy,
        peak_memory_gib=torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
    )
    report[f"bits_per_{unit}"] = nats_to_bits(best_val)
    save("sampling")
    if res.best_path is not None:  # sample from the best checkpoint
        model, _, _ = load_model(res.best_path, map_location=device)
    g = torch.Generator(device=device).manual_seed(0)
    prompt = torch.tensor(corpus.tokenizer.encode("def ")).to(device)
    sample = corpus.tokenizer.decode(
        generate(model, prompt, a.sample_tokens, temperature=0.8, generator=g).cpu()
    )
    report["sample"] = sample
    (out / "gpu_check_sample.txt").write_text(sample)
    title = f"{a.preset} preset on {corpus.name} ({name})"
    report["plot"] = (
        "gpu_check_loss.png"
        if try_plot(h, ln_v, corpus.unigram_entropy, title, out / "gpu_check_loss.png")
        else None
    )
    save(res.status)  # finished, stopped (by the budget) or nan
    mfu = f"{100 * report['mfu']:.1f}%" if report["mfu"] is not None else "n/a"
    print(
        f"{name}: {tok_s:.0f} tokens/s, MFU {mfu}, first loss {h[0]['val_loss']:.3f} vs ln V "
        f"{ln_v:.3f}, best val {best_val:.3f} nats = {report[f'bits_per_{unit}']:.3f} bits/{unit} "
        f"(step {res.best_step}), final val {final_val:.3f}, {report['epochs_seen']:.2f} epochs, "
        f"{steps_done} of {cfg.max_steps} steps ({report['status']}, {elapsed():.0f} s). Wrote {out}/"
        f"gpu_check.json, gpu_check_curve.csv, gpu_check_sample.txt{', gpu_check_loss.png' if report['plot'] else ''}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(started=T_START))
