"""Notebook 03's attention section: one head against PyTorch's scaled_dot_product_attention."""

import pytest
import torch
import torch.nn.functional as F

from lmcore.course.sequence import attention as A


def test_causal_mask_is_the_lower_triangle():
    m = A.causal_mask(4)
    assert m.dtype == torch.bool
    assert m.tolist() == [[i >= j for j in range(4)] for i in range(4)]
    with pytest.raises(ValueError, match="length"):
        A.causal_mask(0)


@pytest.mark.parametrize("causal", [True, False])
def test_attention_matches_scaled_dot_product_attention(causal):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(5, 3, generator=g, dtype=torch.float64) for _ in range(3))
    out, weights = A.attention(q, k, v, causal=causal)
    ref = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal)[0]
    assert torch.allclose(out, ref, atol=1e-12)
    assert torch.allclose(weights.sum(-1), torch.ones(5, dtype=torch.float64))
    if causal:
        assert bool((weights.triu(1) == 0).all())


def test_changing_a_future_token_leaves_earlier_outputs_alone():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(4, 2, generator=g, dtype=torch.float64) for _ in range(3))
    out = A.attention(q, k, v)[0]
    k2, v2 = k.clone(), v.clone()
    k2[3] += 5.0
    v2[3] -= 7.0
    out2 = A.attention(q, k2, v2)[0]
    assert torch.equal(out[:3], out2[:3]) and not torch.allclose(out[3], out2[3])
    assert not torch.allclose(
        A.attention(q, k, v, causal=False)[0][:3], A.attention(q, k2, v2, causal=False)[0][:3]
    )


def test_formatting_and_validation():
    grid = A.format_mask(["a", "b", "c"]).splitlines()
    assert len(grid) == 4 and grid[1].endswith("x . .") and grid[3].endswith("x x x")
    table = A.format_weights(torch.eye(2), ["a", "b"]).splitlines()
    assert table[1].split() == ["a", "1.00", "0.00"]
    with pytest.raises(ValueError, match="q and k"):
        A.attention(torch.zeros(3, 2), torch.zeros(3, 4), torch.zeros(3, 2))
    with pytest.raises(TypeError, match="q"):
        A.attention(torch.zeros(3, 2, dtype=torch.long), torch.zeros(3, 2), torch.zeros(3, 2))
