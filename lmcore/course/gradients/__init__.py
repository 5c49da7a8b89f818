"""Notebook 02 (gradients): the code its notebook imports, one module per part.

- ``lesson``
- ``views``
- ``backprop``

The notebook imports these modules (``from lmcore.course.gradients.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "views", "backprop"]
