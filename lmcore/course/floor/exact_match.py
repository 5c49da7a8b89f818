"""Notebook 09, what a per-token loss does not measure: over a run's checkpoints, the mean loss
on the answer tokens of every sum against whole-answer exact match (the task: every answer
token and the closing ``.`` the argmax after the true prefix, which is what greedy decoding
writes).

All 100 sums ``a + b`` (a, b in 0..9) are scored in one batched forward; a turn is padded at
its end, which a causal model cannot see from the earlier positions, so each row's scores equal
those of the turn alone.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from .lesson import TOK

__all__ = ["sum_batch", "answer_table", "AnswerTracker", "fall_share"]


def sum_batch(high: int = 9):
    """``(ids, answer)``: every turn ``<user> a + b = <assistant> c .`` + EOS for a, b in
    0..high as one ``(N, L)`` tensor padded with PAD at the end, and the ``(N, 3)`` target
    positions of the answer's first digit, its second digit (-1 for a one-digit sum) and ``.``."""
    if isinstance(high, bool) or not isinstance(high, int) or not 0 <= high <= 9:
        raise ValueError(f"high must be an int in [0, 9] (one-digit operands); got {high!r}.")
    rows, where = [], []
    for a in range(high + 1):
        for b in range(high + 1):
            ids = TOK.encode(f"<user> {a} + {b} = <assistant> {a + b} .") + [TOK.eos_id]
            first = ids.index(TOK.stoi["<assistant>"]) + 1
            two = a + b >= 10
            rows.append(ids)
            where.append((first, first + 1 if two else -1, first + 1 + two))
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [TOK.pad_id] * (width - len(r)) for r in rows])
    return ids, torch.tensor(where)


@torch.no_grad()
def answer_table(model, high: int = 9) -> dict:
    """Every sum scored by ``model``: ``nll`` ``(N, 2)`` per answer digit (nats; NaN where the
    answer has one digit), ``right`` ``(N, 2)`` whether each digit is the argmax (True where
    there is none), ``exact`` (every answer token and ``.`` the argmax), and ``answer_nll``
    (the row's mean over its answer digits)."""
    ids, where = sum_batch(high)
    was_training = model.training
    model.eval()
    logits = model(ids.to(next(model.parameters()).device)).double().cpu()
    model.train(was_training)
    logp = torch.log_softmax(logits[:, :-1], -1)  # position t - 1 predicts target t
    rows = torch.arange(len(ids))
    nll, right = np.full((len(ids), 2), np.nan), np.ones((len(ids), 2), dtype=bool)
    for k in range(2):
        pos = where[:, k]
        has = pos >= 0
        p = pos.clamp(min=1)
        tok_nll = -logp[rows, p - 1, ids[rows, p]]
        hit = logp[rows, p - 1].argmax(-1) == ids[rows, p]
        nll[has.numpy(), k] = tok_nll[has].numpy()
        right[has.numpy(), k] = hit[has].numpy()
    dot = where[:, 2]
    dot_right = (logp[rows, dot - 1].argmax(-1) == ids[rows, dot]).numpy()
    return {
        "nll": nll,
        "right": right,
        "exact": right.all(1) & dot_right,
        "answer_nll": np.nanmean(nll, axis=1),
    }


class AnswerTracker:
    """A training callback (``callback(step, model)``): every ``every`` steps (and at step 1)
    it scores all sums with :func:`answer_table` and appends a record ``{"step", "answer_nll"
    (the mean over all answer tokens), "exact" (the share of sums answered exactly), "table"}``
    to ``records``. It reads the model in eval mode and draws no random numbers, so the run is
    the same with or without it. With ``keep_models`` it also keeps a copy of the model at each
    record (in memory, a few MB for the notebook's run) in ``models[step]``."""

    def __init__(self, every: int = 5, high: int = 9, keep_models: bool = False):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an int >= 1; got {every!r}.")
        self.every, self.high, self.keep_models = every, high, bool(keep_models)
        self.records, self.models = [], {}

    def __call__(self, step: int, model) -> bool:
        if step == 1 or step % self.every == 0:
            if self.keep_models:
                self.models[int(step)] = copy.deepcopy(model).eval()
            table = answer_table(model, self.high)
            self.records.append(
                {
                    "step": int(step),
                    "answer_nll": float(np.nanmean(table["nll"])),
                    "exact": float(table["exact"].mean()),
                    "table": table,
                }
            )
        return False

    def series(self, key: str) -> np.ndarray:
        """One column of the records (``"step"``, ``"answer_nll"`` or ``"exact"``) as an array."""
        if key not in ("step", "answer_nll", "exact"):
            raise ValueError(f"key must be 'step', 'answer_nll' or 'exact'; got {key!r}.")
        return np.array([r[key] for r in self.records])


def fall_share(values, i: int, j: int) -> float:
    """The share of a series' whole change (first record to last) made between records ``i``
    and ``j``: ``(values[j] - values[i]) / (values[-1] - values[0])``."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 2 or v[-1] == v[0]:
        raise ValueError("values must be a 1-D series of >= 2 entries whose last differs from its first.")
    return float((v[j] - v[i]) / (v[-1] - v[0]))
