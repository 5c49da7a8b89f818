"""Training a :class:`lmcore.model.GPT`: one device-agnostic loop for CPU, CUDA and MPS.

``train(preset("cpu"))`` trains on the Python docs; ``python -m lmcore.train --preset cpu
--corpus python-docs --out runs/NAME`` does the same from a shell and writes the history
(JSON), the checkpoint and a loss plot. On CUDA the same code uses bf16 autocast, TF32 matmuls
and fused AdamW (and ``torch.compile`` if asked).
"""
from __future__ import annotations

import contextlib
import math
from time import perf_counter as _now
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .checkpoint import load_checkpoint, save_checkpoint, tokenizer_state
from .cli import main, plot_history
from .data import load_corpus
from .loss import causal_lm_loss
from .model import GPT, GPTConfig
from .optim import configure_optimizer, lr_at
from .perplexity import PerplexityMeter
from .presets import PRESETS, TrainConfig, autocast_for, pick_device, preset
from .shift import num_valid_targets

__all__ = ["TrainConfig", "PRESETS", "preset", "pick_device", "TrainResult", "train", "evaluate",
           "accumulate_gradients", "plot_history", "main"]


@dataclass
class TrainResult:
    """What :func:`train` returns: the model, one history record per evaluation, and why it ended."""
    model: GPT
    history: list = field(default_factory=list)   # dicts: step, tokens, train_loss, val_loss, lr, tokens_per_s
    status: str = "finished"                      # finished | stopped | interrupted | nan
    message: str = ""
    corpus: object = None
    config: TrainConfig | None = None


def _model_kwargs(batch: dict) -> dict:
    return {k: batch[k] for k in ("document_ids", "position_ids") if k in batch}


def accumulate_gradients(model, micro_batches, autocast=contextlib.nullcontext) -> tuple:
    """Backward over ``micro_batches`` so the gradients equal those of their concatenation.

    Each micro-batch's summed NLL is divided by ``num_items``, the valid targets of *all*
    micro-batches together, not by its own count (that would weight a padded micro-batch like
    a full one). Returns ``(total_nll, num_items)``.
    """
    num_items = sum(num_valid_targets(b["labels"]) for b in micro_batches)
    total = 0.0
    for b in micro_batches:
        with autocast():
            logits = model(b["input_ids"], **_model_kwargs(b))
        if not bool(torch.isfinite(logits).all()):
            raise FloatingPointError("the model produced NaN/inf logits")
        loss = causal_lm_loss(logits, b["labels"], num_items=num_items)
        loss.backward()
        total += float(loss.detach()) * num_items
    return total, num_items


@torch.no_grad()
def evaluate(model, corpus, split: str = "val", *, batch_size: int = 16, block_size: int | None = None,
             max_batches: int | None = 8, device=None, autocast=contextlib.nullcontext):
    """A :class:`PerplexityMeter` over the first ``max_batches`` evaluation batches of ``split``
    (token-weighted: mean_nll, perplexity, bits_per_token). ``block_size`` defaults to the
    model's."""
    device = device or next(model.parameters()).device
    block_size = block_size or model.config.block_size
    was_training = model.training
    model.eval()
    meter = PerplexityMeter()
    for b in corpus.eval_batches(split, batch_size, block_size, max_batches):
        b = {k: v.to(device) for k, v in b.items()}
        with autocast():
            logits = model(b["input_ids"], **_model_kwargs(b))
        meter.update(logits.float(), b["labels"])
    model.train(was_training)
    return meter


def train(config: TrainConfig, corpus=None, *, model: GPT | None = None, out_dir=None,
          resume=None, callback=None, on_eval=None) -> TrainResult:
    """Train and return a :class:`TrainResult` (model, history, status, message).

    ``corpus`` defaults to ``load_corpus(config.corpus)``. With ``out_dir`` a checkpoint is
    written at every evaluation (``checkpoint.pt``); ``resume`` (a checkpoint path) continues a
    run exactly. ``callback(step, model)`` runs after each step; returning True stops the run
    (and saves). ``on_eval(record)`` sees each history record. A NaN/inf loss or gradient
    stops the run before the bad update (the last checkpoint stays); Ctrl-C returns what was
    done so far.
    """
    cfg = config
    corpus = corpus if corpus is not None else load_corpus(cfg.corpus)
    device = pick_device(cfg.device)
    autocast = autocast_for(device, cfg.dtype)
    old_threads = torch.get_num_threads()
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")           # TF32 matmuls
    torch.manual_seed(cfg.seed)
    mcfg = GPTConfig(vocab_size=corpus.vocab_size, block_size=cfg.block_size, n_layer=cfg.n_layer,
                     n_head=cfg.n_head, n_embd=cfg.n_embd, dropout=cfg.dropout)
    model = (model if model is not None else GPT(mcfg)).to(device)
    opt = configure_optimizer(model, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas,
                              device_type=device.type)
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    step, tokens, history = 0, 0, []
    if resume is not None:
        ck = load_checkpoint(resume, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        step, tokens, history = ck["step"], ck["tokens"], list(ck["history"])
        gen.set_state(ck["data_rng"])
        torch.set_rng_state(ck["torch_rng"])
        if device.type == "cuda" and ck.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(ck["cuda_rng"].cpu())
    fwd = torch.compile(model) if cfg.compile else model
    out_dir = Path(out_dir) if out_dir is not None else None
    result = TrainResult(model, history, corpus=corpus, config=cfg)
    ev = dict(batch_size=cfg.batch_size, block_size=cfg.block_size, max_batches=cfg.eval_batches,
              device=device, autocast=autocast)

    def save():
        if out_dir is not None:
            save_checkpoint(out_dir / "checkpoint.pt", model=model.state_dict(),
                            optimizer=opt.state_dict(), step=step, tokens=tokens, history=history,
                            data_rng=gen.get_state(), torch_rng=torch.get_rng_state(),
                            cuda_rng=torch.cuda.get_rng_state() if device.type == "cuda" else None,
                            train_config=asdict(cfg), model_config=asdict(model.config),
                            tokenizer=tokenizer_state(corpus.tokenizer))

    def record(train_loss, lr, tok_s):
        rec = {"step": step, "tokens": tokens, "train_loss": train_loss,
               "val_loss": evaluate(fwd, corpus, "val", **ev).mean_nll, "lr": lr,
               "tokens_per_s": tok_s}
        history.append(rec)
        if on_eval is not None:
            on_eval(rec)

    bar = None
    if cfg.progress:
        try:
            from tqdm.auto import tqdm
            bar = tqdm(total=cfg.max_steps, initial=step, desc="train", leave=False)
        except ImportError:
            pass
    model.train()
    try:
        if not history:
            record(evaluate(fwd, corpus, "train", **ev).mean_nll, 0.0, 0.0)
        run_nll, run_n, t0, t_tokens = 0.0, 0, _now(), 0
        while step < cfg.max_steps:
            lr = lr_at(step, lr=cfg.lr, min_lr=cfg.min_lr, warmup_steps=cfg.warmup_steps,
                       max_steps=cfg.max_steps)
            for g in opt.param_groups:
                g["lr"] = lr
            micro = [{k: v.to(device) for k, v in corpus.batch("train", cfg.batch_size,
                      cfg.block_size, generator=gen).items()} for _ in range(cfg.grad_accum)]
            try:
                nll, n = accumulate_gradients(fwd, micro, autocast)
            except (FloatingPointError, ValueError) as err:
                if "NaN" not in str(err):
                    raise
                nll, n = math.nan, 1
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            if not (math.isfinite(nll) and bool(torch.isfinite(norm))):
                result.status = "nan"
                result.message = (f"stopped at step {step + 1}: the loss or gradient is NaN/inf "
                                  f"(lr {lr:.2e}). The update was not applied; the last good "
                                  "checkpoint (if any) is kept. Try a lower lr or grad_clip.")
                print(result.message)
                break
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            tokens += sum(b["input_ids"].numel() for b in micro)
            t_tokens += sum(b["input_ids"].numel() for b in micro)
            run_nll, run_n = run_nll + nll, run_n + n
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{nll / n:.3f}")
            if step % cfg.eval_interval == 0 or step == cfg.max_steps:
                tok_s = t_tokens / (_now() - t0)
                record(run_nll / run_n, lr, tok_s)
                save()
                run_nll, run_n, t0, t_tokens = 0.0, 0, _now(), 0
            if callback is not None and callback(step, model):
                result.status = "stopped"
                save()
                break
    except KeyboardInterrupt:
        result.status = "interrupted"
        result.message = f"interrupted at step {step}; returning the history so far."
        print(result.message)
    finally:
        if bar is not None:
            bar.close()
        torch.set_num_threads(old_threads)
    model.eval()
    return result


if __name__ == "__main__":
    raise SystemExit(main())
