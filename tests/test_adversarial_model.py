"""Adversarial inputs for GPTConfig and GPT: every field and every forward input is checked,
with TypeError for a wrong type and ValueError for a wrong value, the field named."""

import math

import numpy as np
import pytest
import torch
from _adversarial import BAD_ID_DTYPES, GOOD_ID_DTYPES, raises
from hypothesis import given
from hypothesis import strategies as st

from lmcore import GPT, GPTConfig

INT_FIELDS = ["vocab_size", "block_size", "n_layer", "n_head", "n_embd"]
SMALL = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8)


@pytest.mark.parametrize(
    "bad", [True, False, 2.0, 8.5, "8", None, math.inf, math.nan, [8], torch.tensor(8)], ids=repr
)
@pytest.mark.parametrize("field", INT_FIELDS)
def test_int_fields_refuse_non_ints(field, bad):
    with raises(TypeError, f"GPTConfig.{field}", "positive int"):
        GPTConfig(**{**SMALL, field: bad})


@pytest.mark.parametrize("bad", [0, -1, -64])
@pytest.mark.parametrize("field", INT_FIELDS)
def test_int_fields_refuse_non_positive(field, bad):
    with raises(ValueError, f"GPTConfig.{field}", str(bad)):
        GPTConfig(**{**SMALL, field: bad})


def test_numpy_ints_are_ints_and_stored_as_int():
    cfg = GPTConfig(**{k: np.int64(v) for k, v in SMALL.items()})
    assert all(type(getattr(cfg, k)) is int for k in INT_FIELDS)
    assert GPT(cfg)(torch.zeros(1, 3, dtype=torch.long)).shape == (1, 3, 11)


@pytest.mark.parametrize(
    "bad,exc",
    [
        (math.inf, ValueError),
        (-math.inf, ValueError),
        (math.nan, ValueError),
        (0.0, ValueError),
        (-0.02, ValueError),
        (True, TypeError),
        ("0.02", TypeError),
        (None, TypeError),
        ([0.02], TypeError),
        (torch.tensor(0.02), TypeError),
    ],
    ids=repr,
)
def test_init_std_must_be_positive_and_finite(bad, exc):
    with raises(exc, "GPTConfig.init_std"):
        GPTConfig(init_std=bad)


@pytest.mark.parametrize(
    "bad,exc",
    [
        (1.0, ValueError),
        (1.5, ValueError),
        (-0.1, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (True, TypeError),
        (False, TypeError),
        ("0.1", TypeError),
        (None, TypeError),
    ],
    ids=repr,
)
def test_dropout_must_be_in_0_1(bad, exc):
    with raises(exc, "GPTConfig.dropout"):
        GPTConfig(dropout=bad)


@pytest.mark.parametrize("bad", [0, 1, "no", "False", None, np.float64(1.0)], ids=repr)
def test_bias_must_be_a_bool(bad):
    with raises(TypeError, "GPTConfig.bias"):
        GPTConfig(bias=bad)


def test_numpy_bool_and_float_settings_are_accepted():
    cfg = GPTConfig(bias=np.bool_(False), dropout=np.float32(0.25), init_std=np.float64(0.1))
    assert cfg.bias is False and type(cfg.dropout) is float and type(cfg.init_std) is float


def test_a_config_edited_after_construction_is_checked_again():
    cfg = GPTConfig(**SMALL)
    cfg.init_std = math.inf
    with raises(ValueError, "GPTConfig.init_std"):
        GPT(cfg)
    cfg = GPTConfig(**SMALL)
    cfg.n_head = 3
    with raises(ValueError, "divisible"):
        GPT(cfg)


@given(std=st.floats(1e-4, 1.0), seed=st.integers(0, 100))
def test_any_valid_init_gives_finite_logits(std, seed):
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**SMALL, init_std=std))
    assert bool(torch.isfinite(model(torch.randint(0, 11, (2, 8)))).all())


MODEL = GPT(GPTConfig(**SMALL))
IDS = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
POS = torch.tensor([[0, 1, 0, 1], [0, 1, 2, 3]])
DOC = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 0]])
FORWARD = {
    "input_ids": lambda t: MODEL(t),
    "position_ids": lambda t: MODEL(IDS, position_ids=t),
    "document_ids": lambda t: MODEL(IDS, document_ids=t),
    "hidden_states/input_ids": lambda t: MODEL.hidden_states(t),
}


def _value_for(entry):
    return {"position_ids": POS, "document_ids": DOC}.get(entry, IDS)


@pytest.mark.parametrize("dtype", BAD_ID_DTYPES, ids=str)
@pytest.mark.parametrize("entry", list(FORWARD))
def test_forward_refuses_unsigned_small_bool_and_float_ids(entry, dtype):
    name = entry.split("/")[-1]
    with raises(TypeError, name, str(dtype)):
        FORWARD[entry](_value_for(entry).to(dtype))


@pytest.mark.parametrize("dtype", GOOD_ID_DTYPES, ids=str)
@pytest.mark.parametrize("entry", list(FORWARD))
def test_forward_int32_equals_int64(entry, dtype):
    a, b = FORWARD[entry](_value_for(entry).to(dtype)), FORWARD[entry](_value_for(entry))
    assert torch.equal(a, b)


@pytest.mark.parametrize("name", ["position_ids", "document_ids"])
@pytest.mark.parametrize("bad", [[[0, 1, 2, 3]] * 2, np.zeros((2, 4), dtype=np.int64)], ids=["list", "numpy"])
def test_forward_side_inputs_must_be_tensors(name, bad):
    with raises(TypeError, name):
        MODEL(IDS, **{name: bad})


@pytest.mark.parametrize("shape", [(4,), (2, 3), (3, 4), (2, 4, 1)])
@pytest.mark.parametrize("name", ["position_ids", "document_ids"])
def test_forward_side_input_shapes(name, shape):
    with raises(ValueError, name):
        MODEL(IDS, **{name: torch.zeros(shape, dtype=torch.long)})


@pytest.mark.parametrize("bad", [-1, 8, 100])
def test_position_outside_the_table(bad):
    pos = POS.clone()
    pos[1, 2] = bad
    with raises(ValueError, "position_ids", str(bad), "block_size"):
        MODEL(IDS, position_ids=pos)


@given(bad=st.one_of(st.integers(-(10**9), -1), st.integers(11, 10**9)))
def test_any_input_id_outside_the_vocabulary(bad):
    ids = IDS.clone()
    ids[0, 1] = bad
    with raises(ValueError, "input_ids", str(bad), "vocab_size"):
        MODEL(ids)


def test_empty_batch_gives_empty_logits():
    assert MODEL(torch.zeros(0, 4, dtype=torch.long)).shape == (0, 4, 11)


def test_zero_length_is_refused():
    with raises(ValueError, "input_ids", "L = 0"):
        MODEL(torch.zeros(2, 0, dtype=torch.long))


@pytest.mark.parametrize(
    "bad,exc",
    [(True, TypeError), (4.0, TypeError), ("4", TypeError), (None, None), (0, ValueError), (-3, ValueError)],
    ids=repr,
)
def test_flops_per_token_seq_len(bad, exc):
    if exc is None:
        assert MODEL.flops_per_token(bad) == MODEL.flops_per_token(8)
        return
    with raises(exc, "seq_len"):
        MODEL.flops_per_token(bad)


@pytest.mark.parametrize("bad", [0, 1, "no", None])
def test_num_parameters_flag_must_be_a_bool(bad):
    with raises(TypeError, "non_embedding"):
        MODEL.num_parameters(bad)
