"""Notebook 03 (from a sequence to one loss): the word vocabulary, the context->target table,
the two cheating models (no shift: copies; no causal mask: peeks), the widget's table and the
exercise checkers. The label-shift figure is in :mod:`lmcore.course.sequence.views`.

The models are :class:`lmcore.model.GPT` (built by :func:`lmcore.course.toys.toy_gpt`); the
model without its causal mask is :func:`lmcore.course.toys.forward_without_causal_mask`.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

from ...loss import causal_lm_loss
from ...model import GPT
from ...shift import labels_from_attention_mask, shift_for_next_token
from ...train.devices import cpu_threads
from ..toys import BOS, EOS, PAD, WordTokenizer, fit, forward_without_causal_mask, toy_gpt
from .exercises import (
    check_loss_and_grad_norm,
    check_per_position_nll,
    reference_loss_and_grad_norm,
)

__all__ = [
    "TOKENIZER",
    "WORDS",
    "WORD_CORPUS",
    "PAD",
    "EOS",
    "BOS",
    "UNK",
    "words",
    "encode",
    "context_target_table",
    "forward_logits",
    "prefix_logits",
    "train_tiny_lm",
    "next_token_loss",
    "train_word_model",
    "position_table",
    "format_position_table",
    "check_per_position_nll",
    "check_loss_and_grad_norm",
    "reference_loss_and_grad_norm",
]

TOKENIZER = WordTokenizer(
    (
        "<unk>",
        "the",
        "a",
        "cat",
        "dog",
        "bird",
        "sat",
        "ran",
        "ate",
        "slept",
        "on",
        "in",
        "to",
        "under",
        "mat",
        "rug",
        "park",
        "fish",
        "tree",
        "box",
    ),
    bos=True,
    unk="<unk>",
    specials=("<pad>", "<eos>", "<bos>"),
)
WORDS = TOKENIZER.VOCAB  # <pad> 0, <eos> 1, <bos> 2 (the toys' convention), <unk> 3
_ID = TOKENIZER.stoi
UNK = _ID["<unk>"]
WORD_CORPUS = (
    "the cat sat on the mat",
    "the dog sat on the rug",
    "the cat ate the fish",
    "a dog ran to the park",
    "the bird sat in the tree",
    "a cat slept in the box",
    "the dog slept under the tree",
    "a bird ate the fish",
    "the cat ran to the mat",
    "a dog sat on the mat",
)


def words(text: str, *, bos: bool = False, eos: bool = False) -> list[str]:
    """Lower-cased words of ``text`` (anything outside the vocabulary becomes ``<unk>``)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__}.")
    out = [w if w in _ID else "<unk>" for w in re.findall(r"[a-z]+", text.lower())]
    return (["<bos>"] if bos else []) + out + (["<eos>"] if eos else [])


def encode(text: str, *, bos: bool = True, eos: bool = False) -> torch.Tensor:
    """Token ids (1, L) of ``text`` in the word vocabulary :data:`WORDS`."""
    return torch.tensor([[_ID[w] for w in words(text, bos=bos, eos=eos)]])


def context_target_table(tokens) -> list[tuple[str, str]]:
    """(context, target) for each target a causal LM is trained on: target t+1 given tokens
    0..t. L tokens give L-1 rows (the first token is never a target)."""
    tokens = list(tokens)
    return [(" ".join(tokens[: t + 1]), tokens[t + 1]) for t in range(len(tokens) - 1)]


def forward_logits(model: GPT, input_ids: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """Logits (N, L, V) of ``model``; with ``causal=False`` every position may attend to every
    other one (including the future): the same weights and blocks, only the mask differs."""
    return model(input_ids) if causal else forward_without_causal_mask(model, input_ids)


def prefix_logits(model: GPT, input_ids: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """Logits (N, L, V) the way generation sees them: position t from a forward of the prefix
    0..t alone (L forwards). For a causal model this equals one full forward."""
    return torch.stack(
        [
            forward_logits(model, input_ids[:, : t + 1], causal=causal)[:, -1]
            for t in range(input_ids.shape[1])
        ],
        dim=1,
    )


def next_token_loss(logits: torch.Tensor, input_ids: torch.Tensor, *, shift: bool = True):
    """Mean NLL; ``shift=False`` scores position t against its own input token (the bug)."""
    if shift:
        return causal_lm_loss(logits, input_ids)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids.reshape(-1))


def train_tiny_lm(
    *,
    shift: bool = True,
    causal: bool = True,
    vocab_size: int = 16,
    length: int = 16,
    batch: int = 32,
    steps: int = 60,
    lr: float = 1e-2,
    seed: int = 0,
):
    """Train a 1-layer GPT on uniformly random tokens, fresh each step. Nothing is predictable,
    so an honest model stays at ln V; a training loss near 0 means it cheats. Returns
    ``(model, losses)``."""
    gen = torch.Generator().manual_seed(seed + 1)
    model = toy_gpt(vocab_size, block_size=length, n_embd=32, seed=seed)
    losses = fit(
        model,
        lambda step: torch.randint(vocab_size, (batch, length), generator=gen),
        steps=steps,
        lr=lr,
        loss_fn=lambda m, ids: next_token_loss(forward_logits(m, ids, causal=causal), ids, shift=shift),
    )
    return model, losses


def _unshifted_loss(model, batch):
    """The copy bug: each position scored against its own input token (padding still ignored)."""
    ids, labels = batch
    logits = model(ids)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def train_word_model(steps: int = 150, seed: int = 0, *, shift: bool = True) -> GPT:
    """A 1-layer GPT trained on :data:`WORD_CORPUS` (with BOS/EOS, padding not scored);
    ``shift=False`` trains the same model without the label shift, so it learns to copy."""
    rows = [encode(s, eos=True)[0] for s in WORD_CORPUS]
    L = max(len(r) for r in rows)
    ids = torch.full((len(rows), L), PAD)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    labels = labels_from_attention_mask(ids, (ids != PAD).long())
    model = toy_gpt(len(WORDS), block_size=32, n_embd=32, seed=seed)
    fit(model, lambda step: (ids, labels), steps=steps, lr=1e-2, loss_fn=None if shift else _unshifted_loss)
    return model


@torch.no_grad()
def position_table(model: GPT, sentence: str, *, shift: bool = True) -> list[dict]:
    """One row per scored position of ``<bos> sentence``: context, target, p(target), loss.

    With ``shift=True`` position t is scored against token t+1 (L-1 rows); with ``shift=False``
    against token t itself, which is already in its context (L rows): the bug the shift avoids.
    """
    ids = encode(sentence)  # (1, L)
    if ids.shape[1] > model.config.block_size:
        raise ValueError(
            f"sentence has {ids.shape[1]} tokens with <bos>; the model reads at "
            f"most {model.config.block_size}."
        )
    with cpu_threads(1):
        logits = model(ids).double()  # (1, L, V)
    if shift:
        logits, targets = shift_for_next_token(logits, ids)  # (1, L-1, V), (1, L-1)
    else:
        targets = ids  # the bug: own token
    logp = torch.log_softmax(logits, dim=-1)[0]
    toks = [WORDS[i] for i in ids[0].tolist()]
    rows = []
    for t in range(targets.shape[1]):
        y = int(targets[0, t])
        rows.append(
            {
                "context": " ".join(toks[: t + 1]),
                "target": WORDS[y],
                "prob": float(logp[t, y].exp()),
                "loss": float(-logp[t, y]),
            }
        )
    return rows


def format_position_table(rows: list[dict]) -> str:
    """The table as text, with the mean loss (nats) at the bottom."""
    if not rows:
        return "(no scored position: type at least one word)"
    w = max(len("context"), *(len(r["context"]) for r in rows)) + 2  # the header fits too
    lines = [f"{'context':<{w}}{'target':<9}{'p(target)':>10}{'loss':>8}"]
    lines += [f"{r['context']:<{w}}{r['target']:<9}{r['prob']:>10.3f}{r['loss']:>8.3f}" for r in rows]
    mean = sum(r["loss"] for r in rows) / len(rows)
    count = f"{len(rows)} target{'s' if len(rows) != 1 else ''}"
    return "\n".join(lines + [f"{count}, mean loss {mean:.3f} nats"])
