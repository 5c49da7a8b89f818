"""Notebook 05's exercise checkers for labels and perplexity: the pad = EOS collate fix
(:func:`check_eos_padded_labels`) and the perplexity of a text longer than the context
(:func:`check_sliding_window_perplexity`). Each rejects a call to the reference it replaces."""

from __future__ import annotations

import math

import torch

from ...shift import IGNORE_INDEX
from ..checks import Case, check, first_label_free, only_match
from .lesson import example_batch
from .perplexity import LookbackLM, long_text, window_sums

__all__ = [
    "eos_padded_labels",
    "check_eos_padded_labels",
    "check_sliding_window_perplexity",
]

_NO_LABEL_HELPERS = {
    "lmcore.shift.labels_from_attention_mask": "build the labels from the ids alone, with tensor operations",
    "lmcore.course.padding.exercises.eos_padded_labels": "that is the course's reference: write it yourself",
}
_NO_METER = {
    f"lmcore.perplexity.PerplexityMeter.{m}": "the exercise is to do what PerplexityMeter does, by hand"
    for m in ("update", "update_sums")
}
_NO_WINDOW_REFERENCE = {
    "lmcore.course.padding.perplexity.sliding_window_perplexity": "that is the course's reference: "
    "write it yourself",
    "lmcore.course.padding.exercises._naive_window_perplexity": "that is the check's reference: "
    "write it yourself",
    **_NO_METER,
}


def eos_padded_labels(input_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """Labels for rows padded with EOS (a tokenizer without PAD): a copy of ``input_ids`` (N, L)
    with -100 on every EOS after the first of its row; the first EOS stays a target."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError("input_ids must be a (N, L) tensor.")
    later_eos = (input_ids == eos_id).cumsum(-1) > 1
    return input_ids.masked_fill(later_eos, IGNORE_INDEX)


def _eos_rows(seed: int, eos_id: int, N: int = 4, L: int = 9):
    """(N, L) rows: text (ids never equal to eos_id), one EOS, then EOS padding; one row has no
    EOS at all (a text cut at the block length), one has no padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 20, (N, L), generator=g)
    ids[ids == eos_id] = eos_id + 1
    ends = torch.randint(2, L - 1, (N,), generator=g).tolist()
    ends[0], ends[-1] = L - 1, L  # row 0: EOS at the last position; last row: no EOS
    for n, e in enumerate(ends):
        ids[n, e:] = eos_id
    return ids


def _explain_eos_labels(fn, case, expected, got) -> str:
    """The first position (after position 0, which is never a target) where the labels differ,
    named by what the token there is: the row's first EOS, EOS padding after it, a row with no
    EOS, or a token that is no EOS at all."""
    ids, eos = case.args
    try:
        got = torch.as_tensor(got)
    except (TypeError, ValueError, RuntimeError):
        return ""
    if got.shape != expected.shape:
        return ""
    differ = (got != expected) & (torch.arange(ids.shape[1]) > 0)
    if not bool(differ.any()):
        return ""
    n, t = (int(v) for v in differ.nonzero()[0])
    is_eos = ids[n] == eos
    if not bool(is_eos.any()):
        return (
            f"row {n} holds no EOS at all, and your labels changed position {t}: what is there to mask in it?"
        )
    first = int(is_eos.nonzero()[0])
    if int(ids[n, t]) != eos:
        return f"row {n}, position {t} holds a token that is no EOS, and your labels changed it: which labels does the fix touch?"
    if t == first:
        return (
            f"row {n}, position {t} is the row's first EOS, the end of its text, and your labels ignore "
            "it: how would the model learn to stop?"
        )
    if int(got[n, t]) < 0:
        return (
            f"row {n}, position {t} is EOS padding, and your label there is {int(got[n, t])}: which "
            "label value does the loss leave out?"
        )
    return (
        f"row {n}, position {t} is an EOS after the row's first one, and your labels keep it as a "
        "target: is it text, or padding?"
    )


def check_eos_padded_labels(fn, quiet: bool = False):
    """Grade ``fn(input_ids (N, L), eos_id) -> labels (N, L)``: keep the first EOS of each row
    as a target and put -100 on the EOS padding after it."""
    shared, _ = example_batch(pad_id=1, eos_id=1)
    cases = [Case((shared, 1), label="the example batch padded with EOS (eos_id=1)")]
    cases += [
        Case((_eos_rows(s, e), e), label=f"4 random rows, eos_id={e}, one row without any EOS")
        for s, e in ((1, 1), (2, 7), (3, 19))
    ]
    return check(
        "eos_padded_labels",
        fn,
        eos_padded_labels,
        cases,
        free=first_label_free,
        forbid=_NO_LABEL_HELPERS,
        quiet=quiet,
        explain=_explain_eos_labels,
        hint=(
            "Is every EOS in a row padding? Which EOS teaches the model to stop, and what about a row"
            " that has none?",
            "the first EOS of a row is real text (the target that teaches stopping); only the EOS "
            "after it are padding. Count the EOS seen so far along each row. A row may have no EOS.",
        ),
    )


def _naive_window_perplexity(model, ids: torch.Tensor, block_size: int, stride: int) -> float:
    """Sliding-window perplexity by a loop over every token: token k (k >= 1) is scored once, in
    the first window (starts 0, stride, 2·stride, ...; ``block_size`` long) that holds it, with
    the tokens of that window before it as its context; a token that opens that window has no
    context in it and is not scored (this happens only when stride == block_size)."""
    total, count = 0.0, 0
    for k in range(1, len(ids)):
        begin = 0
        while begin + block_size <= k:  # the first window whose end passes k
            begin += stride
        if begin == k:  # k opens that window: no context there (only when stride == block_size)
            continue
        with torch.no_grad():
            logp = torch.log_softmax(model(ids[begin:k][None])[0, -1].double(), -1)
        total, count = total - float(logp[ids[k]]), count + 1
    return math.exp(total / count)


def _window_case(run, n_tokens: int, seed: int, block_size: int, stride: int):
    return run(LookbackLM(block_size=block_size), long_text(n_tokens, seed=seed), block_size, stride)


def _token_weighted(parts) -> float:
    count = sum(c for _, c in parts)
    return math.exp(sum(s for s, _ in parts) / count) if count else math.nan


_WINDOW_QUESTIONS = {
    "blocks": "your value matches windows that never overlap, one after the other: how much context "
    "do the first tokens of each window get, and what is the stride for?",
    "every window": "your total scores some tokens more than once, in every window that holds them: "
    "how many times should each token count?",
    "window means": "your value weighs every window the same, whatever the number of tokens it "
    "scores: should a window that scores few tokens count as much as one that scores many?",
    "no exp": "your value is the log of the expected one: is it a perplexity yet, and what turns a "
    "mean NLL into one?",
    "tail": "your total stops before the end of the text: do your windows score its last tokens?",
    "one too many": "your total leaves out a token where each window takes over from the one before: "
    "is every token after the first scored?",
    "one too few": "your total scores the token where each window takes over from the one before "
    "twice, once in each window: how many times should each token count?",
}


def _window_mistakes(model, ids, block_size: int, stride: int) -> list[tuple[float, str]]:
    """(the perplexity a plausible mistake gives on this text, the question it gets): windows
    every block_size, no mask, windows averaged (their mean NLLs or their perplexities), no exp,
    the tail dropped (a window only where a whole block fits: two ways to write the range), and
    the mask one position off either way."""
    T, ask = len(ids), _WINDOW_QUESTIONS
    right = window_sums(model, ids, block_size, stride)
    means = [s / c for s, c in right if c]
    out = [
        (_token_weighted(window_sums(model, ids, block_size, block_size)), ask["blocks"]),
        (_token_weighted(window_sums(model, ids, block_size, stride, masked=False)), ask["every window"]),
        (math.exp(sum(means) / len(means)), ask["window means"]),
        (sum(math.exp(m) for m in means) / len(means), ask["window means"]),
        (math.log(_token_weighted(right)), ask["no exp"]),
        (_token_weighted(window_sums(model, ids, block_size, stride, cut=1)), ask["one too many"]),
        (_token_weighted(window_sums(model, ids, block_size, stride, cut=-1)), ask["one too few"]),
    ]
    for stop in (T - block_size + 1, T - block_size):  # range(0, stop, stride): the last start < stop
        out.append((_token_weighted(window_sums(model, ids, block_size, stride, stop=stop)), ask["tail"]))
    return [(v, q) for v, q in out if math.isfinite(v)]


def _near(a: float, b: float) -> bool:
    """Equal to float32 accuracy, with room to spare: the mistakes lie 1e-3 apart or more."""
    return abs(a - b) <= 1e-4 * max(1.0, abs(a), abs(b))


def _explain_window(fn, case, expected, got) -> str:
    """The mistake whose perplexity on this text the learner's value matches, as a question;
    ``""`` unless exactly one does (mistakes that change nothing on this text left out)."""
    try:
        g, e = float(got), float(expected)
    except (TypeError, ValueError, RuntimeError):
        return ""
    n_tokens, seed, block_size, stride = case.args
    if not math.isfinite(g):
        return ""
    model, ids = LookbackLM(block_size=block_size), long_text(n_tokens, seed=seed)
    named = {
        q for v, q in _window_mistakes(model, ids, block_size, stride) if _near(v, g) and not _near(v, e)
    }
    return only_match(named)


def _window_cases() -> list[Case]:
    """(n_tokens, seed, block_size, stride): texts of several lengths, windows that overlap, do not
    overlap and end part-way."""
    return [
        Case((61, 1, 16, 8), label="61 tokens, block_size 16, stride 8"),
        Case((61, 2, 16, 5), label="61 tokens, block_size 16, stride 5 (the last window ends part-way)"),
        Case((61, 3, 16, 16), label="61 tokens, block_size 16, stride 16 (no overlap)"),
        Case((12, 4, 16, 4), label="a 12-token text, block_size 16"),
        Case((40, 5, 8, 1), label="40 tokens, block_size 8, stride 1"),
    ]


def check_sliding_window_perplexity(fn, quiet: bool = False):
    """Grade ``fn(model, ids (T,), block_size, stride) -> float`` against a loop over every token,
    on texts of several lengths and windows that overlap, do not overlap and end part-way."""
    return check(
        "sliding_window_perplexity",
        lambda *args: _window_case(fn, *args),
        lambda *args: _window_case(_naive_window_perplexity, *args),
        _window_cases(),  # the kit's tolerances: a float32 sum is right (every wrong variant is off
        # by > 1e-3)
        forbid=_NO_WINDOW_REFERENCE,
        quiet=quiet,
        explain=_explain_window,
        hint=(
            "Which window scores each token in your total: exactly one, and the one that gives it the "
            "most context? And when you combine the windows, does one with few scored tokens count as "
            "much as a full one?",
            "score every token once (-100 on the targets an earlier window already scored) and "
            "combine the windows token-weighted.",
        ),
    )
