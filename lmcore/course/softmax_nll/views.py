"""Notebook 01 (softmax and NLL), the pictures: the softmax bars, the -ln p curve, the
double-softmax curves, and the explorer widget that redraws the bars live. The numbers they
show come from :mod:`lmcore.course.softmax_nll.lesson` (``softmax_state``)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..style import COLORS, new_figure
from ..widgets import live_figure
from .lesson import softmax_state

__all__ = ["plot_softmax_state", "plot_nll_curve", "plot_double_softmax", "softmax_explorer"]


def _token_names(V: int, tokens):
    return list(tokens) if tokens is not None else [f"tok {i}" for i in range(V)]


def plot_softmax_state(
    logits=(2.0, 1.0, 0.0), target: int = 1, temperature: float = 1.0, tokens=None, shift: float = 0.0
):
    """Bars of softmax((z + shift) / T) with the target highlighted; the loss in nats and bits in
    the title, the logits actually fed in (z + shift) under the bars."""
    z = np.asarray(logits, dtype=np.float64) + float(shift)
    state = softmax_state(z, target, temperature)
    names = _token_names(len(state["probs"]), tokens)
    fig, ax = new_figure(width=5.6, height=3.4)
    colors = [COLORS["target"] if i == target else COLORS["input"] for i in range(len(names))]
    bars = ax.bar(names, state["probs"], color=colors)
    ax.bar_label(bars, labels=[f"{p:.3f}" for p in state["probs"]], padding=2)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("probability")
    fed = ", ".join(f"{v:g}" for v in z)
    ax.set_xlabel(f"token (orange = target, T = {temperature:g}); logits fed in: [{fed}]")
    ax.set_title(
        f"p(target) = {state['p_target']:.3f}   loss = {state['loss_nats']:.3f} nats "
        f"= {state['loss_bits']:.3f} bits"
    )
    return fig


def plot_nll_curve(points=(0.0001, 0.313, 0.462, 0.477)):
    """-ln p against p, with the probabilities in ``points`` marked and labelled."""
    fig, ax = new_figure(width=6.4, height=3.6)
    p = np.linspace(1e-4, 1.0, 400)
    ax.plot(p, -np.log(p), color=COLORS["input"])
    for k, q in enumerate(sorted(points)):
        ax.plot([q], [-np.log(q)], "o", color=COLORS["target"])
        ax.annotate(
            f"p = {q:g}: loss {-np.log(q):.3f}",
            xy=(q, -np.log(q)),
            xytext=(0.5, 8.2 - 1.2 * k),
            fontsize=9,
            arrowprops={"arrowstyle": "-", "color": "gray", "linewidth": 0.6},
        )
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


def softmax_explorer(logits=(2.0, 1.0, 0.0), target: int = 1, temperature: float = 1.0, tokens=None):
    """Sliders for 3-5 logits, one "+c" slider that adds the same constant to every logit, a
    target selector and a temperature slider, redrawing :func:`plot_softmax_state` live.
    Returns the widget (display it as a cell's last line)."""
    import ipywidgets as widgets

    if not 3 <= len(logits) <= 5:
        raise ValueError(f"logits must hold 3 to 5 values for the explorer; got {len(logits)}.")
    names = _token_names(len(logits), tokens)
    sliders = {
        f"z{i}": widgets.FloatSlider(
            value=float(v), min=-10.0, max=10.0, step=0.1, description=f"z[{names[i]}]"
        )
        for i, v in enumerate(logits)
    }
    shift = widgets.FloatSlider(value=0.0, min=-1000.0, max=1000.0, step=10.0, description="+c (all)")
    pick = widgets.Dropdown(options=[(n, i) for i, n in enumerate(names)], value=target, description="target")
    temp = widgets.FloatLogSlider(value=temperature, base=10, min=-1, max=1, step=0.05, description="T")

    def draw(target, temperature, shift, **zs):
        return plot_softmax_state([zs[f"z{i}"] for i in range(len(zs))], target, temperature, tokens, shift)

    image = live_figure(draw, {"target": pick, "temperature": temp, "shift": shift, **sliders})
    return widgets.HBox([widgets.VBox([*sliders.values(), shift, pick, temp]), image])
