"""What a wrong answer to notebook 04's Exercise 2 (the first loss from the logits) did, as a question.

One nudge cannot fit every mistake: logsumexp without the target's logit, the largest logit taken
for the target's, a prediction of ln V alone, a log in base 2, a spread that is
not squared or not halved, V read from the wrong dimension, a spread measured across positions,
over the whole tensor or around 0, or summed over positions each break a different property. The
explanation rebuilds each of them in float64 on the case that failed and asks about the one the
learner's number matches, without giving the rule; ``""`` when none matches (the checker then
shows its nudge).
"""

from __future__ import annotations

import math

import torch

from ..checks import near_mistake, only_match

__all__ = ["explain_first_loss"]


def _row_var(z: torch.Tensor) -> float:
    return float(z.var(dim=-1, unbiased=False).mean())


def _mistakes(z: torch.Tensor) -> list[tuple[float, str]]:
    """(the value a mistake gives on logits ``z`` (N, L, V), the question to ask about it); the
    spread measured over the whole tensor or around 0 last (both count a constant per position)."""
    V, var = z.shape[-1], _row_var(z)
    counted = (
        "these logits carry a different constant at each position, and your prediction counts it "
        "as spread: does adding one constant to every logit of a position change what softmax "
        "gives, or the loss?"
    )
    lse = torch.logsumexp(z, dim=-1)
    return [
        (
            float(lse.mean()),
            "your prediction is the mean of logsumexp(z) alone: the loss of a target is "
            "logsumexp(z) - z_y (notebook 01). Which part of it have you left out?",
        ),
        (
            float((lse - z.amax(dim=-1)).mean()),
            "your prediction scores every target as its position's largest logit: how often is a "
            "uniformly random target the top token?",
        ),
        (
            math.log(V),
            "your prediction is ln V, the loss of logits that are all equal: these logits are not. "
            "Does a spread in a position's logits raise the mean loss of a random target, or lower it?",
        ),
        (
            math.log2(V) + var / 2,
            "your ln V part matches a logarithm in base 2: is the loss measured in bits or in nats?",
        ),
        (
            math.log(V) + var,
            "your excess over ln V is twice the expected excess: what factor belongs in front of sigma^2?",
        ),
        (
            math.log(V) + math.sqrt(var) / 2,
            "your excess over ln V grows like sigma, not like sigma^2: which power of a small spread "
            "does the loss add?",
        ),
        (
            math.log(z.shape[1]) + var / 2,
            f"your V is {z.shape[1]}, the size of dimension 1: which dimension of the logits holds "
            "one score per token of the vocabulary?",
        ),
        (
            math.log(V) + float(z.var(dim=-1, unbiased=False).sum()) / 2,
            "your excess grows with the number of positions: does one position's loss depend on how "
            "many other positions the batch holds?",
        ),
        (
            math.log(V) + float(z.var(dim=-1, unbiased=False).sqrt().mean()) ** 2 / 2,
            "your prediction averages the positions' spreads before squaring: each position adds "
            "its own excess over ln V; does averaging the spreads first give the mean of those excesses?",
        ),
        (
            math.log(V) + float(z.var(dim=-2, unbiased=False).mean()) / 2,
            "your spread compares the logits of different positions: which logits does one softmax "
            "compare with each other?",
        ),
        *((math.log(V) + c / 2, counted) for c in (float(z.var(unbiased=False)), float(z.pow(2).mean()))),
    ]


def explain_first_loss(fn, case, expected, got) -> str:
    """first_loss_from_logits: which mistake the learner's number matches on the failing case
    (within 5e-4, and within a tenth of that mistake's distance from the right value);
    ``""`` unless exactly one does (on a case where two mistakes give nearly the same value, the
    checker's nudge says less, and nothing wrong)."""
    z = case.args[0].detach().double()
    try:
        value = float(got)
    except (TypeError, ValueError):
        return ""
    named = {q for candidate, q in _mistakes(z) if near_mistake(value, candidate, float(expected))}
    return only_match(named)
