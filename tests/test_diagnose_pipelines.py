"""lmcore.diagnose on pipelines built from other libraries' pieces, as practitioners write them.

Models: torch.nn.TransformerEncoderLayer (post- and pre-norm, dropout, its eval fast path, which
gives NaN at the query positions of left padding), torch.nn.MultiheadAttention with one boolean
mask, and a torch.nn.GRU (right padding only). Losses: F.cross_entropy written by hand (HF
style, reduction='none' with a mask, completion-only, a global num_items, label smoothing, a
z-loss, PAD = EOS). None of lmcore's model or loss is used. Every correct pipeline passes (once
what it does on purpose is declared), and each bug fails the set of rows lmcore.diagnose's
docstring names for it.
"""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from lmcore.diagnose import run_checks

V, L = 24, 16


class EncoderLM(nn.Module):
    """Learned positions counted from the mask, one TransformerEncoderLayer under a causal mask
    plus a key-padding mask. ``causal_offset=1`` lets position t read t + 1 (a bug)."""

    def __init__(self, norm_first=False, dropout=0.1, causal_offset=0, use_mask=True, reset=True, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb, self.pos = nn.Embedding(V, 32), nn.Embedding(64, 32)
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout, batch_first=True, norm_first=norm_first)
        self.head = nn.Linear(32, V)
        nn.init.normal_(self.head.weight, std=0.02)  # a GPT-style init: first loss near ln V
        self.causal_offset, self.use_mask, self.reset = causal_offset, use_mask, reset

    def forward(self, ids, mask):
        T = ids.shape[1]
        pos = (mask.cumsum(-1) - 1).clamp(min=0) if self.reset else torch.arange(T).expand_as(ids)
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1 + self.causal_offset)
        pad = (mask == 0) if self.use_mask else None
        return self.head(self.layer(self.emb(ids) + self.pos(pos), src_mask=causal, src_key_padding_mask=pad))


class MHALM(nn.Module):
    """nn.MultiheadAttention with one (N*heads, T, T) boolean mask: causal and no padding keys
    (each query may always read itself, so no row is empty)."""

    def __init__(self, seed=1):
        super().__init__()
        torch.manual_seed(seed)
        self.emb, self.pos = nn.Embedding(V, 16), nn.Embedding(64, 16)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.norm, self.head = nn.LayerNorm(16), nn.Linear(16, V)

    def forward(self, ids, mask):
        T = ids.shape[1]
        x = self.emb(ids) + self.pos((mask.cumsum(-1) - 1).clamp(min=0))
        blocked = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)[None] | (mask[:, None, :] == 0)
        blocked = blocked & ~torch.eye(T, dtype=torch.bool)[None]
        h, _ = self.attn(x, x, x, attn_mask=blocked.repeat_interleave(2, 0), need_weights=False)
        return self.head(self.norm(x + h))


class GRULM(nn.Module):
    """A GRU reads every token it is given, padding included: correct under right padding only."""

    def __init__(self, seed=2):
        super().__init__()
        torch.manual_seed(seed)
        self.emb, self.rnn, self.head = (
            nn.Embedding(V, 16),
            nn.GRU(16, 16, batch_first=True),
            nn.Linear(16, V),
        )

    def forward(self, ids, mask):
        return self.head(self.rnn(self.emb(ids))[0])


def hf_loss(logits, ids, mask, **kw):  # transformers' recipe: labels -100 at padding, shift inside
    labels = ids.masked_fill(mask == 0, -100)
    shift_logits, shift_labels = logits[..., :-1, :].contiguous(), labels[..., 1:].contiguous()
    return F.cross_entropy(shift_logits.view(-1, logits.shape[-1]).float(), shift_labels.view(-1), **kw)


def masked_mean_loss(logits, ids, mask):  # reduction='none', weighted by the target mask
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    keep = mask[:, 1:].float()
    return (nll * keep).sum() / keep.sum()


PROMPT = 4  # completion-only training: the first PROMPT tokens of each row are the prompt


def prompt_tokens(ids, mask):
    return torch.arange(ids.shape[1]).expand_as(ids) < PROMPT


def sft_loss(logits, ids, mask):
    labels = ids.masked_fill((mask == 0) | prompt_tokens(ids, mask), -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))


MICRO = 4  # gradient accumulation over 4 micro-batches of equal size, one global num_items


def global_num_items_loss(logits, ids, mask):
    labels = ids.masked_fill(mask == 0, -100)[:, 1:]
    num_items = MICRO * int((labels != -100).sum())
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), labels.reshape(-1), reduction="sum") / num_items


def z_loss_fn(logits, ids, mask):
    labels = ids.masked_fill(mask == 0, -100)[:, 1:]
    log_z = torch.logsumexp(logits[:, :-1], -1)[labels != -100]
    return hf_loss(logits, ids, mask) + 1e-4 * (log_z**2).mean()


def smoothed_loss(logits, ids, mask):
    return hf_loss(logits, ids, mask, label_smoothing=0.1)


CORRECT = {  # name: (model, loss_fn, declarations)
    "encoder_post_norm_hf": (lambda: EncoderLM(), hf_loss, {}),
    "encoder_pre_norm_masked_mean": (lambda: EncoderLM(norm_first=True), masked_mean_loss, {}),
    "mha_hf": (MHALM, hf_loss, {}),
    "gru_right_padding_only": (GRULM, hf_loss, dict(left_padding=False)),
    "encoder_completion_only": (lambda: EncoderLM(), sft_loss, dict(unscored=prompt_tokens)),
    "encoder_global_num_items": (lambda: EncoderLM(), global_num_items_loss, dict(num_items_ratio=MICRO)),
    "mha_label_smoothing": (MHALM, smoothed_loss, dict(label_smoothing=0.1)),
    "mha_z_loss": (MHALM, z_loss_fn, dict(z_loss=1e-4)),
    "encoder_pad_is_eos": (lambda: EncoderLM(), hf_loss, dict(pad_id=1, eos_id=1)),
}


def _checks(model, loss_fn, **kw):
    kw = {"pad_id": 0, "eos_id": 1, **kw}
    return run_checks(model, loss_fn, vocab_size=V, seq_len=L, **kw)


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_pipelines_from_other_libraries_pass(name):
    make, loss_fn, declared = CORRECT[name]
    model = make().train()  # dropout on: run_checks switches the module to eval mode
    report = _checks(model, loss_fn, **declared)
    assert report.passed, str(report)
    assert model.training


def test_encoder_eval_fast_path_nan_at_left_pads_is_ignored_and_said_so():
    model = EncoderLM().eval()
    ids = torch.tensor([[0, 0, 0, 5, 6, 7]])
    mask = (ids != 0).long()
    with torch.no_grad():
        out = model(ids, mask)
    if not torch.isnan(out[0, :3]).any():
        pytest.skip("this PyTorch build's fast path gives no NaN at left pads")
    assert torch.isfinite(out[0, 3:]).all()
    report = _checks(model, hf_loss)
    assert report.passed, str(report)
    assert "ignored" in report["finite_logits"].detail


@pytest.mark.parametrize(
    "name", ["encoder_completion_only", "encoder_global_num_items", "mha_label_smoothing"]
)
def test_each_false_alarm_fails_undeclared_and_names_the_declaration(name):
    make, loss_fn, declared = CORRECT[name]
    report = _checks(make(), loss_fn)
    word = {
        "encoder_completion_only": "unscored=",
        "encoder_global_num_items": "num_items_ratio",
        "mha_label_smoothing": "label_smoothing=",
    }[name]
    assert not report.passed and any(word in report[n].detail for n in report.failed), str(report)


def test_gru_that_reads_left_padding_names_left_padding_false():
    report = _checks(GRULM(), hf_loss)
    assert set(report.failed) == {"padding_unread", "left_padding"}, str(report)
    assert "left_padding=False" in report["padding_unread"].detail


# ---- bugs: each is a one-line change to a correct pipeline ----------------------------------


def _ce(logits, labels, **kw):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), **kw)


def _labels(ids, mask):
    return ids.masked_fill(mask == 0, -100)


def no_shift(lg, ids, m):
    return _ce(lg, _labels(ids, m))


def double_shift(lg, ids, m):
    return _ce(lg[:, :-2], _labels(ids, m)[:, 2:])


def softmax_first(lg, ids, m):
    return _ce(lg.softmax(-1)[:, :-1], _labels(ids, m)[:, 1:])


def padding_scored(lg, ids, m):  # PAD -> PAD
    return _ce(lg[:, :-1], ids[:, 1:])


def mask_after_shift(lg, ids, m):  # the off-by-one: masks the input side, scores EOS -> PAD
    labels = ids[:, 1:].clone()
    labels[m[:, 1:] == 0] = -100  # correct so far ...
    labels = ids[:, 1:].masked_fill(m[:, :-1] == 0, -100)  # ... then the input-side mask instead
    return _ce(lg[:, :-1], labels)


def row_means(lg, ids, m):
    return torch.stack([hf_loss(lg[i : i + 1], ids[i : i + 1], m[i : i + 1]) for i in range(len(ids))]).mean()


def specials_masked(lg, ids, m):  # "ignore all special tokens" (PAD 0 and EOS 1)
    return _ce(lg[:, :-1], ids.masked_fill(ids <= 1, -100)[:, 1:])


def detached_prefix(lg, ids, m):  # the first 6 positions' logits are cut from the graph
    return hf_loss(torch.cat([lg[:, :6].detach(), lg[:, 6:]], 1), ids, m)


def scaled(factor):
    def loss(lg, ids, m):
        return hf_loss(lg * factor, ids, m)

    return loss


def in_bits(lg, ids, m):
    return hf_loss(lg, ids, m) / math.log(2)


def summed(lg, ids, m):
    return hf_loss(lg, ids, m, reduction="sum")


def token_denominator(lg, ids, m):
    return hf_loss(lg, ids, m, reduction="sum") / m.sum()


def bf16(lg, ids, m):
    labels = _labels(ids, m)[:, 1:]
    return _ce(lg[:, :-1].bfloat16(), labels).float()


def eos_down_weighted(lg, ids, m):  # class weights: EOS x 0.1 (normalised by the weights' sum)
    w = torch.ones(V)
    w[1] = 0.1
    return _ce(lg[:, :-1], _labels(ids, m)[:, 1:], weight=w)


def other_row_labels(lg, ids, m):
    return hf_loss(lg, ids.roll(1, 0), m.roll(1, 0))


class NaNModel(EncoderLM):
    def forward(self, ids, mask):
        return super().forward(ids, mask).masked_fill(ids[..., None] == 7, float("nan"))


class BigHead(EncoderLM):
    def __init__(self):
        super().__init__()
        with torch.no_grad():
            self.head.weight.mul_(50)


BUGS = {  # name: (model, loss_fn, the rows it fails, words in a failing row's detail)
    "no_shift": (EncoderLM, no_shift, {"alignment", "perfect_logits", "last_unscored"}, "shift is missing"),
    "double_shift": (EncoderLM, double_shift, {"alignment", "perfect_logits", "all_scored"}, "shifted twice"),
    "softmax_first": (EncoderLM, softmax_first, {"perfect_logits", "logit_scale"}, "softmax"),
    "padding_scored": (EncoderLM, padding_scored, {"padding_unscored"}, "PAD -> PAD"),
    "mask_after_shift": (EncoderLM, mask_after_shift, {"padding_unscored"}, "one target too late"),
    "row_means": (MHALM, row_means, {"equal_weights"}, "per-row"),
    "specials_masked": (MHALM, specials_masked, {"eos_scored"}, "never learns to stop"),
    "detached_prefix": (EncoderLM, detached_prefix, {"all_scored", "equal_weights"}, "detached"),
    "logits_halved": (MHALM, scaled(0.5), {"logit_scale"}, "x 0.5"),
    "in_bits": (EncoderLM, in_bits, {"zero_logits", "first_loss"}, "bits"),
    "summed": (EncoderLM, summed, {"zero_logits", "first_loss"}, "summed"),
    "token_denominator": (EncoderLM, token_denominator, {"zero_logits"}, "real tokens"),
    "bf16_loss": (EncoderLM, bf16, {"zero_logits", "logit_scale"}, "low precision"),
    "eos_down_weighted": (MHALM, eos_down_weighted, {"equal_weights"}, "per-class"),
    "other_row_labels": (
        EncoderLM,
        other_row_labels,
        {"alignment", "perfect_logits", "padding_unscored", "eos_scored"},
        "wrong offset",
    ),
    "sees_next_token": (lambda: EncoderLM(causal_offset=1), hf_loss, {"future"}, "sees the future"),
    "ignores_mask": (
        lambda: EncoderLM(use_mask=False),
        hf_loss,
        {"padding_unread", "left_padding"},
        "ignored",
    ),
    "no_position_reset": (lambda: EncoderLM(reset=False), hf_loss, {"left_padding"}, "not reset"),
    "nan_in_model": (NaNModel, hf_loss, {"finite_logits"}, "NaN/inf"),
    "head_times_50": (BigHead, hf_loss, {"first_loss"}, "too large"),
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_bug_fails_its_documented_rows_and_names_the_cause(name):
    make, loss_fn, expected, words = BUGS[name]
    report = _checks(make(), loss_fn)
    assert set(report.failed) == expected, str(report)
    assert any(words in report[n].detail for n in expected), str(report)


def test_the_bug_signatures_are_documented_in_the_module():
    import lmcore.diagnose as dx

    for name in ("detached", "in bits", "num_items_ratio", "off-by-one", "left_padding=False", "unscored="):
        assert name in dx.__doc__, name


@pytest.mark.parametrize("factor", [0.5, 0.9, 0.99, 0.995, 1.005, 1.01, 1.1, 2.0, 10.0])
def test_a_rescaled_loss_is_caught_at_any_factor_outside_the_stated_tolerance(factor):
    report = _checks(MHALM(), scaled(factor))
    assert "logit_scale" in report.failed, str(report)
    ok = _checks(MHALM(), hf_loss)["logit_scale"]
    band = float(ok.detail.split("|a - 1| > ")[1].rstrip(")"))
    assert band < abs(factor - 1)


def test_detached_positions_are_named_by_the_gradient():
    report = _checks(EncoderLM(), detached_prefix)
    assert "[0, 1, 2, 3, 4, 5]" in report["all_scored"].detail
    assert "zero gradient" in report["all_scored"].detail


def test_a_declared_prompt_that_is_still_scored_fails():
    def too_short_prompt(ids, mask):
        return torch.arange(ids.shape[1]).expand_as(ids) < PROMPT + 2

    report = _checks(EncoderLM(), sft_loss, unscored=too_short_prompt)
    assert "all_scored" in report.failed and "declaration" in report["all_scored"].detail


def test_unscored_and_num_items_ratio_are_validated():
    with pytest.raises(TypeError, match="unscored"):
        _checks(EncoderLM(), hf_loss, unscored=3)
    with pytest.raises(ValueError, match="unscored"):
        _checks(EncoderLM(), hf_loss, unscored=lambda ids, mask: ids[:, :2] > 0)
    for bad, exc in ((0, ValueError), (-1.0, ValueError), ("4", TypeError), (True, TypeError)):
        with pytest.raises(exc, match="num_items_ratio"):
            _checks(EncoderLM(), hf_loss, num_items_ratio=bad)
