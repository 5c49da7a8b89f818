"""Shared helpers for the adversarial test modules (tests/test_adversarial_*.py)."""

import re

import pytest
import torch

# Every tensor dtype that must be refused where token ids or labels enter (int64/int32 only).
BAD_ID_DTYPES = [
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.int8,
    torch.int16,
    torch.bool,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]
GOOD_ID_DTYPES = [torch.int64, torch.int32]
# Values that are not an int (for int-valued settings): bools, floats, strings, tensors, None.
NOT_INTS = [True, False, 2.0, 2.5, "2", None, float("inf"), float("nan"), [2]]
# Values that are not a real number (for float-valued settings).
NOT_REALS = [True, False, "0.5", None, [0.5], torch.tensor([0.5, 0.5])]


def case_id(value) -> str:
    """A test id that is the same in every process (pytest-xdist's workers must collect the same
    ids): ``repr`` with sets sorted and memory addresses dropped."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(case_id(v) for v in value)) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {case_id(v)}" for k, v in value.items()) + "}"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def ids_tensor(values, dtype):
    """``values`` as ``dtype`` (unsigned/bool/float included); values must fit."""
    return torch.tensor(values).to(dtype)


def raises(exc, *fragments):
    """pytest.raises that also checks the message mentions every fragment (case-sensitive)."""

    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *a):
            suppressed = self.ctx.__exit__(*a)
            msg = str(self.info.value)
            for f in fragments:
                assert f in msg, f"{f!r} not in message: {msg}"
            return suppressed

    return _Check()
