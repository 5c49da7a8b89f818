"""The label shift and the masks around it: which position is scored against which target.

A causal LM reads ``input_ids`` (N, L) and returns logits (N, L, V); the logits at position t
are a guess at token t+1. The shift in :func:`shift_for_next_token` is the only place in lmcore
that pairs them up. Everything else here builds ``labels`` (N, L), aligned with ``input_ids``,
where ``IGNORE_INDEX`` (-100) marks a target that must not be scored.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, fields
from typing import Sequence

import numpy as np
import torch

from ._validate import _describe, require_int, require_int_scalar, require_positive_int, require_tensor

__all__ = ["IGNORE_INDEX", "shift_for_next_token", "num_valid_targets",
           "labels_from_attention_mask", "mask_cross_document_targets", "PackedBatch",
           "pack_documents", "document_causal_mask", "position_ids_from_attention_mask"]

IGNORE_INDEX = -100


def shift_for_next_token(logits: torch.Tensor, labels: torch.Tensor):
    """Pair the prediction at position t with the token at t+1.

    ``logits`` (N, L, V) and ``labels`` (N, L) -> ``(logits[:, :-1], labels[:, 1:])``, shapes
    (N, L-1, V) and (N, L-1). L tokens give L-1 targets: the last position has nothing to
    predict inside the row, and the first token is never predicted.
    """
    require_tensor("logits", logits, 3, "(N, L, V)")
    require_tensor("labels", labels, 2, "(N, L)")
    require_int("labels", labels)
    if tuple(labels.shape) != tuple(logits.shape[:2]):
        raise ValueError(f"labels must have shape (N, L) = {tuple(logits.shape[:2])} to match "
                         f"logits (N, L, V) = {tuple(logits.shape)}; got {tuple(labels.shape)}. "
                         "Pass labels = input_ids (unshifted): the shift happens here.")
    if logits.shape[1] < 2:
        raise ValueError(f"a sequence needs L >= 2 tokens to give a next-token target; got "
                         f"L = {logits.shape[1]}. Use longer rows (or add a BOS token).")
    return logits[:, :-1, :], labels[:, 1:]


def num_valid_targets(labels: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> int:
    """How many targets ``labels`` (N, L) yields after the shift (the loss's denominator)."""
    require_tensor("labels", labels, 2, "(N, L)")
    require_int("labels", labels)
    ignore_index = require_int_scalar("ignore_index", ignore_index, tensor_ok=True)
    return int((labels[:, 1:] != ignore_index).sum())


def _require_01_mask(attention_mask: torch.Tensor) -> None:
    if attention_mask.is_complex():
        raise TypeError(f"attention_mask must be a tensor of 0/1 (bool, integer or float); got "
                        f"dtype {attention_mask.dtype}.")
    if attention_mask.dtype != torch.bool and not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token); got "
                         f"values {sorted(set(attention_mask.unique().tolist()))[:6]}.")


def position_ids_from_attention_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """``position_ids`` (N, L): each real token's index among the real tokens of its row
    (``attention_mask.cumsum(-1) - 1``), 0 on padding. A left-padded row then gets the positions
    it would have without padding; a learned-position model needs them (notebook 05)."""
    require_tensor("attention_mask", attention_mask, 2, "(N, L)")
    _require_01_mask(attention_mask)
    mask = attention_mask.long()
    return torch.where(mask == 1, mask.cumsum(-1) - 1, torch.zeros_like(mask))


def labels_from_attention_mask(input_ids: torch.Tensor, attention_mask: torch.Tensor):
    """``labels`` (N, L): a copy of ``input_ids`` with IGNORE_INDEX wherever the mask is 0.

    The attention mask says what the model may read; the labels say what gets scored. Padding
    must be neither. The inputs are not modified.
    """
    require_tensor("input_ids", input_ids, 2, "(N, L)")
    require_int("input_ids", input_ids)
    require_tensor("attention_mask", attention_mask, 2, "(N, L)")
    if attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask must have the shape of input_ids "
                         f"{tuple(input_ids.shape)}; got {tuple(attention_mask.shape)}.")
    _require_01_mask(attention_mask)
    labels = input_ids.clone()
    labels[attention_mask == 0] = IGNORE_INDEX
    return labels


def mask_cross_document_targets(labels: torch.Tensor, document_ids: torch.Tensor):
    """Drop the targets that cross from one packed document into the next.

    Where ``document_ids`` (N, L) changes from position t-1 to t, the label at t becomes
    IGNORE_INDEX, so ``EOS -> first token of the next document`` is not scored while
    ``last token -> EOS`` still is. Returns a new tensor.
    """
    require_tensor("labels", labels, 2, "(N, L)")
    require_int("labels", labels)
    require_tensor("document_ids", document_ids, 2, "(N, L)")
    require_int("document_ids", document_ids)
    if document_ids.shape != labels.shape:
        raise ValueError(f"document_ids must have the shape of labels {tuple(labels.shape)}; "
                         f"got {tuple(document_ids.shape)}.")
    out = labels.clone()
    starts = document_ids[:, 1:] != document_ids[:, :-1]
    out[:, 1:][starts] = IGNORE_INDEX
    return out


@dataclass
class PackedBatch:
    """Rows of packed documents; every field is (N, block_size)."""
    input_ids: torch.Tensor
    labels: torch.Tensor
    document_ids: torch.Tensor
    position_ids: torch.Tensor
    attention_mask: torch.Tensor

    def to(self, device) -> "PackedBatch":
        return PackedBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


_INT64_MAX = 2**63 - 1


def _packing_inputs(documents, block_size, eos_id, pad_id):
    """The checks every packer shares: ``(documents as lists of int, block_size, eos_id, pad_id)``.

    ``block_size`` an int >= 2; ``eos_id`` and ``pad_id`` distinct non-negative int ids;
    ``documents`` a non-empty sequence of non-empty token-id sequences (lists, tuples, 1-D
    tensors or arrays) holding non-negative ints only (never floats, bools or -100).
    """
    block_size = require_positive_int("block_size", block_size)
    if block_size < 2:
        raise ValueError(f"block_size must be at least 2 to hold a next-token target; got {block_size}.")
    for name, value in (("eos_id", eos_id), ("pad_id", pad_id)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an int token id; got {value!r}.")
        if value < 0:
            raise ValueError(f"{name} must be a non-negative token id; got {value}.")
        if value > _INT64_MAX:
            raise ValueError(f"{name} must fit in int64 (a token id below 2**63); got {value}.")
    eos_id, pad_id = int(eos_id), int(pad_id)
    if eos_id == pad_id:
        raise ValueError(f"pad_id must differ from eos_id (both are {eos_id}): if padding looks "
                         "like EOS, the model cannot learn when to stop. Use a dedicated PAD id.")
    if isinstance(documents, torch.Tensor) or not isinstance(documents, Sequence) or not documents:
        raise TypeError("documents must be a non-empty list of token-id lists (or 1-D tensors); "
                        f"got {type(documents).__name__}.")
    out = []
    for k, doc in enumerate(documents):
        if isinstance(doc, (torch.Tensor, np.ndarray)) and doc.ndim == 1:
            tokens = doc.tolist()
        elif isinstance(doc, Sequence) and not isinstance(doc, (str, bytes)):
            tokens = list(doc)
        else:
            raise TypeError(f"documents[{k}] must be a list of token ids (or a 1-D tensor); got "
                            f"{_describe(doc)}. documents is a list of documents: wrap a single "
                            "document as [ids].")
        if not tokens:
            raise ValueError(f"documents[{k}] is empty; drop empty documents before packing.")
        if not all(isinstance(t, numbers.Integral) and not isinstance(t, (bool, np.bool_))
                   and t >= 0 for t in tokens):
            raise TypeError(f"documents[{k}] must hold non-negative int token ids; got "
                            f"{tokens[:8]}{'...' if len(tokens) > 8 else ''}.")
        if max(tokens) > _INT64_MAX:
            raise ValueError(f"documents[{k}] holds the token id {max(tokens)}, too large for "
                             "int64; is it really a token id?")
        out.append([int(t) for t in tokens])
    return out, block_size, eos_id, pad_id


def pack_documents(documents: Sequence[Sequence[int]], block_size: int, *, eos_id: int,
                   pad_id: int) -> PackedBatch:
    """Concatenate documents, each followed by EOS, and cut the stream into rows.

    Only the last row is padded (with ``pad_id``). ``document_ids`` number the documents in
    order (-1 on padding); ``position_ids`` restart at 0 where a document starts and at the
    start of each row (a row cannot see the previous row); ``labels`` hold IGNORE_INDEX at
    padding and at the first token of each document that follows another in the same row.
    """
    documents, block_size, eos_id, pad_id = _packing_inputs(documents, block_size, eos_id, pad_id)
    ids, docs = [], []
    for k, tokens in enumerate(documents):
        ids += tokens + [eos_id]
        docs += [k] * (len(tokens) + 1)
    n_rows = -(-len(ids) // block_size)
    n_pad = n_rows * block_size - len(ids)
    input_ids = torch.tensor(ids + [pad_id] * n_pad).view(n_rows, block_size)
    document_ids = torch.tensor(docs + [-1] * n_pad).view(n_rows, block_size)
    attention_mask = (document_ids >= 0).long()
    position_ids = torch.zeros_like(input_ids)
    for t in range(1, block_size):
        same = document_ids[:, t] == document_ids[:, t - 1]
        position_ids[:, t] = torch.where(same, position_ids[:, t - 1] + 1, 0)
    labels = mask_cross_document_targets(labels_from_attention_mask(input_ids, attention_mask),
                                         document_ids)
    return PackedBatch(input_ids, labels, document_ids, position_ids, attention_mask)


def document_causal_mask(document_ids: torch.Tensor) -> torch.Tensor:
    """bool (N, L, L): True where query i may attend key j, i.e. j <= i and same document."""
    require_tensor("document_ids", document_ids, 2, "(N, L)")
    require_int("document_ids", document_ids)
    L = document_ids.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool, device=document_ids.device).tril()
    same = document_ids[:, :, None] == document_ids[:, None, :]
    return causal & same
