"""Notebook 06 (packing and boundaries): the four packing policies (and BOS per document), the
leak measurement on a small seeded GPT and the exercise checkers. The figure is in
:mod:`lmcore.course.packing_views`; chat (answer-only) labels for one turn and many in
:mod:`lmcore.course.packing_chat`.

A policy is one of :data:`POLICIES`. :func:`pack_with_policy` builds its tensors and
:func:`measure_packing_leak` measures how far document B's logits move when document A changes;
the notebook's widget only wires a dropdown to them and to the figure.
"""

from __future__ import annotations

import torch

from ..model import GPT
from ..shift import (
    IGNORE_INDEX,
    document_causal_mask,
    labels_from_attention_mask,
    mask_cross_document_targets,
    pack_documents,
)
from .checks import Case, check
from .toys import BOS, EOS, PAD, WordTokenizer, toy_gpt

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
    "leak_model",
    "measure_packing_leak",
    "rotary_leak",
    "policy_leaks",
    "check_mask_cross_document_targets",
    "check_document_causal_mask",
]

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


def leak_model(seed: int = 0) -> GPT:
    """A seeded 2-layer GPT (:func:`lmcore.course.toys.toy_gpt`) in float64, eval mode: a leak
    of 0 reads about 1e-16, far below the 3 decimals the notebook prints (checked under
    ATEN_CPU_CAPABILITY=default and avx2)."""
    return toy_gpt(
        len(VOCAB), block_size=32, n_layer=2, n_embd=32, init_std=0.2, dtype=torch.float64, seed=seed
    )


@torch.no_grad()
def measure_packing_leak(
    model=None,
    *,
    eos: bool = True,
    block_diagonal: bool = False,
    reset_positions: bool = False,
    a: str = "the cat sat on the mat",
    a_changed: str = "a bird sings",
    b: str = "dogs run fast",
) -> float:
    """max |Δ logits| over document B's positions when document A (packed before B in the same
    row) is replaced by a different, shorter document. 0 means B cannot tell what preceded it."""
    if not eos and (block_diagonal or reset_positions):
        raise ValueError("block_diagonal and reset_positions need eos=True (packed with EOS).")
    model = model if model is not None else leak_model()
    out = []
    for first in (a, a_changed):
        p = pack_with_policy([first, b], 16, "block_diagonal" if eos else "no_eos")
        logits = model(
            p["input_ids"],
            document_ids=p["document_ids"] if block_diagonal else None,
            position_ids=p["position_ids"] if reset_positions else None,
        )
        out.append(logits[p["document_ids"] == 1])  # (tokens of B, V)
    return float((out[0] - out[1]).abs().max())


def _rotate(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding (RoPE) of x (L, D) at integer positions pos (L,)."""
    half = x.shape[-1] // 2
    angle = pos[:, None].double() * 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1)


@torch.no_grad()
def rotary_leak(
    *,
    block_diagonal: bool,
    a: str = "the cat sat on the mat",
    a_changed: str = "a bird sings",
    b: str = "dogs run fast",
    seed: int = 0,
) -> float:
    """The leak of :func:`measure_packing_leak` for one seeded float64 attention layer with rotary
    positions at the row's absolute indices (never reset): queries and keys are rotated by their
    position, so a score depends only on the distance between query and key."""
    g = torch.Generator().manual_seed(seed)
    D = 16
    E, Wq, Wk, Wv = (
        torch.randn(*shape, generator=g, dtype=torch.float64)
        for shape in ((len(VOCAB), D), (D, D), (D, D), (D, D))
    )
    out = []
    for first in (a, a_changed):
        p = pack_with_policy([first, b], 16, "block_diagonal")
        x, doc = E[p["input_ids"][0]], p["document_ids"]
        pos = torch.arange(x.shape[0])
        q, k = _rotate(x @ Wq, pos), _rotate(x @ Wk, pos)
        allowed = (
            document_causal_mask(doc)[0]
            if block_diagonal
            else torch.ones(len(pos), len(pos), dtype=torch.bool).tril()
        )
        att = (q @ k.T / D**0.5).masked_fill(~allowed, float("-inf")).softmax(-1)
        out.append((att @ (x @ Wv))[doc[0] == 1])
    return float((out[0] - out[1]).abs().max())


def policy_leaks(model=None) -> dict:
    """The leak under each policy, plus the two halves of the last one on their own."""
    model = model if model is not None else leak_model()
    eos = measure_packing_leak(model)
    return {
        "no_eos": measure_packing_leak(model, eos=False),
        "eos": eos,
        "eos_masked": eos,
        "block_diagonal": measure_packing_leak(model, block_diagonal=True, reset_positions=True),
        "positions_reset_only": measure_packing_leak(model, reset_positions=True),
        "block_diagonal_only": measure_packing_leak(model, block_diagonal=True),
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
        hint="a new document starts at t when document_ids[:, t] != document_ids[:, t-1]; "
        "the label AT t (EOS -> b_first) becomes -100; a_last -> EOS stays.",
    )


def check_document_causal_mask(fn) -> bool:
    cases = [Case((pack_with_policy()["document_ids"],), label="three packed documents (DOCS)")]
    cases += [Case((doc,), label=f"random {k}") for k, doc in enumerate(_doc_cases(2))]
    return check(
        "document_causal_mask",
        fn,
        document_causal_mask,
        cases,
        hint="combine two bool conditions: j <= i (torch.tril) AND same document "
        "(document_ids[:, :, None] == document_ids[:, None, :]).",
    )
