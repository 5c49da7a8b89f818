"""Notebook 01 (softmax and NLL): the widget's state, the double-softmax bug, and the exercise
checkers. The pictures and the widget are in :mod:`lmcore.course.softmax_nll_views`.

Everything a widget shows is computed by a plain function here (``softmax_state``), so it can be
tested and shown statically; the widget (``softmax_explorer``) only wires sliders to it.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .. import handcalc
from .._validate import require_real
from ..perplexity import nats_to_bits
from .checks import Case, check, random_logit_cases

__all__ = ["softmax_state", "double_softmax", "check_stable_softmax", "check_nll_from_logits"]


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


def check_stable_softmax(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(z) -> probabilities`` against ``lmcore.handcalc.softmax``, |z| ~ 1000 included."""
    return check(
        "stable softmax",
        fn,
        handcalc.softmax,
        _softmax_cases(),
        hint="subtract the largest logit before np.exp, then divide by the sum; "
        "no entry of z - max(z) is positive, so nothing can overflow.",
        atol=1e-9,
        rtol=1e-6,
        quiet=quiet,
    )


def _nll_cases(seed: int = 1) -> list[Case]:
    cases = [
        Case((np.array([2.0, 1.0, 0.0]), 1), label="z=[2, 1, 0], y=1"),
        Case((np.array([1000.0, 0.0]), 1), label="z=[1000, 0], y=1 (p_y underflows to 0)"),
        Case((np.array([1000.0, 999.0, 998.0]), 0), label="z=[1000, 999, 998], y=0"),
        Case((np.array([-1000.0, -1000.0, -1000.0]), 2), label="z=[-1000]*3, y=2"),
        Case((np.array([0.0, 0.0, 0.0, 0.0]), 3), label="z=[0, 0, 0, 0], y=3"),
    ]
    return cases + random_logit_cases(seed)


def check_nll_from_logits(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(z, y) -> float`` (-log softmax(z)[y], nats) against ``lmcore.handcalc.nll``."""
    return check(
        "NLL from logits",
        fn,
        handcalc.nll,
        _nll_cases(),
        hint="loss = logsumexp(z) - z[y], with logsumexp(z) = m + log(sum(exp(z - m))) "
        "and m = max(z); never take log of a probability that may be 0. Natural log.",
        atol=1e-9,
        rtol=1e-7,
        quiet=quiet,
    )
