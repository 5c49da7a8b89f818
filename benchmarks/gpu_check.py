"""One GPU check: train the `gpu` preset (or until a time budget) and write a report + figure.

On a CUDA machine this trains lmcore's GPT at the scale of nanoGPT's Shakespeare-character run
(6 layers, 6 heads, 384 wide, context 256, batch 64, bf16 autocast, TF32, fused AdamW) on the
preset's corpus (``python-stdlib``: the interpreter's standard-library source as UTF-8 bytes),
keeping the checkpoint with the best validation loss (``--run-dir``, default
``runs/gpu_check``: ``checkpoint.pt``, ``best.pt``; not committed), and writes to ``--out``
(default ``benchmarks/results``):

* ``gpu_check.json``: device, torch version, tokens/s, MFU (6N + attention FLOPs per token
  against the device's dense bf16 peak), first loss vs ln V, final and best validation loss,
  bits per token (per byte on python-stdlib, per character on python-docs), epochs seen, wall
  time, peak memory, the history and a short sample from the best checkpoint;
* ``gpu_check_loss.png``: the loss curves;
* ``gpu_check_sample.txt``: the sample.

    python benchmarks/gpu_check.py                          # CUDA, the whole preset (<= 900 s)
    python benchmarks/gpu_check.py --budget-s 300 --compile
    python benchmarks/gpu_check.py --preset smoke --device cpu --out /tmp/check   # dry run
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from train_throughput import bf16_peak_tflops  # noqa: E402

from lmcore.course.training_views import plot_loss_curves  # noqa: E402
from lmcore.data import load_corpus  # noqa: E402
from lmcore.data.tokenizers import ByteTokenizer  # noqa: E402
from lmcore.perplexity import nats_to_bits  # noqa: E402
from lmcore.sample import generate  # noqa: E402
from lmcore.train import pick_device, preset, train  # noqa: E402
from lmcore.train.checkpoint import load_model  # noqa: E402


def train_tokens(corpus, block_size: int) -> int:
    """Tokens in one pass over the training split (what one epoch means for this corpus)."""
    if hasattr(corpus, "num_tokens"):
        return corpus.num_tokens("train")
    if isinstance(getattr(corpus, "train", None), torch.Tensor):
        return len(corpus.train)
    return sum(b["input_ids"].numel() for b in corpus.eval_batches("train", 1024, block_size))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="gpu")
    p.add_argument("--corpus", default=None, help="default: the preset's corpus")
    p.add_argument("--device", default="auto")
    p.add_argument("--budget-s", type=float, default=900.0, help="stop training after this long")
    p.add_argument("--max-steps", type=int, default=None, help="schedule length (default: the preset's)")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--run-dir", default=str(ROOT / "runs" / "gpu_check"))
    a = p.parse_args(argv)
    device = pick_device(a.device)
    if device.type != "cuda" and a.preset == "gpu":
        print("no CUDA device: this check needs a GPU (use --preset smoke --device cpu for a dry run).")
        return 2
    over = {"max_steps": a.max_steps} if a.max_steps else {}
    cfg = preset(a.preset, device=str(device), compile=a.compile, progress=False, **over)
    corpus = load_corpus(a.corpus or cfg.corpus)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    stop = lambda step, model: time.perf_counter() - t0 > a.budget_s
    show = lambda r: print(
        f"step {r['step']:5d}  train {r['train_loss']:.4f}  val {r['val_loss']:.4f}  "
        f"{r['tokens_per_s']:.0f} tok/s  {time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    res = train(cfg, corpus, callback=stop, on_eval=show, out_dir=a.run_dir)
    wall = time.perf_counter() - t0
    h = res.history
    rates = [r["tokens_per_s"] for r in h[2:]] or [r["tokens_per_s"] for r in h[1:]]
    tok_s = statistics.median(rates) if rates else float("nan")
    model = res.model
    if res.best_path is not None:  # sample from the best checkpoint
        model, _, _ = load_model(res.best_path, map_location=device)
    fpt = model.flops_per_token()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak = bf16_peak_tflops(name)
    ln_v = math.log(corpus.vocab_size)
    g = torch.Generator(device=device).manual_seed(0)
    prompt = torch.tensor(corpus.tokenizer.encode("def ")).to(device)
    sample = corpus.tokenizer.decode(generate(model, prompt, 400, temperature=0.8, generator=g).cpu())
    unit = "byte" if isinstance(corpus.tokenizer, ByteTokenizer) else "character"
    n_train = train_tokens(corpus, cfg.block_size)
    best_val = res.best_val_loss if res.best_val_loss is not None else h[-1]["val_loss"]
    report = {
        "device": name,
        "torch": torch.__version__,
        "preset": a.preset,
        "compile": a.compile,
        "corpus": corpus.name,
        "vocab_size": corpus.vocab_size,
        "token_unit": unit,
        "params": model.num_parameters(),
        "status": res.status,
        "steps": h[-1]["step"],
        "max_steps": cfg.max_steps,
        "tokens_seen": h[-1]["tokens"],
        "train_tokens": n_train,
        "epochs_seen": h[-1]["tokens"] / n_train,
        "wall_s": wall,
        "budget_s": a.budget_s,
        "tokens_per_s": tok_s,
        "flops_per_token": fpt,
        "bf16_peak_tflops": peak,
        "mfu": tok_s * fpt / (peak * 1e12) if peak else None,
        "first_val_loss": h[0]["val_loss"],
        "ln_V": ln_v,
        "first_loss_minus_ln_V": h[0]["val_loss"] - ln_v,
        "final_val_loss": h[-1]["val_loss"],
        "best_val_loss": best_val,
        "best_step": res.best_step,
        "unigram_entropy": corpus.unigram_entropy,
        f"bits_per_{unit}": nats_to_bits(best_val),
        "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        "history": h,
        "sample": sample,
    }
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1))
    (out / "gpu_check_sample.txt").write_text(sample)
    fig = plot_loss_curves(
        h, ln_v, corpus.unigram_entropy, title=f"{a.preset} preset on {corpus.name} ({name})"
    )
    fig.savefig(out / "gpu_check_loss.png", dpi=120)
    mfu = f"{100 * report['mfu']:.1f}%" if report["mfu"] is not None else "n/a"
    print(
        f"{name}: {tok_s:.0f} tokens/s, MFU {mfu}, first loss {h[0]['val_loss']:.3f} vs ln V "
        f"{ln_v:.3f}, best val {best_val:.3f} nats = {report[f'bits_per_{unit}']:.3f} bits/{unit} "
        f"(step {res.best_step}), {report['epochs_seen']:.2f} epochs, {report['steps']} steps "
        f"({wall:.0f} s). Wrote {out}/gpu_check.json, gpu_check_loss.png, gpu_check_sample.txt"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
