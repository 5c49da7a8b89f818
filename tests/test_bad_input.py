"""Every bad input in the contract raises ValueError/TypeError whose message names the argument."""

import math

import numpy as np
import pytest
import torch
from _adversarial import raises

import lmcore.loss
from lmcore import (
    IGNORE_INDEX,
    PerplexityMeter,
    bits_per_byte,
    causal_lm_loss,
    chunked_causal_lm_loss,
    document_causal_mask,
    handcalc,
    labels_from_attention_mask,
    mask_cross_document_targets,
    pack_documents,
    shift_for_next_token,
)

LOGITS = torch.randn(2, 5, 7)
LABELS = torch.randint(0, 7, (2, 5))


# ---- causal_lm_loss and shift_for_next_token --------------------------------------------------


@pytest.mark.parametrize("fn", [causal_lm_loss, shift_for_next_token])
def test_logits_not_3d(fn):
    with raises(ValueError, "logits", "(N, L, V)", "(5, 7)"):
        fn(LOGITS[0], LABELS[0:1])


def test_logits_not_a_tensor_or_not_float():
    with raises(TypeError, "logits", "list"):
        causal_lm_loss(LOGITS.tolist(), LABELS)
    with raises(TypeError, "logits", "torch.int64"):
        causal_lm_loss(LABELS[..., None].expand(2, 5, 7), LABELS)


@pytest.mark.parametrize("fn", [causal_lm_loss, shift_for_next_token])
def test_label_shape_mismatch(fn):
    with raises(ValueError, "labels", "(2, 5)", "(2, 4)"):
        fn(LOGITS, LABELS[:, :4])
    with raises(ValueError, "labels", "(2, 5, 1)"):
        fn(LOGITS, LABELS[..., None])


@pytest.mark.parametrize("fn", [causal_lm_loss, shift_for_next_token])
def test_non_integer_labels(fn):
    with raises(TypeError, "labels", "torch.float32"):
        fn(LOGITS, LABELS.float())
    with raises(TypeError, "labels", "torch.bool"):
        fn(LOGITS, LABELS > 3)


@pytest.mark.parametrize("bad", [7, 100, -1, -5])
def test_label_outside_vocabulary(bad):
    labels = LABELS.clone()
    labels[1, 3] = bad
    with raises(ValueError, "labels", str(bad), "[0, 7)", "ignore_index"):
        causal_lm_loss(LOGITS, labels)


def test_label_outside_vocabulary_with_custom_ignore_index():
    labels = LABELS.clone()
    labels[0, 2] = IGNORE_INDEX  # -100 is not ignored when ignore_index=-1
    with raises(ValueError, "labels", "-100"):
        causal_lm_loss(LOGITS, labels, ignore_index=-1)


@pytest.mark.parametrize("fn", [causal_lm_loss, shift_for_next_token])
def test_sequence_too_short(fn):
    with raises(ValueError, "L >= 2", "L = 1"):
        fn(LOGITS[:, :1], LABELS[:, :1])


def test_mean_with_no_valid_target():
    labels = LABELS.clone()
    labels[:, 1:] = IGNORE_INDEX  # column 0 is never a target
    with raises(ValueError, "no valid target", "num_items"):
        causal_lm_loss(LOGITS, labels)


def test_bad_reduction_and_num_items():
    with raises(ValueError, "reduction", "'avg'"):
        causal_lm_loss(LOGITS, LABELS, reduction="avg")
    with raises(ValueError, "num_items", "'sum'"):
        causal_lm_loss(LOGITS, LABELS, reduction="sum", num_items=4)
    for bad in (0, -3, torch.tensor(0)):
        with raises(ValueError, "num_items"):
            causal_lm_loss(LOGITS, LABELS, num_items=bad)


def test_bad_label_smoothing():
    for bad in (-0.1, 1.5, math.nan):
        with raises(ValueError, "label_smoothing"):
            causal_lm_loss(LOGITS, LABELS, label_smoothing=bad)
    for bad in ("0.1", None, True):
        with raises(TypeError, "label_smoothing"):
            causal_lm_loss(LOGITS, LABELS, label_smoothing=bad)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_logits(value):
    logits = LOGITS.clone()
    logits[1, 2, 3] = value
    with raises(ValueError, "logits", "NaN or inf"):
        causal_lm_loss(logits, LABELS)


# ---- chunked_causal_lm_loss -------------------------------------------------------------------

H, W, Y = torch.randn(2, 5, 3), torch.randn(7, 3), torch.randint(0, 7, (2, 5))


@pytest.fixture(params=["dense", "chunked"])
def path(request, monkeypatch):
    if request.param == "chunked":
        monkeypatch.setattr(lmcore.loss, "_DENSE_MAX_ELEMENTS", 0)
    return request.param


def test_chunked_shape_and_type_errors(path):
    with raises(ValueError, "hidden", "(N, L, D)", "(5, 3)"):
        chunked_causal_lm_loss(H[0], W, Y)
    with raises(TypeError, "hidden", "torch.int64"):
        chunked_causal_lm_loss(Y[..., None].expand(2, 5, 3), W, Y)
    with raises(ValueError, "weight", "D = 3", "(7, 4)"):
        chunked_causal_lm_loss(H, torch.randn(7, 4), Y)
    with raises(ValueError, "weight", "(V, D)"):
        chunked_causal_lm_loss(H, W[None], Y)
    with raises(TypeError, "weight", "torch.float64"):
        chunked_causal_lm_loss(H, W.double(), Y)
    with raises(ValueError, "labels", "(2, 4)"):
        chunked_causal_lm_loss(H, W, Y[:, :4])
    with raises(TypeError, "labels", "torch.float32"):
        chunked_causal_lm_loss(H, W, Y.float())
    with raises(ValueError, "chunk_size", "0"):
        chunked_causal_lm_loss(H, W, Y, chunk_size=0)
    with raises(TypeError, "chunk_size", "2.5"):
        chunked_causal_lm_loss(H, W, Y, chunk_size=2.5)


def test_chunked_value_errors(path):
    labels = Y.clone()
    labels[0, 4] = 9
    with raises(ValueError, "labels", "9", "[0, 7)"):
        chunked_causal_lm_loss(H, W, labels)
    with raises(ValueError, "L >= 2"):
        chunked_causal_lm_loss(H[:, :1], W, Y[:, :1])
    with raises(ValueError, "no valid target"):
        chunked_causal_lm_loss(H, W, torch.full((2, 5), IGNORE_INDEX))
    with raises(ValueError, "reduction", "'avg'"):
        chunked_causal_lm_loss(H, W, Y, reduction="avg")
    hidden = H.clone()
    hidden[1, 1, 1] = math.nan
    with raises(ValueError, "NaN or inf"):
        chunked_causal_lm_loss(hidden, W, Y)


# ---- masks and packing ------------------------------------------------------------------------


def test_labels_from_attention_mask_errors():
    ids, mask = LABELS, torch.ones(2, 5, dtype=torch.long)
    with raises(TypeError, "input_ids", "torch.float32"):
        labels_from_attention_mask(ids.float(), mask)
    with raises(TypeError, "input_ids", "list"):
        labels_from_attention_mask(ids.tolist(), mask)
    with raises(ValueError, "attention_mask", "(2, 5)", "(2, 4)"):
        labels_from_attention_mask(ids, mask[:, :4])
    with raises(ValueError, "attention_mask", "2"):
        labels_from_attention_mask(ids, mask * 2)
    with raises(ValueError, "input_ids", "(N, L)"):
        labels_from_attention_mask(ids[0], mask[0])


def test_mask_cross_document_targets_errors():
    docs = torch.zeros(2, 5, dtype=torch.long)
    with raises(ValueError, "document_ids", "(2, 5)", "(2, 3)"):
        mask_cross_document_targets(LABELS, docs[:, :3])
    with raises(TypeError, "document_ids", "torch.float32"):
        mask_cross_document_targets(LABELS, docs.float())
    with raises(TypeError, "labels", "torch.float32"):
        mask_cross_document_targets(LABELS.float(), docs)


def test_document_causal_mask_errors():
    with raises(ValueError, "document_ids", "(N, L)", "(5,)"):
        document_causal_mask(torch.zeros(5, dtype=torch.long))
    with raises(TypeError, "document_ids", "torch.float32"):
        document_causal_mask(torch.zeros(2, 5))


def test_pack_documents_errors():
    docs = [[3, 4], [5]]
    with raises(ValueError, "pad_id", "eos_id"):
        pack_documents(docs, 4, eos_id=1, pad_id=1)
    with raises(ValueError, "block_size", "1"):
        pack_documents(docs, 1, eos_id=1, pad_id=0)
    with raises(ValueError, "block_size", "0"):
        pack_documents(docs, 0, eos_id=1, pad_id=0)
    with raises(TypeError, "block_size", "'4'"):
        pack_documents(docs, "4", eos_id=1, pad_id=0)
    with raises(TypeError, "documents", "list"):
        pack_documents([], 4, eos_id=1, pad_id=0)
    with raises(TypeError, "documents", "Tensor"):
        pack_documents(torch.tensor(docs[:1]), 4, eos_id=1, pad_id=0)
    with raises(ValueError, "documents[1]", "empty"):
        pack_documents([[3], []], 4, eos_id=1, pad_id=0)
    with raises(TypeError, "documents[0]", "-2"):
        pack_documents([[3, -2]], 4, eos_id=1, pad_id=0)
    with raises(TypeError, "documents[1]", "2.5"):
        pack_documents([[3], [2.5]], 4, eos_id=1, pad_id=0)
    with raises(TypeError, "eos_id", "None"):
        pack_documents(docs, 4, eos_id=None, pad_id=0)
    with raises(ValueError, "pad_id", "-1"):
        pack_documents(docs, 4, eos_id=1, pad_id=-1)
    # numpy token ids are fine
    batch = pack_documents([np.array([3, 4]), [np.int64(5)]], 4, eos_id=1, pad_id=0)
    assert batch.input_ids.tolist() == [[3, 4, 1, 5], [1, 0, 0, 0]]


# ---- handcalc ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [handcalc.softmax, handcalc.log_softmax, handcalc.logsumexp])
def test_handcalc_bad_logits(fn):
    with raises(ValueError, "z", "shape (0,)"):
        fn([])
    with raises(ValueError, "z", "(2, 2)"):
        fn([[1.0, 2.0], [3.0, 4.0]])
    with raises(TypeError, "z", "'a'"):
        fn(["a", 1.0])
    with raises(ValueError, "z", "finite", "nan"):
        fn([1.0, math.nan])


@pytest.mark.parametrize("fn", [handcalc.nll, handcalc.ce_grad])
def test_handcalc_bad_target(fn):
    with raises(ValueError, "y", "[0, 3)", "3"):
        fn([2.0, 1.0, 0.0], 3)
    with raises(ValueError, "y", "-1"):
        fn([2.0, 1.0, 0.0], -1)
    with raises(TypeError, "y", "1.0"):
        fn([2.0, 1.0, 0.0], 1.0)
    with raises(TypeError, "y", "True"):
        fn([2.0, 1.0, 0.0], True)
    with raises(ValueError, "z", "inf"):
        fn([math.inf, 0.0], 0)


# ---- perplexity -------------------------------------------------------------------------------


def test_perplexity_errors():
    meter = PerplexityMeter()
    for prop in ("mean_nll", "perplexity", "bits_per_token"):
        with raises(ValueError, "no tokens"):
            getattr(meter, prop)
    with raises(ValueError, "n_tokens", "-1"):
        meter.update_sums(1.0, -1)
    with raises(TypeError, "n_tokens", "2.5"):
        meter.update_sums(1.0, 2.5)
    with raises(ValueError, "total_nll", "nan"):
        meter.update_sums(math.nan, 3)
    with raises(ValueError, "total_nll", "-1.0"):
        meter.update_sums(-1.0, 3)
    with raises(ValueError, "logits", "(N, L, V)"):
        meter.update(LOGITS[0], LABELS)
    with raises(ValueError, "n_bytes", "0"):
        bits_per_byte(10.0, 0)
    assert meter.n_tokens == 0  # failed updates leave the meter unchanged
