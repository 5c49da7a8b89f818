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


def _h(counts) -> float:
    """The entropy of a count vector, in nats, written here (a learner's wrong answer's own sum)."""
    f = np.asarray(counts, dtype=np.float64) / np.sum(counts)
    return float(-(f * np.log(f)).sum())


def _floor_ref(contexts, tokens):
    """The lowest mean loss on the sample, by a naive loop: each context's next-token counts,
    their entropy weighted by how often the context comes."""
    from collections import Counter, defaultdict

    groups = defaultdict(Counter)
    for c, x in zip(contexts.tolist(), tokens.tolist()):
        groups[c][x] += 1
    n, total = len(tokens), 0.0
    for g in groups.values():
        n_c = sum(g.values())
        total -= sum(k / n * math.log(k / n_c) for k in g.values())
    return total


def _passes_silently(checker, fn, capfd):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning escaping the check would raise here
        ok = checker(fn)
    out = capfd.readouterr()
    return ok and out.err == "" and "✓ pass" in out.out


def _floor_np_where(contexts, tokens):
    """Per context, np.where over all token ids: log(0) warns, and the answer is right."""
    out = 0.0
    for c in np.unique(contexts):
        f = np.bincount(tokens[contexts == c]) / (contexts == c).sum()
        out -= (contexts == c).mean() * np.where(f > 0, f * np.log(f), 0).sum()
    return float(out)


def test_textbook_np_where_answers_pass_without_a_warning(capfd):
    """np.where evaluates both branches: log(0) warns. The check must pass and write nothing to stderr."""
    assert _passes_silently(FX.check_lowest_loss, _floor_np_where, capfd)
    assert _passes_silently(FX.check_lowest_loss, _floor_ref, capfd)


def test_warnings_are_silenced_only_during_the_call():
    FX.check_lowest_loss(_floor_np_where, quiet=True)
    with pytest.warns(RuntimeWarning):
        np.log(np.array([0.0]))


def test_the_reference_agrees_with_the_naive_loop_and_with_the_chain_rule():
    rng = np.random.default_rng(5)
    c, t = rng.integers(0, 7, 500), rng.integers(0, 9, 500)
    h = lambda k: float(-(k / k.sum() * np.log(k / k.sum())).sum())  # noqa: E731
    joint = np.unique(np.stack([c, t], 1), axis=0, return_counts=True)[1]
    assert FX._sample_floor(c, t) == pytest.approx(_floor_ref(c, t), rel=1e-12)
    assert FX._sample_floor(c, t) == pytest.approx(
        h(joint) - h(np.unique(c, return_counts=True)[1]), rel=1e-12
    )
    assert FX._sample_floor(np.arange(4), np.array([5, 6, 5, 6])) == 0.0  # every context new: memorised
    assert FX._sample_floor(np.zeros(4, int), np.array([1, 2, 3, 4])) == pytest.approx(math.log(4))


@pytest.mark.parametrize(
    "wrong",
    [
        lambda c, t: _floor_ref(c, t) / math.log(2),  # bits, not nats
        lambda c, t: -_floor_ref(c, t),  # sign
        lambda c, t: 0.0,  # "a model can memorise every pair"
        lambda c, t: _h(np.unique(t, return_counts=True)[1]),  # contexts ignored
        lambda c, t: len(t) * _floor_ref(c, t),  # a total
    ],
)
def test_check_lowest_loss_rejects(wrong, capsys):
    assert not FX.check_lowest_loss(wrong)
    assert "✗ fail" in capsys.readouterr().out


def test_the_checkers_own_reference_is_refused(capsys):
    assert not FX.check_lowest_loss(lambda c, t: FX._sample_floor(c, t))
    assert "called lmcore.course.floor.exercises._sample_floor" in capsys.readouterr().out


def test_the_course_entropy_is_refused_only_inside_the_learner_call(capsys):
    def via_course(c, t):
        return sum(
            (c == x).mean() * FL.entropy(np.unique(t[c == x], return_counts=True)[1] / (c == x).sum())
            for x in np.unique(c)
        )

    assert not FX.check_lowest_loss(via_course)
    out = capsys.readouterr().out
    assert "your function called lmcore.course.floor.lesson.entropy: write it yourself" in out
    assert FL.entropy([0.5, 0.5]) == pytest.approx(math.log(2))  # usable again afterwards


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda c, t: 0.0, "followed by different tokens"),
        (lambda c, t: _h(np.unique(t, return_counts=True)[1]), "ignores the contexts"),
        (
            lambda c, t: _h(np.unique(np.stack([c, t], 1), axis=0, return_counts=True)[1]),
            "one outcome",
        ),
        (lambda c, t: _floor_ref(c, t) / math.log(10), "which logarithm"),
        (lambda c, t: len(t) * _floor_ref(c, t), "a total over"),
        (lambda c, t: 0.5 * _floor_ref(c, t) + 1e-3, "below what any model reaches"),
    ],
)
def test_a_wrong_floor_is_diagnosed(wrong, says, capsys):
    assert not FX.check_lowest_loss(wrong)
    assert says in capsys.readouterr().out


def test_the_check_does_not_name_its_answer(capsys):
    """The exercise asks for the lowest loss on a sample and leaves the learner to find that it is
    the entropy of each context's next tokens: neither a failure line nor its nudge names it."""
    assert not FX.check_lowest_loss(lambda c, t: 0.5)
    out = capsys.readouterr().out.lower()
    assert "entropy" not in out and "frequenc" not in out and "ln p" not in out


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

    for checker in (FX.check_lowest_loss, FX.check_subtraction_floor):
        assert not checker(stub)
    assert capsys.readouterr().out.count("not attempted yet") == 2


# ---------------------------------------------------------------- a model that ignores context


def _freq_entropy(tokens):
    from collections import Counter

    c = np.array(list(Counter(tokens).values()), dtype=float)
    p = c / c.sum()
    return float(-(p * np.log(p)).sum())


def test_context_free_floor_by_hand_and_from_a_sampled_corpus():
    # one turn 0 + 0 = 0: targets 0 + 0 = <assistant> 0 . EOS -> 0 three times, five others once
    assert FL.context_free_floor(0) == pytest.approx(-(3 / 8) * math.log(3 / 8) - 5 / 8 * math.log(1 / 8))
    from lmcore.data import chat_arithmetic

    sample = [t for text in chat_arithmetic(20000, seed=3) for t in TOK.encode(text)[1:] + [TOK.eos_id]]
    assert _freq_entropy(sample) == pytest.approx(FL.context_free_floor(9), abs=0.01)
    assert FL.context_free_floor(9) > chat_arithmetic_entropy() + 1.5  # context is worth a lot here


def _bigram_floor_from_a_stream(texts):
    """H(target | previous token) measured on a sampled corpus, by a naive loop over its pairs."""
    from collections import Counter

    pairs = Counter()
    for text in texts:
        ids = TOK.encode(text) + [TOK.eos_id]
        pairs.update(zip(ids[:-1], ids[1:]))
    before = Counter()
    for (c, _), k in pairs.items():
        before[c] += k
    n = sum(pairs.values())
    return -sum(k / n * math.log(k / before[c]) for (c, _), k in pairs.items())


def test_previous_token_floor_by_hand_and_from_a_sampled_corpus():
    # one turn <user> 0 + 0 = <assistant> 0 . EOS: the previous token 0 is followed by +, = and .
    # once each (ln 3 for 3 of the 8 targets); every other previous token fixes its target
    assert FL.previous_token_floor(0) == pytest.approx(3 / 8 * math.log(3))
    from lmcore.data import chat_arithmetic

    sample = _bigram_floor_from_a_stream(chat_arithmetic(20000, seed=4))
    assert sample == pytest.approx(FL.previous_token_floor(9), abs=0.01)
    assert chat_arithmetic_entropy() < FL.previous_token_floor(9) < FL.context_free_floor(9)


# ---------------------------------------------------------------- issue 38: the answer matrix's findings


def _floor_float32(h):
    f = np.float32
    nats = targets = f(0)
    for a in range(h + 1):
        for b in range(a + 1):
            p = f(1) / (f(h + 1) * f(a + 1))
            nats -= p * np.log(p)
            targets += p * f(_digits(a) + _digits(b) + _digits(a - b) + 5)
    return float(nats / targets)


def _sample_floor_float32(contexts, tokens):
    out = np.float32(0.0)
    for c in np.unique(contexts):
        k = np.unique(tokens[contexts == c], return_counts=True)[1].astype(np.float32)
        f = k / k.sum()
        out += np.float32((contexts == c).mean()) * -(f * np.log(f)).sum()
    return float(out)


def test_float32_answers_pass(capsys):
    """Issue 38: rtol 1e-7 rejected KL(p || q) in float32 ('expected 0.17831617, got 0.17831619'),
    the subtraction floor in float32 (a float32 loop is 1.3e-5 off at high = 99: rtol 1e-4, the
    nearest plausible mistake is 1.2e-3 off) and the context-free floor in float32."""
    assert FX.check_lowest_loss(_sample_floor_float32)
    assert FX.check_subtraction_floor(_floor_float32)
    assert capsys.readouterr().out.count("✓ pass") == 2


def test_the_nearest_wrong_floors_still_fail_at_the_looser_tolerance():
    assert not FX.check_subtraction_floor(WRONG_FLOORS["mean of ratios"], quiet=True)


def test_a_librarys_entropy_or_kl_in_one_call_is_refused(capsys):
    """Issue 38: 'write it yourself', yet torch's Categorical.entropy, F.kl_div and
    torch.distributions.kl_divergence passed."""
    import torch
    import torch.nn.functional as F

    cat = lambda p: torch.distributions.Categorical(probs=torch.from_numpy(p))  # noqa: E731

    def per_context(entropy_of):
        return lambda c, t: sum(
            (c == x).mean() * entropy_of(np.unique(t[c == x], return_counts=True)[1] / (c == x).sum())
            for x in np.unique(c)
        )

    cheats = [
        lambda p: float(cat(p).entropy()),
        lambda p: (
            float(torch.distributions.kl_divergence(cat(p), cat(np.full(p.size, 1 / p.size))) * -1)
            + math.log(p.size)
        ),
        lambda p: (
            float(
                F.kl_div(
                    torch.full_like(torch.from_numpy(p), -math.log(p.size)),
                    torch.from_numpy(p),
                    reduction="sum",
                )
            )
            * -1
            + math.log(p.size)
        ),
    ]
    for cheat in cheats:
        assert not FX.check_lowest_loss(per_context(cheat))
        assert "a library's entropy or KL in one call" in capsys.readouterr().out
    # an elementwise helper leaves the sum to the learner: allowed
    assert FX.check_lowest_loss(
        per_context(lambda p: float(-torch.special.xlogy(torch.from_numpy(p), torch.from_numpy(p)).sum()))
    )


def test_sample_floors_against_a_naive_loop_and_bad_input():
    """Each sample's floor is the entropy of its own frequencies, its held-out loss the cross-entropy
    of p against them (inf where the sample missed a token p draws), recomputed here sample by
    sample with collections.Counter from the same draws."""
    from collections import Counter

    p = np.array([0.5, 0.25, 0.125, 0.125])
    out = FL.sample_floors(p, 12, samples=50, seed=3)
    counts = np.random.default_rng(3).multinomial(12, p, size=50)
    for k, row in enumerate(counts):
        f = {x: c / 12 for x, c in Counter(np.repeat(np.arange(4), row).tolist()).items()}
        assert out["floor"][k] == pytest.approx(-sum(v * math.log(v) for v in f.values()), abs=1e-12)
        held = -sum(p[x] * math.log(f[x]) for x in range(4)) if len(f) == 4 else math.inf
        assert out["held_out"][k] == pytest.approx(held, abs=1e-12)
    assert out["missed"] == pytest.approx(np.mean([(row == 0).any() for row in counts]))
    for bad in ({"n": 0}, {"n": 2.5}, {"n": True}):
        with pytest.raises(ValueError, match="n must be"):
            FL.sample_floors(p, **bad)
    with pytest.raises(ValueError, match="samples must be"):
        FL.sample_floors(p, 5, samples=0)
    with pytest.raises(ValueError, match="p must be"):
        FL.sample_floors([0.5, 0.6], 5)
    for bad in (-1, 1000, 2.0, True):
        with pytest.raises(ValueError, match="high must be"):
            FL.previous_token_floor(bad)
        with pytest.raises(ValueError, match="high must be"):
            FL.context_free_floor(bad)
