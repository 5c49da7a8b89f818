"""Notebook 10's inference path: greedy generation two ways, recomputing every prefix and with a
key/value cache, and the prefill / decode split.

A causal model's position t depends only on positions <= t, so the keys and values that earlier
positions computed never change when a token is appended: a decode step feeds only the new token
and reads the cached keys and values. :func:`forward_cached` does it over the modules of
:class:`lmcore.model.GPT` (which has no cache of its own); the tests check it against the model's
own uncached forward.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from ..._validate import require_int_scalar, require_tensor
from ...model import GPT

__all__ = ["forward_cached", "generate_uncached", "generate_cached", "time_prefill_decode"]


def _check(model, tokens) -> torch.Tensor:
    if not isinstance(model, GPT):
        raise TypeError(f"model must be an lmcore.model.GPT; got {type(model).__name__}.")
    tokens = require_tensor("tokens", tokens, 2, "(N, T)")
    if tokens.is_floating_point():
        raise TypeError(f"tokens must hold integer ids; got {tokens.dtype}.")
    return tokens


@torch.no_grad()
def forward_cached(model: GPT, tokens: torch.Tensor, cache: list | None = None):
    """Logits ``(N, T, V)`` of ``tokens`` ``(N, T)`` appended after the ``P`` positions already in
    ``cache`` (None or [] for none), and the cache extended to ``P + T`` positions.

    The cache holds one ``(keys, values)`` pair per block, each ``(N, H, P, D/H)``. Query ``i``
    (absolute position ``P + i``) reads every cached key and the new keys up to itself: the
    logits equal ``model(all tokens so far)[:, P:]``. ``T = len(prompt)`` on an empty cache is the
    prefill; ``T = 1`` is one decode step.
    """
    tokens = _check(model, tokens)
    cache = list(cache or [])
    if cache and len(cache) != len(model.blocks):
        raise ValueError(f"cache must hold one (keys, values) pair per block ({len(model.blocks)}).")
    P = cache[0][0].shape[2] if cache else 0
    if P + tokens.shape[1] > model.config.block_size:
        raise ValueError(
            f"{P} cached + {tokens.shape[1]} new positions exceed block_size {model.config.block_size}."
        )
    return _cached_pass(model, tokens, cache)


def _cached_pass(model: GPT, tokens, cache: list, *, start: int | None = None, sees=None):
    """:func:`forward_cached`'s computation on checked arguments. The new tokens are numbered from
    ``start`` (the cache's length by default) and query ``i`` reads key ``j`` where ``sees[i, j]``
    (``(T, P + T)`` bool; by default key ``j <= P + i``): the checker of notebook 10's exercise
    passes other values to reproduce two plausible mistakes."""
    N, T = tokens.shape
    P = cache[0][0].shape[2] if cache else 0
    start = P if start is None else start
    pos = torch.arange(start, start + T, device=tokens.device)
    x = model.wte(tokens) + model.wpe(pos)[None]  # (N, T, D)
    if sees is None:
        sees = torch.ones(T, P + T, dtype=torch.bool, device=tokens.device).tril(P)  # key j <= P + i
    new_cache = []
    for b, block in enumerate(model.blocks):
        attn, h = block.attn, block.ln_1(x)
        D, H = h.shape[-1], attn.n_head
        q, k, v = (t.view(N, T, H, D // H).transpose(1, 2) for t in attn.c_attn(h).split(D, dim=2))
        if cache:
            k, v = torch.cat([cache[b][0], k], 2), torch.cat([cache[b][1], v], 2)
        new_cache.append((k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=sees)  # (N, H, T, D/H)
        x = x + attn.c_proj(y.transpose(1, 2).reshape(N, T, D))
        x = x + block.mlp(block.ln_2(x))
    return model.lm_head(model.ln_f(x)), new_cache


def _prompt_and_n(model, prompt, n):
    prompt = _check(model, prompt)
    n = require_int_scalar("n", n, min=1)
    if prompt.shape[1] + n - 1 > model.config.block_size:
        raise ValueError(
            f"prompt ({prompt.shape[1]}) + n - 1 = {prompt.shape[1] + n - 1} exceeds block_size "
            f"{model.config.block_size}."
        )
    return prompt, n


@torch.no_grad()
def generate_uncached(model: GPT, prompt: torch.Tensor, n: int) -> dict:
    """Greedy: ``n`` tokens after ``prompt`` ``(N, P)``, each from a full forward over the whole
    text so far. Returns ``tokens`` (N, n), the ``logits`` (N, n, V) each token was chosen from,
    and ``positions``, the positions computed in all (``P + (P+1) + ... + (P+n-1)``)."""
    was_training = model.training
    model.eval()
    ids, logits, positions = _prompt_and_n(model, prompt, n)[0], [], 0
    for _ in range(n):
        step = model(ids)[:, -1]  # (N, V): only the last position is used
        positions += ids.shape[1]
        logits.append(step)
        ids = torch.cat([ids, step.argmax(-1, keepdim=True)], 1)
    model.train(was_training)
    return {"tokens": ids[:, prompt.shape[1] :], "logits": torch.stack(logits, 1), "positions": positions}


@torch.no_grad()
def generate_cached(model: GPT, prompt: torch.Tensor, n: int) -> dict:
    """The same greedy tokens as :func:`generate_uncached`, from one prefill over the prompt and
    ``n - 1`` one-token decode steps that reuse the cache (``P + n - 1`` positions in all)."""
    was_training = model.training
    model.eval()
    prompt, n = _prompt_and_n(model, prompt, n)
    out, cache = forward_cached(model, prompt)  # the prefill
    step, positions, logits, tokens = out[:, -1], prompt.shape[1], [], []
    for i in range(n):
        logits.append(step)
        tokens.append(step.argmax(-1, keepdim=True))
        if i < n - 1:
            out, cache = forward_cached(model, tokens[-1], cache)  # one decode step
            step, positions = out[:, -1], positions + 1
    model.train(was_training)
    return {"tokens": torch.cat(tokens, 1), "logits": torch.stack(logits, 1), "positions": positions}


def time_prefill_decode(model: GPT, prompt: torch.Tensor, repeats: int = 5) -> dict:
    """Seconds (best of ``repeats``) for the prefill of ``prompt`` ``(N, P)`` in one forward, and
    for the same ``P`` tokens fed one decode step at a time through the cache."""
    prompt = _check(model, prompt)
    repeats = require_int_scalar("repeats", repeats, min=1)
    was_training = model.training
    model.eval()

    def decode_all():
        cache = None
        for t in range(prompt.shape[1]):
            _, cache = forward_cached(model, prompt[:, t : t + 1], cache)

    best = {}
    for name, fn in (("prefill", lambda: forward_cached(model, prompt)), ("decode", decode_all)):
        fn()  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        best[name] = min(times)
    model.train(was_training)
    return {"prefill_s": best["prefill"], "decode_s": best["decode"], "tokens": prompt.shape[1]}
