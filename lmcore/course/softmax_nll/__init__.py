"""Notebook 01 (softmax and NLL): the code its notebook imports, one module per part.

- ``lesson``: the widget's state, the double-softmax bug, and the exercise checkers.
- ``band``: Exercise 3, the band the double-softmax bug traps the loss in, and its check.
- ``calibration``: Exercise 4, temperature scaling (the T that fits a held-out batch), and its check.
- ``views``: the pictures: the softmax bars, the -ln p curve, the double-softmax curves, and the
  explorer widget that redraws the bars live.

The notebook imports these modules (``from lmcore.course.softmax_nll import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["band", "calibration", "lesson", "views"]
