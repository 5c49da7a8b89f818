"""Sampling from a causal LM: greedy, temperature, top-k and top-p (nucleus).

One step turns the last position's logits (N, V) into a distribution with
:func:`next_token_distribution` (temperature, then top-k, then top-p, the Hugging Face order),
draws a token, appends it, and repeats. :func:`generate` never feeds the model more than its
``block_size`` tokens: the context is cropped to the most recent ones.
"""
from __future__ import annotations

import torch

__all__ = ["filter_logits", "next_token_distribution", "generate"]


def _check(temperature, top_k, top_p):
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0 (0 means greedy); got {temperature!r}.")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None or an int >= 1; got {top_k!r}.")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or a number in (0, 1]; got {top_p!r}.")


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None):
    """A copy of ``logits`` (..., V) with -inf at every token top-k / top-p removes.

    top-k keeps the k largest logits (and any tied with the k-th). top-p keeps the smallest
    set of most likely tokens whose probabilities sum to at least ``top_p``; the most likely
    token always stays.
    """
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() < 1:
        raise TypeError(f"logits must be a floating-point tensor (..., V); got {logits!r:.80}.")
    _check(1.0, top_k, top_p)
    out = logits.clone()
    if top_k is not None and top_k < out.shape[-1]:
        kth = torch.topk(out, top_k, dim=-1).values[..., -1:]
        out = out.masked_fill(out < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_logits, order = torch.sort(out, dim=-1, descending=True, stable=True)
        probs = torch.softmax(sorted_logits.to(torch.promote_types(out.dtype, torch.float32)), -1)
        before = probs.cumsum(-1) - probs                 # mass of the more likely tokens
        drop_sorted = before >= top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        out = out.masked_fill(drop, float("-inf"))
    return out


def next_token_distribution(logits: torch.Tensor, temperature: float = 1.0,
                            top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Probabilities (..., V) of the next token from its logits (..., V).

    ``temperature`` 0 puts all mass on the argmax (greedy; the first on ties); otherwise the
    logits are divided by it and filtered by top-k / top-p before the softmax.
    """
    _check(temperature, top_k, top_p)
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point tensor (..., V); got {type(logits).__name__}.")
    if temperature == 0:
        idx = logits.argmax(dim=-1, keepdim=True)
        return torch.zeros_like(logits, dtype=torch.float32).scatter(-1, idx, 1.0)
    filtered = filter_logits(logits.float() / temperature, top_k, top_p)
    return torch.softmax(filtered, dim=-1)


@torch.no_grad()
def generate(model, prompt_ids, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, generator=None,
             eos_id: int | None = None) -> torch.Tensor:
    """Extend ``prompt_ids`` by up to ``max_new_tokens`` tokens sampled from ``model``.

    ``prompt_ids``: a list of ints, a 1-D tensor (L,) or a batch (N, L); the result has the
    same number of dimensions, prompt included. A seeded ``torch.Generator`` makes the
    samples reproducible. With ``eos_id``, a row that has produced EOS is filled with EOS and
    generation stops once every row has. The model is run in eval mode (restored afterwards)
    on at most its last ``block_size`` tokens.
    """
    _check(temperature, top_k, top_p)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0; got {max_new_tokens!r}.")
    device = next(model.parameters()).device
    ids = torch.as_tensor(prompt_ids, dtype=torch.long, device=device)
    squeeze = ids.dim() == 1
    ids = ids[None] if squeeze else ids
    if ids.dim() != 2 or ids.shape[1] == 0:
        raise ValueError(f"prompt_ids must be a non-empty list, (L,) or (N, L); got shape "
                         f"{tuple(ids.shape)}. Start from at least one token (e.g. BOS or EOS).")
    block_size = model.config.block_size
    was_training = model.training
    model.eval()
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=device)
    try:
        for _ in range(max_new_tokens):
            logits = model(ids[:, -block_size:])[:, -1, :]                  # (N, V)
            probs = next_token_distribution(logits, temperature, top_k, top_p)
            if temperature == 0:
                nxt = probs.argmax(dim=-1)
            else:
                gen_dev = generator.device if generator is not None else probs.device
                nxt = torch.multinomial(probs.to(gen_dev), 1, generator=generator)[:, 0].to(device)
            if eos_id is not None:
                nxt = torch.where(done, torch.full_like(nxt, eos_id), nxt)
                done |= nxt == eos_id
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            if eos_id is not None and bool(done.all()):
                break
    finally:
        model.train(was_training)
    return ids[0] if squeeze else ids
