"""Notebook 04 (the initial-loss anchor): the ln V table, the first loss of a fresh
:class:`lmcore.model.GPT`, how the logit scale moves it (ln V + sigma^2/2), the widget's
figure, a training run with a label leak, and the exercise checkers.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..loss import causal_lm_loss
from ..model import GPT, GPTConfig
from ..perplexity import nats_to_bits
from .checks import Case, check
from ..presets import cpu_threads
from .style import COLORS, new_figure

__all__ = ["SEED_VOCABS", "anchor_table", "first_loss", "iid_logit_loss", "predict_first_loss",
           "plot_first_loss", "get_batch_leaky", "get_batch_reference", "pipeline_run",
           "check_predict_first_loss", "check_get_batch"]

SEED_VOCABS = {"toy vocabulary": 5, "T5 SentencePiece": 32_000, "GPT-2 / GPT-3": 50_257,
               "Llama 3 (released weights)": 128_256}


def anchor_table(vocabs: dict | None = None) -> list[dict]:
    """For each vocabulary: V, ln V in nats and log2 V in bits (the loss of a uniform guess)."""
    vocabs = SEED_VOCABS if vocabs is None else vocabs
    return [{"name": name, "V": V, "nats": math.log(V), "bits": nats_to_bits(math.log(V))}
            for name, V in vocabs.items()]


def predict_first_loss(vocab_size: int, sigma: float) -> float:
    """Reference: i.i.d. N(0, sigma^2) logits over a large V give a loss of ln V + sigma^2/2."""
    return math.log(vocab_size) + sigma ** 2 / 2


@torch.no_grad()
def first_loss(vocab_size: int, *, init_std: float = 0.02, n_embd: int = 16, n_layer: int = 1,
               batch: int = 8, length: int = 32, data_vocab_size: int | None = None,
               seed: int = 0) -> dict:
    """The loss of a freshly initialised GPT on uniformly random tokens, before any step.

    Small width and few tokens keep V = 128,256 affordable. ``data_vocab_size`` < V draws the
    tokens from [0, data_vocab_size) only (a model built with the wrong vocabulary). Returns the
    loss, ln V, the std sigma of the logits, and the prediction ln V + sigma^2/2.
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an int >= 2; got {vocab_size!r}.")
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=length, n_layer=n_layer, n_head=2,
                          n_embd=n_embd, init_std=init_std))
    n_types = vocab_size if data_vocab_size is None else min(data_vocab_size, vocab_size)
    ids = torch.randint(n_types, (batch, length), generator=torch.Generator().manual_seed(seed))
    with cpu_threads(1):
        logits = model(ids)                                                 # (N, L, V)
    sigma = float(logits.double().std())
    return {"V": vocab_size, "init_std": init_std, "loss": float(causal_lm_loss(logits, ids)),
            "ln_v": math.log(vocab_size), "sigma": sigma,
            "predicted": predict_first_loss(vocab_size, sigma)}


def iid_logit_loss(vocab_size: int, sigma: float, *, rows: int = 16, seed: int = 0) -> float:
    """Loss of i.i.d. N(0, sigma^2) logits (rows, V), averaged over rows and over every possible
    target (``logsumexp(z) - mean(z)``, so no noise from picking targets)."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, vocab_size, generator=g, dtype=torch.float64) * sigma
    return float((torch.logsumexp(z, dim=-1) - z.mean(dim=-1)).mean())


def plot_first_loss(vocab_size: int = 50_257, init_std: float = 0.02, *, n_embd: int = 16):
    """Left: ln V against V with a fresh GPT's first loss marked. Right: loss against the logit
    std sigma at that V: the ln V + sigma^2/2 prediction, i.i.d. logits, and the GPT."""
    m = first_loss(vocab_size, init_std=init_std, n_embd=n_embd)
    fig, (ax1, ax2) = new_figure(1, 2, width=10.5, height=3.8)
    vs = torch.logspace(0.3, 5.4, 60, dtype=torch.float64)
    ax1.plot(vs, vs.log(), color=COLORS["anchor"], label="ln V (uniform guess)")
    ax1.plot(vs, vs.log() + m["sigma"] ** 2 / 2, "--", color=COLORS["target"],
             label=f"ln V + σ²/2 (σ = {m['sigma']:.2f})")
    seed_v = list(SEED_VOCABS.values())
    ax1.plot(seed_v, [math.log(v) for v in seed_v], "|", color=COLORS["anchor"], ms=12,
             label="V = 5, 32,000, 50,257, 128,256")
    ax1.plot([vocab_size], [m["loss"]], "o", color=COLORS["wrong"], ms=8,
             label=f"fresh GPT: {m['loss']:.2f} nats")
    ax1.set_xscale("log")
    ax1.set(xlabel="vocabulary size V (log scale)", ylabel="first loss (nats)",
            title=f"V = {vocab_size:,}: ln V = {m['ln_v']:.2f}")
    ax1.legend(loc="upper left", fontsize=8)
    sig = torch.linspace(0, max(3.0, 1.2 * m["sigma"]), 40, dtype=torch.float64)
    ax2.plot(sig, math.log(vocab_size) + sig ** 2 / 2, "--", color=COLORS["target"],
             label="ln V + σ²/2")
    pts = [0.5 * k for k in range(int(2 * float(sig[-1])) + 1)]
    ax2.plot(pts, [iid_logit_loss(vocab_size, s, rows=4) for s in pts], "s",
             color=COLORS["input"], label="i.i.d. normal logits")
    ax2.plot([m["sigma"]], [m["loss"]], "o", color=COLORS["wrong"], ms=8, label="fresh GPT")
    ax2.axhline(math.log(vocab_size), color=COLORS["anchor"], lw=1, label="ln V")
    ax2.set(xlabel="std σ of the logits", ylabel="loss (nats)",
            title=f"init_std = {init_std:g}: σ = {m['sigma']:.2f}")
    ax2.legend(loc="upper left", fontsize=8)
    import matplotlib.pyplot as plt

    plt.close(fig)      # shown once: the notebook displays the returned Figure
    return fig


def get_batch_leaky(data: torch.Tensor, starts, block_size: int):
    """The provided pipeline: inputs and targets (N, block_size) cut from a 1-D token stream."""
    chunks = torch.stack([data[s: s + block_size + 1] for s in starts])    # (N, block_size + 1)
    x = chunks[:, :-1]
    y = chunks[:, :block_size]
    return x, y


def get_batch_reference(data: torch.Tensor, starts, block_size: int):
    """Reference fix: the target of input position t is the token at t+1."""
    chunks = torch.stack([data[s: s + block_size + 1] for s in starts])
    return chunks[:, :-1], chunks[:, 1:]


def pipeline_run(get_batch, *, vocab_size: int = 65, steps: int = 20, block_size: int = 32,
                 batch: int = 16, seed: int = 0) -> list[float]:
    """Train a fresh GPT on a random token stream with ``get_batch`` and nanoGPT's loss
    ``F.cross_entropy(logits, y)`` (targets arrive pre-shifted). Returns the loss per step;
    losses[0] is the first loss. Random tokens: an honest pipeline cannot go below ln V."""
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(vocab_size, (20_000,), generator=g)
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=1, n_head=2,
                          n_embd=32))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    losses = []
    with cpu_threads(1):
        for _ in range(steps):
            starts = torch.randint(len(data) - block_size - 1, (batch,), generator=g).tolist()
            x, y = get_batch(data, starts, block_size)
            loss = F.cross_entropy(model(x).reshape(-1, vocab_size), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    return losses


def check_predict_first_loss(fn, quiet: bool = False) -> bool:
    """Grade ``fn(vocab_size, sigma) -> float`` (nats) on the seed's vocabularies and more."""
    cases = [Case((V, s), label=f"V = {V:,}, sigma = {s}")
             for V in (5, 32_000, 50_257, 128_256, 1_000_003) for s in (0.0, 0.3, 1.0, 1.7)]
    return check("predict_first_loss", fn, predict_first_loss, cases, quiet=quiet, atol=1e-4,
                 hint="uniform guessing costs ln V nats (natural log, not log2); each logit's "
                      "spread adds sigma^2/2 on top.")


def check_get_batch(fn, quiet: bool = False) -> bool:
    """Grade ``fn(data (T,), starts, block_size) -> (x, y)``, each (N, block_size)."""
    g = torch.Generator().manual_seed(5)
    cases = []
    for T, n, B in ((40, 3, 4), (100, 5, 9), (64, 2, 16), (25, 4, 1)):
        data = torch.randint(50, (T,), generator=g)
        starts = torch.randint(T - B - 1, (n,), generator=g).tolist()
        cases.append(Case((data, starts, B), label=f"stream of {T} tokens, starts {starts}, "
                                                  f"block_size {B}"))
    return check("get_batch", fn, get_batch_reference, cases, quiet=quiet, atol=0, rtol=0,
                 hint="y must be x moved one token to the left: target t is the token at t+1, "
                      "which x[:, t] has not seen.")
