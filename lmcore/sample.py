"""Sampling from a causal LM: greedy, temperature, top-k and top-p (nucleus).

One step turns the last position's logits (N, V) into a distribution with
:func:`next_token_distribution` (temperature, then top-k, then top-p, the Hugging Face order),
draws a token, appends it, and repeats. :func:`generate` feeds the model at most its last
``block_size - 1`` tokens. Why not ``block_size``: lmcore trains on windows of ``block_size``
tokens with the shift inside the loss, so the last position of a window never has a target and
its position embedding never gets a gradient. Predicting from it gives gibberish; every
position up to ``block_size - 2`` is trained.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from ._validate import _describe, require_generator, require_ids_in_range, require_int, require_int_scalar

__all__ = ["filter_logits", "next_token_distribution", "generate"]


def _number(name: str, x, what: str) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be {what}; got {_describe(x)}.")
    return float(x)


def _check(temperature, top_k, top_p):
    what = "a number >= 0 (0 means greedy)"
    temperature = _number("temperature", temperature, what)
    if not 0 <= temperature < float("inf"):
        raise ValueError(
            f"temperature must be {what}; got {temperature!r}. Use a finite value "
            "(1 samples from the model as it is)."
        )
    if top_k is not None:
        if isinstance(top_k, (bool, np.bool_)) or not isinstance(top_k, numbers.Integral):
            raise TypeError(f"top_k must be None or an int >= 1; got {_describe(top_k)}.")
        if top_k < 1:
            raise ValueError(
                f"top_k must be None or an int >= 1; got {top_k!r}. It is how many "
                "of the most likely tokens to keep."
            )
        top_k = int(top_k)
    if top_p is not None:
        top_p = _number("top_p", top_p, "None or a number in (0, 1]")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be None or a number in (0, 1]; got {top_p!r}.")
    return temperature, top_k, top_p


def _check_logits(logits) -> torch.Tensor:
    """Floating point (..., V) with V >= 1, no NaN or +inf, and at least one finite score per row."""
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() < 1:
        raise TypeError(f"logits must be a floating-point tensor (..., V); got {_describe(logits)}.")
    if logits.shape[-1] == 0:
        raise ValueError(f"logits must score at least one token (V >= 1); got shape {tuple(logits.shape)}.")
    if bool((logits.isnan() | logits.isposinf()).any()):
        raise ValueError(
            "logits contain NaN or +inf, so no distribution can be formed. The "
            "model's forward pass diverged (check the weights, or fp16 overflow)."
        )
    if logits.numel() and bool(logits.isneginf().all(-1).any()):
        raise ValueError(
            "logits are -inf for every token of some row: every token is masked "
            "and nothing can be sampled. Keep at least one token unmasked."
        )
    return logits


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None):
    """A copy of ``logits`` (..., V) with -inf at every token top-k / top-p removes.

    top-k keeps the k largest logits (and any tied with the k-th). top-p keeps the smallest
    set of most likely tokens whose probabilities sum to at least ``top_p``; the most likely
    token always stays.
    """
    _check_logits(logits)
    _, top_k, top_p = _check(1.0, top_k, top_p)
    return _filter(logits, top_k, top_p)


def _filter(logits, top_k, top_p):
    out = logits.clone()
    if top_k is not None and top_k < out.shape[-1]:
        kth = torch.topk(out, top_k, dim=-1).values[..., -1:]
        out = out.masked_fill(out < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_logits, order = torch.sort(out, dim=-1, descending=True, stable=True)
        probs = torch.softmax(sorted_logits.to(torch.promote_types(out.dtype, torch.float32)), -1)
        before = probs.cumsum(-1) - probs  # mass of the more likely tokens
        drop_sorted = before >= top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        out = out.masked_fill(drop, float("-inf"))
    return out


def next_token_distribution(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """Probabilities (..., V) of the next token from its logits (..., V).

    ``temperature`` 0 puts all mass on the argmax (greedy; the first on ties); otherwise the
    logits are divided by it and filtered by top-k / top-p before the softmax. A temperature so
    small that the divided logits overflow is taken as its limit: all mass on the maximum
    (split evenly between exact ties), never NaN.
    """
    temperature, top_k, top_p = _check(temperature, top_k, top_p)
    _check_logits(logits)
    if temperature == 0:
        idx = logits.argmax(dim=-1, keepdim=True)
        return torch.zeros_like(logits, dtype=torch.float32).scatter(-1, idx, 1.0)
    scaled = logits.float() / temperature
    if not bool(torch.isfinite(scaled[torch.isfinite(logits)]).all()):
        # 1 / temperature overflowed float32: subtract the maximum first (the softmax is the
        # same) and divide in float64, so the best token scores 0 and every other one -inf.
        z = logits.double()
        scaled = (z - z.amax(dim=-1, keepdim=True)) / temperature
    return torch.softmax(_filter(scaled, top_k, top_p), dim=-1).float()


def _prompt_tensor(prompt_ids, device) -> torch.Tensor:
    """``prompt_ids`` as a long tensor (N, L); ints only, never coerced from floats or bools."""
    how = "Pass token ids: a list of ints, an int tensor (L,) or a batch (N, L)."
    if isinstance(prompt_ids, torch.Tensor):
        require_int("prompt_ids", prompt_ids)
        ids = prompt_ids
    elif isinstance(prompt_ids, np.ndarray):
        if prompt_ids.dtype not in (np.int64, np.int32):
            raise TypeError(
                f"prompt_ids must hold int64 or int32 token ids; got a NumPy array "
                f"of dtype {prompt_ids.dtype}. {how}"
            )
        ids = torch.from_numpy(np.ascontiguousarray(prompt_ids))
    elif isinstance(prompt_ids, (list, tuple)):
        stack = [(prompt_ids, "prompt_ids")]
        while stack:
            seq, where = stack.pop()
            for k, x in enumerate(seq):
                if isinstance(x, (list, tuple)):
                    stack.append((x, f"{where}[{k}]"))
                elif isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
                    raise TypeError(
                        f"prompt_ids must hold int token ids; got {_describe(x)} at {where}[{k}]. {how}"
                    )
        try:
            ids = torch.tensor(prompt_ids, dtype=torch.long)
        except (ValueError, RuntimeError, OverflowError, TypeError) as err:
            raise ValueError(
                f"prompt_ids must be a list of ints or a rectangular list of lists "
                f"(N, L) of int64 token ids; torch could not convert it ({err})."
            ) from None
    else:
        raise TypeError(
            f"prompt_ids must be a list of ints, (L,) or (N, L); got {_describe(prompt_ids)}. {how}"
        )
    squeeze = ids.dim() == 1
    ids = ids[None] if squeeze else ids
    if ids.dim() != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(
            f"prompt_ids must be a non-empty list, (L,) or (N, L); got shape "
            f"{tuple(ids.shape) if not squeeze else tuple(ids.shape[1:])}. Start "
            "from at least one token (e.g. BOS or EOS)."
        )
    return ids.to(device=device, dtype=torch.long), squeeze


@torch.no_grad()
def generate(
    model,
    prompt_ids,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator=None,
    eos_id: int | None = None,
) -> torch.Tensor:
    """Extend ``prompt_ids`` by up to ``max_new_tokens`` tokens sampled from ``model``.

    ``prompt_ids``: a list of ints, a 1-D tensor (L,) or a batch (N, L); the result has the
    same number of dimensions, prompt included. A seeded ``torch.Generator`` makes the
    samples reproducible. With ``eos_id``, a row that has produced EOS is filled with EOS and
    generation stops once every row has. The model is run in eval mode (restored afterwards)
    on at most its last ``block_size - 1`` tokens (the positions training scores; see the
    module docstring).
    """
    temperature, top_k, top_p = _check(temperature, top_k, top_p)
    if isinstance(max_new_tokens, (bool, np.bool_)) or not isinstance(max_new_tokens, numbers.Integral):
        raise TypeError(f"max_new_tokens must be an int >= 0; got {_describe(max_new_tokens)}.")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0; got {max_new_tokens!r}.")
    block_size = getattr(getattr(model, "config", None), "block_size", None)
    if (
        not isinstance(model, torch.nn.Module)
        or isinstance(block_size, bool)
        or not isinstance(block_size, numbers.Integral)
    ):
        raise TypeError(
            f"model must be a causal LM module with config.block_size (e.g. "
            f"lmcore.GPT); got {type(model).__name__}."
        )
    require_generator(generator)
    vocab_size = getattr(model.config, "vocab_size", None)
    if eos_id is not None:
        eos_id = require_int_scalar(
            "eos_id",
            eos_id,
            min=0,
            max=None if vocab_size is None else vocab_size - 1,
            hint="It must be a token id of the model.",
        )
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    ids, squeeze = _prompt_tensor(prompt_ids, device)
    require_ids_in_range("prompt_ids", ids, vocab_size, "Encode the prompt with the model's own tokenizer.")
    context = max(1, int(block_size) - 1)  # the last trained position is block_size - 2
    was_training = model.training
    model.eval()
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=device)
    try:
        for _ in range(max_new_tokens):
            logits = model(ids[:, -context:])[:, -1, :]  # (N, V)
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
