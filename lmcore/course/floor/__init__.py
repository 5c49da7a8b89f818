"""Notebook 09 (the loss floor): the code its notebook imports, one module per part.

- ``lesson``: entropy and KL, the floor of a sample, the floors of models that read less (one
  token back, nothing), and the exact per-token floor of chat arithmetic ....
- ``exercises``: exercises: the lowest mean loss any model can reach on a given sample of
  (context, next token) pairs, the chance a constrained sampler writes a token, ....
- ``run``: the floor run: a small float64 GPT trained on chat arithmetic, whose loss the
  notebook compares with the exact floor of ....
- ``sums``: did the floor model learn to add, or a table of 100 sums? Every sum of 0..9 + 0..9
  occurs in the training turns dozens of times, and the ....
- ``tokens``: the floor token by token.
- ``exact_match``: what a per-token loss does not measure: the answer-token loss against
  whole-answer exact match over a run's checkpoints.
- ``decoding``: constrained decoding: the answer's logits masked to its grammar, against free
  sampling and greedy decoding.
- ``bpe``: UTF-8 bytes per character by script, and a toy byte-pair encoder.
- ``scaling``: the floor run at a few widths and the fit L(N) = E + A N^-alpha.
- ``explorer_runs``: the floor explorer's short runs, trained once per setting and committed
  (``explorer_runs.json``), tied to the code by a test.
- ``views``: pictures and widget: the floor run against H(p), the per-slot breakdown, and the
  operand-range explorer (a short cached run per setting, ....

The notebook imports these modules (``from lmcore.course.floor import views``), the kit
(``lmcore.course.checks``, ``verdict``, ``widgets``, ...) and the core; no other topic.
"""

__all__ = [
    "lesson",
    "exercises",
    "run",
    "sums",
    "tokens",
    "exact_match",
    "decoding",
    "bpe",
    "scaling",
    "explorer_runs",
    "views",
]
