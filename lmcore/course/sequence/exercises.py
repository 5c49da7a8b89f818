"""Notebook 03's exercise checkers: per-position losses through ``F.cross_entropy``'s
``(N, C, ...)`` layout, which refuses lmcore's own shift and loss and has a case that separates
the plausible wrong answers (L - k = V; logits of +-150 in float32). Exercise 2, the colleague's
loss, is graded in :mod:`lmcore.course.sequence.colleague`. The other checker grades a loss
and its global gradient norm under ``reduction="sum"`` or ``"mean"`` (section 7: why the mean): it refuses the course's reference and torch's norm helpers, and has a
model with gradients left over from an earlier backward. Re-exported by
:mod:`lmcore.course.sequence.lesson`."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from ...loss import causal_lm_loss
from ...shift import IGNORE_INDEX
from ..checks import Case, check
from ..checks.guard import available
from ..toys import toy_gpt
from .diagnoses import (
    explain_loss_and_grad_norm,
    explain_per_position_nll,
)

__all__ = [
    "check_per_position_nll",
    "check_loss_and_grad_norm",
]

_NO_LMCORE = {
    "lmcore.loss.causal_lm_loss": "that is lmcore's loss, the one you are rebuilding: write it yourself",
    "lmcore.shift.shift_for_next_token": "write the shift yourself",
}


def _random_cases(
    seed: int, with_ignored: bool, shapes=((1, 2, 3), (2, 5, 7), (3, 9, 4), (4, 6, 11), (1, 12, 5))
):
    g = torch.Generator().manual_seed(seed)
    cases = []
    for N, L, V in shapes:
        logits = torch.randn(N, L, V, generator=g)
        labels = torch.randint(V, (N, L), generator=g)
        if with_ignored:
            drop = torch.rand(N, L, generator=g) < 0.35
            drop[0, -1] = True  # at least one ignored target...
            drop[0, 1] = False  # ...and at least one valid one
            labels[drop] = IGNORE_INDEX
        cases.append(Case((logits, labels), label=f"logits (N, L, V) = {(N, L, V)}"))
    return cases


def _ragged_large_case(seed: int = 11) -> Case:
    """Rows with 5, 2 and 0 of 6 targets valid (right padding), logits of spread 100 in float32
    and one target at -150 next to a +150 logit: p(target) = e^-300, 0 in float32."""
    g = torch.Generator().manual_seed(seed)
    N, L, V = 3, 7, 6
    logits = 100 * torch.randn(N, L, V, generator=g)
    labels = torch.randint(V, (N, L), generator=g)
    for n, valid in enumerate((5, 2, 0)):
        labels[n, 1 + valid :] = IGNORE_INDEX
    logits[0, 0] = 0.0
    logits[0, 0, labels[0, 1]], logits[0, 0, (labels[0, 1] + 1) % V] = -150.0, 150.0
    return Case((logits, labels), label="3 rows with 5, 2 and 0 valid targets, logits of +-150 (float32)")


def _k_ahead_nll(logits: torch.Tensor, labels: torch.Tensor, k: int) -> torch.Tensor:
    """The reference: the logits at position t scored against the label at t + k, (N, L-k), 0
    where that label is -100; one F.cross_entropy over the flattened positions, in the logits'
    dtype (k = 1: causal_lm_loss(..., reduction="none"))."""
    N, L, V = logits.shape
    nll = F.cross_entropy(logits[:, : L - k].reshape(-1, V), labels[:, k:].reshape(-1), reduction="none")
    return nll.view(N, L - k)


def _per_position_cases() -> list[Case]:
    """(logits, labels, k): k = 1, 2 and 3, one case with L - k = V (where F.cross_entropy on
    (N, L-k, V) runs and scores the positions as classes), and ragged rows with logits of +-150."""
    cases = [
        Case((*c.args, k), label=f"{c.label}, k = {k}")
        for c, k in zip(
            _random_cases(
                3, with_ignored=True, shapes=((2, 6, 4), (1, 2, 3), (3, 9, 11), (2, 8, 7), (2, 5, 4))
            ),
            (2, 1, 3, 1, 1),
        )
    ]
    cases[0].label = "logits (N, L, V) = (2, 6, 4), k = 2: L - k = V = 4"
    ragged = _ragged_large_case()
    cases.append(Case((*ragged.args, 1), label=f"{ragged.label}, k = 1"))
    return cases


def check_per_position_nll(fn, quiet: bool = False):
    """Grade ``fn(logits (N, L, V), labels (N, L) with -100s, k) -> (N, L-k)``: the NLL of the
    label k places after each position (0 where ignored), the head of a model that predicts k
    tokens ahead (k = 1: ``causal_lm_loss(..., reduction="none")``); one case has L - k = V, where
    ``F.cross_entropy`` on (N, L-k, V) runs but scores the positions as classes."""
    return check(
        "per_position_nll",
        fn,
        _k_ahead_nll,
        _per_position_cases(),
        forbid=_NO_LMCORE,
        quiet=quiet,
        atol=1e-5,
        explain=explain_per_position_nll,
        hint=(
            "What shape must the result have, and which logits predict which label when the model "
            "looks k tokens ahead? Check which shapes F.cross_entropy expects for its input and its target.",
            "pair the logits at t with the label at t + k: drop the last k positions of the logits and "
            "the first k labels; F.cross_entropy wants the classes (V) on dim 1, so flatten to "
            "(N*(L-k), V) and reshape back (a slice is not contiguous: .view needs .contiguous(), "
            ".reshape does not), or move V to dim 1; reduction='none'.",
        ),
    )


def reference_loss_and_grad_norm(model, input_ids, reduction):
    """The causal-LM loss of ``model`` on ``input_ids`` with ``reduction`` ("sum" or "mean") and
    the global norm of its gradient, sqrt(sum over all parameters of grad**2), from fresh grads."""
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean'; got {reduction!r}.")
    model.zero_grad(set_to_none=True)
    loss = causal_lm_loss(model(input_ids), input_ids, reduction=reduction)
    loss.backward()
    squares = sum(float(p.grad.double().pow(2).sum()) for p in model.parameters() if p.grad is not None)
    return {"loss": loss.item(), "grad_norm": squares**0.5}


_NORM_HELPERS = {
    name: "that is torch's norm helper: compute the norm yourself"
    for name in available(
        ["torch.nn.utils.clip_grad_norm_", "torch.nn.utils.get_total_norm", "torch._foreach_norm"]
    )
}


def _grad_norm_cases() -> list[Case]:
    """Tiny float64 GPTs; ``stale`` cases get gradients from an earlier backward before the call
    (done after the checker's copy of the arguments, which does not copy ``.grad``)."""
    g = torch.Generator().manual_seed(5)
    cases = []
    for n, (N, L, reduction, stale) in enumerate(
        ((2, 8, "mean", False), (2, 8, "sum", False), (3, 12, "sum", True), (1, 6, "mean", True))
    ):
        model = toy_gpt(9, block_size=16, n_layer=1, n_embd=8, seed=n, dtype=torch.float64)
        ids = torch.randint(9, (N, L), generator=g)
        label = f"input_ids (N, L) = {(N, L)}, reduction={reduction!r}"
        if stale:
            label += ", a model with gradients left from an earlier backward"
        cases.append(Case((model, ids, reduction, stale), label=label))
    return cases


def _after_a_backward(fn):
    """``fn(model, ids, reduction)`` called on a model whose ``.grad`` holds an earlier
    backward's gradients when ``stale`` (as right after a training step)."""

    @functools.wraps(fn)  # the learner's name, for show_solution's pointer
    def call(model, ids, reduction, stale):
        if stale:
            causal_lm_loss(model(ids.flip(1)), ids.flip(1)).backward()
        weights = [p.detach().clone() for p in model.parameters()]
        out = fn(model, ids, reduction)
        if any(not torch.equal(w, p) for w, p in zip(weights, model.parameters())):
            raise ValueError(
                "your function changed the model's weights: it should measure the loss and the "
                "gradient's norm of this batch, as a step computes them before the optimizer moves anything"
            )
        return out

    return call


def check_loss_and_grad_norm(fn, quiet: bool = False):
    """Grade ``fn(model, input_ids, reduction) -> {"loss": float, "grad_norm": float}`` against
    :func:`reference_loss_and_grad_norm` on tiny float64 GPTs; two cases start with stale
    gradients in ``.grad``, and the reference and torch's norm helpers are refused."""
    forbid = {
        "lmcore.course.sequence.exercises.reference_loss_and_grad_norm": "that is the course's own "
        "reference: write the loss, the backward and the norm yourself",
        **_NORM_HELPERS,
    }
    return check(
        "loss_and_grad_norm",
        _after_a_backward(fn),
        _after_a_backward(reference_loss_and_grad_norm),
        _grad_norm_cases(),
        quiet=quiet,
        atol=1e-8,
        rtol=1e-6,
        no_mutation=False,  # a backward writes .grad: that is the point
        forbid=forbid,
        explain=explain_loss_and_grad_norm,
        hint=(
            "which of the three differs: the loss under the reduction asked for, the gradients "
            "(what did .grad hold before your backward?), or the norm (does it change when the "
            "parameters are grouped into tensors differently?)",
            "model.zero_grad(); loss = causal_lm_loss(model(ids), ids, reduction=reduction); "
            "loss.backward(); norm = (sum of p.grad.pow(2).sum() over all parameters) ** 0.5; return "
            'floats {"loss": ..., "grad_norm": ...}.',
        ),
    )
