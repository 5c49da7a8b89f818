"""Notebook 07 (debugging label bugs): seed 004's pipelines where "the loss falls but the target
is wrong", each trained a few steps with a tiny GPT, their diagnoses, and the measurements for
the bugs ``run_checks`` cannot see. Figures, the widget and the exercises: ``debugging_views``.

The corpus: each document counts up from a random start to 15 in steps of 1 or 2 (a coin flip),
then EOS (PAD 0, EOS 1, numbers 2..15). Its exact entropy per target is the loss floor.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ..diagnose import run_checks, token_weights
from ..loss import causal_lm_loss
from ..model import GPT, GPTConfig
from ..presets import cpu_threads
from ..shift import IGNORE_INDEX, labels_from_attention_mask, pack_documents

__all__ = ["PAD", "EOS", "V", "L", "STEPS", "ROWS", "Pipeline", "PIPELINES", "documents", "padded_batch",
           "entropy_floor", "tiny_gpt", "noncausal_forward", "build", "train_pipeline", "loss_verdict",
           "diagnose_pipeline", "weights_by_row", "measure_leak", "eos_targets", "p_stop",
           "loss_correct"]

PAD, EOS, V, L, STEPS, ROWS = 0, 1, 16, 16, 60, 16



def documents(n: int, seed: int) -> list:
    """``n`` documents that count up by 1 or 2 (a fair coin) from a start in 2..9 to 15."""
    g = torch.Generator().manual_seed(seed)
    docs = []
    for s in torch.randint(2, 10, (n,), generator=g).tolist():
        doc = [s]
        while doc[-1] < V - 1:
            big = doc[-1] < V - 2 and bool(torch.rand((), generator=g) < 0.5)
            doc.append(doc[-1] + (2 if big else 1))
        docs.append(doc)
    return docs


def entropy_floor(docs) -> float:
    """The lowest possible mean next-token loss on ``docs`` (+ EOS): ln 2 per coin flip."""
    targets = sum(len(d) for d in docs)                       # (len - 1) numbers + EOS each
    flips = sum(sum(1 for x in d if x < V - 2) for d in docs)
    return flips * math.log(2) / targets


def padded_batch(docs, *, eos_id: int = EOS, pad_id: int = PAD):
    """``(input_ids, attention_mask)`` (N, L): each document + EOS, right-padded with pad_id."""
    rows = [d + [eos_id] for d in docs]
    ids = torch.tensor([r + [pad_id] * (L - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (L - len(r)) for r in rows])
    return ids, mask


def tiny_gpt(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=V, block_size=L, n_layer=1, n_head=2, n_embd=32))


def noncausal_forward(model: GPT, input_ids: torch.Tensor) -> torch.Tensor:
    """The GPT's own layers with the causal mask removed: every position attends everywhere."""
    N, T = input_ids.shape
    x = model.wte(input_ids) + model.wpe(torch.arange(T)[None])
    everywhere = torch.ones(N, 1, T, T, dtype=torch.bool)
    for block in model.blocks:
        x = block(x, everywhere)
    return model.lm_head(model.ln_f(x))


# --------------------------------------------------------------- the losses, right and wrong

def _labels(ids, mask):
    return labels_from_attention_mask(ids, mask)


def loss_correct(logits, ids, mask):
    return causal_lm_loss(logits, _labels(ids, mask))


def loss_same_position(logits, ids, mask):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), _labels(ids, mask).reshape(-1))


def loss_double_shift(logits, ids, mask):
    labels = _labels(ids, mask)
    pre_shifted = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], IGNORE_INDEX)], 1)
    return causal_lm_loss(logits, pre_shifted)              # ... and the loss shifts again


def loss_softmax_first(logits, ids, mask):
    return causal_lm_loss(logits.softmax(-1), _labels(ids, mask))


def loss_padding_scored(logits, ids, mask):
    return causal_lm_loss(logits, ids)


def loss_batch_means(logits, ids, mask):
    labels = _labels(ids, mask)
    return torch.stack([causal_lm_loss(logits[i:i + 1], labels[i:i + 1])
                        for i in range(len(ids))]).mean()


def loss_eos_is_pad(logits, ids, mask):
    labels = ids.masked_fill(ids == EOS, IGNORE_INDEX)    # "ignore the pad id", and PAD is EOS
    return causal_lm_loss(logits, labels)


@dataclass(frozen=True)
class Pipeline:
    """One way to train: how batches are built, how the model is called, how the loss is taken."""
    key: str
    title: str
    symptom: str
    consequence: str
    loss_fn: Callable
    batch: str = "padded"              # "padded", "packed" or "eos_pad"
    future: bool = False               # forward without the causal mask
    caught_by: str = "run_checks"


PIPELINES = {p.key: p for p in [
    Pipeline("correct", "correct: shift once, ignore padding", "loss falls", "learns the next token",
             loss_correct),
    Pipeline("same_position", "logits compared with the same position", "loss falls fast",
             "learns to copy its input", loss_same_position),
    Pipeline("double_shift", "shifted outside and inside the loss", "converges too",
             "predicts t+2, not t+1", loss_double_shift),
    Pipeline("softmax_first", "softmax before the cross-entropy", "runs without error",
             "probabilities taken as logits", loss_softmax_first),
    Pipeline("padding_scored", "padding not ignored", "the loss looks great",
             "learns PAD -> PAD transitions", loss_padding_scored),
    Pipeline("batch_means", "per-row means averaged", "smooth curve",
             "short rows weigh more per token", loss_batch_means),
    Pipeline("packed_causal", "packed documents under a plain causal mask", "high throughput",
             "documents read each other", loss_correct, batch="packed",
             caught_by="measurement: leak across documents"),
    Pipeline("eos_is_pad", "EOS and PAD share one id", "odd generations",
             "never learns to stop", loss_eos_is_pad, batch="eos_pad",
             caught_by="measurement: EOS targets and p(stop)"),
    Pipeline("sees_future", "the model sees the future (no causal mask)", "loss near 0",
             "cannot generate", loss_correct, future=True),
]}


def _batch(kind: str, step: int):
    docs = documents(ROWS, seed=1000 + step)
    if kind == "packed":
        packed = pack_documents(docs + documents(ROWS, seed=5000 + step), L, eos_id=EOS, pad_id=PAD)
        return packed.input_ids[:ROWS], packed.attention_mask[:ROWS]
    return padded_batch(docs, pad_id=EOS if kind == "eos_pad" else PAD)


def build(key: str, seed: int = 0):
    """``(model, forward, loss_fn)`` for pipeline ``key``, with a freshly initialised tiny GPT."""
    p = PIPELINES[key]
    model = tiny_gpt(seed)
    if p.future:
        return model, (lambda ids, mask: noncausal_forward(model, ids)), p.loss_fn
    return model, (lambda ids, mask: model(ids)), p.loss_fn


def _honest_loss(forward, ids, mask) -> float:
    """Deployment-style next-token loss: position t sees only tokens 0..t (one call per prefix)."""
    with torch.no_grad():
        logits = torch.stack([forward(ids[:, :t + 1], mask[:, :t + 1])[:, -1]
                              for t in range(ids.shape[1])], 1)
    return causal_lm_loss(logits, _labels(ids, mask)).item()


@functools.lru_cache(maxsize=None)
def train_pipeline(key: str, steps: int = STEPS, lr: float = 1e-2, seed: int = 0):
    """Train pipeline ``key``: ``(model, losses, honest)`` where ``losses`` is what the pipeline
    reports at each step and ``honest`` is [(step, next-token loss on held-out documents)]."""
    with cpu_threads(1):
        return _train(PIPELINES[key], steps, lr, seed)


def _train(p, steps, lr, seed):
    model, forward, loss_fn = build(p.key, seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    held_out = padded_batch(documents(ROWS, seed=99))
    losses, honest = [], []
    for step in range(steps):
        if step % 10 == 0:
            honest.append((step, _honest_loss(forward, *held_out)))
        ids, mask = _batch(p.batch, step)
        loss = loss_fn(forward(ids, mask), ids, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    honest.append((steps, _honest_loss(forward, *held_out)))
    return model, tuple(losses), tuple(honest)


def loss_verdict(key: str) -> str:
    """Verdicts about a pipeline's training that read the same on any CPU."""
    _, losses, honest = train_pipeline(key)
    fell = "yes" if sum(losses[-5:]) / 5 < losses[0] - 0.25 else "no"
    floor = entropy_floor(documents(ROWS, seed=99))
    near = "yes" if honest[-1][1] < floor + 0.3 else "no"
    return (f"{key}: first loss {losses[0]:.2f} (ln V = {math.log(V):.2f}); loss fell: {fell}; "
            f"learned the next token (held-out loss within 0.3 of the floor {floor:.2f}): {near}")


@functools.lru_cache(maxsize=None)
def diagnose_pipeline(key: str, seed: int = 0):
    """``run_checks`` on a freshly initialised pipeline (checks belong before training)."""
    _, forward, loss_fn = build(key, seed)
    with cpu_threads(1):
        return run_checks(forward, loss_fn, vocab_size=V, seq_len=L,
                          pad_id=EOS if PIPELINES[key].batch == "eos_pad" else PAD)


# ------------------------------------------------------- measurements run_checks cannot make

def weights_by_row(key: str) -> list:
    """``[(valid targets, weight of each)]`` per row of a ragged batch, read from the gradient."""
    ids, mask = padded_batch([list(range(2, V)), [7, 9, 11, 13, 15], [11, 13, 14, 15]])
    w = token_weights(PIPELINES[key].loss_fn, ids, mask, V)
    return [(int(m.sum()) - 1, round(float(r[r > 0].mean()), 4)) for r, m in zip(w, mask)]


def measure_leak(key: str = "packed_causal") -> dict:
    """How far document B's logits move when document A (before it in the row) changes, with
    the trained weights under a plain causal mask and under the document mask."""
    model = train_pipeline(key)[0]
    b = [6, 8, 9, 11, 13, 15]
    rows = [pack_documents([a, b], L, eos_id=EOS, pad_id=PAD) for a in ([9, 11, 13, 15], [8, 10, 12, 14])]
    where = slice(5, 5 + len(b) + 1)                       # B and its EOS
    out = {}
    with torch.no_grad():
        plain = [model(r.input_ids)[:, where] for r in rows]
        docs = [model(r.input_ids, document_ids=r.document_ids, position_ids=r.position_ids)[:, where]
                for r in rows]
    out["plain causal mask"] = float((plain[0] - plain[1]).abs().max())
    out["document mask"] = float((docs[0] - docs[1]).abs().max())
    return out


def eos_targets(key: str) -> int:
    """How many EOS targets the pipeline's loss scores in one training batch of 16 documents."""
    p = PIPELINES[key]
    ids, mask = _batch(p.batch, 0)
    w = token_weights(p.loss_fn, ids, mask, V)[:, :-1]
    return int(((w > 0) & (ids[:, 1:] == EOS)).sum())


def p_stop(key: str) -> float:
    """The trained model's probability of EOS right after a finished count (... 13, 15)."""
    model = train_pipeline(key)[0]
    with torch.no_grad():
        return float(model(torch.tensor([[9, 11, 13, 15]]))[0, -1].softmax(-1)[EOS])
