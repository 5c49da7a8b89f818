"""Notebook 07 (debugging label bugs): the code its notebook imports, one module per part.

- ``lesson``
- ``data``
- ``exercises``
- ``losses``
- ``measure``
- ``pipelines``
- ``views``

The notebook imports these modules (``from lmcore.course.debugging.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "data", "exercises", "losses", "measure", "pipelines", "views"]
