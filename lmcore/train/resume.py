"""What :func:`lmcore.train.train` writes to a checkpoint and reads back to resume a run exactly.

Saving gathers every rank's random-number states (each rank draws its own batches); only rank 0
writes. Resuming loads the file to the CPU whatever the training device: the random-number
states must be CPU byte tensors, and ``load_state_dict`` copies the weights and the optimiser
state to the model's device by itself. Every mismatch (another model size, another number of
processes, a damaged state) is a ValueError naming the file and the key.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict
from pathlib import Path

import torch

from .checkpoint import load_checkpoint, rng_state, save_checkpoint, tokenizer_state
from .distributed import DistContext, barrier, gather_objects

__all__ = ["rng_states", "save_training_state", "copy_checkpoint", "restore_training_state"]

_RESUME_KEYS = ("optimizer", "step", "tokens", "history", "data_rng", "torch_rng")


def rng_states(gen: torch.Generator, device: torch.device) -> dict:
    """This process's random-number states: data order, dropout (CPU) and dropout on CUDA."""
    return {
        "data_rng": gen.get_state(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
    }


def save_training_state(
    path,
    ctx: DistContext,
    *,
    model,
    opt,
    gen,
    step,
    tokens,
    history,
    cfg,
    tokenizer,
    best_step,
    best_val_loss,
):
    """Write ``path`` on rank 0 (every rank must call this: the RNG states are gathered)."""
    states = gather_objects(rng_states(gen, ctx.device), ctx)
    try:
        if ctx.is_main:
            extra = {"rank_rng": states} if ctx.enabled else {}
            save_checkpoint(
                path,
                model=model.state_dict(),
                optimizer=opt.state_dict(),
                step=step,
                tokens=tokens,
                history=history,
                **states[0],
                train_config=asdict(cfg),
                model_config=asdict(model.config),
                tokenizer=tokenizer_state(tokenizer),
                best_step=best_step,
                best_val_loss=best_val_loss,
                world_size=ctx.world_size,
                **extra,
            )
    finally:
        barrier(ctx)  # no rank may go on (and read the file) before it is complete


def copy_checkpoint(src, dst) -> Path:
    """Copy ``src`` to ``dst`` atomically (best.pt from checkpoint.pt without re-serialising)."""
    dst = Path(dst)
    tmp = dst.with_name(dst.name + ".tmp")
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dst


def restore_training_state(path, ctx: DistContext, *, model, opt, gen) -> dict:
    """Load ``path`` into ``model``, ``opt``, ``gen`` and torch's RNGs; return the checkpoint."""
    ck = load_checkpoint(path, map_location="cpu")
    missing = [k for k in _RESUME_KEYS if k not in ck]
    if missing:
        raise ValueError(
            f"{path} cannot resume a run: it lacks {missing} (a checkpoint from "
            "lmcore.train.train holds them)."
        )
    want = asdict(model.config)
    diff = {k: (ck["model_config"].get(k), v) for k, v in want.items() if ck["model_config"].get(k) != v}
    if diff:
        said = ", ".join(f"{k} {a!r} (this run: {b!r})" for k, (a, b) in diff.items())
        raise ValueError(
            f"{path} was written by another model size and cannot resume this "
            f"run: model_config differs in {said}. Resume with the checkpoint's "
            "settings or start a new run in another out_dir."
        )
    world = ck.get("world_size", 1)
    if world != ctx.world_size:
        raise ValueError(
            f"{path} was written by {world} process(es) and this run has "
            f"{ctx.world_size}: every rank's batch order is stored, so resume with "
            f"--nproc_per_node={world} (or start a new run)."
        )
    try:
        model.load_state_dict(ck["model"])
    except RuntimeError as err:
        raise ValueError(
            f"{path}: 'model' does not fit this model ({str(err).splitlines()[0][:200]})."
        ) from None
    try:
        opt.load_state_dict(ck["optimizer"])
    except (ValueError, KeyError, TypeError, RuntimeError) as err:
        raise ValueError(f"{path}: 'optimizer' does not fit this model's AdamW ({err}).") from None
    states, where = ck, ""
    if world > 1:
        states, where = ck["rank_rng"][ctx.rank], f"rank_rng[{ctx.rank}]."
    gen.set_state(rng_state(states.get("data_rng"), where + "data_rng", path))
    torch.set_rng_state(rng_state(states.get("torch_rng"), where + "torch_rng", path))
    if ctx.device.type == "cuda" and states.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(rng_state(states["cuda_rng"], where + "cuda_rng", path), ctx.device)
    for key in ("step", "tokens"):
        if isinstance(ck[key], bool) or not isinstance(ck[key], int) or ck[key] < 0:
            raise ValueError(f"{path}: {key!r} must be a non-negative int; got {ck[key]!r}.")
    if not isinstance(ck["history"], list):
        raise ValueError(f"{path}: 'history' must be a list of records.")
    return ck
