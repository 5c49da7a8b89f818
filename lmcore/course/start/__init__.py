"""Notebook 00 (start here): the code its notebook imports, one module per part.

- ``lesson``: the environment check and the demonstration exercise (surprise = -ln p).

The notebook imports these modules (``from lmcore.course.start import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson"]
