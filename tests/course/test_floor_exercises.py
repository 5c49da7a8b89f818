"""Notebook 09's checkers: each accepts right answers (also ones that warn), and rejects the
course's own function, the shortcut and plausible wrong answers. References are written here
(closed forms, a sampled corpus), never taken from the module under test."""

import math
import warnings

import numpy as np
import pytest

from lmcore.course.floor import exercises as FX
from lmcore.course.floor import lesson as FL
from lmcore.data import ChatTokenizer, chat_arithmetic_entropy

TOK = ChatTokenizer()


def _entropy_ref(p):
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _kl_ref(p, q):
    k = p > 0
    return float((p[k] * np.log(p[k] / q[k])).sum())


def _terms_ref(p, q):
    """Token x's share of the gap: p(x) ln(p(x) / q(x)), 0 where p(x) = 0."""
    out, k = np.zeros_like(p), p > 0
    out[k] = p[k] * np.log(p[k] / q[k])
    return out


def _passes_silently(checker, fn, capfd):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning escaping the check would raise here
        ok = checker(fn)
    out = capfd.readouterr()
    return ok and out.err == "" and "✓ pass" in out.out


def test_textbook_np_where_answers_pass_without_a_warning(capfd):
    """np.where evaluates both branches: log(0) warns. The check must pass and write nothing to stderr."""
    assert _passes_silently(
        FX.check_lowest_loss, lambda p: float(-np.where(p > 0, p * np.log(p), 0).sum()), capfd
    )
    assert _passes_silently(
        FX.check_gap_by_token, lambda p, q: np.where(p > 0, p * np.log(p / q), 0.0), capfd
    )
    assert _passes_silently(FX.check_lowest_loss, _entropy_ref, capfd)
    assert _passes_silently(FX.check_gap_by_token, _terms_ref, capfd)


def test_warnings_are_silenced_only_during_the_call():
    FX.check_lowest_loss(lambda p: float(-np.where(p > 0, p * np.log(p), 0).sum()), quiet=True)
    with pytest.warns(RuntimeWarning):
        np.log(np.array([0.0]))


@pytest.mark.parametrize(
    "wrong",
    [
        lambda p: FL.entropy(p),  # the course's reference
        lambda p: FL.cross_entropy(p, p),  # the reference by another name
        lambda p: float(-(p[p > 0] * np.log2(p[p > 0])).sum()),  # bits, not nats
        lambda p: float(-(p * np.log(p)).sum()),  # 0 ln 0 -> nan
        lambda p: float((p[p > 0] * np.log(p[p > 0])).sum()),  # sign
        lambda p: float(-np.log(p[p > 0]).mean()),  # mean surprisal, unweighted
    ],
)
def test_check_lowest_loss_rejects(wrong, capsys):
    assert not FX.check_lowest_loss(wrong)
    assert "✗ fail" in capsys.readouterr().out


def test_the_checkers_own_references_are_refused(capsys):
    assert not FX.check_lowest_loss(lambda p: FX._entropy(p))
    assert not FX.check_gap_by_token(lambda p, q: FX._gap_terms(p, q))
    out = capsys.readouterr().out
    assert "called lmcore.course.floor.exercises._entropy" in out
    assert "called lmcore.course.floor.exercises._gap_terms" in out


def test_the_reference_is_refused_only_inside_the_learner_call(capsys):
    assert not FX.check_lowest_loss(lambda p: FL.entropy(p))
    out = capsys.readouterr().out
    assert "your function called lmcore.course.floor.lesson.entropy: write it yourself" in out
    assert FL.entropy([0.5, 0.5]) == pytest.approx(math.log(2))  # usable again afterwards


@pytest.mark.parametrize(
    "wrong",
    [
        lambda p, q: FL.gap_by_token(p, q),  # the course's reference
        lambda p, q: np.full(p.size, FL.kl_divergence(p, q)),  # the course's KL, spread out
        lambda p, q: _terms_ref(q, p) if np.all(p > 0) else np.full(p.size, np.inf),  # reversed
        lambda p, q: _terms_ref(p, q) / math.log(2),  # bits
        lambda p, q: -p * np.log(q),  # the model's whole loss per token, not its share of the gap
        lambda p, q: _kl_ref(p, q),  # the total gap, one number
        lambda p, q: _terms_ref(p, q) - p + q,  # generalised KL terms: same total, other entries
    ],
)
def test_check_gap_by_token_rejects(wrong):
    assert not FX.check_gap_by_token(wrong, quiet=True)


def _terms_difference_float32(p, q):
    """x's term of the model's loss minus x's term of the lowest, in float32: a right answer, as
    is the combined log."""
    p32, q32 = p.astype(np.float32), q.astype(np.float32)
    return -p32 * np.log(q32) + p32 * np.log(np.where(p32 > 0, p32, 1))


def test_check_gap_by_token_accepts_the_difference_of_two_terms_and_the_combined_log(capsys):
    assert FX.check_gap_by_token(lambda p, q: -p * np.log(q) + p * np.log(np.where(p > 0, p, 1.0)))
    assert FX.check_gap_by_token(_terms_difference_float32)
    assert FX.check_gap_by_token(_terms_ref)
    assert FX.check_gap_by_token(lambda p, q: list(_terms_ref(p, q)))  # a list of floats reads the same
    assert capsys.readouterr().out.count("✓ pass") == 4


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda p: 0.0, "cannot know which one comes"),  # "a perfect model pays 0"
        (lambda p: math.log(p.size), "the uniform model"),  # the uniform model's loss
        (lambda p: float(-np.log(p.max())), "the likeliest token"),  # the mode's loss alone
        (lambda p: float(-(p[p > 0] * np.log10(p[p > 0])).sum()), "which logarithm"),
    ],
)
def test_a_wrong_floor_is_diagnosed(wrong, says, capsys):
    assert not FX.check_lowest_loss(wrong)
    assert says in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda p, q: -p * np.log(q), "whole expected loss"),
        (
            lambda p, q: _terms_ref(q, p) if np.all(p > 0) else np.full(p.size, np.inf),
            "weighting by the model",
        ),
        (lambda p, q: _kl_ref(p, q), "one number"),
        (lambda p, q: np.where(p > 0, np.log(np.where(p > 0, p, 1.0) / q), 0.0), "how often does x come"),
        (lambda p, q: np.where(p > 0, _terms_ref(p, q), -np.log(q)), "that token never comes"),
        (lambda p, q: p * np.log(p / q), "what does 0 * ln 0 give"),
        (lambda p, q: _terms_ref(p, q) - p + q, "a token that never comes bring"),
        (lambda p, q: _terms_ref(p, q)[::-1].copy(), "not token by token"),
    ],
)
def test_a_wrong_gap_by_token_is_diagnosed(wrong, says, capsys):
    assert not FX.check_gap_by_token(wrong)
    assert says in capsys.readouterr().out


def test_the_first_two_checks_do_not_name_their_answer(capsys):
    """The exercises ask for the lowest loss and the gap, and leave the learner to find that they
    are the entropy and the KL divergence: neither a failure line nor its nudge names them."""
    assert not FX.check_lowest_loss(lambda p: 0.5)
    assert not FX.check_gap_by_token(lambda p, q: np.full(p.size, 0.5))
    out = capsys.readouterr().out.lower()
    assert "entropy" not in out and "kl" not in out and "sum p ln p" not in out


# ---------------------------------------------------------------- the subtraction generator


def _digits(x):
    return len(str(x))


def _floor_closed_form(h):
    """H(a) + H(b | a) over the expected targets: the digits of a, b and c, plus 5."""
    ea = [a for a in range(h + 1)]
    nats = math.log(h + 1) + sum(math.log(a + 1) for a in ea) / (h + 1)
    targets = 5 + sum(
        sum(_digits(a) + _digits(b) + _digits(a - b) for b in range(a + 1)) / (a + 1) for a in ea
    ) / (h + 1)
    return nats / targets


def _learner(h):
    nats = math.log(h + 1) + sum(math.log(a + 1) for a in range(h + 1)) / (h + 1)
    n = 0.0
    for a in range(h + 1):
        for b in range(a + 1):
            n += (len(str(a)) + len(str(b)) + len(str(a - b)) + 5) / ((h + 1) * (a + 1))
    return nats / n


@pytest.mark.parametrize("h", [0, 1, 9, 12, 99])
def test_subtraction_floor_matches_the_closed_form(h):
    assert FX.subtraction_floor(h) == pytest.approx(_floor_closed_form(h), rel=1e-12, abs=1e-15)


def test_subtraction_floor_single_digits_by_hand():
    # every turn has 8 targets; H = ln 10 + ln(10!) / 10
    assert FX.subtraction_floor(9) == pytest.approx((math.log(10) + math.log(math.factorial(10)) / 10) / 8)


def test_subtraction_turns_follow_the_rule_and_the_floor_is_an_empirical_floor():
    turns = FX.subtraction_turns(20000, 4, seed=1)
    pairs = [(int(t.split()[1]), int(t.split()[3]), int(t.split()[6])) for t in turns]
    assert all(0 <= b <= a <= 4 and c == a - b for a, b, c in pairs)
    # the perfect model's mean NLL on a sample, from the generator's own probabilities
    nll = sum(math.log(5 * (a + 1)) for a, _, _ in pairs)
    n = sum(len(TOK.encode(t)) for t in turns)
    assert nll / n == pytest.approx(FX.subtraction_floor(4), rel=0.02)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "9", 1000])
def test_subtraction_rejects_bad_high(bad):
    with pytest.raises(ValueError, match="high"):
        FX.subtraction_floor(bad)
    with pytest.raises(ValueError, match="high"):
        FX.subtraction_turns(3, bad)


def _b_uniform(h):  # b uniform on 0..high, as in the + corpus
    return 2 * math.log(h + 1) / _mean_targets(h)


def _per_turn_ratio(h):  # the mean of per-turn ratios, not a ratio of means
    tot = 0.0
    for a in range(h + 1):
        for b in range(a + 1):
            p = 1 / ((h + 1) * (a + 1))
            tot += p * (-math.log(p)) / (_digits(a) + _digits(b) + _digits(a - b) + 5)
    return tot


def _uniform_pairs(h):  # every (a, b) pair equally likely
    pairs = [(a, b) for a in range(h + 1) for b in range(a + 1)]
    return math.log(len(pairs)) / (
        sum(_digits(a) + _digits(b) + _digits(a - b) + 5 for a, b in pairs) / len(pairs)
    )


WRONG_FLOORS = {
    "the course's reference": lambda h: FX.subtraction_floor(h),
    "chat_arithmetic_entropy with -": lambda h: chat_arithmetic_entropy(high=h, ops=("-",)),
    "fixed 8 targets": lambda h: (math.log(h + 1) + sum(math.log(a + 1) for a in range(h + 1)) / (h + 1)) / 8,
    "per turn": lambda h: _learner(h) * (5 + 3),  # not per target (wrong even at high = 9)
    "bits": lambda h: _learner(h) / math.log(2),
    "no EOS target": lambda h: _learner(h) * _mean_targets(h) / (_mean_targets(h) - 1),
    "b uniform": _b_uniform,
    "mean of ratios": _per_turn_ratio,
    "pairs equally likely": _uniform_pairs,
}


def _mean_targets(h):
    return sum(
        (_digits(a) + _digits(b) + _digits(a - b) + 5) / ((h + 1) * (a + 1))
        for a in range(h + 1)
        for b in range(a + 1)
    )


def test_check_subtraction_floor_accepts_a_right_answer(capsys):
    assert FX.check_subtraction_floor(_learner)
    assert "✓ pass" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(WRONG_FLOORS))
def test_check_subtraction_floor_rejects(name, capsys):
    assert not FX.check_subtraction_floor(WRONG_FLOORS[name])
    out = capsys.readouterr().out
    assert "✗ fail" in out and "high = " in out  # names the first case that differs


def test_stub_reads_not_attempted(capsys):
    def stub(*args):
        raise NotImplementedError

    for checker in (FX.check_lowest_loss, FX.check_gap_by_token, FX.check_subtraction_floor):
        assert not checker(stub)
    assert capsys.readouterr().out.count("not attempted yet") == 3


# ---------------------------------------------------------------- a model that ignores context


def _freq_entropy(tokens):
    from collections import Counter

    c = np.array(list(Counter(tokens).values()), dtype=float)
    p = c / c.sum()
    return float(-(p * np.log(p)).sum())


def _targets(h, *, first=1, eos=True):
    out = []
    for a in range(h + 1):
        for b in range(h + 1):
            ids = TOK.encode(f"<user> {a} + {b} = <assistant> {a + b} .")[first:]
            out += ids + ([TOK.eos_id] if eos else [])
    return out


def test_context_free_floor_by_hand_and_from_a_sampled_corpus():
    # one turn 0 + 0 = 0: targets 0 + 0 = <assistant> 0 . EOS -> 0 three times, five others once
    assert FX.context_free_floor(0) == pytest.approx(-(3 / 8) * math.log(3 / 8) - 5 / 8 * math.log(1 / 8))
    from lmcore.data import chat_arithmetic

    sample = [t for text in chat_arithmetic(20000, seed=3) for t in TOK.encode(text)[1:] + [TOK.eos_id]]
    assert _freq_entropy(sample) == pytest.approx(FX.context_free_floor(9), abs=0.01)
    assert FX.context_free_floor(9) > chat_arithmetic_entropy() + 1.5  # context is worth a lot here


WRONG_CONTEXT_FREE = {
    "the course's reference": lambda h: FX.context_free_floor(h),
    "the floor with context": lambda h: chat_arithmetic_entropy(high=h),
    "ln V (a uniform guess)": lambda h: math.log(TOK.vocab_size),
    "<user> counted as a target": lambda h: _freq_entropy(_targets(h, first=0)),
    "no EOS target": lambda h: _freq_entropy(_targets(h, eos=False)),
    "bits": lambda h: _freq_entropy(_targets(h)) / math.log(2),
    "only the tokens that occur, uniform": lambda h: math.log(len(set(_targets(h)))),
}


def test_check_context_free_floor_accepts_a_count(capsys):
    assert FX.check_context_free_floor(lambda h: _freq_entropy(_targets(h)))
    assert "✓ pass" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(WRONG_CONTEXT_FREE))
def test_check_context_free_floor_rejects(name, capsys):
    assert not FX.check_context_free_floor(WRONG_CONTEXT_FREE[name])
    assert "✗ fail" in capsys.readouterr().out


# ---------------------------------------------------------------- issue 38: the answer matrix's findings


def _entropy_float32(p):
    p = np.asarray(p, dtype=np.float32)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _terms_float32(p, q):
    p32, q32 = np.asarray(p, dtype=np.float32), np.asarray(q, dtype=np.float32)
    return np.where(p32 > 0, p32 * (np.log(np.where(p32 > 0, p32, 1)) - np.log(q32)), 0)


def _floor_float32(h):
    f = np.float32
    nats = targets = f(0)
    for a in range(h + 1):
        for b in range(a + 1):
            p = f(1) / (f(h + 1) * f(a + 1))
            nats -= p * np.log(p)
            targets += p * f(_digits(a) + _digits(b) + _digits(a - b) + 5)
    return float(nats / targets)


def _context_free_float32(h):
    from collections import Counter

    c = np.array(list(Counter(_targets(h)).values()), dtype=np.float32)
    p = c / c.sum()
    return float(-(p * np.log(p)).sum())


def test_float32_answers_pass(capsys):
    """Issue 38: rtol 1e-7 rejected KL(p || q) in float32 ('expected 0.17831617, got 0.17831619'),
    the subtraction floor in float32 (a float32 loop is 1.3e-5 off at high = 99: rtol 1e-4, the
    nearest plausible mistake is 1.2e-3 off) and the context-free floor in float32."""
    assert FX.check_lowest_loss(_entropy_float32)
    assert FX.check_gap_by_token(_terms_float32)
    assert FX.check_subtraction_floor(_floor_float32)
    assert FX.check_context_free_floor(_context_free_float32)
    assert capsys.readouterr().out.count("✓ pass") == 4


def test_the_nearest_wrong_floors_still_fail_at_the_looser_tolerance():
    assert not FX.check_subtraction_floor(WRONG_FLOORS["mean of ratios"], quiet=True)
    for name in WRONG_CONTEXT_FREE:
        assert not FX.check_context_free_floor(WRONG_CONTEXT_FREE[name], quiet=True), name


def test_a_librarys_entropy_or_kl_in_one_call_is_refused(capsys):
    """Issue 38: 'write it yourself', yet torch's Categorical.entropy, F.kl_div and
    torch.distributions.kl_divergence passed."""
    import torch
    import torch.nn.functional as F

    cat = lambda p: torch.distributions.Categorical(probs=torch.from_numpy(p))  # noqa: E731
    cheats = [
        (FX.check_lowest_loss, lambda p: float(cat(p).entropy())),
        (
            FX.check_gap_by_token,
            lambda p, q: F.kl_div(torch.from_numpy(q).log(), torch.from_numpy(p), reduction="none").numpy(),
        ),
        (
            FX.check_gap_by_token,
            lambda p, q: np.full(p.size, float(torch.distributions.kl_divergence(cat(p), cat(q)))),
        ),
    ]
    for checker, cheat in cheats:
        assert not checker(cheat)
        assert "a library's entropy or KL in one call" in capsys.readouterr().out
    # an elementwise helper leaves the sum to the learner: allowed
    assert FX.check_lowest_loss(
        lambda p: float(-torch.special.xlogy(torch.from_numpy(p), torch.from_numpy(p)).sum())
    )


def test_the_context_free_nudge_asks_without_giving_the_method():
    from lmcore.course.solutions import hint_stages

    (nudge,), _ = hint_stages("check_context_free_floor")
    assert "?" in nudge and "frequenc" not in nudge
