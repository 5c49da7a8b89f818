"""What a wrong answer to one of notebook 06's mask and label exercises broke, as a question.

The checkers' first-failure hint was written for one mistake; these look at the learner's result
on the case that failed, find the first position where it differs from the reference, and ask
about that position's kind (a later position seen, another document seen, padding or a user turn
scored, an answer's EOS dropped, a document's first position), so the first hint points at the
learner's own mistake without giving the rule. Each returns ``""`` when it cannot tell; the
checker then shows its nudge. The packing exercise has many right answers, so
:func:`packing_fault` grades it against its goal, not a reference, and says which part failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...shift import IGNORE_INDEX
from ..toys import EOS, PAD

__all__ = [
    "ChatRoles",
    "explain_document_mask",
    "explain_boundary_targets",
    "explain_chat_labels",
    "explain_position_ids",
    "fewest_rows",
    "packing_fault",
]


def _tensor(x):
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(x)


def _first(mask: torch.Tensor):
    """The first index (n, i, j, ...) where ``mask`` is true, as ints; None when none is."""
    where = mask.nonzero()
    return None if len(where) == 0 else [int(v) for v in where[0]]


def explain_document_mask(fn, case, expected, got) -> str:
    """document_causal_mask: which kind of (query i, key j) pair the learner's mask gets wrong."""
    doc, got = case.args[0], _tensor(got)
    if got.shape != expected.shape:
        return (
            f"your mask is {tuple(got.shape)}; document_ids is {tuple(doc.shape)}, (N, L), and each "
            "row packs its own documents: how many L x L masks does the batch need?"
        )
    if got.dtype != torch.bool:
        return (
            f"your mask holds {got.dtype} values: this course's masks are bool (True: may attend). "
            "What would scaled_dot_product_attention do with a mask of 0s and 1s that is not bool?"
        )
    L = doc.shape[1]
    later = torch.ones(L, L, dtype=torch.bool).triu(1)
    other = doc[:, :, None] != doc[:, None, :]
    first = _first(got & later)
    if first:
        n, i, j = first
        return f"in row {n}, position {i} may look at position {j}, which comes after it: can a causal model see the future?"
    first = _first(~got & torch.eye(L, dtype=torch.bool))
    if first:
        n, i, _ = first
        if int(doc[n, i]) < 0:
            return (
                f"in row {n}, position {i} is padding (document -1) and may not look at itself: a row "
                "whose query sees no key at all gives attention nothing to average. What may padding read?"
            )
        return f"in row {n}, position {i} may not look at itself: is a token's own position visible to it?"
    first = _first(got & other)
    if first:
        n, i, j = first
        return (
            f"in row {n}, position {i} (document {int(doc[n, i])}) may look at position {j} "
            f"(document {int(doc[n, j])}): should one packed document read another?"
        )
    first = _first(~got & expected)
    if first:
        n, i, j = first
        return (
            f"in row {n}, position {i} may not look at position {j}, an earlier token of its own "
            "document: which of your conditions removed it?"
        )
    return ""


def explain_position_ids(fn, case, expected, got) -> str:
    """position ids for packed documents: the first position whose id differs, and its kind (a
    document's first token, or one inside it), asked against the row it would have alone."""
    doc, got = case.args[0], _tensor(got)
    if got.shape != expected.shape or got.is_floating_point() or got.dtype == torch.bool:
        return ""
    first = _first(got != expected)
    if first is None:
        return ""
    n, t = first
    d, k, have = int(doc[n, t]), int(expected[n, t]), int(got[n, t])
    if d < 0:  # padding's positions are free within the model's range: this one is outside it
        return (
            f"row {n}, position {t} is padding and your position id there is {have}: the model looks "
            f"positions up in a table of {doc.shape[1]} rows, so which ids can it take?"
        )
    off = (got - expected)[doc >= 0]  # padding's positions are free (the checker zeroes them)
    if bool((off == off[0]).all()) and int(off[0]):
        return (
            f"every one of your positions is {int(off[0]):+d} from what each token "
            "would have in a row of its own: which position does the first token of a row get?"
        )
    if k == 0 and t > 0:
        return (
            f"row {n}, position {t} is the first token of document {d} (document {int(doc[n, t - 1])} "
            f"ends just before it) and your position id there is {have}: if document {d} started a row "
            "of its own, which position would its first token have?"
        )
    if k == 0 and n > 0 and d >= 0 and int(doc[n - 1, -1]) == d:
        return (
            f"row {n} starts with the rest of document {d}, cut from row {n - 1}, and your position id "
            f"there is {have}: if that part started a row of its own, which position would its first "
            "token have?"
        )
    return (
        f"row {n}, position {t} is token {k + 1} of document {d} in this row and your position id there "
        f"is {have}: if that part of document {d} had a row of its own, which position would that token have?"
    )


def fewest_rows(lengths, block_size: int) -> int:
    """The fewest rows of ``block_size`` that hold pieces of ``lengths`` (each at most
    ``block_size``) in their order, none cut across rows: by dynamic programming over where each
    row ends, so it trusts no particular way of packing."""
    best = [0] + [len(lengths) + 1] * len(lengths)  # best[i]: rows for the first i pieces
    for i in range(1, len(lengths) + 1):
        used = 0
        for j in range(i - 1, -1, -1):  # the last row holds pieces j .. i-1
            used += lengths[j]
            if used > block_size:
                break
            best[i] = min(best[i], best[j] + 1)
    return best[-1]


def _word(tok: int, decode) -> str:
    return decode([tok]) if decode is not None else str(tok)


def _form_fault(block_size: int, got) -> tuple[str, str]:
    """The packing's result is not two (N, block_size) integer tensors of one shape."""
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return (f"expected two results (input_ids, document_ids), got {type(got).__name__}", "")
    for name, x in zip(("input_ids", "document_ids"), got):
        if not isinstance(x, torch.Tensor):
            return (f"{name} is a {type(x).__name__}, not a tensor", "which type holds rows of ids here?")
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            return (
                f"{name} has dtype {x.dtype}",
                "ids index an embedding table: which dtype does that need?",
            )
        if x.dim() != 2 or x.shape[1] != block_size:
            return (
                f"{name} has shape {tuple(x.shape)}, not (rows, {block_size})",
                f"rows of block_size = {block_size} tokens: how many columns does that make?",
            )
    if got[0].shape != got[1].shape:
        return (f"input_ids is {tuple(got[0].shape)} but document_ids is {tuple(got[1].shape)}", "")
    return ("", "")


def _padding_fault(ids, doc, *, eos: int, pad: int, decode) -> tuple[str, str]:
    """Padding and document id -1 do not go together, or padding sits before a token in its row."""
    first = _first((ids == pad) & (doc != -1))
    if first:
        r, c = first
        return (
            f"row {r}, column {c} is PAD with document id {int(doc[r, c])}",
            "which document id marks padding, so that no mask takes it for a document?",
        )
    first = _first((ids != pad) & (doc == -1))
    if first:
        r, c = first
        tok = int(ids[r, c])
        whose = "an EOS" if tok == eos else "this token"
        return (
            f"row {r}, column {c} holds {_word(tok, decode)!r} with document id -1",
            f"id -1 marks padding: which document does {whose} belong to?",
        )
    is_pad = ids == pad
    first = _first(is_pad.long().cummax(dim=1).values.bool() & ~is_pad)  # a token after padding
    if first:
        r, c = first
        return (
            f"row {r} has padding before column {c}, which holds a token",
            "the exercise puts padding only at the end of a row: where in the row does yours sit?",
        )
    return ("", "")


def _order_fault(documents, have, *, eos: int, decode) -> tuple[str, str]:
    """``have``, the (token, id) pairs read row by row without padding, is not document 0, EOS,
    document 1, EOS, ... with each document's index as id."""
    want = [(tok, k) for k, d in enumerate(documents) for tok in [*d, eos]]
    ids = [h for _, h in have]
    for before, after in zip(ids, ids[1:]):
        if 0 <= after < before < len(documents):  # a later row went back to fill an earlier gap
            return (
                f"read row by row with the padding skipped, your rows hold document {before} "
                f"before document {after}",
                "read one row after another, in which order must the documents come?",
            )
    for p, (w, h) in enumerate(zip(want, have)):
        if w == h:
            continue
        k = w[1]
        if w[0] == h[0]:
            return (
                f"{_word(w[0], decode)!r} of document {k} (counting from 0 in the list) has document id {h[1]}",
                "which id does the exercise give each document, and does its EOS carry the same one?",
            )
        if w[0] == eos:
            return (
                f"after the last token of document {k} your rows hold {_word(h[0], decode)!r}",
                "what must follow every document?",
            )
        return (
            f"read row by row with the padding skipped, token {p} of your rows is {_word(h[0], decode)!r} "
            f"where document {k} has {_word(w[0], decode)!r}",
            "do your rows hold the documents in their order, each complete?",
        )
    if len(have) != len(want):
        return (
            f"your rows hold {len(have)} tokens besides padding; the documents with their EOS are {len(want)}",
            "is every document in your rows, the last one too, and nothing else?",
        )
    return ("", "")


def packing_fault(documents, block_size: int, got, *, eos: int = EOS, pad: int = PAD, decode=None):
    """``(what, question)`` for a result of the whole-documents packing exercise that breaks its
    goal (``("", "")`` when it meets it): two ``(N, block_size)`` integer tensors ``(input_ids,
    document_ids)``; read row by row with padding skipped, document 0, EOS, document 1, EOS, ...
    each token with its document's index as id; padding ``pad`` with id -1, only at the end of a
    row; no document (with its EOS) split over two rows; and no more rows than
    :func:`fewest_rows`. ``what`` says what the result does; ``question`` asks about the property."""
    fault = _form_fault(block_size, got)
    if fault[0]:
        return fault
    fault = _goal_fault(documents, block_size, got, eos=eos, pad=pad, decode=decode)
    if fault[0] and not _goal_fault(documents, block_size, got[::-1], eos=eos, pad=pad, decode=decode)[0]:
        return (
            "your two tensors meet the goal in the other order",
            "which of them holds the tokens, and in which order does the exercise ask for them?",
        )
    return fault


def _goal_fault(documents, block_size: int, got, *, eos: int, pad: int, decode):
    """packing_fault's checks after the form: padding, order, no cut, fewest rows."""
    ids, doc = (x.long() for x in got)
    fault = _padding_fault(ids, doc, eos=eos, pad=pad, decode=decode)
    if fault[0]:
        return fault
    real = ids != pad
    have = list(zip(ids[real].tolist(), doc[real].tolist()))
    fault = _order_fault(documents, have, eos=eos, decode=decode)
    if fault[0]:
        return fault
    row = torch.arange(ids.shape[0])[:, None].expand_as(ids)[real].tolist()
    for k in range(len(documents)):
        rows = sorted({r for r, (_, d) in zip(row, have) if d == k})
        if len(rows) > 1:
            return (
                f"document {k} starts in row {rows[0]} and ends in row {rows[-1]}",
                "the goal says no document is cut: what must happen to a document that does not fit "
                "in the places a row has left?",
            )
    fewest = fewest_rows([len(d) + 1 for d in documents], block_size)
    if ids.shape[0] > fewest:
        return (
            f"your packing uses {ids.shape[0]} rows; these documents fit uncut and in order in {fewest}",
            "which of your rows leaves places empty that could have held more of the documents?",
        )
    return ("", "")


def explain_boundary_targets(fn, case, expected, got) -> str:
    """mask_cross_document_targets: the first label dropped or kept wrongly, and where it sits."""
    labels, doc = case.args
    got = _tensor(got)
    if got.shape != expected.shape:
        return (
            f"your labels are {tuple(got.shape)} for labels of {tuple(labels.shape)}: the loss shifts them "
            "itself, so which shape must the labels you return keep?"
        )
    first = _first(got != expected)
    if first is None:
        return ""
    n, t = first
    if int(expected[n, t]) == IGNORE_INDEX:
        return (
            f"row {n}, position {t} starts document {int(doc[n, t])} right after document "
            f"{int(doc[n, t - 1])}; the loss grades it as the prediction made at position {t - 1}: "
            "what could the model there know about it?"
        )
    return (
        f"row {n}, position {t}: your labels drop it, but position {t - 1} is in the same document: "
        "what does the model lose if that prediction is never graded?"
        if t > 0 and int(doc[n, t]) == int(doc[n, t - 1])
        else f"row {n}, position {t}: your labels changed a label that no document boundary touches: which rule did that?"
    )


def _turn_of(row: list[int], t: int, roles) -> tuple[str, int]:
    """Whose turn position ``t`` of a chat row is in (``"user"``, ``"assistant"`` or ``""`` before
    any), and which assistant turn (1, 2, ...) it is when it is the assistant's."""
    role, k = "", 0
    for tok in row[: t + 1]:
        if tok == roles.user:
            role = "user"
        elif tok == roles.assistant:
            role, k = "assistant", k + 1
    return role, k


def _scored_wrongly(ids, n: int, t: int, word: str, roles) -> str:
    tok = int(ids[n, t])
    if tok == PAD:
        return f"row {n}, position {t} is PAD and your labels score it: should padding be graded?"
    if tok == roles.user:
        return (
            f"row {n}, position {t} is a {word} marker and your labels score it: whose turn does it "
            "open, and should anything from there to the next <assistant> be graded?"
        )
    if tok == roles.assistant:
        return (
            f"row {n}, position {t} is the template's {word} marker and your labels score it: "
            "is the marker part of what the assistant says?"
        )
    role, _ = _turn_of(ids[n].tolist(), t, roles)
    who = "the user's turn" if role == "user" else "the prompt"
    return f"row {n}, position {t} ({word!r}) is in {who} and your labels score it: whose words are those?"


def _dropped(ids, n: int, t: int, word: str, roles) -> str:
    tok = int(ids[n, t])
    if tok == EOS:
        return (
            f"row {n}, position {t} is the EOS that ends an answer and your labels leave it out: "
            "if it is never graded, how does the model learn to stop?"
        )
    _, k = _turn_of(ids[n].tolist(), t, roles)
    turns = int((ids[n] == roles.assistant).sum())
    if turns > 1:
        return (
            f"row {n}, position {t} ({word!r}) is in assistant turn {k} of {turns} and your labels "
            "leave it out: does your rule score every assistant turn?"
        )
    return f"row {n}, position {t} ({word!r}) is in the assistant's answer and your labels leave it out: which rule removed it?"


@dataclass(frozen=True)
class ChatRoles:
    """The role tokens' ids of a chat vocabulary and its ``decode`` (ids -> text)."""

    user: int
    assistant: int
    decode: Callable


def explain_chat_labels(fn, case, expected, got, *, roles: ChatRoles) -> str:
    """chat_labels, multi_turn_labels: the first position whose label is wrong, and its kind
    (bind ``roles`` with functools.partial to pass it to :func:`lmcore.course.checks.check`)."""
    ids, got = case.args[0], _tensor(got)
    if got.shape != expected.shape:
        if got.dim() == 2 and got.shape[1] == ids.shape[1] - 1:
            return (
                f"your labels have {got.shape[1]} columns for rows of {ids.shape[1]} tokens: in this course "
                "labels keep the input's length and the loss shifts them. Are you shifting here?"
            )
        return ""
    if got.is_floating_point():
        return ""  # the kind line says it; the checker asks about the type
    first = _first(got != expected)
    if first is None:
        return ""
    n, t = first
    word = roles.decode([int(ids[n, t])])
    unscored = got[:, 1:][expected[:, 1:] == IGNORE_INDEX]  # position 0 is never a target
    if len(unscored) and bool((unscored == unscored[0]).all()) and int(unscored[0]) != IGNORE_INDEX:
        return (
            f"every position that must not be scored holds {int(unscored[0])} in your labels: which "
            "value does the loss skip?"
        )
    if int(got[n, t]) not in (IGNORE_INDEX, int(ids[n, t])):
        return (
            f"row {n}, position {t} ({word!r}) has label {int(got[n, t])}, neither -100 nor its own "
            f"id {int(ids[n, t])}: where does the next-token shift happen in this course?"
        )
    if int(expected[n, t]) == IGNORE_INDEX:
        return _scored_wrongly(ids, n, t, word, roles)
    return _dropped(ids, n, t, word, roles)
