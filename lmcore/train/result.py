"""What a training run returns (:class:`TrainResult`) and what it refuses before it starts.

:func:`check_run_inputs` runs before :func:`lmcore.train.train` changes any global setting:
a corpus too small for one row of ``block_size``, a given model of another vocabulary or
block size, a tokenizer a checkpoint could not describe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..model import GPT
from .checkpoint import tokenizer_state
from .presets import TrainConfig

__all__ = ["TrainResult", "check_run_inputs"]


@dataclass
class TrainResult:
    """What :func:`train` returns: the model, one history record per evaluation, why it ended,
    and the evaluation with the lowest validation loss after step 0 (``best.pt`` with out_dir)."""

    model: GPT
    history: list = field(default_factory=list)  # dicts: step, tokens, train_loss, val_loss, lr, tokens_per_s
    status: str = "finished"  # finished | stopped | interrupted | nan
    message: str = ""
    corpus: object = None
    config: TrainConfig | None = None
    best_step: int | None = None
    best_val_loss: float | None = None
    best_path: Path | None = None
    device_check: object = None  # the DeviceAgreement of the check before the first step (None on the CPU)


def check_run_inputs(cfg, corpus, model, out_dir) -> None:
    """Everything that can be refused before a run changes any global setting."""
    for split in ("train", "val"):
        if next(iter(corpus.eval_batches(split, 1, cfg.block_size, 1)), None) is None:
            raise ValueError(
                f"the corpus {getattr(corpus, 'name', '')!r} has too little {split} "
                f"data for one row of TrainConfig.block_size = {cfg.block_size} "
                "tokens (plus one target); use a smaller block_size or more text."
            )
    if model is not None and (model.config.vocab_size, model.config.block_size) != (
        corpus.vocab_size,
        cfg.block_size,
    ):
        raise ValueError(
            f"model has vocab_size {model.config.vocab_size} and block_size "
            f"{model.config.block_size}; the corpus and TrainConfig need "
            f"{corpus.vocab_size} and {cfg.block_size}."
        )
    if out_dir is not None:
        tokenizer_state(corpus.tokenizer)  # refuse now, not after the run, if undescribable
