"""What the checks of :mod:`lmcore.diagnose` feed a pipeline and how they read it back.

Inputs whose right answer is known (``place``: logits BIG on a chosen token; ``ragged_batch``:
right- or left-padded rows) and readings of a ``loss_fn(logits, input_ids, attention_mask)``
(``loss_value``: its value as a float, NotFinite for NaN/inf; ``token_weights``: how much each
position counts in it; ``gradient_reading``: the weight and the target id of each position, read
from the gradient; ``moves_value``: which positions' logits move the value; ``expected_scored``:
the positions a correct loss scores).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .._validate import require_bool, require_int_scalar

__all__ = [
    "BIG",
    "NotFinite",
    "loss_value",
    "place",
    "ragged_batch",
    "token_weights",
    "expected_scored",
    "moves_value",
    "gradient_reading",
]

BIG = 20.0  # the "perfect" logit: loss per target log(1 + (V-1) e^-20), about 0


class NotFinite(ArithmeticError):
    """loss_fn returned NaN or an infinity."""


def loss_value(loss_fn, logits, ids, mask) -> float:
    """loss_fn's value as a float, without building a graph; NotFinite for NaN/inf."""
    with torch.no_grad():
        value = loss_fn(logits, ids, mask)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"loss_fn must return a scalar (a one-element tensor or a float); got "
            f"{tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}."
        )
    if not math.isfinite(value):
        raise NotFinite(f"loss_fn returned {value}")
    return float(value)


def place(ids: torch.Tensor, offset: int, V: int) -> torch.Tensor:
    """Logits (N, L, V): BIG on ids[:, t + offset] at each position t where that exists, else 0."""
    N, L = ids.shape
    logits = torch.zeros(N, L, V, device=ids.device)
    for t in range(max(0, -offset), min(L, L - offset)):
        logits[torch.arange(N), t, ids[:, t + offset]] = BIG
    return logits


def ragged_batch(
    vocab_size: int,
    seq_len: int = 16,
    *,
    pad_id: int = 0,
    eos_id: int | None = None,
    seed: int = 0,
    left: bool = False,
):
    """The ragged batch the checks use: ``(input_ids, attention_mask)`` (3, L), real lengths
    L, L//2 + 1, L - 3 (right padding; each row ends with ``eos_id`` when given), or with
    ``left=True`` L, L - L//4, L//2 padded on the left. Real tokens never use pad_id or eos_id."""
    V = require_int_scalar("vocab_size", vocab_size, min=5)
    L = require_int_scalar("seq_len", seq_len, min=4)
    pad_id = require_int_scalar("pad_id", pad_id, min=0, max=V - 1)
    eos_id = None if eos_id is None else require_int_scalar("eos_id", eos_id, min=0, max=V - 1)
    g = torch.Generator().manual_seed(
        require_int_scalar("seed", seed) + (7 if require_bool("left", left) else 0)
    )
    real = torch.tensor([i for i in range(V) if i not in (pad_id, eos_id)])
    ids = real[torch.randint(0, len(real), (3, L), generator=g)]
    lengths = torch.tensor([L, L - L // 4, L // 2] if left else [L, L // 2 + 1, L - 3])
    pos = torch.arange(L)[None]
    mask = (pos >= L - lengths[:, None]) if left else (pos < lengths[:, None])
    if eos_id is not None and not left:
        ids = ids.masked_fill(pos == lengths[:, None] - 1, eos_id)
    return ids.masked_fill(~mask, pad_id), mask.long()


def token_weights(
    loss_fn: Callable, input_ids: torch.Tensor, attention_mask: torch.Tensor, vocab_size: int
) -> torch.Tensor:
    """How much each position's logits count in ``loss_fn``: (N, L), 0 where nothing is scored.

    Read from the gradient at zero logits and scaled so that a cross-entropy term with
    coefficient w reads w: a token-weighted mean over n targets gives 1/n at each of them.
    """
    vocab_size = require_int_scalar("vocab_size", vocab_size, min=2)
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise TypeError(f"input_ids must be a 2-D tensor (N, L); got {type(input_ids).__name__}.")
    logits = torch.zeros(*input_ids.shape, vocab_size, device=input_ids.device, requires_grad=True)
    with torch.enable_grad():
        loss = loss_fn(logits, input_ids, attention_mask)
        if not (isinstance(loss, torch.Tensor) and loss.requires_grad):
            raise ValueError(
                "loss_fn's result has no gradient with respect to the logits; is it "
                "detached (.item(), .detach(), torch.no_grad())?"
            )
        if loss.numel() != 1 or not bool(torch.isfinite(loss).all()):
            raise ValueError(
                f"loss_fn must return a finite scalar; got {loss.detach().flatten()[:4].tolist()}."
            )
        (grad,) = torch.autograd.grad(loss, logits)
    return grad.norm(dim=-1) / math.sqrt((vocab_size - 1) / vocab_size)


def expected_scored(ids: torch.Tensor, mask: torch.Tensor, unscored=None) -> torch.Tensor:
    """(N, L) bool: the positions t a correct loss scores: token t + 1 exists, is real, and is not
    declared unscored by ``unscored(input_ids, attention_mask)`` (True at tokens that are not
    targets on purpose, e.g. a prompt)."""
    want = torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
    want[:, :-1] = mask[:, 1:] == 1
    if unscored is not None:
        skip = unscored(ids, mask)
        if not isinstance(skip, torch.Tensor) or skip.shape != ids.shape:
            raise ValueError(
                f"unscored(input_ids, attention_mask) must return a bool tensor of shape "
                f"{tuple(ids.shape)} (True at tokens that are not targets); got "
                f"{tuple(skip.shape) if isinstance(skip, torch.Tensor) else type(skip).__name__}."
            )
        want[:, :-1] &= ~skip.to(ids.device).bool()[:, 1:]
    return want


def moves_value(loss_fn, ids, mask, V, gen, base=None) -> torch.Tensor:
    """(N, L) bool: changing the logits at (n, t) alone changes loss_fn's value."""
    N, L = ids.shape
    base = torch.randn(N, L, V, generator=gen).to(ids.device) if base is None else base
    ref, moved = loss_value(loss_fn, base, ids, mask), torch.zeros(N, L, dtype=torch.bool)
    for n in range(N):
        for t in range(L):
            other = base.clone()
            other[n, t] = 10.0 * torch.randn(V, generator=gen).to(ids.device)
            moved[n, t] = abs(loss_value(loss_fn, other, ids, mask) - ref) > 1e-6 * max(1.0, abs(ref))
    return moved.to(ids.device)


def gradient_reading(loss_fn, ids, mask, V, smoothing=0.0):
    """(weights, targets), both (N, L), read from the gradient of loss_fn at zero logits: the
    weight of each position (as token_weights, the uniform part of the gradient, which a z-loss
    adds, removed and label smoothing's factor 1 - smoothing divided out) and its target id (the
    token the gradient pushes up; -1 where the weight is 0)."""
    logits = torch.zeros(*ids.shape, V, device=ids.device, requires_grad=True)
    with torch.enable_grad():
        loss = loss_fn(logits, ids, mask)
        if not (isinstance(loss, torch.Tensor) and loss.requires_grad):
            zero = torch.zeros(ids.shape, device=ids.device)
            return zero, torch.full(ids.shape, -1, dtype=torch.long, device=ids.device)
        (grad,) = torch.autograd.grad(loss.sum(), logits)
    grad = grad - grad.mean(-1, keepdim=True)
    weight = grad.norm(dim=-1) / math.sqrt((V - 1) / V) / max(1 - smoothing, 1e-12)
    targets = torch.where(weight > 1e-6 * max(float(weight.max()), 1e-30), grad.argmin(-1), -1)
    return weight, targets
