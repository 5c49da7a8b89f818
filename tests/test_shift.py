"""lmcore.shift against hand-built expectations and naive loops."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lmcore import (
    IGNORE_INDEX,
    document_causal_mask,
    labels_from_attention_mask,
    mask_cross_document_targets,
    num_valid_targets,
    pack_documents,
    shift_for_next_token,
)


def test_shift_pairs_position_t_with_token_t_plus_1():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, 5, generator=g)
    labels = torch.randint(0, 5, (3, 6), generator=g)
    out_logits, out_labels = shift_for_next_token(logits, labels)
    assert out_logits.shape == (3, 5, 5) and out_labels.shape == (3, 5)
    for n in range(3):
        for t in range(5):
            assert torch.equal(out_logits[n, t], logits[n, t])
            assert out_labels[n, t] == labels[n, t + 1]


def test_shift_of_two_tokens_gives_one_target():
    logits, labels = shift_for_next_token(torch.zeros(1, 2, 4), torch.tensor([[3, 1]]))
    assert logits.shape == (1, 1, 4) and labels.tolist() == [[1]]


def test_num_valid_targets_counts_after_the_shift():
    labels = torch.tensor([[IGNORE_INDEX, 1, 2, IGNORE_INDEX], [4, IGNORE_INDEX, 5, 6]])
    assert num_valid_targets(labels) == 4  # the first column is never a target


@pytest.mark.parametrize("bool_mask", [False, True])
def test_labels_from_attention_mask_matches_loop_and_does_not_mutate(bool_mask):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 50, (4, 9), generator=g)
    mask = torch.rand(4, 9, generator=g) < 0.7
    mask = mask if bool_mask else mask.long()
    ids_before, mask_before = ids.clone(), mask.clone()
    labels = labels_from_attention_mask(ids, mask)
    assert torch.equal(ids, ids_before) and torch.equal(mask, mask_before)
    assert labels.data_ptr() != ids.data_ptr()
    for n in range(4):
        for t in range(9):
            expected = int(ids[n, t]) if mask[n, t] else IGNORE_INDEX
            assert int(labels[n, t]) == expected


def test_mask_cross_document_targets_matches_loop_and_does_not_mutate():
    g = torch.Generator().manual_seed(2)
    labels = torch.randint(0, 30, (5, 12), generator=g)
    labels[0, 3] = IGNORE_INDEX
    docs = torch.cumsum((torch.rand(5, 12, generator=g) < 0.25).long(), dim=1)
    before = labels.clone()
    out = mask_cross_document_targets(labels, docs)
    assert torch.equal(labels, before)
    for n in range(5):
        for t in range(12):
            starts = t > 0 and docs[n, t] != docs[n, t - 1]
            assert int(out[n, t]) == (IGNORE_INDEX if starts else int(labels[n, t]))


def test_mask_cross_document_keeps_last_token_to_eos():
    # doc a = [7, 8] + EOS(1), doc b = [9] + EOS: "8 -> EOS" is learned, "EOS -> 9" is not.
    labels = torch.tensor([[7, 8, 1, 9, 1]])
    docs = torch.tensor([[0, 0, 0, 1, 1]])
    assert mask_cross_document_targets(labels, docs).tolist() == [[7, 8, 1, IGNORE_INDEX, 1]]


def test_pack_documents_hand_built_example():
    P = IGNORE_INDEX
    batch = pack_documents([[5, 6, 7], [8, 9], [10]], 4, eos_id=1, pad_id=0)
    # stream: 5 6 7 EOS | 8 9 EOS 10 | EOS pad pad pad
    assert batch.input_ids.tolist() == [[5, 6, 7, 1], [8, 9, 1, 10], [1, 0, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert batch.document_ids.tolist()[:2] == [[0, 0, 0, 0], [1, 1, 1, 2]]
    assert batch.document_ids[2, 0] == 2
    assert batch.labels.tolist() == [[5, 6, 7, 1], [8, 9, 1, P], [1, P, P, P]]
    real = batch.attention_mask.bool()
    expected_pos = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 0], [0, 0, 0, 0]])
    assert torch.equal(batch.position_ids[real], expected_pos[real])
    for f in ("input_ids", "labels", "document_ids", "position_ids", "attention_mask"):
        assert getattr(batch, f).shape == (3, 4), f
    moved = batch.to("cpu")
    assert torch.equal(moved.labels, batch.labels)


def test_pack_documents_exact_fit_has_no_padding():
    batch = pack_documents([[4, 5, 6], torch.tensor([7, 8, 9])], 4, eos_id=2, pad_id=3)
    assert batch.input_ids.tolist() == [[4, 5, 6, 2], [7, 8, 9, 2]]
    assert bool(batch.attention_mask.all())
    assert batch.labels.tolist() == [[4, 5, 6, 2], [7, 8, 9, 2]]


documents = st.lists(st.lists(st.integers(3, 60), min_size=1, max_size=9), min_size=1, max_size=7)


@given(docs=documents, block_size=st.integers(2, 12))
def test_pack_documents_properties(docs, block_size):
    eos, pad = 1, 2
    b = pack_documents(docs, block_size, eos_id=eos, pad_id=pad)
    stream = [t for d in docs for t in d + [eos]]
    doc_of = [k for k, d in enumerate(docs) for _ in range(len(d) + 1)]
    rows = -(-len(stream) // block_size)
    assert b.input_ids.shape == (rows, block_size)
    real = b.attention_mask.bool()
    # Only the last row is padded, and only at its end.
    assert bool(real[:-1].all())
    n_real = len(stream) - (rows - 1) * block_size
    assert b.attention_mask[-1].tolist() == [1] * n_real + [0] * (block_size - n_real)
    assert b.input_ids[real].tolist() == stream
    assert bool((b.input_ids[~real] == pad).all())
    assert b.document_ids[real].tolist() == doc_of
    for n in range(rows):
        for t in range(block_size):
            if not real[n, t]:
                assert b.labels[n, t] == IGNORE_INDEX
                continue
            new_doc = t > 0 and b.document_ids[n, t] != b.document_ids[n, t - 1]
            assert int(b.labels[n, t]) == (IGNORE_INDEX if new_doc else int(b.input_ids[n, t]))
            if t == 0 or new_doc:
                assert b.position_ids[n, t] == 0
            else:
                assert b.position_ids[n, t] == b.position_ids[n, t - 1] + 1
    # Every EOS is a target (except at a row start, which the shift never scores anyway).
    eos_at = b.input_ids == eos
    eos_at[:, 0] = False
    assert bool((b.labels[eos_at] == eos).all())


def _naive_doc_mask(doc_ids):
    N, L = doc_ids.shape
    out = torch.zeros(N, L, L, dtype=torch.bool)
    for n in range(N):
        for i in range(L):
            for j in range(L):
                out[n, i, j] = j <= i and doc_ids[n, i] == doc_ids[n, j]
    return out


@given(docs=documents, block_size=st.integers(2, 10))
def test_document_causal_mask_on_packed_rows(docs, block_size):
    b = pack_documents(docs, block_size, eos_id=1, pad_id=2)
    mask = document_causal_mask(b.document_ids)
    assert mask.dtype == torch.bool
    assert torch.equal(mask, _naive_doc_mask(b.document_ids))


def test_document_causal_mask_single_document_is_causal():
    mask = document_causal_mask(torch.zeros(2, 5, dtype=torch.long))
    assert torch.equal(mask, torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5))
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 3, (3, 7), generator=g)
    assert torch.equal(document_causal_mask(ids), _naive_doc_mask(ids))


def test_position_ids_from_attention_mask_against_a_naive_loop():
    from lmcore.shift import position_ids_from_attention_mask

    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        mask = (torch.rand(3, 7, generator=g) < 0.7).long()
        naive = torch.zeros_like(mask)
        for n in range(3):
            k = 0
            for t in range(7):
                if mask[n, t]:
                    naive[n, t] = k
                    k += 1
        assert torch.equal(position_ids_from_attention_mask(mask), naive)
        assert torch.equal(position_ids_from_attention_mask(mask.bool()), naive)


@pytest.mark.parametrize(
    "bad, exc, word",
    [
        (torch.tensor([[1.0, 0.5, 0.0]]), ValueError, "only 0"),
        (torch.tensor([[1.0, float("nan"), 0.0]]), ValueError, "only 0"),
        (torch.ones(2, 3, dtype=torch.complex64), TypeError, "attention_mask"),
        (torch.tensor([[1, 2, 0]]), ValueError, "only 0"),
        (torch.ones(3, dtype=torch.long), ValueError, "attention_mask"),
        ([[1, 1, 0]], TypeError, "attention_mask"),
    ],
)
def test_position_ids_from_attention_mask_rejects_bad_masks(bad, exc, word):
    from lmcore.shift import position_ids_from_attention_mask

    with pytest.raises(exc, match=word):
        position_ids_from_attention_mask(bad)
