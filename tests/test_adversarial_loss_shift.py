"""Adversarial inputs for the loss, the shift and the masks: every bad input is refused with a
TypeError/ValueError naming the argument; unusual but valid inputs give the reference value."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _adversarial import BAD_ID_DTYPES, GOOD_ID_DTYPES, raises
from hypothesis import given
from hypothesis import strategies as st

import lmcore.loss
from lmcore import (
    IGNORE_INDEX,
    PerplexityMeter,
    causal_lm_loss,
    chunked_causal_lm_loss,
    document_causal_mask,
    labels_from_attention_mask,
    mask_cross_document_targets,
    num_valid_targets,
    shift_for_next_token,
)

g = torch.Generator().manual_seed(0)
LOGITS = torch.randn(2, 5, 7, generator=g)
LABELS = torch.randint(0, 7, (2, 5), generator=g)
LABELS[0, 2] = IGNORE_INDEX
H, W = torch.randn(2, 5, 3, generator=g), torch.randn(7, 3, generator=g)
DOCS = torch.tensor([[0, 0, 1, 1, 1], [2, 2, 2, 3, 3]])


@pytest.fixture(params=["dense", "chunked"])
def chunk_path(request, monkeypatch):
    if request.param == "chunked":
        monkeypatch.setattr(lmcore.loss, "_DENSE_MAX_ELEMENTS", 0)
    return request.param


# Every public entry where labels or ids enter, as fn(ids_of_some_dtype) -> anything.
ENTRIES = {
    "causal_lm_loss": ("labels", lambda y: causal_lm_loss(LOGITS, y)),
    "causal_lm_loss/sum": ("labels", lambda y: causal_lm_loss(LOGITS, y, reduction="sum")),
    "chunked_causal_lm_loss": ("labels", lambda y: chunked_causal_lm_loss(H, W, y)),
    "chunked_causal_lm_loss/chunked": ("labels", lambda y: _chunked_forced(y)),
    "shift_for_next_token": ("labels", lambda y: shift_for_next_token(LOGITS, y)),
    "num_valid_targets": ("labels", lambda y: num_valid_targets(y)),
    "mask_cross_document_targets/labels": ("labels", lambda y: mask_cross_document_targets(y, DOCS)),
    "mask_cross_document_targets/document_ids": (
        "document_ids",
        lambda y: mask_cross_document_targets(LABELS, y),
    ),
    "labels_from_attention_mask": ("input_ids", lambda y: labels_from_attention_mask(y, torch.ones(2, 5))),
    "document_causal_mask": ("document_ids", lambda y: document_causal_mask(y)),
    "PerplexityMeter.update": ("labels", lambda y: PerplexityMeter().update(LOGITS, y)),
}


def _chunked_forced(y):
    old = lmcore.loss._DENSE_MAX_ELEMENTS
    lmcore.loss._DENSE_MAX_ELEMENTS = 0
    try:
        return chunked_causal_lm_loss(H, W, y)
    finally:
        lmcore.loss._DENSE_MAX_ELEMENTS = old


def _values_for(entry):
    """Values that fit every dtype (no -100 for unsigned/small ones: they must be refused anyway)."""
    return DOCS if "document" in entry else LABELS.clamp(min=0)


@pytest.mark.parametrize("dtype", BAD_ID_DTYPES, ids=str)
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_label_and_id_dtypes_are_refused(entry, dtype):
    name, fn = ENTRIES[entry]
    with raises(TypeError, name, str(dtype), f"{name}.long()"):
        fn(_values_for(entry).to(dtype))


@pytest.mark.parametrize("dtype", GOOD_ID_DTYPES, ids=str)
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_int32_and_int64_ids_give_the_same_answer(entry, dtype):
    _, fn = ENTRIES[entry]
    a, b = fn(_values_for(entry).to(dtype)), fn(_values_for(entry).long())
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        x, y = torch.as_tensor(x), torch.as_tensor(y)
        assert torch.equal(x if x.is_floating_point() or x.dtype == torch.bool else x.long(), y)


BAD_IGNORE = [None, 1.5, True, "x", [IGNORE_INDEX], torch.tensor([-100, -100]), float("nan")]


@pytest.mark.parametrize("bad", BAD_IGNORE, ids=repr)
@pytest.mark.parametrize(
    "fn",
    [
        lambda ii: causal_lm_loss(LOGITS, LABELS, ignore_index=ii),
        lambda ii: chunked_causal_lm_loss(H, W, LABELS, ignore_index=ii),
        lambda ii: _chunked_forced_ignore(ii),
        lambda ii: num_valid_targets(LABELS, ignore_index=ii),
        lambda ii: PerplexityMeter(ignore_index=ii),
    ],
    ids=["loss", "chunked", "chunked-path", "num_valid_targets", "PerplexityMeter"],
)
def test_ignore_index_must_be_an_int(fn, bad):
    with raises(TypeError, "ignore_index"):
        fn(bad)


def _chunked_forced_ignore(ii):
    old = lmcore.loss._DENSE_MAX_ELEMENTS
    lmcore.loss._DENSE_MAX_ELEMENTS = 0
    try:
        return chunked_causal_lm_loss(H, W, LABELS, ignore_index=ii)
    finally:
        lmcore.loss._DENSE_MAX_ELEMENTS = old


def test_ignore_index_numpy_int_and_0d_int_tensor_are_ints():
    ref = causal_lm_loss(LOGITS, LABELS)
    assert torch.equal(causal_lm_loss(LOGITS, LABELS, ignore_index=np.int64(-100)), ref)
    assert torch.equal(causal_lm_loss(LOGITS, LABELS, ignore_index=torch.tensor(-100)), ref)
    assert num_valid_targets(LABELS, np.int32(-100)) == num_valid_targets(LABELS)


N_VALID = num_valid_targets(LABELS)  # 7
BAD_NUM_ITEMS_TYPE = [
    True,
    False,
    "5",
    2.5,
    7.0,
    math.inf,
    math.nan,
    -math.inf,
    [7],
    torch.tensor(7.0),
    torch.tensor([7, 7]),
    torch.tensor(True),
]
BAD_NUM_ITEMS_VALUE = [0, -1, -7, N_VALID - 1, torch.tensor(0), np.int64(-3)]


@pytest.mark.parametrize("bad", BAD_NUM_ITEMS_TYPE, ids=repr)
def test_num_items_must_be_an_int(bad, chunk_path):
    for fn in (
        lambda: causal_lm_loss(LOGITS, LABELS, num_items=bad),
        lambda: chunked_causal_lm_loss(H, W, LABELS, num_items=bad),
    ):
        with raises(TypeError, "num_items"):
            fn()


@pytest.mark.parametrize("bad", BAD_NUM_ITEMS_VALUE, ids=repr)
def test_num_items_must_count_at_least_this_batch(bad, chunk_path):
    for fn in (
        lambda: causal_lm_loss(LOGITS, LABELS, num_items=bad),
        lambda: chunked_causal_lm_loss(H, W, LABELS, num_items=bad),
    ):
        with raises(ValueError, "num_items", str(int(bad))):
            fn()


@pytest.mark.parametrize(
    "good",
    [N_VALID, 3 * N_VALID, np.int64(20), torch.tensor(20), torch.tensor(20, dtype=torch.int32)],
    ids=repr,
)
def test_num_items_valid_forms_divide_the_sum(good, chunk_path):
    n = int(good)
    ref = (
        F.cross_entropy(LOGITS[:, :-1].reshape(-1, 7).double(), LABELS[:, 1:].reshape(-1), reduction="sum")
        / n
    )
    got = causal_lm_loss(LOGITS, LABELS, num_items=good)
    assert float(got) == pytest.approx(float(ref), rel=1e-5)
    got = chunked_causal_lm_loss(H, W, LABELS, num_items=good)
    ref = (
        F.cross_entropy((H @ W.T)[:, :-1].reshape(-1, 7).double(), LABELS[:, 1:].reshape(-1), reduction="sum")
        / n
    )
    assert float(got) == pytest.approx(float(ref), rel=1e-5)


@pytest.mark.parametrize("bad", [None, "MEAN", "avg", 1, True, ["mean"]], ids=repr)
def test_reduction_must_be_a_choice(bad, chunk_path):
    for fn in (
        lambda: causal_lm_loss(LOGITS, LABELS, reduction=bad),
        lambda: chunked_causal_lm_loss(H, W, LABELS, reduction=bad),
    ):
        with pytest.raises((TypeError, ValueError), match="reduction"):
            fn()


def test_zero_vocabulary_is_refused():
    with raises(ValueError, "logits", "V"):
        causal_lm_loss(torch.zeros(2, 5, 0), torch.full((2, 5), IGNORE_INDEX), reduction="sum")
    with raises(ValueError, "weight", "V"):
        chunked_causal_lm_loss(
            torch.zeros(2, 5, 3), torch.zeros(0, 3), torch.full((2, 5), IGNORE_INDEX), reduction="sum"
        )


def test_empty_batch_sum_is_zero_and_mean_is_refused():
    logits, labels = torch.zeros(0, 5, 7), torch.zeros(0, 5, dtype=torch.long)
    assert float(causal_lm_loss(logits, labels, reduction="sum")) == 0.0
    with raises(ValueError, "no valid target"):
        causal_lm_loss(logits, labels)


def test_one_token_vocabulary_loss_is_zero():
    assert float(causal_lm_loss(torch.randn(2, 4, 1), torch.zeros(2, 4, dtype=torch.long))) == 0.0


@pytest.mark.parametrize("bad", [[[1, 1, 1, 1, 1]] * 2, np.ones((2, 5))], ids=["list", "numpy"])
def test_attention_mask_must_be_a_tensor(bad):
    with raises(TypeError, "attention_mask"):
        labels_from_attention_mask(LABELS.clamp(min=0), bad)


@pytest.mark.parametrize("value", [0.5, math.nan, 2, -1], ids=repr)
def test_attention_mask_values_other_than_0_1(value):
    mask = torch.ones(2, 5)
    mask[1, 1] = value
    with raises(ValueError, "attention_mask"):
        labels_from_attention_mask(LABELS.clamp(min=0), mask)


@given(
    N=st.integers(1, 3),
    L=st.integers(2, 6),
    V=st.integers(1, 9),
    seed=st.integers(0, 2**16),
    p_ignore=st.sampled_from([0.0, 0.3, 0.9]),
    ignore_index=st.sampled_from([-100, -1, -7]),
    dtype=st.sampled_from(GOOD_ID_DTYPES),
    scale=st.sampled_from([1.0, 30.0, 1e4]),
)
def test_loss_matches_float64_reference_over_the_valid_space(
    N, L, V, seed, p_ignore, ignore_index, dtype, scale
):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(N, L, V, generator=gen) * scale
    labels = torch.randint(0, V, (N, L), generator=gen)
    labels[torch.rand(N, L, generator=gen) < p_ignore] = ignore_index
    labels[0, 1] = 0
    labels = labels.to(dtype)
    ref = F.cross_entropy(
        logits[:, :-1].reshape(-1, V).double(),
        labels[:, 1:].reshape(-1).long(),
        ignore_index=ignore_index,
        reduction="sum",
    )
    n = int((labels[:, 1:] != ignore_index).sum())
    got_sum = causal_lm_loss(logits, labels, ignore_index=ignore_index, reduction="sum")
    got_mean = causal_lm_loss(logits, labels, ignore_index=ignore_index)
    assert float(got_sum) == pytest.approx(float(ref), rel=1e-5, abs=1e-4)
    assert float(got_mean) == pytest.approx(float(ref) / n, rel=1e-5, abs=1e-4)
    assert num_valid_targets(labels, ignore_index) == n


@given(
    bad=st.one_of(st.integers(-(10**6), -101), st.integers(-99, -1), st.integers(7, 10**6)),
    where=st.tuples(st.integers(0, 1), st.integers(1, 4)),
)
def test_any_label_outside_the_vocabulary_is_named(bad, where):
    labels = LABELS.clone()
    labels[where] = bad
    with raises(ValueError, "labels", str(bad), "[0, 7)"):
        causal_lm_loss(LOGITS, labels)
    old = lmcore.loss._DENSE_MAX_ELEMENTS
    lmcore.loss._DENSE_MAX_ELEMENTS = 0
    try:
        with raises(ValueError, "labels", str(bad)):
            chunked_causal_lm_loss(H, W, labels)
    finally:
        lmcore.loss._DENSE_MAX_ELEMENTS = old
