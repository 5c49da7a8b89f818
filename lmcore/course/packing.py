"""Notebook 06 (packing and boundaries): the four packing policies, the leak measurement on a
small seeded GPT, chat (answer-only) labels, the figures, the widget and the exercise checkers.

A policy is one of :data:`POLICIES`. :func:`pack_with_policy` builds its tensors,
:func:`measure_leak` measures how far document B's logits move when document A changes, and
:func:`plot_packing` draws both; the notebook's widget only wires a dropdown to them.
"""
from __future__ import annotations

import torch

from ..model import GPT, GPTConfig
from ..shift import (IGNORE_INDEX, document_causal_mask, labels_from_attention_mask,
                     mask_cross_document_targets, pack_documents)
from .checks import Case, check
from .style import COLORS, draw_grid, new_figure

__all__ = ["VOCAB", "PAD", "EOS", "USER", "ASSISTANT", "DOCS", "SEED_CHAT", "POLICIES", "encode", "decode",
           "pack_with_policy", "leak_model", "measure_leak", "policy_leaks", "plot_packing",
           "chat_labels", "chat_batch", "seed_chat_logits",
           "check_mask_cross_document_targets", "check_document_causal_mask", "check_chat_labels"]

VOCAB = ["PAD", "EOS", "<user>", "<assistant>", "+", "=", ".", *"0123456789", "the", "cat", "sat",
         "on", "mat", "dogs", "run", "fast", "a", "bird", "sings"]
PAD, EOS, USER, ASSISTANT = 0, 1, 2, 3
DOCS = ["the cat sat", "dogs run fast", "a bird sings"]
SEED_CHAT = "<user> 2 + 3 = <assistant> 5 . EOS"
POLICIES = {"no_eos": "no EOS", "eos": "EOS between documents",
            "eos_masked": "EOS + boundary targets masked",
            "block_diagonal": "+ block-diagonal attention, positions reset"}
_DOC_COLORS = ["#4C72B0", "#64B5CD", "#55A868", "#CCB974"]


def encode(text: str) -> list[int]:
    """Space-separated words of :data:`VOCAB` -> token ids."""
    return [VOCAB.index(w) for w in text.split()]


def decode(ids) -> str:
    return " ".join(VOCAB[int(i)] for i in ids)


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
    return {"input_ids": input_ids, "labels": labels, "document_ids": document_ids,
            "position_ids": positions, "attention": attention, "crossing": crossing}


def leak_model(seed: int = 0) -> GPT:
    """A seeded 2-layer GPT in float64, eval mode (its numbers do not depend on the CPU)."""
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=len(VOCAB), block_size=32, n_layer=2, n_head=2, n_embd=32,
                    dropout=0.0, init_std=0.2)
    return GPT(cfg).double().eval()


@torch.no_grad()
def measure_leak(model=None, *, eos: bool = True, block_diagonal: bool = False,
                 reset_positions: bool = False, a: str = "the cat sat on the mat",
                 a_changed: str = "a bird sings", b: str = "dogs run fast") -> float:
    """max |Δ logits| over document B's positions when document A (packed before B in the same
    row) is replaced by a different, shorter document. 0 means B cannot tell what preceded it."""
    if not eos and (block_diagonal or reset_positions):
        raise ValueError("block_diagonal and reset_positions need eos=True (packed with EOS).")
    model = model if model is not None else leak_model()
    out = []
    for first in (a, a_changed):
        p = pack_with_policy([first, b], 16, "block_diagonal" if eos else "no_eos")
        logits = model(p["input_ids"], document_ids=p["document_ids"] if block_diagonal else None,
                       position_ids=p["position_ids"] if reset_positions else None)
        out.append(logits[p["document_ids"] == 1])                    # (tokens of B, V)
    return float((out[0] - out[1]).abs().max())


def policy_leaks(model=None) -> dict:
    """The leak under each policy, plus the two halves of the last one on their own."""
    model = model if model is not None else leak_model()
    eos = measure_leak(model)
    return {"no_eos": measure_leak(model, eos=False), "eos": eos, "eos_masked": eos,
            "block_diagonal": measure_leak(model, block_diagonal=True, reset_positions=True),
            "positions_reset_only": measure_leak(model, reset_positions=True),
            "block_diagonal_only": measure_leak(model, block_diagonal=True)}


def plot_packing(policy: str = "block_diagonal", documents=None, block_size: int = 14,
                 leak: float | None = None):
    """One packed row under ``policy``: inputs, position ids and the target each position is
    scored on (grey = -100, red = scored across a boundary), next to the attention mask."""
    p = pack_with_policy(documents, block_size, policy)
    ids, doc, pos = (p[k][0].tolist() for k in ("input_ids", "document_ids", "position_ids"))
    lab, cross = p["labels"][0].tolist(), p["crossing"][0].tolist()
    L = len(ids)
    fig, (ax, ax2) = new_figure(1, 2, width=12.0, height=3.4, gridspec_kw={"width_ratios": [2.2, 1]})
    in_col = [COLORS["pad"] if d < 0 else COLORS["eos"] if i == EOS else _DOC_COLORS[d % 4]
              for i, d in zip(ids, doc)]
    tg_col = [COLORS["ignored"] if y == IGNORE_INDEX else COLORS["wrong"] if c else COLORS["target"]
              for y, c in zip(lab[1:], cross[1:])] + [COLORS["pad"]]
    draw_grid(ax, [in_col, [COLORS["pad"]] * L, tg_col],
              [[VOCAB[i] for i in ids], [str(q) for q in pos],
               [VOCAB[y] if y != IGNORE_INDEX else "-100" for y in lab[1:]] + ["—"]],
              f"{POLICIES[policy]}: " + ("red = a target that crosses a boundary"
                                         if COLORS["wrong"] in tg_col else "no scored target crosses a boundary"),
              row_names=["input", "position", "target"])
    ax.set_xlabel("position t (its target is token t+1)")
    ax2.imshow(p["attention"][0].numpy(), cmap="Blues", vmin=0, vmax=1.4)
    ax2.set_xticks(range(0, L, 2))
    ax2.set_yticks(range(0, L, 2))
    ax2.set_xlabel("key j (read)")
    ax2.set_ylabel("query i (reading)")
    ax2.grid(False)
    ax2.set_title("attention mask (blue = may read)" + ("" if leak is None else
                  f"\nleak: max |Δ logits of B| = {leak:.3f}"), fontsize=10)
    return fig


# ---------------------------------------------------------------- chat data

def chat_labels(input_ids: torch.Tensor, assistant_id: int = ASSISTANT, pad_id: int = PAD):
    """labels (N, L): input_ids with -100 on the prompt (everything up to and including the
    first ``assistant_id`` of each row) and on padding, so that only the answer is scored."""
    is_asst = input_ids == assistant_id
    seen = is_asst.long().cumsum(1)
    prompt = (seen == 0) | ((seen == 1) & is_asst)
    return torch.where(prompt | (input_ids == pad_id), IGNORE_INDEX, input_ids)


def chat_batch(texts=(SEED_CHAT, "<user> 7 + 1 = <assistant> 8 . EOS",
                      "<user> 1 2 + 3 4 = <assistant> 4 6 . EOS")) -> torch.Tensor:
    """input_ids (N, L) of chat rows, right-padded with PAD."""
    rows = [encode(t) for t in texts]
    L = max(map(len, rows))
    return torch.tensor([r + [PAD] * (L - len(r)) for r in rows])


def seed_chat_logits(probs=(0.462, 0.477, 0.313)) -> torch.Tensor:
    """logits (1, 9, V) for ``<user> 2 + 3 = <assistant> 5 . EOS``: uniform on the prompt; at the
    three answer targets (5, '.', EOS) the correct token gets ``probs``, the rest share what is left."""
    ids, V = chat_batch((SEED_CHAT,))[0], len(VOCAB)
    logits = torch.zeros(1, len(ids), V, dtype=torch.float64)
    for t, p in zip(range(5, 8), probs):
        row = torch.full((V,), (1 - p) / (V - 1), dtype=torch.float64)
        row[ids[t + 1]] = p
        logits[0, t] = row.log()
    return logits


# ---------------------------------------------------------------- exercise checkers

def _doc_cases(seed: int = 0, n: int = 4):
    g, out = torch.Generator().manual_seed(seed), []
    for k in range(n):
        N, L = 2 + k % 2, 6 + 2 * k
        starts = torch.rand(N, L, generator=g) < 0.3
        starts[:, 0] = False
        doc = starts.long().cumsum(1)
        doc[:, L - int(torch.randint(0, 3, (1,), generator=g)):] = -1
        out.append(doc)
    return out


def check_mask_cross_document_targets(fn) -> bool:
    p = pack_with_policy(policy="eos")
    cases = [Case((p["labels"], p["document_ids"]), label="three packed documents (DOCS)")]
    for k, doc in enumerate(_doc_cases(1)):
        labels = torch.randint(0, 20, doc.shape, generator=torch.Generator().manual_seed(k))
        cases.append(Case((torch.where(doc >= 0, labels, IGNORE_INDEX), doc), label=f"random {k}"))
    return check("mask_cross_document_targets", fn, mask_cross_document_targets, cases, hint=
                 "a new document starts at t when document_ids[:, t] != document_ids[:, t-1]; "
                 "the label AT t (EOS -> b_first) becomes -100; a_last -> EOS stays.")


def check_document_causal_mask(fn) -> bool:
    cases = [Case((pack_with_policy()["document_ids"],), label="three packed documents (DOCS)")]
    cases += [Case((doc,), label=f"random {k}") for k, doc in enumerate(_doc_cases(2))]
    return check("document_causal_mask", fn, document_causal_mask, cases, hint=
                 "combine two bool conditions: j <= i (torch.tril) AND same document "
                 "(document_ids[:, :, None] == document_ids[:, None, :]).")


def check_chat_labels(fn) -> bool:
    cases = [Case((chat_batch((SEED_CHAT,)),), label=SEED_CHAT),
             Case((chat_batch(),), label="three chat rows, padded")]
    g = torch.Generator().manual_seed(3)
    for k in range(3):
        rows = []
        for _ in range(3):
            q = " ".join(str(int(d)) for d in torch.randint(0, 10, (int(torch.randint(1, 5, (1,), generator=g)),), generator=g))
            a = " ".join(str(int(d)) for d in torch.randint(0, 10, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g))
            rows.append(f"<user> {q} = <assistant> {a} . EOS")
        cases.append(Case((chat_batch(rows),), label=f"random chat rows {k}"))
    return check("chat_labels", fn, chat_labels, cases, hint="-100 on every position up to and "
                 "including <assistant>, and on PAD; keep the answer and its EOS.")
