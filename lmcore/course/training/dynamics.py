"""Notebook 08's training dynamics: what the first steps of a run learn, measured densely, and a
small training set that a run overfits.

- :func:`loss_parts` splits a mean NLL into three exact parts: the entropy of the targets'
  frequencies, how far the model's *mean* forecast is from those frequencies, and what reading
  the context adds to that (negative once context helps).
- :func:`first_steps` retrains the first steps of a run (same seed, same batches, same
  schedule: the run's own start) and measures :func:`loss_parts` every few steps on the windows
  :func:`lmcore.train.evaluate` scores, with a sample at a few steps.
- :class:`SmallSlice` keeps the first rows of a corpus's training split as the whole training
  set (its validation split untouched): a run of many passes over it overfits.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import replace
from pathlib import Path

import torch

from ..._validate import require_int_scalar
from ...data.base import CorpusBase
from ...model import GPT
from ...sample import generate
from ...shift import IGNORE_INDEX, shift_for_next_token
from ...train import model_config, train, validate_config
from ...train.accumulate import model_kwargs
from ...train.evaluation import evaluation_batches

__all__ = ["loss_parts", "first_steps", "save_first_steps", "load_first_steps", "SmallSlice"]


@torch.no_grad()
def loss_parts(model, batches, *, device=None, autocast=contextlib.nullcontext) -> dict:
    """The mean NLL over ``batches``' valid targets, in float64, as three exact parts:

    ``loss = freq_entropy + frequency_gap + context``

    - ``freq_entropy`` H(p): the entropy of the targets' frequencies p in these windows, the loss
      of a model that knows the frequencies exactly and reads no context;
    - ``frequency_gap`` KL(p || q̄): how far the model's mean forecast q̄ (its next-token
      distribution averaged over every scored position) is from p;
    - ``context``: the loss minus the cross-entropy of q̄ (what the model's varying its forecast
      with the context changes; negative once reading the context helps).

    Also ``n_targets``. The model runs in eval mode; its mode is restored on every exit.
    """
    if not isinstance(model, torch.nn.Module) or not isinstance(
        getattr(getattr(model, "config", None), "vocab_size", None), int
    ):
        raise TypeError(
            f"model must be a language model (a torch.nn.Module with config.vocab_size); got {type(model).__name__}."
        )
    device = device or next(model.parameters()).device
    V = model.config.vocab_size
    nll = torch.zeros((), dtype=torch.float64)
    counts = torch.zeros(V, dtype=torch.float64)
    q_sum = torch.zeros(V, dtype=torch.float64)
    was_training = model.training
    model.eval()
    try:
        for b in batches:
            if not isinstance(b, dict) or not {"input_ids", "labels"} <= set(b):
                raise TypeError(f"batches must give dicts with input_ids and labels; got {type(b).__name__}.")
            b = {k: v.to(device) for k, v in b.items()}
            with autocast():
                logits = model(b["input_ids"], **model_kwargs(b))
            logits, targets = shift_for_next_token(logits, b["labels"])
            keep = targets != IGNORE_INDEX
            logp = (
                logits[keep].float().cpu().double().log_softmax(-1)
            )  # (valid targets, V); MPS has no float64
            y = targets[keep].cpu()
            nll -= logp.gather(1, y[:, None]).sum()
            counts += torch.bincount(y, minlength=V).double()
            q_sum += logp.exp().sum(0)
    finally:
        model.train(was_training)
    n = counts.sum()
    if n == 0:
        raise ValueError("batches have no valid target to score.")
    p, q_bar = counts / n, q_sum / n
    seen = p > 0
    entropy = float(-(p[seen] * p[seen].log()).sum())
    cross = float(-(p[seen] * q_bar[seen].log()).sum())
    loss = float(nll / n)
    return {
        "loss": loss,
        "freq_entropy": entropy,
        "frequency_gap": cross - entropy,
        "context": loss - cross,
        "n_targets": int(n),
    }


def first_steps(
    cfg,
    corpus,
    *,
    until: int,
    every: int,
    sample_at=(),
    prompt_ids=(),
    n_new: int = 120,
    device=None,
    autocast=contextlib.nullcontext,
) -> dict:
    """Retrain the first ``until`` steps of the run ``cfg`` describes (the model ``train()``
    builds from ``cfg.seed``, the same batches and learning-rate schedule: ``cfg.max_steps``
    is kept) and measure :func:`loss_parts` at step 0 and every ``every`` steps, on the
    validation windows every record of that run scores. At each step of ``sample_at``, also
    sample ``n_new`` tokens after ``prompt_ids`` (T = 1, a generator seeded with 0).

    Returns ``records`` (dicts: ``step`` and :func:`loss_parts`'s keys), ``samples`` (step ->
    the new token ids, a list), ``windows`` (the validation batches measured) and ``run``
    (train()'s result, stopped at ``until``).
    """
    cfg = validate_config(cfg)
    until = require_int_scalar("until", until, min=1)
    every = require_int_scalar("every", every, min=1)
    n_new = require_int_scalar("n_new", n_new, min=0)
    if until > cfg.max_steps:
        raise ValueError(f"until must be at most cfg.max_steps = {cfg.max_steps}; got {until}.")
    sample_at = {require_int_scalar("sample_at", s, min=0) for s in sample_at}
    if sample_at and not len(prompt_ids):
        raise ValueError("sample_at needs prompt_ids (a non-empty list of token ids).")
    windows = list(
        evaluation_batches(corpus, "val", cfg.batch_size, cfg.block_size, cfg.eval_batches)
    )  # the windows train()'s records score
    torch.manual_seed(cfg.seed)  # the initial model train() builds
    model = GPT(model_config(cfg, corpus.vocab_size))
    if device is not None:
        model = model.to(device)
    records, samples = [], {}

    def measure(step, m):
        if step % every == 0 or step == until:
            records.append({"step": step, **loss_parts(m, windows, autocast=autocast)})
        if step in sample_at:
            gen = torch.Generator().manual_seed(0)
            out = generate(m, list(prompt_ids), n_new, temperature=1.0, generator=gen)
            samples[step] = out[len(prompt_ids) :].tolist()
        return step >= until

    measure(0, model)
    run = train(replace(cfg, progress=False), corpus, model=model, callback=measure)
    return {"records": records, "samples": samples, "windows": windows, "run": run}


def save_first_steps(fs: dict, path) -> Path:
    """Write :func:`first_steps`'s records and samples to ``path`` (JSON), beside a run's
    checkpoints, so that a reference run can carry them (:func:`load_first_steps`)."""
    if not isinstance(fs, dict) or not {"records", "samples"} <= set(fs):
        raise TypeError("fs must be first_steps()'s result (a dict with records and samples).")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"records": fs["records"], "samples": {str(k): v for k, v in fs["samples"].items()}}
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def load_first_steps(path, corpus, cfg) -> dict:
    """:func:`first_steps`'s result as :func:`save_first_steps` wrote it, with the validation
    windows of ``cfg`` rebuilt from ``corpus`` (``run`` is None: nothing is retrained)."""
    body = json.loads(Path(path).read_text(encoding="utf-8"))
    windows = list(evaluation_batches(corpus, "val", cfg.batch_size, cfg.block_size, cfg.eval_batches))
    samples = {int(k): v for k, v in body["samples"].items()}
    return {"records": body["records"], "samples": samples, "windows": windows, "run": None}


class SmallSlice(CorpusBase):
    """The first ``n_rows`` rows (``block_size`` tokens each) of ``corpus``'s training split as
    the whole training split: training batches are drawn from them at random, with
    replacement. The validation split is ``corpus``'s own, unchanged."""

    def __init__(self, corpus, n_rows: int, block_size: int):
        n_rows = require_int_scalar("n_rows", n_rows, min=1)
        self.block_size = require_int_scalar("block_size", block_size, min=2)
        # the split's rows in order, one batch of n_rows (evaluation_batches checks the corpus)
        first = next(evaluation_batches(corpus, "train", n_rows, self.block_size, None), None)
        if first is None or len(first["input_ids"]) < n_rows:
            have = 0 if first is None else len(first["input_ids"])
            raise ValueError(f"n_rows must be at most {have}, the rows of the training split; got {n_rows}.")
        self.corpus, self.rows = corpus, first
        self.name = f"{getattr(corpus, 'name', 'corpus')}, first {n_rows} training rows"
        self.tokenizer = corpus.tokenizer
        self.ids = first["input_ids"].flatten()
        self.n_rows = n_rows

    def _train_block(self, block_size):
        if block_size != self.block_size:
            raise ValueError(f"block_size must be the slice's {self.block_size}; got {block_size!r}.")

    def batch(self, split: str, batch_size: int, block_size: int, *, generator=None) -> dict:
        if self._check_split(split) == "val":
            return self.corpus.batch("val", batch_size, block_size, generator=generator)
        self._train_block(block_size)
        require_int_scalar("batch_size", batch_size, min=1)
        index = torch.randint(0, self.n_rows, (batch_size,), generator=generator)
        return {k: v[index] for k, v in self.rows.items()}

    def eval_batches(self, split: str, batch_size: int, block_size: int, max_batches: int | None = None):
        """The corpus's own for "val"; the slice's rows, in order, for "train"."""
        if self._check_split(split) == "val":
            yield from self.corpus.eval_batches("val", batch_size, block_size, max_batches)
            return
        self._train_block(block_size)
        require_int_scalar("batch_size", batch_size, min=1)
        n_batches = math.ceil(self.n_rows / batch_size)
        for k in range(n_batches if max_batches is None else min(n_batches, max_batches)):
            yield {key: v[k * batch_size : (k + 1) * batch_size] for key, v in self.rows.items()}

    def __repr__(self) -> str:
        return f"SmallSlice({self.name!r}, rows={self.n_rows}, block_size={self.block_size})"
