"""Notebook 10's recall tracker: it watches a run without changing it, and learning_order reads
its records as the notebook says (early step, answer loss then, the drop left at recall)."""

import math

import pytest
import torch

from lmcore.course.rewards.lesson import answer_nll, city_world, tiny_config, train_tiny
from lmcore.course.rewards.recall import RecallTracker, learning_order, plot_recall


@pytest.fixture(scope="module")
def world():
    return city_world(rare_copies=30)


def test_the_tracker_leaves_the_run_as_it_was_and_records_what_it_says(world):
    block = tiny_config().block_size
    tracker = RecallTracker(world, block, every=5)
    watched = train_tiny(world.corpus, callback=tracker, max_steps=12).model
    plain = train_tiny(world.corpus, max_steps=12).model
    for a, b in zip(watched.parameters(), plain.parameters()):
        assert torch.equal(a, b)
    assert [r["step"] for r in tracker.records] == [1, 5, 10]
    last = tracker.records[-1]  # step 10 is not the end: re-measure on a model trained 10 steps
    ten = train_tiny(world.corpus, max_steps=10).model.eval()
    people = world.groups["rare"]
    want = float(answer_nll(ten, world.tokenizer, people, [world.truth[p][0] for p in people]).mean())
    assert math.isclose(last["rare"], want, rel_tol=1e-6)


def test_learning_order_reads_the_records():
    records = [
        {"step": 1, "mean": 4.0, "common": 2.3},
        {"step": 10, "mean": 1.0, "common": 2.2},  # 3 of the 3.9 drop: 77%
        {"step": 20, "mean": 0.8, "common": 2.1},  # 82%: the early step
        {"step": 30, "mean": 0.4, "common": 0.9},  # recalled, 0.3 of 3.9 left
        {"step": 40, "mean": 0.1, "common": 0.1},
    ]
    out = learning_order(records)
    assert out["early_step"] == 20 and out["answer_then"] == 2.1 and out["recall_step"] == 30
    assert math.isclose(out["drop_left"], 0.3 / 3.9)
    assert out["plateau"] is None  # no record lies strictly between steps 20 and 30
    late = records[:3] + [{"step": 25, "mean": 0.7, "common": 2.0}] + records[3:]
    assert learning_order(late)["plateau"] == 0.7
    assert learning_order(records, recalled=0.05)["recall_step"] is None
    with pytest.raises(ValueError, match="records"):
        learning_order([])
    with pytest.raises((TypeError, ValueError), match="share"):
        learning_order(records, share=1.5)
    fig = plot_recall(records)
    assert [line.get_label() for line in fig.axes[0].get_lines()][:2] == [
        "mean loss, all targets",
        "answer loss, common facts",
    ]


def test_the_tracker_checks_its_arguments(world):
    with pytest.raises(ValueError, match="groups"):
        RecallTracker(world, 32, groups=("famous",))
    with pytest.raises((TypeError, ValueError), match="every"):
        RecallTracker(world, 32, every=0)


def test_packed_loss_is_each_document_scored_on_its_own(world):
    """Against a naive loop: every document run alone from position 0, summed NLL over all."""
    from lmcore import causal_lm_loss, pack_documents
    from lmcore.course.rewards.recall import packed_loss
    from lmcore.course.toys import toy_gpt

    tok = world.tokenizer
    docs = [list(d) for d in world.corpus.train[:6]]
    packed = pack_documents(docs, 16, eos_id=tok.eos_id, pad_id=tok.pad_id, policy="whole")
    model = toy_gpt(tok.vocab_size, block_size=16, seed=3).train()
    total, count = 0.0, 0
    for doc in docs:
        ids = torch.tensor(doc + [tok.eos_id])[None]
        model.eval()
        with torch.no_grad():
            total += float(causal_lm_loss(model(ids), ids, reduction="sum"))
        count += ids.shape[1] - 1
    model.train()
    assert math.isclose(packed_loss(model, packed), total / count, rel_tol=1e-5)
    assert model.training  # its mode is given back
