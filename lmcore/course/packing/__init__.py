"""Notebook 06 (packing and boundaries): the code its notebook imports, one module per part.

- ``lesson``
- ``chat``
- ``leak``
- ``views``

The notebook imports these modules (``from lmcore.course.packing.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "chat", "leak", "views"]
