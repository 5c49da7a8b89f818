"""What both causal-LM losses share: the reduction and its denominator, the compute dtype, and
the checks of ``ignore_index`` and of finite logits.

A mean is the summed NLL over the valid targets of the batch, or over ``num_items`` (the valid
targets of the whole accumulated batch) when given, never over rows or batches.
"""

from __future__ import annotations

import torch

from ._validate import require_int_scalar
from .shift import IGNORE_INDEX

__all__ = [
    "REDUCTIONS",
    "compute_dtype",
    "denominator",
    "require_exact_count",
    "require_ignore_index",
    "require_finite",
]

REDUCTIONS = ("mean", "sum", "none")


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """bf16/fp16 are reduced in float32; float32 and float64 stay as they are."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def denominator(reduction: str, n_valid: int, num_items):
    """What the summed NLL is divided by: 1 for "sum", else num_items or the valid count."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}; got {reduction!r}.")
    if num_items is not None:
        if reduction != "mean":
            raise ValueError(f"num_items only applies to reduction='mean'; got reduction={reduction!r}.")
        require_exact_count(num_items)
        n = require_int_scalar(
            "num_items",
            num_items,
            tensor_ok=True,
            hint="It counts the valid targets of the whole accumulated batch: "
            "sum(num_valid_targets(labels) for each micro-batch).",
        )
        if n < 1:
            raise ValueError(f"num_items must be a positive count of valid targets; got {n}.")
        if n < n_valid:
            raise ValueError(
                f"num_items must be at least the number of valid targets in this "
                f"batch ({n_valid}); got {n}. It counts the valid targets of the "
                "whole accumulated batch, so it can never be smaller than one "
                "micro-batch's count."
            )
        return float(n)
    if reduction == "mean":
        if n_valid == 0:
            raise ValueError(
                "no valid target: every label after the shift is ignore_index, so the "
                "mean is 0/0. Check the labels (is everything padding?) or pass "
                "num_items (the whole accumulated batch's count)."
            )
        return float(n_valid)
    return 1.0


def require_exact_count(num_items) -> None:
    """A count in a float tensor (an all-reduce of a float count) is refused with a message that
    says why: float32 holds integers exactly only up to 2**24, so a summed count of valid targets
    past 16,777,216 may already be off, and the mean with it, without any sign."""
    if isinstance(num_items, torch.Tensor) and num_items.is_floating_point():
        value = f" holding {num_items.item():g}" if num_items.numel() == 1 and not num_items.is_meta else ""
        raise TypeError(
            f"num_items must be an int count; got a {num_items.dtype} tensor{value}. A float count "
            "is exact only up to 2**24 in float32 (2**53 in float64): count the valid targets as an "
            "int64 tensor ((labels != ignore_index).sum()), all-reduce that, and pass it or int() of it."
        )


def require_ignore_index(ignore_index) -> int:
    return require_int_scalar(
        "ignore_index",
        ignore_index,
        tensor_ok=True,
        hint=f"It is the label value that marks an unscored target "
        f"(lmcore uses IGNORE_INDEX = {IGNORE_INDEX}).",
    )


def require_finite(name: str, x: torch.Tensor) -> None:
    """One pass, no (N, L, V) temporary: NaN shows in both extremes, inf in one of them."""
    if x.numel() and not bool(torch.isfinite(torch.stack(x.aminmax())).all()):
        raise ValueError(
            f"{name} contain NaN or inf; the loss would be NaN. The model's forward "
            "pass diverged (check the learning rate, the init, or fp16 overflow)."
        )
