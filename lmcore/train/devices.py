"""Where a run computes: the device, its mixed precision, and the CPU thread count.

``pick_device("auto")`` prefers CUDA, then Apple's MPS, then the CPU; ``autocast_for`` gives
bf16 autocast on CUDA (a no-op elsewhere unless asked) and ``autocast_dtype`` the dtype it casts
to; ``cpu_threads`` fixes the thread count inside a block and restores it after.
"""

from __future__ import annotations

import contextlib

import torch

__all__ = ["pick_device", "autocast_dtype", "autocast_for", "cpu_threads"]


def pick_device(device: str = "auto") -> torch.device:
    """``"auto"``: cuda if available, then mps, then cpu; anything else is used as given."""
    if device != "auto":
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def autocast_dtype(device: torch.device, dtype: str) -> torch.dtype | None:
    """The dtype a run of config dtype ``dtype`` autocasts to on ``device`` (None: float32)."""
    if dtype not in ("auto", "bfloat16", "float32"):
        raise ValueError(f"dtype must be 'auto', 'bfloat16' or 'float32'; got {dtype!r}.")
    use_bf16 = dtype == "bfloat16" or (
        dtype == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()
    )
    return torch.bfloat16 if use_bf16 else None


def autocast_for(device: torch.device, dtype: str):
    """A zero-argument context factory: bf16 autocast on CUDA (dtype 'auto'), else a no-op."""
    low = autocast_dtype(device, dtype)
    if low is not None:
        return lambda: torch.autocast(device.type, dtype=low)
    return contextlib.nullcontext


@contextlib.contextmanager
def cpu_threads(n: int | None = 1):
    """Use ``n`` CPU threads inside the block (None: leave torch's setting alone).

    Tiny models run as fast or faster on one thread. A fixed thread count also fixes how
    torch splits its reductions between threads, so a run repeats exactly on one machine;
    it does not make numbers equal across machines (the CPU's vector kernels, chosen per
    machine or by ``ATEN_CPU_CAPABILITY``, sum in another order), which is why the notebooks
    print measurements as verdicts with tolerances.
    """
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
