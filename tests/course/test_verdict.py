import math

import numpy as np
import pytest
import torch

from lmcore.course.verdict import above, below, fmt, holds, in_range, near


def test_verdicts_print_the_claim_not_the_value(capsys):
    assert in_range("val loss", 1.4321, 1.2, 1.6, unit=" nats") is True
    assert near("first loss", 4.6301, math.log(103), 0.05, target_text="ln 103") is True
    assert below("gap", 0.004, 0.05) is True
    assert above("ratio", 3.0, 1) is True
    assert holds("every row sums to 1", True) is True
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "val loss in [1.2, 1.6] nats: yes",
        "first loss within 0.05 of ln 103: yes",
        "gap below 0.05: yes",
        "ratio above 1: yes",
        "every row sums to 1: yes",
    ]
    assert "1.4321" not in out and "4.6301" not in out


def test_verdicts_fail_loudly(capsys):
    assert in_range("x", 2.0, 0, 1) is False
    assert near("x", 1.2, 1.0, 0.1) is False
    assert in_range("x", float("nan"), 0, 1) is False
    assert near("x", float("nan"), 0, 1) is False
    assert below("x", float("nan"), 1) is False and above("x", float("nan"), 0) is False
    assert below("x", 1.0, 1.0) is False
    assert all(line.endswith(": NO") for line in capsys.readouterr().out.splitlines())


def test_verdicts_take_tensors_and_numpy_scalars(capsys):
    assert in_range("x", torch.tensor(0.5), 0, 1) and near("x", np.float32(0.5), 0.5, 0.01)
    assert holds("x", torch.tensor(True)) and holds("x", np.bool_(True))


@pytest.mark.parametrize(
    "call",
    [
        lambda: in_range("x", "0.5", 0, 1),
        lambda: in_range("x", True, 0, 1),
        lambda: near("x", 1, None, 0.1),
        lambda: holds("x", 1),
    ],
)
def test_verdicts_reject_non_numbers(call):
    with pytest.raises(TypeError):
        call()


def test_verdicts_reject_bad_tolerances():
    with pytest.raises(ValueError, match="lo must be <= hi"):
        in_range("x", 1, 2, 1)
    with pytest.raises(ValueError, match="tol"):
        near("x", 1, 1, -0.1)
    with pytest.raises(ValueError, match="tol"):
        near("x", 1, 1, float("nan"))


def test_fmt_fixed_decimals():
    assert fmt([0.66524, 0.24473, 0.09]) == "[0.665, 0.245, 0.090]"
    assert fmt(np.array([1.40761]), nd=2) == "[1.41]"
    assert fmt([-0.0001, -0.5]) == "[0.000, -0.500]"


def test_an_expected_failure_reads_as_expected_not_as_no(capsys):
    assert below("per-micro-batch mean: max |Δ grad|", 0.03, 1e-10, expect=False) is True
    assert in_range("x", 5.0, 0, 1, expect=False) is True
    assert near("loss", 3.0, 1.0, 0.1, expect=False) is True
    assert above("gap", 0.0, 1, expect=False) is True
    assert holds("the two losses agree", False, expect=False) is True
    assert below("x", 0.0, 1.0, expect=False) is False  # it did not fail: that is the surprise
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "per-micro-batch mean: max |Δ grad| not below 1e-10, as expected",
        "x not in [0, 1], as expected",
        "loss not within 0.1 of 1, as expected",
        "gap not above 1, as expected",
        "the two losses agree: no, as expected",
        "x below 1: yes, where a failure was expected: NO",
    ]
    with pytest.raises(TypeError, match="expect"):
        below("x", 0.0, 1.0, expect="no")
