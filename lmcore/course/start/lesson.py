"""Notebook 00: the environment check and the demonstration exercise (surprise = -ln p)."""

from __future__ import annotations

import math
import platform

import numpy as np

from ...perplexity import nats_to_bits
from ..checks import Case, check

__all__ = [
    "environment_report",
    "surprise_line",
    "surprise_reference",
    "check_surprise",
    "SURPRISE_PS",
    "surprise_widget",
]

# The slider's stops: 1-2-5 steps from 0.0001 up to 0.1, then tenths, then close to 1; every
# value the notebook's text asks about (0.5, 0.0001) is a stop, so the slider lands on it exactly.
SURPRISE_PS = (
    1e-4,
    2e-4,
    5e-4,
    1e-3,
    2e-3,
    5e-3,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.3,
    0.4,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    0.95,
    0.99,
    1.0,
)


def environment_report() -> dict:
    """What this kernel runs on: versions, the device training would use, widget support."""
    import torch

    try:
        import ipywidgets

        widgets = ipywidgets.__version__
    except ImportError:  # pragma: no cover - the course's requirements install it
        widgets = None
    if torch.cuda.is_available():
        device = f"cuda ({torch.cuda.get_device_name(0)})"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        device = "mps (Apple silicon)"
    else:
        device = "cpu"
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "ipywidgets": widgets,
        "device": device,
    }


def surprise_reference(p: float) -> float:
    """The loss of one prediction that gave probability ``p`` to the correct token: -ln p."""
    return -math.log(p)


def surprise_line(p: float) -> str:
    """What the demo widget shows for a probability ``p`` of the correct token."""
    nats = surprise_reference(p) + 0.0  # + 0.0: -ln 1 is -0.0, which would print as -0.000
    bar = "#" * min(40, round(nats * 4))
    return f"p(correct) = {p:.4f}  ->  loss = {nats:.3f} nats = {nats_to_bits(nats):.3f} bits  {bar}"


def _explain_surprise(fn, case, expected, got) -> str:
    """A value that is the surprise rounded to a few decimals, or capped at a tiny p: the
    question names that, not the formula (its nudge, about p = 1 and the logarithm, would not fit)."""
    try:
        g, e = float(got), float(expected)
    except (TypeError, ValueError):
        return ""
    if e > 20 and g < e - 1:  # p = 1e-12: a guard such as log(p + eps) or max(p, eps) caps the surprise
        return (
            f"at p = {case.args[0]:g} yours is {g:.4g}, not {e:.4g}: does something in your function "
            "stop the surprise from growing as p shrinks? Which p would make it infinite, and is that "
            "p one the exercise asks about?"
        )
    for digits in range(0, 7):
        if g != e and g == round(g, digits) and abs(g - e) <= 0.5 * 10.0**-digits:
            return (
                f"your value is the surprise rounded to {digits} decimals: the check compares about "
                "six significant digits. Where does your function round, and should a loss be rounded "
                "before anyone prints it?"
            )
    return ""


def check_surprise(fn) -> bool:
    """Grade ``fn(p) -> -ln p`` on fixed and seeded random probabilities."""
    rng = np.random.default_rng(0)
    fixed = [1.0, 0.5, 0.245, 0.0001, 1e-12]  # 1e-12: a guard such as log(p + 1e-9) is no longer harmless
    cases = [Case((p,)) for p in fixed] + [Case((float(p),)) for p in rng.uniform(1e-6, 1, 8)]
    return check(
        "surprise",
        fn,
        surprise_reference,
        cases,
        hint=(
            "The surprise must be 0 when p = 1 and grow without bound as p shrinks towards 0. Does "
            "yours? And which logarithm does the loss use?",
            "the loss is minus the natural log of p: -math.log(p); base 2 gives bits, not nats.",
        ),
        forbid={
            "lmcore.course.start.lesson.surprise_reference": "that is the reference: one line of math does it",
            # -ln p is notebook 01's loss of the logits [ln p, ln(1 - p)]: one line of math does it here
            "lmcore.handcalc.nll": "that is notebook 01's loss: one line of math does it",
            "lmcore.handcalc.log_softmax": "that is notebook 01's log-softmax: one line of math does it",
        },
        explain=_explain_surprise,
    )


def surprise_widget(value: float = 0.5):
    """Display the demo widget: a slider over :data:`SURPRISE_PS` (starting at ``value``)
    printing :func:`surprise_line` for the chosen p."""
    import ipywidgets as widgets

    from ..widgets import interact

    if value not in SURPRISE_PS:
        raise ValueError(f"value must be one of the slider's stops {SURPRISE_PS}, got {value!r}")
    slider = widgets.SelectionSlider(
        options=[(f"{p:g}", p) for p in SURPRISE_PS], value=value, description="p(correct)"
    )
    interact(lambda p: print(surprise_line(p)), p=slider, asks={"p(correct)": [0.5, 1e-4]})
