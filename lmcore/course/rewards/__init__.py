"""Notebook 10 (what the loss rewards): the code its notebook imports, one module per part.

- ``lesson``: tiny worlds of facts, the runs trained on them, the probes that score one answer,
  and the set-loss exercise checker.
- ``recall``: when a fact is learned: the mean loss over all targets against the answer loss of
  the facts, watched over a run (the mean falls first, the facts come later).
- ``compute``: compute and generation: what one training step costs (C = 6 N D, counted by
  PyTorch's FLOP counter), how many targets a causal and a masked LM get ....
- ``directions``: the price of one direction: left to right vs a fill-in on the same blocks, a
  task as a prefix with no task head, and who reads whom in an encoder, a decoder and an
  encoder-decoder.
- ``data``: data policy: how much context the targets of a block get, how many targets a padded
  or packed batch really scores, and the char-level runs on the ....
- ``duplicates``: duplicated data: a training set of fixed size in which a fraction of the
  characters is one slice repeated, the rest distinct text, trained for the ....
- ``exercises``: exercises: a loss that accepts several right answers (stable at logits near
  1000), the context coverage of a row, and the same coverage in a ....
- ``inference``: the inference path: greedy generation recomputing every prefix and with a
  key/value cache over the model's modules, and the prefill / decode timing.
- ``scheduled``: scheduled sampling: the char model trained with teacher forcing and with a share
  of its inputs replaced by its own guesses, probed with one wrong character.
- ``views``: pictures and widget: answer losses per kind of fact, the data-policy explorer
  (block length and context needed -> coverage; padded vs packed ....

The notebook imports these modules (``from lmcore.course.rewards import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = [
    "lesson",
    "recall",
    "compute",
    "directions",
    "data",
    "duplicates",
    "exercises",
    "inference",
    "scheduled",
    "views",
]
