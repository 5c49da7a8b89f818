"""Notebook 07's two exercises: name the bug of six mystery pipelines (each a forward and a
loss on one fresh :func:`lmcore.course.debugging.pipeline_gpt`, fed padded batches), and write
a loss_fn that passes ``run_checks``; with their checkers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..diagnose import run_checks
from ..shift import IGNORE_INDEX
from ..train.devices import cpu_threads
from .checks import Case, check, check_choices
from .debugging import pipeline_gpt
from .debugging_data import L, V
from .debugging_losses import loss_correct
from .debugging_pipelines import PIPELINES
from .toys import EOS, PAD, forward_with_mask, forward_without_causal_mask

__all__ = ["BUG_CHOICES", "mystery_pipelines", "mystery_report", "check_mystery", "check_loss_fn"]


BUG_CHOICES = {k: p.title for k, p in PIPELINES.items()}


def _mystery_loss_a(logits, ids, mask):  # "ignore the special tokens": EOS too
    labels = ids.masked_fill((mask == 0) | (ids == PAD) | (ids == EOS), IGNORE_INDEX)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:])


def _mystery_loss_c(logits, ids, mask):  # correct: log-probabilities are fine logits
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)[:, 1:]
    logp = F.log_softmax(logits[:, :-1], dim=-1)
    return F.nll_loss(logp.reshape(-1, V), labels.reshape(-1))


def _mystery_loss_d(logits, ids, mask):  # the collator shifted, the loss too
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)[:, 1:]
    return F.cross_entropy(logits[:, :-2].reshape(-1, V), labels[:, 1:].reshape(-1))


def _mystery_loss_e(logits, ids, mask):  # micro-batches of two rows, averaged
    return torch.stack(
        [loss_correct(logits[i : i + 2], ids[i : i + 2], mask[i : i + 2]) for i in range(0, len(ids), 2)]
    ).mean()


_MYSTERY_ANSWERS = {
    "A": "eos_is_pad",
    "B": "sees_future",
    "C": "correct",
    "D": "double_shift",
    "E": "batch_means",
    "F": "no_position_reset",
}


def mystery_pipelines(seed: int = 0) -> dict:
    """Six pipelines ``{letter: (forward, loss_fn)}`` on one fresh tiny GPT, fed padded (never
    packed) batches; which bug does each have? Run them with :func:`mystery_report`."""
    model = pipeline_gpt(seed)
    masked = lambda ids, mask: forward_with_mask(model, ids, mask)  # noqa: E731
    pads_as_documents = lambda ids, mask: model(ids, document_ids=mask - 1)  # noqa: E731
    # B: the padding mask is applied, the causal part of the mask forgotten
    padding_only = lambda ids, mask: forward_without_causal_mask(model, ids, mask)  # noqa: E731
    return {
        "A": (masked, _mystery_loss_a),
        "B": (padding_only, loss_correct),
        "C": (masked, _mystery_loss_c),
        "D": (masked, _mystery_loss_d),
        "E": (masked, _mystery_loss_e),
        "F": (pads_as_documents, loss_correct),
    }


def mystery_report(letter: str, seed: int = 0):
    """``run_checks`` on mystery pipeline ``letter`` (PAD 0, EOS 1, as for every pipeline here)."""
    forward, loss_fn = mystery_pipelines(seed)[letter]
    with cpu_threads(1):
        return run_checks(forward, loss_fn, vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS)


def check_mystery(answers_fn) -> bool:
    """Grade ``answers_fn() -> {letter: pipeline key}`` for the six mystery pipelines."""
    hints = {}
    for letter in _MYSTERY_ANSWERS:
        failed = mystery_report(letter).failed
        hints[letter] = (
            f"it fails {', '.join(failed)}: find the pipeline that fails exactly these "
            "rows in the grid of section 5"
            if failed
            else "it passes every check; of the pipelines that pass everything, only one "
            "is possible for padded rows (none of the mysteries packs documents)"
        )
    return check_choices("name_the_bugs", answers_fn, _MYSTERY_ANSWERS, hints)


def _loss_cases():
    g = torch.Generator().manual_seed(7)
    cases = []
    for n, length, vocab, short in [(2, 6, 5, 6), (3, 8, 7, 3), (1, 5, 4, 2), (4, 10, 11, 4)]:
        ids = torch.randint(1, vocab, (n, length), generator=g)
        lengths = torch.tensor([length] + [short] * (n - 1))
        mask = (torch.arange(length)[None] < lengths[:, None]).long()
        ids = ids.masked_fill(mask == 0, 0)
        logits = 2 * torch.randn(n, length, vocab, generator=g)
        cases.append(
            Case((logits, ids, mask), label=f"N={n}, L={length}, V={vocab}, rows of {lengths.tolist()}")
        )
    return cases


def check_loss_fn(fn) -> bool:
    """Grade ``fn(logits, input_ids, attention_mask) -> scalar`` against lmcore's loss, then run
    ``run_checks`` on it with a tiny GPT."""
    ok = check(
        "my_loss_fn",
        fn,
        loss_correct,
        _loss_cases(),
        atol=1e-5,
        hint="shift once (logits[:, :-1] vs ids[:, 1:]), set padded targets to -100, "
        "pass raw logits, and average over valid targets only.",
    )
    if ok:
        model = pipeline_gpt(0)
        with cpu_threads(1):
            report = run_checks(
                lambda ids, mask: forward_with_mask(model, ids, mask),
                fn,
                vocab_size=V,
                seq_len=L,
                pad_id=PAD,
                eos_id=EOS,
            )
        print(f"{'✓' if report.passed else '✗'} run_checks on your loss: {str(report).splitlines()[0]}")
        ok = report.passed
    return ok
