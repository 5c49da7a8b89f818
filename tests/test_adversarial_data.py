"""Adversarial inputs for data and packing: both packing policies share one standard, token arrays
are ids (never floats or bools), and batch/corpus settings are checked by type and value."""

import functools
import math

import numpy as np
import pytest
import torch
from _adversarial import case_id, raises
from hypothesis import given
from hypothesis import strategies as st

from lmcore import IGNORE_INDEX, pack_documents
from lmcore.data import (
    ByteTokenizer,
    ChatTokenizer,
    DocumentCorpus,
    TextCorpus,
    random_windows,
    train_val_split,
    unigram_entropy,
)

whole = functools.partial(pack_documents, policy="whole")
PACKERS = {"pack_documents": pack_documents, "pack_documents(policy='whole')": whole}
DOCS = [[3, 4], [5]]

# (documents, block_size, eos_id, pad_id) -> (exception, argument named in the message)
BAD_PACKING = [
    ([], 4, 1, 0, TypeError, "documents"),
    ((), 4, 1, 0, TypeError, "documents"),
    (None, 4, 1, 0, TypeError, "documents"),
    ("abc", 4, 1, 0, TypeError, "documents[0]"),
    (iter(DOCS), 4, 1, 0, TypeError, "documents"),
    (torch.tensor([[3, 4]]), 4, 1, 0, TypeError, "documents"),
    ([[3], []], 4, 1, 0, ValueError, "documents[1]"),
    ([[3, IGNORE_INDEX]], 4, 1, 0, TypeError, "documents[0]"),
    ([[3, -1]], 4, 1, 0, TypeError, "documents[0]"),
    ([[3, 2.5]], 4, 1, 0, TypeError, "documents[0]"),
    ([[3, 2.0]], 4, 1, 0, TypeError, "documents[0]"),
    ([[3], [True]], 4, 1, 0, TypeError, "documents[1]"),
    ([[3], ["4"]], 4, 1, 0, TypeError, "documents[1]"),
    ([[3], [None]], 4, 1, 0, TypeError, "documents[1]"),
    ([[3], [[4]]], 4, 1, 0, TypeError, "documents[1]"),
    ([torch.tensor([3.0, 4.0])], 4, 1, 0, TypeError, "documents[0]"),
    ([torch.tensor([True])], 4, 1, 0, TypeError, "documents[0]"),
    ([np.array([3.0])], 4, 1, 0, TypeError, "documents[0]"),
    ([[3, 2**63]], 4, 1, 0, ValueError, "documents[0]"),
    (5, 4, 1, 0, TypeError, "documents"),
    ([3, 4, 5], 4, 1, 0, TypeError, "documents[0]"),  # one document, not wrapped
    ([torch.tensor([[3, 4]])], 4, 1, 0, TypeError, "documents[0]"),
    ([torch.tensor(3)], 4, 1, 0, TypeError, "documents[0]"),
    (DOCS, 4, IGNORE_INDEX, 0, ValueError, "eos_id"),
    (DOCS, 4, -1, 0, ValueError, "eos_id"),
    (DOCS, 4, 1, IGNORE_INDEX, ValueError, "pad_id"),
    (DOCS, 4, 1, 1, ValueError, "pad_id"),
    (DOCS, 4, None, 0, TypeError, "eos_id"),
    (DOCS, 4, True, 0, TypeError, "eos_id"),
    (DOCS, 4, 1.0, 0, TypeError, "eos_id"),
    (DOCS, 4, 1, "0", TypeError, "pad_id"),
    (DOCS, 4, 1, None, TypeError, "pad_id"),
    (DOCS, 4, 2**63, 0, ValueError, "eos_id"),
    (DOCS, 1, 1, 0, ValueError, "block_size"),
    (DOCS, 0, 1, 0, ValueError, "block_size"),
    (DOCS, -4, 1, 0, ValueError, "block_size"),
    (DOCS, "4", 1, 0, TypeError, "block_size"),
    (DOCS, 4.0, 1, 0, TypeError, "block_size"),
    (DOCS, True, 1, 0, TypeError, "block_size"),
    (DOCS, None, 1, 0, TypeError, "block_size"),
]


@pytest.mark.parametrize("docs,block,eos,pad,exc,name", BAD_PACKING, ids=case_id)
@pytest.mark.parametrize("packer", list(PACKERS))
def test_both_packers_refuse_alike(packer, docs, block, eos, pad, exc, name):
    with raises(exc, name):
        PACKERS[packer](docs, block, eos_id=eos, pad_id=pad)


@pytest.mark.parametrize("packer", list(PACKERS))
def test_both_packers_accept_numpy_and_tensor_documents(packer):
    ref = PACKERS[packer]([[3, 4], [5]], np.int64(4), eos_id=np.int64(1), pad_id=np.int32(0))
    for docs in (
        [np.array([3, 4]), [np.int64(5)]],
        [torch.tensor([3, 4]), torch.tensor([5])],
        ([3, 4], (5,)),
    ):
        got = PACKERS[packer](docs, 4, eos_id=1, pad_id=0)
        for f in ("input_ids", "labels", "document_ids", "position_ids", "attention_mask"):
            assert torch.equal(getattr(got, f), getattr(ref, f)), f
            assert getattr(got, f).dtype == torch.long


def test_whole_packer_refuses_a_document_that_cannot_fit():
    with raises(ValueError, "documents[1]", "block_size"):
        whole([[3], [4, 5, 6, 7]], 4, eos_id=1, pad_id=0)


@given(
    docs=st.lists(st.lists(st.integers(2, 9), min_size=1, max_size=5), min_size=1, max_size=6),
    block=st.integers(6, 12),
)
def test_whole_packer_rows_match_a_naive_reference(docs, block):
    pb = whole(docs, block, eos_id=1, pad_id=0)
    rows, row = [], []
    for d in docs:  # naive greedy placement
        if len(row) + len(d) + 1 > block:
            rows.append(row)
            row = []
        row = row + d + [1]
    rows.append(row)
    assert pb.input_ids.tolist() == [r + [0] * (block - len(r)) for r in rows]
    # every document token after the first, and its EOS, is a target (whole documents, no cuts)
    scored = int((pb.labels[:, 1:] != IGNORE_INDEX).sum())
    assert scored == sum(len(d) for d in docs)


BAD_IDS = [
    ([1.5, 2.0], TypeError),
    ([True, False], TypeError),
    ([1, True], TypeError),
    ("abc", TypeError),
    (None, TypeError),
    (3, TypeError),
    (np.array([1.0, 2.0]), TypeError),
    (torch.tensor([1.0, 2.0]), TypeError),
    (torch.tensor([1, 2], dtype=torch.uint8), TypeError),
    (torch.tensor([True]), TypeError),
    ([], ValueError),
    (torch.zeros(0, dtype=torch.long), ValueError),
    ([1, -1], ValueError),
    ([1, IGNORE_INDEX], ValueError),
]


@pytest.mark.parametrize("bad,exc", BAD_IDS, ids=case_id)
def test_unigram_entropy_bad_ids(bad, exc):
    with raises(exc, "ids"):
        unigram_entropy(bad)


@pytest.mark.parametrize(
    "bad,exc",
    [
        (True, TypeError),
        (2.0, TypeError),
        ("5", TypeError),
        (0, ValueError),
        (-1, ValueError),
        (2, ValueError),
    ],
    ids=case_id,
)
def test_unigram_entropy_vocab_size(bad, exc):
    with raises(exc, "vocab_size"):
        unigram_entropy([0, 1, 2], bad)


@given(st.lists(st.integers(0, 6), min_size=1, max_size=40))
def test_unigram_entropy_matches_a_naive_count(ids):
    n = len(ids)
    ref = -sum(ids.count(v) / n * math.log(ids.count(v) / n) for v in set(ids))
    for form in (ids, torch.tensor(ids), torch.tensor(ids, dtype=torch.int32), np.array(ids)):
        assert unigram_entropy(form, 7) == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize(
    "bad,exc",
    [
        (True, TypeError),
        ("0.1", TypeError),
        (None, TypeError),
        (math.nan, ValueError),
        (0, ValueError),
        (1, ValueError),
        (-0.5, ValueError),
        (math.inf, ValueError),
    ],
    ids=case_id,
)
def test_train_val_split_fraction(bad, exc):
    with raises(exc, "val_fraction"):
        train_val_split(torch.arange(20), bad)


@pytest.mark.parametrize("bad", [iter(range(20)), 20, None, torch.tensor(3)], ids=case_id)
def test_train_val_split_data(bad):
    with raises(TypeError, "data"):
        train_val_split(bad)


DATA = torch.arange(30) % 7


@pytest.mark.parametrize(
    "kw,exc,name",
    [
        (dict(data=DATA.tolist()), TypeError, "data"),
        (dict(data=DATA.float()), TypeError, "data"),
        (dict(data=DATA.to(torch.uint8)), TypeError, "data"),
        (dict(data=DATA[None]), ValueError, "data"),
        (dict(data=DATA[:3]), ValueError, "block_size"),
        (dict(batch_size=0), ValueError, "batch_size"),
        (dict(batch_size=2.0), TypeError, "batch_size"),
        (dict(batch_size=True), TypeError, "batch_size"),
        (dict(block_size=0), ValueError, "block_size"),
        (dict(block_size="4"), TypeError, "block_size"),
        (dict(generator=0), TypeError, "generator"),
        (dict(generator="seed"), TypeError, "generator"),
    ],
    ids=case_id,
)
def test_random_windows(kw, exc, name):
    args = dict(data=DATA, batch_size=2, block_size=4) | kw
    with raises(exc, name):
        random_windows(args.pop("data"), args.pop("batch_size"), args.pop("block_size"), **args)


def test_random_windows_numpy_sizes_and_int32_data():
    g = torch.Generator().manual_seed(0)
    out = random_windows(DATA.int(), np.int64(3), np.int32(5), generator=g)
    assert out.shape == (3, 5) and out.dtype == torch.long


TOK = ByteTokenizer()


@pytest.mark.parametrize(
    "ids,exc",
    [
        ([1.5, 2.5] * 10, TypeError),
        ([True] * 20, TypeError),
        (torch.arange(20).float(), TypeError),
        ([300] * 20, ValueError),
        ([-1] * 20, ValueError),
        ("abc" * 10, TypeError),
    ],
    ids=case_id,
)
def test_text_corpus_ids_are_token_ids(ids, exc):
    with raises(exc, "ids"):
        TextCorpus("t", TOK, ids)


CORPUS = TextCorpus("t", TOK, list(range(40)))
CHAT = ChatTokenizer()
DOC_CORPUS = DocumentCorpus("c", CHAT, [CHAT.encode("<user> 1 + 2 = <assistant> 3 .")] * 10)


@pytest.mark.parametrize("corpus", [CORPUS, DOC_CORPUS], ids=["text", "documents"])
@pytest.mark.parametrize(
    "call,exc,name",
    [
        (lambda c: c.batch("test", 2, 8), ValueError, "split"),
        (lambda c: c.batch(None, 2, 8), ValueError, "split"),
        (lambda c: c.batch("train", 0, 16), ValueError, "batch_size"),
        (lambda c: c.batch("train", 2.0, 16), TypeError, "batch_size"),
        (lambda c: c.batch("train", True, 16), TypeError, "batch_size"),
        (lambda c: c.batch("train", 2, 0), ValueError, "block_size"),
        (lambda c: c.batch("train", 2, "16"), TypeError, "block_size"),
        (lambda c: c.batch("train", 2, 16, generator=3), TypeError, "generator"),
        (lambda c: list(c.eval_batches("train", 0, 16)), ValueError, "batch_size"),
        (lambda c: list(c.eval_batches("train", 2.5, 16)), TypeError, "batch_size"),
        (lambda c: list(c.eval_batches("train", 2, 0)), ValueError, "block_size"),
        (lambda c: list(c.eval_batches("train", 2, 1)), ValueError, "block_size"),  # no target
        (lambda c: list(c.eval_batches("train", 2, 16, 0)), ValueError, "max_batches"),
        (lambda c: list(c.eval_batches("train", 2, 16, True)), TypeError, "max_batches"),
        (lambda c: list(c.eval_batches("train", 2, 16, 1.5)), TypeError, "max_batches"),
        (lambda c: list(c.eval_batches("val", 2, 16, "3")), TypeError, "max_batches"),
    ],
    ids=lambda x: getattr(x, "__name__", repr(x)),
)
def test_corpus_batches(corpus, call, exc, name):
    with raises(exc, name):
        call(corpus)


def test_eval_batches_of_a_split_shorter_than_a_row_yield_nothing():
    assert list(CORPUS.eval_batches("val", 2, 16)) == []  # the caller decides (train does)


@pytest.mark.parametrize(
    "docs,exc,name",
    [
        ([], TypeError, "documents"),
        ([[3], []], ValueError, "documents[1]"),
        ([[3], [2.5]], TypeError, "documents[1]"),
        ([[3], [-100]], TypeError, "documents[1]"),
        ([[3], [99]], ValueError, "documents[1]"),
    ],
    ids=case_id,
)
def test_document_corpus_documents(docs, exc, name):
    with raises(exc, name):
        DocumentCorpus("c", CHAT, docs * 5 if docs else docs)


@pytest.mark.parametrize("bad", [5, None, ["a.txt"], 3.5], ids=case_id)
def test_read_text_file_path_type(bad):
    from lmcore.data import read_text_file

    with raises(TypeError, "path"):
        read_text_file(bad)


def test_load_corpus_file_path_type():
    from lmcore.data import load_corpus

    with raises(TypeError, "path"):
        load_corpus("file", path=5)


def test_chunk_size_numpy_int_is_an_int():
    import lmcore.loss
    from lmcore import chunked_causal_lm_loss

    h, w = torch.randn(2, 5, 3), torch.randn(7, 3)
    y = torch.randint(0, 7, (2, 5))
    old = lmcore.loss._DENSE_MAX_ELEMENTS
    lmcore.loss._DENSE_MAX_ELEMENTS = 0
    try:
        a = chunked_causal_lm_loss(h, w, y, chunk_size=np.int64(3))
        b = chunked_causal_lm_loss(h, w, y, chunk_size=3)
    finally:
        lmcore.loss._DENSE_MAX_ELEMENTS = old
    assert torch.equal(a, b)


@pytest.mark.parametrize(
    "policy, exc",
    [("Whole", ValueError), ("", ValueError), (None, ValueError), (True, TypeError), (1, ValueError)],
)
def test_packing_policy_is_one_of_the_named_two(policy, exc):
    with raises(exc, "policy"):
        pack_documents(DOCS, 4, eos_id=1, pad_id=0, policy=policy)
