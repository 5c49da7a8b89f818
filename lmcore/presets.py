"""Training configurations: :class:`TrainConfig`, the named presets and the device choice.

``smoke`` runs in seconds (tests), ``cpu`` is what the training notebook runs without a GPU
(about a minute on 2 cores), ``gpu`` is the scale of nanoGPT's Shakespeare-character run.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace

import torch

__all__ = ["TrainConfig", "PRESETS", "preset", "pick_device", "autocast_for", "cpu_threads"]


@dataclass
class TrainConfig:
    corpus: str = "python-docs"
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    block_size: int = 64
    dropout: float = 0.0
    batch_size: int = 16          # sequences per micro-batch
    grad_accum: int = 1           # micro-batches per optimiser step
    max_steps: int = 100
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 10
    weight_decay: float = 0.1
    betas: tuple = (0.9, 0.99)
    grad_clip: float = 1.0
    eval_interval: int = 50
    eval_batches: int = 8
    seed: int = 0
    device: str = "auto"          # auto: cuda, then mps, then cpu
    dtype: str = "auto"           # auto: bf16 autocast on CUDA, float32 elsewhere
    compile: bool = False
    num_threads: int | None = None   # CPU threads during training (1 is fastest for tiny models
                                     # on a busy machine); None leaves torch's setting alone
    progress: bool = True


PRESETS = {
    "smoke": TrainConfig(n_layer=1, n_embd=32, block_size=32, batch_size=8, max_steps=40,
                         warmup_steps=5, eval_interval=20, eval_batches=2, lr=5e-3, min_lr=5e-4,
                         num_threads=1),
    "cpu": TrainConfig(n_layer=2, n_head=4, n_embd=128, block_size=64, batch_size=32,
                       max_steps=200, warmup_steps=20, eval_interval=50, eval_batches=8,
                       lr=3e-3, min_lr=3e-4, num_threads=1),
    "gpu": TrainConfig(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=64,
                       dropout=0.2, max_steps=5000, warmup_steps=100, eval_interval=250,
                       eval_batches=20, lr=1e-3, min_lr=1e-4),
}


def preset(name: str, **overrides) -> TrainConfig:
    """A copy of ``PRESETS[name]`` with ``overrides`` applied."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}.")
    return replace(PRESETS[name], **overrides)


def pick_device(device: str = "auto") -> torch.device:
    """``"auto"``: cuda if available, then mps, then cpu; anything else is used as given."""
    if device != "auto":
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def autocast_for(device: torch.device, dtype: str):
    """A zero-argument context factory: bf16 autocast on CUDA (dtype 'auto'), else a no-op."""
    use_bf16 = dtype == "bfloat16" or (dtype == "auto" and device.type == "cuda"
                                       and torch.cuda.is_bf16_supported())
    if dtype not in ("auto", "bfloat16", "float32"):
        raise ValueError(f"dtype must be 'auto', 'bfloat16' or 'float32'; got {dtype!r}.")
    if use_bf16:
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


@contextlib.contextmanager
def cpu_threads(n: int | None = 1):
    """Use ``n`` CPU threads inside the block (None: leave torch's setting alone).

    Tiny models run as fast or faster on one thread, and one thread gives the same numbers on
    every machine, which is what the notebooks print.
    """
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)
