"""Perplexity and unit conversions, accumulated over many batches by *tokens*, not batches.

Perplexity is exp(total NLL / total valid targets). Averaging per-batch means (or per-batch
perplexities) weights a short batch like a long one and gives a different, wrong number.
"""

from __future__ import annotations

import math

import torch

from ._validate import require_int_scalar, require_real
from .loss import causal_lm_loss
from .shift import IGNORE_INDEX, num_valid_targets

__all__ = ["LN2", "nats_to_bits", "bits_to_nats", "perplexity_from_nll", "bits_per_byte", "PerplexityMeter"]

LN2 = math.log(2.0)


def nats_to_bits(nats: float) -> float:
    """A loss in nats (natural log) in bits (log base 2): divide by ln 2."""
    return require_real("nats", nats, finite=False) / LN2


def bits_to_nats(bits: float) -> float:
    return require_real("bits", bits, finite=False) * LN2


def perplexity_from_nll(mean_nll_nats: float) -> float:
    """exp(mean NLL): the effective number of equally likely choices per token.

    A mean NLL above ~709.78 nats gives ``inf`` (beyond the largest float), not an error.
    """
    x = require_real("mean_nll_nats", mean_nll_nats, min=0.0, finite=False)
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def bits_per_byte(total_nll_nats: float, n_bytes: int) -> float:
    """Total NLL (nats, summed over all tokens of a text) per UTF-8 byte of that text, in bits.

    Unlike perplexity this does not depend on the tokenizer, so it compares models that split
    text differently. From a mean loss: ``bits_per_byte(mean_nll * n_tokens, n_bytes)``.
    """
    n_bytes = require_int_scalar(
        "n_bytes", n_bytes, hint="It is the text's length in UTF-8 bytes: len(text.encode())."
    )
    if n_bytes <= 0:
        raise ValueError(f"n_bytes must be positive; got {n_bytes}.")
    total = require_real("total_nll_nats", total_nll_nats, min=0.0)
    return total / (LN2 * n_bytes)


class PerplexityMeter:
    """Accumulates summed NLL and valid-target counts; reports token-weighted averages."""

    def __init__(self, ignore_index: int = IGNORE_INDEX):
        self.ignore_index = require_int_scalar("ignore_index", ignore_index, tensor_ok=True)
        self.reset()

    def reset(self) -> None:
        self.total_nll = 0.0
        self.n_tokens = 0

    @torch.no_grad()
    def update(self, logits: torch.Tensor, labels: torch.Tensor) -> float:
        """Add a batch: ``logits`` (N, L, V), ``labels`` (N, L) unshifted. Returns its summed NLL."""
        n = num_valid_targets(labels, self.ignore_index)
        total = float(causal_lm_loss(logits, labels, ignore_index=self.ignore_index, reduction="sum"))
        self.update_sums(total, n)
        return total

    def update_sums(self, total_nll: float, n_tokens: int) -> None:
        """Add a precomputed summed NLL (nats) over ``n_tokens`` valid targets."""
        n_tokens = require_int_scalar(
            "n_tokens", n_tokens, tensor_ok=True, hint="Pass the count of valid targets (num_valid_targets)."
        )
        if n_tokens < 0:
            raise ValueError(f"n_tokens must be a non-negative int; got {n_tokens!r}.")
        if isinstance(total_nll, torch.Tensor) and total_nll.dim() == 0 and total_nll.is_floating_point():
            total_nll = float(total_nll)
        total_nll = require_real(
            "total_nll", total_nll, min=0, hint="It is a finite, non-negative sum of NLLs in nats."
        )
        if n_tokens == 0 and total_nll != 0:
            raise ValueError(
                f"total_nll must be 0 when n_tokens is 0 (no target, no loss); got "
                f"{total_nll}. Pass the summed NLL together with its own count."
            )
        if not math.isfinite(self.total_nll + total_nll):
            raise ValueError(f"total_nll {total_nll} would make the running sum overflow to inf.")
        self.total_nll += total_nll
        self.n_tokens += n_tokens

    @property
    def mean_nll(self) -> float:
        if self.n_tokens == 0:
            raise ValueError("PerplexityMeter has no tokens yet; call update() with a batch first.")
        return self.total_nll / self.n_tokens

    @property
    def perplexity(self) -> float:
        return perplexity_from_nll(self.mean_nll)

    @property
    def bits_per_token(self) -> float:
        return nats_to_bits(self.mean_nll)

    def __repr__(self) -> str:
        if self.n_tokens == 0:
            return "PerplexityMeter(n_tokens=0)"
        return (
            f"PerplexityMeter(n_tokens={self.n_tokens}, mean_nll={self.mean_nll:.4f}, "
            f"perplexity={self.perplexity:.4f})"
        )
