"""GPT: causality, document isolation, first loss near ln V, tying, errors, a naive reference."""

import math

import pytest
import torch
import torch.nn.functional as F

from lmcore.loss import chunked_causal_lm_loss
from lmcore.model import GPT, GPTConfig
from lmcore.shift import pack_documents


def make(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(vocab_size=11, block_size=16, n_layer=2, n_head=2, n_embd=16)
    cfg.update(kw)
    return GPT(GPTConfig(**cfg)).eval()


def naive_logits(model, x, doc=None, pos=None):
    """Same weights, written out with explicit masks and softmax, float64."""
    m = model.double()
    N, L = x.shape
    pos = torch.arange(L)[None].expand(N, L) if pos is None else pos
    h = m.wte.weight[x] + m.wpe.weight[pos]
    allowed = torch.ones(L, L, dtype=torch.bool).tril()[None].expand(N, L, L)
    if doc is not None:
        allowed = allowed & (doc[:, :, None] == doc[:, None, :])
    H = m.config.n_head
    for b in m.blocks:
        a = F.layer_norm(h, (h.shape[-1],), b.ln_1.weight, b.ln_1.bias)
        q, k, v = (a @ b.attn.c_attn.weight.T + b.attn.c_attn.bias).chunk(3, dim=-1)
        outs = []
        for head in range(H):
            sl = slice(head * h.shape[-1] // H, (head + 1) * h.shape[-1] // H)
            s = q[..., sl] @ k[..., sl].transpose(1, 2) / math.sqrt(sl.stop - sl.start)
            s = s.masked_fill(~allowed, float("-inf"))
            outs.append(torch.softmax(s, -1) @ v[..., sl])
        h = h + torch.cat(outs, -1) @ b.attn.c_proj.weight.T + b.attn.c_proj.bias
        a = F.layer_norm(h, (h.shape[-1],), b.ln_2.weight, b.ln_2.bias)
        u = F.gelu(a @ b.mlp.c_fc.weight.T + b.mlp.c_fc.bias)
        h = h + u @ b.mlp.c_proj.weight.T + b.mlp.c_proj.bias
    h = F.layer_norm(h, (h.shape[-1],), m.ln_f.weight, m.ln_f.bias)
    out = h @ m.wte.weight.T
    model.float()
    return out


def test_matches_naive_reference_with_and_without_documents():
    model = make()
    with torch.no_grad():  # make the LayerNorms non-trivial
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    x = torch.randint(0, 11, (2, 12))
    doc = torch.tensor([[0] * 5 + [1] * 7, [0] * 12])
    pos = torch.tensor([list(range(5)) + list(range(7)), list(range(12))])
    with torch.no_grad():
        got = model(x).double()
        got_doc = model(x, document_ids=doc, position_ids=pos).double()
    torch.testing.assert_close(got, naive_logits(model, x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got_doc, naive_logits(model, x, doc, pos), rtol=1e-4, atol=1e-5)


def test_causal_changing_future_tokens_leaves_earlier_logits():
    model = make()
    x = torch.randint(0, 11, (3, 16))
    for t in (0, 5, 15):
        y = x.clone()
        y[:, t:] = (y[:, t:] + 1 + torch.randint(0, 9, y[:, t:].shape)) % 11
        with torch.no_grad():
            a, b = model(x), model(y)
        torch.testing.assert_close(a[:, :t], b[:, :t], rtol=0, atol=1e-6)
        assert (a[:, t] - b[:, t]).abs().max() > 1e-4  # position t itself does change


def test_document_isolation_in_a_packed_row():
    model = make()
    docs = [[1, 2, 3, 4], [5, 6, 7], [8, 9, 2, 3, 4]]
    pb = pack_documents(docs, 16, eos_id=0, pad_id=10)
    changed = [[1, 2, 3, 4], [7, 7, 5], [8, 9, 2, 3, 4]]
    pc = pack_documents(changed, 16, eos_id=0, pad_id=10)
    with torch.no_grad():
        a = model(pb.input_ids, document_ids=pb.document_ids, position_ids=pb.position_ids)
        b = model(pc.input_ids, document_ids=pc.document_ids, position_ids=pc.position_ids)
        for k, doc in enumerate(docs):
            where = pb.document_ids[0] == k
            alone = model(torch.tensor([doc + [0]]))[0]
            torch.testing.assert_close(a[0, where], alone, rtol=1e-5, atol=1e-5)
    for k in (0, 2):  # the other documents did not move
        where = pb.document_ids[0] == k
        torch.testing.assert_close(a[0, where], b[0, where], rtol=0, atol=1e-6)
    # without document_ids the third document does see the second
    with torch.no_grad():
        c = model(pb.input_ids, position_ids=pb.position_ids)
    assert (c[0, pb.document_ids[0] == 2] - a[0, pb.document_ids[0] == 2]).abs().max() > 1e-4


@pytest.mark.parametrize("V", [5, 65, 256, 50257])
def test_first_loss_near_ln_v(V):
    model = make(seed=1, vocab_size=V, block_size=64, n_embd=64)
    x = torch.randint(0, V, (16, 64), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits = model(x).double()
    ref = F.cross_entropy(logits[:, :-1].reshape(-1, V), x[:, 1:].reshape(-1))
    assert abs(float(ref) - math.log(V)) < 0.05


def test_first_loss_near_ln_v_at_gpu_width():
    model = make(seed=3, vocab_size=65, block_size=32, n_layer=6, n_head=6, n_embd=384)
    x = torch.randint(0, 65, (8, 32), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        logits = model(x).double()
    ref = F.cross_entropy(logits[:, :-1].reshape(-1, 65), x[:, 1:].reshape(-1))
    assert abs(float(ref) - math.log(65)) < 0.05


def test_hidden_states_give_logits_and_chunked_loss():
    model = make(vocab_size=37)
    x = torch.randint(0, 37, (3, 16))
    h = model.hidden_states(x)
    assert h.shape == (3, 16, 16)
    torch.testing.assert_close(h @ model.lm_head.weight.T, model(x))
    labels = x.clone()
    labels[0, 10:] = -100
    with torch.no_grad():
        ref = F.cross_entropy(model(x)[:, :-1].double().reshape(-1, 37), labels[:, 1:].reshape(-1))
    got = chunked_causal_lm_loss(model.hidden_states(x), model.lm_head.weight, labels, chunk_size=5)
    assert abs(float(got.detach()) - float(ref)) < 1e-5


def test_weight_tying_and_parameter_count():
    model = make(bias=False)
    assert model.lm_head.weight is model.wte.weight
    c = model.config
    D, V, B, Lyr = c.n_embd, c.vocab_size, c.block_size, c.n_layer
    per_block = 2 * D + 3 * D * D + D * D + 4 * D * D + 4 * D * D  # 2 LN + attn + mlp, no bias
    total = V * D + B * D + Lyr * per_block + D
    assert model.num_parameters(non_embedding=False) == total
    assert model.num_parameters() == total - B * D
    assert model.flops_per_token() == 6 * (total - B * D) + 12 * Lyr * D * B
    assert model.flops_per_token(seq_len=4) == 6 * (total - B * D) + 12 * Lyr * D * 4


def test_dropout_only_in_training_mode():
    model = make(dropout=0.3)
    x = torch.randint(0, 11, (2, 8))
    with torch.no_grad():
        torch.testing.assert_close(model(x), model(x))
        model.train()
        assert (model(x) - model(x)).abs().max() > 1e-4


def test_overfits_one_small_batch():
    model = make(vocab_size=11).train()
    x = torch.randint(0, 11, (4, 16), generator=torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        logits = model(x)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 11), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.1


def test_clear_errors():
    model = make()
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="vocab_size"):
        model(torch.tensor([[1, 11]]))
    with pytest.raises(ValueError, match="vocab_size"):
        model(torch.tensor([[1, -100]]))
    with pytest.raises(TypeError, match="input_ids"):
        model(torch.zeros(1, 3))
    with pytest.raises(TypeError, match="input_ids"):
        model([[1, 2]])
    with pytest.raises(ValueError, match="input_ids"):
        model(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="document_ids"):
        model(torch.zeros(2, 4, dtype=torch.long), document_ids=torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="position_ids"):
        model(torch.zeros(1, 4, dtype=torch.long), position_ids=torch.tensor([[0, 1, 2, 16]]))
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(n_embd=10, n_head=3)
    with pytest.raises(ValueError, match="vocab_size"):
        GPTConfig(vocab_size=0)


def test_attention_argument_replaces_the_causal_mask():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)).eval()
    ids = torch.randint(0, 11, (2, 6))
    L = ids.shape[1]
    tril = torch.ones(L, L, dtype=torch.bool).tril()
    assert torch.equal(model(ids, attention=tril), model(ids))  # the causal pattern is the default
    ref = model(ids[:, :3])  # a position reads only earlier keys: a causal prefix
    free = model(ids, attention=torch.ones(L, L, dtype=torch.bool))
    assert torch.allclose(model(ids, attention=tril)[:, :3], ref, atol=1e-6)
    assert not torch.allclose(free[:, :3], ref, atol=1e-3)  # reading later keys changes them
    with pytest.raises(TypeError, match="attention"):
        model(ids, attention=tril.long())
    with pytest.raises(ValueError, match="attention"):
        model(ids, attention=tril[:5, :5])
    with pytest.raises(ValueError, match="not both"):
        model(ids, attention=tril, document_ids=torch.zeros_like(ids))
    with pytest.raises(ValueError, match="at least one key"):
        model(ids, attention=torch.zeros(L, L, dtype=torch.bool))
