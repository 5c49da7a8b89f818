"""Notebook 09's exercises: the lowest expected loss any model can reach on data p, how much of
a given model's gap above it each token brings, a mask that allows only some tokens, the loss floor of a generator
the notebook has not shown (subtraction with ``b <= a``), and the floor of a model that ignores
context.

Each checker is :func:`lmcore.course.checks.check`: the learner's function runs with warnings
captured (``np.where(p > 0, p * np.log(p), 0)`` warns but is right, and a test cell that writes
to stderr scores 0 under nbgrader), and with ``forbid=`` a call to the course's own
``entropy``, ``cross_entropy`` or ``kl_divergence`` (or the exercise's reference), or to a
library's entropy or KL in one call (``Categorical.entropy``, ``F.kl_div``, ``kl_divergence``,
SciPy's where installed), fails it. A float32 answer is right: the kit's tolerances. The first
two checkers' titles and nudges do not name what they grade (the exercises ask the learner to
find it): ``explain=`` diagnoses the plausible mistakes (a floor of 0, the uniform model's loss,
the whole loss instead of the gap, one number instead of one per token, the model's weights
instead of the data's, a token that never comes adding something).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ...data.tokenizers import ChatTokenizer
from ..checks import Case, check
from ..checks.guard import available
from .decoding import allow_only

__all__ = [
    "subtraction_turns",
    "subtraction_floor",
    "check_lowest_loss",
    "check_gap_by_token",
    "check_subtraction_floor",
    "context_free_floor",
    "check_context_free_floor",
    "check_allow_only",
]

_TOK = ChatTokenizer()
_REFERENCES = tuple(
    f"lmcore.course.floor.lesson.{n}" for n in ("entropy", "cross_entropy", "kl_divergence")
) + (
    "lmcore.course.floor.lesson.gap_by_token",
    "lmcore.course.floor.exercises._entropy",
    "lmcore.course.floor.exercises._kl",
    "lmcore.course.floor.exercises._gap_terms",
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


def _explain_zeros(fn, case, expected, got) -> str:
    """A nan or inf on a distribution with zero entries: the 0 ln 0 of a sum that skips nothing."""
    if np.isfinite(float(got)) or not any(np.any(np.asarray(a) == 0) for a in case.args):
        return ""
    return (
        f"your result is {float(got)} on an input with zero entries: what does 0 * ln 0 give in "
        "floating point, and what should an entry equal to 0 add to the sum?"
    )


def _near(a: float, b: float) -> bool:
    return bool(np.isfinite(a) and np.isfinite(b) and abs(a - b) <= 1e-6 + 1e-5 * abs(b))


def _explain_lowest(fn, case, expected, got) -> str:
    """What a wrong floor is: 0, the uniform model's loss, the likeliest token's loss, negative."""
    zeros = _explain_zeros(fn, case, expected, got)
    if zeros:
        return zeros
    p, g = np.asarray(case.args[0], dtype=np.float64), float(got)
    if _near(g, 0.0):
        return (
            "your result is 0 on an input where more than one token occurs: a model pays 0 only "
            "if it gives the token that comes probability 1. Can it, when it cannot know which one comes?"
        )
    if g < 0:
        return "your result is negative: -ln q(x) >= 0 for every q(x) <= 1. Can an average of such losses be below 0?"
    for n in {p.size, int((p > 0).sum())}:
        if _near(g, math.log(n)):
            return (
                f"that is ln {n}, the expected loss of the uniform model q = 1/{n} on this input: "
                "is there a model whose expected loss on this p is lower? Try one that follows p more closely."
            )
    if _near(g, -math.log(float(p.max()))):
        return (
            "that is -ln of the largest p(x): the loss only when the likeliest token comes. The "
            "expected loss averages over every token p draws: what does the best model pay on the others?"
        )
    return ""


def _gap_terms(p, q) -> np.ndarray:
    """Token x's share of the gap, p(x) ln(p(x) / q(x)), 0 where p(x) = 0: the reference."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    out, k = np.zeros_like(p), p > 0
    out[k] = p[k] * np.log(p[k] / q[k])
    return out


def _near_all(a, b) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return bool(a.shape == b.shape and np.all(np.isfinite(a)) and np.allclose(a, b, rtol=1e-5, atol=1e-6))


def _share_of_a_token_never_seen(fn) -> str:
    """For an answer whose entries add up to the gap but differ token by token (another rule, such
    as p ln(p/q) - p + q): its share for a token that never comes, as a question ("" if it is 0)."""
    p, q = np.array([0.7, 0.0, 0.3]), np.array([0.2, 0.5, 0.3])
    try:
        share = float(np.asarray(fn(p.copy(), q.copy()), dtype=np.float64)[1])
    except Exception:  # noqa: BLE001 - a probe must never turn a failure into a crash
        return ""
    if not np.isfinite(share) or abs(share) <= 1e-9:
        return ""
    return (
        f"your entries add up to the gap, but on p = [0.7, 0, 0.3], q = [0.2, 0.5, 0.3] your rule gives "
        f"token 1, which never comes, a share of {share:.4g}: how much of the gap can a token that "
        "never comes bring?"
    )


def _explain_gap_by_token(fn, case, expected, got) -> str:
    """What a wrong per-token gap is: one number, the model's weights, no weights, a token that
    never comes adding something, a nan from 0 ln 0."""
    p, q = (np.asarray(a, dtype=np.float64) for a in case.args)
    try:
        g = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return ""
    k = p > 0
    if g.ndim == 0 or g.size == 1 and p.size > 1:
        return (
            f"your result is one number; the exercise asks for {p.size} of them, one per token: how "
            "much of the gap does each token x bring?"
        )
    if g.shape != p.shape:
        return ""
    if not np.all(np.isfinite(g)):
        bad = int(np.flatnonzero(~np.isfinite(g))[0])
        if not k[bad]:
            return (
                f"your entry for token {bad} is {g[bad]}, and p = 0 there: what does 0 * ln 0 give in "
                "floating point, and what should a token that never comes add to either expected loss?"
            )
        return ""
    if np.any(~k) and np.any(np.abs(g[~k]) > 1e-9):
        bad = int(np.flatnonzero(~k & (np.abs(g) > 1e-9))[0])
        return (
            f"your entry for token {bad} is {g[bad]:.6g}, yet p = 0 there: that token never comes. "
            "What does it add to the model's expected loss, and what to the lowest?"
        )
    if np.all(k) and _near_all(g, _gap_terms(q, p)):
        return (
            "that is what weighting by the model's probabilities q gives: which distribution draws the "
            "tokens whose losses the expected loss averages?"
        )
    if np.all(k) and _near_all(g, np.log(p / q)):
        return (
            "each entry is what the model pays above the best model when token x comes: how often does "
            "x come, and how does that enter its share of an expected loss?"
        )
    if _near_all(g, -p * np.log(np.where(k, q, 1.0))):
        return (
            "each entry is token x's part of the model's whole expected loss: how much of it would even "
            "the best model of this data pay on x?"
        )
    if _near_all(g.sum(), expected.sum()):
        return _share_of_a_token_never_seen(fn) or (
            "your entries add up to the right total, but not token by token: is each entry computed from "
            "p(x) and q(x) alone, by one rule for every token, and would that rule add up to the gap for "
            "any p and q, with 0 for a token that never comes?"
        )
    return ""


def _grade(title: str, fn, reference, cases, hint, quiet: bool, explain, atol: float = _ATOL) -> bool:
    return check(
        title,
        fn,
        reference,
        cases,
        atol=atol,
        rtol=_RTOL,
        hint=hint,
        quiet=quiet,
        forbid=_FORBID,
        explain=explain,
        ratio_hints={
            float(1 / np.log(10)): "that is 1/ln 10 times the expected: which logarithm did you take?"
        },
    )


def _prob_cases(seed: int, pairs: bool) -> list[Case]:
    fixed = [[0.5, 0.25, 0.125, 0.125], [0.1] * 10, [1.0, 0.0, 0.0], [0.7, 0.0, 0.3], [0.5, 0.5]]
    rng = np.random.default_rng(seed)
    ps = [np.array(p) for p in fixed] + [
        rng.dirichlet(np.full(k, a)) for k, a in ((3, 1.0), (5, 0.3), (8, 2.0), (12, 0.5))
    ]
    if not pairs:
        return [Case((p,)) for p in ps]
    return [
        Case((p, q))
        for p in ps
        for q in (np.full(p.size, 1 / p.size), rng.dirichlet(np.ones(p.size)) * 0.9 + 0.1 / p.size)
    ]


def _entropy(p):
    nz = p > 0
    return float(-(p[nz] * np.log(p[nz])).sum())


def _kl(p, q):
    nz = p > 0
    return float((p[nz] * np.log(p[nz] / q[nz])).sum())


def check_lowest_loss(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(p)``: the lowest expected loss, in nats, that any model q reaches on data drawn
    from ``p`` (1-D NumPy probabilities, zeros allowed): min over q of -sum p ln q."""
    hint = (
        "The lowest loss is one that some model q actually reaches on this p. Which q makes "
        "-sum p ln q smallest? Test two inputs by hand: p = [1, 0, 0], and p uniform over n tokens. "
        "And what should a token with p = 0, one that never comes, add?",
        "The best model is q = p: H(p, q) - H(p, p) = sum p ln(p / q) >= 0, since ln x <= x - 1. "
        "So the floor is the entropy H(p) = -sum p ln p, with the natural log (nats, not bits); the "
        "zero entries add 0 (0 ln 0 = 0), so leave them out of the sum.",
    )
    return _grade(
        "lowest expected loss on data p", fn, _entropy, _prob_cases(0, False), hint, quiet, _explain_lowest
    )


def check_gap_by_token(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(p, q) -> array``: for each token x, x's share, in nats, of model ``q``'s expected
    loss on data ``p`` above the lowest any model reaches: one rule of p(x) and q(x) for every
    token, whose entries add up to that gap for any p and q, and 0 where p(x) = 0 (q > 0
    everywhere). These pin the rule down: x's term of the model's expected loss minus x's term
    of the lowest. A difference of two terms in float32 is off by about 1e-7 on
    these cases, within the kit's tolerances; every plausible wrong answer is off by 1e-2 or more."""
    hint = (
        "Each entry is one token's share of the gap. When x comes, what does the model pay, and what "
        "the best model? How often does x come, by whose probabilities? What should a token that "
        "never comes add? And do your entries add up to the gap?",
        "entry x = (-p(x) ln q(x)) - (-p(x) ln p(x)) = p(x) ln(p(x) / q(x)): weighted by the data p "
        "(not by q), natural log (nats), 0 where p(x) = 0 (0 ln 0 = 0), one entry per token. The "
        "entries add up to H(p, q) - H(p) >= 0, though single entries are negative where q(x) > p(x).",
    )
    return _grade(
        "the gap above the lowest loss, token by token",
        fn,
        _gap_terms,
        _prob_cases(1, True),
        hint,
        quiet,
        _explain_gap_by_token,
    )


# ---------------------------------------------------------------- a new generator's floor


def _high(high) -> int:
    if isinstance(high, bool) or not isinstance(high, (int, np.integer)) or not 0 <= high <= 999:
        raise ValueError(f"high must be an int in [0, 999]; got {high!r}.")
    return int(high)


def subtraction_turns(n: int, high: int = 9, *, seed: int = 0) -> list[str]:
    """``n`` turns ``<user> a - b = <assistant> c .``: a uniform on 0..high, then b uniform on
    0..a (so the answer c = a - b is never negative)."""
    high = _high(high)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0; got {n!r}.")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        a = int(rng.integers(0, high + 1))
        b = int(rng.integers(0, a + 1))
        out.append(f"<user> {a} - {b} = <assistant> {a - b} .")
    return out


def subtraction_floor(high: int = 9) -> float:
    """The loss floor, in nats per target, of a long corpus from :func:`subtraction_turns`:
    E[-ln p(turn)] / E[targets per turn], each turn's targets being its tokens after
    ``<user>`` plus EOS (as the chat corpus counts them), enumerated over every (a, b)."""
    high = _high(high)
    nats = targets = 0.0
    for a in range(high + 1):
        for b in range(a + 1):
            p = 1.0 / ((high + 1) * (a + 1))
            n = len(_TOK.encode(f"<user> {a} - {b} = <assistant> {a - b} ."))  # - <user> + EOS
            nats -= p * math.log(p)
            targets += p * n
    return nats / targets


def check_subtraction_floor(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(high) -> nats per target`` against :func:`subtraction_floor`."""
    hint = (
        "Here b depends on a. How much uncertainty is left in a turn once a is known, averaged over "
        "a? And is the floor per turn or per target: how many targets does a turn have on average?",
        "a turn's entropy is H(a) + H(b | a) = ln(high + 1) + mean over a of ln(a + 1); divide "
        "its expectation by the expected targets per turn (the digits of a, b and c, plus 5), "
        "not by a fixed count and not turn by turn.",
    )
    cases = [Case((h,), label=f"high = {h}") for h in (9, 0, 1, 4, 12, 25, 99)]
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
        forbid=_FORBID | {"lmcore.course.floor.exercises.subtraction_floor": "write it yourself"},
    )


# ---------------------------------------------------------------- a model that ignores context


def context_free_floor(high: int = 9) -> float:
    """The lowest loss, in nats per target, of a model that gives every target the same
    distribution whatever came before, on a long corpus of ``<user> a + b = <assistant> c .``
    turns (a, b uniform on 0..high): the entropy of the targets' token frequencies (every token
    after ``<user>``, plus EOS), enumerated over every (a, b)."""
    high = _high(high)
    counts = np.zeros(len(_TOK.VOCAB))
    for a in range(high + 1):
        for b in range(high + 1):
            for t in _TOK.encode(f"<user> {a} + {b} = <assistant> {a + b} .")[1:] + [_TOK.eos_id]:
                counts[t] += 1
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def check_context_free_floor(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(high) -> nats per target`` against :func:`context_free_floor`."""
    hint = (
        "A model that must give every target the same distribution, whatever came before: which "
        "distribution makes its loss lowest? Which tokens count as targets, over which turns?",
        "count how often each token appears as a target over all (a, b) (every token after "
        "<user>, plus EOS), turn the counts into frequencies, and take their entropy in nats.",
    )
    cases = [Case((h,), label=f"high = {h}") for h in (9, 0, 1, 4, 12, 99)]
    return check(
        "loss floor of a model that ignores context",
        fn,
        context_free_floor,
        cases,
        atol=_ATOL,
        rtol=_RTOL,
        hint=hint,
        quiet=quiet,
        forbid=_FORBID
        | {
            "lmcore.course.floor.exercises.context_free_floor": "write it yourself",
            # lmcore's own unigram entropy is this exercise's answer in one call (issue 38)
            "lmcore.data.base.unigram_entropy": "that is lmcore's unigram entropy in one call: count the targets yourself",
        },
    )


# ---------------------------------------------------------------- constrained decoding


def _allow_cases() -> list[Case]:
    g = torch.Generator().manual_seed(0)
    specs = [
        ((19,), [9, 10, 11, 12, 13, 14, 15, 16, 17, 18], "19 logits, the ten digits allowed"),
        ((19,), [8], "19 logits, only '.' allowed"),
        ((5, 19), [8, 9, 10], "(5, 19) logits, '.', '0' and '1' allowed"),
        ((2, 3, 7), [6, 0], "(2, 3, 7) logits, tokens 6 and 0 allowed"),
        ((4,), [0, 1, 2, 3], "4 logits, every token allowed"),
    ]
    cases = [
        Case((torch.randn(shape, generator=g, dtype=torch.float64) * 3, ids), label=text)
        for shape, ids, text in specs
    ]
    spread = torch.tensor([9.0, -4.0, 5.0, -8.0, 0.0], dtype=torch.float64)  # a banned token far ahead
    return cases + [Case((spread, [1, 3]), label="logits [9, -4, 5, -8, 0], tokens 1 and 3 allowed")]


def _as_probs(fn):
    @functools.wraps(fn)  # the learner's name, for show_solution's pointer
    def probs(logits, allowed):
        out = fn(logits, allowed)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"return a tensor of logits; got {type(out).__name__}")
        if out.shape != logits.shape:
            raise ValueError(f"return logits of shape {tuple(logits.shape)}; got {tuple(out.shape)}")
        return torch.softmax(out.double(), -1)

    return probs


def _returns_probabilities(fn, case) -> bool:
    """Whether the learner's own function (beneath :func:`_as_probs`) returned probabilities."""
    if fn is None:
        return False
    try:
        out = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in case.args])
    except Exception:  # noqa: BLE001 - a probe must never turn a failure into a crash
        return False
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return False
    out = out.double()
    return bool((out >= 0).all()) and torch.allclose(out.sum(-1), torch.ones(()).double(), atol=1e-6)


def _explain_allowed(fn, case, expected, got) -> str:
    """The first token whose probability after a softmax of the learner's logits is wrong: a
    banned one that kept some, or an allowed one whose odds against the others changed."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return ""
    wrong = (got - expected).abs() > 1e-9 + 1e-5 * expected.abs()
    where = wrong.nonzero()
    if len(where) == 0:
        return ""
    if _returns_probabilities(getattr(fn, "__wrapped__", None), case):
        return (
            "your function returns probabilities (every row is at least 0 and adds up to 1); the "
            "exercise asks for logits, which the sampler then puts through a softmax: what does a "
            "softmax of your result give a token that is not allowed?"
        )
    allowed = expected > 0
    if bool((got[allowed] == 0).all()) and bool((got[~allowed] > 0).any()):
        return (
            "the check compares probabilities after a softmax: after your function every allowed "
            "token has probability 0 and the others keep some. Which tokens did you change?"
        )
    at = tuple(int(i) for i in where[0])
    token, p = at[-1], float(got[at])
    if float(expected[at]) == 0:
        return (
            f"the check compares probabilities after a softmax: token {token} is not allowed, yet "
            f"after a softmax of your logits it keeps {p:.3g}. Which logit makes a softmax give exactly 0?"
        )
    return (
        f"the check compares probabilities after a softmax: token {token} is allowed, and after a "
        f"softmax of your logits it gets {p:.4g} where the model's odds give {float(expected[at]):.4g}: "
        "did an allowed logit change?"
    )


def check_allow_only(fn, *, quiet: bool = False) -> bool:
    """Grade ``fn(logits, allowed) -> logits`` ``(..., V)``: after a softmax, every token not in
    ``allowed`` has probability 0 and the allowed ones keep their relative odds (compared as
    probabilities, so -inf and -1e9 both pass); the input must not change."""
    hint = (
        "After your function, what probability does a softmax give a token that is not allowed, and "
        "are the ratios between the allowed ones unchanged? Is the input left as it was?",
        "set every token outside `allowed` to -inf (a softmax makes exp(-inf) = 0), on the last "
        "axis of every row, on a copy; leave the allowed logits as they are (not 0, not probabilities).",
    )
    return check(
        "logits restricted to the allowed tokens",
        _as_probs(fn),
        _as_probs(allow_only),
        _allow_cases(),
        atol=1e-9,  # a token outside `allowed` must get 0, not a small probability
        rtol=1e-5,  # the allowed ones: logits in float32 are right
        hint=hint,
        quiet=quiet,
        forbid=("lmcore.course.floor.decoding.allow_only",),
        explain=_explain_allowed,
    )
