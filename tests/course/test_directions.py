"""Notebook 10, section 3: left to right vs fill-in on the same blocks, labels as a prefix, the
visibility grids; and notebook 03's mean-vs-sum exercise checker (section 7)."""

import math

import pytest
import torch
import torch.nn.functional as F

from lmcore import causal_lm_loss
from lmcore.course.rewards import directions as dr
from lmcore.course.sequence import exercises as ex
from lmcore.course.sequence import lesson as sq
from lmcore.course.toys import forward_without_causal_mask, toy_gpt


@pytest.fixture(scope="module")
def models():
    return dr.train_left_to_right(), dr.train_fill_in()


def test_the_corpus_fixes_the_animal_by_the_place_on_its_right():
    places = {}
    for s in dr.FILL_CORPUS[: len(dr.PAIRS)]:
        w = s.split()
        places.setdefault(w[-1], set()).add(w[1])
    assert all(len(a) == 1 for a in places.values()) and len(places) == 4


def test_word_loss_against_an_independent_computation(models):
    left, fill = models
    ids = dr.encode("the dog sat on the rug")
    with torch.no_grad():
        expect = F.cross_entropy(left(ids)[0, 1].double()[None], ids[0, 2][None])
        blank = ids.clone()
        blank[0, 2] = dr.UNK
        expect_bi = F.cross_entropy(
            forward_without_causal_mask(fill, blank)[0, 2].double()[None], ids[0, 2][None]
        )
    assert dr.word_loss(left, "the dog sat on the rug", 2, bidirectional=False) == pytest.approx(
        float(expect)
    )
    assert dr.word_loss(fill, "the dog sat on the rug", 2, bidirectional=True) == pytest.approx(
        float(expect_bi)
    )
    with pytest.raises(ValueError, match="position"):
        dr.word_loss(left, "the dog", 3, bidirectional=False)


def test_right_context_gives_a_far_lower_loss_to_the_fill_in_model(models):
    left, fill = models
    sentences = dr.FILL_CORPUS[: len(dr.PAIRS)]
    l2r = sum(dr.word_loss(left, s, 2, bidirectional=False) for s in sentences) / 4
    bi = sum(dr.word_loss(fill, s, 2, bidirectional=True) for s in sentences) / 4
    assert 0 <= l2r - math.log(4) < 0.05  # the best a left-to-right model can do: 4 equally likely animals
    assert bi < 0.05


def test_direction_summary_is_the_two_models_measured(models):
    left, fill = models
    summary = dr.direction_summary(seed=0)
    assert summary["animal, left to right"] == pytest.approx(
        sum(dr.word_loss(left, s, 2, bidirectional=False) for s in dr.FILL_CORPUS[:4]) / 4
    )
    assert summary["animal, fill-in"] == pytest.approx(
        sum(dr.word_loss(fill, s, 2, bidirectional=True) for s in dr.FILL_CORPUS[:4]) / 4
    )
    animals = [a for a, _ in dr.PAIRS]
    assert summary["smallest p(right animal)"] == pytest.approx(
        min(dr.label_probabilities(left, f"on the {p} sat the", animals)[a] for a, p in dr.PAIRS)
    )


def test_encode_maps_unknown_words_to_unk_and_refuses_non_text():
    assert dr.encode("the zebra sat").tolist() == [[2, dr.WORDS.index("the"), dr.UNK, dr.WORDS.index("sat")]]
    with pytest.raises(TypeError, match="text"):
        dr.encode(3)


def test_a_task_as_a_prefix_scored_over_label_words(models):
    left, _ = models
    animals = [a for a, _ in dr.PAIRS]
    for a, p in dr.PAIRS:
        probs = dr.label_probabilities(left, f"on the {p} sat the", animals)
        assert sum(probs.values()) == pytest.approx(1.0) and max(probs, key=probs.get) == a
    with pytest.raises(ValueError, match="labels"):
        dr.label_probabilities(left, "the", ["cat", "zebra"])


def test_visibility_grids():
    assert dr.visibility("encoder", 3).all()
    assert torch.equal(dr.visibility("decoder", n_target=4), torch.ones(4, 4, dtype=torch.bool).tril())
    g = dr.visibility("encoder-decoder", 2, 3)
    assert g.shape == (5, 5) and g[:, :2].all() and not g[:2, 2:].any()
    assert torch.equal(g[2:, 2:], torch.ones(3, 3, dtype=torch.bool).tril())
    assert "x" in dr.format_visibility(g, list("abcde"))
    with pytest.raises(ValueError, match="kind"):
        dr.visibility("bert")
    with pytest.raises(ValueError, match="n_source"):
        dr.visibility("encoder", 0)


def _norm(model):
    return float(sum(p.grad.pow(2).sum() for p in model.parameters()) ** 0.5)


def _solution(model, ids, reduction):
    model.zero_grad()
    loss = causal_lm_loss(model(ids), ids, reduction=reduction)
    loss.backward()
    return {"loss": loss.item(), "grad_norm": _norm(model)}


def test_reference_grad_norm_against_autograd_grad():
    model = toy_gpt(9, block_size=16, n_embd=8, dtype=torch.float64)
    ids = torch.randint(9, (2, 7), generator=torch.Generator().manual_seed(0))
    params = list(model.parameters())
    grads = torch.autograd.grad(causal_lm_loss(model(ids), ids, reduction="sum"), params)
    got = ex.reference_loss_and_grad_norm(model, ids, "sum")
    assert got["grad_norm"] == pytest.approx(float(torch.cat([g.flatten() for g in grads]).norm()), rel=1e-10)
    with pytest.raises(ValueError, match="reduction"):
        ex.reference_loss_and_grad_norm(model, ids, "none")


def test_check_loss_and_grad_norm_accepts_the_solution_and_rejects_wrong_ones(capsys):
    assert sq.check_loss_and_grad_norm(_solution)
    capsys.readouterr()

    def stale(model, ids, reduction):  # no zero_grad: adds to the previous step's gradients
        causal_lm_loss(model(ids), ids, reduction=reduction).backward()
        return {
            "loss": causal_lm_loss(model(ids), ids, reduction=reduction).item(),
            "grad_norm": _norm(model),
        }

    def sum_of_norms(model, ids, reduction):
        out = _solution(model, ids, reduction)
        out["grad_norm"] = float(sum(p.grad.norm() for p in model.parameters()))
        return out

    def squared(model, ids, reduction):
        out = _solution(model, ids, reduction)
        out["grad_norm"] = out["grad_norm"] ** 2
        return out

    def clipped(model, ids, reduction):
        out = _solution(model, ids, reduction)
        out["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")))
        return out

    def stub(*args):
        raise NotImplementedError

    wrongs = [
        stale,
        sum_of_norms,
        squared,
        lambda m, ids, r: _solution(m, ids, "mean"),  # ignores the reduction
        clipped,
        ex.reference_loss_and_grad_norm,
        stub,
    ]
    for wrong in wrongs:
        assert not sq.check_loss_and_grad_norm(wrong)
    out = capsys.readouterr().out
    assert "gradients left from an earlier backward" in out and "not attempted yet" in out
    assert "called lmcore.course.sequence.exercises.reference_loss_and_grad_norm" in out
    assert "norm helper" in out


def test_grad_norm_nudge_asks_a_question_without_the_solution():
    from lmcore.course.solutions import hints_of

    nudge = hints_of("check_loss_and_grad_norm")[0]
    assert "?" in nudge and "zero_grad" not in nudge and "** 0.5" not in nudge
