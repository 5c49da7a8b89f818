"""Notebook 08 (the training run): AdamW by hand, the phases of a loss curve, the sampling
widget's state (:func:`sampling_state`), what a sample and a top-p filter must satisfy on any
run, and the top-p checker (the learning-rate exercise: :mod:`.exercises`). Plots and the
sampling widget: :mod:`lmcore.course.training.views`; exposure bias:
:mod:`lmcore.course.training.exposure`.
"""

from __future__ import annotations

import math
import re

import numpy as np
import torch

from ...sample import filter_logits, generate, next_token_distribution
from ..checks import Case, check

__all__ = [
    "preset_for",
    "adamw_by_hand",
    "read_phases",
    "show_char",
    "context_limit",
    "sampling_state",
    "top_p_properties",
    "word_share",
    "top_p_reference",
    "check_top_p",
]


def preset_for(device) -> str:
    """The preset the notebook trains with: ``"gpu"`` on CUDA, ``"cpu"`` anywhere else."""
    return "gpu" if torch.device(device).type == "cuda" else "cpu"


@torch.no_grad()
def adamw_by_hand(p, grad, *, lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.0, m=None, v=None, step=1):
    """One AdamW update written out: ``(new_p, m, v)``. ``m`` (momentum) and ``v`` (squared-
    gradient average) start at 0, ``step`` at 1. The step is ``lr * m_hat / (sqrt(v_hat) + eps)``;
    the decay ``lr * weight_decay * p`` acts on the weight directly (decoupled)."""
    b1, b2 = betas
    m = (torch.zeros_like(p) if m is None else m) * b1 + (1 - b1) * grad
    v = (torch.zeros_like(p) if v is None else v) * b2 + (1 - b2) * grad * grad
    m_hat, v_hat = m / (1 - b1**step), v / (1 - b2**step)
    new_p = p * (1 - lr * weight_decay) - lr * m_hat / (v_hat.sqrt() + eps)
    return new_p, m, v


def read_phases(
    history, dense, *, gap_closed: float = 0.9, last_share: float = 0.1, key: str = "val_loss"
) -> dict:
    """The three phases of a run, read from its measurements rather than from its step count.

    - phase 1 ends at the first record of ``dense`` (:func:`lmcore.course.training.dynamics.first_steps`'s
      records: ``step``, ``loss``, ``frequency_gap``) whose frequency gap has closed by
      ``gap_closed`` of its value at step 0: the model's mean forecast is nearly the frequencies;
    - phase 3 (the flattening) starts at the first record of ``history`` whose ``key`` is within
      ``last_share`` of the whole drop from the final loss: what is left to gain is small;
    - phase 2 is what lies between.

    Returns ``steps`` [0, end of 1, start of 3, last], ``loss`` there, each phase's ``drops`` and
    ``shares`` of the whole drop, and ``step_shares`` (each phase's share of the run's steps).
    """
    _require_records("history", history, ("step", key))
    _require_records("dense", dense, ("step", "loss", "frequency_gap"))
    if len(history) < 2 or not dense:
        raise ValueError(f"history needs 2+ records and dense 1+; got {len(history)} and {len(dense or [])}.")
    for name, x in (("gap_closed", gap_closed), ("last_share", last_share)):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x < 1:
            raise ValueError(f"{name} must be a number in (0, 1); got {x!r}.")
    start, final, last = float(history[0][key]), float(history[-1][key]), int(history[-1]["step"])
    total = start - final
    gap0 = float(dense[0]["frequency_gap"])
    end1 = next((r for r in dense if r["frequency_gap"] <= (1 - gap_closed) * gap0), dense[-1])
    start3 = next(r for r in history if float(r[key]) - final <= last_share * total)
    if start3["step"] < end1["step"]:  # the loss was already near its end when phase 1 ended
        start3 = {"step": end1["step"], key: end1["loss"]}
    steps = [0, int(end1["step"]), int(start3["step"]), last]
    loss = [start, float(end1["loss"]), float(start3[key]), final]
    drops = [loss[i] - loss[i + 1] for i in range(3)]
    return {
        "steps": steps,
        "loss": loss,
        "drops": drops,
        "shares": [d / total if total else float("nan") for d in drops],
        "step_shares": [(steps[i + 1] - steps[i]) / last for i in range(3)],
        "total_drop": total,
    }


def _require_records(name: str, records, keys) -> None:
    """A list of dicts, each with ``keys`` holding finite numbers (a TypeError/ValueError names them)."""
    if not isinstance(records, (list, tuple)) or not all(isinstance(r, dict) for r in records):
        raise TypeError(f"{name} must be a list of records (dicts); got {type(records).__name__}.")
    for i, r in enumerate(records):
        for k in keys:
            v = r.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name}[{i}][{k!r}] must be a finite number; got {v!r}.")


def show_char(c: str) -> str:
    """A printable label for one character: newline as ⏎, space as ␣, tab as ⇥."""
    return {"\n": "⏎", " ": "␣", "\t": "⇥"}.get(c, c)


def context_limit(model) -> int:
    """``block_size - 1``: the longest context whose every position was trained. lmcore trains
    on windows of ``block_size`` tokens and shifts the labels inside the window, so a window has
    targets at its first ``block_size - 1`` positions only: the last position's prediction, and
    its position embedding, never get a gradient. :func:`lmcore.sample.generate` reads at most
    this many tokens back (a sliding window), so it caps the context, not a sample's length."""
    return model.config.block_size - 1


@torch.no_grad()
def sampling_state(
    model,
    tokenizer,
    prompt: str,
    *,
    temperature: float = 1.0,
    top_k=None,
    top_p=None,
    n_new: int = 120,
    seed: int = 0,
) -> dict:
    """What the sampling widget shows: the next-token distribution after ``prompt`` before and
    after the settings (``raw``: softmax(logits / T); ``probs``: after top-k / top-p), and a
    sample of up to ``n_new`` tokens drawn with them from ``seed``. top_k 0 and top_p 1 mean off.

    The distribution reads the prompt's last :func:`context_limit` tokens (the positions
    training scores); the sample is ``n_new`` tokens long, whatever the context (``generate``
    slides its window)."""
    if not isinstance(prompt, str) or not prompt:
        raise ValueError(f"prompt must be a non-empty str; got {prompt!r}.")
    top_k = top_k or None
    top_p = None if top_p is None or top_p >= 1 else top_p
    ids = torch.tensor(tokenizer.encode(prompt), device=next(model.parameters()).device)
    ids = ids[-context_limit(model) :]
    if isinstance(n_new, bool) or not isinstance(n_new, int) or n_new < 0:
        raise ValueError(f"n_new must be an int >= 0; got {n_new!r}.")
    logits = model(ids[None])[0, -1].float().cpu()  # (V,)
    raw = next_token_distribution(logits, max(temperature, 1e-6))
    probs = next_token_distribution(logits, temperature, top_k, top_p)
    out = generate(
        model,
        ids,
        n_new,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        generator=torch.Generator().manual_seed(seed),
    )
    return {
        "raw": raw.double().numpy(),
        "probs": probs.double().numpy(),
        "kept": int((probs > 0).sum()),
        "sample": tokenizer.decode(out[len(ids) :]),
    }


def top_p_properties(raw, kept, p: float) -> dict:
    """What a top-p filter must satisfy, whatever the model: ``raw`` the distribution before the
    filter, ``kept`` after it (both (V,)). ``most_likely``: the kept tokens are the k most likely
    ones; ``reaches_p``: their raw mass is at least p; ``smallest``: without the least likely
    kept token the mass falls below p; ``renormalised``: the kept probabilities sum to 1 and
    keep their ratios."""
    raw, kept = np.asarray(raw, dtype=np.float64), np.asarray(kept, dtype=np.float64)
    mask = kept > 0
    k = int(mask.sum())
    order = np.argsort(-raw, kind="stable")
    mass = float(raw[mask].sum())
    return {
        "kept": k,
        "most_likely": bool(k > 0 and raw[mask].min() >= raw[order[k - 1]]),
        "reaches_p": mass >= p - 1e-9,
        "smallest": k > 0 and mass - raw[mask].min() < p,
        "renormalised": bool(abs(kept.sum() - 1) < 1e-6 and np.allclose(kept[mask], raw[mask] / mass)),
    }


def word_share(text: str, vocabulary) -> float:
    """The share of the words in ``text`` (runs of 2+ letters) that occur in ``vocabulary`` (a
    set of words, e.g. ``set(re.findall("[A-Za-z]{2,}", training_text))``); NaN for no words."""
    words = re.findall(r"[A-Za-z]{2,}", text)
    return sum(w in vocabulary for w in words) / len(words) if words else float("nan")


# ---------------------------------------------------------------- exercise checkers


def top_p_reference(probs: torch.Tensor, p: float) -> torch.Tensor:
    """Top-p through ``lmcore.sample.filter_logits``: keep the most likely tokens until their
    mass reaches ``p`` (the token that crosses p stays), zero the rest, renormalise."""
    return torch.softmax(filter_logits(probs.double().log(), top_p=p), dim=-1)


def _top_p_cases(seed: int = 8) -> list[Case]:
    t = lambda *v: torch.tensor(v, dtype=torch.float64)
    cases = [
        Case((t(0.5, 0.3, 0.15, 0.05), 0.7), label="probs [0.5, 0.3, 0.15, 0.05], p = 0.7"),
        Case((t(0.1, 0.6, 0.3), 0.65), label="probs [0.1, 0.6, 0.3] (unsorted), p = 0.65"),
        Case((t(0.2, 0.7, 0.1), 0.5), label="probs [0.2, 0.7, 0.1], p = 0.5 (top token alone)"),
        Case((t(0.25, 0.25, 0.25, 0.25), 1.0), label="uniform, p = 1.0 (keep all)"),
    ]
    cases.append(Case((t(0.4, 0.3, 0.3), 0.5), label="probs [0.4, 0.3, 0.3], p = 0.5 (a tie at the edge)"))
    exact = "probs [0.5, 0.375, 0.125], p = 0.5 (the top token alone reaches p exactly)"
    cases.append(Case((t(0.5, 0.375, 0.125), 0.5), label=exact))  # binary fractions: every sum exact
    g = torch.Generator().manual_seed(seed)
    for V in (5, 12, 50, 103):
        for p in (0.3, 0.9) + ((0.97,) if V >= 50 else ()):  # 0.97: a filter that skips large p fails
            w = torch.rand(V, generator=g, dtype=torch.float64) ** 3  # skewed, no ties
            cases.append(Case((w / w.sum(), p), label=f"a random distribution over {V} tokens, p = {p}"))
    return cases


def _top_p_free(args, expected, got):
    """Any smallest set is right where tied tokens sit at its edge: a result that meets every
    property of :func:`top_p_properties` reads as the reference (which tied token stays is the
    learner's)."""
    probs, p = args
    try:
        g = torch.as_tensor(got).detach().double()
    except (TypeError, ValueError, RuntimeError):
        return got
    if g.shape != probs.shape or not bool(torch.isfinite(g).all()) or bool((g < 0).any()):
        return got
    props = top_p_properties(probs.double().numpy(), g.numpy(), p)
    right = all(props[k] for k in ("most_likely", "reaches_p", "smallest", "renormalised"))
    return expected if right else got


def _explain_top_p(fn, case, expected, got) -> str:
    """The property a wrong top-p filter broke on the failing case, as a question (never the
    rule): its values in sorted order, a sum other than 1, a token kept over a likelier one, too
    few tokens to reach p, or more than the smallest set; ``""`` when none fits."""
    probs, p = case.args
    raw, want = probs.double(), torch.as_tensor(expected).double()
    got = torch.as_tensor(got).detach().double()
    if got.shape != want.shape or not bool(torch.isfinite(got).all()):
        return ""
    if not torch.equal(want, want.sort(descending=True).values) and torch.allclose(
        got, want.sort(descending=True).values, rtol=1e-5, atol=1e-9
    ):
        return "your values are right but sorted by size: which token does each position of your result stand for?"
    kept, wanted = got > 0, want > 0
    if torch.equal(kept, wanted) and abs(float(got.sum()) - 1) > 1e-6:
        return f"you kept the right tokens, and they add up to {float(got.sum()):.3f}: what must a distribution you draw from add up to?"
    if bool(kept.any()) and bool((~kept).any()) and float(raw[kept].min()) < float(raw[~kept].max()):
        return "you kept a token less likely than one you dropped: in which order does top-p take tokens?"
    mass = float(raw[kept].sum())
    if bool(kept.any()) and mass < p - 1e-12:
        return (
            f"the tokens you kept hold {mass:.3f} of the probability, less than p = {p:g}: which token "
            "takes the sum across p, and is it in or out?"
        )
    if int(kept.sum()) > 1 and mass - float(raw[kept].min()) >= p:
        return (
            f"without the least likely token you kept, the others still hold {mass - float(raw[kept].min()):.3f}, "
            f"at least p = {p:g}: is yours the smallest set that reaches p?"
        )
    return ""


def check_top_p(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(probs (V,), p) -> filtered, renormalised probs (V,)`` against lmcore.sample."""
    return check(
        "top-p filter",
        fn,
        top_p_reference,
        _top_p_cases(),
        hint=(
            "Which tokens survive: those whose cumulative mass is below p, or also the one that "
            "crosses it? Are the kept probabilities renormalised, in their original order?",
            "sort descending; keep a token if the mass *before* it is < p (so the token "
            "that crosses p stays); zero the others, in the original order; divide by "
            "the kept mass.",
        ),
        explain=_explain_top_p,  # each mistake's own question, in place of the nudge
        free=_top_p_free,  # at a tie on the edge, either tied token may stay
        atol=1e-9,  # a token the filter drops must get 0, not a small probability
        rtol=1e-5,  # the kept ones: a filter computed in float32 is right
        quiet=quiet,
        forbid={
            "lmcore.sample.filter_logits": "that is lmcore's filter, the one the exercise rebuilds: write it yourself",
            "lmcore.sample.next_token_distribution": "that is lmcore's sampling distribution, which runs "
            "lmcore's filter: write it yourself",
            "lmcore.sample._filter": "that is lmcore's filter, the one the exercise rebuilds: write it yourself",
            "lmcore.course.training.lesson.top_p_reference": "that is the check's reference: write it yourself",
        },
    )
