"""Adversarial inputs for perplexity and its unit conversions: no coercion, no OverflowError,
no silent inflation of the token-weighted mean."""

import math

import numpy as np
import pytest
import torch
from _adversarial import raises
from hypothesis import given
from hypothesis import strategies as st

from lmcore import LN2, PerplexityMeter, bits_per_byte, bits_to_nats, nats_to_bits, perplexity_from_nll


@pytest.mark.parametrize("nll", [709.0, 710.0, 1e4, 1e300, math.inf])
def test_huge_nll_gives_inf_not_overflow(nll):
    assert (
        perplexity_from_nll(nll) == pytest.approx(math.exp(nll))
        if nll < 709.5
        else perplexity_from_nll(nll) == math.inf
    )


def test_meter_with_huge_nll_reports_inf_also_in_repr():
    meter = PerplexityMeter()
    meter.update_sums(1e6, 2)
    assert meter.perplexity == math.inf and meter.mean_nll == 5e5
    assert "perplexity=inf" in repr(meter)


@pytest.mark.parametrize("bad", [True, "2.0", None, [2.0], torch.tensor([1.0, 2.0])], ids=repr)
@pytest.mark.parametrize(
    "fn,name", [(perplexity_from_nll, "mean_nll_nats"), (nats_to_bits, "nats"), (bits_to_nats, "bits")]
)
def test_conversions_refuse_non_numbers(fn, name, bad):
    with raises(TypeError, name):
        fn(bad)


@pytest.mark.parametrize(
    "fn,name", [(perplexity_from_nll, "mean_nll_nats"), (nats_to_bits, "nats"), (bits_to_nats, "bits")]
)
def test_conversions_refuse_nan(fn, name):
    with raises(ValueError, name, "nan"):
        fn(math.nan)


@pytest.mark.parametrize("bad", [-1e-3, -5.0, -math.inf])
def test_negative_mean_nll_is_refused(bad):
    with raises(ValueError, "mean_nll_nats"):
        perplexity_from_nll(bad)


@pytest.mark.parametrize("bad", [True, 2.5, "40", None, 40.0, math.inf])
def test_bits_per_byte_n_bytes_must_be_an_int(bad):
    with raises(TypeError, "n_bytes"):
        bits_per_byte(10.0, bad)


@pytest.mark.parametrize("bad", [0, -3, np.int64(0)])
def test_bits_per_byte_n_bytes_must_be_positive(bad):
    with raises(ValueError, "n_bytes", "positive"):
        bits_per_byte(10.0, bad)


@pytest.mark.parametrize(
    "bad,exc",
    [
        (math.nan, ValueError),
        (math.inf, ValueError),
        (-1.0, ValueError),
        ("10", TypeError),
        (True, TypeError),
    ],
    ids=repr,
)
def test_bits_per_byte_total_must_be_a_finite_non_negative_number(bad, exc):
    with raises(exc, "total_nll_nats"):
        bits_per_byte(bad, 40)


def test_numpy_numbers_are_numbers():
    assert bits_per_byte(np.float64(10.0), np.int64(40)) == pytest.approx(10 / (LN2 * 40))
    assert nats_to_bits(np.float32(LN2)) == pytest.approx(1.0)


T, N = "total_nll", "n_tokens"


@pytest.mark.parametrize(
    "total,n,exc,name",
    [
        (5.0, 0, ValueError, T),  # a loss with no target would inflate later means
        (1e-9, 0, ValueError, T),
        (1.0, True, TypeError, N),
        (1.0, 2.5, TypeError, N),
        (1.0, "3", TypeError, N),
        (1.0, None, TypeError, N),
        (1.0, torch.tensor(3.0), TypeError, N),
        (1.0, torch.tensor([1, 2]), TypeError, N),
        (1.0, -1, ValueError, N),
        ("5.0", 3, TypeError, T),
        (True, 3, TypeError, T),
        (None, 3, TypeError, T),
        ([1.0], 3, TypeError, T),
        (torch.tensor([1.0, 2.0]), 3, TypeError, T),
        (math.nan, 3, ValueError, T),
        (math.inf, 3, ValueError, T),
        (-1.0, 3, ValueError, T),
    ],
    ids=repr,
)
def test_update_sums_refuses_and_leaves_the_meter_unchanged(total, n, exc, name):
    meter = PerplexityMeter()
    meter.update_sums(2.0, 4)
    with raises(exc, name):
        meter.update_sums(total, n)
    assert (meter.total_nll, meter.n_tokens) == (2.0, 4)


def test_update_sums_accepts_numpy_and_0d_tensors():
    meter = PerplexityMeter()
    meter.update_sums(np.float64(3.0), np.int64(2))
    meter.update_sums(torch.tensor(1.0), torch.tensor(2))
    meter.update_sums(0.0, 0)  # an all-padding batch is fine
    assert (meter.total_nll, meter.n_tokens) == (4.0, 4)


def test_running_sum_overflow_is_refused():
    meter = PerplexityMeter()
    meter.update_sums(1e308, 1)
    with raises(ValueError, "total_nll"):
        meter.update_sums(1e308, 1)
    assert meter.total_nll == 1e308


@given(st.lists(st.tuples(st.floats(0, 1e3), st.integers(1, 1000)), min_size=1, max_size=8))
def test_meter_is_the_token_weighted_mean(batches):
    meter = PerplexityMeter()
    for mean, n in batches:
        meter.update_sums(mean * n, n)
    total, count = sum(m * n for m, n in batches), sum(n for _, n in batches)
    assert meter.mean_nll == pytest.approx(total / count, rel=1e-12, abs=1e-12)
    ref = math.exp(total / count) if total / count < 709 else math.inf
    assert meter.perplexity == pytest.approx(ref, rel=1e-9)
