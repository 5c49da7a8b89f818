"""Data-parallel training on ``torch.distributed``: the process group, DDP and the global count.

``torchrun --nproc_per_node=K -m lmcore.train ...`` starts K processes with ``RANK``,
``WORLD_SIZE`` and ``LOCAL_RANK`` in their environment; :func:`setup` joins them into one
process group (NCCL on CUDA, gloo on the CPU) and gives each its device. Each rank draws its
own batches. The loss of a step is every rank's summed NLL divided by the valid targets of the
*whole* global batch (the count all-reduced across ranks) and multiplied by the world size,
because DistributedDataParallel averages gradients over ranks: the result equals one process
on the concatenated batch, however unevenly the ranks' rows are padded.
"""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = [
    "DistContext",
    "setup",
    "teardown",
    "wrap_model",
    "all_reduce_sum",
    "gather_objects",
    "any_rank",
    "no_sync",
    "barrier",
]


@dataclass
class DistContext:
    """Where this process stands: ``rank`` of ``world_size``, its ``device``; ``owns_group`` if
    :func:`setup` created the process group (then :func:`teardown` destroys it)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    owns_group: bool = False

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise ValueError(
            f"environment variable {name} must be an int (torchrun sets it); got {value!r}."
        ) from None


def setup(device: torch.device) -> DistContext:
    """Join the process group torchrun describes (or the one already initialised).

    Without ``WORLD_SIZE > 1`` and no initialised group this is a single process on ``device``.
    Under torchrun a CUDA device becomes ``cuda:LOCAL_RANK``.
    """
    initialised = dist.is_available() and dist.is_initialized()
    world = dist.get_world_size() if initialised else _env_int("WORLD_SIZE", 1)
    if world <= 1:
        return DistContext(device=device)
    local_rank = _env_int("LOCAL_RANK", 0)
    if device.type == "cuda":
        device = torch.device("cuda", local_rank if device.index is None else device.index)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise ValueError(
            f"data-parallel training runs on CUDA (NCCL) or the CPU (gloo); got "
            f"device {device}. Set TrainConfig.device to 'cuda' or 'cpu'."
        )
    owns = False
    if not initialised:
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        owns = True
    return DistContext(dist.get_rank(), dist.get_world_size(), local_rank, device, owns)


def teardown(ctx: DistContext, *, clean: bool = True) -> None:
    """Destroy the process group :func:`setup` created. After a ``clean`` finish every rank
    first meets at a barrier, so no rank destroys the group while another still uses it
    (PyTorch's advice: a rank that destroys early can hang the others' exit). After an error
    there is no barrier: the other ranks may never arrive, and torchrun stops them.

    The caller drops its references to the DDP wrapper first: a collection here frees DDP's
    reducer while the group it uses still exists (freed after it, a worker hung in the
    reducer's destructor on its way out)."""
    if ctx.owns_group and dist.is_initialized():
        gc.collect()
        if clean and ctx.enabled:
            dist.barrier()
        dist.destroy_process_group()


def wrap_model(model: torch.nn.Module, ctx: DistContext) -> torch.nn.Module:
    """``model`` in DistributedDataParallel when there are several ranks (rank 0's weights are
    broadcast to every rank here), else ``model`` itself."""
    if not ctx.enabled:
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DDP(model, device_ids=ids)


def no_sync(model: torch.nn.Module):
    """DDP's ``no_sync()`` (skip the gradient all-reduce of a non-final micro-batch), or a no-op."""
    inner = getattr(model, "_orig_mod", model)  # through torch.compile's wrapper
    return inner.no_sync() if hasattr(inner, "no_sync") else contextlib.nullcontext()


def all_reduce_sum(x: torch.Tensor, ctx: DistContext) -> torch.Tensor:
    """The sum of ``x`` over ranks (in place; ``x`` itself with one rank). No host sync."""
    if ctx.enabled:
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
    return x


def gather_objects(obj, ctx: DistContext) -> list:
    """Every rank's ``obj`` as a list indexed by rank (every rank must call this)."""
    if not ctx.enabled:
        return [obj]
    out = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def any_rank(flag: bool, ctx: DistContext) -> bool:
    """True on every rank if ``flag`` is True on any (a stop decision all ranks must share)."""
    if not ctx.enabled:
        return flag
    t = torch.tensor([int(flag)], device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())  # host sync: only when asked


def barrier(ctx: DistContext) -> None:
    """Wait for every rank (after rank 0 writes a file the others may read next)."""
    if ctx.enabled:
        dist.barrier()
