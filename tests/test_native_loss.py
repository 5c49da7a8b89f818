"""lmcore's chunked loss against PyTorch's native one (``F.linear_cross_entropy``, new in 2.13).

``chunked_causal_lm_loss(hidden, weight, labels)`` shifts inside; ``F.linear_cross_entropy`` does
not, so it gets the shifted rows: ``hidden[:, :-1]`` (sliced inside autograd, so its gradient has
hidden's shape, 0 at the last position) and ``labels[:, 1:]``. Both are compared in value and in
the gradients of hidden and weight, with each other and with float64 autograd of
``F.cross_entropy`` (the independent reference), on seeded random shapes with about a quarter of
the targets -100, on lmcore's dense path, its chunked path (forced with tiny chunks, and reached
for real) and PyTorch's reference path (``options=None``) and chunked options.

Tolerances: float32: rtol 1e-5, atol 1e-6 (the last digits of a float32 sum). bfloat16 inputs
(lmcore computes in float32 and returns a float32 loss; PyTorch returns a bfloat16 loss and its
reference path forms bfloat16 logits): the loss within 2% relative, each gradient within 2% of
its largest entry (bfloat16 keeps 8 significant bits: one rounding is up to 0.4%).
Below torch 2.13 every test here skips.
"""

import pytest
import torch
import torch.nn.functional as F
from _reference import make

import lmcore.loss
from lmcore import IGNORE_INDEX, chunked_causal_lm_loss

NATIVE = hasattr(F, "linear_cross_entropy") and hasattr(torch.nn, "LinearCrossEntropyOptions")
pytestmark = pytest.mark.skipif(
    not NATIVE, reason=f"F.linear_cross_entropy is new in torch 2.13; this is torch {torch.__version__}"
)

FP32_TOL = {"rtol": 1e-5, "atol": 1e-6}
BF16_LOSS_RTOL = 2e-2
BF16_GRAD_FRAC = 2e-2


def shapes(n=6, seed=0):
    """n seeded random (N, L, D, V), small enough for the CPU, V up to a few thousand."""
    g = torch.Generator().manual_seed(seed)
    draw = lambda lo, hi: int(torch.randint(lo, hi + 1, (), generator=g))
    return [(draw(1, 4), draw(2, 40), draw(4, 48), draw(3, 3000)) for _ in range(n)]


def native_options(kind):
    """PyTorch's paths: the reference (full logits) and three chunked configurations."""
    if kind == "reference":
        return None
    if kind == "auto":
        return torch.nn.LinearCrossEntropyOptions()
    if kind == "rows5":
        return torch.nn.LinearCrossEntropyOptions(batch_chunk_size=5, chunking_method=None)
    return torch.nn.LinearCrossEntropyOptions(chunking_method="aspect_ratio:2")


def lmcore_loss(hidden, weight, labels, reduction="mean", **kw):
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    loss = chunked_causal_lm_loss(h, w, labels, reduction=reduction, **kw)
    loss.backward()
    return loss.detach(), h.grad, w.grad


def native_loss(hidden, weight, labels, kind, reduction="mean"):
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    D = h.shape[-1]
    loss = F.linear_cross_entropy(
        h[:, :-1].reshape(-1, D),  # the shift lmcore does inside
        w,
        labels[:, 1:].reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction=reduction,
        options=native_options(kind),
    )
    loss.backward()
    return loss.detach(), h.grad, w.grad


def float64_loss(hidden, weight, labels, reduction="mean"):
    h = hidden.detach().double().requires_grad_()
    w = weight.detach().double().requires_grad_()
    z = (h @ w.T)[:, :-1].reshape(-1, w.shape[0])
    loss = F.cross_entropy(z, labels[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX, reduction=reduction)
    loss.backward()
    return loss.detach(), h.grad, w.grad


def assert_fp32_close(got, ref, who):
    for a, b, name in zip(got, ref, ("loss", "grad hidden", "grad weight")):
        assert a.dtype == torch.float32, (who, name, a.dtype)
        torch.testing.assert_close(
            a.double(), b.double(), **FP32_TOL, msg=lambda m, n=name: f"{who} {n}: {m}"
        )


def assert_bf16_close(got, ref, who):
    (la, ga_h, ga_w), (lb, gb_h, gb_w) = got, ref
    rel = abs(float(la) - float(lb)) / abs(float(lb))
    assert rel <= BF16_LOSS_RTOL, f"{who} loss: {float(la):.5f} vs {float(lb):.5f}, rel {rel:.2e}"
    for a, b, name in ((ga_h, gb_h, "grad hidden"), (ga_w, gb_w, "grad weight")):
        assert a.dtype == torch.bfloat16, (who, name, a.dtype)
        frac = float((a.double() - b.double()).abs().max() / b.double().abs().max())
        assert frac <= BF16_GRAD_FRAC, (
            f"{who} {name}: max |Δ| is {frac:.2e} of max |g| (allowed {BF16_GRAD_FRAC})"
        )


LMCORE_PATHS = {"dense": {}, "chunks of 1 row": {"chunk_size": 1}, "chunks of 7 rows": {"chunk_size": 7}}


@pytest.fixture(params=list(LMCORE_PATHS))
def lmcore_path(request, monkeypatch):
    """lmcore's dense path, or its chunked path forced even for small shapes."""
    if request.param != "dense":
        monkeypatch.setattr(lmcore.loss, "_DENSE_MAX_ELEMENTS", 0)
    return LMCORE_PATHS[request.param]


@pytest.mark.parametrize("kind", ["reference", "auto", "rows5", "aspect_ratio:2"])
@pytest.mark.parametrize("seed, shape", list(enumerate(shapes())), ids=str)
def test_fp32_value_and_gradients_equal_native(seed, shape, kind, lmcore_path):
    hidden, weight, labels = make(seed, *shape)
    ref = float64_loss(hidden, weight, labels)
    ours = lmcore_loss(hidden, weight, labels, **lmcore_path)
    theirs = native_loss(hidden, weight, labels, kind)
    assert_fp32_close(ours, ref, "lmcore vs float64")
    assert_fp32_close(theirs, ref, f"native {kind} vs float64")
    assert_fp32_close(ours, theirs, f"lmcore vs native {kind}")


@pytest.mark.parametrize("kind", ["reference", "rows5"])
def test_fp32_sum_reduction_equals_native(kind, monkeypatch):
    monkeypatch.setattr(lmcore.loss, "_DENSE_MAX_ELEMENTS", 0)
    hidden, weight, labels = make(11, 3, 17, 24, 500)
    ours = lmcore_loss(hidden, weight, labels, reduction="sum", chunk_size=4)
    theirs = native_loss(hidden, weight, labels, kind, reduction="sum")
    ref = float64_loss(hidden, weight, labels, reduction="sum")
    assert_fp32_close(ours, ref, "lmcore vs float64")
    assert_fp32_close(ours, theirs, f"lmcore vs native {kind}")


def test_fp32_real_chunked_path_equals_native():
    """A shape past lmcore's dense limit (4 x 128 x 9,000 = 4.6M logits), nothing patched."""
    hidden, weight, labels = make(7, 4, 129, 32, 9000)
    assert 4 * 128 * 9000 > lmcore.loss._DENSE_MAX_ELEMENTS
    ref = float64_loss(hidden, weight, labels)
    for kind in ("reference", "auto"):
        theirs = native_loss(hidden, weight, labels, kind)
        assert_fp32_close(theirs, ref, f"native {kind} vs float64")
        assert_fp32_close(lmcore_loss(hidden, weight, labels), theirs, f"lmcore vs native {kind}")


@pytest.mark.parametrize("kind", ["reference", "rows5"])
@pytest.mark.parametrize("seed, shape", list(enumerate(shapes(3, seed=1))), ids=str)
def test_bf16_value_and_gradients_equal_native(seed, shape, kind, lmcore_path):
    hidden, weight, labels = make(seed, *shape, dtype=torch.bfloat16)
    ref = float64_loss(hidden, weight, labels)  # the same bf16 numbers, computed in float64
    ours = lmcore_loss(hidden, weight, labels, **lmcore_path)
    theirs = native_loss(hidden, weight, labels, kind)
    assert ours[0].dtype == torch.float32 and theirs[0].dtype == torch.bfloat16
    assert_bf16_close(ours, ref, "lmcore vs float64")
    assert_bf16_close(theirs, ref, f"native {kind} vs float64")
    assert_bf16_close(ours, theirs, f"lmcore vs native {kind}")


def test_a_wrong_shift_is_caught():
    """The comparison can fail: native on the unshifted rows differs from lmcore's loss."""
    hidden, weight, labels = make(3, 2, 12, 16, 50)
    ours = lmcore_loss(hidden, weight, labels)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    unshifted = F.linear_cross_entropy(h[:, 1:].reshape(-1, 16), w, labels[:, 1:].reshape(-1))
    with pytest.raises(AssertionError):
        torch.testing.assert_close(ours[0], unshifted.detach(), **FP32_TOL)
