"""Notebook 09, section 5: held-out sums. References: per-turn F.cross_entropy in float64,
hand-written fake models (a perfect adder, an off-by-one adder), the corpus generator itself."""

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lmcore.course.floor import lesson as FL
from lmcore.course.floor import sums as S
from lmcore.course.floor import tokens as FT
from lmcore.data import ChatTokenizer, chat_arithmetic
from lmcore.model import GPT, GPTConfig

TOK = ChatTokenizer()


def test_held_out_sums_are_symmetric_off_diagonal_and_fixed():
    h = S.held_out_sums()
    assert len(h) == 20 and h == S.held_out_sums(seed=0)
    assert all((b, a) in h and a != b and 0 <= a <= 9 for a, b in h)
    assert S.held_out_sums(seed=1) != h
    for bad in (0, 46):
        with pytest.raises(ValueError, match="n_pairs"):
            S.held_out_sums(bad)


def _operands(doc):
    parts = TOK.decode(doc).split()
    return int(parts[1]), int(parts[3])


def test_training_sum_counts_against_the_generated_texts():
    from lmcore.course.floor.run import floor_corpus

    for high, ops in ((9, ("+",)), (99, ("+", "-", "*"))):
        corpus = floor_corpus(high=high, ops=ops, n_documents=500)
        texts = chat_arithmetic(500, seed=0, high=high, ops=ops)
        assert corpus.train + corpus.val == [TOK.encode(t) for t in texts]
        expected = {}
        for t in texts[:450]:  # the training turns: all but the last 10%
            m = re.fullmatch(r"<user> (\d+) [-+*] (\d+) = <assistant> -?\d+ \.", t)
            key = (int(m.group(1)), int(m.group(2)))
            expected[key] = expected.get(key, 0) + 1
        counts = S.training_sum_counts(corpus)
        assert dict(counts) == expected and sum(counts.values()) == len(corpus.train) == 450


def test_held_out_run_removes_the_sums_from_training_only():
    held = S.held_out_sums()
    r = S.train_held_out_run(held, n_documents=300, max_steps=2, eval_interval=2)
    texts = chat_arithmetic(300, seed=0)
    expected_train = [
        TOK.encode(t) for t in texts[:270] if (int(t.split()[1]), int(t.split()[3])) not in held
    ]
    assert r.corpus.train == expected_train and len(expected_train) < 270
    assert r.corpus.val == [TOK.encode(t) for t in texts[270:]]
    assert not any(_operands(d) in held for d in r.corpus.train)
    assert any(_operands(d) in held for d in r.corpus.val)  # validation keeps them
    assert next(r.model.parameters()).dtype == torch.float64


def test_answer_scores_against_per_turn_cross_entropy():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=TOK.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=16)).double()
    sc = S.answer_scores(model, high=3)
    assert len(sc["a"]) == 16
    for k, (a, b) in enumerate((a, b) for a in range(4) for b in range(4)):
        ids = torch.tensor(TOK.encode(f"<user> {a} + {b} = <assistant> {a + b} .") + [TOK.eos_id])
        with torch.no_grad():
            nll = F.cross_entropy(model(ids[None])[0, :-1], ids[1:], reduction="none")
        ans = [j for j, s in enumerate(FL.token_slots(ids)) if s == "c"]  # answer positions
        assert sc["answer_nll"][k] == pytest.approx(float(nll[[j - 1 for j in ans]].mean()), abs=1e-12)


class Adder(torch.nn.Module):
    """Logits from the true next-token distribution, with the answer shifted by ``off``."""

    def __init__(self, off=0):
        super().__init__()
        self.off, self.w = off, torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
        self.probs = FL.oracle_probs(0, 9, ("+",))

    def forward(self, x):
        out = torch.full((*x.shape, TOK.vocab_size), -30.0, dtype=torch.float64)
        for r, row in enumerate(x.tolist()):
            for t in range(len(row)):
                pre = row[: t + 1]
                if TOK.stoi["<assistant>"] in pre:  # write a + b + off
                    s = TOK.decode(pre).split()
                    want = TOK.encode(
                        f"<user> {s[1]} + {s[3]} = <assistant> {int(s[1]) + int(s[3]) + self.off} ."
                    )
                    j = len(pre)
                    nxt = want[j] if j < len(want) else TOK.eos_id
                    out[r, t, nxt] = 0.0
                else:
                    for tok, p in self.probs.get(tuple(pre), {}).items():
                        out[r, t, tok] = math.log(p)
        return out


def test_a_perfect_adder_and_an_off_by_one_adder():
    good = S.answer_scores(Adder(0))
    assert good["correct"].all() and np.allclose(good["answer_nll"], 0, atol=1e-9)
    assert list(good["greedy"]) == [str(a + b) for a in range(10) for b in range(10)]
    off = S.answer_scores(Adder(1))
    assert not off["correct"].any() and (off["answer_nll"] > 10).all()
    held = S.held_out_sums()
    cmp = S.compare_seen_and_held_out(off, held)
    assert cmp["held_out"]["n"] == 20 and cmp["seen"]["n"] == 80
    assert cmp["held_out"]["correct"] == 0 and cmp["near_misses"] == 1.0
    assert sorted(cmp["held_out"]["wrong"]) == sorted((a, b, str(a + b + 1)) for a, b in held)
    assert S.compare_seen_and_held_out(good, held)["held_out"]["correct"] == 1.0


def test_compare_by_hand():
    sc = {
        "a": np.array([1, 2, 3]),
        "b": np.array([2, 1, 3]),
        "answer_nll": np.array([0.1, 2.0, 0.3]),
        "correct": np.array([True, False, False]),
        "greedy": np.array(["3", "9", ""]),
    }
    cmp = S.compare_seen_and_held_out(sc, {(2, 1), (3, 3)})
    assert cmp["seen"] == {"n": 1, "answer_nll": 0.1, "correct": 1.0, "wrong": []}
    assert cmp["held_out"]["answer_nll"] == pytest.approx(1.15) and cmp["held_out"]["correct"] == 0
    assert cmp["held_out"]["wrong"] == [(2, 1, "9"), (3, 3, "")] and cmp["near_misses"] == 0.0


def test_gap_breakdown_by_hand():
    table = {
        "slot": np.array(["a", "b", "c", "=", "c"]),
        "model": np.array([2.5, 2.2, 0.4, 0.1, 0.0]),
        "oracle": np.array([2.3, 2.3, 0.0, 0.0, 0.0]),
    }
    parts = FT.gap_breakdown(table)
    assert parts["prompt digits"] == pytest.approx(0.1 / 5) and parts["answer"] == pytest.approx(0.4 / 5)
    assert parts["formatting"] == pytest.approx(0.1 / 5) and parts["total"] == pytest.approx(0.6 / 5)


def test_new_turns_are_distinct_and_on_the_right_side_of_training():
    from lmcore.course.floor.run import floor_corpus

    corpus = floor_corpus(high=99, ops=("+", "-"), n_documents=300)
    trained = {S.turn_key(TOK.decode(d)) for d in corpus.train}
    unseen = S.new_turns(corpus, high=99, ops=("+", "-"), n=50)
    seen = S.new_turns(corpus, high=99, ops=("+", "-"), seen=True, n=20)
    assert len(unseen) == 50 and len({S.turn_key(t) for t in unseen}) == 50
    assert not any(S.turn_key(t) in trained for t in unseen)
    assert 0 < len(seen) <= 20 and all(S.turn_key(t) in trained for t in seen)
    assert S.new_turns(floor_corpus(high=1, n_documents=200), high=1) == []  # every question trained
    with pytest.raises(ValueError, match="n"):
        S.new_turns(corpus, high=99, n=0)


class OddOffAdder(Adder):
    """Right when a is even, one too high when a is odd."""

    def forward(self, x):
        out = torch.stack([super(OddOffAdder, self).forward(row[None])[0] for row in x])
        for r, row in enumerate(x.tolist()):
            if TOK.stoi["<assistant>"] in row and int(TOK.decode(row).split()[1]) % 2:
                out[r] = Adder(1).forward(x[r : r + 1])[0]
        return out


def test_exact_match_against_greedy_decoding_token_by_token():
    turns = chat_arithmetic(40, seed=3, high=99)
    assert S.exact_match(Adder(0), turns) == 1.0 and S.exact_match(Adder(1), turns) == 0.0
    even = sum(int(t.split()[1]) % 2 == 0 for t in turns) / len(turns)
    assert 0 < even < 1 and S.exact_match(OddOffAdder(0), turns) == pytest.approx(even)
    torch.manual_seed(0)  # and a random GPT, against greedy decoding one token at a time
    model = GPT(GPTConfig(vocab_size=TOK.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=16)).double()
    mixed = chat_arithmetic(30, seed=4, high=99, ops=("+", "-", "*"))
    naive = []
    for text in mixed:
        ids = TOK.encode(text)
        start = ids.index(TOK.stoi["<assistant>"]) + 1
        seq = ids[:start]
        with torch.no_grad():
            for _ in range(len(ids) - start):
                seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
        naive.append(seq[start:] == ids[start:])
    assert S.exact_match(model, mixed) == pytest.approx(sum(naive) / len(naive))
    assert model.training  # the probe restores the mode
    with pytest.raises(ValueError, match="turns"):
        S.exact_match(model, [])
