"""Notebook 07 (debugging label bugs): the code its notebook imports, one module per part.

- ``lesson``: each pipeline of ``pipelines`` trained a few steps with a tiny GPT, the
  verdicts on its loss, and its diagnosis by ``run_checks``.
- ``data``: toy task: the documents, the batches every pipeline trains on, and the loss floor.
- ``exercises``: two exercises and their checkers.
- ``incidents``: six bugs that shipped in widely used libraries (cited), reproduced, trained and
  diagnosed, with the correct pipeline padded and packed as controls.
- ``losses``: losses, right and wrong: ``loss_fn(logits (N, L, V), input_ids (N, L),
  attention_mask (N, L)) -> scalar``, one correct and six with a classic ....
- ``measure``: measurements for what a run_checks row only hints at: the weight of each target
  in a ragged batch, the leak across packed documents, EOS targets ....
- ``pipelines``: pipelines: the classic ways to train where "the loss falls but the target is
  wrong", each a row of ``PIPELINES`` (how batches are built, how the ....
- ``views``: what the notebook shows.

The notebook imports these modules (``from lmcore.course.debugging import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "data", "exercises", "incidents", "losses", "measure", "pipelines", "views"]
