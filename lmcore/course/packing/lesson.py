"""Notebook 06 (packing and boundaries): the toy vocabulary, the four packing policies (and BOS
per document) and the exercise checkers. The leak measurements are in
:mod:`lmcore.course.packing.leak`, the figure in :mod:`lmcore.course.packing.views`; chat
(answer-only) labels for one turn and many in :mod:`lmcore.course.packing.chat`.

A policy is one of :data:`POLICIES`; :func:`pack_with_policy` builds its tensors, and the
notebook's widget only wires a dropdown to them, to the measured leaks and to the figure.
"""

from __future__ import annotations

import torch

from ...shift import (
    IGNORE_INDEX,
    _restart_positions,
    document_causal_mask,
    labels_from_attention_mask,
    mask_cross_document_targets,
    pack_documents,
)
from ..checks import Case, check, first_label_free, same_layout
from ..toys import BOS, EOS, PAD, WordTokenizer
from .diagnoses import explain_boundary_targets, explain_document_mask, explain_position_ids, packing_fault

__all__ = [
    "TOKENIZER",
    "VOCAB",
    "PAD",
    "EOS",
    "BOS",
    "USER",
    "ASSISTANT",
    "DOCS",
    "POLICIES",
    "encode",
    "decode",
    "pack_with_policy",
    "pack_with_bos",
    "check_mask_cross_document_targets",
    "check_document_causal_mask",
    "check_pack_whole",
    "check_position_ids",
]

_WRITE = "write it yourself with tensor operations"

TOKENIZER = WordTokenizer(
    [
        "<user>",
        "<assistant>",
        "+",
        "=",
        ".",
        *"0123456789",
        "the",
        "cat",
        "sat",
        "on",
        "mat",
        "dogs",
        "run",
        "fast",
        "a",
        "bird",
        "sings",
    ],
    bos=True,
)
VOCAB = TOKENIZER.VOCAB  # PAD 0, EOS 1, BOS 2 (the toys' convention), then the words
USER, ASSISTANT = TOKENIZER.stoi["<user>"], TOKENIZER.stoi["<assistant>"]
DOCS = ["the cat sat", "dogs run fast", "a bird sings"]
POLICIES = {
    "no_eos": "no EOS",
    "eos": "EOS between documents",
    "eos_masked": "EOS + boundary targets masked",
    "block_diagonal": "+ block-diagonal attention, positions reset",
}


def encode(text: str) -> list[int]:
    """Space-separated words of :data:`VOCAB` -> token ids."""
    return TOKENIZER.encode(text)


def decode(ids) -> str:
    return TOKENIZER.decode(ids)


def _docs(documents):
    return [encode(d) if isinstance(d, str) else list(d) for d in (documents or DOCS)]


def pack_with_policy(documents=None, block_size: int = 14, policy: str = "block_diagonal") -> dict:
    """The tensors one packing policy feeds the model and the loss, all (N, L) except
    ``attention`` (N, L, L) bool (query i may read key j) and ``crossing`` (N, L) bool (the label
    at t is the first token of a document that follows another in the row)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {list(POLICIES)}; got {policy!r}.")
    docs = _docs(documents)
    if policy == "no_eos":
        ids = [t for d in docs for t in d]
        doc = [k for k, d in enumerate(docs) for _ in d]
        n_pad = -len(ids) % block_size
        input_ids = torch.tensor(ids + [PAD] * n_pad).view(-1, block_size)
        document_ids = torch.tensor(doc + [-1] * n_pad).view(-1, block_size)
        labels = labels_from_attention_mask(input_ids, (document_ids >= 0).long())
    else:
        pb = pack_documents(docs, block_size, eos_id=EOS, pad_id=PAD)
        input_ids, document_ids = pb.input_ids, pb.document_ids
        labels = pb.labels if policy != "eos" else labels_from_attention_mask(input_ids, pb.attention_mask)
    N, L = input_ids.shape
    if policy == "block_diagonal":
        positions, attention = pb.position_ids, document_causal_mask(document_ids)
    else:
        positions = torch.arange(L).expand(N, L)
        attention = torch.ones(L, L, dtype=torch.bool).tril().expand(N, L, L)
    # Which labels mask_cross_document_targets would drop (padding starts are not documents).
    dropped = mask_cross_document_targets(input_ids, document_ids) == IGNORE_INDEX
    crossing = dropped & (document_ids >= 0)
    return {
        "input_ids": input_ids,
        "labels": labels,
        "document_ids": document_ids,
        "position_ids": positions,
        "attention": attention,
        "crossing": crossing,
    }


def pack_with_bos(documents=None, block_size: int = 14):
    """The alternative to dropping ``EOS -> b_first``: every document starts with its own BOS
    (``BOS doc EOS BOS doc EOS ...``), packed by ``pack_documents`` (which still drops the
    target at each document start, here ``EOS -> BOS``). Returns the PackedBatch."""
    return pack_documents([[BOS] + d for d in _docs(documents)], block_size, eos_id=EOS, pad_id=PAD)


# ---------------------------------------------------------------- exercise checkers


def _doc_cases(seed: int = 0, n: int = 4):
    g, out = torch.Generator().manual_seed(seed), []
    for k in range(n):
        N, L = 2 + k % 2, 6 + 2 * k
        starts = torch.rand(N, L, generator=g) < 0.3
        starts[:, 0] = False
        doc = starts.long().cumsum(1)
        doc[:, L - int(torch.randint(0, 3, (1,), generator=g)) :] = -1
        out.append(doc)
    return out


def check_mask_cross_document_targets(fn) -> bool:
    p = pack_with_policy(policy="eos")
    cases = [Case((p["labels"], p["document_ids"]), label="three packed documents (DOCS)")]
    for k, doc in enumerate(_doc_cases(1)):
        labels = torch.randint(0, 20, doc.shape, generator=torch.Generator().manual_seed(k))
        cases.append(Case((torch.where(doc >= 0, labels, IGNORE_INDEX), doc), label=f"random {k}"))
    return check(
        "mask_cross_document_targets",
        fn,
        mask_cross_document_targets,
        cases,
        free=first_label_free,
        forbid={"lmcore.shift.mask_cross_document_targets": _WRITE, "lmcore.shift.pack_documents": _WRITE},
        explain=explain_boundary_targets,
        hint=(
            "Where two documents meet in a packed row, which target asks the model to predict the "
            "next document's first token from the previous document? Is that the only one you "
            "removed?",
            "a new document starts at t when document_ids[:, t] != document_ids[:, t-1]; "
            "the label AT t (EOS -> b_first) becomes -100; a_last -> EOS stays.",
        ),
    )


def _padding_queries_free(args, expected, got):
    """``free=`` of the document-mask exercise: the row of a padding query (document id -1) that
    reads at least one key is the learner's. No real token reads padding and padding is never
    scored, so what a padding query reads is the learner's to choose, as long as it reads
    something (a query with no key gives attention nothing to average)."""
    (document_ids,) = args
    if not (same_layout(expected, got) and got.shape[:2] == document_ids.shape):
        return got
    free = (document_ids < 0) & got.any(-1)  # padding queries that read something
    return torch.where(free[..., None], expected.to(got.dtype), got)


def _padding_positions_free(args, expected, got):
    """``free=`` of the position-ids exercise: padding's positions (document id -1) are the
    learner's, since padding is never scored and no real token reads it, as long as the model
    accepts them (0 to L - 1: an embedding table of L rows has no row -1 nor L)."""
    (document_ids,) = args
    if not (same_layout(expected, got) and got.shape == document_ids.shape):
        return got
    free = (document_ids < 0) & (got >= 0) & (got < document_ids.shape[1])
    return torch.where(free, expected.to(got.dtype), got)


def check_document_causal_mask(fn) -> bool:
    cases = [Case((pack_with_policy()["document_ids"],), label="three packed documents (DOCS)")]
    cases += [Case((doc,), label=f"random {k}") for k, doc in enumerate(_doc_cases(2))]
    return check(
        "document_causal_mask",
        fn,
        document_causal_mask,
        cases,
        free=_padding_queries_free,
        forbid={"lmcore.shift.document_causal_mask": _WRITE},
        explain=explain_document_mask,
        hint=(
            "In a packed row, what must be true of position j for position i to look at it? Go "
            "through one row of two documents by hand: which pairs (i, j) may attend?",
            "combine two bool conditions: j <= i (torch.tril) AND same document "
            "(document_ids[:, :, None] == document_ids[:, None, :]).",
        ),
    )


def _whole(documents, block_size):
    p = pack_documents(documents, block_size, eos_id=EOS, pad_id=PAD, policy="whole")
    return p.input_ids, p.document_ids


def _pack_whole_cases() -> list[Case]:
    g = torch.Generator().manual_seed(6)
    cases = [
        Case(([encode(d) for d in DOCS], 8), label="DOCS in rows of 8"),
        Case(([encode(d) for d in DOCS], 6), label="DOCS in rows of 6"),
        Case(([[20, 21, 22], [23, 24, 25, 26, 27, 28, 29]], 8), label="a document that fills a row exactly"),
        Case(([[18 + k, 19 + k, 20 + k] for k in range(4)], 8), label="four documents, two to a row exactly"),
    ]
    for k in range(3):
        L = int(torch.randint(6, 12, (1,), generator=g))
        docs = [
            torch.randint(
                18, len(VOCAB), (int(torch.randint(1, L, (1,), generator=g)),), generator=g
            ).tolist()
            for _ in range(int(torch.randint(3, 8, (1,), generator=g)))
        ]
        cases.append(Case((docs, L), label=f"random {k}: {len(docs)} documents, rows of {L}"))
    return cases


def check_pack_whole(fn) -> bool:
    """Grade ``fn(documents, block_size) -> (input_ids, document_ids)``, both (N, block_size),
    against the exercise's goal (:func:`lmcore.course.packing.diagnoses.packing_fault`): every
    document whole in one row followed by EOS, in their order, padding (PAD, id -1) only at the
    end of a row, in the fewest rows. Every packing that meets it passes, ``pack_documents(...,
    policy="whole")``'s among them; a call to ``pack_documents`` is refused."""
    return check(
        "pack whole documents",
        fn,
        None,
        _pack_whole_cases(),
        judge=lambda documents, block_size, got: packing_fault(
            documents, block_size, got, eos=EOS, pad=PAD, decode=decode
        ),
        forbid={"lmcore.shift.pack_documents": "build the rows yourself"},
        hint=(
            "Which part of the goal does your packing miss: every document whole in one row with its "
            "EOS, the documents in order, padding only at the end of a row, or the fewest rows?",
            "fill the rows in order: a document goes on the current row if it and its EOS fit in the "
            "places left; otherwise pad the rest of the row (PAD, document id -1) and start the next row "
            "with it; pad the last row too. (Any other packing that meets the goal passes as well.)",
        ),
    )


def check_position_ids(fn) -> bool:
    """Grade ``fn(document_ids (N, L)) -> position_ids (N, L)``: each token's position as if its
    document started a row of its own, i.e. 0 at each row start and wherever the document id
    changes (padding, id -1, counts as one more document), as ``pack_documents`` makes them."""
    cases = [Case((pack_with_policy()["document_ids"],), label="three packed documents (DOCS)")]
    cases += [Case((doc,), label=f"random {k}") for k, doc in enumerate(_doc_cases(4))]
    streamed = pack_documents([encode(d) for d in DOCS], 6, eos_id=EOS, pad_id=PAD, policy="stream")
    cases.append(
        Case((streamed.document_ids,), label="DOCS under stream in rows of 6 (documents cut across rows)")
    )
    starts = torch.rand(24, generator=torch.Generator().manual_seed(7)) < 0.25  # one stream of 24 tokens
    starts[0] = False
    cases.append(Case((starts.long().cumsum(0).view(3, 8),), label="a random stream cut into 3 rows of 8"))
    return check(
        "position ids for packed documents",
        fn,
        _restart_positions,
        cases,
        free=_padding_positions_free,
        forbid={"lmcore.shift.pack_documents": _WRITE, "lmcore.shift._restart_positions": _WRITE},
        explain=explain_position_ids,
        hint=(
            "Would each document get the positions it would have in a row of its own? Compare your "
            "output with the row's document ids: where does that fail first?",
            "position = t minus the index where the current document started; mark the starts "
            "(t = 0 and every change of id), and a running maximum (cummax) of their indices gives "
            "that index at every t.",
        ),
    )
