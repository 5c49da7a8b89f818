"""The label shift and the masks around it: which position is scored against which target.

A causal LM reads ``input_ids`` (N, L) and returns logits (N, L, V); the logits at position t
are a guess at token t+1. The shift in :func:`shift_for_next_token` is the only place in lmcore
that pairs them up. Everything else here builds ``labels`` (N, L), aligned with ``input_ids``,
where ``IGNORE_INDEX`` (-100) marks a target that must not be scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from ._validate import (
    INT64_MAX,
    require_choice,
    require_documents,
    require_int,
    require_int_scalar,
    require_positive_int,
    require_tensor,
)

__all__ = [
    "IGNORE_INDEX",
    "shift_for_next_token",
    "num_valid_targets",
    "labels_from_attention_mask",
    "mask_cross_document_targets",
    "PackedBatch",
    "pack_documents",
    "PACKING_POLICIES",
    "document_causal_mask",
    "position_ids_from_attention_mask",
]

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
        raise ValueError(
            f"labels must have shape (N, L) = {tuple(logits.shape[:2])} to match "
            f"logits (N, L, V) = {tuple(logits.shape)}; got {tuple(labels.shape)}. "
            "Pass labels = input_ids (unshifted): the shift happens here."
        )
    if logits.shape[1] < 2:
        raise ValueError(
            f"a sequence needs L >= 2 tokens to give a next-token target; got "
            f"L = {logits.shape[1]}. Use longer rows (or add a BOS token)."
        )
    return logits[:, :-1, :], labels[:, 1:]


def num_valid_targets(labels: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> int:
    """How many targets ``labels`` (N, L) yields after the shift (the loss's denominator)."""
    require_tensor("labels", labels, 2, "(N, L)")
    require_int("labels", labels)
    ignore_index = require_int_scalar("ignore_index", ignore_index, tensor_ok=True)
    return int((labels[:, 1:] != ignore_index).sum())


def _require_01_mask(attention_mask: torch.Tensor) -> None:
    if attention_mask.is_complex():
        raise TypeError(
            f"attention_mask must be a tensor of 0/1 (bool, integer or float); got "
            f"dtype {attention_mask.dtype}."
        )
    if attention_mask.dtype != torch.bool and not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
        raise ValueError(
            "attention_mask must hold only 0 (padding) and 1 (real token); got "
            f"values {sorted(set(attention_mask.unique().tolist()))[:6]}."
        )


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
        raise ValueError(
            f"attention_mask must have the shape of input_ids "
            f"{tuple(input_ids.shape)}; got {tuple(attention_mask.shape)}."
        )
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
        raise ValueError(
            f"document_ids must have the shape of labels {tuple(labels.shape)}; "
            f"got {tuple(document_ids.shape)}."
        )
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

    def to(self, device) -> PackedBatch:
        return PackedBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


PACKING_POLICIES = ("stream", "whole")


def _packing_inputs(documents, block_size, eos_id, pad_id):
    """The checks of every packer: ``(documents as lists of int, block_size, eos_id, pad_id)``.

    ``block_size`` an int >= 2; ``eos_id`` and ``pad_id`` distinct non-negative int ids;
    ``documents`` as :func:`lmcore._validate.require_documents` accepts them.
    """
    block_size = require_positive_int("block_size", block_size)
    if block_size < 2:
        raise ValueError(f"block_size must be at least 2 to hold a next-token target; got {block_size}.")
    eos_id = require_int_scalar("eos_id", eos_id, min=0, max=INT64_MAX, hint="(a token id)")
    pad_id = require_int_scalar("pad_id", pad_id, min=0, max=INT64_MAX, hint="(a token id)")
    if eos_id == pad_id:
        raise ValueError(
            f"pad_id must differ from eos_id (both are {eos_id}): the packed rows would still be "
            "labelled right (padding is marked by document id -1), but any later step that finds "
            "padding by its id would then drop the real EOS too, and the model would not learn to "
            "stop (notebook 05). Use a dedicated PAD id."
        )
    return require_documents("documents", documents), block_size, eos_id, pad_id


def _restart_positions(document_ids: torch.Tensor) -> torch.Tensor:
    """``position_ids`` (N, L): 0 at each row start and wherever the document id changes."""
    t = torch.arange(document_ids.shape[1]).expand_as(document_ids)
    start = torch.ones_like(document_ids, dtype=torch.bool)
    start[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]
    return t - torch.where(start, t, 0).cummax(dim=1).values


def _stream_rows(
    ids: torch.Tensor, document_ids: torch.Tensor, rows: torch.Tensor, block_size: int, pad_id: int
) -> PackedBatch:
    """Rows ``rows`` (1-D indices) of a packed stream cut every ``block_size`` tokens.

    ``ids`` and ``document_ids`` are 1-D and aligned; document id -1, and everything past the
    end of the stream, is padding. The one place labels, masks and positions of packing are made.
    """
    flat = rows[:, None] * block_size + torch.arange(block_size)  # (N, L) stream offsets
    real = flat < len(ids)
    flat = flat.clamp(max=len(ids) - 1)
    doc = torch.where(real, document_ids[flat].long(), -1)
    input_ids = torch.where(doc >= 0, ids[flat].long(), pad_id)
    attention_mask = (doc >= 0).long()
    labels = mask_cross_document_targets(labels_from_attention_mask(input_ids, attention_mask), doc)
    return PackedBatch(input_ids, labels, doc, _restart_positions(doc), attention_mask)


def pack_documents(
    documents: Sequence[Sequence[int]], block_size: int, *, eos_id: int, pad_id: int, policy: str = "stream"
) -> PackedBatch:
    """Each document followed by EOS, in order, in rows of ``block_size``.

    ``policy="stream"`` (the default) concatenates them and cuts the stream into rows: only the
    last row is padded, and a document may continue on the next row (which cannot see its
    start). ``policy="whole"`` never cuts a document: a row is closed and padded when the next
    document would not fit, so each is scored with its full context (each then needs at most
    ``block_size - 1`` tokens plus its EOS). Padding is ``pad_id``; ``document_ids`` number the
    documents (-1 on padding); ``position_ids`` restart at 0 where a document starts and at each
    row start; ``labels`` hold IGNORE_INDEX at padding and at the first token of each document
    that follows another in the same row.
    """
    documents, block_size, eos_id, pad_id = _packing_inputs(documents, block_size, eos_id, pad_id)
    require_choice("policy", policy, PACKING_POLICIES)
    ids, docs = [], []
    for k, tokens in enumerate(documents):
        n = len(tokens) + 1
        if policy == "whole":
            if n > block_size:
                raise ValueError(
                    f"documents[{k}] has {len(tokens)} tokens; policy 'whole' needs 1 to "
                    f"block_size - 1 = {block_size - 1} tokens (plus its EOS)."
                )
            room = -len(ids) % block_size  # free places in the current row
            if n > room:
                ids, docs = ids + [pad_id] * room, docs + [-1] * room
        ids += tokens + [eos_id]
        docs += [k] * n
    stream, doc_ids = torch.tensor(ids), torch.tensor(docs)
    return _stream_rows(stream, doc_ids, torch.arange(-(-len(ids) // block_size)), block_size, pad_id)


def document_causal_mask(document_ids: torch.Tensor) -> torch.Tensor:
    """bool (N, L, L): True where query i may attend key j, i.e. j <= i and same document."""
    require_tensor("document_ids", document_ids, 2, "(N, L)")
    require_int("document_ids", document_ids)
    L = document_ids.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool, device=document_ids.device).tril()
    same = document_ids[:, :, None] == document_ids[:, None, :]
    return causal & same
