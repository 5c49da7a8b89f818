"""Notebook 02 (gradients): the code its notebook imports, one module per part.

- ``lesson``: the widget's state, finite differences and the checkers.
- ``views``: the pictures: the loss along one logit with its tangent next to the gradient bars,
  and the explorer widget that redraws them live.
- ``backprop``: the gradient carried from the logits into a linear output head, and one layer
  further, into a tied token embedding.

The notebook imports these modules (``from lmcore.course.gradients import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "views", "backprop"]
