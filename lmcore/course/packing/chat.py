"""Notebook 06, chat data: answer-only labels for supervised fine-tuning, for one turn and for
multi-turn conversations, the example's logits, and the two exercise checkers.

A conversation is a row of :data:`lmcore.course.packing.lesson.VOCAB` words:
``<user> 2 + 3 = <assistant> 5 . EOS <user> 4 + 4 = <assistant> 8 . EOS``. Every assistant turn
(its words and the EOS that ends it) is scored; every user turn and every template token
(``<user>``, ``<assistant>``) gets -100, and so does padding.
"""

from __future__ import annotations

from functools import partial

import torch

from ...shift import IGNORE_INDEX
from ..checks import Case, check, first_label_free
from .diagnoses import ChatRoles, explain_chat_labels
from .lesson import ASSISTANT, PAD, USER, VOCAB, decode, encode

__all__ = [
    "EXAMPLE_CHAT",
    "chat_labels",
    "chat_batch",
    "example_chat_logits",
    "multi_turn_labels",
    "conversation_batch",
    "check_chat_labels",
    "check_multi_turn_labels",
]

EXAMPLE_CHAT = "<user> 2 + 3 = <assistant> 5 . EOS"
# the first failure's hint: what kind of position the learner's labels got wrong (diagnoses.py)
_EXPLAIN = partial(explain_chat_labels, roles=ChatRoles(USER, ASSISTANT, decode))


def chat_labels(input_ids: torch.Tensor, assistant_id: int = ASSISTANT, pad_id: int = PAD):
    """labels (N, L): input_ids with -100 on the prompt (everything up to and including the
    first ``assistant_id`` of each row) and on padding, so that only the answer is scored.
    One turn only: on a multi-turn row it scores every later user turn too."""
    is_asst = input_ids == assistant_id
    seen = is_asst.long().cumsum(1)
    prompt = (seen == 0) | ((seen == 1) & is_asst)
    return torch.where(prompt | (input_ids == pad_id), IGNORE_INDEX, input_ids)


def multi_turn_labels(
    input_ids: torch.Tensor, user_id: int = USER, assistant_id: int = ASSISTANT, pad_id: int = PAD
) -> torch.Tensor:
    """labels (N, L): a token keeps its id only inside an assistant turn (after an
    ``assistant_id`` and before the next ``user_id``), the turn's closing EOS included; the
    role tokens themselves, every user turn and padding get -100."""
    is_role = (input_ids == user_id) | (input_ids == assistant_id)
    where = torch.arange(input_ids.shape[1]).expand_as(input_ids)
    last_role = torch.where(is_role, where, -1).cummax(dim=1).values  # (N, L), -1: none yet
    role = input_ids.gather(1, last_role.clamp(min=0))
    scored = (last_role >= 0) & (role == assistant_id) & ~is_role & (input_ids != pad_id)
    return torch.where(scored, input_ids, IGNORE_INDEX)


def chat_batch(
    texts=(EXAMPLE_CHAT, "<user> 7 + 1 = <assistant> 8 . EOS", "<user> 1 2 + 3 4 = <assistant> 4 6 . EOS"),
) -> torch.Tensor:
    """input_ids (N, L) of chat rows, right-padded with PAD."""
    rows = [encode(t) for t in texts]
    L = max(map(len, rows))
    return torch.tensor([r + [PAD] * (L - len(r)) for r in rows])


def example_chat_logits(probs=(0.462, 0.477, 0.313)) -> torch.Tensor:
    """logits (1, 9, V) for ``<user> 2 + 3 = <assistant> 5 . EOS``: uniform on the prompt; at the
    three answer targets (5, '.', EOS) the correct token gets ``probs``, the rest share what is left."""
    ids, V = chat_batch((EXAMPLE_CHAT,))[0], len(VOCAB)
    logits = torch.zeros(1, len(ids), V, dtype=torch.float64)
    for t, p in zip(range(5, 8), probs):
        row = torch.full((V,), (1 - p) / (V - 1), dtype=torch.float64)
        row[ids[t + 1]] = p
        logits[0, t] = row.log()
    return logits


def _spaced(n: int) -> str:
    return " ".join(str(n))


def _turn(g) -> str:
    """One exchange of chat arithmetic: ``<user> a + b = <assistant> a+b . EOS``, a, b in 0..49."""
    a, b = (int(x) for x in torch.randint(0, 50, (2,), generator=g))
    return f"<user> {_spaced(a)} + {_spaced(b)} = <assistant> {_spaced(a + b)} . EOS"


def conversation_batch(turns=(2, 3, 1), seed: int = 0) -> torch.Tensor:
    """input_ids (N, L): one conversation per entry of ``turns`` with that many user/assistant
    exchanges of random sums, right-padded. ``seed`` 0 starts with the example chat."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for n, k in enumerate(turns):
        parts = [_turn(g) for _ in range(k)]
        if seed == 0 and n == 0:
            parts[0] = EXAMPLE_CHAT
        rows.append(" ".join(parts))
    return chat_batch(rows)


# The last case of each check renumbers the vocabulary: the role and padding ids are passed as
# arguments, so a function that ignores its arguments for the notebook's constants fails there.
_RENUMBERED = {ASSISTANT: VOCAB.index("the"), USER: VOCAB.index("cat"), PAD: VOCAB.index("sat")}


def _renumbered(ids: torch.Tensor) -> torch.Tensor:
    out = ids.clone()
    for old, new in _RENUMBERED.items():
        out[ids == old], out[ids == new] = new, old
    return out


def _renumbered_case(ids: torch.Tensor, *names: str) -> Case:
    given = {"user_id": USER, "assistant_id": ASSISTANT, "pad_id": PAD}
    kwargs = {name: _RENUMBERED[given[name]] for name in names}
    label = "the same rows with other ids: " + ", ".join(f"{k}={v}" for k, v in kwargs.items())
    return Case((_renumbered(ids),), kwargs=kwargs, label=label)


def _explain(fn, case, expected, got) -> str:
    if case.kwargs:  # only the ids differ from cases that passed before it
        return (
            f"here the ids are arguments ({', '.join(f'{k}={v}' for k, v in case.kwargs.items())}), not "
            "the notebook's: does your function read its arguments, or the vocabulary's constants?"
        )
    return _EXPLAIN(fn, case, expected, got)


def check_chat_labels(fn) -> bool:
    cases = [
        Case((chat_batch((EXAMPLE_CHAT,)),), label=EXAMPLE_CHAT),
        Case((chat_batch(),), label="three chat rows, padded"),
    ]
    g = torch.Generator().manual_seed(3)
    for k in range(3):
        cases.append(Case((chat_batch([_turn(g) for _ in range(3)]),), label=f"random chat rows {k}"))
    cases.append(_renumbered_case(chat_batch(), "assistant_id", "pad_id"))
    return check(
        "chat_labels",
        fn,
        chat_labels,
        cases,
        free=first_label_free,
        forbid={
            "lmcore.course.packing.chat.chat_labels": "write the mask yourself",
            "lmcore.course.packing.chat.multi_turn_labels": "write the mask yourself",
        },
        explain=_explain,
        hint=(
            "Which tokens should the model be graded on: the user's prompt, the template's markers, "
            "the answer, its EOS, the padding? Which of yours is scored that should not be, or the "
            "other way round?",
            "-100 on every position up to and "
            "including <assistant>, and on PAD; keep the answer and its EOS.",
        ),
    )


def check_multi_turn_labels(fn) -> bool:
    """``fn(input_ids)`` with the default ids must equal :func:`multi_turn_labels`."""
    cases = [
        Case((conversation_batch((2,)),), label="<user> 2 + 3 = <assistant> 5 . EOS <user> ..."),
        Case((conversation_batch(),), label="three conversations of 2, 3 and 1 turns, padded"),
    ]
    cases += [
        Case((conversation_batch((1, 4, 2, 3), seed=s),), label=f"random conversations {s}")
        for s in (1, 2, 3)
    ]
    cases.append(_renumbered_case(conversation_batch(), "user_id", "assistant_id", "pad_id"))
    return check(
        "multi_turn_labels",
        fn,
        multi_turn_labels,
        cases,
        free=first_label_free,
        forbid={
            "lmcore.course.packing.chat.multi_turn_labels": "write the scan yourself",
            # Exercise 5's reference applied turn by turn is right too: refused (issue 38)
            "lmcore.course.packing.chat.chat_labels": "that is the one-turn reference: write the scan yourself",
        },
        explain=_explain,
        hint=(
            "In a conversation of several turns, which tokens are the assistant's to predict? Look at"
            " the second assistant turn: is it scored, and the user turn before it left out?",
            "score a token only "
            "inside an assistant turn: after an <assistant> and before the next <user>, its "
            "EOS included; -100 on <user>, <assistant>, every user turn and PAD.",
        ),
    )
