"""Notebook 06's support: packing policies, the leak measurement, chat labels, the figures and
the exercise checkers (accept the reference, reject plausible mistakes)."""

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmcore import IGNORE_INDEX, document_causal_mask, mask_cross_document_targets, pack_documents  # noqa: E402
from lmcore.course.packing import leak as KL  # noqa: E402
from lmcore.course.packing import lesson as K  # noqa: E402
from lmcore.course.packing import views as KV  # noqa: E402


def test_pack_with_bos_scores_bos_to_first_word_and_drops_eos_to_bos():
    p = K.pack_with_bos()
    stream = [w for d in K.DOCS for w in ["BOS", *d.split(), "EOS"]]
    assert K.decode(p.input_ids.flatten()[: len(stream)]) == " ".join(stream)
    ids, lab = p.input_ids.flatten().tolist(), p.labels.flatten().tolist()
    for t in range(1, len(stream)):  # naive: the label at a document's BOS is dropped
        assert lab[t] == (IGNORE_INDEX if stream[t] == "BOS" else ids[t]), t
    assert K.VOCAB[K.BOS] == "BOS" and (K.PAD, K.EOS, K.BOS) == (0, 1, 2)
    assert K.VOCAB[K.USER] == "<user>" and K.VOCAB[K.ASSISTANT] == "<assistant>"


def test_encode_decode_round_trip():
    assert K.decode(K.encode("<user> 2 + 3 = <assistant> 5 . EOS")) == "<user> 2 + 3 = <assistant> 5 . EOS"
    assert len(K.encode("<user> 2 + 3 = <assistant> 5 . EOS")) == 9


@pytest.mark.parametrize("policy", list(K.POLICIES))
def test_pack_with_policy_against_a_hand_built_row(policy):
    p = K.pack_with_policy(policy=policy)
    eos = policy != "no_eos"
    stream = [w for d in K.DOCS for w in d.split() + (["EOS"] if eos else [])]
    docs = [k for k, d in enumerate(K.DOCS) for _ in d.split() + (["EOS"] if eos else [])]
    L = 14
    assert p["input_ids"].shape == (1, L)
    assert K.decode(p["input_ids"][0][: len(stream)]) == " ".join(stream)
    assert p["document_ids"][0].tolist() == docs + [-1] * (L - len(docs))
    starts = {t for t in range(1, len(docs)) if docs[t] != docs[t - 1]}
    for t in range(L):
        real = t < len(stream)
        dropped = policy in ("eos_masked", "block_diagonal") and t in starts
        want = K.VOCAB.index(stream[t]) if real and not dropped else IGNORE_INDEX
        assert int(p["labels"][0, t]) == want, t
        assert bool(p["crossing"][0, t]) == (t in starts)
        for j in range(L):
            same = docs[t] == docs[j] if real and j < len(docs) else (not real and j >= len(docs))
            allowed = j <= t and (same or policy != "block_diagonal")
            assert bool(p["attention"][0, t, j]) == allowed
    if policy == "block_diagonal":
        pos = [t - max([0] + [s for s in starts | {len(docs)} if s <= t]) for t in range(L)]
        assert p["position_ids"][0].tolist() == pos
    else:
        assert p["position_ids"][0].tolist() == list(range(L))
    with pytest.raises(ValueError, match="policy"):
        K.pack_with_policy(policy="eos_only")


def test_leak_is_zero_only_with_block_diagonal_attention_and_position_reset():
    leaks = KL.policy_leaks()
    assert leaks["block_diagonal"] < 1e-12
    for name in ("no_eos", "eos", "eos_masked", "positions_reset_only", "block_diagonal_only"):
        assert leaks[name] > 1e-2, name
    with pytest.raises(ValueError, match="eos=True"):
        KL.measure_packing_leak(eos=False, block_diagonal=True)


def test_leak_measures_document_b_logits_directly():
    model = KL.leak_model()
    with torch.no_grad():
        b = model(torch.tensor([K.encode("dogs run fast")]))[0]
        ab = model(torch.tensor([K.encode("the cat sat on the mat EOS dogs run fast")]))[0, 7:]
        b_alone = model(
            torch.tensor([K.encode("the cat sat on the mat EOS dogs run fast")]),
            document_ids=torch.tensor([[0] * 7 + [1] * 3]),
            position_ids=torch.tensor([list(range(7)) + [0, 1, 2]]),
        )[0, 7:]
    assert (b_alone - b).abs().max() < 1e-12  # B packed with the mask == B on its own
    assert (ab - b).abs().max() > 1e-2


def test_plot_packing():
    fig = KV.plot_packing("eos", leak=0.5)
    assert isinstance(fig, matplotlib.figure.Figure) and "0.500" in fig.axes[1].get_title()
    plt.close(fig)


# ---------------------------------------------------------------- checkers


def test_check_mask_cross_document_targets(capsys):
    def ref(labels, doc):
        out = labels.clone()
        out[:, 1:][doc[:, 1:] != doc[:, :-1]] = IGNORE_INDEX
        return out

    def wrong_direction(labels, doc):  # drops a_last -> EOS instead
        out = labels.clone()
        out[:, :-1][doc[:, 1:] != doc[:, :-1]] = IGNORE_INDEX
        return out

    def both(labels, doc):
        return torch.minimum(ref(labels, doc), wrong_direction(labels, doc))

    def in_place(labels, doc):
        labels[:, 1:][doc[:, 1:] != doc[:, :-1]] = IGNORE_INDEX
        return labels

    assert K.check_mask_cross_document_targets(ref)
    for fn in (wrong_direction, both, in_place, lambda lab, doc: lab.clone()):
        assert not K.check_mask_cross_document_targets(fn)
    capsys.readouterr()


def test_check_document_causal_mask(capsys):
    def ref(doc):
        L = doc.shape[1]
        return torch.ones(L, L, dtype=torch.bool).tril() & (doc[:, :, None] == doc[:, None, :])

    wrong = [
        lambda d: d[:, :, None] == d[:, None, :],  # not causal
        lambda d: torch.ones(d.shape[1], d.shape[1], dtype=torch.bool).tril().expand(d.shape[0], -1, -1),
        lambda d: (
            torch.ones(d.shape[1], d.shape[1], dtype=torch.bool).triu() & (d[:, :, None] == d[:, None, :])
        ),
        lambda d: ref(d).float(),
    ]  # a float 0/1 mask: SDPA would *add* it to the scores
    assert K.check_document_causal_mask(ref)
    for fn in wrong:
        assert not K.check_document_causal_mask(fn)
    capsys.readouterr()


@pytest.mark.parametrize(
    "x, pos",
    [(torch.zeros(3, 5), torch.arange(3)), (torch.zeros(3, 4), torch.arange(2)), (torch.zeros(3, 4), None)],
)
def test_rotate_bad_input(x, pos):
    with pytest.raises(ValueError, match="x must|pos must"):
        KL.rotate(x, pos)


def test_rotary_positions_need_only_the_block_diagonal_mask():
    assert KL.rotary_leak(block_diagonal=True) < 1e-9
    assert KL.rotary_leak(block_diagonal=False) > 0.1
    # the rotation against complex multiplication: (x1 + i x2) e^{i pos theta}
    g = torch.Generator().manual_seed(0)
    x, pos = torch.randn(6, 8, generator=g, dtype=torch.float64), torch.arange(6) + 3
    theta = 10000.0 ** (-torch.arange(4, dtype=torch.float64) / 4)
    z = torch.complex(x[:, :4], x[:, 4:]) * torch.exp(1j * pos[:, None] * theta)
    assert torch.allclose(KL.rotate(x, pos), torch.cat([z.real, z.imag], -1), atol=1e-12)
    # a score depends only on the distance between query and key
    q, k = (
        torch.randn(6, 8, generator=g, dtype=torch.float64),
        torch.randn(6, 8, generator=g, dtype=torch.float64),
    )
    scores = [KL.rotate(q, torch.arange(6) + s) @ KL.rotate(k, torch.arange(6) + s).T for s in (0, 7)]
    assert torch.allclose(scores[0], scores[1], atol=1e-12)


# ---------------------------------------------------------------- the reference is refused


def test_checkers_refuse_the_reference_call(capsys):
    assert not K.check_mask_cross_document_targets(lambda l, d: mask_cross_document_targets(l, d))
    assert not K.check_document_causal_mask(lambda d: document_causal_mask(d))
    out = capsys.readouterr().out
    assert out.count("your function called lmcore.shift.") == 2


# ---------------------------------------------------------------- the whole policy


def _whole_by_hand(docs, L, *, fits=lambda n, room: n <= room, pad_last=True, eos=True):
    ids, dd = [], []
    for k, d in enumerate(docs):
        n = len(d) + (1 if eos else 0)
        room = -len(ids) % L
        if room and not fits(n, room):
            ids, dd = ids + [K.PAD] * room, dd + [-1] * room
        ids += list(d) + ([K.EOS] if eos else [])
        dd += [k] * n
    room = -len(ids) % L
    if pad_last:
        ids, dd = ids + [K.PAD] * room, dd + [-1] * room
    else:
        ids, dd = ids[: len(ids) - len(ids) % L] or ids, dd[: len(dd) - len(dd) % L] or dd
    return torch.tensor(ids).view(-1, L), torch.tensor(dd).view(-1, L)


def test_whole_by_hand_matches_pack_documents():
    docs = [K.encode(d) for d in K.DOCS]
    for L in (5, 6, 8, 14):
        p = pack_documents(docs, L, eos_id=K.EOS, pad_id=K.PAD, policy="whole")
        ids, dd = _whole_by_hand(docs, L)
        assert torch.equal(ids, p.input_ids) and torch.equal(dd, p.document_ids)


def test_check_pack_whole_accepts_a_loop(capsys):
    assert K.check_pack_whole(_whole_by_hand)
    assert "✓ pass" in capsys.readouterr().out


def _stream(docs, L):  # by hand: cut the stream anywhere
    ids = [t for d in docs for t in list(d) + [K.EOS]]
    dd = [k for k, d in enumerate(docs) for _ in range(len(d) + 1)]
    room = -len(ids) % L
    return torch.tensor(ids + [K.PAD] * room).view(-1, L), torch.tensor(dd + [-1] * room).view(-1, L)


def _one_per_row(docs, L):
    rows = [list(d) + [K.EOS] + [K.PAD] * (L - len(d) - 1) for d in docs]
    dd = [[k] * (len(d) + 1) + [-1] * (L - len(d) - 1) for k, d in enumerate(docs)]
    return torch.tensor(rows), torch.tensor(dd)


WRONG_WHOLE = {
    "pack_documents itself": lambda docs, L: (
        pack_documents(docs, L, eos_id=K.EOS, pad_id=K.PAD, policy="whole").input_ids,
        pack_documents(docs, L, eos_id=K.EOS, pad_id=K.PAD, policy="whole").document_ids,
    ),
    "the stream policy (cuts documents)": _stream,
    "one document per row": _one_per_row,
    "closes a row a document fills exactly": lambda docs, L: _whole_by_hand(
        docs, L, fits=lambda n, room: n < room
    ),
    "no EOS": lambda docs, L: _whole_by_hand(docs, L, eos=False),
}


@pytest.mark.parametrize("name", sorted(WRONG_WHOLE))
def test_check_pack_whole_rejects(name, capsys):
    assert not K.check_pack_whole(WRONG_WHOLE[name])
    out = capsys.readouterr().out
    assert "✗ fail" in out
    if name not in ("pack_documents itself",):
        assert "Hint: " in out  # the goal's part it broke, as a question


def _from_the_end(docs, L):  # fill the rows from the last document backwards: another minimal layout
    rows, row, dd = [], [], []
    for k in range(len(docs) - 1, -1, -1):
        piece = [*docs[k], K.EOS]
        if len(row) + len(piece) > L:
            rows.append((row, dd))
            row, dd = [], []
        row, dd = piece + row, [k] * len(piece) + dd
    rows.append((row, dd))
    rows = rows[::-1]
    return (
        torch.tensor([r + [K.PAD] * (L - len(r)) for r, _ in rows]),
        torch.tensor([d + [-1] * (L - len(d)) for _, d in rows]),
    )


def test_check_pack_whole_accepts_any_packing_that_meets_the_goal(capsys):
    docs = [K.encode(d) for d in K.DOCS]
    assert not torch.equal(_from_the_end(docs, 8)[0], _whole_by_hand(docs, 8)[0])  # not pack_documents'
    assert K.check_pack_whole(_from_the_end)
    assert "✓ pass" in capsys.readouterr().out


def test_fewest_rows_is_what_filling_row_by_row_takes():
    from lmcore.course.packing.diagnoses import fewest_rows

    assert fewest_rows([4, 4, 4], 8) == 2 and fewest_rows([3, 6, 3], 8) == 3 and fewest_rows([], 5) == 0
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        L = int(torch.randint(3, 12, (1,), generator=g))
        lengths = torch.randint(1, L, (int(torch.randint(1, 10, (1,), generator=g)),), generator=g).tolist()
        rows = _whole_by_hand([[5] * n for n in lengths], L)[0].shape[0]
        assert fewest_rows([n + 1 for n in lengths], L) == rows


def test_packing_fault_names_the_part_of_the_goal_that_failed():
    from lmcore.course.packing.diagnoses import packing_fault

    docs = [K.encode(d) for d in K.DOCS]
    assert packing_fault(docs, 8, _whole_by_hand(docs, 8)) == ("", "")
    assert packing_fault(docs, 8, _from_the_end(docs, 8)) == ("", "")
    assert "starts in row 0 and ends in row 1" in packing_fault(docs, 6, _stream(docs, 6))[0]
    assert "uses 3 rows" in packing_fault(docs, 8, _one_per_row(docs, 8))[0]
    ids, dd = _whole_by_hand(docs, 8)
    assert "PAD with document id 0" in packing_fault(docs, 8, (ids, dd.clamp(min=0)))[0]
    assert "not a tensor" in packing_fault(docs, 8, (ids.tolist(), dd))[0]
    assert "shape" in packing_fault(docs, 8, (ids[:, :7], dd[:, :7]))[0]


def test_check_pack_whole_rejects_an_unpadded_last_row(capsys):
    def ragged(docs, L):
        ids, dd = _whole_by_hand(docs, L)
        keep = (dd[-1] >= 0).sum()
        return list(ids[:-1]) + [ids[-1, :keep]], dd

    assert not K.check_pack_whole(ragged)


# ---------------------------------------------------------------- the leak widget


def test_leaks_by_length_hide_the_bug_only_at_the_same_length():
    model = KL.leak_model()
    block_only = KL.leaks_by_length(model, block_diagonal=True, reset_positions=False)
    both = KL.leaks_by_length(model, block_diagonal=True, reset_positions=True)
    assert block_only[6] < 1e-9 and min(v for n, v in block_only.items() if n != 6) > 0.1  # A has 6 words
    assert max(both.values()) < 1e-9
    neither = KL.leaks_by_length(model, block_diagonal=False, reset_positions=False, lengths=[2, 6])
    assert min(neither.values()) > 0.1
    # each entry is the measurement with that replacement A
    assert block_only[3] == KL.measure_packing_leak(model, block_diagonal=True, a_changed="a bird sings")
    with pytest.raises(ValueError, match="lengths"):
        KL.leaks_by_length(model, block_diagonal=True, reset_positions=True, lengths=[0])


def test_leak_explorer_redraws_on_each_control():
    box = KV.leak_explorer(KL.leak_model())
    (n, block, reset), image = box.children[0].children, box.children[1]
    seen = [image.value]
    for control, value in ((n, 6), (block, True), (reset, True)):
        control.value = value
        assert image.value != seen[-1] and image.value[:4] == b"\x89PNG"
        seen.append(image.value)
    fig = KV.plot_leak_by_length({1: 1.0, 2: 0.0}, chosen=2, block_diagonal=True, reset_positions=False)
    assert "A of 2 words: leak 0.000" in fig.axes[0].get_title()
    plt.close("all")


# ---------------------------------------------------------------- position ids for packed documents


def _positions_loop(doc):
    out = torch.zeros_like(doc)
    for r in range(doc.shape[0]):
        for t in range(1, doc.shape[1]):
            out[r, t] = 0 if doc[r, t] != doc[r, t - 1] else out[r, t - 1] + 1
    return out


def test_check_position_ids_accepts_a_loop_and_matches_pack_documents(capsys):
    assert K.check_position_ids(_positions_loop)
    p = pack_documents([K.encode(d) for d in K.DOCS], 6, eos_id=K.EOS, pad_id=K.PAD)
    assert torch.equal(_positions_loop(p.document_ids), p.position_ids)
    capsys.readouterr()


WRONG_POSITIONS = {
    "pack_documents' own": lambda d: pack_documents([[3]], 4, eos_id=K.EOS, pad_id=K.PAD).position_ids,
    "absolute positions": lambda d: torch.arange(d.shape[1]).expand_as(d).clone(),
    "starts at 1": lambda d: _positions_loop(d) + 1,
    "the document's index, not the position": lambda d: torch.cat(
        [torch.zeros_like(d[:, :1]), (d[:, 1:] != d[:, :-1]).long().cumsum(1)], 1
    ),
}


@pytest.mark.parametrize("name", sorted(WRONG_POSITIONS))
def test_check_position_ids_rejects(name, capsys):
    assert not K.check_position_ids(WRONG_POSITIONS[name])
    assert "✗ fail" in capsys.readouterr().out


def test_check_position_ids_refuses_the_private_reference(capsys):
    from lmcore.shift import _restart_positions

    assert not K.check_position_ids(lambda d: _restart_positions(d))
    assert "your function called lmcore.shift._restart_positions" in capsys.readouterr().out
