"""Notebook 04 (the initial-loss anchor): the ln V table, the first loss of a fresh GPT measured
against ln V + sigma^2/2 (sigma: the spread of the logits), a standard gain-1 init and what
lmcore's small final-LayerNorm gain changes, the widget's figure, a training run with a label
leak, and the exercise checkers. The widget's figure is in :mod:`lmcore.course.anchor.views`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..._validate import require_float, require_int_scalar, require_tensor
from ...loss import causal_lm_loss
from ...perplexity import nats_to_bits
from ...train.devices import cpu_threads
from ..checks import Case, check
from ..toys import toy_gpt
from .diagnoses import explain_first_loss
from .leak import get_batch_leaky, get_batch_reference, pipeline_run
from .spread import check_first_loss_at_spread

__all__ = [
    "WELL_KNOWN_VOCABS",
    "anchor_table",
    "first_loss",
    "iid_logit_loss",
    "predict_first_loss",
    "logit_sigma",
    "expected_first_loss",
    "predict_from_logits",
    "head_first_loss",
    "mean_exp_normal",
    "get_batch_leaky",
    "get_batch_reference",
    "pipeline_run",
    "check_first_loss_at_spread",
    "check_predict_from_logits",
]

WELL_KNOWN_VOCABS = {
    "toy vocabulary": 5,
    "T5 SentencePiece": 32_000,
    "GPT-2 / GPT-3": 50_257,
    "Llama 3 (released weights)": 128_256,
}


def anchor_table(vocabs: dict | None = None) -> list[dict]:
    """For each vocabulary: V, ln V in nats and log2 V in bits (the loss of a uniform guess)."""
    vocabs = WELL_KNOWN_VOCABS if vocabs is None else vocabs
    return [
        {"name": name, "V": V, "nats": math.log(V), "bits": nats_to_bits(math.log(V))}
        for name, V in vocabs.items()
    ]


def predict_first_loss(vocab_size: int, sigma: float) -> float:
    """Reference: i.i.d. N(0, sigma^2) logits over a large V give a loss of ln V + sigma^2/2."""
    return math.log(vocab_size) + sigma**2 / 2


def _rows(logits) -> torch.Tensor:
    logits = require_tensor("logits", logits)
    require_float("logits", logits)
    if logits.ndim < 1 or logits.shape[-1] < 2:
        raise ValueError(
            f"logits must end in a vocabulary dimension V >= 2; got shape {tuple(logits.shape)}."
        )
    return logits.detach().double().reshape(-1, logits.shape[-1])  # (positions, V)


def logit_sigma(logits) -> float:
    """The spread softmax sees: sqrt of the variance over V of each position's logits, averaged
    over positions. Each row is centred on its own mean (a constant added to a row changes
    nothing), so an offset per position does not count as spread."""
    return float(_rows(logits).var(dim=-1, unbiased=False).mean().sqrt())


def expected_first_loss(logits) -> float:
    """The loss of these logits averaged over every possible target, ``logsumexp(z) - mean(z)``
    per position, then over positions: the expected loss on uniformly random tokens, without the
    noise of drawing the targets."""
    z = _rows(logits)
    return float((torch.logsumexp(z, dim=-1) - z.mean(dim=-1)).mean())


def predict_from_logits(logits) -> float:
    """Reference of Exercise 2: ln V + sigma^2/2, with V the last dimension and sigma
    :func:`logit_sigma`."""
    z = _rows(logits)
    return predict_first_loss(z.shape[-1], logit_sigma(z))


@torch.no_grad()
def first_loss(
    vocab_size: int,
    *,
    init_std: float = 0.02,
    n_embd: int = 16,
    n_layer: int = 1,
    batch: int = 8,
    length: int = 32,
    data_vocab_size: int | None = None,
    final_gain: float | None = None,
    tied: bool = True,
    return_logits: bool = False,
    seed: int = 0,
) -> dict:
    """The loss of a freshly initialised GPT on uniformly random tokens, before any step.

    Small width and few tokens keep V = 128,256 affordable. ``data_vocab_size`` < V draws the
    tokens from [0, data_vocab_size) only (a model built with the wrong vocabulary).
    ``final_gain`` overrides lmcore's final-LayerNorm gain ``min(1, 4/sqrt(D))`` (1.0 is the
    standard GPT-2 init); ``tied=False`` gives the model its own output matrix, drawn like the
    other weights. Returns the sampled ``loss``, the ``expected`` loss over every target, ln V,
    the logits' spread ``sigma``, the prediction ln V + sigma^2/2, the final LayerNorm's
    ``gain``, and with ``return_logits`` the ``logits`` (N, L, V) themselves.
    """
    require_int_scalar("vocab_size", vocab_size, min=2)
    model = toy_gpt(
        vocab_size,
        block_size=length,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=max(1, n_embd // 64) if n_embd % 64 == 0 else 2,
        init_std=init_std,
        seed=seed,
    )
    if final_gain is not None:
        torch.nn.init.constant_(model.ln_f.weight, float(final_gain))
    if not tied:
        model.lm_head = torch.nn.Linear(n_embd, vocab_size, bias=False)
        torch.nn.init.normal_(model.lm_head.weight, mean=0.0, std=init_std)
    n_types = vocab_size if data_vocab_size is None else min(data_vocab_size, vocab_size)
    ids = torch.randint(n_types, (batch, length), generator=torch.Generator().manual_seed(seed))
    with cpu_threads(1):
        logits = model(ids)  # (N, L, V)
    sigma = logit_sigma(logits)
    out = {
        "V": vocab_size,
        "init_std": init_std,
        "loss": float(causal_lm_loss(logits, ids)),
        "expected": expected_first_loss(logits),
        "ln_v": math.log(vocab_size),
        "sigma": sigma,
        "predicted": predict_first_loss(vocab_size, sigma),
        "gain": float(model.ln_f.weight[0]),
    }
    return {**out, "logits": logits} if return_logits else out


@torch.no_grad()
def head_first_loss(
    n_embd: int, vocab_size: int, *, init_std: float = 0.02, gain: float = 1.0, rows: int = 64, seed: int = 0
) -> dict:
    """Only the last two layers of a fresh model: ``rows`` hidden states through a LayerNorm
    with gain ``gain`` (each row: mean 0, mean square gain^2, whatever came before), then an
    output matrix (V, D) drawn from N(0, init_std^2). Each logit is then N(0, sigma^2) with
    sigma = gain * init_std * sqrt(D) exactly. Returns that ``sigma_formula``, the measured
    ``sigma``, the ``expected`` loss over every target and the prediction."""
    g = torch.Generator().manual_seed(seed)
    h = gain * F.layer_norm(torch.randn(rows, n_embd, generator=g), (n_embd,))  # (rows, D)
    W = torch.randn(vocab_size, n_embd, generator=g) * init_std  # (V, D)
    with cpu_threads(1):
        logits = h @ W.T  # (rows, V)
    sigma = logit_sigma(logits)
    return {
        "D": n_embd,
        "V": vocab_size,
        "gain": gain,
        "ln_v": math.log(vocab_size),
        "sigma_formula": gain * init_std * math.sqrt(n_embd),
        "sigma": sigma,
        "expected": expected_first_loss(logits),
        "predicted": predict_first_loss(vocab_size, sigma),
    }


def mean_exp_normal(sigma: float, n: int = 1_000_000, seed: int = 0) -> float:
    """Monte Carlo estimate of E[e^z] for z ~ N(0, sigma^2) (exactly e^(sigma^2/2))."""
    z = torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return float((z * sigma).exp().mean())


def iid_logit_loss(vocab_size: int, sigma: float, *, rows: int = 16, seed: int = 0) -> float:
    """Loss of i.i.d. N(0, sigma^2) logits (rows, V), averaged over rows and over every possible
    target (``logsumexp(z) - mean(z)``, so no noise from picking targets)."""
    g = torch.Generator().manual_seed(seed)
    return expected_first_loss(torch.randn(rows, vocab_size, generator=g, dtype=torch.float64) * sigma)


def _logit_cases() -> list[Case]:
    g = torch.Generator().manual_seed(11)
    cases = []
    for (N, L, V), s in (
        ((2, 3, 1000), 0.1),
        ((1, 5, 4000), 0.5),
        ((3, 2, 32_000), 1.5),
        ((2, 4, 2000), 1.0),
    ):
        z = torch.randn(N, L, V, generator=g) * s
        cases.append(Case((z,), label=f"logits (N, L, V) = {(N, L, V)}, spread {s}"))
        offset = z + 3.0 * torch.randn(N, L, 1, generator=g)  # a constant per position
        cases.append(
            Case(
                (offset,),
                label=f"logits (N, L, V) = {(N, L, V)}, spread {s}, "
                f"plus a different constant at each position",
            )
        )
    # positions of different spreads: the law averages sigma^2, not sigma (then squared)
    spreads = torch.linspace(0.2, 1.6, 6).reshape(1, 6, 1)
    z = torch.randn(2, 6, 4000, generator=g) * spreads
    cases.append(Case((z,), label="logits (N, L, V) = (2, 6, 4000), a spread from 0.2 to 1.6 by position"))
    return cases


def check_predict_from_logits(fn, quiet: bool = False) -> bool:
    """Grade ``fn(logits (N, L, V)) -> predicted first loss (nats)``."""
    return check(
        "first_loss_from_logits",
        fn,
        predict_from_logits,
        _logit_cases(),
        forbid={
            f"lmcore.course.anchor.lesson.{name}": "that is the course's reference: write it yourself"
            for name in ("predict_from_logits", "logit_sigma", "expected_first_loss", "predict_first_loss")
        },
        quiet=quiet,
        # the law is an approximation: 0.002 around it, plus its own error on the case (its distance
        # from the exact mean loss of those logits), so the exact mean loss passes too
        atol=lambda z: 2e-3 + abs(predict_from_logits(z) - expected_first_loss(z)),
        rtol=0,
        explain=explain_first_loss,
        hint=(
            "Your prediction is off the mean loss these logits get on random targets: what is the "
            "loss of one target y, which parts of it depend on y, and what do they average to over "
            "a uniformly random y? Does a constant added to one position's logits change it?",
            "V is the LAST dimension. The loss of a target y is logsumexp(z) - z_y, and a uniformly "
            "random y averages z_y to the position's mean logit: the exact prediction is the mean "
            "over positions of logsumexp(z) - mean(z). Section 3's law approximates it by ln V "
            "(natural log) + sigma^2/2, with sigma the spread of each position's logits around "
            "that position's own mean.",
        ),
    )
