"""Notebook 09's support code: entropy/KL, the exact per-token floor, the per-target table,
plots and the widget (the checkers: test_floor_exercises.py).

References are independent: torch.distributions, a per-turn forward pass with F.cross_entropy
in float64, hand-labelled token slots, lmcore.data's closed-form entropy.
"""

import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmcore.course.floor import explorer_runs as FE  # noqa: E402
from lmcore.course.floor import lesson as FL  # noqa: E402
from lmcore.course.floor import run as FR  # noqa: E402
from lmcore.course.floor import tokens as FT  # noqa: E402
from lmcore.course.floor import views as FV  # noqa: E402
from lmcore.data import ChatTokenizer, chat_arithmetic_entropy, load_corpus  # noqa: E402
from lmcore.model import GPT, GPTConfig  # noqa: E402

TOK = ChatTokenizer()
DISTS = [[0.5, 0.25, 0.125, 0.125], [0.7, 0.0, 0.3], [1.0, 0.0], [0.1] * 10]


@pytest.mark.parametrize("p", DISTS)
def test_entropy_and_kl_against_torch_distributions(p):
    q = np.linspace(1.0, 2.0, len(p))
    q /= q.sum()
    P, Q = (torch.distributions.Categorical(probs=torch.tensor(x, dtype=torch.float64)) for x in (p, q))
    assert FL.entropy(p) == pytest.approx(float(P.entropy()), abs=1e-12)
    assert FL.kl_divergence(p, q) == pytest.approx(float(torch.distributions.kl_divergence(P, Q)), abs=1e-12)
    assert FL.cross_entropy(p, q) == pytest.approx(FL.entropy(p) + FL.kl_divergence(p, q), abs=1e-12)
    assert FL.kl_divergence(p, p) == pytest.approx(0.0, abs=1e-15)


def test_kl_is_infinite_where_the_model_rules_out_data():
    assert FL.kl_divergence([0.5, 0.5], [1.0, 0.0]) == math.inf
    assert FL.cross_entropy([0.5, 0.5], [1.0, 0.0]) == math.inf


@pytest.mark.parametrize("bad", [[0.5, 0.6], [-0.1, 1.1], [[0.5, 0.5]], [], [float("nan"), 1.0]])
def test_bad_distributions_are_rejected(bad):
    with pytest.raises(ValueError, match="probability vector"):
        FL.entropy(bad)


def test_kl_length_mismatch():
    with pytest.raises(ValueError, match="same length"):
        FL.kl_divergence([0.5, 0.5], [0.2, 0.3, 0.5])


def test_token_slots_hand_labelled():
    ids = (
        TOK.encode("<user> 12 - 30 = <assistant> -18 .")
        + [TOK.eos_id]
        + TOK.encode("<user> 2 * 3 = <assistant> 6 .")
    )
    expected = [
        "<user>",
        "a",
        "a",
        "op",
        "b",
        "b",
        "=",
        "<assistant>",
        "c",
        "c",
        "c",
        ".",
        "EOS",
        "<user>",
        "a",
        "op",
        "b",
        "=",
        "<assistant>",
        "c",
        ".",
    ]
    assert FL.token_slots(ids) == expected
    assert FL.token_slots(torch.tensor(ids + [TOK.pad_id]))[-1] == "PAD"


@pytest.mark.parametrize("low, high, ops", [(0, 9, ("+",)), (0, 12, ("+", "-", "*")), (3, 20, ("-",))])
def test_exact_slot_entropy_adds_up_to_the_closed_form(low, high, ops):
    e = FL.exact_slot_entropy(low, high, ops)
    targets, nats = sum(n for n, _ in e.values()), sum(h for _, h in e.values())
    assert nats == pytest.approx(
        chat_arithmetic_entropy(low=low, high=high, ops=ops, per="document"), rel=1e-12
    )
    assert nats / targets == pytest.approx(chat_arithmetic_entropy(low=low, high=high, ops=ops), rel=1e-12)
    for slot in ("<assistant>", "c", ".", "EOS"):  # determined by the prompt
        assert e[slot][1] == pytest.approx(0.0, abs=1e-12)


def test_single_digit_operands_carry_ln10_each():
    e = FL.exact_slot_entropy()
    assert e["a"] == pytest.approx((1.0, math.log(10))) and e["b"] == pytest.approx((1.0, math.log(10)))
    assert e["c"][0] == pytest.approx(1.45)
    first = FL.oracle_probs()[(TOK.stoi["<user>"],)]
    assert sorted(first) == [TOK.stoi[str(d)] for d in range(10)]
    assert all(v == pytest.approx(0.1) for v in first.values())
    assert all(sum(d.values()) == pytest.approx(1.0) for d in FL.oracle_probs().values())


def test_per_target_nll_matches_turn_by_turn_forward():
    torch.manual_seed(0)
    corpus = load_corpus("chat-arithmetic", n_documents=60, seed=2)
    model = GPT(GPTConfig(vocab_size=TOK.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=16)).double()
    table = FT.per_target_nll(model, corpus)
    mine, slots = [], []
    with torch.no_grad():
        for doc in corpus.val:  # each turn alone, no packing
            ids = torch.tensor([doc + [TOK.eos_id]])
            logits = model(ids)[0, :-1].double()
            mine += F.cross_entropy(logits, ids[0, 1:], reduction="none").tolist()
            slots += FL.token_slots(ids[0])[1:]
    assert np.allclose(table["model"], mine, atol=1e-10)
    assert list(table["slot"]) == slots
    digits = np.isin(table["slot"], ["a", "b"])
    assert np.allclose(table["oracle"][digits], math.log(10)) and np.allclose(table["oracle"][~digits], 0)


def test_slot_breakdown_by_hand():
    table = {
        "slot": np.array(["a", "b", "c", "=", "a"]),
        "model": np.array([2.0, 3.0, 0.5, 0.1, 4.0]),
        "oracle": np.zeros(5),
    }
    rows = {r[0]: r[1:] for r in FT.slot_breakdown(table)}
    assert rows["a"][:2] == pytest.approx((0.4, 3.0)) and rows["a"][2] == pytest.approx(math.log(10))
    assert set(rows) == {"a", "b", "=", "c"}
    roles = {r[0]: r[1:] for r in FT.slot_breakdown(table, by="role")}
    assert roles["prompt digits"][:2] == pytest.approx((0.6, 3.0))
    assert roles["formatting"][:3] == pytest.approx((0.2, 0.1, 0.0))
    with pytest.raises(ValueError, match="by"):
        FT.slot_breakdown(table, by="token")


def test_train_floor_run_is_short_float64_and_scored_against_the_floor():
    r = FR.train_floor_run(n_documents=200, max_steps=3, eval_interval=3)
    assert next(r.model.parameters()).dtype == torch.float64
    assert [h["step"] for h in r.history] == [0, 3]
    assert r.history[0]["val_loss"] == pytest.approx(math.log(TOK.vocab_size), abs=0.15)
    assert FR.floor_config().max_steps == 300 and FR.floor_config(max_steps=5).max_steps == 5


HISTORY = [{"step": s, "train_loss": v + 0.05, "val_loss": v} for s, v in ((0, 2.9), (10, 1.0), (20, 0.6))]


def test_plots_return_figures():
    for fig, n_axes in (
        (FV.plot_loss_floor(HISTORY, 0.545, ln_v=2.94), 1),
        (FV.plot_slot_breakdown([("a", 0.2, 2.31, 2.30), ("c", 0.2, 0.02, 0.0)]), 1),
        (FV.plot_floor_explorer(9, "+", history=HISTORY), 2),
    ):
        assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == n_axes
        assert all(ax.get_title() for ax in fig.axes)
        plt.close(fig)


def test_a_small_gap_reads_with_the_digits_the_notebook_prints():
    """The section-3 run ends about 0.004 above the floor: the notebook prints the gap with four
    decimals, and the explorer's title said '+0.00' for it. Both figures now show four."""
    history = [
        {"step": 0, "train_loss": 3.0, "val_loss": 2.96},
        {"step": 300, "train_loss": 0.55, "val_loss": 0.5489},
    ]
    exact = chat_arithmetic_entropy()  # 0.5450 to four decimals
    assert f"{0.5489 - exact:+.4f}" == "+0.0039"
    fig = FV.plot_floor_explorer(9, "+", history=history)
    assert fig.axes[0].get_title().endswith("gap +0.0039")
    plt.close(fig)
    fig = FV.plot_loss_floor(history, exact)
    assert "gap +0.0039" in [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)


def test_widget_draws_committed_runs_and_trains_only_what_is_not_committed(monkeypatch):
    calls = []

    class Fake:
        history = HISTORY

    monkeypatch.setattr(FE, "train_floor_run", lambda **kw: calls.append(kw) or Fake())
    monkeypatch.setattr(FE, "_TRAINED", {})
    box = FV.floor_explorer()
    assert calls == [] and box.children  # the initial state trains nothing
    assert FE.short_curve(99, "+-*", steps=600) == FE.committed_curve(99, "+-*", 600)
    assert calls == []  # every setting the widget offers is committed
    FE.short_curve(4, "+-*", steps=20)
    FE.short_curve(4, "+-*", steps=20)
    assert len(calls) == 1 and calls[0]["high"] == 4 and calls[0]["ops"] == ("+", "-", "*")
    assert calls[0]["max_steps"] == 20
    FE.short_curve(9, "+", steps=150, cached=False)  # asked to train: trains
    assert len(calls) == 2
    plt.close("all")
