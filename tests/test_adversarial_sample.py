"""Adversarial inputs for sampling: prompts that are not token ids are refused (never coerced),
settings are checked by type and value, and a tiny temperature behaves like greedy."""

import math
import types

import numpy as np
import pytest
import torch
from _adversarial import BAD_ID_DTYPES, case_id, raises
from hypothesis import given
from hypothesis import strategies as st

from lmcore import GPT, GPTConfig, filter_logits, generate, next_token_distribution

torch.manual_seed(0)
MODEL = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
Z = torch.tensor([[1.0, 3.0, 2.0, -1.0], [0.5, 0.1, 0.2, 4.0]])


@pytest.mark.parametrize(
    "bad",
    [
        [1.7, 2.2],
        [True, False],
        [1, True],
        [[1, 2], [3, 2.0]],
        "abc",
        b"ab",
        3,
        None,
        {1, 2},
        [torch.tensor(1)],
        np.array([1.0, 2.0]),
        np.array([1, 2], dtype=np.uint8),
    ],
    ids=case_id,
)
def test_prompts_that_are_not_int_ids_are_refused(bad):
    with raises(TypeError, "prompt_ids"):
        generate(MODEL, bad, 2, temperature=0)


@pytest.mark.parametrize("dtype", BAD_ID_DTYPES, ids=str)
def test_prompt_tensor_dtypes(dtype):
    with raises(TypeError, "prompt_ids", str(dtype)):
        generate(MODEL, torch.tensor([[1, 2]]).to(dtype), 2, temperature=0)


@pytest.mark.parametrize(
    "bad",
    [
        [],
        [[]],
        [[1, 2], [3]],
        torch.zeros(0, 3, dtype=torch.long),
        torch.zeros(2, 2, 2, dtype=torch.long),
        torch.tensor(3),
        [-1, 2],
        [2, 11],
        [[0, 2**70]],
    ],
    ids=case_id,
)
def test_prompt_shapes_and_values(bad):
    with raises(ValueError, "prompt_ids"):
        generate(MODEL, bad, 2, temperature=0)


def test_valid_prompt_forms_agree():
    ref = generate(MODEL, [1, 2, 3], 4, temperature=0)
    for form in (
        [np.int64(1), np.int32(2), 3],
        (1, 2, 3),
        np.array([1, 2, 3]),
        torch.tensor([1, 2, 3], dtype=torch.int32),
    ):
        assert torch.equal(generate(MODEL, form, 4, temperature=0), ref)


@pytest.mark.parametrize(
    "bad,exc",
    [
        (True, TypeError),
        ("5", TypeError),
        (2.0, TypeError),
        (math.inf, TypeError),
        (None, TypeError),
        (-1, ValueError),
    ],
    ids=case_id,
)
def test_max_new_tokens(bad, exc):
    with raises(exc, "max_new_tokens"):
        generate(MODEL, [1], bad)


def test_max_new_tokens_numpy_int():
    assert len(generate(MODEL, [1], np.int64(3), temperature=0)) == 4


@pytest.mark.parametrize(
    "bad,exc",
    [(True, TypeError), (1.0, TypeError), ("1", TypeError), (-100, ValueError), (11, ValueError)],
    ids=case_id,
)
def test_eos_id(bad, exc):
    with raises(exc, "eos_id"):
        generate(MODEL, [1], 3, eos_id=bad)


@pytest.mark.parametrize("bad", [0, "seed", torch.tensor(0), np.random.default_rng(0)], ids=case_id)
def test_generator_must_be_a_torch_generator(bad):
    with raises(TypeError, "generator"):
        generate(MODEL, [1], 3, generator=bad)


def test_model_without_block_size_is_a_clear_error():
    with raises(TypeError, "model", "block_size"):
        generate(torch.nn.Linear(2, 2), [1], 3)
    with raises(TypeError, "model"):
        generate(lambda x: x, [1], 3)


SETTINGS = [
    ("temperature", True, TypeError),
    ("temperature", "1", TypeError),
    ("temperature", None, TypeError),
    ("temperature", math.nan, ValueError),
    ("temperature", math.inf, ValueError),
    ("temperature", -0.5, ValueError),
    ("temperature", torch.tensor(1.0), TypeError),
    ("top_k", True, TypeError),
    ("top_k", 2.0, TypeError),
    ("top_k", "2", TypeError),
    ("top_k", math.inf, TypeError),
    ("top_k", 0, ValueError),
    ("top_k", -1, ValueError),
    ("top_p", True, TypeError),
    ("top_p", "0.9", TypeError),
    ("top_p", math.nan, ValueError),
    ("top_p", 0.0, ValueError),
    ("top_p", 1.5, ValueError),
    ("top_p", -0.1, ValueError),
    ("top_p", math.inf, ValueError),
]


@pytest.mark.parametrize(
    "where,name,bad,exc",
    [
        (where, *case)
        for where in ("next_token_distribution", "generate", "filter_logits")
        for case in SETTINGS
        if not (where == "filter_logits" and case[0] == "temperature")
    ],
    ids=case_id,
)
def test_settings(where, name, bad, exc):
    fn = {
        "next_token_distribution": lambda **kw: next_token_distribution(Z, **kw),
        "generate": lambda **kw: generate(MODEL, [1], 2, **kw),
        "filter_logits": lambda **kw: filter_logits(Z, **kw),
    }[where]
    with raises(exc, name):
        fn(**{name: bad})


def test_numpy_settings_are_numbers():
    a = next_token_distribution(Z, temperature=np.float32(0.5), top_k=np.int64(2), top_p=np.float64(0.9))
    b = next_token_distribution(Z, temperature=0.5, top_k=2, top_p=0.9)
    assert torch.allclose(a, b)


@pytest.mark.parametrize("T", [1e-39, 1e-45, 1e-300, 5e-324, 1e-12])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_tiny_temperature_is_greedy(T, dtype):
    z = (Z * 1000).to(dtype)
    p = next_token_distribution(z, temperature=T)
    assert not bool(p.isnan().any())
    assert torch.equal(p, next_token_distribution(z, temperature=0).to(p.dtype))


def test_tiny_temperature_splits_ties_and_generate_matches_greedy():
    p = next_token_distribution(torch.tensor([2.0, 5.0, 5.0, 1.0]), temperature=1e-39)
    assert p.tolist() == [0.0, 0.5, 0.5, 0.0]
    g = torch.Generator().manual_seed(0)
    for T in (1e-39, 1e-300):
        out = generate(MODEL, [[1, 2], [3, 4]], 5, temperature=T, generator=g)
        assert torch.equal(out, generate(MODEL, [[1, 2], [3, 4]], 5, temperature=0))


@pytest.mark.parametrize("value", [math.nan, math.inf])
@pytest.mark.parametrize(
    "fn",
    [
        lambda z: next_token_distribution(z),
        lambda z: next_token_distribution(z, temperature=0),
        lambda z: filter_logits(z, top_p=0.5),
        lambda z: filter_logits(z, top_k=2),
    ],
    ids=["T=1", "greedy", "top_p", "top_k"],
)
def test_nan_or_plus_inf_logits_are_refused(fn, value):
    z = Z.clone()
    z[1, 2] = value
    with raises(ValueError, "logits"):
        fn(z)


@pytest.mark.parametrize(
    "fn",
    [
        lambda z: next_token_distribution(z),
        lambda z: next_token_distribution(z, temperature=0),
        lambda z: next_token_distribution(z, top_p=0.5),
    ],
    ids=["T=1", "greedy", "top_p"],
)
def test_a_row_with_every_token_masked_is_refused(fn):
    z = Z.clone()
    z[0] = -math.inf
    with raises(ValueError, "logits", "-inf"):
        fn(z)


@pytest.mark.parametrize(
    "fn",
    [
        lambda z: next_token_distribution(z),
        lambda z: filter_logits(z, top_p=0.5),
        lambda z: filter_logits(z, top_k=1),
        lambda z: next_token_distribution(z, temperature=0),
    ],
)
def test_an_empty_vocabulary_is_refused(fn):
    with raises(ValueError, "logits", "V"):
        fn(torch.zeros(2, 0))


def test_model_producing_nan_is_named():
    class NaNModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.config = types.SimpleNamespace(block_size=4)

        def forward(self, x):
            return torch.full((*x.shape, 5), math.nan)

    with raises(ValueError, "logits", "NaN"):
        generate(NaNModel(), [1], 2)


@given(
    seed=st.integers(0, 1000),
    V=st.integers(1, 12),
    k=st.integers(1, 14),
    p=st.floats(1e-6, 1.0),
    T=st.floats(1e-3, 10.0),
)
def test_distribution_is_a_distribution_over_the_filtered_set(seed, V, k, p, T):
    z = torch.randn(3, V, generator=torch.Generator().manual_seed(seed)) * 5
    z[0, 0] = -math.inf if V > 1 else 0.0  # masked tokens stay masked
    probs = next_token_distribution(z, temperature=T, top_k=k, top_p=p)
    assert not bool(probs.isnan().any())
    assert torch.allclose(probs.sum(-1), torch.ones(3), atol=1e-5)
    kept = (probs > 0).sum(-1)
    assert bool((kept >= 1).all()) and bool((kept <= max(k, 1) + V).all())
    assert bool((probs.argmax(-1) == z.argmax(-1)).all())  # the most likely token always stays
    if V > 1:
        assert float(probs[0, 0]) == 0.0
