"""Training configurations: :class:`TrainConfig` and the named presets.

``smoke`` runs in seconds (tests), ``cpu`` is what the training notebook runs without a GPU
(about a minute on 2 cores), ``gpu`` is the scale of nanoGPT's Shakespeare-character run on
the Python standard library's source (``python-stdlib``, UTF-8 bytes), sized to see about
three epochs. :func:`validate_config` checks every field before a run changes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch

from .._validate import require_bool, require_choice, require_int_scalar, require_real
from ..model import GPTConfig

__all__ = ["TrainConfig", "PRESETS", "preset", "validate_config", "model_config"]


@dataclass
class TrainConfig:
    corpus: str = "python-docs"
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    block_size: int = 64
    dropout: float = 0.0
    batch_size: int = 16  # sequences per micro-batch
    grad_accum: int = 1  # micro-batches per optimiser step
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
    device: str = "auto"  # auto: cuda, then mps, then cpu
    dtype: str = "auto"  # auto: bf16 autocast on CUDA, float32 elsewhere
    compile: bool = False
    num_threads: int | None = None  # CPU threads during training (1 is fastest for tiny models
    # on a busy machine); None leaves torch's setting alone
    progress: bool = True
    keep_best: bool = True  # with out_dir: also write best.pt at each new lowest val loss
    check_device: bool = True  # off the CPU: refuse to train unless one batch's loss and gradients
    # there agree with the CPU's (lmcore.train.device_check); False skips it


PRESETS = {
    # The notebooks' small CPU runs (09's floor run, 10's tiny worlds): a 2-layer, 32-wide GPT on
    # rows of 32 tokens, 300 steps, float32 on one CPU thread, every field spelled out; a notebook
    # names only what it changes (corpus, batch size, learning rates, evaluation).
    "tiny": TrainConfig(
        n_layer=2,
        n_head=2,
        n_embd=32,
        block_size=32,
        dropout=0.0,
        grad_accum=1,
        max_steps=300,
        warmup_steps=20,
        weight_decay=0.1,
        betas=(0.9, 0.99),
        grad_clip=1.0,
        seed=0,
        device="cpu",
        dtype="float32",
        compile=False,
        num_threads=1,
        progress=False,
    ),
    "smoke": TrainConfig(
        n_layer=1,
        n_embd=32,
        block_size=32,
        batch_size=8,
        max_steps=40,
        warmup_steps=5,
        eval_interval=20,
        eval_batches=2,
        lr=5e-3,
        min_lr=5e-4,
        num_threads=1,
    ),
    # 1500 steps x 16 x 64 = 1.5M characters: about 3.6 passes over python-docs' training split
    # (0.42M characters); about two minutes on two idle cores with torch's default threads.
    "cpu": TrainConfig(
        n_layer=4,
        n_head=4,
        n_embd=128,
        block_size=64,
        batch_size=16,
        max_steps=1500,
        warmup_steps=50,
        eval_interval=75,
        eval_batches=8,
        lr=3e-3,
        min_lr=3e-4,
        num_threads=None,
    ),
    # 2000 steps x 64 x 256 = 32.8M tokens: about 3.2 epochs of python-stdlib's training split
    # (10.2M bytes on CPython 3.11), so the run ends before it memorises; best.pt keeps the
    # lowest validation loss in case it starts to overfit anyway.
    "gpu": TrainConfig(
        corpus="python-stdlib",
        n_layer=6,
        n_head=6,
        n_embd=384,
        block_size=256,
        batch_size=64,
        dropout=0.2,
        max_steps=2000,
        warmup_steps=100,
        eval_interval=100,
        eval_batches=20,
        lr=1e-3,
        min_lr=1e-4,
    ),
}


def preset(name: str, **overrides) -> TrainConfig:
    """A copy of ``PRESETS[name]`` with ``overrides`` applied."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}.")
    return replace(PRESETS[name], **overrides)


def _int_or_none(name, x, min):
    return None if x is None else require_int_scalar(name, x, min=min)


def validate_config(cfg) -> TrainConfig:
    """Check every field of a :class:`TrainConfig`; a ValueError/TypeError names the field.

    Called by :func:`lmcore.train.train` before it changes any global setting, so a bad config
    fails at once instead of as a ZeroDivisionError (or a NaN update) later in the run.
    """
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"config must be a TrainConfig (e.g. preset('cpu')); got {type(cfg).__name__}.")
    f = lambda name: f"TrainConfig.{name}"
    if not isinstance(cfg.corpus, str) or not cfg.corpus:
        raise TypeError(f"{f('corpus')} must be a corpus name or file path (str); got {cfg.corpus!r}.")
    for name in ("n_layer", "n_head", "n_embd", "batch_size", "grad_accum", "eval_interval"):
        require_int_scalar(f(name), getattr(cfg, name), min=1)
    require_int_scalar(f("block_size"), cfg.block_size, min=2)
    for name in ("max_steps", "warmup_steps", "seed"):
        require_int_scalar(f(name), getattr(cfg, name), min=0)
    _int_or_none(f("eval_batches"), cfg.eval_batches, 1)
    _int_or_none(f("num_threads"), cfg.num_threads, 1)
    if cfg.n_embd % cfg.n_head:
        raise ValueError(
            f"{f('n_embd')} = {cfg.n_embd} must be divisible by {f('n_head')} = "
            f"{cfg.n_head} (each head gets n_embd / n_head dimensions)."
        )
    require_real(f("dropout"), cfg.dropout, min=0.0, max=1.0)
    if cfg.dropout == 1.0:
        raise ValueError(f"{f('dropout')} must be below 1 (1 drops everything); got 1.0.")
    require_real(f("lr"), cfg.lr, min=0.0, min_inclusive=False)
    require_real(f("min_lr"), cfg.min_lr, min=0.0, max=float(cfg.lr))
    require_real(f("weight_decay"), cfg.weight_decay, min=0.0)
    require_real(f("grad_clip"), cfg.grad_clip, min=0.0, min_inclusive=False)
    if not isinstance(cfg.betas, (tuple, list)) or len(cfg.betas) != 2:
        raise TypeError(f"{f('betas')} must be a pair (beta1, beta2); got {cfg.betas!r}.")
    for k, b in enumerate(cfg.betas):
        require_real(f"{f('betas')}[{k}]", b, min=0.0, max=1.0)
        if b == 1.0:
            raise ValueError(f"{f('betas')}[{k}] must be below 1; got 1.0.")
    if not isinstance(cfg.device, str):
        raise TypeError(
            f"{f('device')} must be a str such as 'auto', 'cpu', 'cuda', 'cuda:1' or "
            f"'mps'; got {cfg.device!r}."
        )
    if cfg.device != "auto":
        try:
            torch.device(cfg.device)
        except (RuntimeError, ValueError):
            raise ValueError(
                f"{f('device')} must be 'auto' or a torch device such as 'cpu', "
                f"'cuda', 'cuda:1', 'mps'; got {cfg.device!r}."
            ) from None
    require_choice(f("dtype"), cfg.dtype, ("auto", "bfloat16", "float32"))
    for name in ("compile", "progress", "keep_best", "check_device"):
        require_bool(f(name), getattr(cfg, name))
    unknown = set(vars(cfg)) - {fl.name for fl in fields(TrainConfig)}
    if unknown:
        raise ValueError(f"TrainConfig has unknown fields {sorted(unknown)}.")
    return cfg


def model_config(cfg: TrainConfig, vocab_size: int) -> GPTConfig:
    """The :class:`GPTConfig` a run of ``cfg`` trains (the model sizes of ``cfg``, ``vocab_size``)."""
    return GPTConfig(
        vocab_size=vocab_size,
        block_size=cfg.block_size,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_embd=cfg.n_embd,
        dropout=cfg.dropout,
    )
