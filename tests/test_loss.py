"""lmcore.causal_lm_loss against F.cross_entropy in float64, a naive loop, and invariances."""

import math

import pytest
import torch
import torch.nn.functional as F
from _reference import naive_nll_sums
from hypothesis import given
from hypothesis import strategies as st

from lmcore import IGNORE_INDEX, causal_lm_loss, labels_from_attention_mask


def random_case(seed, N=None, L=None, V=None, p_ignore=0.3, dtype=torch.float32, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    N = N or int(torch.randint(1, 5, (1,), generator=g))
    L = L or int(torch.randint(2, 10, (1,), generator=g))
    V = V or int(torch.randint(2, 40, (1,), generator=g))
    logits = (torch.randn(N, L, V, generator=g, dtype=torch.float64) * scale).to(dtype)
    labels = torch.randint(0, V, (N, L), generator=g)
    labels[torch.rand(N, L, generator=g) < p_ignore] = IGNORE_INDEX
    labels[0, 1] = int(torch.randint(0, V, (1,), generator=g))  # at least one valid target
    return logits, labels


def reference(logits, labels, reduction="mean", ignore_index=IGNORE_INDEX):
    """The shift written out by hand, F.cross_entropy in float64."""
    V = logits.shape[-1]
    z = logits.double()[:, :-1].reshape(-1, V)
    y = labels[:, 1:].reshape(-1).long()
    out = F.cross_entropy(z, y, ignore_index=ignore_index, reduction=reduction)
    return out.view(labels.shape[0], -1) if reduction == "none" else out


def naive_loop(logits, labels):
    total, count = naive_nll_sums(logits, labels)
    return total / count


@pytest.mark.parametrize("seed", range(12))
def test_matches_float64_cross_entropy_all_reductions(seed):
    logits, labels = random_case(seed)
    for reduction in ("mean", "sum", "none"):
        got = causal_lm_loss(logits, labels, reduction=reduction)
        ref = reference(logits, labels, reduction)
        assert got.dtype == torch.float32
        assert got.shape == ref.shape
        torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)
    none = causal_lm_loss(logits, labels, reduction="none")
    assert bool((none[labels[:, 1:] == IGNORE_INDEX] == 0).all())


@pytest.mark.parametrize("seed", range(3))
def test_matches_naive_loop(seed):
    logits, labels = random_case(seed, dtype=torch.float64)
    assert float(causal_lm_loss(logits, labels)) == pytest.approx(naive_loop(logits, labels), rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_gradient_matches_float64_autograd(seed):
    logits, labels = random_case(seed)
    x = logits.clone().requires_grad_()
    causal_lm_loss(x, labels).backward()
    x64 = logits.double().requires_grad_()
    reference(x64, labels).backward()
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-5, atol=1e-7)
    assert bool((x.grad[:, -1] == 0).all())  # the last position predicts nothing


def test_uniform_logits_give_ln_v():
    for V in (5, 65, 50257):
        labels = torch.randint(0, V, (2, 4), generator=torch.Generator().manual_seed(V))
        assert float(causal_lm_loss(torch.zeros(2, 4, V), labels)) == pytest.approx(math.log(V), rel=1e-6)


def test_num_items_divides_the_sum():
    logits, labels = random_case(5, N=3, L=8, V=11)
    total = reference(logits, labels, "sum")
    got = causal_lm_loss(logits, labels, num_items=40)
    assert float(got) == pytest.approx(float(total) / 40, rel=1e-5)
    got_t = causal_lm_loss(logits, labels, num_items=torch.tensor(40))
    assert float(got_t) == pytest.approx(float(total) / 40, rel=1e-5)
    # Gradient accumulation: micro-batches with the full count add up to the whole batch.
    n_valid = int((labels[:, 1:] != IGNORE_INDEX).sum())
    parts = sum(causal_lm_loss(logits[i : i + 1], labels[i : i + 1], num_items=n_valid) for i in range(3))
    assert float(parts) == pytest.approx(float(reference(logits, labels)), rel=1e-5)


def test_num_items_allows_a_batch_without_valid_targets():
    labels = torch.full((2, 5), IGNORE_INDEX)
    assert float(causal_lm_loss(torch.randn(2, 5, 7), labels, num_items=10)) == 0.0
    assert float(causal_lm_loss(torch.randn(2, 5, 7), labels, reduction="sum")) == 0.0


def test_custom_ignore_index_and_int32_labels():
    logits, labels = random_case(7, N=2, L=9, V=13)
    alt = labels.clone()
    alt[alt == IGNORE_INDEX] = -1
    got = causal_lm_loss(logits, alt.int(), ignore_index=-1)
    torch.testing.assert_close(got.double(), reference(logits, labels), rtol=1e-5, atol=1e-6)


def test_stable_at_magnitude_1000():
    logits, labels = random_case(8, N=2, L=6, V=9, p_ignore=0.0, scale=1.0)
    big = torch.sign(logits) * 1000.0 + logits  # |z| ~ 1000, spread ~ 2000
    x = big.clone().requires_grad_()
    loss = causal_lm_loss(x, labels)
    loss.backward()
    assert torch.isfinite(loss) and bool(torch.isfinite(x.grad).all())
    torch.testing.assert_close(loss.double(), reference(big, labels), rtol=1e-6, atol=1e-3)
    same = torch.full((1, 3, 4), -1000.0)
    assert float(causal_lm_loss(same, torch.tensor([[0, 1, 2]]))) == pytest.approx(math.log(4), rel=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_logits_are_reduced_in_float32(dtype):
    logits, labels = random_case(9, N=4, L=64, V=500, p_ignore=0.1, scale=3.0)
    low = logits.to(dtype)
    for reduction in ("mean", "sum", "none"):
        got = causal_lm_loss(low, labels, reduction=reduction)
        assert got.dtype == torch.float32, reduction
        # Same (rounded) inputs, float64 reference: only float32 rounding may differ.
        torch.testing.assert_close(got.double(), reference(low, labels, reduction), rtol=1e-5, atol=1e-5)
    # Against the unrounded logits the error is that of rounding the inputs to bf16/fp16 only.
    torch.testing.assert_close(
        causal_lm_loss(low, labels).double(), reference(logits, labels), rtol=2e-2, atol=0
    )
    x = low.clone().requires_grad_()
    causal_lm_loss(x, labels).backward()
    assert x.grad.dtype == dtype and bool(torch.isfinite(x.grad).all())


def test_low_precision_sum_does_not_saturate():
    # 8184 targets of ln 100 nats each: a bf16 accumulator would lose most of them.
    V = 100
    labels = torch.randint(0, V, (8, 1025), generator=torch.Generator().manual_seed(10))
    logits = torch.zeros(8, 1025, V, dtype=torch.bfloat16)
    got = causal_lm_loss(logits, labels, reduction="sum")
    assert float(got) == pytest.approx(8 * 1024 * math.log(V), rel=1e-5)


# ---- invariances (hypothesis) ------------------------------------------------------------------

cases = st.tuples(st.integers(0, 10_000), st.integers(1, 4), st.integers(2, 8), st.integers(2, 20))


@given(case=cases, c=st.floats(-100, 100))
def test_adding_a_constant_to_all_logits(case, c):
    seed, N, L, V = case
    logits, labels = random_case(seed, N, L, V, dtype=torch.float64)
    a = causal_lm_loss(logits, labels)
    assert float(causal_lm_loss(logits + c, labels)) == pytest.approx(float(a), rel=1e-9, abs=1e-9)


@given(case=cases, pad_a=st.integers(0, 19), pad_b=st.integers(0, 19))
def test_changing_the_pad_id(case, pad_a, pad_b):
    seed, N, L, V = case
    logits, _ = random_case(seed, N, L, max(V, 20), dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, logits.shape[-1], (N, L), generator=g)
    lengths = torch.randint(2, L + 1, (N,), generator=g)
    mask = (torch.arange(L)[None] < lengths[:, None]).long()
    a = labels_from_attention_mask(torch.where(mask.bool(), ids, pad_a), mask)
    b = labels_from_attention_mask(torch.where(mask.bool(), ids, pad_b), mask)
    assert float(causal_lm_loss(logits, a)) == float(causal_lm_loss(logits, b))


@given(case=cases, extra=st.integers(1, 5))
def test_appending_fully_masked_padding(case, extra):
    seed, N, L, V = case
    logits, labels = random_case(seed, N, L, V, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed + 1)
    longer = torch.cat([logits, torch.randn(N, extra, V, generator=g, dtype=torch.float64) * 5], 1)
    padded = torch.cat([labels, torch.full((N, extra), IGNORE_INDEX)], 1)
    for reduction in ("mean", "sum"):
        a = causal_lm_loss(logits, labels, reduction=reduction)
        b = causal_lm_loss(longer, padded, reduction=reduction)
        assert float(b) == pytest.approx(float(a), rel=1e-12, abs=1e-12)


@given(case=cases, perm_seed=st.integers(0, 1000))
def test_permuting_the_batch(case, perm_seed):
    seed, N, L, V = case
    logits, labels = random_case(seed, N, L, V, dtype=torch.float64)
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(perm_seed))
    a = causal_lm_loss(logits, labels)
    b = causal_lm_loss(logits[perm], labels[perm])
    assert float(b) == pytest.approx(float(a), rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5, 1.0])
def test_label_smoothing_matches_a_naive_loop_over_valid_targets_only(seed, eps):
    logits, labels = random_case(seed, dtype=torch.float64, p_ignore=0.4)
    got = causal_lm_loss(logits, labels, label_smoothing=eps)
    total, count = naive_nll_sums(logits, labels, smoothing=eps)
    assert float(got) == pytest.approx(total / count, rel=1e-12)
    # the logits at an ignored position move neither part of q's score
    ignored = torch.zeros_like(labels, dtype=torch.bool)
    ignored[:, :-1] = labels[:, 1:] == IGNORE_INDEX
    moved = logits + 50 * ignored[..., None]
    assert float(causal_lm_loss(moved, labels, label_smoothing=eps)) == pytest.approx(float(got), rel=1e-12)
    summed = causal_lm_loss(logits, labels, label_smoothing=eps, reduction="sum")
    per_target = causal_lm_loss(logits, labels, label_smoothing=eps, reduction="none")
    assert float(per_target.sum()) == pytest.approx(float(summed), rel=1e-12)
    assert bool((per_target[labels[:, 1:] == IGNORE_INDEX] == 0).all())


def test_label_smoothing_zero_is_the_plain_loss():
    logits, labels = random_case(3)
    assert torch.equal(causal_lm_loss(logits, labels, label_smoothing=0.0), causal_lm_loss(logits, labels))
