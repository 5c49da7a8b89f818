"""Notebook 01 (softmax and NLL): the widget's state, the double-softmax bug, and the exercise
checkers. The pictures and the widget are in :mod:`lmcore.course.softmax_nll.views`.

Everything a widget shows is computed by a plain function here (``softmax_state``), so it can be
tested and shown statically; the widget (``softmax_explorer``) only wires sliders to it.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ... import handcalc
from ..._validate import require_real
from ...perplexity import nats_to_bits
from ..checks import Case, apart, check, float32_atol, random_logit_cases
from ..checks.guard import available

__all__ = [
    "softmax_state",
    "double_softmax",
    "check_stable_softmax",
    "check_nll_from_logits",
    "mean_nll_reference",
]

_WRITE = "write it yourself, from np.exp and np.log"
# what each exercise replaces: lmcore's own functions and the libraries' (however imported)
_SOFTMAXES = [
    "lmcore.handcalc.softmax",
    "lmcore.handcalc.log_softmax",
    "torch.softmax",
    "torch.log_softmax",
    "torch.nn.functional.softmax",
    "torch.nn.functional.log_softmax",
    "torch.Tensor.softmax",
    "torch.Tensor.log_softmax",
    "scipy.special.softmax",
    "scipy.special.log_softmax",
    # the same kernels under other names: torch.special, the private and the aten entry points
    "torch.special.softmax",
    "torch.special.log_softmax",
    "torch._softmax",
    "torch._log_softmax",
    "torch.ops.aten.softmax",
    "torch.ops.aten._softmax",
    "torch.ops.aten.log_softmax",
    "torch.ops.aten._log_softmax",
    # exp(z - logsumexp(z)) is the softmax too, with the stable step done by the library
    "lmcore.handcalc.logsumexp",
    "torch.logsumexp",
    "torch.Tensor.logsumexp",
    "torch.special.logsumexp",
    "torch.ops.aten.logsumexp",
    "scipy.special.logsumexp",
]
_LOSSES = _SOFTMAXES + [
    "lmcore.handcalc.nll",
    "torch.nn.functional.cross_entropy",
    "torch.nn.functional.nll_loss",
    "torch._C._nn.cross_entropy_loss",
    "torch._C._nn.nll_loss",
    "torch._C._nn.nll_loss_nd",
    "torch._C._nn.nll_loss2d",
]


def _forbid(names) -> dict[str, str]:
    return {name: _WRITE for name in available(names)}


def softmax_state(logits, target: int, temperature: float = 1.0) -> dict:
    """What the softmax widget shows for ``logits`` (V,), the correct index ``target`` and a
    ``temperature`` T > 0: the probabilities softmax(z / T), p(target), and the loss
    -log p(target) in nats and bits."""
    require_real("temperature", temperature, min=0, min_inclusive=False)
    z = np.asarray(logits, dtype=np.float64) / float(temperature)
    probs = handcalc.softmax(z)
    loss = handcalc.nll(z, target)
    return {
        "probs": probs,
        "p_target": float(probs[target]),
        "loss_nats": loss,
        "loss_bits": nats_to_bits(loss),
    }


def double_softmax(logits, target: int) -> dict:
    """The correct loss ``F.cross_entropy(z)`` against the bug ``F.cross_entropy(softmax(z))``.

    Returns both losses and both gradients with respect to the logits ``z`` (V,) (autograd,
    float64): the bug feeds probabilities where logits belong, so they get softmaxed twice.
    """
    handcalc.nll(logits, target)  # validates z and target with clear errors
    out = {}
    for name, squash in (("right", False), ("wrong", True)):
        z = torch.tensor(np.asarray(logits, dtype=np.float64), requires_grad=True)
        x = torch.softmax(z, dim=-1) if squash else z
        loss = F.cross_entropy(x[None], torch.tensor([target]))
        loss.backward()
        out[f"loss_{name}"] = float(loss.detach())
        out[f"grad_{name}"] = z.grad.numpy()
    return out


# ---------------------------------------------------------------- exercise checkers


def _softmax_cases(seed: int = 0) -> list[Case]:
    cases = [
        Case((np.array([2.0, 1.0, 0.0]),), label="z=[2, 1, 0]"),
        Case((np.array([1000.0, 999.0, 998.0]),), label="z=[1000, 999, 998]"),
        Case((np.array([-1000.0, 0.0, 1000.0]),), label="z=[-1000, 0, 1000]"),
        Case((np.array([-1000.0, -1001.0]),), label="z=[-1000, -1001]"),
        Case((np.zeros(4),), label="z=[0, 0, 0, 0]"),
        Case((np.array([3.5]),), label="z=[3.5] (one token)"),
    ]
    rng = np.random.default_rng(seed)
    for scale in (1.0, 5.0, 300.0):
        for _ in range(3):
            cases.append(Case((rng.normal(0.0, scale, size=int(rng.integers(2, 8))),)))
    return cases


def _explain_softmax(fn, case, expected, got) -> str:
    """A non-finite softmax on this case, asked about as overflow or all-underflow ("" otherwise)."""
    (z,) = case.args
    try:
        p = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return ""
    if np.all(np.isfinite(p)):
        if p.shape == np.shape(z) and abs(float(p.sum()) - 1.0) > 1e-6:
            return (
                f"your probabilities add up to {apart(float(p.sum()), 1.0)[0]}: what must the probabilities of "
                "all V tokens add up to, and which step makes them do so?"
            )
        return ""
    return (
        f"on {case.label} your result is not finite. After whatever you subtract from z, is some "
        f"entry still far above 0 (its exp overflows), or is every entry far below 0 (every exp is "
        f"0, and 0 / 0 is nan)? Which constant avoids both for any z?"
    )


def check_stable_softmax(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(z) -> probabilities`` against ``lmcore.handcalc.softmax``, |z| ~ 1000 included."""
    return check(
        "stable softmax",
        fn,
        handcalc.softmax,
        _softmax_cases(),
        hint=(
            "Try z = [1000, 999]: does np.exp overflow? What can you change about z without changing "
            "its softmax?",
            "subtract the largest logit before np.exp, then divide by the sum; "
            "no entry of z - max(z) is positive, so nothing can overflow.",
        ),
        atol=1e-9,
        rtol=1e-6,
        quiet=quiet,
        # np.logaddexp.reduce(z) is a library's logsumexp too (a learner passed with it)
        forbid=_forbid(_SOFTMAXES + ["numpy.logaddexp"]),
        explain=_explain_softmax,
    )


def _nll_cases(seed: int = 1) -> list[Case]:
    cases = [
        Case((np.array([2.0, 1.0, 0.0]), 1), label="z=[2, 1, 0], y=1"),
        Case((np.array([1000.0, 0.0]), 1), label="z=[1000, 0], y=1 (p_y underflows to 0)"),
        Case((np.array([1000.0, 999.0, 998.0]), 0), label="z=[1000, 999, 998], y=0"),
        # p_y underflows and two logits lead: max(z) - z_y is 0.313 short of the loss
        Case((np.array([1000.0, 999.0, 0.0]), 2), label="z=[1000, 999, 0], y=2 (p_y underflows to 0)"),
        Case((np.array([-1000.0, -1000.0, -1000.0]), 2), label="z=[-1000]*3, y=2"),
        Case((np.array([0.0, 0.0, 0.0, 0.0]), 3), label="z=[0, 0, 0, 0], y=3"),
        # e^-20000 underflows even in long double (down to about e^-11355): p_y is never formed
        Case((np.array([20000.0, 0.0]), 1), label="z=[20000, 0], y=1 (p_y underflows in every float type)"),
    ]
    return cases + random_logit_cases(seed)


def _explain_nll(fn, case, expected, got) -> str:
    """The property of a loss that ``got`` breaks on this case, as a question ("" if none)."""
    z, y = case.args
    loss = float(got)
    if not np.isfinite(loss):
        return (
            f"on this input your loss is {loss}: which step of yours overflows, or takes the log "
            "of 0? Can you get log p without forming p first?"
        )
    tol = 1e-6 + float32_atol(z + 5.0)
    moved = float(fn(np.array(z, dtype=np.float64) + 5.0, y))
    if not abs(moved - loss) <= tol:
        a, b = apart(loss, moved)
        return (
            f"adding 5 to every logit leaves softmax, and so the loss, unchanged; yours goes from {a} "
            f"to {b}: which part of your formula depends on the logits' level?"
        )
    V = len(z)
    uniform = float(fn(np.zeros(V), 0))
    if not abs(uniform - np.log(V)) <= 1e-5:
        return (
            f"on {V} equal logits the model gives each token 1/{V}, and your loss there is "
            f"{uniform:.4g}: how surprising is an outcome of probability 1/{V}?"
        )
    surer = np.array(z, dtype=np.float64)
    surer[y] += 1.0
    after = float(fn(surer, y))
    if after == loss:
        return (
            f"raising the target's logit by 1 leaves your loss at {loss:.4g}: is something in your "
            "function clipping it? Can you get log p without forming p first?"
        )
    if not after < loss:
        a, b = apart(loss, after)
        return (
            f"raising the target's logit by 1 makes the model surer of the right token, yet your "
            f"loss goes from {a} to {b}: what should a surprise do when the target becomes likelier?"
        )
    z64 = np.array(z, dtype=np.float64)
    if abs(loss - (z64.max() - z64[y])) <= tol and abs(loss - float(expected)) > tol:
        return (
            f"your loss here is max(z) - z_y = {loss:.6g}, the loss as if the largest logit held all "
            "the mass: another logit is close to the largest. What does it add to the loss?"
        )
    return ""


def check_nll_from_logits(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(z, y) -> float`` (-log softmax(z)[y], nats) against ``lmcore.handcalc.nll``."""
    return check(
        "NLL from logits",
        fn,
        handcalc.nll,
        _nll_cases(),
        hint=(
            "Try a target whose probability underflows to 0: is your loss finite? Can you get log p "
            "without forming p first?",
            "loss = logsumexp(z) - z[y], with logsumexp(z) = m + log(sum(exp(z - m))) "
            "and m = max(z); never take log of a probability that may be 0. Natural log.",
        ),
        # a float32 answer is right: a few float32 spacings of the largest logit (wrong answers are
        # off by far more: inf, the sign, a factor 1 / ln 2, a missing max or target logit)
        atol=lambda z, y: float32_atol(z),
        rtol=1e-6,
        quiet=quiet,
        # and NumPy's own LogSumExp, np.logaddexp.reduce(z): the stable sum is this exercise
        forbid=_forbid(_LOSSES + ["numpy.logaddexp"]),
        explain=_explain_nll,
        ratio_hints={
            -1.0: "the sign is flipped: can a loss that is a surprise ever be negative?",
            1 / np.log(2): "that is 1/ln 2 times the expected: which logarithm did you take?",
        },
    )


def mean_nll_reference(Z, y, T: float = 1.0) -> float:
    """The mean NLL of softmax(Z / T) over the rows of ``Z`` (N, V) whose target ``y`` (N,) is not
    -100: ``F.cross_entropy`` in float64 (the reference the exercise is checked against)."""
    require_real("T", T, min=0, min_inclusive=False)
    Z, y = np.asarray(Z, dtype=np.float64), np.asarray(y)
    if Z.ndim != 2 or y.shape != Z.shape[:1]:
        raise ValueError(f"Z must be (N, V) and y (N,); got Z {Z.shape}, y {y.shape}.")
    if not (y != -100).any():
        raise ValueError("y must hold at least one target that is not -100.")
    return float(
        F.cross_entropy(torch.from_numpy(Z) / float(T), torch.from_numpy(y).long(), ignore_index=-100)
    )
