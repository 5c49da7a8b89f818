"""Training a :class:`lmcore.model.GPT`: one device-agnostic loop for CPU, CUDA and MPS.

``train(preset("cpu"))`` trains on the Python docs; ``python -m lmcore.train --preset cpu
--corpus python-docs --out runs/NAME`` does the same from a shell (:mod:`lmcore.train.cli`)
and writes the history (JSON) and the checkpoints. On CUDA the same code uses bf16 autocast, TF32 matmuls
and fused AdamW (and ``torch.compile`` if asked); under ``torchrun`` it trains data-parallel
(:mod:`lmcore.train.distributed`). Off the CPU it first checks that the device computes one
batch's loss and gradients as the CPU does (:mod:`lmcore.train.device_check`), and refuses to
train when it does not.

:func:`train` reads as the page of a run, each step a function below it: set-up, resume, the
step loop (learning rate, update, evaluation and saving, callback), teardown; the steps share one
private ``_Run`` (the model, optimiser, counters, history and best).

Host-device synchronisations per step, all marked ``# sync`` below: one, the logged loss and
gradient norm read together; plus those inside ``causal_lm_loss``'s input checks.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter as _now

import torch

from ..data.corpus import load_corpus
from ..model import GPT
from .accumulate import NonFiniteLossError, backward_micro_batches
from .agreement import DeviceDisagreesError
from .device_check import check_device_agrees, device_needs_check
from .devices import autocast_dtype, autocast_for, cpu_threads, pick_device
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
    precision are restored on every exit. On any device but the CPU (unless
    ``config.check_device`` is False) the first training batch's loss and gradients are first
    computed there and on the CPU; :class:`~lmcore.train.agreement.DeviceDisagreesError` is raised,
    before any step, when they differ beyond the tolerance (the result's ``device_check``).
    """
    cfg = validate_config(config)
    corpus = corpus if corpus is not None else load_corpus(cfg.corpus)
    out_dir = Path(out_dir) if out_dir is not None else None
    check_run_inputs(cfg, corpus, model, out_dir)
    old_precision = torch.get_float32_matmul_precision()
    threads = contextlib.ExitStack()
    ctx, run, clean = DistContext(), None, False
    try:
        ctx = setup(pick_device(cfg.device))
        run = _set_up(cfg, corpus, model, ctx, threads, out_dir, on_eval)
        if resume is not None:
            _resume(run, resume)
        _check_device(run)
        _start(run)
        try:
            _step_loop(run, callback)
        except KeyboardInterrupt:
            _interrupted(run)
        _finish(run)
        clean = run.result.status != "interrupted"  # an interrupted rank may not meet the others
    finally:
        _teardown(run, ctx, threads, old_precision, clean)
    run.model.eval()
    return run.result


@dataclass
class _Run:
    """What the steps of one run share: set up once, then advanced by the step loop."""

    cfg: TrainConfig
    corpus: object
    ctx: DistContext
    model: GPT
    opt: torch.optim.Optimizer
    gen: torch.Generator  # draws the training batches
    autocast: object
    out_dir: Path | None
    on_eval: object
    step: int = 0
    tokens: int = 0
    history: list = field(default_factory=list)
    best_step: int | None = None
    best_val: float | None = None
    ddp: object = None  # the model as the step calls it: DDP-wrapped under torchrun
    fwd: object = None  # ddp, compiled if cfg.compile
    result: TrainResult | None = None
    bar: object = None
    device_check: object = None  # the DeviceAgreement of the device check, if one ran
    # the window since the last evaluation: its summed NLL, target count, start time, tokens
    win_nll: float = 0.0
    win_n: int = 0
    win_t0: float = 0.0
    win_tokens: int = 0

    def evaluate(self, split: str) -> float:
        """The mean NLL of ``split``'s evaluation windows, as every record measures it."""
        cfg = self.cfg
        return evaluate(
            self.model,  # uncompiled, no DDP hooks: rank 0 evaluates alone, any batch shape
            self.corpus,
            split,
            batch_size=cfg.batch_size,
            block_size=cfg.block_size,
            max_batches=cfg.eval_batches,
            device=self.ctx.device,
            autocast=self.autocast,
        ).mean_nll


def _set_up(cfg, corpus, model, ctx, threads, out_dir, on_eval) -> _Run:
    """Device settings, the seeded model, the optimiser and each rank's batch generator.

    Threads go on ``threads`` (closed by the teardown); TF32 matmuls on CUDA. Every rank
    builds the same initial model from ``cfg.seed``, then draws its own batches and (past rank
    0) its own dropout.
    """
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
    return _Run(cfg, corpus, ctx, model, opt, gen, autocast, out_dir, on_eval)


def _resume(run: _Run, path) -> None:
    """Continue from the checkpoint at ``path``: weights, optimiser, generators, counters, best."""
    ck = restore_training_state(path, run.ctx, model=run.model, opt=run.opt, gen=run.gen)
    run.step, run.tokens = ck["step"], ck["tokens"]
    run.history = list(ck["history"]) if run.ctx.is_main else []  # rank 0 keeps the history
    run.best_step, run.best_val = ck.get("best_step"), ck.get("best_val_loss")


def _check_device(run: _Run) -> None:
    """Off the CPU (unless ``cfg.check_device`` is False): raise :class:`DeviceDisagreesError`
    unless the first step's first micro-batch gives the CPU's loss and gradients on the device.
    The batch is drawn with a copy of the batch generator and the check draws no random number,
    so the run trains on the same batches, from the same state, as without it."""
    cfg, ctx = run.cfg, run.ctx
    if not (cfg.check_device and device_needs_check(ctx.device)):
        return
    gen = torch.Generator()
    gen.set_state(run.gen.get_state())  # run.gen itself is not advanced
    batch = run.corpus.batch("train", cfg.batch_size, cfg.block_size, generator=gen)
    dtype = autocast_dtype(ctx.device, cfg.dtype)  # the dtype run.autocast casts to
    result = check_device_agrees(run.model, batch, ctx.device, autocast_dtype=dtype, raise_on_failure=False)
    if any_rank(not result.passed, ctx):  # every rank stops, none waits for the others
        if result.passed:
            raise RuntimeError(
                f"rank {ctx.rank}: another rank's device disagrees with the CPU (see its error)."
            )
        raise DeviceDisagreesError(result)
    run.device_check = result
    if ctx.is_main:
        print(result.line())


def _start(run: _Run) -> None:
    """Wrap the model for the step (DDP, compile), make the result and the progress bar."""
    cfg = run.cfg
    run.ddp = wrap_model(run.model, run.ctx)
    run.fwd = torch.compile(run.ddp) if cfg.compile else run.ddp
    run.result = TrainResult(run.model, run.history, corpus=run.corpus, config=cfg)
    if cfg.progress and run.ctx.is_main:
        try:
            from tqdm.auto import tqdm

            run.bar = tqdm(
                total=cfg.max_steps, initial=run.step, desc="train", unit="step", leave=False, mininterval=1.0
            )  # steps of total, rate, time left; redrawn at most once a second
        except ImportError:
            pass
    run.model.train()


def _step_loop(run: _Run, callback) -> None:
    """Record step 0 (unless resumed), then optimiser steps until max_steps or a stop.

    Each step: set the learning rate, update (or stop on a NaN/inf loss or gradient), evaluate
    and save every ``eval_interval`` steps and at the last, then ask the callback.
    """
    cfg = run.cfg
    if not run.history:
        _record(run, run.evaluate("train") if run.ctx.is_main else 0.0, 0.0, 0.0)
    _reset_window(run)
    while run.step < cfg.max_steps:
        lr = _set_lr(run)
        if not _update(run, lr):
            break
        at_eval = run.step % cfg.eval_interval == 0 or run.step == cfg.max_steps
        if at_eval and not _evaluate_and_save(run, lr):
            break
        if _callback_stops(run, callback):
            break


def _set_lr(run: _Run) -> float:
    """This step's learning rate (warmup, then cosine), set on every parameter group."""
    cfg = run.cfg
    lr = lr_at(run.step, lr=cfg.lr, min_lr=cfg.min_lr, warmup_steps=cfg.warmup_steps, max_steps=cfg.max_steps)
    for g in run.opt.param_groups:
        g["lr"] = lr
    return lr


def _update(run: _Run, lr: float) -> bool:
    """One optimiser step over ``grad_accum`` micro-batches; False (and status 'nan') if the
    loss, the gradient norm or the lr is NaN/inf, in which case the update is not applied."""
    cfg, ctx = run.cfg, run.ctx
    micro = [
        run.corpus.batch("train", cfg.batch_size, cfg.block_size, generator=run.gen)
        for _ in range(cfg.grad_accum)
    ]  # on the host; backward_micro_batches moves them
    try:
        nll_t, count_t = backward_micro_batches(run.fwd, micro, run.autocast, ctx, ctx.device)
        # max_norm is validated finite and > 0, so a finite norm means finite clipped grads
        norm_t = torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip)
        stats = torch.stack(
            [all_reduce_sum(nll_t, ctx), count_t, norm_t.to(nll_t.dtype)]
        ).tolist()  # sync: the one per step
        nll, n, norm = stats[0], int(stats[1]), stats[2]
        if not (math.isfinite(nll) and math.isfinite(norm) and math.isfinite(lr)):
            raise NonFiniteLossError("the loss or gradient is NaN/inf")
    except NonFiniteLossError:
        _stop_nan(
            run,
            f"stopped at step {run.step + 1}: the loss or gradient is NaN/inf "
            f"(lr {lr:.2e}). The update was not applied; the last good "
            "checkpoint (if any) is kept. Try a lower lr or grad_clip.",
        )
        return False
    run.opt.step()
    run.opt.zero_grad(set_to_none=True)
    run.step += 1
    step_tokens = sum(b["input_ids"].numel() for b in micro) * ctx.world_size
    run.tokens += step_tokens
    run.win_tokens += step_tokens
    run.win_nll, run.win_n = run.win_nll + nll, run.win_n + n
    if run.bar is not None:
        run.bar.update(1)
        run.bar.set_postfix(loss=f"{nll / n:.3f}", refresh=False)  # drawn with the next update
    return True


def _evaluate_and_save(run: _Run, lr: float) -> bool:
    """Record the window's train loss and the val loss, save, and start a new window; False
    (and status 'nan', nothing saved) if this step's update made the model's outputs NaN/inf."""
    broken = False
    try:
        _record(run, run.win_nll / run.win_n, lr, run.win_tokens / (_now() - run.win_t0))
    except NonFiniteLossError:  # this step's update broke the weights
        broken = True
    if any_rank(broken, run.ctx):  # rank 0 evaluates; all ranks stop together
        _stop_nan(
            run,
            f"stopped after step {run.step}: its update (lr {lr:.2e}) "
            "made the model's outputs NaN/inf. This state was not "
            "saved; the last good checkpoint (if any) is kept. "
            "Try a lower lr.",
        )
        return False
    _save(run)
    _reset_window(run)
    return True


def _callback_stops(run: _Run, callback) -> bool:
    """Call ``callback(step, model)``; True (status 'stopped', saved) if it asks to stop on any rank."""
    stop = callback is not None and bool(callback(run.step, run.model))
    if callback is not None and any_rank(stop, run.ctx):  # sync (only with a callback, DDP)
        run.result.status = "stopped"
        _save(run)
        return True
    return False


def _reset_window(run: _Run) -> None:
    """Start a new window of steps for the next record's train loss and tokens per second."""
    run.win_nll, run.win_n, run.win_t0, run.win_tokens = 0.0, 0, _now(), 0


def _record(run: _Run, train_loss: float, lr: float, tok_s: float) -> None:
    """On rank 0: append a history record (with this step's val loss), track the best after
    step 0, and show the record to ``on_eval``."""
    if not run.ctx.is_main:
        return
    rec = {
        "step": run.step,
        "tokens": run.tokens,
        "train_loss": train_loss,
        "val_loss": run.evaluate("val"),
        "lr": lr,
        "tokens_per_s": tok_s,
    }
    run.history.append(rec)
    if run.step > 0 and (run.best_val is None or rec["val_loss"] < run.best_val):
        run.best_step, run.best_val = run.step, rec["val_loss"]
    if run.on_eval is not None:
        run.on_eval(rec)


def _save(run: _Run) -> None:
    """With an out_dir: write ``checkpoint.pt``, and copy it to ``best.pt`` at a new best."""
    if run.out_dir is None:
        return
    save_training_state(
        run.out_dir / "checkpoint.pt",
        run.ctx,
        model=run.model,
        opt=run.opt,
        gen=run.gen,
        step=run.step,
        tokens=run.tokens,
        history=run.history,
        cfg=run.cfg,
        tokenizer=run.corpus.tokenizer,
        best_step=run.best_step,
        best_val_loss=run.best_val,
    )
    if run.ctx.is_main and run.cfg.keep_best and run.best_step == run.step and run.step > 0:
        copy_checkpoint(run.out_dir / "checkpoint.pt", run.out_dir / "best.pt")


def _stop_nan(run: _Run, message: str) -> None:
    """End the run with status 'nan' and ``message`` (printed on rank 0)."""
    run.result.status = "nan"
    run.result.message = message
    if run.ctx.is_main:
        print(message)


def _interrupted(run: _Run) -> None:
    """Ctrl-C: status 'interrupted'; the history so far is the result."""
    run.result.status = "interrupted"
    run.result.message = f"interrupted at step {run.step}; returning the history so far."
    if run.ctx.is_main:
        print(run.result.message)


def _finish(run: _Run) -> None:
    """Put the best evaluation (and ``best.pt``, if written) and the device check on the result."""
    result, out_dir = run.result, run.out_dir
    result.best_step, result.best_val_loss = run.best_step, run.best_val
    result.device_check = run.device_check
    if out_dir is not None and run.cfg.keep_best and (out_dir / "best.pt").exists():
        result.best_path = out_dir / "best.pt"


def _teardown(run: _Run | None, ctx: DistContext, threads, old_precision: str, clean: bool) -> None:
    """On every exit: close the bar, restore threads and matmul precision, leave the process group."""
    if run is not None and run.bar is not None:
        run.bar.close()
    threads.close()
    torch.set_float32_matmul_precision(old_precision)
    if run is not None:
        run.ddp = run.fwd = None  # teardown frees DDP's reducer before the process group it uses
    teardown(ctx, clean=clean)
