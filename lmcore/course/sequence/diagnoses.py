"""What a wrong answer to notebook 03's per-position loss and gradient-norm exercises did, as a question.

One nudge cannot fit every mistake: a per-position loss read with the positions as classes, a
shift the wrong way, a mean over every target or a log of an underflowed probability each break a
different property. These rebuild each plausible mistake in float64 on the case that failed and
ask about the one the learner's result matches, without giving the rule. Each returns ``""``
when it cannot tell; the checker then shows its nudge.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from ...loss import causal_lm_loss
from ...shift import IGNORE_INDEX

__all__ = ["explain_per_position_nll", "explain_loss_and_grad_norm"]


def _matches(got, candidate) -> bool:
    """``got`` equals ``candidate`` to float32 accuracy (same shape, finite where it is)."""
    got = torch.as_tensor(got).detach().double()
    return got.shape == candidate.shape and bool(torch.allclose(got, candidate, rtol=1e-4, atol=1e-4))


def _nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Each target's -log softmax over the last axis, 0 where the target is -100 (float64)."""
    nll = F.cross_entropy(logits.double().movedim(-1, 1), targets, reduction="none")
    return nll  # cross_entropy gives 0 where the target is ignore_index (-100)


def _pairings(logits, labels, k: int = 1) -> dict[str, torch.Tensor]:
    """The per-target NLL under the wrong pairings of positions and tokens, as (N, L-k): each
    position scored on its own input token, on the token before it, or (k > 1) on the next one."""
    L = logits.shape[1]
    wrong = {
        "its own input token": _nll(logits[:, : L - k], labels[:, : L - k]),
        "the token before it": _nll(logits[:, k:], labels[:, : L - k]),
    }
    if k > 1:
        wrong["the very next token, one place ahead"] = _nll(logits[:, : L - k], labels[:, 1 : L - k + 1])
    return wrong


def _pairing_question(name: str, k: int | None = None) -> str:
    ahead = "" if k is None else f", when it looks k = {k} tokens ahead"
    return (
        f"your values match scoring each position on {name}: the logits at position t are the "
        f"model's guess for which token{ahead}?"
    )


def explain_per_position_nll(fn, case, expected, got) -> str:
    """per_position_nll (k tokens ahead): a wrong shape, the positions read as classes, a wrong
    pairing, or an ignored target that is not 0."""
    logits, labels, k = case.args
    N, L, V = logits.shape
    got = torch.as_tensor(got).detach()
    if got.shape != expected.shape:
        if got.ndim == 0:
            return "your result is one number: the exercise asks for one loss per target. Which reduction keeps them apart?"
        if got.shape == (N, L):
            return f"your result is (N, L) = {(N, L)}: does the last position of a row have a token k places ahead to be scored on?"
        if k > 1 and got.shape == (N, L - 1):
            return (
                f"your result is (N, L - 1) = {(N, L - 1)}, here where k = {k}: how many positions of a "
                "row have a token k places ahead of them?"
            )
        if got.numel() == expected.numel():
            return (
                f"your result has one value per target but the shape {tuple(got.shape)}: which shape "
                "keeps each row's targets in a row of their own?"
            )
        return ""
    if L - k == V:
        as_classes = F.cross_entropy(logits[:, : L - k].double(), labels[:, k:], reduction="none")
        if _matches(got, as_classes):
            return (
                "your values are what F.cross_entropy gives when it reads the L - k positions as the "
                "classes (here L - k = V, so nothing raised): on which dimension does it look for "
                "the classes, and on which are yours?"
            )
    for name, wrong in _pairings(logits, labels, k).items():
        if _matches(got, wrong):
            return _pairing_question(name, k)
    lost = ~torch.isfinite(got.double()) & torch.isfinite(expected.double())
    if bool(lost.any()):  # a probability formed first: e^-300 is 0 in float32, and its log -inf
        n, t = (int(v) for v in lost.nonzero()[0])
        return (
            f"your value at row {n}, target {t} is {float(got[n, t])} where the loss is "
            f"{float(expected[n, t]):.4g} nats: which step of your computation cannot hold a number "
            f"like e^-{float(expected[n, t]):.0f} in {str(logits.dtype).removeprefix('torch.')}?"
        )
    ignored = labels[:, k:] == IGNORE_INDEX
    if bool((got.double()[ignored] != 0).any()):
        n, t = (int(v) for v in ignored.nonzero()[0])
        return f"row {n}, target {t} is ignored (-100) and your value there is not 0: what should an ignored target contribute?"
    return ""


def _norm_counting_shared_twice(model, input_ids, reduction) -> float:
    """The gradient norm with a shared tensor counted once per place it is registered (a tied
    embedding and output matrix: twice), from fresh gradients on a copy of ``model``."""
    fresh = copy.deepcopy(model)
    fresh.zero_grad(set_to_none=True)
    with torch.enable_grad():
        causal_lm_loss(fresh(input_ids), input_ids, reduction=reduction).backward()
    grads = [p.grad for _, p in fresh.named_parameters(remove_duplicate=False) if p.grad is not None]
    return sum(float(g.double().pow(2).sum()) for g in grads) ** 0.5


def explain_loss_and_grad_norm(fn, case, expected, got) -> str:
    """loss_and_grad_norm: which of the loss or the norm differs, and whether the case is one of
    the models that come from an earlier backward."""
    if not isinstance(got, dict) or set(got) != {"loss", "grad_norm"}:
        return ""
    model, _, reduction, stale = case.args

    def off(key):
        return abs(float(got[key]) - expected[key]) > 1e-6 * max(1.0, abs(expected[key]))

    if off("loss"):
        return (
            "your loss differs, before any gradient: which position's logits score which token, and "
            f"what does reduction={reduction!r} ask the loss to do?"
        )
    weights = sum(float(p.detach().double().pow(2).sum()) for p in model.parameters()) ** 0.5
    if abs(float(got["grad_norm"]) - weights) <= 1e-6 * weights:
        return (
            "your norm is the length of the model's weights: which tensor of a parameter holds its gradient?"
        )
    if (
        off("grad_norm")
        and abs(float(got["grad_norm"]) - _norm_counting_shared_twice(model, case.args[1], reduction))
        <= 1e-6 * expected["grad_norm"]
    ):
        return (
            "your norm counts a tensor the model uses in two places (its tied token embedding and "
            "output matrix) twice: is it one parameter or two?"
        )
    if off("grad_norm") and stale:
        return (
            "your loss is right and your norm is not, on a model that comes from an earlier "
            "backward: what does a backward do to a .grad that already holds something?"
        )
    if off("grad_norm"):
        return (
            "your loss is right and your norm is not: would your number stay the same if one of the "
            "model's weight matrices were split into two parameter tensors, and is it a length when "
            "the model has one tensor?"
        )
    return ""
