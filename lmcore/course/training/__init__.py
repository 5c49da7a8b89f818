"""Notebook 08 (the training run): the code its notebook imports, one module per part.

- ``lesson``
- ``reference``
- ``run``
- ``views``
- ``exposure``
- ``exposure_views``

The notebook imports these modules (``from lmcore.course.training.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "reference", "run", "views", "exposure", "exposure_views"]
