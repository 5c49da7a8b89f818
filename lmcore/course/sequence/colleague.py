"""Notebook 03's Exercise 2: a colleague's label-smoothed causal-LM loss with two faults, and the
checks of the learner's diagnosis: which line causes each symptom, and a batch that shows each
one (the test a reviewer would write before the fix).

The faults: ``torch.log(torch.softmax(...))`` rounds a probability of e^-300 to 0 in float32, so at
logits of +-150 the loss is inf or nan (no number); and the smoothing term is averaged over every
position, those whose target is -100 included, so on a batch with ignored targets it returns
another number than the right loss (pytorch/pytorch#73205). On a batch with neither, it is right.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch

from ...loss import causal_lm_loss
from ...shift import IGNORE_INDEX
from ..checks import Case, apart, check, check_choices, key_search_refused
from ..checks.guard import available

__all__ = [
    "colleague_smoothed_loss",
    "SYMPTOMS",
    "check_colleague_faults",
    "symptom_batches",
    "check_symptom_batches",
]


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
    "another number": "which batches make it return another number? Change one thing at a time (targets "
    "of -100, the logits' size, the shapes): which line is the first to hold something it should not?",
    "no number": "which batches make it return inf or nan? Change the logits' size and dtype: which line "
    "is the first to hold an infinite value?",
}
_FORBID = key_search_refused(
    "run the colleague's function and read its lines instead",
    "lmcore.course.sequence.colleague.check_colleague_faults",
)


def _as_line(answer):
    """A line number written as any integer (``8``, ``np.int64(8)``, ``8.0``, ``torch.tensor(8)``,
    ``"8"``, ``"line 8"``) as an int; anything else as it is, for the check to name."""
    if isinstance(answer, str):
        words = answer.lower().replace("line", " ").split()
        if len(words) == 1 and words[0].isdigit():
            return int(words[0])
    if hasattr(answer, "item") and getattr(answer, "ndim", 1) == 0:  # a 0-d tensor or array
        answer = answer.item()
    if isinstance(answer, numbers.Integral) or (isinstance(answer, float) and answer.is_integer()):
        return int(answer)
    return answer


def check_colleague_faults(fn) -> bool:
    """Grade ``fn() -> {"another number": line, "no number": line}``: for each symptom of
    :func:`colleague_smoothed_loss`, the number of the line that causes it (its ``def`` line is 1).
    As for every ``check_choices`` exercise, a failure says only that not both are right."""

    return check_choices(
        _NAME,
        fn,
        _KEY,
        _HINTS,
        choices=range(1, 10),
        forbid=_FORBID,
        as_answer=_as_line,
        hint=(
            "Run the colleague's function and lmcore's loss side by side on batches of your own, "
            "changing one thing at a time (targets of -100, the logits' size, the shapes). Which line "
            "is the first to differ from what it should hold?",
            "another number: line 8, the smoothing term averaged over every position (ignored ones "
            "included); no number: line 4, log of softmax, which is -inf where the probability "
            "rounds to 0 (use log_softmax).",
        ),
    )


# ---------------------------------------------------------------- part 2: a batch for each symptom

EPS = 0.1  # the smoothing both batches are judged at


def line_8_fixed(logits, labels, eps):
    """The colleague's function with only its smoothing term masked (log of softmax kept): where it
    agrees with lmcore's loss, a difference of the colleague's is the smoothing over padding alone."""
    logits, targets = logits[:, :-1], labels[:, 1:]
    logp = torch.log(torch.softmax(logits, dim=-1))
    valid = targets != IGNORE_INDEX
    picked = logp.gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    per_target = -(1 - eps) * picked - eps * logp.mean(dim=-1)
    return (per_target * valid).sum() / valid.sum()


def symptom_batches() -> dict:
    """The course's own batches, one per symptom (float32): "another number", rows with ignored
    targets whose logits there differ from the rest; "no number", a row whose target sits at -150
    beside a +150 logit, so its probability is e^-300, 0 in float32."""
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 6, 7, generator=g)
    labels = torch.randint(7, (2, 6), generator=g)
    labels[1, 3:] = IGNORE_INDEX
    logits[1, 2:] *= 4.0  # the positions whose targets are ignored: sharper than the rest
    large = torch.zeros(1, 3, 5)
    large[0, 0, 1], large[0, 0, 2] = -150.0, 150.0
    return {"another number": (logits, labels), "no number": (large, torch.tensor([[0, 1, 4]]))}


def _as_batch(pair):
    """(logits, labels) as tensors, or a sentence saying what is wrong with ``pair``."""
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        return f"expected a pair (logits, labels), got {type(pair).__name__}"
    logits, labels = (torch.as_tensor(np.asarray(x)) if isinstance(x, np.ndarray) else x for x in pair)
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point() or logits.dim() != 3:
        return "the logits must be a floating-point tensor of shape (N, L, V)"
    if not isinstance(labels, torch.Tensor) or labels.dtype not in (torch.int64, torch.int32):
        return "the labels must be an integer tensor (torch.long) of shape (N, L)"
    if labels.shape != logits.shape[:2] or labels.shape[1] < 2:
        return f"the labels' shape {tuple(labels.shape)} must be the logits' (N, L), with L >= 2"
    V = logits.shape[-1]
    if not bool(((labels == IGNORE_INDEX) | ((labels >= 0) & (labels < V))).all()):
        return f"every label must be a token id in [0, {V}) or -100"
    return logits.detach(), labels.long()


def _judge_one(symptom: str, pair) -> tuple[str, str]:
    batch = _as_batch(pair)
    if isinstance(batch, str):
        return (
            f'"{symptom}": {batch}',
            "does your batch have the shapes and types the colleague's function takes?",
        )
    logits, labels = batch
    with torch.no_grad():
        try:
            ours = float(causal_lm_loss(logits, labels, label_smoothing=EPS))
        except ValueError:  # every target after the shift is -100: the mean is 0/0
            ours = float("nan")
        theirs = float(colleague_smoothed_loss(logits, labels, EPS))
    if not np.isfinite(ours):
        return (
            f'"{symptom}": lmcore\'s loss gives no number on your batch either',
            "a batch no loss can score shows nothing about this one: does it have a target that is "
            "not -100, and logits a float can hold?",
        )
    if symptom == "no number":
        if np.isfinite(theirs):
            a, b = apart(theirs, ours)
            return (
                f"\"no number\": the colleague's loss is {a} on your batch (lmcore's {b}), a number",
                "which step of the colleague's function could stop giving a number, and what must the "
                "logits be like for float32 to get it there?",
            )
        return "", ""
    if not np.isfinite(theirs):
        return (
            f'"another number": the colleague\'s loss is {theirs} on your batch, no number at all',
            "that is the other symptom: can you find a batch where it returns a number, and the wrong one?",
        )
    if abs(theirs - ours) <= 1e-4:
        a, b = apart(theirs, ours)
        return (
            f"\"another number\": the colleague's loss is {a} on your batch and lmcore's {b}, the same to "
            "1e-4",
            "what must a batch have for the fault behind 'another number' to change the result, and "
            "does yours have it?",
        )
    with torch.no_grad():
        masked = float(line_8_fixed(logits, labels, EPS))
    if abs(masked - ours) > max(1e-5 * (1 + abs(ours)), 0.1 * abs(theirs - ours)):  # the fault dominates
        a, b = apart(theirs, ours)
        return (
            f"\"another number\": the colleague's loss is {a} on your batch and lmcore's {b}, but not "
            "for that fault alone: with it repaired, the colleague's function still differs from "
            "lmcore's here (digits lost elsewhere, to the logits' size or to the dtype)",
            "can you show the fault on a batch where nothing else goes wrong?",
        )
    return "", ""


def _judge(got) -> tuple[str, str]:
    if not isinstance(got, dict) or set(got) != set(SYMPTOMS):
        return (
            f"expected a dict with the keys {list(SYMPTOMS)}, got {got!r}"[:200],
            "what does your function return?",
        )
    for symptom in SYMPTOMS:
        what, question = _judge_one(symptom, got[symptom])
        if what:
            return what, question
    return "", ""


def check_symptom_batches(fn, *, quiet: bool = False):
    """Grade ``fn() -> {"another number": (logits, labels), "no number": (logits, labels)}``: on the
    first, :func:`colleague_smoothed_loss` at eps = 0.1 returns a number other than lmcore's
    ``causal_lm_loss(label_smoothing=0.1)`` (by more than 1e-4, and mostly through that fault: with it repaired, what is left of the
    gap is under a tenth of it); on the
    second it returns inf or nan where lmcore's loss is finite."""
    own = "lmcore.course.sequence.colleague.symptom_batches"
    return check(
        "a batch for each symptom",
        fn,
        None,
        [Case((), label="your two batches")],
        judge=_judge,
        hint=(
            "Run the colleague's function and causal_lm_loss(logits, labels, label_smoothing=0.1) on "
            "batches of your own, changing one thing at a time: which change makes them part?",
            "another number: labels with -100 at some positions and logits there unlike the rest (the "
            "smoothing term reads them); no number: float32 logits of +-150 in one row, so a probability "
            "rounds to 0 and its log is -inf.",
        ),
        quiet=quiet,
        forbid={name: "that is the course's own answer: make your own batches" for name in available([own])},
    )
