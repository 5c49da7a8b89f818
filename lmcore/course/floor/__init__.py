"""Notebook 09 (the loss floor): the code its notebook imports, one module per part.

- ``lesson``
- ``exercises``
- ``run``
- ``sums``
- ``tokens``
- ``views``

The notebook imports these modules (``from lmcore.course.floor.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "exercises", "run", "sums", "tokens", "views"]
