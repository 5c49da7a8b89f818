"""Notebook 10 (what the loss rewards): the code its notebook imports, one module per part.

- ``lesson``
- ``compute``
- ``data``
- ``duplicates``
- ``exercises``
- ``guard``
- ``views``

The notebook imports these modules (``from lmcore.course.rewards.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "compute", "data", "duplicates", "exercises", "guard", "views"]
