"""Notebook 02 (gradients), the pictures: the loss along one logit with its tangent next to the
gradient bars, and the explorer widget that redraws them live. The numbers come from
:func:`lmcore.course.gradients.lesson.gradient_state`."""

from __future__ import annotations

from ..style import COLORS, new_figure
from ..widgets import live_figure
from .lesson import gradient_state

__all__ = ["plot_gradient_state", "gradient_explorer"]


def plot_gradient_state(logits=(2.0, 1.0, 0.0), target: int = 1, index: int = 1, value=None, tokens=None):
    """Left: the loss as logit ``index`` moves, the current point and its tangent. Right: the
    gradient bars (the target's is the only negative one)."""
    v = float(logits[index] if value is None else value)
    s = gradient_state(logits, target, index, value, lo=min(-10.0, v - 2.0), hi=max(10.0, v + 2.0))
    names = list(tokens) if tokens is not None else [f"tok {i}" for i in range(s["z"].size)]
    fig, (ax, bx) = new_figure(1, 2, width=9.6, height=3.4)
    ax.plot(s["xs"], s["losses"], color=COLORS["input"], label="loss")
    ax.plot(s["xs"], s["tangent"], "--", color=COLORS["anchor"], label=f"slope = {s['slope']:.3f}")
    ax.plot([s["z"][index]], [s["loss"]], "o", color=COLORS["target"], markersize=8)
    # the current point stays on the chart however far left the target's logit goes
    ax.set_ylim(-0.5, max(6.0, float(s["losses"].max()) * 0.6, s["loss"] * 1.15 + 0.5))
    ax.set_xlabel(f"logit of {names[index]}" + (" (the target)" if index == target else ""))
    ax.set_ylabel("loss (nats)")
    ax.set_title(f"loss = {s['loss']:.3f} at z[{names[index]}] = {s['z'][index]:.2f}")
    ax.legend(loc="upper center")
    colors = [COLORS["target"] if i == target else COLORS["input"] for i in range(len(names))]
    bars = bx.bar(names, s["grad"], color=colors)
    bx.bar_label(bars, labels=[f"{g:+.3f}" for g in s["grad"]], padding=2)
    bx.axhline(0, color="black", linewidth=0.8)
    bx.set_ylim(-1.15, 1.15)
    bx.set_ylabel("d loss / d z")
    bx.set_xlabel("token (orange = target)")
    bx.set_title("gradient = softmax(z) - onehot(target)")
    return fig


def gradient_explorer(logits=(2.0, 1.0, 0.0), target: int = 1, index: int = 1, tokens=None):
    """Pick a logit and drag it: the loss curve, the current point, its tangent and the
    gradient bars redraw live (:func:`plot_gradient_state`). Returns the widget."""
    import ipywidgets as widgets

    base = [float(v) for v in logits]
    names = list(tokens) if tokens is not None else [f"tok {i}" for i in range(len(base))]
    which = widgets.Dropdown(options=[(n, i) for i, n in enumerate(names)], value=index, description="move")
    value = widgets.FloatSlider(value=base[index], min=-20.0, max=10.0, step=0.1, description="value")
    pick = widgets.Dropdown(options=[(n, i) for i, n in enumerate(names)], value=target, description="target")
    # choosing another logit starts the slider at that logit's own value
    which.observe(lambda change: setattr(value, "value", base[change["new"]]), names="value")

    def draw(index, value, target):
        return plot_gradient_state(base, target, index, value, tokens)

    image = live_figure(draw, {"index": which, "value": value, "target": pick})
    return widgets.VBox([widgets.HBox([which, value, pick]), image])
