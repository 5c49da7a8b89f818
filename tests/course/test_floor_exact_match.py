"""Notebook 09's exact-match tracking: the batched table against each turn scored alone with
F.cross_entropy, the tracker's records, and fall_share by hand."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lmcore.course.floor import exact_match as FE
from lmcore.data import ChatTokenizer
from lmcore.model import GPT, GPTConfig

TOK = ChatTokenizer()


def _model(seed=0):
    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=TOK.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=8)
    return GPT(cfg).double()


def _alone(model, a, b):
    """One turn scored on its own: per answer digit (nll, argmax right), and exact match."""
    ids = TOK.encode(f"<user> {a} + {b} = <assistant> {a + b} .") + [TOK.eos_id]
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0]
    start = ids.index(TOK.stoi["<assistant>"])
    n = len(str(a + b))
    digits = [
        (F.cross_entropy(logits[t], torch.tensor(ids[t + 1])).item(), int(logits[t].argmax()) == ids[t + 1])
        for t in range(start, start + n)
    ]
    dot_ok = int(logits[start + n].argmax()) == ids[start + n + 1]
    return digits, all(ok for _, ok in digits) and dot_ok


@pytest.mark.parametrize("seed", [0, 3])
def test_answer_table_matches_each_turn_scored_alone(seed):
    model = _model(seed)
    table = FE.answer_table(model)
    for r, (a, b) in enumerate((a, b) for a in range(10) for b in range(10)):
        digits, exact = _alone(model, a, b)
        for k, (nll, ok) in enumerate(digits):
            assert table["nll"][r, k] == pytest.approx(nll, abs=1e-12)
            assert table["right"][r, k] == ok
        if len(digits) == 1:
            assert np.isnan(table["nll"][r, 1]) and table["right"][r, 1]
        assert table["exact"][r] == exact
        assert table["answer_nll"][r] == pytest.approx(np.mean([d[0] for d in digits]), abs=1e-12)


def test_sum_batch_positions_and_validation():
    ids, where = FE.sum_batch(2)
    assert ids.shape == (9, 9) and where.shape == (9, 3)  # one-digit sums: 9 tokens each
    row = ids[4].tolist()  # 1 + 1 = 2
    assert TOK.VOCAB[row[where[4, 0]]] == "2" and where[4, 1] == -1 and TOK.VOCAB[row[where[4, 2]]] == "."
    for bad in (10, -1, 2.0, True):
        with pytest.raises(ValueError, match="high"):
            FE.sum_batch(bad)


def test_tracker_records_the_steps_and_keeps_copies():
    model = _model()
    tracker = FE.AnswerTracker(every=3, keep_models=True)
    for step in range(1, 8):
        assert tracker(step, model) is False  # never stops the run
    assert list(tracker.series("step")) == [1, 3, 6]
    table = FE.answer_table(model)
    assert tracker.series("exact")[0] == table["exact"].mean()
    assert tracker.series("answer_nll")[0] == pytest.approx(np.nanmean(table["nll"]))
    assert sorted(tracker.models) == [1, 3, 6]
    kept = tracker.models[3]
    assert kept is not model and not kept.training
    with torch.no_grad():
        next(model.parameters()).add_(1.0)  # training goes on; the copy stays
    assert not all(torch.equal(p, q) for p, q in zip(kept.parameters(), model.parameters()))
    with pytest.raises(ValueError, match="every"):
        FE.AnswerTracker(every=0)
    with pytest.raises(ValueError, match="key"):
        tracker.series("loss")


def test_fall_share_by_hand():
    v = [3.0, 2.0, 2.5, 1.0, 0.0]
    assert FE.fall_share(v, 0, 1) == pytest.approx(1 / 3)
    assert FE.fall_share(v, 1, 3) == pytest.approx(1 / 3)
    assert FE.fall_share(v, 0, 4) == 1.0
    with pytest.raises(ValueError):
        FE.fall_share([1.0, 1.0], 0, 1)
