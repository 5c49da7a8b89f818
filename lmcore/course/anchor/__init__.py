"""Notebook 04 (the initial-loss anchor): the code its notebook imports, one module per part.

- ``lesson``
- ``leak``
- ``step0``
- ``views``

The notebook imports these modules (``from lmcore.course.anchor.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "leak", "step0", "views"]
