"""The answer matrix of the course's exercises: for each, right answers written differently (one
in float32), plausible wrong answers, the reference and the ruled-out shortcut.

Each ``_answers_NN_MM.py`` module beside this one holds ``ANSWERS``, a dict from the exercise's
function name (the name ``show_solution`` takes) to :class:`Answers`; ``test_exercise_matrix.py``
runs them all and fails when an exercise of the notebooks has no entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Answers:
    """``check(fn)`` grades ``fn`` (a wrapper when the checker takes more than the function).

    ``right``: name -> a correct function written another way; at least three, one whose name
    contains ``float32`` (computed in float32), unless ``no_float32`` says why the exercise has no
    float quantity (labels, masks, choices). ``wrong``: name -> a plausible wrong answer; at least
    three. ``refused``: name -> (function, a substring the failure line must hold), for the
    reference and for the shortcut the exercise rules out; at least two. ``first_hints``: name of a
    wrong answer -> a substring its first failure's hint must hold, where the checker keys that hint
    to the mistake (the property it broke) instead of one nudge for every mistake.
    """

    check: Callable
    right: dict[str, Callable]
    wrong: dict[str, Callable]
    refused: dict[str, tuple[Callable, str]]
    no_float32: str = ""
    notes: dict[str, str] = field(default_factory=dict)
    first_hints: dict[str, str] = field(default_factory=dict)
