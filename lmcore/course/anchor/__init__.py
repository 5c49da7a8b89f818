"""Notebook 04 (the initial-loss anchor): the code its notebook imports, one module per part.

- ``lesson``: the ln V table, the first loss of a fresh GPT measured against ln V + sigma^2/2
  (sigma: the spread of the logits), a standard gain-1 init and what ....
- ``leak``: leaking data pipeline: nanoGPT-style pre-shifted targets cut one token short
  (targets equal to inputs), lmcore's fix and a short run of each.
- ``step0``: what the first loss (step 0, no training) can and cannot see.
- ``views``: the picture behind its widget: ln V against V with a fresh GPT's first loss, and
  the loss against the logits' spread sigma (ln V + sigma^2/2).

The notebook imports these modules (``from lmcore.course.anchor import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "leak", "step0", "views"]
