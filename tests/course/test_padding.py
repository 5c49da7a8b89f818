"""Notebook 05's support: padding masks, the pad-id invariance, three perplexities, gradient
accumulation, and the exercise checkers (accept the reference, reject plausible mistakes)."""

import itertools
import math

import matplotlib
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import lmcore  # noqa: E402
from lmcore import (  # noqa: E402
    IGNORE_INDEX,
    PerplexityMeter,
    causal_lm_loss,
    labels_from_attention_mask,
    num_valid_targets,
)
from lmcore.course.padding import accumulation as PA  # noqa: E402
from lmcore.course.padding import exercises as PX  # noqa: E402
from lmcore.course.padding import lesson as P  # noqa: E402
from lmcore.course.padding import perplexity as PP  # noqa: E402
from lmcore.course.padding import views as PV  # noqa: E402
from lmcore.course.toys import forward_with_mask  # noqa: E402


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
    batches = PP.batch_rows(PP.eval_rows(9, 12), 4)
    sums = [naive_batch_nll(lg, lab) for lg, lab in batches]
    means = [s / n for s, n in sums]
    got = PP.three_perplexities(batches)
    assert got["token_weighted"] == pytest.approx(
        math.exp(sum(s for s, _ in sums) / sum(n for _, n in sums)), rel=1e-9
    )
    assert got["mean_of_batch_means"] == pytest.approx(math.exp(sum(means) / len(means)), rel=1e-9)
    assert got["mean_of_batch_perplexities"] == pytest.approx(
        sum(map(math.exp, means)) / len(means), rel=1e-9
    )
    assert got["n_tokens"] == sum(n for _, n in sums)


def test_only_the_batching_changes_and_only_the_token_weighted_number_ignores_it():
    rows = PP.eval_rows()
    total, count = 0.0, 0
    for logits, ids in rows:  # every row alone, by a loop: the batching-free answer
        s, n = naive_batch_nll(logits[None], ids[None])
        total, count = total + s, count + n
    seen = set()
    for bs in PP.BATCH_SIZES:
        for order in ("sorted", "shuffled"):
            r = PP.compare_batchings(bs, order)
            assert r["token_weighted"] == pytest.approx(math.exp(total / count), rel=1e-12)
            assert r["n_tokens"] == count
            seen.add(round(r["mean_of_batch_means"], 6))
    assert len(seen) > 8  # the two batch-averaged numbers move with the batching
    one = PP.compare_batchings(24)
    assert one["mean_of_batch_means"] == pytest.approx(one["token_weighted"], rel=1e-12)
    s4 = PP.compare_batchings(4, "sorted")
    assert s4["token_weighted"] < s4["mean_of_batch_means"] < s4["mean_of_batch_perplexities"]
    with pytest.raises(ValueError, match="order"):
        PP.batch_rows(rows, 4, "random")
    with pytest.raises(ValueError, match="batch_size"):
        PP.batch_rows(rows, 0)


def test_lookback_lm_is_causal_uses_its_context_and_refuses_long_input():
    m = PP.LookbackLM(block_size=16)
    ids = PP.long_text(16)[None]
    changed = ids.clone()
    changed[0, 10] = 5
    assert torch.equal(m(ids)[:, :10], m(changed)[:, :10])
    assert not torch.equal(m(ids)[:, 10:], m(changed)[:, 10:])
    # with more context the same text costs less: a window of 16 beats windows of 4
    text = PP.long_text(80)
    assert PP.sliding_window_perplexity(m, text, 16, 8) < PP.sliding_window_perplexity(m, text, 4, 4) - 1
    with pytest.raises(ValueError, match="longer than the context"):
        m(PP.long_text(17)[None])


@pytest.mark.parametrize(
    "n, block, stride", [(61, 16, 8), (61, 16, 5), (61, 16, 16), (12, 16, 4), (30, 8, 1)]
)
def test_sliding_window_perplexity_against_a_loop_over_every_token(n, block, stride):
    m, ids = PP.LookbackLM(block_size=block), PP.long_text(n, seed=n)
    assert PP.sliding_window_perplexity(m, ids, block, stride) == pytest.approx(
        PX._naive_window_perplexity(m, ids, block, stride), rel=1e-12
    )


def test_sliding_window_perplexity_checks_its_arguments():
    m = PP.LookbackLM()
    for bad in (dict(stride=0, block_size=8), dict(stride=9, block_size=8), dict(stride=2.0, block_size=8)):
        with pytest.raises(ValueError, match="stride"):
            PP.sliding_window_perplexity(m, PP.long_text(20), **bad)
    with pytest.raises(ValueError, match="1-D"):
        PP.sliding_window_perplexity(m, PP.long_text(20)[None], 8, 4)


def test_attention_from_mask_is_what_the_padding_forward_does():
    ids, mask = P.example_batch(left=True)
    model = P.toy_model()
    allowed = P.attention_from_mask(mask)
    assert allowed.shape == (2, 1, 6, 6) and allowed.dtype == torch.bool
    with torch.no_grad():
        direct = model(ids, attention=allowed, position_ids=lmcore.position_ids_from_attention_mask(mask))
        via_documents = forward_with_mask(model, ids, mask)
    real = mask == 1
    assert torch.isfinite(direct).all()
    assert (direct[real] - via_documents[real]).abs().max() < 1e-12
    # a key that is padding is never read; each query reads only keys at or before it
    assert not allowed[0, 0, 3, 0] and allowed[0, 0, 3, 2] and not allowed[1, 0, 2, 3]


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
    assert abs(r["scale"]["sum / global count"] - 1 / world) < 1e-9  # DDP's average: K times too small
    assert abs(r["scale"]["world_size * sum / global count"] - 1) < 1e-9
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
    for fig in (PV.plot_padding_masks(), PV.plot_perplexities(8, "shuffled", y_top=30.0)):
        assert isinstance(fig, matplotlib.figure.Figure) and fig.axes[0].get_title()
        plt.close(fig)


# ---------------------------------------------------------------- checkers


def _said(capsys):
    return capsys.readouterr().out


def test_check_eos_padded_labels(capsys):
    def cumulative(ids, eos):  # accepted: count the EOS seen so far
        return torch.where((ids == eos).cumsum(1) > 1, IGNORE_INDEX, ids)

    def after_an_eos(ids, eos):  # accepted: padding is what follows an EOS
        out = ids.clone()
        out[:, 1:][ids[:, :-1] == eos] = IGNORE_INDEX
        return out

    assert PX.check_eos_padded_labels(cumulative) and PX.check_eos_padded_labels(after_an_eos)
    _said(capsys)

    def every_eos(ids, eos):  # the collator bug: the real EOS goes too
        return ids.masked_fill(ids == eos, IGNORE_INDEX)

    def keep_last(ids, eos):
        later = (ids == eos).flip(1).cumsum(1).flip(1) > 1
        return ids.masked_fill(later, IGNORE_INDEX)

    def first_by_argmax(ids, eos):  # a row without EOS: argmax 0 masks the whole row
        first = (ids == eos).int().argmax(1)
        return ids.masked_fill(torch.arange(ids.shape[1])[None] > first[:, None], IGNORE_INDEX)

    def from_the_first(ids, eos):  # the first EOS too
        return ids.masked_fill((ids == eos).cumsum(1) > 0, IGNORE_INDEX)

    def eos_is_one(ids, eos):
        return cumulative(ids, 1)

    def in_place(ids, eos):
        ids[(ids == eos).cumsum(1) > 1] = IGNORE_INDEX
        return ids

    def with_the_mask_helper(ids, eos):
        return labels_from_attention_mask(ids, ((ids == eos).cumsum(1) <= 1).long())

    def with_the_reference(ids, eos):
        return PX.eos_padded_labels(ids, eos)

    wrong = [every_eos, keep_last, first_by_argmax, from_the_first, eos_is_one, in_place]
    for fn in wrong + [lambda ids, eos: ids.clone(), with_the_mask_helper, with_the_reference]:
        assert not PX.check_eos_padded_labels(fn), fn
    out = _said(capsys)
    assert "called lmcore.shift.labels_from_attention_mask" in out
    assert "called lmcore.course.padding.exercises.eos_padded_labels" in out
    assert "without any EOS" in out and "tensor(" not in out


def _hf_windows(model, ids, block, stride):  # an independent, accepted solution (HF's recipe)
    nll, n, prev_end = 0.0, 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + block, len(ids))
        window = ids[begin:end]
        logp = torch.log_softmax(model(window[None])[0, :-1], -1)
        nll_each = -logp.gather(-1, window[1:, None])[:, 0]
        keep = torch.arange(begin + 1, end) >= prev_end
        nll, n = nll + float(nll_each[keep].sum()), n + int(keep.sum())
        prev_end = end
        if end == len(ids):
            break
    return math.exp(nll / n)


def _windows(model, ids, block, stride, *, combine="tokens", double_count=False, last=True, weigh="targets"):
    """The wrong variants: mean of window means, overlaps scored twice, last window dropped,
    weights by the window's new tokens (HF's trg_len) instead of its targets."""
    sums, counts, news, prev_end = [], [], [], 0
    for begin in range(0, len(ids), stride):
        end = min(begin + block, len(ids))
        if not last and end == len(ids) and begin > 0:
            break
        labels = ids[begin:end][None].clone()
        if not double_count:
            labels[:, : max(0, prev_end - begin)] = IGNORE_INDEX
        sums.append(float(causal_lm_loss(model(ids[begin:end][None]), labels, reduction="sum")))
        counts.append(num_valid_targets(labels))
        news.append(end - prev_end)
        prev_end = end
        if end == len(ids):
            break
    if combine == "windows":
        return math.exp(sum(s / c for s, c in zip(sums, counts)) / len(sums))
    if weigh == "new tokens":
        return math.exp(sum(s / c * w for s, c, w in zip(sums, counts, news)) / prev_end)
    return math.exp(sum(sums) / sum(counts))


def _float32_windows(model, ids, block, stride):  # right, summed in float32 (review 00-05, E7)
    total, n, prev_end = torch.zeros(1), 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + block, len(ids))
        labels = ids[begin:end][None].clone()
        labels[:, : max(0, prev_end - begin)] = IGNORE_INDEX
        total += causal_lm_loss(model(ids[begin:end][None]).float(), labels, reduction="sum")
        n, prev_end = n + num_valid_targets(labels), end
        if end == len(ids):
            break
    return float(torch.exp(total / n))


@torch.no_grad()
def _per_token_loop(model, ids, block, stride):  # right: another algorithm, decorated
    logps = []
    for k in range(1, len(ids)):
        begin = max(0, -(-(k - block + 1) // stride) * stride)  # the first window that holds k
        if begin < k:
            logps.append(torch.log_softmax(model(ids[begin:k][None])[0, -1], -1)[ids[k]])
    return math.exp(-float(torch.stack(logps).mean()))


def test_check_sliding_window_perplexity(capsys):
    for right in (_hf_windows, _float32_windows, _per_token_loop):
        assert PX.check_sliding_window_perplexity(right), capsys.readouterr().out
    _said(capsys)
    assert not PX.check_sliding_window_perplexity(PX._naive_window_perplexity)  # its own reference
    assert "called lmcore.course.padding.exercises._naive_window_perplexity" in capsys.readouterr().out

    def meter(model, ids, block, stride):
        m, prev_end = PerplexityMeter(), 0
        for begin in range(0, len(ids), stride):
            end = min(begin + block, len(ids))
            labels = ids[begin:end][None].clone()
            labels[:, : max(0, prev_end - begin)] = IGNORE_INDEX
            m.update(model(ids[begin:end][None]), labels)
            prev_end = end
            if end == len(ids):
                break
        return m.perplexity

    wrong = [
        lambda m, x, b, s: _windows(m, x, b, s, combine="windows"),  # HF doc's first version
        lambda m, x, b, s: _windows(m, x, b, s, double_count=True),
        lambda m, x, b, s: _windows(m, x, b, s, last=False),
        lambda m, x, b, s: _windows(m, x, b, s, weigh="new tokens"),
        lambda m, x, b, s: _windows(m, x, b, b),  # ignores the stride: no overlap
        lambda m, x, b, s: math.exp(float(causal_lm_loss(m(x[None]), x[None]))),  # the whole text
        meter,
        PP.sliding_window_perplexity,
    ]
    for fn in wrong:
        assert not PX.check_sliding_window_perplexity(fn)
    out = _said(capsys)
    assert "called lmcore.perplexity.PerplexityMeter.update" in out
    assert "called lmcore.course.padding.perplexity.sliding_window_perplexity" in out
    assert "longer than the context" in out


def test_the_window_mistakes_never_read_as_one_another_or_as_right():
    """The first hint names a mistake only when the perplexity matches it alone (to 1e-4): on every
    case, the mistakes that change the value there lie 1e-3 or more from the right value and from
    each other (two ways to write one mistake may agree)."""
    for case in PX._window_cases():
        n, seed, block, stride = case.args
        model, ids = PP.LookbackLM(block_size=block), PP.long_text(n, seed=seed)
        e = PX._naive_window_perplexity(model, ids, block, stride)
        live = [(v, q) for v, q in PX._window_mistakes(model, ids, block, stride) if not PX._near(v, e)]
        assert live and all(abs(v - e) > 1e-3 * e for v, _ in live), case.label
        for (u, x), (v, y) in itertools.combinations(live, 2):
            assert x == y or abs(u - v) > 1e-3 * max(u, v), (case.label, x, y)


def _sum_then_rescale(model, micro):
    total, count = 0.0, 0
    for ids, lab in micro:
        loss = causal_lm_loss(model(ids), lab, reduction="sum")
        loss.backward()
        total, count = total + float(loss), count + num_valid_targets(lab)
    for p in model.parameters():
        if p.grad is not None:
            p.grad /= count
    return total / count


def _collect_first(model, micro, *, count=num_valid_targets, each_own=False, ret="mean"):
    micro = list(micro)
    n = sum(count(lab) for _, lab in micro)
    total = 0.0
    for ids, lab in micro:
        loss = causal_lm_loss(model(ids), lab, num_items=count(lab) if each_own else n)
        loss.backward()
        total += float(loss)
    return total / len(micro) if ret == "mean of means" else total


def _float32_loss(model, micro):  # the loss from float32 logits, summed in float32 (issue 38)
    total, count = torch.zeros((), dtype=torch.float32), 0
    for ids, lab in micro:
        loss = causal_lm_loss(model(ids).float(), lab, reduction="sum")
        loss.backward()
        total, count = total + loss.detach(), count + num_valid_targets(lab)
    for p in model.parameters():
        if p.grad is not None:
            p.grad /= count
    return float(total / count)


def test_the_accumulation_mistakes_never_read_as_one_another_or_as_right():
    """Likewise for the gradients (matched to 1e-4 of their size): the right one is the full
    batch's, and the mistakes lie 1e-2 or more from it and from each other."""

    def apart(a, b):
        return float((a - b).abs().max()) / max(float(a.abs().max()), float(b.abs().max()))

    for case in PA._accumulation_cases():
        right, mistakes = PA._accumulation_mistakes(*case.args)
        assert apart(right, PA._one_forward_reference(*case.args)["the model's gradients"]) < 1e-12
        assert len({q for _, q in mistakes}) >= 4 and all(apart(g, right) > 1e-2 for g, _ in mistakes)
        for (a, x), (b, y) in itertools.combinations(mistakes, 2):
            assert x == y or apart(a, b) > 1e-2, (case.label, x, y)


def test_check_accumulation(capsys):
    assert PA.check_accumulation(_sum_then_rescale) and PA.check_accumulation(_collect_first)
    # float32 logits: gradients off by ~4e-8 (rejected at atol 1e-9, rtol 1e-6 before issue 38)
    assert PA.check_accumulation(_float32_loss), capsys.readouterr().out
    _said(capsys)

    def naive(model, micro):
        micro, total = list(micro), 0.0
        for ids, lab in micro:
            loss = causal_lm_loss(model(ids), lab) / len(micro)
            loss.backward()
            total += float(loss)
        return total

    def no_divide(model, micro):
        total = 0.0
        for ids, lab in micro:
            loss = causal_lm_loss(model(ids), lab, reduction="sum")
            loss.backward()
            total += float(loss)
        return total

    def zero_grad_each(model, micro):
        micro = list(micro)
        n, total = sum(num_valid_targets(lab) for _, lab in micro), 0.0
        for ids, lab in micro:
            model.zero_grad()
            loss = causal_lm_loss(model(ids), lab, num_items=n)
            loss.backward()
            total += float(loss)
        return total

    def concatenated(model, micro):  # no accumulation at all: one forward on the padded union
        micro = list(micro)
        L = max(x.shape[1] for x, _ in micro)
        ids = torch.cat([F.pad(x, (0, L - x.shape[1])) for x, _ in micro])
        lab = torch.cat([F.pad(y, (0, L - y.shape[1]), value=IGNORE_INDEX) for _, y in micro])
        loss = causal_lm_loss(model(ids), lab)
        loss.backward()
        return float(loss)

    def two_passes(model, micro):  # counts first: the one-pass iterator is then empty
        n = sum(num_valid_targets(lab) for _, lab in micro)
        for ids, lab in micro:
            causal_lm_loss(model(ids), lab, num_items=n).backward()
        return 0.0

    def lmcore_loop(model, micro):
        from lmcore.train.accumulate import accumulate_gradients

        total, n = accumulate_gradients(model, [{"input_ids": x, "labels": y} for x, y in micro])
        return total / n

    wrong = [
        naive,
        no_divide,
        zero_grad_each,
        concatenated,
        two_passes,
        lmcore_loop,
        lambda m, mb: _collect_first(m, mb, count=lambda lab: int((lab != IGNORE_INDEX).sum())),  # unshifted
        lambda m, mb: _collect_first(m, mb, each_own=True),  # each micro-batch's own count
        lambda m, mb: _collect_first(m, mb, ret="mean of means"),  # right gradients, wrong logged loss
    ]
    for fn in wrong:
        assert not PA.check_accumulation(fn)
    out = _said(capsys)
    assert "one forward per micro-batch, in order?" in out and "never called" in out
    assert "called lmcore.train.accumulate" in out
    assert not PA.check_accumulation(lambda m, mb: (_ for _ in ()).throw(NotImplementedError()))
    assert "not attempted yet" in _said(capsys)
