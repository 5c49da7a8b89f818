"""Sampling: top-k / top-p keep the right tokens, greedy, seeded, never past block_size."""

import math
import types

import pytest
import torch

from lmcore.model import GPT, GPTConfig
from lmcore.sample import filter_logits, generate, next_token_distribution


def naive_top_p(probs, p):
    """Indices kept by nucleus sampling, by a plain loop over the sorted probabilities."""
    order = sorted(range(len(probs)), key=lambda i: -probs[i])
    kept, mass = [], 0.0
    for i in order:
        kept.append(i)
        mass += probs[i]
        if mass >= p:
            break
    return set(kept)


def test_top_k_keeps_the_k_largest():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        z = torch.randn(12, generator=g)
        for k in (1, 3, 12, 50):
            kept = set(torch.isfinite(filter_logits(z, top_k=k)).nonzero().flatten().tolist())
            ref = set(sorted(range(12), key=lambda i: -float(z[i]))[:k])
            assert kept == ref


def test_top_p_keeps_the_nucleus():
    g = torch.Generator().manual_seed(1)
    for _ in range(30):
        z = 2 * torch.randn(10, generator=g, dtype=torch.float64)
        probs = torch.softmax(z, -1).tolist()
        for p in (0.05, 0.5, 0.9, 0.999):
            out = filter_logits(z, top_p=p)
            kept = set(torch.isfinite(out).nonzero().flatten().tolist())
            assert kept == naive_top_p(probs, p)
            assert torch.equal(out[list(kept)], z[list(kept)])  # kept logits unchanged
    z = torch.tensor([[3.0, 1.0, 0.0], [0.0, 0.0, 5.0]])
    assert torch.isfinite(filter_logits(z, top_p=1.0)).all()
    assert torch.isfinite(filter_logits(z, top_p=1e-6)).sum(-1).tolist() == [1, 1]


def test_next_token_distribution():
    z = torch.tensor([1.0, 3.0, 2.0, 3.0])
    assert next_token_distribution(z, temperature=0).tolist() == [0.0, 1.0, 0.0, 0.0]
    for T in (0.5, 1.0, 2.0):
        ref = [math.exp(v / T) for v in z.tolist()]
        ref = [r / sum(ref) for r in ref]
        assert next_token_distribution(z, temperature=T).tolist() == pytest.approx(ref, rel=1e-6)
    q = next_token_distribution(z, temperature=1.0, top_k=2)
    assert q.tolist() == pytest.approx([0.0, 0.5, 0.0, 0.5])
    with pytest.raises(ValueError, match="temperature"):
        next_token_distribution(z, temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        next_token_distribution(z, top_p=0)
    with pytest.raises(ValueError, match="top_k"):
        next_token_distribution(z, top_k=0)


class FixedLogits(torch.nn.Module):
    """A stand-in model: same logits at every position; records the lengths it was fed."""

    def __init__(self, logits, block_size=4):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.as_tensor(logits, dtype=torch.float32))
        self.config = types.SimpleNamespace(block_size=block_size)
        self.lengths = []

    def forward(self, x):
        self.lengths.append(x.shape[1])
        return self.logits.expand(x.shape[0], x.shape[1], -1)


def test_sampling_frequencies_and_filters():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    model = FixedLogits(probs.log())
    out = generate(
        model, torch.zeros(2000, 1, dtype=torch.long), 1, generator=torch.Generator().manual_seed(0)
    )
    freq = torch.bincount(out[:, 1], minlength=4).double() / 2000
    assert (freq - probs.double()).abs().max() < 0.04
    out = generate(
        model, torch.zeros(500, 1, dtype=torch.long), 1, top_k=2, generator=torch.Generator().manual_seed(0)
    )
    assert set(out[:, 1].tolist()) == {0, 1}
    out = generate(
        model,
        torch.zeros(500, 1, dtype=torch.long),
        1,
        top_p=0.85,
        generator=torch.Generator().manual_seed(0),
    )
    assert set(out[:, 1].tolist()) == {0, 1, 2}


def test_never_reads_past_the_last_trained_position():
    # Training windows of block_size tokens score positions 0..block_size-2 only, so the
    # context is cropped to block_size - 1 tokens.
    model = FixedLogits(torch.zeros(5), block_size=4)
    out = generate(model, list(range(5)) * 2, 7, generator=torch.Generator().manual_seed(0))
    assert out.dim() == 1 and len(out) == 17 and out[:10].tolist() == list(range(5)) * 2
    assert model.lengths and max(model.lengths) == 3
    short = FixedLogits(torch.zeros(5), block_size=4)
    generate(short, [1], 2)
    assert short.lengths == [1, 2]


def test_the_last_window_position_gets_no_gradient_in_training():
    # Why generate stops at block_size - 1: the last position's embedding is never trained.
    from lmcore import causal_lm_loss

    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=16))
    ids = torch.randint(0, 13, (4, 8), generator=torch.Generator().manual_seed(0))
    causal_lm_loss(model(ids), ids).backward()
    grad = model.wpe.weight.grad
    assert grad[7].abs().max() == 0 and bool((grad[:7].abs().amax(dim=1) > 0).all())


def test_greedy_matches_a_naive_loop_and_seeds_reproduce():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=16))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    model.train()
    prompt = [1, 2, 3]
    got = generate(model, prompt, 12, temperature=0)
    assert model.training  # mode restored
    ids = list(prompt)
    model.eval()
    with torch.no_grad():
        for _ in range(12):
            ids.append(int(model(torch.tensor([ids[-8:]]))[0, -1].argmax()))
    assert got.tolist() == ids
    a = generate(model, prompt, 12, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(7))
    b = generate(model, prompt, 12, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(7))
    c = generate(model, prompt, 12, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_eos_stops_and_fills():
    model = FixedLogits(torch.tensor([0.0, 0.0, 9.0]), block_size=4)
    out = generate(model, [[0], [1]], 5, temperature=0, eos_id=2)
    assert out.tolist() == [[0, 2], [1, 2]]
    with pytest.raises(ValueError, match="prompt_ids"):
        generate(model, [], 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, [0], -1)
