"""lmcore.handcalc against the seed's worked numbers, torch in float64, autograd and finite
differences."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmcore import handcalc

SEED_Z, SEED_Y = [2.0, 1.0, 0.0], 1


def test_seed_worked_example():
    p = handcalc.softmax(SEED_Z)
    assert p[SEED_Y] == pytest.approx(0.245, abs=5e-4)
    assert p == pytest.approx([0.665, 0.245, 0.090], abs=5e-4)
    assert handcalc.nll(SEED_Z, SEED_Y) == pytest.approx(1.408, abs=5e-4)
    assert handcalc.nll(SEED_Z, SEED_Y) == pytest.approx(-math.log(p[SEED_Y]), rel=1e-12)
    assert handcalc.ce_grad(SEED_Z, SEED_Y) == pytest.approx([0.665, -0.755, 0.090], abs=5e-4)


def test_accepts_lists_tuples_arrays_and_numpy_ints():
    for z in (SEED_Z, tuple(SEED_Z), np.array(SEED_Z), np.array([2, 1, 0])):
        assert handcalc.nll(z, np.int64(1)) == pytest.approx(1.4076, abs=1e-4)
    assert isinstance(handcalc.nll(SEED_Z, 1), float)
    assert isinstance(handcalc.logsumexp(SEED_Z), float)


def test_seed_000_probabilities_to_losses():
    # -ln p for the probabilities of the seed's four-token example, and a near-miss.
    for p, loss in [(0.462, 0.772), (0.477, 0.740), (0.313, 1.162), (0.0001, 9.21)]:
        z = [math.log(p), math.log(1 - p)]  # a two-way softmax with p at index 0
        assert handcalc.nll(z, 0) == pytest.approx(loss, abs=5e-3)


def _random_case(seed, V=None, scale=3.0):
    rng = np.random.default_rng(seed)
    V = V or int(rng.integers(2, 40))
    return rng.normal(0, scale, V), int(rng.integers(0, V))


@pytest.mark.parametrize("seed", range(10))
def test_matches_torch_float64(seed):
    z, y = _random_case(seed)
    zt = torch.tensor(z, dtype=torch.float64)
    np.testing.assert_allclose(handcalc.softmax(z), torch.softmax(zt, 0).numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(handcalc.log_softmax(z), torch.log_softmax(zt, 0).numpy(), rtol=1e-12)
    assert handcalc.logsumexp(z) == pytest.approx(float(torch.logsumexp(zt, 0)), rel=1e-12)
    ref = torch.nn.functional.cross_entropy(zt[None], torch.tensor([y]))
    assert handcalc.nll(z, y) == pytest.approx(float(ref), rel=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_ce_grad_matches_autograd(seed):
    z, y = _random_case(seed)
    zt = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.cross_entropy(zt[None], torch.tensor([y])).backward()
    np.testing.assert_allclose(handcalc.ce_grad(z, y), zt.grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("seed", range(5))
def test_ce_grad_matches_finite_differences(seed):
    z, y = _random_case(seed)
    eps = 1e-6
    fd = np.empty_like(z)
    for i in range(z.size):
        up, down = z.copy(), z.copy()
        up[i] += eps
        down[i] -= eps
        fd[i] = (handcalc.nll(up, y) - handcalc.nll(down, y)) / (2 * eps)
    np.testing.assert_allclose(handcalc.ce_grad(z, y), fd, atol=1e-8)


def test_stable_at_magnitude_1000():
    z = [1000.0, 999.0, -1000.0, 0.0]
    p = handcalc.softmax(z)
    assert np.all(np.isfinite(p)) and p.sum() == pytest.approx(1.0)
    assert p[0] == pytest.approx(1 / (1 + math.exp(-1)), rel=1e-12)
    assert handcalc.nll(z, 0) == pytest.approx(math.log1p(math.exp(-1)), rel=1e-12)
    # The true loss of a target 2000 below the maximum is ~2000, not inf.
    assert handcalc.nll(z, 2) == pytest.approx(2000 + math.log1p(math.exp(-1)), rel=1e-12)
    assert handcalc.log_softmax(z)[2] == pytest.approx(-2000 - math.log1p(math.exp(-1)), rel=1e-12)
    g = handcalc.ce_grad(z, 2)
    assert np.all(np.isfinite(g)) and g.sum() == pytest.approx(0.0, abs=1e-12)
    assert handcalc.nll([-1000.0, -1000.0], 1) == pytest.approx(math.log(2), rel=1e-12)


logit_lists = st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=12)


@given(z=logit_lists, c=st.floats(-1000, 1000), data=st.data())
def test_properties(z, c, data):
    y = data.draw(st.integers(0, len(z) - 1))
    p = handcalc.softmax(z)
    assert np.all(p >= 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    # Adding a constant to every logit changes nothing.
    np.testing.assert_allclose(handcalc.softmax(np.array(z) + c), p, rtol=1e-9, atol=1e-12)
    assert handcalc.nll(np.array(z) + c, y) == pytest.approx(handcalc.nll(z, y), abs=1e-9)
    assert handcalc.nll(z, y) >= 0
    g = handcalc.ce_grad(z, y)
    assert g.sum() == pytest.approx(0.0, abs=1e-12)
    assert np.all(np.delete(g, y) >= 0) and g[y] <= 0
