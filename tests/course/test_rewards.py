"""Notebook 10's support: the fact worlds, the answer probes, the set loss, context coverage,
valid-target counts, compute, the exposure probe, the figures (the exercise checkers: test_rewards_exercises.py).

References are independent: float64 F.cross_entropy and softmax, naive loops over hand-built
rows, the FLOPs of each weight matmul counted by hand, toy models whose answers are known.
"""

import math
from collections import Counter

import matplotlib
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmcore.course import toys  # noqa: E402
from lmcore.course.rewards import compute as RC  # noqa: E402
from lmcore.course.rewards import data as RD  # noqa: E402
from lmcore.course.rewards import lesson as R  # noqa: E402
from lmcore.course.rewards import views as RV  # noqa: E402
from lmcore.model import GPTConfig  # noqa: E402

# ---------------------------------------------------------------- worlds


def test_worlds_use_the_kits_word_tokenizer():
    tok = R.city_world(n_common=1, n_rare=1, n_two_homes=0, copies=2, n_cities=2).tokenizer
    assert isinstance(tok, toys.WordTokenizer) and tok.VOCAB[:2] == ("PAD", "EOS")
    assert tok.decode(tok.encode("P0 lives_in C1 .")) == "P0 lives_in C1 ."
    with pytest.raises(ValueError, match="'P9'"):
        tok.encode("P9 lives_in C1 .")


def test_city_world_counts_each_kind_of_fact():
    w = R.city_world(n_common=3, n_rare=2, n_two_homes=1, copies=6, n_cities=4)
    tok = w.tokenizer
    texts = Counter(tok.decode(d) for d in w.corpus.train)
    assert sum(texts.values()) == 3 * 6 + 2 + 6
    for p in w.groups["common"]:
        assert texts[f"{p} {w.truth[p][0]} ."] == 6 and len(w.truth[p]) == 1
    for p in w.groups["rare"]:
        assert texts[f"{p} {w.truth[p][0]} ."] == 1
    (q,) = w.groups["two homes"]
    a, b = w.truth[q]
    assert a != b and texts[f"{q} {a} ."] == 3 and texts[f"{q} {b} ."] == 3
    assert len(w.corpus.val) == 6  # one document per prompt


def test_city_world_upsamples_the_rare_facts_only():
    once, up = (
        R.city_world(n_common=3, n_rare=2, copies=6),
        R.city_world(n_common=3, n_rare=2, copies=6, rare_copies=5),
    )
    assert once.truth == up.truth and once.tokenizer.stoi == up.tokenizer.stoi  # the same world
    texts = Counter(up.tokenizer.decode(d) for d in up.corpus.train)
    assert sum(texts.values()) == len(once.corpus.train) + 2 * 4
    for p in up.groups["rare"]:
        assert texts[f"{p} {up.truth[p][0]} ."] == 5 and up.copies[p] == 5
    for p in up.groups["common"]:
        assert texts[f"{p} {up.truth[p][0]} ."] == 6
    with pytest.raises(ValueError, match="rare_copies"):
        R.city_world(rare_copies=0)


def test_parent_world_never_states_the_held_out_reverse():
    w = R.parent_world(n_pairs=6, n_both=2, copies=3)
    texts = Counter(w.tokenizer.decode(d) for d in w.corpus.train)
    assert sum(texts.values()) == 6 * 3 + 2 * 3
    for i in range(6):
        assert texts[f"A{i} parent B{i} ."] == 3
        assert texts[f"B{i} child A{i} ."] == (3 if i < 2 else 0)
    assert w.groups["reverse, never trained"] == [f"B{i} child" for i in range(2, 6)]


def test_bad_world_arguments():
    with pytest.raises(ValueError, match="copies"):
        R.city_world(copies=1)
    with pytest.raises(ValueError, match="n_both"):
        R.parent_world(n_pairs=4, n_both=4)


def test_expected_epochs_from_the_packed_rows():
    w = R.city_world(n_common=2, n_rare=1, n_two_homes=0, copies=10)
    cfg = R.tiny_config(max_steps=7, batch_size=3, block_size=16)
    per_row = 16 // 5  # documents of 4 tokens + EOS, packed whole
    rows = math.ceil(len(w.corpus.train) / per_row)
    assert R.expected_epochs(w.corpus, cfg) == pytest.approx(7 * 3 / rows)


def _tiny_gpt(vocab, block=8, seed=0):
    return toys.toy_gpt(vocab, block_size=block, n_layer=1, n_head=1, n_embd=8, seed=seed).train()


def test_answer_nll_is_the_cross_entropy_of_the_last_position():
    w = R.city_world(n_common=2, n_rare=1, n_two_homes=1, copies=4)
    tok, model = w.tokenizer, _tiny_gpt(w.tokenizer.vocab_size)
    prompts = list(w.truth)
    answers = [w.truth[p][-1] for p in prompts]
    got = R.answer_nll(model, tok, prompts, answers)
    for k, (p, a) in enumerate(zip(prompts, answers)):
        with torch.no_grad():
            z = model(torch.tensor([tok.encode(p)]))[0, -1].double()
        assert float(got[k]) == pytest.approx(
            float(F.cross_entropy(z[None], torch.tensor([tok.stoi[a]]))), abs=1e-6
        )
    assert model.training  # the probe restores the mode


def test_continuation_log_prob_is_the_chain_rule_word_by_word():
    w = R.city_world(n_common=2, n_rare=1, n_two_homes=1, copies=4)
    tok, model = w.tokenizer, _tiny_gpt(w.tokenizer.vocab_size)
    prompt, (a, b) = "Q0 lives_in", w.truth["Q0 lives_in"]
    for answer in (f"{a} .", f"{a} {b} .", b):
        naive, context = 0.0, prompt  # one forward per word, the next token's probability each time
        for word in answer.split():
            naive += float(R.answer_log_probs(model, tok, [context])[0, tok.stoi[word]])
            context += " " + word
        assert R.continuation_log_prob(model, tok, prompt, answer) == pytest.approx(naive, abs=1e-5)
    assert model.training  # the probe restores the mode
    with pytest.raises(TypeError, match="continuation"):
        R.continuation_log_prob(model, tok, prompt, 3)
    with pytest.raises(ValueError, match="prompt"):
        R.continuation_log_prob(model, tok, "  ", a)
    with pytest.raises(ValueError, match="vocabulary"):
        R.continuation_log_prob(model, tok, prompt, "Paris")


def test_train_tiny_runs_and_records():
    w = R.city_world(n_common=2, n_rare=1, n_two_homes=0, copies=4)
    run = R.train_tiny(w.corpus, max_steps=4)
    assert run.status == "finished" and [h["step"] for h in run.history] == [0, 4]


# ---------------------------------------------------------------- the set loss and its checker


def _naive_set_nll(z, ids):
    p = torch.softmax(torch.as_tensor(z, dtype=torch.float64), 0)
    return -math.log(float(p[list(ids)].sum()))


@pytest.mark.parametrize(
    "z,ids",
    [
        ([2.0, 1.0, 0.0], [1]),
        ([2.0, 1.0, 0.0], [0, 2]),
        ([0.0, 3.0, 3.0, -1.0, 2.0], [1, 2, 4]),
        ([1.0, 1.0], [0, 1]),
    ],
)
def test_set_nll_against_summed_softmax(z, ids):
    assert R.set_nll(torch.tensor(z), ids) == pytest.approx(_naive_set_nll(z, ids), abs=1e-12)


def test_set_nll_with_one_id_is_cross_entropy_and_stable_at_1000():
    z = torch.tensor([1000.0, 999.0, 0.0])
    ref = float(F.cross_entropy(z.double()[None], torch.tensor([1])))
    assert R.set_nll(z, [1]) == pytest.approx(ref, abs=1e-9)
    assert R.set_nll(z, [0, 1]) == pytest.approx(
        -math.log((1 + math.exp(-1)) / (1 + math.exp(-1) + math.exp(-1000))), abs=1e-9
    )


@pytest.mark.parametrize("ids", [[], [3], [0, 0], [-1], [True]])
def test_set_nll_rejects_bad_ids(ids):
    with pytest.raises(ValueError, match="acceptable"):
        R.set_nll(torch.zeros(3), ids)


def test_group_means_are_token_weighted():
    out = R.group_means({"a": [1.0, 3.0, 5.0], "b": [0.0], "empty": []})
    assert out["a"] == (3, 3.0) and out["b"] == (1, 0.0) and "empty" not in out
    assert out["all"] == (4, pytest.approx(9.0 / 4))


# ---------------------------------------------------------------- data policy


def _naive_coverage(L, k):
    return sum(1 for t in range(1, L) if t >= k) / (L - 1)


@pytest.mark.parametrize("L", [2, 3, 8, 64, 257])
def test_context_coverage_against_a_loop(L):
    for k in range(0, L + 3):
        assert RD.context_coverage(L, k) == pytest.approx(_naive_coverage(L, k), abs=1e-15)


def test_context_coverage_bad_input():
    with pytest.raises(ValueError, match="block_size"):
        RD.context_coverage(1, 0)
    with pytest.raises(TypeError, match="k"):
        RD.context_coverage(8, 1.5)


def _naive_counts(lengths, L, policy):
    """Build the rows token by token (document id per position, -1 for padding) and count the
    scored targets: positions 1.. of a row whose token is real and of the same document."""
    docs = [[k] * (n + 1) for k, n in enumerate(lengths)]  # each document + EOS
    if policy == "pad":
        rows = [d[i : i + L] for d in docs for i in range(0, len(d), L)]
    else:
        stream = [k for d in docs for k in d]
        rows = [stream[i : i + L] for i in range(0, len(stream), L)]
    rows = [r + [-1] * (L - len(r)) for r in rows]
    valid = sum(1 for r in rows for j in range(1, L) if r[j] >= 0 and r[j] == r[j - 1])
    return valid, len(rows) * (L - 1)


@pytest.mark.parametrize("policy", ["pad", "pack"])
@pytest.mark.parametrize(
    "lengths,L",
    [([3, 5, 1], 4), ([7], 8), ([8], 8), ([2, 2, 2, 2], 3), ([10, 1, 30, 4], 16), ([15, 16, 17], 16)],
)
def test_valid_targets_against_hand_built_rows(lengths, L, policy):
    assert RD.valid_targets(lengths, L, policy) == _naive_counts(lengths, L, policy)


def test_valid_targets_of_the_notebook_lengths():
    lengths = RD.document_lengths(60, median=40)
    for L in (16, 64):
        for policy in ("pad", "pack"):
            v, s = RD.valid_targets(lengths, L, policy)
            assert (v, s) == _naive_counts(lengths, L, policy)
            assert RD.valid_target_ratio(lengths, L, policy) == v / s


def test_document_lengths_are_reproducible_and_bad_input():
    a = RD.document_lengths(50)
    assert a == RD.document_lengths(50) and len(a) == 50 and min(a) >= 1
    with pytest.raises(ValueError, match="lengths"):
        RD.valid_targets([], 8)
    with pytest.raises(ValueError, match="policy"):
        RD.valid_targets([3], 8, "trim")


def test_split_loss_against_cross_entropy():
    model = _tiny_gpt(11, block=6)
    ids = torch.randint(0, 11, (40,), generator=torch.Generator().manual_seed(0))
    x = ids[: 3 * 6].view(3, 6)
    with torch.no_grad():
        z = model(x).double()
    ref = float(F.cross_entropy(z[:, :-1].reshape(-1, 11), x[:, 1:].reshape(-1)))
    assert RD.split_loss(model, ids, rows=3) == pytest.approx(ref, abs=1e-5)


def test_text_run_trains_on_the_given_ids():
    ids = RD._python_docs().train[:5000]
    run = RD.text_run(ids, steps=2, eval_interval=2, eval_batches=1)
    assert run.corpus.train is ids and run.status == "finished"


# ---------------------------------------------------------------- compute


def test_training_flops_and_targets():
    assert RC.training_flops(10, 7) == 420
    assert RC.supervised_targets(64) == 63
    assert RC.supervised_targets(64, "masked") == pytest.approx(9.6)
    with pytest.raises(ValueError, match="objective"):
        RC.supervised_targets(64, "denoising")
    with pytest.raises(TypeError, match="n_params"):
        RC.training_flops(1.5, 3)


def test_counted_flops_are_six_per_weight_per_token():
    model = _tiny_gpt(13, block=8)
    x = torch.randint(0, 13, (3, 8), generator=torch.Generator().manual_seed(1))
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    # every weight matmul: 2 per weight per token forward, 2 for the input's gradient, 2 for the weight's
    assert RC.counted_train_flops(model, x) == 6 * weights * x.numel()
    assert all(p.grad is None for p in model.parameters())


def test_weight_matrix_entries_count_a_tied_matrix_once():
    a, b = nn.Linear(4, 4), nn.Linear(4, 3, bias=False)
    tied = nn.Sequential(a, nn.LayerNorm(4), nn.Linear(4, 4), b)
    tied[2].weight = a.weight
    assert RC.weight_matrix_entries(tied) == 16 + 12  # no bias, no LayerNorm gain, a's matrix once
    model = _tiny_gpt(13, block=8)
    assert model.lm_head.weight is model.wte.weight  # tied: counted once, with the head's matmul
    # the counter's total is 6 per matrix entry per token: it sees no attention product
    x = torch.randint(0, 13, (2, 8), generator=torch.Generator().manual_seed(2))
    assert RC.counted_train_flops(model, x) == 6 * RC.weight_matrix_entries(model) * x.numel()


def test_attention_pair_flops_against_a_counted_naive_attention():
    from torch.utils.flop_counter import FlopCounterMode

    n_layer, D, N, L, H = 3, 8, 2, 5, 2
    q, k, v = (torch.randn(N, H, L, D // H, requires_grad=True) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        for _ in range(n_layer):  # the products written as plain matmuls, which the counter sees
            y = torch.softmax(q @ k.transpose(-1, -2), -1) @ v
            y.sum().backward()
    assert RC.attention_pair_flops(n_layer, D, N, L) == counter.get_total_flops()
    with pytest.raises(TypeError, match="length"):
        RC.attention_pair_flops(1, 8, 2, 5.0)


def test_count_model_loss_against_a_naive_loop():
    gen = torch.Generator().manual_seed(3)
    train, held = torch.randint(0, 5, (200,), generator=gen), torch.randint(0, 5, (60,), generator=gen)
    for context, k in ((0, 1.0), (1, 0.5), (2, 0.25)):
        nll = 0.0
        for t in range(context, len(held)):
            ctx = held[t - context : t].tolist()
            follow = [
                int(train[i]) for i in range(context, len(train)) if train[i - context : i].tolist() == ctx
            ]
            nll -= math.log((follow.count(int(held[t])) + k) / (len(follow) + 5 * k))
        assert RC.count_model_loss(train, held, 5, context=context, k=k) == pytest.approx(
            nll / (len(held) - context), abs=1e-12
        )
    # a text that repeats one pair: the previous token gives the next one away
    ab = torch.tensor([0, 1] * 50)
    assert RC.count_model_loss(ab, ab, 2, context=1, k=1e-6) < 1e-4
    assert RC.count_model_loss(ab, ab, 2, context=0) == pytest.approx(math.log(2))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(train_ids=[0.5, 1.0], eval_ids=[0, 1], vocab_size=2), TypeError, "train_ids"),
        (dict(train_ids=[0, 2], eval_ids=[0, 1], vocab_size=2), ValueError, "train_ids"),
        (dict(train_ids=[0, 1], eval_ids=[0], vocab_size=2, context=1), ValueError, "eval_ids"),
        (dict(train_ids=[0, 1], eval_ids=[0, 1], vocab_size=2, context=3), ValueError, "context"),
        (dict(train_ids=[0, 1], eval_ids=[0, 1], vocab_size=2, k=0), ValueError, "k"),
    ],
)
def test_count_model_loss_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        RC.count_model_loss(**kwargs)


class _Toy(nn.Module):
    """Logits of a fixed rule: copy the current token (``copy``) or ignore the input."""

    def __init__(self, vocab, copy):
        super().__init__()
        self.config = GPTConfig(vocab_size=vocab, block_size=16)
        self.copy, self.bias = copy, nn.Parameter(torch.zeros(vocab))

    def forward(self, x):
        if self.copy:
            return 8.0 * F.one_hot(x, self.config.vocab_size).float()
        return self.bias.expand(*x.shape, -1) + torch.arange(x.shape[1])[None, :, None] * 0.1


def test_injected_error_gap_on_toy_models():
    rows = torch.arange(5 * 10).view(5, 10) % 7
    rows[:, 4] = rows[:, 3]  # the token after `at` repeats it: copyable
    ignore = RC.injected_error_gap(_Toy(7, copy=False), rows, at=3, horizon=4)
    assert torch.allclose(ignore["clean"], ignore["corrupted"])
    copy = RC.injected_error_gap(_Toy(7, copy=True), rows, at=3, horizon=2, temperature=2.0)
    lp = torch.log_softmax(4.0 * F.one_hot(rows, 7).double(), -1)  # logits / T
    clean_ref = -lp[:, 3:5].gather(2, rows[:, 4:6, None])[..., 0].mean(0)
    assert torch.allclose(copy["clean"], clean_ref)
    assert float(copy["corrupted"][0] - copy["clean"][0]) == pytest.approx(4.0, abs=1e-9)


def test_injected_error_gap_bad_input():
    with pytest.raises(ValueError, match="at"):
        RC.injected_error_gap(_Toy(7, copy=True), torch.zeros(2, 6, dtype=torch.long), at=3, horizon=3)


# ---------------------------------------------------------------- figures and the widget


def test_figures_draw():
    lengths = RD.document_lengths(30)
    figs = [
        RV.plot_answer_losses({"common": (3, 0.1), "rare": (2, 2.5), "all": (5, 1.06)}, n_answers=10),
        RV.plot_policy(64, 32, lengths),
        RV.plot_policy(16, 100),
        RV.plot_duplicates(
            {
                "a": [
                    {"step": 0, "train_loss": 3, "val_loss": 3},
                    {"step": 5, "train_loss": 2, "val_loss": 2.5},
                ]
            }
        ),
        RV.plot_reversal({"forward": 0.9, "reverse": 0.0}, chance=1 / 30),
    ]
    assert "50.8%" not in figs[1].axes[0].get_title()  # title shows the share, rounded to %
    assert figs[1].axes[0].get_title() == "L = 64: 51% of targets see 32 tokens"
    for f in figs:
        plt.close(f)


def test_policy_explorer_redraws_on_the_slider():
    box = RV.policy_explorer(RD.document_lengths(30))
    size = box.children[0].children[0]
    image = box.children[1]
    before = image.value
    size.value = 256
    assert image.value != before and image.value[:4] == b"\x89PNG"
