"""Notebook 01 (softmax and NLL): the code its notebook imports, one module per part.

- ``lesson``
- ``views``

The notebook imports these modules (``from lmcore.course.softmax_nll.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "views"]
