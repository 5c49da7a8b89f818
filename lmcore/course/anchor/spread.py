"""Notebook 04's Exercise 1: the expected first loss of i.i.d. N(0, sigma^2) logits over V tokens,
predicted before section 3 derives it.

The learner writes ``fn(V, sigma) -> nats``. The check's cases sit where ln V + sigma^2/2 is tight
(V far above e^(sigma^2)); on them the expectation is the law less (e^(sigma^2) - 1) / (2V) (the
next term of ln S around ln E[S]), so the law, anything closer to the expectation (a Monte Carlo
estimate with enough draws, a numerical integral) and the expectation itself all pass, within
0.002 plus the law's own error. A wrong answer is named by the one mistake it matches, as a
question; none of them states the law.
"""

from __future__ import annotations

import math

from ..checks import Case, check, near_mistake, only_match

__all__ = ["expected_loss_at_spread", "check_first_loss_at_spread"]

# (V, sigma): V >= 30 e^(sigma^2) everywhere, so the law is within 0.005 of the expectation
_CASES = (
    (32_000, 1.5),  # first: every mistake of _mistakes gives another value here
    (50_257, 1.0),
    (1_000, 0.5),
    (65, 0.5),
    (8_192, 0.3),
    (128_256, 2.0),
    (1_000, 1.2),
    (50_257, 0.0),
    (50_257, 0.08),
)


def expected_loss_at_spread(vocab_size: int, sigma: float) -> float:
    """E[logsumexp(z)] for V i.i.d. N(0, sigma^2) logits, to second order in the sum's spread:
    ln V + sigma^2/2 - (e^(sigma^2) - 1) / (2V). (A uniformly random target's logit averages 0.)"""
    return math.log(vocab_size) + sigma**2 / 2 - math.expm1(sigma**2) / (2 * vocab_size)


def _allowed(vocab_size: int, sigma: float) -> float:
    """0.002 plus the law's own distance from the expectation."""
    return 2e-3 + math.expm1(sigma**2) / (2 * vocab_size)


def _mistakes(V: int, s: float) -> list[tuple[float, str]]:
    """(the value a mistake gives at (V, sigma), the question to ask about it)."""
    ln_v = math.log(V)
    grows_like_sigma = (
        "your excess over ln V grows like sigma: z and -z are equally likely, so can the loss "
        "depend on the sign of sigma? Which power of a small sigma does that leave?"
    )
    return [
        (
            ln_v,
            "your prediction is ln V at every sigma: do logits spread around 0 cost a random target "
            "more than equal logits, less, or the same?",
        ),
        (
            ln_v - s * s / 2,
            "your prediction is below ln V: can logits drawn at random beat a uniform guess, on average?",
        ),
        (ln_v + s, grows_like_sigma),
        (ln_v + s / 2, grows_like_sigma),
        (
            ln_v + s * s,
            "your excess over ln V grows like sigma^2, but it is not the right size: what is E[e^z] "
            "for z drawn from N(0, sigma^2)?",
        ),
        (
            ln_v + math.log1p(s * s / 2),
            "your excess is ln(1 + sigma^2/2), which is right only for a small sigma: what is "
            "E[e^z] for z drawn from N(0, sigma^2), exactly?",
        ),
        (
            math.log2(V) + s * s / 2,
            "your ln V part matches a logarithm in base 2: is the loss measured in bits or in nats?",
        ),
    ]


def _explain(fn, case, expected, got) -> str:
    V, s = case.args
    try:
        value = float(got)
    except (TypeError, ValueError):
        return ""
    e = float(expected)
    named = only_match(q for candidate, q in _mistakes(V, s) if near_mistake(value, candidate, e))
    if named or not abs(value - e) < 10 * _allowed(V, s):
        return named
    return (  # near, and no mistake: an estimate whose noise is larger than the check allows
        f"yours is {abs(value - e):.2g} from the expected loss, nearer than any mistake this check "
        f"knows. If it is an estimate, is its noise below the {_allowed(V, s):.2g} allowed here, and how "
        "would it change with more draws? If it is a formula, which of its terms is not exact?"
    )


def check_first_loss_at_spread(fn, quiet: bool = False) -> bool:
    """Grade ``fn(V, sigma) -> the expected loss (nats) on uniformly random targets of V i.i.d.
    N(0, sigma^2) logits``, against :func:`expected_loss_at_spread`."""
    return check(
        "first_loss_at_spread",
        fn,
        expected_loss_at_spread,
        [Case((V, s), label=f"V = {V:,}, sigma = {s}") for V, s in _CASES],
        quiet=quiet,
        atol=_allowed,
        rtol=0,
        explain=_explain,
        forbid={
            f"lmcore.course.anchor.{name}": "that is the course's own answer or measurement: derive it"
            for name in (
                "lesson.predict_first_loss",
                "lesson.iid_logit_loss",
                "lesson.expected_first_loss",
                "lesson.first_loss",
                "lesson.predict_from_logits",
                "spread.expected_loss_at_spread",
            )
        },
        hint=(
            "How does the loss of one position, logsumexp(z) - z_y, depend on the logits' spread? "
            "What does a random target's z_y average to, and what is the mean of e^z for a normal z?",
            "E[loss] = E[logsumexp(z)] - E[z_y], and E[z_y] = 0. For large V the sum S of the e^z "
            "hardly varies, so E[ln S] is close to ln E[S] = ln(V E[e^z]) = ln V + sigma^2/2 "
            "(E[e^z] = e^(sigma^2/2) for z ~ N(0, sigma^2): complete the square). The answer is "
            "ln V + sigma^2/2 in nats.",
        ),
    )
