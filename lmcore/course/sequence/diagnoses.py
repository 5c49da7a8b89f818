"""What a wrong answer to notebook 03's two loss exercises did, as a question.

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

__all__ = ["explain_per_position_nll", "explain_causal_lm_loss", "explain_loss_and_grad_norm"]


# The keys of what 03 Exercise 2's check compares: the loss, and the gradient it sends to the logits.
LOSS, GRADIENT = "the loss", "its gradient with respect to the logits"


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
    ignored = labels[:, k:] == IGNORE_INDEX
    if bool((got.double()[ignored] != 0).any()):
        n, t = (int(v) for v in ignored.nonzero()[0])
        return f"row {n}, target {t} is ignored (-100) and your value there is not 0: what should an ignored target contribute?"
    return ""


def _smoothed(logp: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
    """Each target's smoothed loss from log-probabilities (..., V): ``(1 - eps)`` times the
    target's -log p plus ``eps`` times the mean -log p over the vocabulary (the uniform part of
    q), at every position (the caller masks). -100 reads as token 0."""
    picked = -logp.gather(-1, target.clamp(min=0)[..., None])[..., 0]
    return (1 - eps) * picked - eps * logp.mean(-1)


def explain_causal_lm_loss(fn, case, expected, got) -> str:
    """causal_lm_loss with label smoothing eps, its value and its gradient compared: a right value
    with a wrong gradient (a term cut from the graph), else what the value says
    (:func:`_explain_loss_value`)."""
    if not isinstance(expected, dict):
        return _explain_loss_value(case, expected, got)
    got = got.get(LOSS) if isinstance(got, dict) else got
    if got is not None and _matches(got, expected[LOSS].double()):
        return (
            "your loss's value is right, but the gradient it sends to the logits is not: does "
            "every part of your loss stay on autograd's graph, or does a term stop its gradient?"
        )
    return _explain_loss_value(case, expected[LOSS], got)


def _explain_loss_value(case, expected, got) -> str:
    """The value of a smoothed loss: an inf or nan, a wrong pairing, a softmax over the wrong
    axis, the ignored targets scored (both parts of q, or the uniform part only), a wrong share of
    q (no smoothing, eps / (V - 1), the target's weight 1, eps per token), or a sum / mean over the
    wrong count."""
    logits, labels, eps = case.args
    got = torch.as_tensor(got).detach().double()
    if got.numel() == 1 and not bool(torch.isfinite(got).all()):
        return (
            f"your loss is {float(got)} on this case (logits of +-150 in float32, and a row with no "
            "valid target): which step of yours can make an inf or a nan here?"
        )
    if got.shape != expected.shape:
        return ""
    target = labels[:, 1:]
    valid = target != IGNORE_INDEX
    count = valid.sum()
    if count == 0:
        return ""
    logp = torch.log_softmax(logits[:, :-1].double(), -1)

    def mean_valid(per_target):  # (N, L-1) -> the mean over the valid targets
        return (per_target * valid).sum() / count

    if eps > 0:
        V = logits.shape[-1]
        picked = -logp.gather(-1, target.clamp(min=0)[..., None])[..., 0]
        uniform = -logp.mean(-1)
        if _matches(got, mean_valid(picked)):
            return f"your value is the loss without smoothing (here eps = {eps}): which part of q have you left out?"
        for smooth_over_all in (uniform.mean(), uniform.sum() / count):
            if _matches(got, (1 - eps) * mean_valid(picked) + eps * smooth_over_all):
                return (
                    "your value is off on this batch, whose rows hold targets of -100, and right "
                    "where nothing is ignored: which part of your loss can still read the logits "
                    "at a position whose target is -100, and should it?"
                )
        others = (-logp.sum(-1) - picked) / (V - 1)  # the mean -log p over the V - 1 other tokens
        if _matches(got, mean_valid((1 - eps) * picked + eps * others)):
            return (
                "your value spreads eps over the V - 1 tokens other than the target; this q gives "
                "eps / V to every token, the target too: how much of q sits on the target?"
            )
        if _matches(got, mean_valid(picked + eps * uniform)):
            return (
                "your target term keeps the weight 1 beside the smoothing: what must q's weights add up to?"
            )
        if _matches(got, mean_valid((1 - eps) * picked + eps * V * uniform)):
            return "your smoothing weighs every token by eps: how much of q's mass eps does each of the V tokens get?"
    smoothed = _smoothed(logp, target, eps)
    unshifted = _smoothed(torch.log_softmax(logits.double(), -1), labels, eps) * (labels != IGNORE_INDEX)
    if _matches(got, unshifted.sum() / (labels != IGNORE_INDEX).sum().clamp(min=1)):
        return _pairing_question("its own input token")
    scored_wrong = labels[:, :-1] != IGNORE_INDEX  # both pairings score labels[:, :-1]
    for name, rows in (("its own input token", slice(None, -1)), ("the token before it", slice(1, None))):
        per_target = _smoothed(torch.log_softmax(logits[:, rows].double(), -1), labels[:, :-1], eps)
        if _matches(got, (per_target * scored_wrong).sum() / scored_wrong.sum().clamp(min=1)):
            return _pairing_question(name)
    over_positions = _smoothed(torch.log_softmax(logits[:, :-1].double(), 1), target, eps)
    if _matches(got, mean_valid(over_positions)):
        return "your probabilities add up to 1 over the positions, not over the vocabulary: which axis does a next-token distribution run along?"
    if _matches(got, smoothed.mean()) or _matches(got, smoothed.sum() / count):
        return "your loss scores the targets marked -100 too: which targets does the mean leave out?"
    total = (smoothed * valid).sum()
    if _matches(got, total / target.numel()):
        return "you divided by every target, the ignored ones included: how many targets does the mean count?"
    if _matches(got, total):
        return "your value is the sum over the targets: what does a mean divide it by?"
    rows = valid.sum(1)
    row_means = ((smoothed * valid).sum(1)[rows > 0] / rows[rows > 0]).mean()
    if _matches(got, row_means):
        return (
            "you averaged each row's own mean: in a mean over targets, does a row with 2 valid "
            "targets weigh as much as a row with 5?"
        )
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
