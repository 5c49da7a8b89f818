"""Notebook 07's two exercises and their checkers.

1. ``name_the_bugs``: five unseen pipelines, shown as code (:func:`show_mystery`); their
   ``run_checks`` reports narrow each one to a class of bug, reading the code decides which
   member (each mystery's signature is shared by another cause of :data:`BUG_CHOICES`).
2. ``my_loss_fn``: a completion-only loss written with ``F.cross_entropy`` (the first
   :data:`PROMPT` tokens of each row are a prompt, never targets), graded position by position
   from the gradient, with lmcore's loss and the notebook's ``loss_fn`` rejected, then run through
   ``run_checks(..., unscored=prompt_tokens)``.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from ...diagnose import gradient_reading, run_checks
from ...train.devices import cpu_threads
from ..autograding import when_grading
from ..checks import Case, CheckResult, check, check_choices
from ..toys import EOS, PAD, forward_with_mask
from .data import L, V
from .lesson import pipeline_gpt

__all__ = [
    "BUG_CHOICES",
    "PROMPT",
    "prompt_tokens",
    "mystery_pipelines",
    "show_mystery",
    "mystery_report",
    "check_mystery",
    "check_loss_fn",
]

BUG_CHOICES = {  # causes, finer than the signatures: some pairs share one
    "correct": "no bug",
    "same_position": "logits compared with the same position (no shift)",
    "double_shift": "shifted outside and inside the loss",
    "softmax_first": "softmax before the cross-entropy",
    "label_smoothing": "label smoothing that was not declared",
    "padding_scored": "padding positions scored (PAD -> PAD)",
    "mask_after_shift": "the last real token scored against the PAD after it",
    "batch_means": "per-row or per-micro-batch means averaged",
    "token_denominator": "summed NLL divided by the number of tokens, not of targets",
    "global_num_items": "summed NLL divided by a global num_items (correct once declared)",
    "eos_is_pad": "EOS ignored by its id because PAD = EOS",
    "specials_masked": "every special token masked by id, EOS included (PAD != EOS)",
    "detached": "some positions' logits cut from the graph",
    "logits_rescaled": "the logits rescaled inside the loss",
    "sees_future": "the model sees the future",
    "ignores_mask": "the model is called without the attention mask",
    "no_position_reset": "left padding without position reset",
}


def loss_p(logits, input_ids, attention_mask):
    targets = input_ids[:, 1:].clone()
    targets[attention_mask[:, :-1] == 0] = -100  # padding is not a target
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), targets)


def loss_q(logits, input_ids, attention_mask):
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], reduction="sum")
    return nll / attention_mask.sum()  # mean over the batch's tokens


def loss_r(logits, input_ids, attention_mask):
    labels = input_ids.masked_fill(attention_mask == 0, -100)[:, 1:]
    keep = labels != -100
    logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return -(logp * keep).sum() / keep.sum()


def loss_s(logits, input_ids, attention_mask):
    labels = input_ids.clone()
    for special in (PAD, EOS):  # special tokens are not targets
        labels[labels == special] = -100
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:])


def loss_t(logits, input_ids, attention_mask):
    labels = input_ids.masked_fill(attention_mask == 0, -100)[:, 1:]
    with torch.no_grad():  # the first 4 positions' loss, kept for the log
        head = F.cross_entropy(logits[:, :4].transpose(1, 2), labels[:, :4], reduction="sum")
    rest = F.cross_entropy(logits[:, 4:-1].transpose(1, 2), labels[:, 4:], reduction="sum")
    return (head + rest) / (labels != -100).sum()


_MYSTERIES = {"P": loss_p, "Q": loss_q, "R": loss_r, "S": loss_s, "T": loss_t}
# the answers as answer_digest("name_the_bugs", letter, cause): the key does not give them away
_MYSTERY_KEY = {
    "P": "ebb7d0a7dfc7e621b9a8937184df4d7c4b263dcf961156c27d5ae6df5f21209e",
    "Q": "31133423d3bfd91bd22990973721c0523178f92fe1e084d2080aaba5b136aa97",
    "R": "632c4df98fb260a6d2a976527a28566f23c51e61cb9c68d1b1c26334e2139f65",
    "S": "cd428ed84c22b90181b2229c55d398d72436929f4addc09e65a35a792e6fa74f",
    "T": "872d70375f821331a1c58d75112841a9f25ca2f3733447d176ea5506096f7074",
}


def mystery_pipelines(seed: int = 0) -> dict:
    """Five pipelines ``{letter: (forward, loss_fn)}`` on one fresh tiny GPT called the correct
    way (padding as its own document, positions from the mask); only the losses differ."""
    model = pipeline_gpt(seed)
    forward = lambda ids, mask: forward_with_mask(model, ids, mask)  # noqa: E731
    return {letter: (forward, loss) for letter, loss in _MYSTERIES.items()}


def show_mystery(letter: str) -> None:
    """Print the code of mystery ``letter``'s loss (PAD = 0, EOS = 1, as everywhere here)."""
    if letter not in _MYSTERIES:
        raise ValueError(f"letter must be one of {sorted(_MYSTERIES)}; got {letter!r}")
    print(inspect.getsource(_MYSTERIES[letter]).rstrip())


def mystery_report(letter: str, seed: int = 0):
    """``run_checks`` on mystery pipeline ``letter`` (PAD 0, EOS 1, as for every pipeline here)."""
    if letter not in _MYSTERIES:
        raise ValueError(f"letter must be one of {sorted(_MYSTERIES)}; got {letter!r}")
    forward, loss_fn = mystery_pipelines(seed)[letter]
    with cpu_threads(1):
        return run_checks(forward, loss_fn, vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS)


_HINTS = {  # one question per mystery: a failure asks one of them, in turn (see check_mystery)
    "P": "its one failing row, padding_unscored, has two causes; on which side of the shift (input "
    "tokens or targets) does its code set -100?",
    "Q": "zero_logits fails; in a row of n real tokens, how many targets are there, and what does "
    "attention_mask.sum() count?",
    "R": "no row fails; line by line, which targets does keep select, and is the result a mean over "
    "exactly those?",
    "S": "eos_scored has two causes; are PAD and EOS one id here or two, and which ids does its loop "
    "turn into -100?",
    "T": "all_scored and equal_weights fail; which positions change the value but get no gradient, "
    "and which line decides that?",
}

_NO_SEARCH = "that searches the answer key: read each mystery's code and report instead"
_FORBID_SEARCH = {
    "lmcore.course.checks.answer_digest": _NO_SEARCH,
    "hashlib.sha256": _NO_SEARCH,
    "hashlib.new": _NO_SEARCH,
    "lmcore.course.checks.check_choices": "that asks the checker: the checker is no oracle, the code is",
    "lmcore.course.debugging.exercises.check_mystery": "that asks the checker: the checker is no oracle, "
    "the code is",
}


def check_mystery(answers_fn):
    """Grade ``answers_fn() -> {letter: key of BUG_CHOICES}`` for the five mysteries.

    The key holds salted digests (:func:`lmcore.course.checks.answer_digest`, salted with the
    exercise's name and the letter), so reading it gives nothing away; with 17 choices a search
    over them would, so ``answers_fn`` may not hash (``answer_digest``, ``hashlib``) nor call
    this checker. A failure is no oracle: it says that not all five are right, never how many
    nor which (a count, or "P is wrong", lets a learner change one letter at a time until the
    line moves). The one question it adds is about the mystery whose turn it is, P on the first
    failure, Q on the second and so on: a rule that depends on the number of tries only, never on
    the answers, so it tells nothing about which is right, and five failures have asked about
    every mystery once. An answer that is not a key of BUG_CHOICES, or a missing letter, is
    named: that says nothing about the key either."""
    return check_choices(
        "name_the_bugs",
        answers_fn,
        _MYSTERY_KEY,
        _HINTS,
        choices=BUG_CHOICES,
        forbid=_FORBID_SEARCH,
        hint=(
            "For each mystery, which of run_checks' checks fail, and which causes does each failing "
            "check name? Which of those causes fits the code you see?",
            "a failing check narrows the causes, the code decides between them: padding_unscored "
            "asks on which side (input or target) the mask sets -100, zero_logits what a count "
            "counts, eos_scored whether PAD and EOS are one id, all_scored which positions the "
            "gradient never reaches; where no check fails, read the code line by line.",
        ),
    )


PROMPT = 3  # completion-only: the first 3 tokens of each row are the prompt


def prompt_tokens(input_ids, attention_mask):
    """True at the prompt tokens (the first PROMPT of each row): ``run_checks``'s ``unscored=``."""
    return torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids) < PROMPT


def _completion_loss(logits, ids, mask):  # the reference, hidden from the notebook
    labels = ids.masked_fill((mask == 0) | prompt_tokens(ids, mask), -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


def _reading(fn):
    """What the checker compares: each position's weight (from the gradient at zero logits) and
    the loss at the case's logits."""

    def read(logits, ids, mask):
        value = fn(logits, ids, mask)
        weight = gradient_reading(fn, ids, mask, logits.shape[-1])[0]
        value = value.detach() if isinstance(value, torch.Tensor) else value
        return {"weight of each position's logits": weight.detach(), "loss": value}

    return read


def _loss_cases():
    g = torch.Generator().manual_seed(7)
    cases = []
    for n, length, vocab, short in [(2, 8, 6, 6), (3, 9, 7, 5), (1, 6, 5, 6), (4, 10, 11, 4)]:
        ids = torch.randint(2, vocab, (n, length), generator=g)
        lengths = torch.tensor([length] + [short] * (n - 1))
        mask = (torch.arange(length)[None] < lengths[:, None]).long()
        ids = ids.masked_fill(mask == 0, PAD)
        logits = 2 * torch.randn(n, length, vocab, generator=g)
        cases.append(
            Case(
                (logits, ids, mask), label=f"N={n}, L={length}, V={vocab}, rows of {lengths.tolist()} tokens"
            )
        )
    return cases


_FORBID = {
    "lmcore.loss.causal_lm_loss": "write it with torch.nn.functional.cross_entropy, not lmcore's loss",
    "lmcore.loss.chunked_causal_lm_loss": "write it with torch.nn.functional.cross_entropy",
    "lmcore.course.debugging.losses.loss_correct": "write it with torch.nn.functional.cross_entropy",
    "lmcore.course.debugging.exercises._completion_loss": "that is the check's reference: write it yourself",
}


@when_grading
def check_loss_fn(fn):
    """Grade a completion-only ``fn(logits, input_ids, attention_mask) -> scalar``: the weight of
    every position (first differing position named) and the value, against a hidden reference,
    lmcore's loss forbidden; then ``run_checks`` with ``unscored=prompt_tokens``."""
    result = check(
        "my_loss_fn",
        _reading(fn),
        _reading(_completion_loss),
        _loss_cases(),
        atol=1e-5,
        forbid=_FORBID,
        hint=(
            "Which positions should be scored: is the token after each one a real token after the "
            "prompt? And does every scored position weigh the same?",
            "labels = input_ids with -100 where attention_mask is 0 or the token is among the first "
            "PROMPT; then logits[:, :-1] against labels[:, 1:], a mean over the targets left.",
        ),
    )
    if not result:
        return result
    model = pipeline_gpt(0)
    with cpu_threads(1):
        report = run_checks(
            lambda ids, mask: forward_with_mask(model, ids, mask),
            fn,
            vocab_size=V,
            seq_len=L,
            pad_id=PAD,
            eos_id=EOS,
            unscored=prompt_tokens,
        )
    print(
        f"{'✓' if report.passed else '✗'} run_checks(..., unscored=prompt_tokens) on your loss: "
        f"{str(report).splitlines()[0]}"
    )
    return result if report.passed else CheckResult(False, str(report).splitlines()[0])
