"""Notebook 10's scheduled sampling: the replaced inputs are the model's argmax guesses, made
from the true prefix, at the requested rate, never at position 0; the run trains on the true
labels; validation."""

import pytest
import torch

from lmcore.course import toys
from lmcore.course.rewards import scheduled as S
from lmcore.course.rewards.data import _python_docs
from lmcore.model import GPT, GPTConfig


def _model():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=13, block_size=16, n_layer=1, n_head=1, n_embd=8, init_std=0.5))


def _x():
    return torch.randint(0, 13, (64, 16), generator=torch.Generator().manual_seed(1))


def test_own_guesses_are_the_models_argmax_at_the_rate():
    model, x = _model(), _x()
    out = S.own_guesses(model, x, 0.25, torch.Generator().manual_seed(2))
    assert torch.equal(out[:, 0], x[:, 0])
    with torch.no_grad():
        guess = model(x).argmax(-1)  # guess at t for the character at t + 1, from the true prefix
    changed = out[:, 1:] != x[:, 1:]
    assert torch.equal(out[:, 1:][changed], guess[:, :-1][changed])
    # the draw: replaced where rand < p (a replaced character may equal the true one)
    swap = torch.rand(x[:, 1:].shape, generator=torch.Generator().manual_seed(2)) < 0.25
    assert torch.equal(out[:, 1:], torch.where(swap, guess[:, :-1], x[:, 1:]))
    assert 0.2 < float(swap.float().mean()) < 0.3


def test_p_zero_and_one():
    model, x = _model(), _x()
    assert torch.equal(S.own_guesses(model, x, 0.0, torch.Generator()), x)
    with torch.no_grad():
        guess = model(x).argmax(-1)
    assert torch.equal(S.own_guesses(model, x, 1.0, torch.Generator())[:, 1:], guess[:, :-1])


def test_sampling_run_learns_and_keeps_true_labels(monkeypatch):
    seen = []
    real = toys.causal_lm_loss  # sampling_run trains through the kit's fit, whose loss this is
    monkeypatch.setattr(
        toys, "causal_lm_loss", lambda logits, labels: seen.append(labels) or real(logits, labels)
    )
    ids = _python_docs().train[:5000]
    model = S.sampling_run(ids, p=0.5, steps=3)
    assert len(seen) == 3 and not model.training
    for labels in seen:  # every label row is a true window of the text
        row = labels[0]
        assert any(torch.equal(ids[s : s + 64], row) for s in range(len(ids) - 64))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: S.own_guesses(_model(), _x()[0], 0.1, torch.Generator()), "x"),
        (lambda: S.own_guesses(_model(), _x(), 1.5, torch.Generator()), "p"),
        (lambda: S.sampling_run(torch.tensor([0, 1, 500] * 40), p=0.1, steps=1), "vocabulary"),
        (lambda: S.sampling_run(_python_docs().train[:500], p=0.1, steps=0), "steps"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()
