"""What :class:`lmcore.model.GPT` checks before its forward pass: clear errors instead of an
index error inside an embedding or a NaN from a fully masked attention row."""

from __future__ import annotations

import torch

from ._validate import require_int, require_tensor

__all__ = ["check_inputs", "check_attention"]


@torch.compiler.disable
def check_inputs(config, input_ids, document_ids, position_ids) -> None:
    """input_ids (N, L) of ids in [0, vocab_size), L <= block_size; document_ids and
    position_ids (N, L) or (1, L) int tensors, positions inside the position table."""
    require_tensor("input_ids", input_ids, 2, "(N, L)")
    require_int("input_ids", input_ids)
    N, L = input_ids.shape
    V, block = config.vocab_size, config.block_size
    if L < 1 or L > block:
        raise ValueError(
            f"input_ids has length L = {L}, but the model's block_size is {block} "
            f"(its position table ends there). Crop the input to the last {block} "
            "tokens, or build the model with a larger block_size."
        )
    if input_ids.numel() and bool(((input_ids < 0) | (input_ids >= V)).any()):
        lo, hi = int(input_ids.min()), int(input_ids.max())
        raise ValueError(
            f"input_ids must be token ids in [0, {V}) (vocab_size); got values "
            f"from {lo} to {hi}. Is the tokenizer's vocabulary larger than "
            "GPTConfig.vocab_size, or is padding marked -100 in input_ids?"
        )
    for name, t in (("document_ids", document_ids), ("position_ids", position_ids)):
        if t is None:
            continue
        require_tensor(name, t, 2, "(N, L)")
        require_int(name, t)
        if t.shape[1] != L or t.shape[0] not in (1, N):
            raise ValueError(
                f"{name} must have shape (N, L) = {(N, L)} like input_ids; got {tuple(t.shape)}."
            )
    if position_ids is not None and bool(((position_ids < 0) | (position_ids >= block)).any()):
        raise ValueError(
            f"position_ids must lie in [0, {block}) (block_size); got values from "
            f"{int(position_ids.min())} to {int(position_ids.max())}."
        )


@torch.compiler.disable
def check_attention(attention, document_ids, shape):
    """``attention`` as GPT.forward takes it: bool (L, L) or (N, 1, L, L), every query reading
    at least one key, and never together with ``document_ids``."""
    N, L = shape
    if document_ids is not None:
        raise ValueError("pass document_ids or attention, not both (attention replaces the mask).")
    if not isinstance(attention, torch.Tensor) or attention.dtype != torch.bool:
        raise TypeError(
            "attention must be a bool tensor (True: the query may read the key); got "
            f"{getattr(attention, 'dtype', type(attention).__name__)}."
        )
    if attention.shape not in ((L, L), (N, 1, L, L), (1, 1, L, L)):
        raise ValueError(
            f"attention must have shape (L, L) or (N, 1, L, L) with (N, L) = {(N, L)}; got "
            f"{tuple(attention.shape)}."
        )
    if not bool(attention.any(dim=-1).all()):
        raise ValueError("attention must let every query read at least one key (a row is all False).")
    return attention
