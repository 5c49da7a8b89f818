"""lmcore.diagnose: correct pipelines (plain, label smoothing, z-loss, a dedicated pad id, dropout
left on, a pretrained start) pass every check; each classic label bug fails its own set of
checks, and the failing rows name the cause.

The pipelines here are written independently of lmcore's loss (plain F.cross_entropy), and the
model is a tiny bag-of-prefix model whose mask handling and positions can be switched, so the
checks are tested against known behaviour, not against lmcore's own output. A second set runs
the same bugs on lmcore's GPT.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from lmcore.diagnose import CHECK_NAMES, ragged_batch, run_checks, token_weights
from lmcore.model import GPT, GPTConfig


class PrefixMean(torch.nn.Module):
    """logits[t] = W · (mean of E[x_j] over the real tokens j <= t (causal) or of the whole row,
    + P[position]). ``use_mask=False`` reads padding; positions "reset" count real tokens only,
    "absolute" are the row index."""

    def __init__(self, V, D=8, causal=True, scale=0.05, use_mask=True, positions="reset", dropout=0.0):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.E = torch.nn.Parameter(torch.randn(V, D, generator=g))
        self.P = torch.nn.Parameter(0.5 * torch.randn(64, D, generator=g))
        self.W = torch.nn.Parameter(scale * torch.randn(D, V, generator=g))
        self.causal, self.use_mask, self.positions = causal, use_mask, positions
        self.drop = torch.nn.Dropout(dropout)

    def forward(self, ids, mask=None):
        m = (mask if mask is not None and self.use_mask else torch.ones_like(ids)).to(torch.float32)[
            ..., None
        ]
        h = self.E[ids] * m  # (N, L, D)
        if self.causal:
            h = h.cumsum(1) / m.cumsum(1).clamp(min=1)
        else:
            h = (h.sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp(min=1)).expand_as(h)
        L = ids.shape[1]
        pos = (
            torch.arange(L)[None].expand_as(ids)
            if self.positions == "absolute"
            else (m[..., 0].cumsum(1) - 1).clamp(min=0).long()
        )
        return self.drop(h + self.P[pos]) @ self.W


def _labels(ids, mask):
    return torch.where(mask.bool(), ids, torch.full_like(ids, -100))


def ce(logits, targets, **kw):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100, **kw)


def loss_good(logits, ids, mask):
    return ce(logits[:, :-1], _labels(ids, mask)[:, 1:])


def loss_smoothed(logits, ids, mask):
    return ce(logits[:, :-1], _labels(ids, mask)[:, 1:], label_smoothing=0.1)


def loss_z(logits, ids, mask, coef=1e-4):
    targets = _labels(ids, mask)[:, 1:]
    valid = targets != -100
    log_z = torch.logsumexp(logits[:, :-1].float(), -1)[valid]
    return ce(logits[:, :-1], targets) + coef * (log_z**2).mean()


def loss_pad_by_id(pad_id):
    def loss(logits, ids, mask):  # a dedicated PAD id that no real token uses
        return ce(logits[:, :-1], ids.masked_fill(ids == pad_id, -100)[:, 1:])

    return loss


def loss_no_shift(logits, ids, mask):
    return ce(logits, _labels(ids, mask))


def loss_double_shift(logits, ids, mask):
    return ce(logits[:, :-2], _labels(ids, mask)[:, 2:])


def loss_softmax(logits, ids, mask):
    return ce(logits.softmax(-1)[:, :-1], _labels(ids, mask)[:, 1:])


def loss_padding(logits, ids, mask):
    return ce(logits[:, :-1], ids[:, 1:])


def loss_row_means(logits, ids, mask):
    return torch.stack(
        [loss_good(logits[i : i + 1], ids[i : i + 1], mask[i : i + 1]) for i in range(len(ids))]
    ).mean()


def loss_eos_ignored(eos_id):
    def loss(logits, ids, mask):  # "ignore the special tokens": EOS goes too
        return ce(logits[:, :-1], _labels(ids, mask).masked_fill(ids == eos_id, -100)[:, 1:])

    return loss


def loss_nan(logits, ids, mask):  # every target ignored: the mean of nothing is NaN
    return ce(logits[:, :-1], _labels(ids, mask).masked_fill(mask == 1, -100)[:, 1:])


def loss_inf(logits, ids, mask):  # sum / a count that is 0
    targets = _labels(ids, mask)[:, 1:]
    return ce(logits[:, :-1], targets, reduction="sum") / (targets == -7).sum()


# name: (loss_fn or factory of eos_id, model kwargs, expected failing checks, words in a detail)
BUGS = {
    "no_shift": (loss_no_shift, {}, {"alignment", "perfect_logits", "last_unscored"}, "shift is missing"),
    "double_shift": (
        loss_double_shift,
        {},
        {"alignment", "perfect_logits", "all_scored"},
        "shifted twice",
    ),
    "softmax": (loss_softmax, {}, {"perfect_logits", "logit_scale"}, "softmax"),
    "padding": (loss_padding, {}, {"padding_unscored"}, "padding is scored"),
    "row_means": (loss_row_means, {}, {"equal_weights"}, "per-row"),
    "eos_ignored": (loss_eos_ignored, {}, {"eos_scored"}, "never learns to stop"),
    "nan_loss": (loss_nan, {}, {"finite_loss"}, "not finite"),
    "future": (loss_good, dict(causal=False), {"future"}, "sees the future"),
    "ignores_mask": (
        loss_good,
        dict(use_mask=False),
        {"padding_unread", "left_padding"},
        "reads the padding",
    ),
    "no_position_reset": (loss_good, dict(positions="absolute"), {"left_padding"}, "positions are not reset"),
}
SETTINGS = [
    dict(vocab_size=16, seq_len=8, pad_id=0, eos_id=1),
    dict(vocab_size=50, seq_len=16, pad_id=3, eos_id=4),
    dict(vocab_size=7, seq_len=5, pad_id=6, eos_id=6),
    dict(vocab_size=9, seq_len=6, pad_id=2),
]


def _run(loss_fn, model_kw=None, **kw):
    if loss_fn in (loss_eos_ignored,):
        loss_fn = loss_fn(kw.get("eos_id", 1))
    model = PrefixMean(kw["vocab_size"], **(model_kw or {}))
    return run_checks(lambda ids, mask: model(ids, mask), loss_fn, **kw)


@pytest.mark.parametrize("kw", SETTINGS)
def test_correct_pipeline_passes_every_check(kw):
    report = _run(loss_good, **kw)
    assert report.passed, str(report)
    assert [r.name for r in report.rows] == list(CHECK_NAMES)
    assert report.skipped == (() if "eos_id" in kw else ("eos_scored",))


@pytest.mark.parametrize("kw", SETTINGS)
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_bug_fails_exactly_its_checks_and_names_the_cause(bug, kw):
    loss_fn, model_kw, expected, words = BUGS[bug]
    if bug == "double_shift" and kw["seq_len"] - 3 < 3:
        expected = expected | {"eos_scored"}  # a row of 2 tokens: no position two before its EOS
    if "eos_id" not in kw:
        expected = expected - {"eos_scored"}
        if bug == "eos_ignored":
            pytest.skip("no eos_id: the EOS check is skipped")
    report = _run(loss_fn, model_kw, **kw)
    assert set(report.failed) == expected, str(report)
    assert not report.passed
    assert any(words in report[name].detail for name in expected), str(report)


def test_the_bugs_have_pairwise_different_signatures():
    signatures = {bug: frozenset(_run(f, m, **SETTINGS[0]).failed) for bug, (f, m, _, _) in BUGS.items()}
    assert len(set(signatures.values())) == len(BUGS), signatures
    assert all(signatures.values())


@pytest.mark.parametrize("loss_fn, word", [(loss_nan, "nan"), (loss_inf, "inf")])
def test_a_nan_loss_is_named_not_blamed_on_alignment(loss_fn, word):
    report = _run(loss_fn, **SETTINGS[0])
    assert report.failed == ("finite_loss",)
    assert "not finite" in report["finite_loss"].detail and word in report["finite_loss"].detail
    assert all(report[n].skipped for n in ("alignment", "perfect_logits", "equal_weights", "first_loss"))
    assert not any(report[n].skipped for n in ("future", "padding_unread", "left_padding"))


@pytest.mark.parametrize("kw", SETTINGS[:2])
def test_label_smoothing_passes_when_declared_and_is_named_when_not(kw):
    assert _run(loss_smoothed, label_smoothing=0.1, **kw).passed
    plain = _run(loss_smoothed, **kw)
    assert plain.failed == ("perfect_logits", "logit_scale"), str(plain)
    assert all("label_smoothing=" in plain[name].detail for name in plain.failed)


@pytest.mark.parametrize("V", [16, 1000])
def test_z_loss_passes_when_declared(V):
    kw = dict(vocab_size=V, seq_len=8, pad_id=0, eos_id=1)
    assert _run(loss_z, z_loss=1e-4, **kw).passed, str(_run(loss_z, z_loss=1e-4, **kw))
    undeclared = _run(loss_z, **kw)
    assert (
        {"perfect_logits", "logit_scale"}
        <= set(undeclared.failed)
        <= {
            "perfect_logits",
            "zero_logits",
            "logit_scale",
        }
    )
    if V == 1000:
        assert "zero_logits" in undeclared.failed  # 1e-4 (ln 1000)^2 = 0.0048
    other = _run(loss_z, aux_loss=True, **kw)
    assert other.passed and set(other.skipped) == {"perfect_logits", "zero_logits", "logit_scale"}
    assert "aux_loss=True" in other["perfect_logits"].detail


@pytest.mark.parametrize("kw", [SETTINGS[0], SETTINGS[1], SETTINGS[3]])
def test_padding_found_by_a_dedicated_pad_id_passes(kw):
    assert _run(loss_pad_by_id(kw["pad_id"]), **kw).passed


def test_dropout_left_on_passes_in_eval_mode_and_the_mode_is_restored():
    model = PrefixMean(16, dropout=0.5).train()
    model.drop.eval()  # a mixed state, restored module by module
    model.drop.train()
    assert run_checks(model, loss_good, vocab_size=16, eos_id=1).passed
    assert model.training and model.drop.training
    assert run_checks(lambda i, m: model(i, m), loss_good, vocab_size=16, model=model).passed
    assert model.training
    report = run_checks(lambda i, m: model(i, m), loss_good, vocab_size=16)  # mode unknown
    assert "future" in report.failed and "dropout" in report["future"].detail
    with pytest.raises(TypeError, match="model"):
        run_checks(model, loss_good, vocab_size=16, model="not a module")


def test_a_pretrained_start_skips_the_first_loss_check():
    model = PrefixMean(16, scale=3.0)  # far from ln V, like a trained model
    fwd = lambda ids, mask: model(ids, mask)  # noqa: E731
    report = run_checks(fwd, loss_good, vocab_size=16)
    assert report.failed == ("first_loss",) and "too large" in report["first_loss"].detail
    assert report["first_loss"].value > math.log(16) * 1.1
    start = run_checks(fwd, loss_good, vocab_size=16, pretrained=True)
    assert start.passed and start.skipped == ("eos_scored", "first_loss")
    assert "pretrained=True" in start["first_loss"].detail


def test_first_loss_row_carries_its_value_and_prints_a_tolerance():
    report = _run(loss_good, **SETTINGS[0])
    row = report["first_loss"]
    assert abs(row.value - math.log(16)) < 0.1 * math.log(16)
    assert "within 0.28 of ln V = 2.77" in row.detail


def _gpt(V, causal=True, use_mask=True, reset=True):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V, block_size=16, n_layer=1, n_head=2, n_embd=16))

    def forward(ids, mask):
        doc = torch.where(mask == 1, 0, -1)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        if not causal:  # the same layers, attention to every real token
            T = ids.shape[1]
            x = model.wte(ids) + model.wpe(pos)
            keys = (mask[:, None, None, :] == 1).expand(len(ids), 1, T, T)
            for block in model.blocks:
                x = block(x, keys)
            return model.lm_head(model.ln_f(x))
        if not use_mask:
            return model(ids)
        return model(ids, document_ids=doc, position_ids=pos if reset else None)

    return forward


GPT_BUGS = {
    "ignores_mask": dict(use_mask=False),
    "no_position_reset": dict(reset=False),
    "future": dict(causal=False),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_signatures_hold_on_a_gpt(bug):
    loss_fn, _, expected, _ = BUGS[bug]
    loss_fn = loss_fn(1) if loss_fn is loss_eos_ignored else loss_fn
    report = run_checks(_gpt(20, **GPT_BUGS.get(bug, {})), loss_fn, vocab_size=20, eos_id=1)
    assert set(report.failed) == expected, str(report)
    assert run_checks(_gpt(20), loss_good, vocab_size=20, eos_id=1).passed


def test_zero_logits_catches_summed_and_base_2_losses():
    summed = (
        lambda lg, ids, m: F.cross_entropy(
            lg[:, :-1].reshape(-1, lg.shape[-1]),  # noqa: E731
            _labels(ids, m)[:, 1:].reshape(-1),
            reduction="sum",
        )
    )
    report = _run(summed, vocab_size=16)
    assert "zero_logits" in report.failed and "summed" in report["zero_logits"].detail
    bits = _run(lambda lg, ids, m: loss_good(lg, ids, m) / math.log(2), vocab_size=16)
    assert "zero_logits" in bits.failed and "bits" in bits["zero_logits"].detail


def test_equal_weights_prints_the_exact_ratio_of_the_row_counts():
    report = _run(loss_row_means, vocab_size=16, seq_len=16)
    ids, mask = ragged_batch(16, 16)
    counts = (mask[:, 1:] == 1).sum(1).tolist()  # targets per row: 15, 8, 12
    assert counts == [15, 8, 12]
    assert "row of 8 targets weighs 15/8 times one in the row of 15" in report["equal_weights"].detail


def test_ragged_batch():
    ids, mask = ragged_batch(10, 8, pad_id=0, eos_id=1)
    assert mask.sum(1).tolist() == [8, 5, 5] and (ids[mask == 0] == 0).all()
    assert [int(ids[n, int(mask[n].sum()) - 1]) for n in range(3)] == [1, 1, 1]
    left, lmask = ragged_batch(10, 8, left=True)
    assert lmask.sum(1).tolist() == [8, 6, 4] and lmask[:, -1].all() and not lmask[2, :4].any()


def test_token_weights_are_one_over_the_valid_count():
    ids = torch.tensor([[3, 4, 5, 6, 7], [3, 4, 0, 0, 0]])
    mask = (ids != 0).long()
    w = token_weights(loss_good, ids, mask, 9)
    valid = torch.zeros(2, 5)
    for n in range(2):  # naive: position t is scored when token t+1 is real
        for t in range(4):
            valid[n, t] = float(mask[n, t + 1])
    assert torch.allclose(w, valid / valid.sum(), atol=1e-6)
    per_row = token_weights(loss_row_means, ids, mask, 9)
    assert torch.allclose(per_row[1, 0], torch.tensor(0.5)) and torch.allclose(
        per_row[0, 0], torch.tensor(1 / 8)
    )


@pytest.mark.parametrize("V", [0, 1, -3])
def test_token_weights_rejects_a_vocabulary_below_two(V):
    ids = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="vocab_size"):
        token_weights(loss_good, ids, torch.ones_like(ids), V)
    with pytest.raises(TypeError, match="vocab_size"):
        token_weights(loss_good, ids, torch.ones_like(ids), 2.0)


def test_token_weights_rejects_a_nan_loss():
    ids = torch.tensor([[3, 4, 5]])
    with pytest.raises(ValueError, match="finite"):
        token_weights(loss_nan, ids, torch.ones_like(ids), 9)


def test_report_prints_as_a_table():
    report = _run(loss_padding, vocab_size=16, eos_id=1)
    text = str(report)
    assert text == repr(report)
    assert text.splitlines()[0] == f"1 of {len(CHECK_NAMES)} checks failed: padding_unscored"
    assert text.count("✗ FAIL") == 1 and text.count("✓ pass") == len(CHECK_NAMES) - 1
    assert all(name in text for name in CHECK_NAMES)
    skipped = str(_run(loss_good, vocab_size=16))
    assert skipped.splitlines()[0] == f"all {len(CHECK_NAMES) - 1} checks passed (1 skipped: eos_scored)"
    assert "– skip" in skipped
    with pytest.raises(KeyError):
        report["nonsense"]


def test_bad_arguments_are_clear_errors():
    model = PrefixMean(16)
    fwd = lambda ids, mask: model(ids, mask)  # noqa: E731
    with pytest.raises(TypeError, match="callables"):
        run_checks(None, loss_good, vocab_size=16)
    with pytest.raises(ValueError, match="vocab_size"):
        run_checks(fwd, loss_good, vocab_size=3)
    with pytest.raises(TypeError, match="vocab_size"):
        run_checks(fwd, loss_good, vocab_size=16.0)
    with pytest.raises(ValueError, match="pad_id"):
        run_checks(fwd, loss_good, vocab_size=16, pad_id=16)
    with pytest.raises(ValueError, match="eos_id"):
        run_checks(fwd, loss_good, vocab_size=16, eos_id=-1)
    with pytest.raises(ValueError, match="seq_len"):
        run_checks(fwd, loss_good, vocab_size=16, seq_len=2)
    with pytest.raises(ValueError, match="label_smoothing"):
        run_checks(fwd, loss_good, vocab_size=16, label_smoothing=1.5)
    with pytest.raises(ValueError, match="z_loss"):
        run_checks(fwd, loss_good, vocab_size=16, z_loss=float("nan"))
    with pytest.raises(TypeError, match="pretrained"):
        run_checks(fwd, loss_good, vocab_size=16, pretrained=1)
    with pytest.raises(ValueError, match=r"\(N, L, V\)"):
        run_checks(lambda ids, mask: model(ids, mask)[:, :-1], loss_good, vocab_size=16)
    with pytest.raises(TypeError, match="scalar"):
        run_checks(fwd, lambda lg, ids, m: lg.sum(-1), vocab_size=16)
