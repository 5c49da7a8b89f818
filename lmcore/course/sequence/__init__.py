"""Notebook 03 (from a sequence to one loss): the code its notebook imports, one module per part.

- ``lesson``
- ``exercises``
- ``views``
- ``attention``

The notebook imports these modules (``from lmcore.course.sequence.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "exercises", "views", "attention"]
