"""Notebook 08, section 9: exposure bias measured. The model is trained on real prefixes
(teacher forcing) and generates from its own (free running); two measurements of what that costs:

- :func:`single_mistake_effect`: the extra loss on real text after one wrong input character;
- :func:`free_running_loss`: the loss, position by position, on the model's own continuation of
  real prompts, against the same model's loss on the real continuation (the baseline);
- :func:`repeated_ngram_share`: a statistic the model does not score itself, how often a text
  repeats its own n-grams, against real text (the model's own loss on its own draws is its own
  uncertainty along its own path, and falls when it loops).

Their plots: :mod:`lmcore.course.training.exposure_views`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..._validate import require_int_scalar
from ...loss import causal_lm_loss
from ...sample import generate

__all__ = ["single_mistake_effect", "free_running_loss", "growth", "repeated_ngram_share"]


@torch.no_grad()
def single_mistake_effect(model, ids: torch.Tensor, position: int, *, seed: int = 0) -> np.ndarray:
    """Extra loss (nats) on the *real* next characters after one wrong input character.

    ``ids`` (N, L) are real windows; the token at ``position`` is replaced by a different,
    random one in each row. Entry ``t`` of the result (length L-1) is the mean over rows of
    loss(corrupted input) - loss(clean input) for the target at t+1; targets before the
    mistake are unaffected (causal), the one right after it pays the most.
    """
    if ids.dim() != 2 or not 0 <= position < ids.shape[1] - 1:
        raise ValueError(f"ids must be (N, L) and position in [0, L-1); got {tuple(ids.shape)}, {position}.")
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(seed)
    bad = ids.clone()
    bad[:, position] = (ids[:, position] + torch.randint(1, V, (len(ids),), generator=g).to(ids.device)) % V
    clean = causal_lm_loss(model(ids).float(), ids, reduction="none")  # (N, L-1)
    hurt = causal_lm_loss(model(bad).float(), ids, reduction="none")  # same real targets
    return (hurt - clean).mean(0).double().cpu().numpy()


@torch.no_grad()
def free_running_loss(
    model, rows: torch.Tensor, *, prompt_len: int = 8, temperature: float = 1.0, seed: int = 0
) -> dict:
    """The model continues the first ``prompt_len`` tokens of each real window ``rows`` (N, L)
    to the full length L (sampling at ``temperature`` from a seeded generator). Entry k-1 of
    ``own`` is the model's mean loss (nats, over rows) on the k-th token *it wrote*, reading its
    own text before it; entry k-1 of ``real`` is its mean loss on the k-th *real* token after
    the same prompt, reading the real text (teacher forcing). Both have length L - prompt_len.
    """
    if rows.dim() != 2 or not 1 <= prompt_len < rows.shape[1]:
        raise ValueError(
            f"rows must be (N, L) with 1 <= prompt_len < L; got {tuple(rows.shape)}, prompt_len={prompt_len}."
        )
    if rows.shape[1] > model.config.block_size:
        raise ValueError(
            f"rows are {rows.shape[1]} long; the model reads at most {model.config.block_size} tokens."
        )
    was_training = model.training
    model.eval()
    own = generate(
        model,
        rows[:, :prompt_len],
        rows.shape[1] - prompt_len,
        temperature=temperature,
        generator=torch.Generator().manual_seed(seed),
    )
    cut = prompt_len - 1  # target index of the first generated token
    score = lambda x: causal_lm_loss(model(x).float(), x, reduction="none")[:, cut:].mean(0)
    out = {
        "own": score(own).double().cpu().numpy(),
        "real": score(rows).double().cpu().numpy(),
        "own_ids": own.cpu(),
    }
    model.train(was_training)
    return out


def growth(curve, first: int = 8, last: int = 16) -> float:
    """Mean of the last ``last`` entries minus the mean of the first ``first`` (nats): how much a
    per-position loss curve rose from the start of the continuation to its end."""
    curve = np.asarray(curve, dtype=np.float64)
    if curve.ndim != 1 or len(curve) < max(first, last):
        raise ValueError(
            f"curve must be 1-D with at least {max(first, last)} entries; got shape {curve.shape}."
        )
    return float(curve[-last:].mean() - curve[:first].mean())


def repeated_ngram_share(ids, n: int = 4) -> float:
    """The share of each row's n-grams (n consecutive tokens) that already occurred earlier in the
    same row, averaged over rows: about 0 for text that never repeats itself, near 1 for a loop.

    ``ids``: a tensor or array of token ids, (L,) for one row or (N, L) for N rows, L >= n.
    """
    require_int_scalar("n", n, min=1)
    rows = np.asarray(ids.cpu() if isinstance(ids, torch.Tensor) else ids)
    if rows.ndim == 1:
        rows = rows[None]
    if rows.ndim != 2 or rows.shape[1] < n or not np.issubdtype(rows.dtype, np.integer):
        raise ValueError(
            f"ids must be integer token ids of shape (L,) or (N, L) with L >= n = {n}; got {rows.shape}."
        )
    shares = []
    for row in rows.tolist():
        seen, repeats = set(), 0
        for i in range(len(row) - n + 1):
            gram = tuple(row[i : i + n])
            repeats += gram in seen
            seen.add(gram)
        shares.append(repeats / (len(row) - n + 1))
    return float(np.mean(shares))
