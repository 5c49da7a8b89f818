"""Widgets shown through the kit: a "run this cell" line instead of a repr, sliders that reach
the values the text asks about."""

import pytest

ipywidgets = pytest.importorskip("ipywidgets")

from lmcore.course import widgets as kit  # noqa: E402
from lmcore.course.start.lesson import SURPRISE_PS, surprise_widget  # noqa: E402

VIEW = "application/vnd.jupyter.widget-view+json"


def test_shown_widget_has_the_view_and_a_run_me_line_not_a_repr():
    box = ipywidgets.VBox([ipywidgets.HTML("x"), ipywidgets.IntSlider(description="n")])
    bundle = kit.show(box)._repr_mimebundle_()
    assert bundle["text/plain"] == kit.RUN_ME and "children" not in bundle["text/plain"]
    assert bundle[VIEW]["model_id"] == box.model_id
    assert "children=" in box._repr_mimebundle_()["text/plain"]  # what it replaces


def test_show_widens_sliders_and_titles():
    slider = ipywidgets.FloatSlider(description="value")
    row = ipywidgets.HBox([ipywidgets.Dropdown(options=[1, 2]), slider])
    shown = kit.show(ipywidgets.VBox([row]), title="<b>t</b>")
    assert slider.layout.flex and row.layout.width == "100%"
    assert slider.style.description_width == "initial"
    assert isinstance(shown.widget.children[0], ipywidgets.HTML)
    alone = ipywidgets.IntSlider(description="n")
    kit.show(alone)
    assert alone.layout.width and "100%" in alone.layout.width


@pytest.mark.parametrize(
    "slider, value, ok",
    [
        (ipywidgets.FloatLogSlider(base=10, min=-4, max=0, step=0.05), 0.5, False),  # snaps to 0.5012
        (ipywidgets.FloatLogSlider(base=10, min=-4, max=0, step=0.05), 1e-4, True),
        (ipywidgets.FloatSlider(min=-8, max=8, step=0.1), 0.3, True),
        (ipywidgets.FloatSlider(min=-8, max=8, step=0.1), 0.35, False),
        (ipywidgets.IntSlider(min=2, max=32), 40, False),
        (ipywidgets.SelectionSlider(options=[("a", 0.5), ("b", 1.0)]), 0.5, True),
    ],
)
def test_reachable(slider, value, ok):
    assert kit.reachable(slider, value) is ok


def test_asks_checks_reachability_and_names_the_values():
    slider = ipywidgets.FloatLogSlider(base=10, min=-4, max=0, step=0.05, description="p")
    with pytest.raises(ValueError, match="cannot be set to exactly 0.5"):
        kit.show(slider, asks={"p": [0.5]})
    with pytest.raises(ValueError, match="no slider described"):
        kit.show(slider, asks={"q": [0.5]})
    kit.show(slider, asks={"p": [1e-4, 1.0]})
    assert "lmcore-asks-0.0001_1" in slider._dom_classes


def test_the_surprise_slider_reaches_one_half_and_one_ten_thousandth(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    surprise_widget()
    (widget,) = shown
    assert widget._repr_mimebundle_()["text/plain"] == kit.RUN_ME
    slider = widget.widget.children[0]
    assert slider.value == 0.5 and 0.5 in SURPRISE_PS and 1e-4 in SURPRISE_PS
    assert kit.reachable(slider, 0.5) and kit.reachable(slider, 1e-4)
    assert "lmcore-asks-0.5_0.0001" in slider._dom_classes
    with pytest.raises(ValueError):
        surprise_widget(0.45)
