"""Notebook 05 (padding and perplexity): the toy batch and GPT, the pad-id test, the three
perplexities (the widget's state: :func:`compare_perplexities`) and the exercise checkers. The
figures are in :mod:`lmcore.course.padding_views`; gradient accumulation in
:mod:`lmcore.course.padding_accumulation`."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..loss import causal_lm_loss
from ..model import GPT
from ..perplexity import PerplexityMeter
from ..shift import IGNORE_INDEX, labels_from_attention_mask, num_valid_targets
from .checks import Case, check
from .toys import BOS, EOS, PAD, forward_with_mask, toy_gpt, toy_vocab

__all__ = [
    "TOKENS",
    "PAD",
    "BOS",
    "EOS",
    "example_batch",
    "right_padded",
    "toy_model",
    "real_logit_shift",
    "pad_id_effect",
    "context_logits",
    "ragged_batches",
    "three_perplexities",
    "compare_perplexities",
    "check_labels_from_attention_mask",
    "check_token_weighted_perplexity",
]

TOKENS = toy_vocab(["deep", "nets", "learn", "fast", "cats", "sit", "on", "warm", "mats"], bos=True)


def example_batch(pad_id: int = PAD, eos_id: int = EOS, *, left: bool = False):
    """The two-row batch ``A = BOS deep nets EOS PAD PAD``, ``B = BOS cats sit on mats EOS``.

    Returns ``(input_ids, attention_mask)``, both (2, 6); ``left=True`` pads on the left.
    """
    rows = [[BOS, 3, 4, eos_id], [BOS, 7, 8, 9, 11, eos_id]]

    def pad(r, v):
        return [v] * (6 - len(r)) + r if left else r + [v] * (6 - len(r))

    return torch.tensor([pad(r, pad_id) for r in rows]), torch.tensor([pad([1] * len(r), 0) for r in rows])


def right_padded(ids: torch.Tensor, lengths: torch.Tensor):
    """``ids`` (N, L) with PAD after each row's length, and ``labels_from_attention_mask``."""
    mask = (torch.arange(ids.shape[1])[None] < lengths[:, None]).long()
    ids = torch.where(mask == 1, ids, PAD)
    return ids, labels_from_attention_mask(ids, mask)


def toy_model(seed: int = 0) -> GPT:
    """The notebook's seeded 1-layer GPT (:func:`lmcore.course.toys.toy_gpt`, init_std 0.5) in
    float64, eval mode: its rounding error sits far below the 3 decimals the notebook prints
    (checked under ATEN_CPU_CAPABILITY=default and avx2)."""
    return toy_gpt(len(TOKENS), init_std=0.5, dtype=torch.float64, seed=seed)


def real_logit_shift(*, reset_positions: bool, seed: int = 0) -> float:
    """max |Δ logits| of the real tokens of the left-padded example batch against the same rows
    run one by one without padding (both masks used)."""
    model = toy_model(seed)
    ids, mask = example_batch(left=True)
    with torch.no_grad():
        out = forward_with_mask(model, ids, mask, reset_positions=reset_positions)
        return max(
            float((model(ids[n : n + 1, mask[n] == 1])[0] - out[n, mask[n] == 1]).abs().max())
            for n in range(len(ids))
        )


def pad_id_effect(
    use_attention_mask: bool, use_loss_mask: bool, *, strict: bool = True, new_pad_id: int = 10, seed: int = 0
) -> float:
    """|loss(pad id = PAD) - loss(pad id = new_pad_id)| on the left-padded example batch.

    The attention mask reaches the GPT as document ids (padding is its own "document" -1, so
    real tokens cannot read it). The loss mask is labels_from_attention_mask, plus (``strict``)
    -100 on the first real token, which left padding makes the target of a pad position.
    """
    model, losses = toy_model(seed), []
    for pad_id in (PAD, new_pad_id):
        ids, mask = example_batch(pad_id, left=True)
        labels = labels_from_attention_mask(ids, mask) if use_loss_mask else ids
        if use_loss_mask and strict:
            labels[:, 1:][mask[:, :-1] == 0] = IGNORE_INDEX
        with torch.no_grad():
            logits = (
                forward_with_mask(model, ids, mask, reset_positions=False)
                if use_attention_mask
                else model(ids)
            )
            losses.append(float(causal_lm_loss(logits, labels)))
    return abs(losses[0] - losses[1])


# ---------------------------------------------------------------- perplexity over batches


def context_logits(input_ids: torch.Tensor, vocab_size: int, *, seed: int = 0) -> torch.Tensor:
    """A fixed toy "model" that improves with context: logits (N, L, V) in float64, noise plus
    a bonus on the true next token that grows like log(1 + t). Short rows cost more per token."""
    g = torch.Generator().manual_seed(seed)
    N, L = input_ids.shape
    logits = torch.randn(N, L, vocab_size, generator=g, dtype=torch.float64)
    nxt = torch.cat([input_ids[:, 1:], input_ids[:, -1:]], dim=1).clamp(0, vocab_size - 1)
    bonus = 1.2 * torch.log1p(torch.arange(L, dtype=torch.float64))[None, :].expand(N, L)
    return logits.scatter_add(2, nxt[..., None], bonus[..., None].contiguous())


def ragged_batches(
    shortest: int = 4,
    longest: int = 32,
    *,
    n_batches: int = 6,
    rows: int = 4,
    vocab_size: int = 50,
    seed: int = 0,
):
    """``n_batches`` batches of ``rows`` rows, all padded to ``longest``; batch b's real lengths
    run from ``longest`` (b = 0) down to about ``shortest``. Returns a list of (logits, labels)."""
    if not 2 <= shortest <= longest:
        raise ValueError(f"need 2 <= shortest <= longest; got shortest={shortest}, longest={longest}.")
    g = torch.Generator().manual_seed(seed)
    out = []
    for b, target in enumerate(np.linspace(longest, shortest, n_batches).round().astype(int)):
        lens = torch.randint(max(2, int(target) - 2), int(target) + 1, (rows,), generator=g)
        ids, labels = right_padded(torch.randint(3, vocab_size, (rows, longest), generator=g), lens)
        out.append((context_logits(ids, vocab_size, seed=seed * 1000 + b), labels))
    return out


def three_perplexities(batches) -> dict:
    """Token-weighted perplexity exp(ΣNLL/Σtokens) (via :class:`PerplexityMeter`), exp(mean of
    batch mean losses) and the mean of per-batch perplexities, for a list of (logits, labels)."""
    meter, means = PerplexityMeter(), []
    for logits, labels in batches:
        total = meter.update(logits, labels)
        means.append(total / num_valid_targets(labels))
    return {
        "token_weighted": meter.perplexity,
        "mean_of_batch_means": math.exp(np.mean(means)),
        "mean_of_batch_perplexities": float(np.mean(np.exp(means))),
        "n_tokens": meter.n_tokens,
    }


def compare_perplexities(shortest: int = 4, longest: int = 32, *, n_batches: int = 6, seed: int = 0) -> dict:
    """The widget's state: :func:`three_perplexities` on :func:`ragged_batches` plus the
    fraction of all positions that are padding."""
    batches = ragged_batches(shortest, longest, n_batches=n_batches, seed=seed)
    real = sum(int((lab != IGNORE_INDEX).sum()) for _, lab in batches)
    return {
        **three_perplexities(batches),
        "padding_fraction": 1 - real / sum(lab.numel() for _, lab in batches),
    }


# ---------------------------------------------------------------- exercise checkers


def check_labels_from_attention_mask(fn) -> bool:
    g = torch.Generator().manual_seed(5)
    cases = [
        Case(example_batch(), label="the example batch (right padding)"),
        Case(example_batch(left=True), label="the example batch, left padding"),
        Case((example_batch()[0], example_batch()[1].bool()), label="bool attention_mask"),
    ]
    for n in range(3):
        ids = torch.randint(0, 50, (3, 7), generator=g)
        cases.append(Case((ids, (torch.rand(3, 7, generator=g) > 0.3).long()), label=f"random {n}"))
    return check(
        "labels_from_attention_mask",
        fn,
        labels_from_attention_mask,
        cases,
        hint="copy input_ids (clone) and put -100 where attention_mask is 0; do not shift.",
    )


def _naive_perplexity(batches) -> float:
    total, count = 0.0, 0
    for logits, labels in batches:
        for n in range(labels.shape[0]):
            for t in range(1, labels.shape[1]):
                if int(labels[n, t]) != IGNORE_INDEX:
                    total -= float(torch.log_softmax(logits[n, t - 1].double(), -1)[labels[n, t]])
                    count += 1
    return math.exp(total / count)


def _ragged_cases(seed: int, n_batches: int):
    """Random (logits, labels) batches of different shapes, logit scales and real lengths."""
    g, out = torch.Generator().manual_seed(seed), []
    for b in range(n_batches):
        N, L = int(torch.randint(1, 4, (1,), generator=g)), int(torch.randint(3, 9, (1,), generator=g))
        _, labels = right_padded(
            torch.randint(0, 7, (N, L), generator=g), torch.randint(2, L + 1, (N,), generator=g)
        )
        out.append(((0.5 + 2.0 * b) * torch.randn(N, L, 7, generator=g), labels))
    return out


def check_token_weighted_perplexity(fn) -> bool:
    cases = [Case((ragged_batches(4, 16, n_batches=3, rows=2),), label="three ragged batches")]
    cases += [
        Case(
            (_ragged_cases(s, k),), label=f"random ragged batches, set {s} ({k} batch{'es' if k > 1 else ''})"
        )
        for s, k in ((1, 1), (2, 3), (3, 5))
    ]
    return check(
        "token_weighted_perplexity",
        fn,
        _naive_perplexity,
        cases,
        rtol=1e-5,
        hint="sum the NLL of every valid target (reduction='sum') and count them "
        "(num_valid_targets) over all batches; divide once at the end, then exp.",
    )
