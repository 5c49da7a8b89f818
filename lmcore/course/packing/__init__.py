"""Notebook 06 (packing and boundaries): the code its notebook imports, one module per part.

- ``lesson``: the toy vocabulary, the four packing policies (and BOS per document) and the
  exercise checkers.
- ``chat``: chat data: answer-only labels for supervised fine-tuning, for one turn and for
  multi-turn conversations, the example's logits, and the two ....
- ``leak``: (measure the leak): how far document B's outputs move when document A, packed before
  it in the same row, is replaced by a different one.
- ``views``: the picture behind its widget: one packed row under a policy (inputs, position ids,
  scored targets) next to its attention mask (the tensors come ....
- ``diagnoses``: what a wrong mask, wrong position ids or wrong chat labels got wrong at the first
  position that differs, as the question the checkers' first hint asks; and the whole-documents
  packing's goal (``packing_fault``, ``fewest_rows``), which any right layout meets.

The notebook imports these modules (``from lmcore.course.packing import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = ["lesson", "chat", "leak", "views", "diagnoses"]
