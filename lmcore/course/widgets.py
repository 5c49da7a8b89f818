"""The widget kit: a live figure wired to controls, and the one redraw helper behind it.

A course widget renders a matplotlib Figure to PNG bytes and puts them into an
``ipywidgets.Image``: the picture lives in the widget itself, so nothing is printed into the
cell's output (stable under nbval) and no Output-widget capture is needed. ipywidgets and
matplotlib are imported lazily (only a widget needs them).

A notebook shows a widget with :func:`show` (or :func:`interact`): the live view where the kernel
has the widget, and everywhere else (the committed notebook, GitHub, a reloaded page, nbval) one
line saying to run the cell, instead of a ``VBox(children=...`` repr. Sliders are widened to the
cell with their value readable, and ``asks`` declares values the text asks about: each must be
reachable on the slider (checked here, and by the browser test through a CSS class).
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["RUN_ME", "figure_png", "on_change", "live_figure", "Shown", "show", "interact", "reachable"]

RUN_ME = "[interactive widget: run this cell (Shift+Enter) to get its controls]"


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


class Shown:
    """A widget as a cell's result: its live view, and :data:`RUN_ME` as the plain text."""

    def __init__(self, widget, message: str = RUN_ME):
        self.widget, self.message = widget, message

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget._repr_mimebundle_() or {})
        bundle["text/plain"] = self.message
        return bundle

    def __repr__(self) -> str:
        return self.message


def _sliders(widget):
    """(slider, its parent box or None) for every slider in ``widget``'s tree."""
    found, todo = [], [(widget, None)]
    while todo:
        w, parent = todo.pop()
        if type(w).__name__.endswith("Slider"):
            found.append((w, parent))
        todo += [(child, w) for child in getattr(w, "children", ())]
    return found


def reachable(slider, value) -> bool:
    """True when ``slider`` can be set to exactly ``value`` (an option, or a point of its grid)."""
    if hasattr(slider, "options"):
        return any(v == value for v in getattr(slider, "_options_values", ()))
    log = type(slider).__name__ == "FloatLogSlider"
    if log and value <= 0:
        return False
    x = math.log(value, slider.base) if log else value
    k = round((x - slider.min) / slider.step)
    grid = slider.min + k * slider.step
    shown = slider.base**grid if log else grid
    return slider.min - 1e-12 <= grid <= slider.max + 1e-12 and math.isclose(shown, value, rel_tol=1e-12)


def _widen(slider, parent) -> None:
    """Span the cell (or share a row) with a readable description and value."""
    in_row = type(parent).__name__ in ("HBox", "GridBox")
    if in_row:  # at least 420 px wide: the row wraps rather than squeezing the slider
        slider.layout.flex, slider.layout.min_width = "1 1 420px", slider.layout.min_width or "420px"
        parent.layout.width = parent.layout.width or "100%"
        parent.layout.flex_flow = parent.layout.flex_flow or "row wrap"
    else:
        slider.layout.width = slider.layout.width or "min(100%, 760px)"
    slider.style.description_width = "initial"


def show(widget, *, title: str | None = None, asks: dict | None = None) -> Shown:
    """Display ``widget`` (optionally under a ``title``, HTML): sliders widened, and for every
    ``asks`` entry (slider description -> values the text asks about) the values checked to be
    reachable and named in a CSS class ``lmcore-asks-<v>_<v>`` for the browser test."""
    import ipywidgets as widgets

    sliders = _sliders(widget)
    for slider, parent in sliders:
        _widen(slider, parent)
    for name, values in (asks or {}).items():
        match = [s for s, _ in sliders if s.description == name]
        if not match:
            raise ValueError(
                f"asks: no slider described {name!r} (have {[s.description for s, _ in sliders]})"
            )
        for v in values:
            if not reachable(match[0], v):
                raise ValueError(f"asks: the slider {name!r} cannot be set to exactly {v!r}")
        match[0].add_class("lmcore-asks-" + "_".join(f"{v:g}" for v in values))
    if title is not None:  # HTML, e.g. "<b>Explorer</b>: drag a logit"
        widget = widgets.VBox([widgets.HTML(title), widget])
    return Shown(widget)


def interact(fn: Callable, *, title: str | None = None, asks: dict | None = None, **controls) -> None:
    """Like ``ipywidgets.interact(fn, **controls)`` (displays the widget now and runs ``fn``
    once), shown by :func:`show`: so ``interact(...)``, ``_ = interact(...)`` and
    ``interact(...);`` all display it once."""
    import ipywidgets as widgets
    from IPython.display import display

    display(show(widgets.interactive(fn, **controls), title=title, asks=asks))
