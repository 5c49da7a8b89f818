"""Notebook 09's constrained decoding: the mask against a hand-written softmax, the answer
grammar, and the checker of Exercise 2 (the chance a sampler that draws again until the grammar
allows the draw writes a token: its reference against the sampler's series by hand, right answers
in other forms accepted, the course's ``allow_only`` and plausible wrong answers rejected)."""

import math

import pytest
import torch

from lmcore.course.floor import decoding as FD
from lmcore.course.floor import exercises as FX
from lmcore.data import ChatTokenizer
from lmcore.model import GPT, GPTConfig

TOK = ChatTokenizer()


def _masked_softmax_by_hand(row, allowed):
    z = sum(math.exp(row[i]) for i in set(allowed))
    return [math.exp(x) / z if i in allowed else 0.0 for i, x in enumerate(row)]


def test_allow_only_matches_a_hand_written_masked_softmax():
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0, -2.0], [0.0, 0.0, 1.0, -5.0, 4.0]], dtype=torch.float64)
    out = FD.allow_only(logits, [1, 2, 4])
    probs = torch.softmax(out, -1)
    for r in range(2):
        assert probs[r].tolist() == pytest.approx(_masked_softmax_by_hand(logits[r].tolist(), {1, 2, 4}))
    assert logits[0, 0] == 2.0  # the input is unchanged


@pytest.mark.parametrize(
    "logits, allowed, exc",
    [
        ([1.0, 2.0], [0], TypeError),
        (torch.tensor([1, 2]), [0], TypeError),
        (torch.zeros(3), [], ValueError),
        (torch.zeros(3), [3], ValueError),
        (torch.zeros(3), [True], ValueError),
    ],
)
def test_allow_only_validates(logits, allowed, exc):
    with pytest.raises(exc):
        FD.allow_only(logits, allowed)


def _model(seed=0):
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=TOK.vocab_size, block_size=16, n_layer=1, n_head=1, n_embd=8, dropout=0.0)
    return GPT(cfg).double()


def test_constrained_answers_always_follow_the_grammar_and_free_ones_need_not():
    model = _model()  # untrained: its free samples are mostly not numbers
    con = FD.score_answers(*FD.write_answers(model, "constrained", repeats=2))
    free = FD.score_answers(*FD.write_answers(model, "sample", repeats=2))
    assert con["valid"] == 1.0 and con["n"] == 200
    assert free["valid"] < 0.5


def test_greedy_answers_are_the_argmax_and_repeat():
    model = _model(1)
    toks, sums = FD.write_answers(model, "greedy", repeats=3)
    assert torch.equal(toks[0::3], toks[1::3]) and sums[:3] == [0, 0, 0]
    seq = TOK.encode("<user> 0 + 0 = <assistant>")
    for k in range(3):  # one prompt by hand
        with torch.no_grad():
            nxt = int(model(torch.tensor([seq]))[0, -1].argmax())
        assert nxt == int(toks[0, k])
        seq.append(nxt)


def test_score_answers_by_hand():
    enc = lambda s: TOK.encode(s)  # noqa: E731
    tokens = torch.tensor(
        [enc("1 2 ."), enc("7 . ."), enc("7 . 3"), enc(". 1 ."), enc("1 2 3"), enc("0 5 .")]
    )
    got = FD.score_answers(tokens, [12, 7, 8, 1, 12, 5])
    # well-formed: "12.", "7.", "7." (the token after "." is never read), "05."; right: 12 and 7
    assert got == {"valid": 4 / 6, "right": 2 / 6, "n": 6}


def test_write_answers_validates():
    with pytest.raises(ValueError, match="mode"):
        FD.write_answers(_model(), "beam")
    with pytest.raises(ValueError, match="repeats"):
        FD.write_answers(_model(), "greedy", repeats=0)


# ---------------------------------------------------------------- Exercise 2's checker


def _keep(logits, allowed):
    keep = torch.zeros(logits.shape[-1], dtype=torch.bool)
    keep[list(allowed)] = True
    return keep


def _redraw_by_hand(row, allowed, token):
    """The sampler the exercise describes, summed as its series: kept at once with p_t, thrown away
    with 1 - P_A and started again (plain floats, round after round, logits that do not underflow)."""
    p = _masked_softmax_by_hand(row, range(len(row)))
    if token not in allowed:
        return 0.0
    p_allowed, total, term = sum(p[a] for a in allowed), 0.0, p[token]
    while term > 1e-18:  # the rounds until what is left is below float64's reach
        total, term = total + term, term * (1 - p_allowed)
    return total


def test_the_reference_is_the_redrawing_sampler():
    for case in FX._chance_cases():
        logits, allowed, token = case.args
        if logits.ndim != 1 or float(logits.max() - logits.min()) > 100:
            continue  # the series by hand needs one row whose probabilities do not underflow
        want = _redraw_by_hand(logits.tolist(), allowed, token)
        assert float(FX._constrained_chance(logits, allowed, token)) == pytest.approx(
            want, rel=1e-9, abs=1e-15
        )


def test_the_far_apart_rows_break_the_free_probabilities():
    """The three far-apart cases are there because the free model's chances of the allowed tokens
    are exactly 0 in float64: p_t / P_A from them is 0 / 0 (the third also sits below any finite
    value a mask could set the forbidden logits to)."""

    def gap(case):  # how far the allowed logits sit below the row's largest
        logits, allowed, _ = case.args
        return float(logits.max() - logits[..., list(allowed)].max())

    far = [c for c in FX._chance_cases() if gap(c) > 700]
    assert len(far) == 3
    for case in far:
        logits, allowed, _ = case.args
        assert float(torch.softmax(logits, -1)[list(allowed)].sum()) == 0.0


RIGHT = {
    "masked softmax": lambda l, a, t: torch.softmax(l.masked_fill(~_keep(l, a), float("-inf")), -1)[..., t],
    "a -1e9 mask": lambda l, a, t: torch.softmax(torch.where(_keep(l, a), l, l - 1e9), -1)[..., t],
    "logsumexp, float32, a Python float for one row": lambda l, a, t: (
        (
            torch.exp(l[..., t].float() - torch.logsumexp(l[..., list(a)].float(), -1))
            if t in a
            else torch.zeros(l.shape[:-1])
        )
        if l.ndim > 1
        else float(math.exp(l[t] - torch.logsumexp(l[list(a)], -1)) if t in a else 0.0)
    ),
}


@pytest.mark.parametrize("right", RIGHT.values(), ids=RIGHT.keys())
def test_check_constrained_chance_accepts_right_answers(right, capfd):
    assert FX.check_constrained_chance(right)
    out = capfd.readouterr()
    assert "✓ pass" in out.out and out.err == ""


def test_check_constrained_chance_refuses_the_course_mask(capsys):
    assert not FX.check_constrained_chance(lambda l, a, t: torch.softmax(FD.allow_only(l, a), -1)[..., t])
    assert "your function called lmcore.course.floor.decoding.allow_only: write it yourself" in (
        capsys.readouterr().out
    )


WRONG = {
    "the free model's chance": (
        lambda l, a, t: torch.softmax(l, -1)[..., t],
        "where does its probability go",
    ),
    "a penalty of 10, not -inf": (
        lambda l, a, t: torch.softmax(torch.where(_keep(l, a), l, l - 10), -1)[..., t],
        "Hint:",
    ),
    "exp without the max": (
        lambda l, a, t: torch.exp(l[..., t]) / torch.exp(l[..., list(a)]).sum(-1) * (t in a),
        "not a number",
    ),
    "masked in place": (
        lambda l, a, t: torch.softmax(l.masked_fill_(~_keep(l, a), float("-inf")), -1)[..., t],
        "modified its input",
    ),
    "the whole row": (
        lambda l, a, t: torch.softmax(l.masked_fill(~_keep(l, a), float("-inf")), -1),
        "one chance per row",
    ),
    "the first row only": (
        lambda l, a, t: (
            torch.softmax(l.masked_fill(~_keep(l, a), float("-inf")), -1)[..., t].flatten()[0]
            * torch.ones(l.shape[:-1])
        ),
        "✗ fail",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_check_constrained_chance_rejects(name, capsys):
    wrong, says = WRONG[name]
    assert not FX.check_constrained_chance(wrong)
    out = capsys.readouterr().out
    assert "✗ fail" in out and says in out and "tensor(" not in out


def test_check_constrained_chance_reads_a_stub_as_not_attempted(capsys):
    def stub(logits, allowed, token):
        raise NotImplementedError

    assert not FX.check_constrained_chance(stub)
    assert "not attempted yet" in capsys.readouterr().out
