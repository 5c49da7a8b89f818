"""Notebook 09's constrained decoding: the mask against a hand-written softmax, the answer
grammar, and the checker of Exercise 3 (accepts -inf and -1e9 masks, rejects the course's
``allow_only``, the in-place mask and plausible wrong masks)."""

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


# ---------------------------------------------------------------- Exercise 3's checker


def _keep(logits, allowed):
    keep = torch.zeros(logits.shape[-1], dtype=torch.bool)
    keep[list(allowed)] = True
    return keep


def _right_inf(logits, allowed):
    return logits.masked_fill(~_keep(logits, allowed), float("-inf"))


def _right_big(logits, allowed):
    return torch.where(_keep(logits, allowed), logits, logits - 1e9)


def _right_loop(logits, allowed):
    out = logits.clone()
    for i in range(logits.shape[-1]):
        if i not in allowed:
            out[..., i] = -math.inf
    return out


@pytest.mark.parametrize("right", [_right_inf, _right_big, _right_loop])
def test_check_allow_only_accepts_right_masks(right, capfd):
    assert FX.check_allow_only(right)
    out = capfd.readouterr()
    assert "✓ pass" in out.out and out.err == ""


def test_check_allow_only_refuses_the_course_function(capsys):
    assert not FX.check_allow_only(lambda logits, allowed: FD.allow_only(logits, allowed))
    assert "your function called lmcore.course.floor.decoding.allow_only: write it yourself" in (
        capsys.readouterr().out
    )


def _in_place(logits, allowed):
    logits[..., ~_keep(logits, allowed)] = float("-inf")
    return logits


WRONG = {
    "zeros instead of -inf": lambda l, a: l.masked_fill(~_keep(l, a), 0.0),
    "the mask inverted": lambda l, a: l.masked_fill(_keep(l, a), float("-inf")),
    "probabilities, not logits": lambda l, a: (p := torch.softmax(l, -1) * _keep(l, a)) / p.sum(-1, True),
    "a penalty of 10, not -inf": lambda l, a: torch.where(_keep(l, a), l, l - 10),
    "only the allowed logits kept": lambda l, a: l[..., list(a)],
    "masked in place": _in_place,
    "the first row only": lambda l, a: (
        torch.cat([_right_inf(l[:1], a), l[1:]]) if l.ndim > 1 else _right_inf(l, a)
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_check_allow_only_rejects(name, capsys):
    assert not FX.check_allow_only(WRONG[name])
    out = capsys.readouterr().out
    assert "✗ fail" in out and "tensor(" not in out


def test_check_allow_only_reads_a_stub_as_not_attempted(capsys):
    def stub(logits, allowed):
        raise NotImplementedError

    assert not FX.check_allow_only(stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_check_allow_only_accepts_float32_logits_and_still_wants_zero(capsys):
    """Issue 38: rtol 1e-7 rejected the mask applied to float32 logits; the allowed tokens are now
    compared at rtol 1e-5, a banned token must still get 0 (atol 1e-9)."""
    keep = lambda logits, allowed: torch.isin(torch.arange(logits.shape[-1]), torch.tensor(list(allowed)))  # noqa: E731
    assert FX.check_allow_only(lambda z, a: z.float().masked_fill(~keep(z, a), float("-inf")))
    assert "✓ pass" in capsys.readouterr().out
    assert not FX.check_allow_only(lambda z, a: z - 12.0 * (~keep(z, a)))  # pushed down, not out
    assert "✗ fail" in capsys.readouterr().out
