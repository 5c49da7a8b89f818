"""Notebook 09's exercises: the lowest mean loss any model can reach on a given sample of
(context, next token) pairs, the chance a constrained sampler writes a token, and the loss floor of a
generator the notebook has not shown (subtraction with ``b <= a``).

Each checker is :func:`lmcore.course.checks.check`: the learner's function runs with warnings
captured (``np.where(f > 0, f * np.log(f), 0)`` warns but is right, and a test cell that writes
to stderr scores 0 under nbgrader), and with ``forbid=`` a call to the course's own
``entropy``, ``cross_entropy`` or ``kl_divergence`` (or the exercise's reference), to lmcore's
``unigram_entropy``, or to a library's entropy or KL in one call (``Categorical.entropy``,
``F.kl_div``, ``kl_divergence``, SciPy's where installed), fails it. A float32 answer is right:
the kit's tolerances. The first checker's title and nudge do not name what it grades (the
exercise asks the learner to find it): ``explain=`` diagnoses the plausible mistakes (a floor
of 0, the contexts ignored, the pairs' joint entropy, each context counted once, a uniform
model per context, a total instead of a mean).
"""

from __future__ import annotations

import functools
import math
from collections import Counter

import numpy as np
import torch

from ...data.tokenizers import ChatTokenizer
from ..checks import Case, check, float32_atol
from ..checks.guard import available
from .decoding import DIGITS, allow_only
from .lesson import _conditional_entropy, _operand_range, entropy

__all__ = [
    "subtraction_turns",
    "subtraction_floor",
    "subtraction_parts",
    "check_lowest_loss",
    "check_subtraction_floor",
    "check_constrained_chance",
]

_TOK = ChatTokenizer()
_REFERENCES = tuple(
    f"lmcore.course.floor.lesson.{n}" for n in ("entropy", "cross_entropy", "kl_divergence")
) + (
    "lmcore.course.floor.lesson.gap_by_token",
    "lmcore.course.floor.lesson.sample_floors",
    "lmcore.course.floor.exercises._sample_floor",
    "lmcore.course.floor.lesson._conditional_entropy",
)
# the libraries' whole entropy or KL in one call: "write the sum yourself" rules them out (an
# elementwise helper such as torch.special.xlogy or entr leaves the sum to the learner: allowed)
_LIBRARY_SUMS = available(
    [
        "torch.distributions.Categorical.entropy",
        "torch.distributions.kl.kl_divergence",
        "torch.nn.functional.kl_div",
        "scipy.stats.entropy",
        "scipy.special.rel_entr",
        "scipy.special.kl_div",
    ]
)
_FORBID = {name: "write it yourself" for name in _REFERENCES} | {
    name: "that is a library's entropy or KL in one call: write it yourself" for name in _LIBRARY_SUMS
}

# A value computed in float32, or summed in another order, is right: the kit's tolerances (rtol
# 1e-5, atol 1e-6); every plausible wrong answer of the tests is off by far more.
_RTOL, _ATOL = 1e-5, 1e-6


def _near(a: float, b: float) -> bool:
    return bool(np.isfinite(a) and np.isfinite(b) and abs(a - b) <= 1e-6 + 1e-5 * abs(b))


def _pair_counter(contexts, tokens) -> Counter:
    """How often each (context, token) pair occurs; lists, arrays and tensors alike."""
    as_ints = lambda xs: np.asarray(xs).astype(np.int64).tolist()  # noqa: E731
    return Counter(zip(as_ints(contexts), as_ints(tokens)))


def _sample_floor(contexts, tokens) -> float:
    """The reference: -1/n sum over pairs of ln(n(c, x) / n(c)), the conditional entropy of the
    next token given the context on the sample itself, in nats."""
    return _conditional_entropy(_pair_counter(contexts, tokens))


def _entropy_of_counts(counts) -> float:
    counts = np.asarray(counts, dtype=np.float64)
    return entropy(counts / counts.sum())


def _wrong_floors(contexts, tokens) -> list[tuple[float, str]]:
    """The plausible wrong floors of a sample, each with the question its diagnosis asks."""
    pairs = _pair_counter(contexts, tokens)
    n = sum(pairs.values())
    per_ctx: dict[int, list[int]] = {}  # each context's pair counts
    token_counts: Counter = Counter()
    for (c, x), k in pairs.items():
        per_ctx.setdefault(c, []).append(k)
        token_counts[x] += k
    per_ctx_h = [_entropy_of_counts(ks) for ks in per_ctx.values()]
    return [
        (
            _entropy_of_counts(list(token_counts.values())),
            "that is the lowest a model reaches when it gives every context the same q: it ignores "
            "the contexts. Can a model that reads them do better on this sample?",
        ),
        (
            _entropy_of_counts(list(pairs.values())),
            "that treats each (context, token) pair as one outcome, as if the model had to predict the "
            "context too. Which of the two does the model predict, and which does it read?",
        ),
        (
            float(np.mean(per_ctx_h)),
            "each distinct context counts once in your mean: the mean loss averages over the n pairs, so "
            "a context that comes more often counts more often. How many of the n losses does each context give?",
        ),
        (
            sum(sum(ks) / n * math.log(len(ks)) for ks in per_ctx.values()),
            "within each context that is the uniform model over the tokens seen after it: is there a "
            "q(. | c) whose mean loss on that context's pairs is lower?",
        ),
        (
            n * _conditional_entropy(pairs),
            f"that is {n} times the expected, a total over the {n} pairs: the exercise asks for their mean.",
        ),
    ]


def _explain_lowest(fn, case, expected, got) -> str:
    """What a wrong sample floor is: nan, 0 where a context has two next tokens, negative, a
    known mistake, or a value no model reaches."""
    g = float(got)
    if not np.isfinite(g):
        return (
            f"your result is {g}: what does 0 * ln 0, or the log of a share that is 0, give in "
            "floating point, and should a token that never follows a context enter that context's sum?"
        )
    if _near(g, 0.0) and expected > 0:
        return (
            "your result is 0, but in this sample some context is followed by different tokens: can one "
            "q(. | c) give probability 1 to each of them?"
        )
    if g < 0:
        return "your result is negative: -ln q(x | c) >= 0 for every q <= 1. Can a mean of such losses be below 0?"
    for value, text in _wrong_floors(*case.args):
        if _near(g, value) and not _near(value, expected):
            return text
    if g < expected:
        return "your result is below what any model reaches on this sample: which q(. | c) would pay it? Does each add up to 1?"
    return ""


def _pair_cases() -> list[Case]:
    rng = np.random.default_rng(0)
    fixed = [
        ([0, 0, 1, 1], [5, 6, 5, 5], "contexts [0, 0, 1, 1], tokens [5, 6, 5, 5]"),
        ([0, 0, 0, 0], [5, 5, 6, 7], "one context, tokens [5, 5, 6, 7]"),
        ([0, 1, 2, 3], [5, 6, 5, 6], "four contexts once each, tokens [5, 6, 5, 6]"),
        ([4, 9, 4, 9, 4, 2], [1, 1, 3, 1, 3, 1], "contexts [4, 9, 4, 9, 4, 2], tokens [1, 1, 3, 1, 3, 1]"),
        (
            [70_000, 3, 70_000, 3],
            [123_456, 0, 0, 0],
            "contexts [70000, 3, 70000, 3], tokens [123456, 0, 0, 0]",
        ),
    ]
    cases = [Case((np.array(c), np.array(t)), label=label) for c, t, label in fixed]
    ctx = rng.integers(0, 6, size=300)  # a bigram source: each context has its own next-token law
    laws = rng.dirichlet(np.full(8, 0.4), size=6)
    tok = np.array([rng.choice(8, p=laws[c]) for c in ctx])
    cases.append(Case((ctx, tok), label="300 pairs, 6 contexts, 8 tokens"))
    c32 = rng.integers(0, 40, size=100).astype(np.int32)
    cases.append(
        Case((c32, (c32 % 3 + rng.integers(0, 2, size=100)).astype(np.int32)), label="100 int32 pairs")
    )
    return cases


def check_lowest_loss(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(contexts, tokens)``: the lowest mean loss -1/n sum_i ln q(tokens[i] | contexts[i]),
    in nats, that any model (one next-token distribution per context) reaches on the n pairs
    (two 1-D NumPy integer arrays of ids >= 0, the same length): the conditional entropy of the
    next token given the context, on the sample itself."""
    hint = (
        "A model may give each context its own q(. | c); it is scored by its mean loss over the n pairs. "
        "Work three samples by hand: contexts [0, 0] with tokens [5, 5]; contexts [0, 0] with tokens "
        "[5, 6]; contexts [0, 1] with tokens [5, 6]. What is the lowest mean loss of each, and what "
        "changes between the last two?",
        "Group the pairs by context: context c, seen n_c times and followed by token x n_cx times, adds "
        "-sum_x n_cx ln q(x | c) to the total. Each context's q is free, so minimise each group alone: by "
        "notebook 01's split (cross-entropy = entropy + KL, KL >= 0) the best q(. | c) is c's own "
        "next-token frequencies n_cx / n_c. The floor is sum_c (n_c / n) * (-sum_x (n_cx / n_c) "
        "ln(n_cx / n_c)), natural log (nats).",
    )
    return check(
        "lowest mean loss on this sample",
        fn,
        _sample_floor,
        _pair_cases(),
        atol=_ATOL,
        rtol=_RTOL,
        hint=hint,
        quiet=quiet,
        forbid=_FORBID
        | {
            "lmcore.data.base.unigram_entropy": "that is lmcore's unigram entropy in one call: count the pairs yourself"
        },
        explain=_explain_lowest,
    )


# ---------------------------------------------------------------- a new generator's floor


def subtraction_turns(n: int, high: int = 9, *, seed: int = 0) -> list[str]:
    """``n`` turns ``<user> a - b = <assistant> c .``: a uniform on 0..high, then b uniform on
    0..a (so the answer c = a - b is never negative)."""
    high = _operand_range(high)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0; got {n!r}.")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a = int(rng.integers(0, high + 1))
        b = int(rng.integers(0, a + 1))
        out.append(f"<user> {a} - {b} = <assistant> {a - b} .")
    return out


def subtraction_parts(high: int = 9) -> tuple[float, float]:
    """The expected nats and the expected targets of one :func:`subtraction_turns` turn,
    enumerated over every (a, b), each turn's targets being its tokens after ``<user>`` plus EOS
    (as the chat corpus counts them)."""
    high = _operand_range(high)
    nats = targets = 0.0
    for a in range(high + 1):
        for b in range(a + 1):
            p = 1.0 / ((high + 1) * (a + 1))
            n = len(_TOK.encode(f"<user> {a} - {b} = <assistant> {a - b} ."))  # - <user> + EOS
            nats -= p * math.log(p)
            targets += p * n
    return nats, targets


def subtraction_floor(high: int = 9) -> float:
    """The loss floor, in nats per target, of a long corpus from :func:`subtraction_turns`:
    E[-ln p(turn)] / E[targets per turn] (:func:`subtraction_parts`)."""
    nats, targets = subtraction_parts(high)
    return nats / targets


def _explain_subtraction(fn, case, expected, got) -> str:
    """The case at high = 120 comes last: a function that fails only there was right up to 99."""
    if case.args[0] >= 100:
        return (
            f"yours is right on every case up to high = 99 and off at high = {case.args[0]}: what "
            "changes in a turn once an operand reaches 100?"
        )
    return ""


def check_subtraction_floor(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(high) -> nats per target`` against :func:`subtraction_floor`."""
    hint = (
        "Here b depends on a. How much uncertainty is left in a turn once a is known, averaged over "
        "a? And is the floor per turn or per target: how many targets does a turn have on average?",
        "a turn's entropy is H(a) + H(b | a) = ln(high + 1) + mean over a of ln(a + 1); divide "
        "its expectation by the expected targets per turn (the digits of a, b and c, plus 5), "
        "not by a fixed count and not turn by turn.",
    )
    cases = [Case((h,), label=f"high = {h}") for h in (9, 0, 1, 4, 12, 25, 99, 120)]  # 120: three digits
    return check(
        "loss floor of the subtraction generator",
        fn,
        subtraction_floor,
        cases,
        atol=_ATOL,
        # a float32 loop over the (high + 1)(high + 2) / 2 pairs rounds once per term (1.3e-5 off
        # at high = 99); the nearest plausible mistake, a mean of per-turn ratios, is 1.2e-3 off
        rtol=1e-4,
        hint=hint,
        quiet=quiet,
        explain=_explain_subtraction,
        forbid=_FORBID
        | {
            "lmcore.course.floor.exercises.subtraction_floor": "write it yourself",
            "lmcore.course.floor.exercises.subtraction_parts": "write it yourself",
        },
    )


# ---------------------------------------------------------------- constrained decoding


def _chance_cases() -> list[Case]:
    """Rows of logits, the allowed ids and the token asked about: the digits after ``=``, only
    ``.`` allowed, a token the grammar forbids, batches, every token allowed, and rows whose
    logits lie so far apart that the free model's probabilities of the allowed tokens are 0 in
    float64 (only a computation over the allowed logits stays finite there)."""
    g = torch.Generator().manual_seed(0)
    digits = list(DIGITS)  # the grammar's own ids (decoding.DIGITS), not a copy
    specs = [
        ((19,), digits, 13, "19 logits, the ten digits allowed, token 13"),
        ((19,), [8], 8, "19 logits, only '.' (token 8) allowed, token 8"),
        ((19,), digits, 8, "19 logits, the ten digits allowed, token 8 (not allowed)"),
        ((5, 19), [8, 9, 10], 9, "(5, 19) logits, tokens 8, 9 and 10 allowed, token 9"),
        ((2, 3, 7), [6, 0], 0, "(2, 3, 7) logits, tokens 6 and 0 allowed, token 0"),
        ((4,), [0, 1, 2, 3], 2, "4 logits, every token allowed, token 2"),
    ]
    cases = [
        Case((torch.randn(shape, generator=g, dtype=torch.float64) * 3, ids, token), label=text)
        for shape, ids, token, text in specs
    ]
    spread = torch.tensor([9.0, -4.0, 5.0, -8.0, 0.0], dtype=torch.float64)  # a banned token far ahead
    huge = torch.tensor([30_000.0, 2.0, -1.0, 29_990.0], dtype=torch.float64)
    low = torch.tensor([-800.0, -790.0, 5.0, -900.0], dtype=torch.float64)
    high = torch.tensor([2_000.0, 1_990.0, 0.0, 2_005.0], dtype=torch.float64)  # past any clamp at 1000
    deep = torch.tensor([-30_000.0, -30_002.0, 0.0], dtype=torch.float64)  # below any finite mask value
    return cases + [
        Case((deep, [0, 1], 0), label="logits [-30000, -30002, 0], tokens 0 and 1 allowed, token 0"),
        Case((high, [0, 1], 0), label="logits [2000, 1990, 0, 2005], tokens 0 and 1 allowed, token 0"),
        Case((spread, [1, 3], 1), label="logits [9, -4, 5, -8, 0], tokens 1 and 3 allowed, token 1"),
        Case((huge, [1, 2], 2), label="logits [30000, 2, -1, 29990], tokens 1 and 2 allowed, token 2"),
        Case((low, [0, 1], 1), label="logits [-800, -790, 5, -900], tokens 0 and 1 allowed, token 1"),
    ]


def _as_chance(fn):
    """``fn``'s result as a float64 tensor of one chance per row (shape ``logits.shape[:-1]``)."""

    @functools.wraps(fn)  # the learner's name, for show_solution's pointer
    def chance(logits, allowed, token):
        out = fn(logits, allowed, token)
        try:
            out = torch.as_tensor(out).double()
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"return a number or a tensor of chances; got {type(out).__name__}") from None
        if out.shape != logits.shape[:-1]:
            raise ValueError(
                f"return one chance per row, shape {tuple(logits.shape[:-1])}; got {tuple(out.shape)}"
            )
        return out

    return chance


def _constrained_chance(logits, allowed, token):
    """The reference: a softmax of the logits with every token outside ``allowed`` at -inf."""
    return torch.softmax(allow_only(logits, allowed).double(), -1)[..., token]


def _explain_chance(fn, case, expected, got) -> str:
    """What a wrong chance did, as a question: not a number where the logits lie far apart, a
    forbidden token written, the free model's chance, or every allowed token alike."""
    logits, allowed, token = case.args
    if not torch.isfinite(got).all():
        return (
            f"on {case.label}, your result is not a number: which of your intermediate values is 0 "
            "or infinite when the logits lie that far apart, and which logits does the chance "
            "actually depend on?"
        )
    if token not in allowed:
        return (
            f"token {token} is not allowed, and yours gives it {float(got.max()):.3g}: how often "
            "does a sampler that throws away every token the grammar forbids write it?"
        )
    if bool(((got == 0) & (expected > 1e-6)).any()):
        return (
            f"on {case.label}, yours gives token {token} chance 0, though it is allowed and the sampler "
            "draws until it writes an allowed token: once the forbidden tokens are out of the way, "
            "which logits decide between the allowed ones?"
        )
    free = torch.softmax(logits.double(), -1)[..., token]
    if torch.allclose(got, free, rtol=1e-5, atol=1e-9):
        return (
            f"on {case.label}, yours is the free model's chance of token {token}: when a draw "
            "outside `allowed` is thrown away and drawn again, where does its probability go?"
        )
    if torch.allclose(got, torch.full_like(got, 1 / len(allowed)), rtol=1e-5, atol=1e-9):
        return (
            "yours gives every allowed token the same chance: does drawing again make the model "
            "forget which allowed token it rates higher?"
        )
    return ""


def check_constrained_chance(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(logits, allowed, token) -> chance`` (shape ``logits.shape[:-1]``): the chance
    that drawing from the softmax, and drawing again whenever the token is not in ``allowed``,
    writes ``token``; finite on rows whose logits lie tens of thousands apart. The input must not
    change, and a call to the course's ``allow_only`` is refused."""
    hint = (
        "Follow one draw: with what chance is it kept at once, with what chance is it thrown away "
        "and drawn again, and what does that leave for `token` in the end?",
        "the chance is p_token / (sum of p over `allowed`), and 0 for a token outside `allowed`: "
        "a softmax over the allowed logits alone (set the others to -inf, then softmax), which "
        "stays finite however far apart the logits lie.",
    )
    return check(
        "the constrained sampler's chance",
        _as_chance(fn),
        _constrained_chance,
        _chance_cases(),
        # a forbidden token must get 0, not a small chance; an allowed one's chance computed in float32
        # from logits near 800 is off by a few float32 spacings there (a learner's right answer was refused)
        atol=lambda logits, allowed, token: (
            float32_atol(logits[..., list(allowed)], floor=1e-9) if token in allowed else 1e-9
        ),
        rtol=1e-5,
        hint=hint,
        quiet=quiet,
        forbid={"lmcore.course.floor.decoding.allow_only": "write it yourself"},
        explain=_explain_chance,
    )
