"""The widget kit: PNG bytes of a figure, and a live figure redrawn when a control changes."""

import pytest

ipywidgets = pytest.importorskip("ipywidgets")
plt = pytest.importorskip("matplotlib.pyplot")

from lmcore.course.checks import random_logit_cases  # noqa: E402
from lmcore.course.widgets import figure_png, live_figure, on_change  # noqa: E402


def _plot(a, b=1.0):
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [a, b])
    return fig


def test_figure_png_gives_png_bytes_and_closes_the_figure():
    fig = _plot(0.0)
    data = figure_png(fig, dpi=40)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)


def test_live_figure_draws_now_and_on_every_change():
    a, b = ipywidgets.FloatSlider(value=0.0), ipywidgets.FloatSlider(value=1.0)
    calls = []

    def plot(a, b):
        calls.append((a, b))
        return _plot(a, b)

    image = live_figure(plot, {"a": a, "b": b})
    first = image.value
    assert calls == [(0.0, 1.0)] and first[:4] == b"\x89PNG"
    a.value = 0.5
    assert calls[-1] == (0.5, 1.0) and image.value != first
    b.value = 0.25
    assert calls[-1] == (0.5, 0.25) and len(calls) == 3


def test_on_change_accepts_a_list_and_calls_once_at_start():
    s = ipywidgets.IntSlider(value=1)
    seen = []
    on_change([s], lambda change: seen.append(None if change is None else change["new"]))
    s.value = 3
    assert seen == [None, 3]


def test_random_logit_cases_are_seeded_and_in_range():
    a, b = random_logit_cases(3), random_logit_cases(3)
    assert len(a) == 9
    for ca, cb in zip(a, b):
        (z, y), (z2, y2) = ca.args, cb.args
        assert (z == z2).all() and y == y2 and 2 <= len(z) < 8 and 0 <= y < len(z)
    assert max(abs(c.args[0]).max() for c in a[6:]) > 20  # the scale-300 cases
