"""Notebook 01 (softmax and NLL): the widget's state, the figures, and the exercise checkers.

Everything a widget shows is computed by a plain function here (``softmax_state``), so it can be
tested and shown statically; the widget (``softmax_explorer``) only wires sliders to it.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .. import handcalc
from ..perplexity import nats_to_bits
from .checks import Case, check, random_logit_cases
from .style import COLORS, new_figure
from .widgets import live_figure

__all__ = ["random_logit_cases", "fmt", "softmax_state", "double_softmax", "plot_softmax_state", "plot_nll_curve",
           "plot_double_softmax", "live_figure", "softmax_explorer", "check_stable_softmax",
           "check_nll_from_logits"]


def fmt(values, nd: int = 3) -> str:
    """``[0.665, 0.245, 0.090]``: a list printed with a fixed number of decimals."""
    text = [f"{float(v):.{nd}f}" for v in np.ravel(values)]
    return "[" + ", ".join(t[1:] if t.startswith("-") and float(t) == 0 else t for t in text) + "]"


def softmax_state(logits, target: int, temperature: float = 1.0) -> dict:
    """What the softmax widget shows for ``logits`` (V,), the correct index ``target`` and a
    ``temperature`` T > 0: the probabilities softmax(z / T), p(target), and the loss
    -log p(target) in nats and bits."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature must be a positive number; got {temperature!r}.")
    z = np.asarray(logits, dtype=np.float64) / float(temperature)
    probs = handcalc.softmax(z)
    loss = handcalc.nll(z, target)
    return {"probs": probs, "p_target": float(probs[target]), "loss_nats": loss,
            "loss_bits": nats_to_bits(loss)}


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


def _token_names(V: int, tokens):
    return list(tokens) if tokens is not None else [f"tok {i}" for i in range(V)]


def plot_softmax_state(logits=(2.0, 1.0, 0.0), target: int = 1, temperature: float = 1.0,
                       tokens=None):
    """Bars of softmax(z / T) with the target highlighted; the loss in nats and bits in the title."""
    state = softmax_state(logits, target, temperature)
    names = _token_names(len(state["probs"]), tokens)
    fig, ax = new_figure(width=5.6, height=3.4)
    colors = [COLORS["target"] if i == target else COLORS["input"] for i in range(len(names))]
    bars = ax.bar(names, state["probs"], color=colors)
    ax.bar_label(bars, labels=[f"{p:.3f}" for p in state["probs"]], padding=2)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("probability")
    ax.set_xlabel(f"token (orange = target, T = {temperature:g})")
    ax.set_title(f"p(target) = {state['p_target']:.3f}   loss = {state['loss_nats']:.3f} nats "
                 f"= {state['loss_bits']:.3f} bits")
    return fig


def plot_nll_curve(points=(0.0001, 0.313, 0.462, 0.477)):
    """-ln p against p, with the probabilities in ``points`` marked and labelled."""
    fig, ax = new_figure(width=6.4, height=3.6)
    p = np.linspace(1e-4, 1.0, 400)
    ax.plot(p, -np.log(p), color=COLORS["input"])
    for k, q in enumerate(sorted(points)):
        ax.plot([q], [-np.log(q)], "o", color=COLORS["target"])
        ax.annotate(f"p = {q:g}: loss {-np.log(q):.3f}", xy=(q, -np.log(q)),
                    xytext=(0.5, 8.2 - 1.2 * k), fontsize=9,
                    arrowprops={"arrowstyle": "-", "color": "gray", "linewidth": 0.6})
    ax.set_xlabel("probability given to the correct token")
    ax.set_ylabel("loss (nats)")
    ax.set_title("The loss is -ln p(correct): near 0 when sure and right")
    return fig


def plot_double_softmax(target_logit=None, others=(0.0, 0.0)):
    """Loss against the target's logit (default -10..10), right (logits) vs wrong (probabilities
    fed as logits)."""
    target_logit = np.linspace(-10, 10, 201) if target_logit is None else target_logit
    a = torch.as_tensor(np.asarray(target_logit, dtype=np.float64))
    z = torch.cat([a[:, None], torch.tensor([list(others)], dtype=torch.float64).expand(len(a), -1)], 1)
    y = torch.zeros(len(a), dtype=torch.long)  # (T, V) logits, the target is token 0
    right = F.cross_entropy(z, y, reduction="none").numpy()
    wrong = F.cross_entropy(torch.softmax(z, dim=-1), y, reduction="none").numpy()
    fig, ax = new_figure(width=6.0, height=3.4)
    ax.plot(target_logit, right, color=COLORS["correct"], label="cross_entropy(logits): right")
    ax.plot(target_logit, wrong, color=COLORS["wrong"], label="cross_entropy(softmax(logits)): bug")
    ax.set_xlabel("logit of the correct token (the others stay at 0)")
    ax.set_ylabel("loss (nats)")
    ax.set_title("Softmax twice squashes the loss into a narrow band")
    ax.legend()
    return fig


def softmax_explorer(logits=(2.0, 1.0, 0.0), target: int = 1, temperature: float = 1.0,
                     tokens=None):
    """Sliders for 3-5 logits, a target selector and a temperature slider, redrawing
    :func:`plot_softmax_state` live. Returns the widget (display it as a cell's last line)."""
    import ipywidgets as widgets

    if not 3 <= len(logits) <= 5:
        raise ValueError(f"logits must hold 3 to 5 values for the explorer; got {len(logits)}.")
    names = _token_names(len(logits), tokens)
    sliders = {f"z{i}": widgets.FloatSlider(value=float(v), min=-10.0, max=10.0, step=0.1,
                                            description=f"z[{names[i]}]")
               for i, v in enumerate(logits)}
    pick = widgets.Dropdown(options=[(n, i) for i, n in enumerate(names)], value=target,
                            description="target")
    temp = widgets.FloatLogSlider(value=temperature, base=10, min=-1, max=1, step=0.05,
                                  description="T")

    def draw(target, temperature, **zs):
        return plot_softmax_state([zs[f"z{i}"] for i in range(len(zs))], target, temperature, tokens)

    image = live_figure(draw, {"target": pick, "temperature": temp, **sliders})
    return widgets.HBox([widgets.VBox([*sliders.values(), pick, temp]), image])


# ---------------------------------------------------------------- exercise checkers

def _softmax_cases(seed: int = 0) -> list[Case]:
    cases = [Case((np.array([2.0, 1.0, 0.0]),), label="z=[2, 1, 0]"),
             Case((np.array([1000.0, 999.0, 998.0]),), label="z=[1000, 999, 998]"),
             Case((np.array([-1000.0, 0.0, 1000.0]),), label="z=[-1000, 0, 1000]"),
             Case((np.array([-1000.0, -1001.0]),), label="z=[-1000, -1001]"),
             Case((np.zeros(4),), label="z=[0, 0, 0, 0]"),
             Case((np.array([3.5]),), label="z=[3.5] (one token)")]
    rng = np.random.default_rng(seed)
    for scale in (1.0, 5.0, 300.0):
        for _ in range(3):
            cases.append(Case((rng.normal(0.0, scale, size=int(rng.integers(2, 8))),)))
    return cases


def check_stable_softmax(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(z) -> probabilities`` against ``lmcore.handcalc.softmax``, |z| ~ 1000 included."""
    return check("stable softmax", fn, handcalc.softmax, _softmax_cases(),
                 hint="subtract the largest logit before np.exp, then divide by the sum; "
                      "no entry of z - max(z) is positive, so nothing can overflow.",
                 atol=1e-9, rtol=1e-6, quiet=quiet)


def _nll_cases(seed: int = 1) -> list[Case]:
    cases = [Case((np.array([2.0, 1.0, 0.0]), 1), label="z=[2, 1, 0], y=1"),
             Case((np.array([1000.0, 0.0]), 1), label="z=[1000, 0], y=1 (p_y underflows to 0)"),
             Case((np.array([1000.0, 999.0, 998.0]), 0), label="z=[1000, 999, 998], y=0"),
             Case((np.array([-1000.0, -1000.0, -1000.0]), 2), label="z=[-1000]*3, y=2"),
             Case((np.array([0.0, 0.0, 0.0, 0.0]), 3), label="z=[0, 0, 0, 0], y=3")]
    return cases + random_logit_cases(seed)


def check_nll_from_logits(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(z, y) -> float`` (-log softmax(z)[y], nats) against ``lmcore.handcalc.nll``."""
    return check("NLL from logits", fn, handcalc.nll, _nll_cases(),
                 hint="loss = logsumexp(z) - z[y], with logsumexp(z) = m + log(sum(exp(z - m))) "
                      "and m = max(z); never take log of a probability that may be 0. Natural log.",
                 atol=1e-9, rtol=1e-7, quiet=quiet)
