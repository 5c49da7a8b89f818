"""What a wrong answer to one of notebook 06's mask and label exercises broke, as a question.

The checkers' first-failure hint was written for one mistake; these look at the learner's result
on the case that failed, find the first position where it differs from the reference, and ask
about that position's kind (a later position seen, another document seen, padding or a user turn
scored, an answer's EOS dropped), so the first hint points at the learner's own mistake without
giving the rule. Each returns ``""`` when it cannot tell; the checker then shows its nudge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...shift import IGNORE_INDEX
from ..toys import EOS, PAD

__all__ = ["ChatRoles", "explain_document_mask", "explain_boundary_targets", "explain_chat_labels"]


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
            "What would scaled_dot_product_attention do with a float mask of 0s and 1s?"
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


def explain_boundary_targets(fn, case, expected, got) -> str:
    """mask_cross_document_targets: the first label dropped or kept wrongly, and where it sits."""
    labels, doc = case.args
    got = _tensor(got)
    if got.shape != expected.shape:
        return ""
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
    unscored = got[expected == IGNORE_INDEX]
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
