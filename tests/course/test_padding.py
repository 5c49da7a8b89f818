"""Notebook 05's support: padding masks, the pad-id invariance, three perplexities, gradient
accumulation, and the exercise checkers (accept the reference, reject plausible mistakes)."""

import math

import matplotlib
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmcore import IGNORE_INDEX, causal_lm_loss, num_valid_targets  # noqa: E402
from lmcore.course import padding as P  # noqa: E402
from lmcore.course import padding_accumulation as PA  # noqa: E402
from lmcore.course import padding_views as PV  # noqa: E402


def naive_batch_nll(logits, labels):
    """(summed NLL, count) by a loop over every valid target, float64."""
    total, n = 0.0, 0
    for i in range(labels.shape[0]):
        for t in range(1, labels.shape[1]):
            if int(labels[i, t]) != IGNORE_INDEX:
                total += float(F.cross_entropy(logits[i, t - 1].double()[None], labels[i, t][None]))
                n += 1
    return total, n


def test_example_batch_right_and_left_padding():
    ids, mask = P.example_batch()
    assert ids.tolist()[0] == [P.BOS, 3, 4, P.EOS, P.PAD, P.PAD] and mask.tolist()[0] == [1, 1, 1, 1, 0, 0]
    ids, mask = P.example_batch(pad_id=7, left=True)
    assert ids.tolist()[0] == [7, 7, P.BOS, 3, 4, P.EOS] and mask.tolist()[0] == [0, 0, 1, 1, 1, 1]


def test_pad_id_is_invisible_only_with_both_masks():
    assert P.pad_id_effect(True, True) < 1e-12
    for attn, loss in [(False, False), (False, True), (True, False)]:
        assert P.pad_id_effect(attn, loss) > 1e-3
    # left padding: the first real token is the target of a pad position unless dropped too
    assert P.pad_id_effect(True, True, strict=False) > 1e-3


def test_context_logits_improve_with_position():
    ids = torch.randint(3, 50, (64, 16), generator=torch.Generator().manual_seed(0))
    nll = causal_lm_loss(P.context_logits(ids, 50), ids, reduction="none").mean(0)
    assert nll[:3].mean() > nll[-3:].mean() + 0.5


def test_three_perplexities_against_a_naive_loop():
    batches = P.ragged_batches(3, 12, n_batches=4, rows=3)
    sums = [naive_batch_nll(lg, lab) for lg, lab in batches]
    means = [s / n for s, n in sums]
    got = P.three_perplexities(batches)
    assert got["token_weighted"] == pytest.approx(
        math.exp(sum(s for s, _ in sums) / sum(n for _, n in sums)), rel=1e-9
    )
    assert got["mean_of_batch_means"] == pytest.approx(math.exp(sum(means) / len(means)), rel=1e-9)
    assert got["mean_of_batch_perplexities"] == pytest.approx(
        sum(map(math.exp, means)) / len(means), rel=1e-9
    )
    assert got["n_tokens"] == sum(n for _, n in sums)


def test_perplexities_agree_without_raggedness_and_diverge_with_it():
    flat = P.compare_perplexities(32, 32)
    ragged = P.compare_perplexities(4, 32)
    assert flat["mean_of_batch_means"] == pytest.approx(flat["token_weighted"], rel=0.01)
    assert ragged["token_weighted"] < ragged["mean_of_batch_means"] < ragged["mean_of_batch_perplexities"]
    assert 0.4 < ragged["padding_fraction"] < 0.5 and flat["padding_fraction"] < 0.1
    with pytest.raises(ValueError, match="shortest"):
        P.ragged_batches(1, 32)


def test_accumulation_with_num_items_matches_autograd_and_per_micro_mean_does_not():
    ids, labels = PA.accumulation_batch(0, rows=4)
    full = P.toy_model(0)
    causal_lm_loss(full(ids), labels).backward()
    total = num_valid_targets(labels)
    fixed, naive = P.toy_model(0), P.toy_model(0)
    for i, lab in zip(ids.split(2), labels.split(2)):
        causal_lm_loss(fixed(i), lab, num_items=total).backward()
        (causal_lm_loss(naive(i), lab) / 2).backward()
    assert (PA.flat_grad(fixed) - PA.flat_grad(full)).abs().max() < 1e-12
    assert (PA.flat_grad(naive) - PA.flat_grad(full)).abs().max() > 1e-3


def test_left_padding_moves_real_logits_unless_positions_come_from_the_mask():
    assert P.real_logit_shift(reset_positions=False) > 1.0
    assert P.real_logit_shift(reset_positions=True) < 1e-12


@pytest.mark.parametrize("seed, world", [(0, 2), (1, 3), (2, 2)])
def test_rank_gradients_equal_the_single_process_batch_only_with_k_times_sum_over_global_count(seed, world):
    r = PA.rank_gradients(seed, world)
    ids, labels = PA.accumulation_batch(seed, rows=2 * world)
    assert r["counts"] == [num_valid_targets(y) for y in labels.split(2)]
    assert r["global_count"] == num_valid_targets(labels)
    assert r["world_size * sum / global count"] < 1e-12
    assert r["local mean"] > 1e-3 and r["sum / global count"] > 1e-3
    # forgetting DDP's average leaves the gradient world times too small: the gap is (1 - 1/K) |g|
    full = P.toy_model(seed)
    causal_lm_loss(full(ids), labels).backward()
    assert r["sum / global count"] == pytest.approx(
        (1 - 1 / world) * float(PA.flat_grad(full).abs().max()), rel=1e-9
    )


def test_the_toy_vocabulary_follows_the_kit_convention():
    assert (P.TOKENS[P.PAD], P.TOKENS[P.EOS], P.TOKENS[P.BOS]) == ("PAD", "EOS", "BOS")
    assert (P.PAD, P.EOS, P.BOS) == (0, 1, 2) and len(P.TOKENS) == 12
    assert not P.toy_model().training and P.toy_model().wte.weight.dtype == torch.float64


def test_plots_return_figures():
    for fig in (PV.plot_padding_masks(), PV.plot_perplexities(8)):
        assert isinstance(fig, matplotlib.figure.Figure) and fig.axes[0].get_title()
        plt.close(fig)


# ---------------------------------------------------------------- checkers


def test_check_labels_from_attention_mask(capsys):
    assert P.check_labels_from_attention_mask(lambda ids, m: torch.where(m.bool(), ids, -100))
    wrong = [
        lambda ids, m: torch.where(m.bool(), ids, 0),  # pads -> 0
        lambda ids, m: torch.where(m.bool(), -100, ids),  # inverted
        lambda ids, m: ids.masked_fill_(m == 0, -100),  # in place
        lambda ids, m: torch.where(m.bool(), ids, -100)[:, 1:],  # shifted
        lambda ids, m: torch.where(m.bool(), ids, -100).float(),
    ]  # float labels
    for fn in wrong:
        assert not P.check_labels_from_attention_mask(fn)
    capsys.readouterr()


def test_check_token_weighted_perplexity(capsys):
    assert P.check_token_weighted_perplexity(lambda b: P.three_perplexities(b)["token_weighted"])

    def pads_counted(batches):
        total = sum(float(causal_lm_loss(lg, lab, reduction="sum")) for lg, lab in batches)
        return math.exp(total / sum(lab[:, 1:].numel() for _, lab in batches))

    wrong = [
        lambda b: P.three_perplexities(b)["mean_of_batch_means"],
        lambda b: P.three_perplexities(b)["mean_of_batch_perplexities"],
        pads_counted,
    ]
    for fn in wrong:
        assert not P.check_token_weighted_perplexity(fn)
    capsys.readouterr()


def test_check_accumulation(capsys):
    def fixed(model, micro):
        n = sum(num_valid_targets(lab) for _, lab in micro)
        for ids, lab in micro:
            causal_lm_loss(model(ids), lab, num_items=n).backward()

    def per_micro_mean(model, micro):
        for ids, lab in micro:
            (causal_lm_loss(model(ids), lab) / len(micro)).backward()

    def undivided(model, micro):
        for ids, lab in micro:
            causal_lm_loss(model(ids), lab).backward()

    def rows_as_items(model, micro):
        n = sum(lab.shape[0] for _, lab in micro)
        for ids, lab in micro:
            causal_lm_loss(model(ids), lab, num_items=n * (lab.shape[1] - 1)).backward()

    def stub(model, micro):
        raise NotImplementedError

    assert PA.check_accumulation(fixed)
    for fn in (per_micro_mean, undivided, rows_as_items):
        assert not PA.check_accumulation(fn)
    assert not PA.check_accumulation(stub)
    assert "not attempted yet" in capsys.readouterr().out
