"""Notebook 06's chat labels: one turn and multi-turn conversations, against naive loops, and the
two exercise checkers (each rejects the plausible wrong answers)."""

import math

import pytest
import torch
import torch.nn.functional as F

from lmcore import IGNORE_INDEX, causal_lm_loss
from lmcore.course.packing import chat as C
from lmcore.course.packing import lesson as K


def naive_chat_labels(ids, assistant_id=K.ASSISTANT, pad_id=K.PAD):
    out = []
    for row in ids.tolist():
        a = row.index(assistant_id) if assistant_id in row else len(row)
        out.append([IGNORE_INDEX if t <= a or v == pad_id else v for t, v in enumerate(row)])
    return torch.tensor(out)


def naive_multi_turn(ids, user_id=K.USER, assistant_id=K.ASSISTANT, pad_id=K.PAD):
    out = []
    for row in ids.tolist():
        role, labels = None, []
        for v in row:
            if v in (user_id, assistant_id):
                role = v
                labels.append(IGNORE_INDEX)
            else:
                labels.append(v if role == assistant_id and v != pad_id else IGNORE_INDEX)
        out.append(labels)
    return torch.tensor(out)


def test_chat_labels_score_only_the_answer():
    ids = C.chat_batch()
    assert torch.equal(C.chat_labels(ids), naive_chat_labels(ids))
    lab = C.chat_labels(C.chat_batch((C.EXAMPLE_CHAT,)))[0].tolist()
    assert [K.VOCAB[v] for v in lab if v != IGNORE_INDEX] == ["5", ".", "EOS"]


def test_example_chat_logits_reproduce_the_three_logit_example():
    ids = C.chat_batch((C.EXAMPLE_CHAT,))
    logits = C.example_chat_logits()
    probs = torch.softmax(logits[0, 5:8], -1)
    assert probs[[0, 1, 2], ids[0, 6:9]].tolist() == pytest.approx([0.462, 0.477, 0.313], abs=1e-12)
    ref = F.cross_entropy(logits[0, 5:8], ids[0, 6:9]).item()
    assert float(causal_lm_loss(logits, C.chat_labels(ids))) == pytest.approx(ref, abs=1e-12)
    assert round(ref, 3) == 0.891
    assert float(causal_lm_loss(logits, ids)) == pytest.approx(
        (5 * math.log(len(K.VOCAB)) + 3 * ref) / 8, abs=1e-9
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_multi_turn_labels_against_a_naive_loop(seed):
    ids = C.conversation_batch((1, 2, 4, 3), seed=seed)
    assert torch.equal(C.multi_turn_labels(ids), naive_multi_turn(ids))


def test_multi_turn_scores_every_answer_and_no_user_token():
    ids = C.conversation_batch((2,))
    words = K.decode(ids[0]).split()
    assert words[:19] == "<user> 2 + 3 = <assistant> 5 . EOS <user> 3 3 + 1 0 = <assistant> 4 3".split()
    kept = [K.VOCAB[v] for v in C.multi_turn_labels(ids)[0].tolist() if v != IGNORE_INDEX]
    assert kept == ["5", ".", "EOS", "4", "3", ".", "EOS"]
    # the one-turn rule on the same row scores the second question too
    single = [K.VOCAB[v] for v in C.chat_labels(ids)[0].tolist() if v != IGNORE_INDEX]
    assert single == [
        "5",
        ".",
        "EOS",
        "<user>",
        "3",
        "3",
        "+",
        "1",
        "0",
        "=",
        "<assistant>",
        "4",
        "3",
        ".",
        "EOS",
    ]


def test_check_chat_labels(capsys):
    def keeps_assistant(ids):
        seen = (ids == K.ASSISTANT).long().cumsum(1)
        return torch.where((seen == 0) | (ids == K.PAD), IGNORE_INDEX, ids)

    def scores_padding(ids):
        lab = naive_chat_labels(ids)
        return torch.where(ids == K.PAD, ids, lab)

    def masks_answer(ids):
        seen = (ids == K.ASSISTANT).long().cumsum(1)
        return torch.where(seen > 0, IGNORE_INDEX, ids)

    assert C.check_chat_labels(naive_chat_labels)
    for fn in (keeps_assistant, scores_padding, masks_answer):
        assert not C.check_chat_labels(fn)
    capsys.readouterr()


def only_last_turn(ids):  # "mask everything before the last <assistant>"
    out = []
    for row in ids.tolist():
        last = max(t for t, v in enumerate(row) if v == K.ASSISTANT)
        out.append([IGNORE_INDEX if t <= last or v == K.PAD else v for t, v in enumerate(row)])
    return torch.tensor(out)


def eos_masked(ids):  # the end of each turn is "a special token" too
    lab = naive_multi_turn(ids)
    return lab.masked_fill(ids == K.EOS, IGNORE_INDEX)


def roles_scored(ids):  # <assistant> kept as the first answer token
    lab = naive_multi_turn(ids)
    return torch.where(ids == K.ASSISTANT, ids, lab)


@pytest.mark.parametrize(
    "wrong",
    [C.chat_labels, only_last_turn, eos_masked, roles_scored, lambda ids: naive_multi_turn(ids).float()],
)
def test_check_multi_turn_labels_rejects_the_plausible_wrong_answers(wrong, capsys):
    assert not C.check_multi_turn_labels(wrong)
    assert "fail" in capsys.readouterr().out


def test_check_multi_turn_labels_accepts_the_naive_loop(capsys):
    assert C.check_multi_turn_labels(naive_multi_turn)

    def stub(ids):
        raise NotImplementedError

    assert not C.check_multi_turn_labels(stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_chat_checkers_refuse_the_reference_call(capsys):
    assert not C.check_chat_labels(lambda x: C.chat_labels(x))
    assert not C.check_chat_labels(lambda x: C.multi_turn_labels(x))  # right on one turn, still refused
    assert not C.check_multi_turn_labels(lambda x: C.multi_turn_labels(x))
    assert capsys.readouterr().out.count("your function called lmcore.course.packing.chat.") == 3


def test_check_multi_turn_labels_refuses_the_one_turn_reference_applied_per_turn(capsys):
    """Exercise 5's chat_labels on each <user> turn gives the right labels: refused all the same
    (issue 38: it passed before)."""

    def per_turn(ids):
        rows = []
        for row in ids:
            starts = (row == K.USER).nonzero().flatten().tolist() + [len(row)]
            rows.append(torch.cat([C.chat_labels(row[a:b][None])[0] for a, b in zip(starts, starts[1:])]))
        return torch.stack(rows)

    assert torch.equal(per_turn(C.conversation_batch()), C.multi_turn_labels(C.conversation_batch()))
    assert not C.check_multi_turn_labels(per_turn)
    out = capsys.readouterr().out
    assert "called lmcore.course.packing.chat.chat_labels" in out and "write the scan yourself" in out
