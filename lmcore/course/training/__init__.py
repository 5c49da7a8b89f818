"""Notebook 08 (the training run): the code its notebook imports, one module per part.

- ``lesson``: AdamW by hand, the phases of a loss curve, the sampling widget's state
  (:func:`sampling_state`), what a sample and a top-p filter must satisfy on ....
- ``reference``: reference run: the ``cpu`` preset's run, trained once and committed with lmcore
  (``lmcore/course/training/reference_run/``), so that grading (and ....
- ``run``: view of whichever corpus its preset trains on: the same few questions asked of a one-
  stream text corpus (``python-docs``, the ``cpu`` preset) and ....
- ``views``: plots and the sampling widget: the loss curves of a run (with ln V, the unigram
  entropy and the phases of ....
- ``dynamics``: what the first steps of a run learn (the loss as frequency entropy, frequency gap
  and context, measured densely on a retrained start) and a small training slice a run overfits.
- ``exercises``: the learning-rate schedule exercise's checker (a schedule judged against the
  goals the exercise states: warmup, a gentle decay, ``min_lr`` after).
- ``exposure``: exposure bias measured.
- ``exposure_views``: the plots of the exposure-bias measurements of
  :mod:`lmcore.course.training.exposure`.
- ``lr_sweep``: one small model trained at several constant learning rates (too small crawls,
  too large diverges), and its plot.
- ``lr_prediction``: the learner's prediction of that sweep, recorded before it runs and judged
  by it.
- ``watch``: the run watched: a progress bar, the loss curve redrawn at every record, and what
  an interrupt leaves (the partial run, then the reference run for the rest of the notebook).

The notebook imports these modules (``from lmcore.course.training import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = [
    "lesson",
    "dynamics",
    "exercises",
    "reference",
    "run",
    "views",
    "exposure",
    "exposure_views",
    "lr_sweep",
    "lr_prediction",
    "watch",
]
