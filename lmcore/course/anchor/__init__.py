"""Notebook 04 (the initial-loss anchor): the code its notebook imports, one module per part.

- ``lesson``: the ln V table, the first loss of a fresh GPT measured against ln V + sigma^2/2
  (sigma: the spread of the logits), a standard gain-1 init and what ....
- ``spread``: Exercise 1, the expected loss of i.i.d. N(0, sigma^2) logits, predicted before the
  page derives it: its expectation, cases and checker.
- ``diagnoses``: what a wrong answer to Exercise 2 (the first loss from a model's logits) did, as
  a question about the property it broke (the checker's first hint).
- ``leak``: leaking data pipeline: nanoGPT-style pre-shifted targets cut one token short
  (targets equal to inputs), lmcore's fix and a short run of each.
- ``step0``: what the first loss (step 0, no training) can and cannot see.
- ``views``: the picture behind its widget: the first loss's excess over ln V against V at the
  init's spread sigma of the logits (sigma^2/2 once V is large), and the loss against sigma at
  that V (ln V + sigma^2/2).

The notebook imports these modules (``from lmcore.course.anchor import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "leak", "step0", "views", "diagnoses", "spread"]
