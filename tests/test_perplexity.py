"""PerplexityMeter is token-weighted: exp(total NLL / total valid targets), from a naive loop."""

import math

import pytest
import torch
from _reference import naive_nll_sums

from lmcore import (
    IGNORE_INDEX,
    LN2,
    PerplexityMeter,
    bits_per_byte,
    bits_to_nats,
    nats_to_bits,
    perplexity_from_nll,
)


def ragged_batches(seed=0):
    """Batches of different sizes and padding; the short one is much easier than the long one."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for N, L, V, sharp in [(1, 4, 7, 6.0), (3, 12, 7, 0.5), (2, 7, 7, 2.0)]:
        labels = torch.randint(0, V, (N, L), generator=g)
        logits = torch.randn(N, L, V, generator=g)
        # make the right answer more or less likely so batches differ in difficulty
        logits[:, :-1].scatter_add_(2, labels[:, 1:, None], torch.full((N, L - 1, 1), sharp))
        lengths = torch.randint(2, L + 1, (N,), generator=g)
        labels[torch.arange(L)[None] >= lengths[:, None]] = IGNORE_INDEX
        out.append((logits, labels))
    return out


def test_meter_equals_exp_of_total_over_tokens():
    meter = PerplexityMeter()
    total, count = 0.0, 0
    for logits, labels in ragged_batches():
        s, c = naive_nll_sums(logits, labels)
        returned = meter.update(logits, labels)
        assert returned == pytest.approx(s, rel=1e-5)
        total, count = total + s, count + c
    assert meter.n_tokens == count
    assert meter.mean_nll == pytest.approx(total / count, rel=1e-5)
    assert meter.perplexity == pytest.approx(math.exp(total / count), rel=1e-5)
    assert meter.bits_per_token == pytest.approx(total / count / math.log(2), rel=1e-5)
    assert "n_tokens" in repr(meter)


def test_meter_differs_from_mean_of_batch_means():
    meter = PerplexityMeter()
    batch_means = []
    for logits, labels in ragged_batches():
        s, c = naive_nll_sums(logits, labels)
        batch_means.append(s / c)
        meter.update(logits, labels)
    mean_of_means = sum(batch_means) / len(batch_means)
    assert abs(meter.mean_nll - mean_of_means) > 0.05
    assert abs(meter.perplexity - math.exp(mean_of_means)) > 0.05


def test_update_sums_and_reset():
    meter = PerplexityMeter()
    meter.update_sums(10.0, 4)
    meter.update_sums(torch.tensor(2.0), torch.tensor(2))
    assert meter.n_tokens == 6 and meter.mean_nll == pytest.approx(2.0)
    assert meter.perplexity == pytest.approx(7.389, abs=1e-3)  # loss 2 nats -> 7.39
    meter.reset()
    assert meter.n_tokens == 0 and repr(meter) == "PerplexityMeter(n_tokens=0)"


def test_custom_ignore_index_and_no_graph():
    ((logits, labels),) = ragged_batches(3)[:1]
    alt = labels.clone()
    alt[alt == IGNORE_INDEX] = -1
    meter = PerplexityMeter(ignore_index=-1)
    x = logits.clone().requires_grad_()
    returned = meter.update(x, alt)
    assert isinstance(returned, float)
    s, c = naive_nll_sums(logits, labels)
    assert meter.n_tokens == c and meter.mean_nll == pytest.approx(s / c, rel=1e-5)


def test_unit_conversions_match_the_course_figures():
    assert nats_to_bits(2.0) == pytest.approx(2.885, abs=5e-4)
    assert bits_to_nats(nats_to_bits(1.234)) == pytest.approx(1.234, rel=1e-12)
    assert LN2 == pytest.approx(math.log(2), rel=1e-15)
    assert perplexity_from_nll(2.0) == pytest.approx(7.389, abs=5e-4)
    assert perplexity_from_nll(math.log(50257)) == pytest.approx(50257, rel=1e-9)
    # 2.0 nat/token at 3.94 characters (bytes) per token is about 0.73 bit per byte.
    assert bits_per_byte(2.0 * 1000, 3940) == pytest.approx(0.73, abs=5e-3)
    for V, nat, bit in [
        (5, 1.61, 2.32),
        (32_000, 10.37, 14.97),
        (50_257, 10.82, 15.62),
        (128_256, 11.76, 16.97),
    ]:
        assert math.log(V) == pytest.approx(nat, abs=5e-3)
        assert nats_to_bits(math.log(V)) == pytest.approx(bit, abs=5e-3)
