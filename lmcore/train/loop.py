"""Training a :class:`lmcore.model.GPT`: one device-agnostic loop for CPU, CUDA and MPS.

``train(preset("cpu"))`` trains on the Python docs; ``python -m lmcore.train --preset cpu
--corpus python-docs --out runs/NAME`` does the same from a shell (:mod:`lmcore.train.cli`)
and writes the history (JSON) and the checkpoints. On CUDA the same code uses bf16 autocast, TF32 matmuls
and fused AdamW (and ``torch.compile`` if asked); under ``torchrun`` it trains data-parallel
(:mod:`lmcore.train.distributed`).

Host-device synchronisations per step, all marked ``# sync`` below: one, the logged loss and
gradient norm read together; plus those inside ``causal_lm_loss``'s input checks.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from time import perf_counter as _now

import torch

from ..data.corpus import load_corpus
from ..model import GPT
from .accumulate import NonFiniteLossError, backward_micro_batches
from .devices import autocast_for, cpu_threads, pick_device
from .distributed import DistContext, all_reduce_sum, any_rank, setup, teardown, wrap_model
from .evaluation import evaluate
from .optim import configure_optimizer, lr_at
from .presets import TrainConfig, model_config, validate_config
from .result import TrainResult, check_run_inputs
from .resume import copy_checkpoint, restore_training_state, save_training_state

__all__ = ["TrainResult", "train"]


def train(
    config: TrainConfig,
    corpus=None,
    *,
    model: GPT | None = None,
    out_dir=None,
    resume=None,
    callback=None,
    on_eval=None,
) -> TrainResult:
    """Train and return a :class:`TrainResult` (model, history, status, message, best).

    ``corpus`` defaults to ``load_corpus(config.corpus)``. With ``out_dir`` the latest state is
    written at every evaluation (``checkpoint.pt``) and, with ``config.keep_best``, a copy at
    each new lowest validation loss (``best.pt``); ``resume`` (a checkpoint path) continues a
    run exactly. ``callback(step, model)`` runs after each step; returning True stops the run
    (and saves). ``on_eval(record)`` sees each history record. A NaN/inf loss or gradient
    stops the run before the bad update (the last checkpoint stays); Ctrl-C returns what was
    done so far. The config is validated first, and the thread count and float32 matmul
    precision are restored on every exit.
    """
    cfg = validate_config(config)
    corpus = corpus if corpus is not None else load_corpus(cfg.corpus)
    out_dir = Path(out_dir) if out_dir is not None else None
    check_run_inputs(cfg, corpus, model, out_dir)
    old_precision = torch.get_float32_matmul_precision()
    threads = contextlib.ExitStack()
    ctx = DistContext()
    bar, clean, ddp, fwd = None, False, None, None
    try:
        ctx = setup(pick_device(cfg.device))
        device = ctx.device
        autocast = autocast_for(device, cfg.dtype)
        threads.enter_context(cpu_threads(cfg.num_threads))  # restored in finally
        if device.type == "cuda":
            torch.set_float32_matmul_precision("high")  # TF32 matmuls
        torch.manual_seed(cfg.seed)  # same init on every rank
        model = (model if model is not None else GPT(model_config(cfg, corpus.vocab_size))).to(device)
        opt = configure_optimizer(
            model, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas, device_type=device.type
        )
        gen = torch.Generator().manual_seed(cfg.seed + 1 + 7919 * ctx.rank)  # own batches per rank
        if ctx.rank:
            torch.manual_seed(cfg.seed + 7919 * ctx.rank)  # own dropout per rank
        step, tokens, history = 0, 0, []
        best_step, best_val = None, None
        if resume is not None:
            ck = restore_training_state(resume, ctx, model=model, opt=opt, gen=gen)
            step, tokens = ck["step"], ck["tokens"]
            history = list(ck["history"]) if ctx.is_main else []  # rank 0 keeps the history
            best_step, best_val = ck.get("best_step"), ck.get("best_val_loss")
        ddp = wrap_model(model, ctx)
        fwd = torch.compile(ddp) if cfg.compile else ddp
        evaluator = model  # uncompiled, no DDP hooks: rank 0 evaluates alone, any batch shape
        result = TrainResult(model, history, corpus=corpus, config=cfg)
        ev = dict(
            batch_size=cfg.batch_size,
            block_size=cfg.block_size,
            max_batches=cfg.eval_batches,
            device=device,
            autocast=autocast,
        )

        def save():
            if out_dir is None:
                return
            save_training_state(
                out_dir / "checkpoint.pt",
                ctx,
                model=model,
                opt=opt,
                gen=gen,
                step=step,
                tokens=tokens,
                history=history,
                cfg=cfg,
                tokenizer=corpus.tokenizer,
                best_step=best_step,
                best_val_loss=best_val,
            )
            if ctx.is_main and cfg.keep_best and best_step == step and step > 0:
                copy_checkpoint(out_dir / "checkpoint.pt", out_dir / "best.pt")

        def record(train_loss, lr, tok_s):
            nonlocal best_step, best_val
            if not ctx.is_main:
                return
            rec = {
                "step": step,
                "tokens": tokens,
                "train_loss": train_loss,
                "val_loss": evaluate(evaluator, corpus, "val", **ev).mean_nll,
                "lr": lr,
                "tokens_per_s": tok_s,
            }
            history.append(rec)
            if step > 0 and (best_val is None or rec["val_loss"] < best_val):
                best_step, best_val = step, rec["val_loss"]
            if on_eval is not None:
                on_eval(rec)

        if cfg.progress and ctx.is_main:
            try:
                from tqdm.auto import tqdm

                bar = tqdm(total=cfg.max_steps, initial=step, desc="train", leave=False)
            except ImportError:
                pass
        model.train()
        try:
            if not history:
                record(evaluate(evaluator, corpus, "train", **ev).mean_nll if ctx.is_main else 0.0, 0.0, 0.0)
            run_nll, run_n, t0, t_tokens = 0.0, 0, _now(), 0
            while step < cfg.max_steps:
                lr = lr_at(
                    step, lr=cfg.lr, min_lr=cfg.min_lr, warmup_steps=cfg.warmup_steps, max_steps=cfg.max_steps
                )
                for g in opt.param_groups:
                    g["lr"] = lr
                micro = [
                    corpus.batch("train", cfg.batch_size, cfg.block_size, generator=gen)
                    for _ in range(cfg.grad_accum)
                ]  # on the host; moved in _backward
                try:
                    nll_t, count_t = backward_micro_batches(fwd, micro, autocast, ctx, device)
                    # max_norm is validated finite and > 0, so a finite norm means finite clipped grads
                    norm_t = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                    stats = torch.stack(
                        [all_reduce_sum(nll_t, ctx), count_t, norm_t.to(nll_t.dtype)]
                    ).tolist()  # sync: the one per step
                    nll, n, norm = stats[0], int(stats[1]), stats[2]
                    if not (math.isfinite(nll) and math.isfinite(norm) and math.isfinite(lr)):
                        raise NonFiniteLossError("the loss or gradient is NaN/inf")
                except NonFiniteLossError:
                    result.status = "nan"
                    result.message = (
                        f"stopped at step {step + 1}: the loss or gradient is NaN/inf "
                        f"(lr {lr:.2e}). The update was not applied; the last good "
                        "checkpoint (if any) is kept. Try a lower lr or grad_clip."
                    )
                    if ctx.is_main:
                        print(result.message)
                    break
                opt.step()
                opt.zero_grad(set_to_none=True)
                step += 1
                step_tokens = sum(b["input_ids"].numel() for b in micro) * ctx.world_size
                tokens += step_tokens
                t_tokens += step_tokens
                run_nll, run_n = run_nll + nll, run_n + n
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{nll / n:.3f}")
                if step % cfg.eval_interval == 0 or step == cfg.max_steps:
                    broken = False
                    try:
                        record(run_nll / run_n, lr, t_tokens / (_now() - t0))
                    except NonFiniteLossError:  # this step's update broke the weights
                        broken = True
                    if any_rank(broken, ctx):  # rank 0 evaluates; all ranks stop together
                        result.status = "nan"
                        result.message = (
                            f"stopped after step {step}: its update (lr {lr:.2e}) "
                            "made the model's outputs NaN/inf. This state was not "
                            "saved; the last good checkpoint (if any) is kept. "
                            "Try a lower lr."
                        )
                        if ctx.is_main:
                            print(result.message)
                        break
                    save()
                    run_nll, run_n, t0, t_tokens = 0.0, 0, _now(), 0
                stop = callback is not None and bool(callback(step, model))
                if callback is not None and any_rank(stop, ctx):  # sync (only with a callback, DDP)
                    result.status = "stopped"
                    save()
                    break
        except KeyboardInterrupt:
            result.status = "interrupted"
            result.message = f"interrupted at step {step}; returning the history so far."
            if ctx.is_main:
                print(result.message)
        result.best_step, result.best_val_loss = best_step, best_val
        if out_dir is not None and cfg.keep_best and (out_dir / "best.pt").exists():
            result.best_path = out_dir / "best.pt"
        clean = result.status != "interrupted"  # an interrupted rank may not meet the others
    finally:
        if bar is not None:
            bar.close()
        threads.close()
        torch.set_float32_matmul_precision(old_precision)
        ddp = fwd = None  # teardown frees DDP's reducer before the process group it uses
        teardown(ctx, clean=clean)
    model.eval()
    return result
