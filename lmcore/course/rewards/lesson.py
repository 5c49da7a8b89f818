"""Notebook 10 (what the loss rewards): tiny worlds of facts, the runs trained on them, the
probes that score one answer, and the set-loss exercise checker. Data policy lives in
``data``, compute and exposure bias in ``compute``.

Each world is a :class:`lmcore.data.DocumentCorpus` of short word-level documents such as
``P3 lives_in C7 .`` (one token per word, :class:`lmcore.course.toys.WordTokenizer`: PAD 0,
EOS 1); a probe reads the model's distribution at the answer position, so every claim of the
notebook is a measurement on a model that :func:`lmcore.train.train` trained.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from ..._validate import require_int_scalar, require_tensor
from ...data import DocumentCorpus
from ...loss import causal_lm_loss
from ...shift import IGNORE_INDEX
from ..toys import WordTokenizer

__all__ = [
    "World",
    "city_world",
    "parent_world",
    "tiny_config",
    "train_tiny",
    "expected_epochs",
    "answer_log_probs",
    "answer_nll",
    "continuation_log_prob",
    "set_nll",
    "group_means",
]


@dataclass
class World:
    """A corpus of facts: ``truth`` maps each prompt to its correct answers, ``groups`` names
    the prompts of each kind, ``copies`` says how often each prompt's document occurs."""

    corpus: DocumentCorpus
    truth: dict
    groups: dict
    copies: dict = field(default_factory=dict)

    @property
    def tokenizer(self):
        return self.corpus.tokenizer


def _corpus(name, tok, train_texts, val_texts, seed) -> DocumentCorpus:
    random.Random(seed).shuffle(train_texts)
    corpus = DocumentCorpus(name, tok, [tok.encode(t) for t in train_texts + val_texts], val_fraction=0.5)
    corpus.train = corpus.documents[: len(train_texts)]
    corpus.val = corpus.documents[len(train_texts) :]
    return corpus


def city_world(
    *,
    n_common: int = 20,
    n_rare: int = 20,
    n_two_homes: int = 2,
    copies: int = 600,
    rare_copies: int = 1,
    n_cities: int = 10,
    seed: int = 0,
) -> World:
    """``P<i> lives_in C<j> .``: common people occur ``copies`` times, rare ones ``rare_copies``
    times (1: once; more is upsampling, the same world with the rare facts repeated), and each
    person with two homes ``copies`` times, half with each city (both answers are true)."""
    for name, v in (("n_common", n_common), ("n_rare", n_rare), ("n_two_homes", n_two_homes)):
        require_int_scalar(name, v, min=0)
    require_int_scalar("copies", copies, min=2)
    require_int_scalar("rare_copies", rare_copies, min=1)
    require_int_scalar("n_cities", n_cities, min=2)
    rng = random.Random(seed)
    cities = [f"C{j}" for j in range(n_cities)]
    common = [f"P{i}" for i in range(n_common)]
    rare = [f"P{i}" for i in range(n_common, n_common + n_rare)]
    two = [f"Q{i}" for i in range(n_two_homes)]
    tok = WordTokenizer(common + rare + two + cities + ["lives_in", "."])
    truth, docs, count = {}, [], {}
    for p in common + rare:
        truth[f"{p} lives_in"] = [rng.choice(cities)]
    for q in two:
        truth[f"{q} lives_in"] = rng.sample(cities, 2)
    for prompt, answers in truth.items():
        n = rare_copies if prompt.split()[0] in rare else copies
        count[prompt] = n
        docs += [f"{prompt} {answers[k % len(answers)]} ." for k in range(n)]
    groups = {
        "common": [f"{p} lives_in" for p in common],
        "rare": [f"{p} lives_in" for p in rare],
        "two homes": [f"{q} lives_in" for q in two],
    }
    val = [f"{p} {a[0]} ." for p, a in truth.items()]
    return World(_corpus("city world", tok, docs, val, seed), truth, groups, count)


def parent_world(*, n_pairs: int = 30, n_both: int = 15, copies: int = 20, seed: int = 0) -> World:
    """``A<i> parent B<i> .`` for every pair; ``B<i> child A<i> .`` too for the first
    ``n_both`` pairs only. The reverse of the other pairs is never in the training data."""
    require_int_scalar("n_pairs", n_pairs, min=2)
    require_int_scalar("n_both", n_both, min=1, max=n_pairs - 1)
    require_int_scalar("copies", copies, min=1)
    tok = WordTokenizer(
        [f"A{i}" for i in range(n_pairs)] + [f"B{i}" for i in range(n_pairs)] + ["parent", "child", "."]
    )
    forward = {f"A{i} parent": [f"B{i}"] for i in range(n_pairs)}
    reverse = {f"B{i} child": [f"A{i}"] for i in range(n_pairs)}
    seen = list(reverse)[:n_both]
    docs = [f"{p} {a[0]} ." for p, a in forward.items()] * copies
    docs += [f"{p} {reverse[p][0]} ." for p in seen] * copies
    groups = {
        "forward": list(forward),
        "reverse, trained": seen,
        "reverse, never trained": list(reverse)[n_both:],
    }
    return World(_corpus("parent world", tok, docs, docs[:n_pairs], seed), {**forward, **reverse}, groups)


def tiny_config(**overrides):
    """The notebook's runs: the ``tiny`` preset (a 2-layer, 32-wide GPT on rows of 32 tokens, 300
    steps, one CPU thread) with 16 rows per step; ``overrides`` go on top."""
    from ...train.presets import preset

    base = dict(corpus="synthetic", batch_size=16, lr=2e-2, min_lr=2e-3, eval_interval=1000, eval_batches=2)
    return preset("tiny", **{**base, **overrides})


def train_tiny(corpus, *, callback=None, **overrides):
    """:func:`lmcore.train.train` with :func:`tiny_config` (and ``callback(step, model)`` after
    each step, e.g. a :class:`~lmcore.course.rewards.recall.RecallTracker`); returns its ``TrainResult``."""
    from ...train import train

    cfg = tiny_config(**overrides)
    cfg.eval_interval = min(cfg.eval_interval, cfg.max_steps)
    return train(cfg, corpus, callback=callback)


def expected_epochs(corpus: DocumentCorpus, cfg) -> float:
    """How many times a run with ``cfg`` meets each training document, on average: rows are
    drawn uniformly from the packed training rows, ``batch_size`` per step."""
    rows = len(corpus.packed("train", cfg.block_size).input_ids)
    return cfg.max_steps * cfg.batch_size * cfg.grad_accum / rows


@torch.no_grad()
def answer_log_probs(model, tok, prompts) -> torch.Tensor:
    """(n, V) float64 log-probabilities of the token after each prompt (all of equal length)."""
    ids = torch.tensor([tok.encode(p) for p in prompts])
    was = model.training
    model.eval()
    out = torch.log_softmax(model(ids)[:, -1].double(), dim=-1)
    model.train(was)
    return out


def answer_nll(model, tok, prompts, answers) -> torch.Tensor:
    """(n,) the loss ``-ln q(answer | prompt)`` of one reference answer per prompt."""
    lp = answer_log_probs(model, tok, prompts)
    return -lp[torch.arange(len(prompts)), torch.tensor([tok.stoi[a] for a in answers])]


@torch.no_grad()
def continuation_log_prob(model, tok, prompt: str, continuation: str) -> float:
    """``ln q(continuation | prompt)``: the log-probability of a whole continuation, each of its
    tokens given the prompt and the tokens before it (the chain rule), in one forward pass.

    It is minus the summed causal-LM loss of ``prompt + continuation`` with the prompt's targets
    ignored, so the shift is :func:`lmcore.causal_lm_loss`'s.
    """
    for name, text in (("prompt", prompt), ("continuation", continuation)):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str; got {type(text).__name__}.")
        if not text.split():
            raise ValueError(f"{name} must hold at least one word; got {text!r}.")
    prompt_ids = tok.encode(prompt)
    ids = torch.tensor([prompt_ids + tok.encode(continuation)])
    labels = ids.clone()
    labels[:, : len(prompt_ids)] = (
        IGNORE_INDEX  # position 0 is never a target; the prompt's others are not scored
    )
    was = model.training
    model.eval()
    nll = causal_lm_loss(model(ids).double(), labels, reduction="sum")
    model.train(was)
    return -float(nll)


def set_nll(logits, acceptable) -> float:
    """``-ln sum_{y in acceptable} softmax(logits)_y``: the loss if any listed answer counts.

    ``logits`` (V,); ``acceptable`` a non-empty list of distinct token ids. With one id it is
    the ordinary cross-entropy of that target.
    """
    z = require_tensor("logits", logits, 1, "(V,)").double()
    ids = list(acceptable)
    if (
        not ids
        or len(set(ids)) != len(ids)
        or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(z) for i in ids)
    ):
        raise ValueError(
            f"acceptable must be a non-empty list of distinct token ids in [0, {len(z)}); got {acceptable!r}."
        )
    return float(torch.logsumexp(z, 0) - torch.logsumexp(z[ids], 0))


def group_means(nll: dict) -> dict:
    """``{group: (targets, mean)}`` and ``"all"``: the token-weighted mean over every target."""
    out = {g: (len(v), sum(v) / len(v)) for g, v in nll.items() if len(v)}
    total = sum(n for n, _ in out.values())
    out["all"] = (total, sum(n * m for n, m in out.values()) / total)
    return out
