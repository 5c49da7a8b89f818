"""Packed pipelines in :func:`lmcore.diagnose.run_checks`: the declaration (:class:`Packing`) and
the rows that read document boundaries.

A packing pipeline declares ``packing=Packing(boundary=..., bos_id=..., positions=...)``. The
packed probes then call ``forward(input_ids, attention_mask, doc_ids)`` and
``loss_fn(logits, input_ids, attention_mask, doc_ids)``, where ``doc_ids`` (N, L) numbers the
documents of each row 0, 1, 2, ... (the block-diagonal mask is
``causal & (doc_ids[:, :, None] == doc_ids[:, None, :])``; flash-attention's ``cu_seqlens`` and
per-document ``position_ids`` are both functions of it). ``attention_mask`` is first None (the
packing alone), then an all-ones (N, L) mask (as a collator that also returns one passes it).
The other rows call both with three arguments, so ``doc_ids`` defaults to one document per row.
The boundary target (the last token of a document, whose next token opens the next one) is, by
``boundary``: ``"drop"`` not scored; ``"keep"`` scored against the next document's first token;
``"bos"`` each document starts with ``bos_id``, scored against it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validate import require_choice, require_int_scalar
from .mask_checks import gets_grad
from .probes import gradient_reading, moves_value

__all__ = ["Packing", "PACKED_NAMES", "packed_probe", "check_packed_rows"]

PACKED_NAMES = ("packed_isolation", "packed_with_mask", "packed_positions", "packed_boundary")


@dataclass(frozen=True)
class Packing:
    """What a packing pipeline does on purpose: the ``boundary`` target policy ("drop", "keep" or
    "bos"), the ``bos_id`` that opens each document under "bos", and whether ``positions``
    "restart" at each document (per-document position ids) or "continue" along the row."""

    boundary: str = "drop"
    bos_id: int | None = None
    positions: str = "restart"

    def __post_init__(self):
        require_choice("boundary", self.boundary, ("drop", "keep", "bos"))
        require_choice("positions", self.positions, ("restart", "continue"))
        if (self.bos_id is None) != (self.boundary != "bos"):
            raise ValueError(
                f"bos_id must be given exactly when boundary='bos' (each document opens with it); "
                f"got boundary={self.boundary!r}, bos_id={self.bos_id!r}."
            )
        if self.bos_id is not None:
            require_int_scalar("bos_id", self.bos_id, min=0)


def packed_probe(L: int, draw, bos_id, device):
    """(input_ids, doc_ids), both (2, L): row 0 holds documents of L//4, L//3 and the rest tokens,
    row 1 two of L//2 and the rest; under "bos" each document opens with ``bos_id``."""
    splits = [[L // 4, L // 3, L - L // 4 - L // 3], [L // 2, L - L // 2]]
    doc = torch.tensor([sum(([d] * n for d, n in enumerate(row)), []) for row in splits], device=device)
    ids = draw(2, L)
    if bos_id is not None:
        start = torch.ones_like(doc, dtype=torch.bool)
        start[:, 1:] = doc[:, 1:] != doc[:, :-1]
        ids = ids.masked_fill(start, bos_id)
    return ids, doc


def _tol(out):
    return 1e-5 * max(1.0, float(out.abs().max()))


def _later_moved(raw, ids, doc, mask, draw):
    """Does changing every token of each row's first document move the logits of a later one?"""
    first = doc == 0
    changed = torch.where(first, draw(*ids.shape), ids)
    changed = torch.where(first & (changed == ids), draw(*ids.shape), changed)
    out = raw(ids, mask, doc)
    return bool(((raw(changed, mask, doc) - out).abs().amax(-1)[~first] > _tol(out)).any())


CROSS = (
    "a change in document A moves the logits of document B after it in the same packed row: "
    "attention crosses documents{how}. Likely causes: only a causal mask (the framework does not "
    "avoid inter-sequence attention); position ids reset per document without a block-diagonal "
    "mask (resetting position ids alone is not enough){extra}. Fix: attend with causal & "
    "(doc_ids[:, :, None] == doc_ids[:, None, :]) (or flash-attention's varlen path with "
    "cu_seqlens from doc_ids)"
)


def _isolation_rows(raw, ids, doc, draw):
    """(packed_isolation, packed_with_mask): read without a 2-D mask, then with an all-ones one."""
    ones = torch.ones_like(ids)
    try:
        bare = _later_moved(raw, ids, doc, None, draw)
    except (TypeError, AttributeError, RuntimeError):
        bare = None  # this forward needs an attention_mask
    ones_leak = _later_moved(raw, ids, doc, ones, draw)
    if bare is None:
        with_mask = (
            None,
            "skipped: forward(input_ids, None, doc_ids) fails, so the leak the mask alone adds "
            "cannot be told apart; packed_isolation reads the all-ones mask",
        )
        bare = ones_leak
    elif bare:
        with_mask = (
            None,
            "skipped: attention crosses documents without the 2-D mask too (see packed_isolation)",
        )
    elif ones_leak:
        with_mask = (
            False,
            CROSS.format(
                how=" only when an all-ones 2-D attention_mask is also passed (without it, it does not)",
                extra="; here the block-diagonal mask is dropped or replaced when a separate 2-D attention "
                "mask comes too (the loss still decreases, so it is silent). Fix: combine the two masks "
                "(AND), or do not pass an attention_mask with packed rows",
            ),
        )
    else:
        with_mask = (True, "an all-ones 2-D attention_mask passed beside doc_ids keeps the documents apart")
    iso = (
        (False, CROSS.format(how="", extra=""))
        if bare
        else (True, "changing a row's first document leaves the later documents' logits unchanged")
    )
    return iso, with_mask


def _positions_row(raw, ids, doc, spec: Packing, isolated: bool):
    if spec.positions == "continue":
        return None, "skipped: positions='continue' declared (positions run along the packed row)"
    if not isolated:
        return None, "skipped: attention crosses documents (see packed_isolation)"
    out = raw(ids, torch.ones_like(ids), doc)
    for n in range(len(ids)):
        for d in range(1, int(doc[n].max()) + 1):
            sel = doc[n] == d
            alone = raw(
                ids[n : n + 1, sel],
                torch.ones_like(ids[n : n + 1, sel]),
                torch.zeros_like(ids[n : n + 1, sel]),
            )
            if (alone[0] - out[n, sel]).abs().max() > _tol(out):
                return False, (
                    f"document {d} of packed row {n} gets other logits than the same document alone, "
                    "though attention does not cross documents: positions do not restart at the "
                    "document boundary. Fix: position_ids counted within each document (from doc_ids), "
                    "or declare positions='continue' if positions run along the row on purpose"
                )
    return True, "each packed document gets the logits it gets alone: positions restart per document"


def _boundary_row(loss_fn, ids, doc, V, spec: Packing, gen):
    """Inside a document every position t is scored against t + 1; at a boundary, by the policy."""
    ones = torch.ones_like(ids)
    loss = lambda lg, i, m: loss_fn(lg, i, m, doc)  # noqa: E731
    moved = moves_value(loss, ids, ones, V, gen)
    weight, targets = gradient_reading(loss, ids, ones, V)
    scored = moved | gets_grad(weight)
    boundary = torch.zeros_like(scored)
    boundary[:, :-1] = doc[:, 1:] != doc[:, :-1]
    inside = torch.zeros_like(scored)
    inside[:, :-1] = ~boundary[:, :-1]
    right = torch.full_like(targets, -1)
    right[:, :-1] = ids[:, 1:]
    want_b = spec.boundary != "drop"
    bad_inside = inside & ~(scored & (targets == right))
    if bool(bad_inside.any()):
        return False, (
            "positions inside a document are not scored against their next token (see alignment, "
            "all_scored): the packed loss masks or shifts by something other than the documents"
        )
    b_scored = scored & boundary
    if not want_b and bool(b_scored.any()):
        return False, (
            "the last token of a document is scored against the first token of the next one, though "
            "boundary='drop' declared: the loss does not mask the boundary target. Fix: "
            "labels[:, 1:][doc_ids[:, 1:] != doc_ids[:, :-1]] = -100 before the shift (or declare "
            "boundary='keep')"
        )
    if want_b and not bool((b_scored == boundary).all()):
        return False, (
            f"the boundary target is not scored, though boundary={spec.boundary!r} declared: the loss "
            "masks the first token of each document (declare boundary='drop' if that is the intent)"
        )
    if want_b and not bool((targets[boundary] == right[boundary]).all()):
        return False, "the boundary target is scored against another token than the next document's first"
    return True, f"every target inside a document is scored; at a boundary: {spec.boundary!r}, as declared"


def check_packed_rows(raw, loss_fn, spec: Packing, L: int, V: int, draw, gen, device) -> dict:
    """The four packed rows: {name: (passed, detail)}; ``raw(ids, mask, doc)`` returns logits."""
    ids, doc = packed_probe(L, draw, spec.bos_id, device)
    iso, with_mask = _isolation_rows(raw, ids, doc, draw)
    return dict(
        packed_isolation=iso,
        packed_with_mask=with_mask,
        packed_positions=_positions_row(raw, ids, doc, spec, iso[0] and with_mask[0] is not False),
        packed_boundary=_boundary_row(loss_fn, ids, doc, V, spec, gen),
    )
