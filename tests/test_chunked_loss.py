"""chunked_causal_lm_loss == causal_lm_loss(hidden @ weight.T) in value and gradients, checked
against F.cross_entropy in float64, on the dense fallback and the real chunked path."""

import pytest
import torch
import torch.nn.functional as F
from _reference import make
from hypothesis import given
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import lmcore.loss
from lmcore import IGNORE_INDEX, chunked_causal_lm_loss


def reference(hidden, weight, labels, reduction="mean", num_items=None, grad_scale=1.0):
    """Value and gradients of the shifted cross-entropy, all in float64 autograd."""
    h = hidden.detach().double().requires_grad_()
    w = weight.detach().double().requires_grad_()
    z = (h @ w.T)[:, :-1].reshape(-1, w.shape[0])
    y = labels[:, 1:].reshape(-1)
    total = F.cross_entropy(z, y, ignore_index=IGNORE_INDEX, reduction="sum")
    if reduction == "mean":
        total = total / (num_items if num_items is not None else int((y != IGNORE_INDEX).sum()))
    (total * grad_scale).backward()
    return total.detach(), h.grad, w.grad


def run(hidden, weight, labels, grad_scale=1.0, **kw):
    h = hidden.clone().requires_grad_()
    w = weight.clone().requires_grad_()
    loss = chunked_causal_lm_loss(h, w, labels, **kw)
    (loss * grad_scale).backward()
    return loss, h.grad, w.grad


def assert_matches(got, ref, rtol=1e-5, atol=1e-6):
    for a, b, name in zip(got, ref, ("loss", "grad hidden", "grad weight")):
        assert a is not None, name
        torch.testing.assert_close(
            a.double(), b, rtol=rtol, atol=atol, msg=lambda m, name=name: f"{name}: {m}"
        )


@pytest.fixture
def force_chunks(monkeypatch):
    """Take the chunked path even for small shapes."""
    monkeypatch.setattr(lmcore.loss, "_DENSE_MAX_ELEMENTS", 0)


@given(
    N=st.integers(1, 3),
    L=st.integers(2, 9),
    D=st.integers(1, 6),
    V=st.integers(2, 17),
    chunk=st.integers(1, 30),
    seed=st.integers(0, 999),
    reduction=st.sampled_from(["mean", "sum"]),
)
def test_chunked_equals_float64_reference(N, L, D, V, chunk, seed, reduction):
    hidden, weight, labels = make(seed, N, L, D, V)
    ref = reference(hidden, weight, labels, reduction)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lmcore.loss, "_DENSE_MAX_ELEMENTS", 0)
        assert_matches(run(hidden, weight, labels, chunk_size=chunk, reduction=reduction), ref)
    # Same shapes through the dense fallback.
    assert_matches(run(hidden, weight, labels, chunk_size=chunk, reduction=reduction), ref)


@pytest.mark.parametrize("chunk", [1, 7, 64, None])
def test_num_items_and_upstream_gradient(force_chunks, chunk):
    hidden, weight, labels = make(1, 3, 11, 5, 13)
    ref = reference(hidden, weight, labels, num_items=50, grad_scale=2.5)
    assert_matches(run(hidden, weight, labels, chunk_size=chunk, num_items=50, grad_scale=2.5), ref)


def test_reduction_none_matches(force_chunks):
    hidden, weight, labels = make(2, 2, 6, 4, 9)
    got = chunked_causal_lm_loss(hidden, weight, labels, reduction="none")
    z = (hidden.double() @ weight.double().T)[:, :-1].reshape(-1, 9)
    ref = F.cross_entropy(z, labels[:, 1:].reshape(-1), reduction="none").view(2, 5)
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-6)


def test_real_chunked_path_without_patching():
    # N * (L - 1) * V = 2 * 64 * 33000 > 4.2M logits: above the dense threshold.
    N, L, D, V = 2, 65, 8, 33_000
    assert N * (L - 1) * V > lmcore.loss._DENSE_MAX_ELEMENTS
    hidden, weight, labels = make(3, N, L, D, V, p_ignore=0.1)
    ref = reference(hidden, weight, labels)
    for chunk in (None, 37):
        assert_matches(run(hidden, weight, labels, chunk_size=chunk), ref, rtol=1e-5, atol=1e-7)


class _LargestTensor(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_never_holds_the_whole_logits_or_their_gradient():
    N, L, D, V = 2, 65, 4, 33_000
    hidden, weight, labels = make(4, N, L, D, V)
    h, w = hidden.requires_grad_(), weight.requires_grad_()
    with _LargestTensor() as mode:
        chunked_causal_lm_loss(h, w, labels, chunk_size=16).backward()
    assert h.grad is not None and w.grad is not None
    assert 16 * V <= mode.largest < N * (L - 1) * V / 4
    with _LargestTensor() as dense:  # the probe does see (N, L, V)
        F.cross_entropy((h @ w.T).view(-1, V), labels.view(-1)).backward()
    assert dense.largest >= N * L * V


@pytest.mark.parametrize("path", ["dense", "chunked"])
def test_bf16_inputs(path, monkeypatch):
    if path == "chunked":
        monkeypatch.setattr(lmcore.loss, "_DENSE_MAX_ELEMENTS", 0)
    hidden, weight, labels = make(5, 4, 33, 16, 300, dtype=torch.bfloat16, p_ignore=0.1)
    loss, gh, gw = run(hidden, weight, labels, chunk_size=10)
    assert loss.dtype == torch.float32
    assert gh.dtype == gw.dtype == torch.bfloat16
    ref = reference(hidden, weight, labels)  # float64 on the same bf16 values
    # The chunked path forms the logits in float32; the dense path rounds them to bf16 first.
    rtol = 1e-5 if path == "chunked" else 1e-2
    torch.testing.assert_close(loss.double(), ref[0], rtol=rtol, atol=0)
    for got, want in ((gh, ref[1]), (gw, ref[2])):  # bf16 gradients: ~3 digits
        torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=1e-2 * want.abs().max())


def test_no_grad_and_frozen_parameters(force_chunks):
    hidden, weight, labels = make(6, 2, 10, 5, 12)
    ref = reference(hidden, weight, labels)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    with torch.no_grad():
        loss = chunked_causal_lm_loss(h, w, labels, chunk_size=3)
    assert not loss.requires_grad
    torch.testing.assert_close(loss.double(), ref[0], rtol=1e-5, atol=1e-6)
    # Frozen output layer: only hidden gets a gradient (and vice versa).
    h = hidden.clone().requires_grad_()
    chunked_causal_lm_loss(h, weight, labels, chunk_size=4).backward()
    torch.testing.assert_close(h.grad.double(), ref[1], rtol=1e-5, atol=1e-6)
    w = weight.clone().requires_grad_()
    chunked_causal_lm_loss(hidden, w, labels, chunk_size=4).backward()
    torch.testing.assert_close(w.grad.double(), ref[2], rtol=1e-5, atol=1e-6)


def test_all_targets_ignored_with_sum(force_chunks):
    hidden, weight, _ = make(7, 2, 5, 3, 7)
    labels = torch.full((2, 5), IGNORE_INDEX)
    loss, gh, gw = run(hidden, weight, labels, reduction="sum", chunk_size=2)
    assert float(loss.detach()) == 0.0 and not gh.any() and not gw.any()


def test_float64_and_custom_ignore_index(force_chunks):
    hidden, weight, labels = make(8, 3, 7, 4, 10, dtype=torch.float64)
    ref = reference(hidden, weight, labels)
    alt = labels.clone()
    alt[alt == IGNORE_INDEX] = -1
    loss, gh, gw = run(hidden, weight, alt.int(), chunk_size=5, ignore_index=-1)
    assert loss.dtype == torch.float64
    assert_matches((loss, gh, gw), ref, rtol=1e-12, atol=1e-14)


def test_large_logits_stay_finite(force_chunks):
    hidden, weight, labels = make(9, 2, 6, 3, 8, dtype=torch.float64)
    weight = weight * 3000  # logits of magnitude ~1000s
    loss, gh, gw = run(hidden, weight, labels, chunk_size=4)
    assert torch.isfinite(loss) and bool(torch.isfinite(gh).all() and torch.isfinite(gw).all())
    assert_matches((loss, gh, gw), reference(hidden, weight, labels), rtol=1e-10, atol=1e-9)
