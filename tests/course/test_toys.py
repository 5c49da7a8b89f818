"""The course's toy kit, against independent references: a hand-written GPT forward (explicit
softmax attention, no scaled_dot_product_attention), a hand-written AdamW loop, the model's
own forward where the paths must agree."""

import math

import pytest
import torch
import torch.nn.functional as F

from lmcore.course import toys as T
from lmcore.loss import causal_lm_loss
from lmcore.model import GPT, GPTConfig


def test_toy_vocab_puts_pad_eos_bos_first_then_the_words():
    assert T.toy_vocab(["a", "b", "a"]) == ("PAD", "EOS", "a", "b")
    assert T.toy_vocab(["a"], bos=True) == ("PAD", "EOS", "BOS", "a")
    v = T.toy_vocab(["x"], bos=True, specials=("<pad>", "<eos>", "<bos>"))
    assert (v.index("<pad>"), v.index("<eos>"), v.index("<bos>")) == (T.PAD, T.EOS, T.BOS) == (0, 1, 2)
    with pytest.raises(TypeError, match="words"):
        T.toy_vocab("a b")
    with pytest.raises(ValueError, match="specials"):
        T.toy_vocab(["a"], specials=("P", "P", "B"))


def test_word_tokenizer_round_trips_and_follows_the_convention():
    tok = T.WordTokenizer(["the", "cat", "sat"], bos=True)
    assert (tok.pad_id, tok.eos_id, tok.bos_id, tok.vocab_size) == (0, 1, 2, 6)
    assert tok.encode("the cat sat") == [3, 4, 5]
    assert tok.decode(torch.tensor([2, 3, 4, 1])) == "BOS the cat EOS"
    assert T.WordTokenizer(["a"]).bos_id is None
    with pytest.raises(ValueError, match="'dog'"):
        tok.encode("the dog")
    with pytest.raises(TypeError, match="str"):
        tok.encode([3])
    unk = T.WordTokenizer(["the", "<unk>"], unk="<unk>")
    assert unk.encode("the dog") == [2, 3]
    with pytest.raises(ValueError, match="unk"):
        T.WordTokenizer(["the"], unk="<unk>")


def test_toy_gpt_is_seeded_sized_and_in_eval_mode():
    a, b = T.toy_gpt(11, seed=3), T.toy_gpt(11, seed=3)
    torch.manual_seed(3)
    ref = GPT(GPTConfig(vocab_size=11, block_size=16, n_layer=1, n_head=2, n_embd=16))
    for p, q, r in zip(a.parameters(), b.parameters(), ref.parameters()):
        assert torch.equal(p, q) and torch.equal(p, r)
    assert not a.training
    c = T.toy_gpt(7, block_size=8, n_layer=2, n_embd=32, init_std=0.5, dtype=torch.float64)
    cfg = c.config
    assert (cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_embd, cfg.init_std) == (7, 8, 2, 32, 0.5)
    assert c.wte.weight.dtype == torch.float64
    assert not torch.equal(T.toy_gpt(11, seed=4).wte.weight, a.wte.weight)


def _naive_forward(model, ids, allowed, pos=None):
    """GPT by hand (eval mode): explicit attention scores, masked softmax, no SDPA."""
    cfg, (N, L) = model.config, ids.shape
    H, D = cfg.n_head, cfg.n_embd
    pos = torch.arange(L)[None] if pos is None else pos
    x = model.wte.weight[ids] + model.wpe.weight[pos]
    allowed = allowed.expand(N, 1, L, L)

    def ln(m, t):
        return F.layer_norm(t, (D,), m.weight, m.bias, 1e-5)

    for blk in model.blocks:
        h = ln(blk.ln_1, x) @ blk.attn.c_attn.weight.T + blk.attn.c_attn.bias
        q, k, v = (t.reshape(N, L, H, D // H).transpose(1, 2) for t in h.split(D, dim=2))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D // H)
        s = s.masked_fill(~allowed, float("-inf")).softmax(-1)
        y = (s @ v).transpose(1, 2).reshape(N, L, D)
        x = x + y @ blk.attn.c_proj.weight.T + blk.attn.c_proj.bias
        m = F.gelu(ln(blk.ln_2, x) @ blk.mlp.c_fc.weight.T + blk.mlp.c_fc.bias)
        x = x + m @ blk.mlp.c_proj.weight.T + blk.mlp.c_proj.bias
    return ln(model.ln_f, x) @ model.wte.weight.T


def test_forward_with_attention_reproduces_the_models_own_forward():
    model = T.toy_gpt(13, n_layer=2, init_std=0.3, dtype=torch.float64, seed=1)
    ids = torch.randint(13, (3, 9), generator=torch.Generator().manual_seed(0))
    tril = torch.ones(9, 9, dtype=torch.bool).tril()
    with torch.no_grad():
        assert torch.allclose(T.forward_with_attention(model, ids, tril), model(ids), atol=1e-12)
        doc = torch.tensor([[0] * 4 + [1] * 5] * 3)
        from lmcore.shift import document_causal_mask

        got = T.forward_with_attention(model, ids, document_causal_mask(doc)[:, None])
        assert torch.allclose(got, model(ids, document_ids=doc), atol=1e-12)
    with pytest.raises(TypeError, match="bool"):
        T.forward_with_attention(model, ids, tril.long())
    with pytest.raises(ValueError, match="block_size"):
        T.forward_with_attention(model, torch.zeros(1, 17, dtype=torch.long), tril)


def test_forward_without_causal_mask_against_a_hand_written_gpt():
    model = T.toy_gpt(13, n_layer=2, init_std=0.3, dtype=torch.float64, seed=2)
    ids = torch.randint(13, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = torch.ones(7, 7, dtype=torch.bool)
        got = T.forward_without_causal_mask(model, ids)
        assert torch.allclose(got, _naive_forward(model, ids, full), atol=1e-10)
        assert torch.allclose(model(ids), _naive_forward(model, ids, full.tril()), atol=1e-10)
        later = ids.clone()
        later[:, -1] = (later[:, -1] + 1) % 13  # change only the last token
        assert (T.forward_without_causal_mask(model, later)[:, 0] - got[:, 0]).abs().max() > 1e-6
        assert torch.allclose(model(later)[:, :-1], model(ids)[:, :-1], atol=1e-12)


def test_forward_without_causal_mask_never_reads_padding():
    model = T.toy_gpt(13, init_std=0.3, dtype=torch.float64)
    ids = torch.tensor([[0, 0, 5, 6, 7], [5, 6, 7, 8, 9]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    with torch.no_grad():
        out = T.forward_without_causal_mask(model, ids, mask)
        alone = T.forward_without_causal_mask(model, ids[:1, 2:])
        assert torch.allclose(out[0, 2:], alone[0], atol=1e-12)  # padding unread, positions reset
        other = ids.clone()
        other[0, :2] = 9
        assert torch.allclose(
            T.forward_without_causal_mask(model, other, mask)[0, 2:], out[0, 2:], atol=1e-12
        )
        ref = _naive_forward(model, ids, mask[:, None, None, :] == 1, (mask.cumsum(-1) - 1).clamp(min=0))
        assert torch.allclose(out, ref, atol=1e-10)


def test_dropout_acts_only_in_training_mode_like_the_model():
    model = T.toy_gpt(11, dropout=0.5, init_std=0.3, seed=0)
    ids = torch.randint(11, (2, 6), generator=torch.Generator().manual_seed(2))
    tril = torch.ones(6, 6, dtype=torch.bool).tril()
    with torch.no_grad():
        assert torch.allclose(T.forward_with_attention(model, ids, tril), model(ids), atol=1e-6)
        model.train()
        a, b = T.forward_without_causal_mask(model, ids), T.forward_without_causal_mask(model, ids)
        assert not torch.allclose(a, b)
        torch.manual_seed(5)
        own = model(ids)
        torch.manual_seed(5)
        assert torch.allclose(T.forward_with_attention(model, ids, tril), own, atol=1e-6)


def test_forward_with_mask_hides_padding_and_resets_positions():
    model = T.toy_gpt(13, init_std=0.3, dtype=torch.float64)
    ids, mask = torch.tensor([[0, 0, 5, 6, 7]]), torch.tensor([[0, 0, 1, 1, 1]])
    with torch.no_grad():
        assert torch.allclose(T.forward_with_mask(model, ids, mask)[0, 2:], model(ids[:, 2:])[0], atol=1e-12)
        shifted = T.forward_with_mask(model, ids, mask, reset_positions=False)[0, 2:]
        assert (shifted - model(ids[:, 2:])[0]).abs().max() > 1e-6


def _hand_adamw(model, batches, lr, betas=(0.9, 0.999), eps=1e-8, lr_at=None, clip=None):
    """AdamW with weight decay 0 written out: m, v, bias correction; with ``lr_at(step)`` a
    learning rate per step, with ``clip`` the gradients scaled to a total norm of at most clip."""
    params = list(model.parameters())
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    losses = []
    for t, ids in enumerate(batches, start=1):
        loss = causal_lm_loss(model(ids), ids)
        grads = torch.autograd.grad(loss, params)
        lr = lr if lr_at is None else lr_at(t - 1)
        if clip is not None:
            norm = torch.sqrt(sum((g**2).sum() for g in grads))
            grads = [g * min(1.0, clip / (float(norm) + 1e-6)) for g in grads]
        with torch.no_grad():
            for p, g, mi, vi in zip(params, grads, m, v):
                mi.mul_(betas[0]).add_(g, alpha=1 - betas[0])
                vi.mul_(betas[1]).addcmul_(g, g, value=1 - betas[1])
                mhat, vhat = mi / (1 - betas[0] ** t), vi / (1 - betas[1] ** t)
                p.sub_(lr * mhat / (vhat.sqrt() + eps))
        losses.append(float(loss.detach()))
    return losses


def test_fit_matches_a_hand_written_adamw_loop_and_restores_the_mode():
    g = torch.Generator().manual_seed(0)
    batches = [torch.randint(9, (4, 8), generator=g) for _ in range(6)]
    model, ref = T.toy_gpt(9, dtype=torch.float64), T.toy_gpt(9, dtype=torch.float64)
    seen = []
    losses = T.fit(
        model, lambda s: batches[s], steps=6, lr=1e-2, on_step=lambda s, m: seen.append((s, m.training))
    )
    assert seen == [(s, True) for s in range(6)] and not model.training
    want = _hand_adamw(ref, batches, 1e-2)
    assert len(losses) == 6 and all(isinstance(x, float) for x in losses)
    assert losses == pytest.approx(want, rel=1e-9, abs=1e-12)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p, q, atol=1e-9)


def test_fit_with_a_schedule_clipping_and_betas_matches_the_hand_written_loop():
    g = torch.Generator().manual_seed(2)
    batches = [torch.randint(9, (4, 8), generator=g) for _ in range(5)]
    schedule = lambda step: 3e-2 * (step + 1) / 5  # noqa: E731
    model, ref = T.toy_gpt(9, dtype=torch.float64), T.toy_gpt(9, dtype=torch.float64)
    losses = T.fit(
        model, lambda s: batches[s], steps=5, lr=1.0, lr_at=schedule, grad_clip=0.05, betas=(0.8, 0.9)
    )
    want = _hand_adamw(ref, batches, None, betas=(0.8, 0.9), lr_at=schedule, clip=0.05)
    assert losses == pytest.approx(want, rel=1e-9, abs=1e-12)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p, q, atol=1e-9)
    unclipped = T.toy_gpt(9, dtype=torch.float64)
    T.fit(unclipped, lambda s: batches[s], steps=5, lr=1.0, lr_at=schedule, betas=(0.8, 0.9))
    assert any(not torch.allclose(p, q) for p, q in zip(unclipped.parameters(), model.parameters()))
    with pytest.raises(TypeError, match="lr_at"):
        T.fit(model, lambda s: batches[s], steps=1, lr=1e-3, lr_at=0.1)
    with pytest.raises(ValueError, match="grad_clip"):
        T.fit(model, lambda s: batches[s], steps=1, lr=1e-3, grad_clip=0.0)


def test_fit_takes_labels_or_a_loss_fn_and_checks_steps():
    ids = torch.randint(9, (4, 8), generator=torch.Generator().manual_seed(1))
    labels = ids.clone()
    labels[:, :3] = -100
    a = T.fit(T.toy_gpt(9), lambda s: (ids, labels), steps=3, lr=1e-2)
    b = T.fit(
        T.toy_gpt(9), lambda s: ids, steps=3, lr=1e-2, loss_fn=lambda m, x: causal_lm_loss(m(x), labels)
    )
    assert a == pytest.approx(b, rel=1e-6)
    model = T.toy_gpt(9).train()
    T.fit(model, lambda s: ids, steps=1, lr=1e-3)
    assert model.training
    with pytest.raises(ValueError, match="steps"):
        T.fit(model, lambda s: ids, steps=0, lr=1e-3)


def test_fit_uses_lmcores_optimiser_decaying_matrices_only():
    """With zero gradients AdamW's step is decay alone, p <- p (1 - lr wd): matrices shrink by
    that factor each step, vectors (biases, LayerNorm gains) stay (configure_optimizer's groups)."""
    model = T.toy_gpt(9, init_std=0.3, dtype=torch.float64)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    ids = torch.zeros(1, 4, dtype=torch.long)
    lr, wd, steps = 0.1, 0.5, 3
    T.fit(model, lambda s: ids, steps=steps, lr=lr, weight_decay=wd, loss_fn=lambda m, x: 0.0 * m(x).sum())
    for k, p in model.named_parameters():
        factor = (1 - lr * wd) ** steps if p.dim() >= 2 else 1.0
        assert torch.allclose(p, before[k] * factor, rtol=0, atol=1e-12), k
    with pytest.raises(ValueError, match="lr"):
        T.fit(model, lambda s: ids, steps=1, lr=0.0)
