"""Notebook 03's Exercise 2: a colleague's label-smoothed causal-LM loss with two faults, and the
check of the learner's diagnosis (which line causes each symptom) before the rewrite.

The faults: ``torch.log(torch.softmax(...))`` rounds a probability of e^-300 to 0 in float32, so at
logits of +-150 the loss is inf or nan (no number); and the smoothing term is averaged over every
position, those whose target is -100 included, so on a batch with ignored targets it returns
another number than the right loss (pytorch/pytorch#73205). On a batch with neither, it is right.
"""

from __future__ import annotations

import numbers

import torch

from ...shift import IGNORE_INDEX
from ..checks import check_choices

__all__ = ["colleague_smoothed_loss", "SYMPTOMS", "check_colleague_faults"]


def colleague_smoothed_loss(logits, labels, eps):
    """Label-smoothed causal-LM loss: logits (N, L, V), unshifted labels (N, L), -100 = ignored."""
    logits, targets = logits[:, :-1], labels[:, 1:]  # position t predicts token t + 1
    logp = torch.log(torch.softmax(logits, dim=-1))  # (N, L-1, V)
    valid = targets != IGNORE_INDEX
    picked = logp.gather(-1, targets.clamp(min=0)[..., None])[..., 0]  # log p[target], (N, L-1)
    nll = -(picked * valid).sum() / valid.sum()  # the target's part, over the valid targets
    uniform = -logp.mean(dim=-1).mean()  # the mean -log p over the V tokens
    return (1 - eps) * nll + eps * uniform


# the two symptoms the notebook names, each caused by one line of colleague_smoothed_loss (the
# `def` line is 1); salted digests, so that reading the key gives nothing away
SYMPTOMS = ("another number", "no number")
_NAME = "colleague_faults"
_KEY = {
    "another number": "d08abe47bc4e4da07ccd4dab241bdfc0475677a325411aa28273ffa79f108857",
    "no number": "538d3a57fcaab83dc15624cfe2e2d8fe7168e59c6a333a6f2b061f8c419dab2f",
}
_HINTS = {
    "another number": "on a batch whose rows hold targets of -100, which line reads the logits at the "
    "positions no target is scored at, and lets them into the loss?",
    "no number": "at logits of +-150 in float32, which line is the first to hold an infinite value?",
}
_NO_SEARCH = "that searches the answer key: run the colleague's function and read its lines instead"
_FORBID = {
    "lmcore.course.checks.answer_digest": _NO_SEARCH,
    "hashlib.sha256": _NO_SEARCH,
    "hashlib.new": _NO_SEARCH,
    "lmcore.course.checks.check_choices": "that asks the checker: the checker is no oracle, the code is",
    "lmcore.course.sequence.colleague.check_colleague_faults": "that asks the checker: the checker is no "
    "oracle, the code is",
}


def _as_line(answer):
    """A line number written as any integer (``8``, ``np.int64(8)``, ``8.0``, ``torch.tensor(8)``) as an int; anything
    else as it is, for the check to name."""
    if hasattr(answer, "item") and getattr(answer, "ndim", 1) == 0:  # a 0-d tensor or array
        answer = answer.item()
    if isinstance(answer, numbers.Integral) or (isinstance(answer, float) and answer.is_integer()):
        return int(answer)
    return answer


def check_colleague_faults(fn) -> bool:
    """Grade ``fn() -> {"another number": line, "no number": line}``: for each symptom of
    :func:`colleague_smoothed_loss`, the number of the line that causes it (its ``def`` line is 1).
    As for every ``check_choices`` exercise, a failure says only that not both are right."""

    def answers():
        got = fn()
        return {k: _as_line(v) for k, v in got.items()} if isinstance(got, dict) else got

    return check_choices(
        _NAME,
        answers,
        _KEY,
        _HINTS,
        choices=range(1, 10),
        forbid=_FORBID,
        hint=(
            "Run the colleague's function and lmcore's loss side by side on batches of your own: "
            "one with a few targets of -100, one with logits of +-150 in float32. Which line is the "
            "first to differ from what it should hold?",
            "another number: line 8, the smoothing term averaged over every position (ignored ones "
            "included); no number: line 4, log of softmax, which is -inf where the probability "
            "rounds to 0 (use log_softmax).",
        ),
    )
