"""Notebook 05 (padding and perplexity): the code its notebook imports, one module per part.

- ``lesson``
- ``accumulation``
- ``exercises``
- ``perplexity``
- ``views``

The notebook imports these modules (``from lmcore.course.padding.lesson import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "accumulation", "exercises", "perplexity", "views"]
