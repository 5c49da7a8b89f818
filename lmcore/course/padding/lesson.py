"""Notebook 05 (padding and perplexity): the toy batch and GPT, the pad-id test, the attention
mask as the model receives it, and a toy "model" that improves with context. Perplexity over
batches and long texts is in :mod:`lmcore.course.padding.perplexity`, the exercise checkers in
:mod:`lmcore.course.padding.exercises` and :mod:`lmcore.course.padding.accumulation` (gradient
accumulation), the figures in :mod:`lmcore.course.padding.views`."""

from __future__ import annotations

import torch

from ...loss import causal_lm_loss
from ...model import GPT
from ...shift import IGNORE_INDEX, labels_from_attention_mask
from ..toys import BOS, EOS, PAD, forward_with_mask, toy_gpt, toy_vocab

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
    "attention_from_mask",
    "context_logits",
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

    The attention mask reaches the GPT as the pattern :func:`attention_from_mask` builds (no
    query reads a padding key). The loss mask is labels_from_attention_mask, plus (``strict``)
    -100 on the first real token, which left padding makes the target of a pad position.
    """
    model, losses = toy_model(seed), []
    for pad_id in (PAD, new_pad_id):
        ids, mask = example_batch(pad_id, left=True)
        labels = labels_from_attention_mask(ids, mask) if use_loss_mask else ids
        if use_loss_mask and strict:
            labels[:, 1:][mask[:, :-1] == 0] = IGNORE_INDEX
        with torch.no_grad():
            logits = model(ids, attention=attention_from_mask(mask)) if use_attention_mask else model(ids)
            losses.append(float(causal_lm_loss(logits, labels)))
    return abs(losses[0] - losses[1])


def attention_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """What a model does with an attention mask (N, L): the bool pattern (N, 1, L, L), True where
    query i may read key j: causal (j <= i) and key j real. A padding query would then read
    nothing (a softmax over no key is NaN), so each query may also read itself; nothing scores a
    padding position's output anyway. Pass it as ``GPT(..., attention=...)``."""
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2:
        raise ValueError("attention_mask must be a (N, L) tensor of 0/1.")
    L = attention_mask.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    real_key = attention_mask[:, None, None, :] == 1  # (N, 1, 1, L)
    return (causal & real_key) | torch.eye(L, dtype=torch.bool)


# ---------------------------------------------------------------- a toy model for perplexity


def context_logits(input_ids: torch.Tensor, vocab_size: int, *, seed: int = 0) -> torch.Tensor:
    """A fixed toy "model" that improves with context: logits (N, L, V) in float64, noise plus
    a bonus on the true next token that grows like log(1 + t). Short rows cost more per token."""
    g = torch.Generator().manual_seed(seed)
    N, L = input_ids.shape
    logits = torch.randn(N, L, vocab_size, generator=g, dtype=torch.float64)
    nxt = torch.cat([input_ids[:, 1:], input_ids[:, -1:]], dim=1).clamp(0, vocab_size - 1)
    bonus = 1.2 * torch.log1p(torch.arange(L, dtype=torch.float64))[None, :].expand(N, L)
    return logits.scatter_add(2, nxt[..., None], bonus[..., None].contiguous())
