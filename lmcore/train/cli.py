"""The command line of :mod:`lmcore.train` (``python -m lmcore.train`` or ``lmcore-train``).

``python -m lmcore.train --preset cpu --corpus python-docs --out runs/NAME`` prints progress
and writes ``history.json``, ``checkpoint.pt`` and ``best.pt`` to ``--out``; the loss plot is
drawn on the course side: ``python -m lmcore.course.training.views runs/NAME`` (matplotlib).
Under ``torchrun --nproc_per_node=K -m lmcore.train ...`` it trains data-parallel on K
processes; only rank 0 prints and writes. Off the CPU, a device whose loss and gradients are
not the CPU's exits 3 before any step, saying so (``--no-device-check`` skips that check).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from ..data.corpus import load_corpus
from .agreement import DeviceDisagreesError
from .devices import pick_device
from .loop import train
from .presets import PRESETS, preset

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    """The options of ``python -m lmcore.train``."""
    p = argparse.ArgumentParser(prog="python -m lmcore.train", description="Train a small GPT with lmcore.")
    p.add_argument("--preset", default="cpu", choices=sorted(PRESETS))
    p.add_argument(
        "--corpus",
        default=None,
        help="python-docs | python-stdlib | chat-arithmetic | tinyshakespeare | a UTF-8 file path",
    )
    p.add_argument("--out", required=True, help="output folder (history.json, checkpoint.pt, best.pt)")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None, help="sequences per micro-batch and rank")
    p.add_argument("--eval-batches", type=int, default=None, help="batches per evaluation")
    p.add_argument("--device", default=None)
    p.add_argument("--compile", action="store_true")
    p.add_argument(
        "--no-device-check",
        action="store_true",
        help="off the CPU, train without first checking one batch's loss and gradients against the CPU's",
    )
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    return p


def main(argv=None):
    a = _parser().parse_args(argv)
    over = {
        k: v
        for k, v in (
            ("max_steps", a.max_steps),
            ("device", a.device),
            ("batch_size", a.batch_size),
            ("eval_batches", a.eval_batches),
        )
        if v is not None
    }
    cfg = preset(a.preset, compile=a.compile, check_device=not a.no_device_check, **over)
    name = a.corpus or cfg.corpus
    corpus = load_corpus("file", path=name) if Path(name).is_file() else load_corpus(name)
    out = Path(a.out)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    main_rank = rank == 0
    if main_rank:
        out.mkdir(parents=True, exist_ok=True)
        print(f"{corpus}\ndevice {pick_device(cfg.device)}, preset {a.preset}, processes {world}")
    try:
        from tqdm.auto import tqdm

        write = tqdm.write  # keeps the progress bar intact
    except ImportError:
        write = print
    show = lambda r: write(
        f"step {r['step']:5d}  tokens {r['tokens']:9d}  train {r['train_loss']:.4f}  "
        f"val {r['val_loss']:.4f}  lr {r['lr']:.2e}  {r['tokens_per_s']:.0f} tok/s"
    )
    t0 = time.perf_counter()
    try:
        res = train(
            cfg, corpus, out_dir=out, on_eval=show, resume=out / "checkpoint.pt" if a.resume else None
        )
    except DeviceDisagreesError as err:  # nothing trained: say why and how to go on, no traceback
        print(err, file=sys.stderr)
        return 3
    wall = time.perf_counter() - t0
    if not main_rank:
        return 0 if res.status in ("finished", "stopped") else 1
    summary = {
        "status": res.status,
        "message": res.message,
        "wall_s": wall,
        "preset": a.preset,
        "corpus": corpus.name,
        "vocab_size": corpus.vocab_size,
        "unigram_entropy": corpus.unigram_entropy,
        "world_size": world,
        "best_step": res.best_step,
        "best_val_loss": res.best_val_loss,
        "device_check": asdict(res.device_check) if res.device_check is not None else None,
        "config": asdict(cfg),
        "history": res.history,
    }
    (out / "history.json").write_text(json.dumps(summary, indent=1))
    last = res.history[-1]["val_loss"] if res.history else float("nan")
    best = f" (best {res.best_val_loss:.4f} at step {res.best_step}: best.pt)" if res.best_path else ""
    print(
        f"{res.status} in {wall:.1f} s: val loss {last:.4f} nats{best} vs unigram entropy "
        f"{corpus.unigram_entropy:.4f}; wrote {out}/history.json and checkpoint.pt (plot: "
        f"python -m lmcore.course.training.views {out})"
    )
    return 0 if res.status in ("finished", "stopped") else 1
