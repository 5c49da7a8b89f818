"""The widget kit: a live figure wired to controls, and the one redraw helper behind it.

A course widget renders a matplotlib Figure to PNG bytes and puts them into an
``ipywidgets.Image``: the picture lives in the widget itself, so nothing is printed into the
cell's output (stable under nbval) and no Output-widget capture is needed. ipywidgets and
matplotlib are imported lazily (only a widget needs them).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["figure_png", "on_change", "live_figure"]


def figure_png(fig, *, dpi: int = 90) -> bytes:
    """The PNG bytes of ``fig``; the figure is closed afterwards (it is shown once, as bytes)."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return buf.getvalue()


def on_change(controls, redraw: Callable) -> Callable:
    """Call ``redraw(change)`` whenever the value of one of ``controls`` (widgets, or a dict
    name -> widget) changes, and once now (with ``None``) for the initial state. Returns
    ``redraw``."""
    for w in controls.values() if isinstance(controls, dict) else controls:
        w.observe(redraw, names="value")
    redraw(None)
    return redraw


def live_figure(plot: Callable, controls: dict, *, dpi: int = 90):
    """An ``ipywidgets.Image`` showing ``plot(**values)`` (a Figure, from the controls' current
    values by name), redrawn whenever a control in ``controls`` (name -> widget) changes."""
    import ipywidgets as widgets

    image = widgets.Image(format="png")

    def redraw(_change=None):
        image.value = figure_png(plot(**{name: w.value for name, w in controls.items()}), dpi=dpi)

    on_change(controls, redraw)
    return image
