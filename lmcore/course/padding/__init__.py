"""Notebook 05 (padding and perplexity): the code its notebook imports, one module per part.

- ``lesson``: the toy batch and GPT, the pad-id test, the attention mask as the model receives
  it, and a toy "model" that improves with context.
- ``accumulation``: gradient accumulation with uneven padding, on one process and across data-
  parallel ranks (simulated in one process), and the exercise checker.
- ``exercises``: exercise checkers for labels and perplexity: the pad = EOS collate fix
  (:func:`check_eos_padded_labels`) and the perplexity of a text longer than ....
- ``perplexity``: perplexity of one fixed evaluation set however it is batched (the widget's
  state: :func:`compare_batchings`), and the perplexity of a text longer ....
- ``views``: the pictures: the three grids of one padded batch (inputs, attention mask, scored
  targets) and the bars of the three perplexity averages.

The notebook imports these modules by name (``from lmcore.course.padding import accumulation,
exercises, perplexity, views`` and ``lesson as padding``), the kit (``lmcore.course.checks``,
``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "accumulation", "exercises", "perplexity", "views"]
