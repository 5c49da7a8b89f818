"""Notebook 03 (from a sequence to one loss): the code its notebook imports, one module per part.

- ``lesson``: the word vocabulary, the context->target table, the two cheating models (no shift:
  copies; no causal mask: peeks), the widget's table and the ....
- ``exercises``: exercise checkers: per-position losses through ``F.cross_entropy``'s ``(N, C,
  ...)`` layout, and a causal-LM loss built by hand (log_softmax, ....
- ``colleague``: Exercise 2's colleague: a label-smoothed loss with two faults, and the check of
  the learner's diagnosis (which line causes each symptom).
- ``diagnoses``: what a wrong answer to the two loss exercises did (positions read as classes, a
  shift the wrong way, a mean over the wrong count), as a question in place of the nudge.
- ``views``: the picture: the label shift, each input pointing at the token it is scored
  against.
- ``attention``: what one attention head computes, and the causal mask drawn as an L x L grid
  (the lower triangle).

The notebook imports these modules (``from lmcore.course.sequence import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "exercises", "colleague", "diagnoses", "views", "attention"]
