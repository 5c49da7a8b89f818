"""The grading machinery itself: pass, fail with a reason, 'not attempted yet', mutation."""

import numpy as np
import torch

from lmcore.course.checks import Case, check, check_choices, compare


def ref_double(x):
    return [2 * v for v in x]


def test_compare_matches_numbers_arrays_tensors_and_structures():
    assert compare(1.0, 1.0 + 1e-9) is None
    assert compare(np.array([1.0, 2.0]), torch.tensor([1.0, 2.0])) is None
    assert compare((1.0, [1, 2]), (1.0, [1, 2])) is None
    assert "shape" in compare(np.zeros(3), np.zeros(4))
    assert "non-finite" in compare(np.ones(2), np.array([np.nan, 1.0]))
    assert compare({"a": 1}, {"a": 2}) is not None
    assert compare("x", "y") is not None
    assert compare(np.array([True, False]), np.array([True, True])) is not None


def test_check_passes_the_reference(capsys):
    assert check("double", ref_double, ref_double, [([1, 2],), ([0.5],)])
    assert capsys.readouterr().out.startswith("✓ pass double")


def test_check_reports_the_first_mismatch_with_hint(capsys):
    assert not check("double", lambda x: [3 * v for v in x], ref_double, [([1, 2],)], hint="twice")
    out = capsys.readouterr().out
    assert out.startswith("✗ fail double") and "Hint: twice" in out and "[1, 2]" in out


def test_check_says_not_attempted_for_a_stub(capsys):
    def stub(x):
        raise NotImplementedError

    assert not check("double", stub, ref_double, [([1],)])
    assert "not attempted yet" in capsys.readouterr().out


def test_check_reports_exceptions_and_mutation(capsys):
    assert not check("double", lambda x: 1 / 0, ref_double, [([1],)])
    assert "ZeroDivisionError" in capsys.readouterr().out

    def mutating(t):
        t.mul_(2)
        return t

    assert not check("double", mutating, lambda t: t * 2, [Case((torch.ones(3),))])
    assert "modified its input" in capsys.readouterr().out


def test_check_choices(capsys):
    expected = {"a": "shift", "b": "pad"}
    assert check_choices("bugs", lambda: dict(expected), expected)
    assert not check_choices("bugs", lambda: {"a": "shift", "b": "eos"}, expected, {"b": "look at padding"})
    assert "1/2 right" in capsys.readouterr().out.splitlines()[-1]

    def stub():
        raise NotImplementedError

    assert not check_choices("bugs", stub, expected)
    assert "not attempted yet" in capsys.readouterr().out


def test_compare_rejects_a_dtype_of_another_kind_where_it_carries_meaning():
    labels = torch.tensor([[3, -100], [4, 5]])
    assert compare(labels, labels.clone()) is None
    assert compare(labels, labels.int()) is None  # the width may differ
    why = compare(labels, labels.float())
    assert why and "integer" in why and "float32" in why
    mask = torch.tensor([[True, False], [True, True]])
    assert compare(mask, mask.clone()) is None
    why = compare(mask, mask.float())
    assert why and "bool" in why and "added" in why
    assert "bool" in compare(mask, mask.long())
    assert compare(np.array([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64)) is None
    assert "floating-point" in compare(torch.tensor([1.0, 2.0]), torch.tensor([1, 2]))
    assert compare(3, 3.0) is None and compare([1, 2], [1.0, 2.0]) is None  # plain numbers: values only


def test_check_rejects_float_labels_and_float_masks(capsys):
    from lmcore.shift import document_causal_mask, labels_from_attention_mask

    ids, mask = torch.tensor([[5, 6, 7, 0]]), torch.tensor([[1, 1, 1, 0]])
    assert check("labels", labels_from_attention_mask, labels_from_attention_mask, [(ids, mask)])
    assert not check(
        "labels",
        lambda i, m: labels_from_attention_mask(i, m).float(),
        labels_from_attention_mask,
        [(ids, mask)],
    )
    doc = torch.tensor([[0, 0, 1, 1]])
    assert not check("mask", lambda d: document_causal_mask(d).float(), document_causal_mask, [(doc,)])
    assert "added" in capsys.readouterr().out
