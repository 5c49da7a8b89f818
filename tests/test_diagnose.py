"""lmcore.diagnose: the correct pipeline passes every check; each classic label bug fails its own
set of checks, and the failing rows name the cause.

The pipelines here are written independently of lmcore's loss (plain F.cross_entropy), and the
model is a tiny causal bag-of-prefix model, so the checks are tested against known behaviour,
not against lmcore's own output. A second set runs the same bugs on lmcore's GPT.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from lmcore.diagnose import CHECK_NAMES, run_checks, token_weights
from lmcore.model import GPT, GPTConfig


class PrefixMean(torch.nn.Module):
    """logits[t] = W · mean(E[x_0..x_t]) (causal) or mean over the whole row (sees the future)."""

    def __init__(self, V, D=8, causal=True, scale=0.05):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.E = torch.nn.Parameter(torch.randn(V, D, generator=g))
        self.W = torch.nn.Parameter(scale * torch.randn(D, V, generator=g))
        self.causal = causal

    def forward(self, ids, mask=None):
        h = self.E[ids]                                            # (N, L, D)
        if self.causal:
            h = h.cumsum(1) / torch.arange(1, ids.shape[1] + 1)[None, :, None]
        else:
            h = h.mean(1, keepdim=True).expand_as(h)
        return h @ self.W


def _labels(ids, mask):
    return torch.where(mask.bool(), ids, torch.full_like(ids, -100))


def ce(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


def loss_good(logits, ids, mask):
    return ce(logits[:, :-1], _labels(ids, mask)[:, 1:])


def loss_no_shift(logits, ids, mask):
    return ce(logits, _labels(ids, mask))


def loss_double_shift(logits, ids, mask):
    return ce(logits[:, :-2], _labels(ids, mask)[:, 2:])


def loss_softmax(logits, ids, mask):
    return ce(logits.softmax(-1)[:, :-1], _labels(ids, mask)[:, 1:])


def loss_padding(logits, ids, mask):
    return ce(logits[:, :-1], ids[:, 1:])


def loss_row_means(logits, ids, mask):
    return torch.stack([loss_good(logits[i:i + 1], ids[i:i + 1], mask[i:i + 1])
                        for i in range(len(ids))]).mean()


BUGS = {  # name: (loss_fn, causal model?, expected failing checks, words the detail must use)
    "no_shift": (loss_no_shift, True, {"alignment", "perfect_logits", "last_unscored"}, "shift is missing"),
    "double_shift": (loss_double_shift, True, {"alignment", "perfect_logits", "all_scored"}, "shifted twice"),
    "softmax": (loss_softmax, True, {"perfect_logits"}, "softmax"),
    "padding": (loss_padding, True, {"pad_id"}, "padding is scored"),
    "future": (loss_good, False, {"future"}, "sees the future"),
    "row_means": (loss_row_means, True, {"equal_weights"}, "per-row"),
}
SETTINGS = [dict(vocab_size=16, seq_len=8, pad_id=0), dict(vocab_size=50, seq_len=16, pad_id=3),
            dict(vocab_size=7, seq_len=5, pad_id=6)]


def _run(loss_fn, causal, **kw):
    model = PrefixMean(kw["vocab_size"], causal=causal)
    return run_checks(lambda ids, mask: model(ids), loss_fn, **kw)


@pytest.mark.parametrize("kw", SETTINGS)
def test_correct_pipeline_passes_every_check(kw):
    report = _run(loss_good, True, **kw)
    assert report.passed, str(report)
    assert [r.name for r in report.rows] == list(CHECK_NAMES)


@pytest.mark.parametrize("kw", SETTINGS)
@pytest.mark.parametrize("bug", sorted(BUGS))
def test_each_bug_fails_exactly_its_checks_and_names_the_cause(bug, kw):
    loss_fn, causal, expected, words = BUGS[bug]
    report = _run(loss_fn, causal, **kw)
    assert set(report.failed) - {"first_loss"} == expected, str(report)
    assert not report.passed
    assert any(words in report[name].detail for name in expected), str(report)


def test_the_bugs_have_pairwise_different_signatures():
    signatures = {bug: frozenset(_run(f, c, **SETTINGS[0]).failed) for bug, (f, c, _, _) in BUGS.items()}
    assert len(set(signatures.values())) == len(BUGS), signatures
    assert all(signatures.values())


def _gpt_forward(V, causal=True):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V, block_size=16, n_layer=1, n_head=2, n_embd=16))
    if causal:
        return lambda ids, mask: model(ids)

    def see_all(ids, mask):                     # the same layers, every position attends everywhere
        T = ids.shape[1]
        x = model.wte(ids) + model.wpe(torch.arange(T)[None])
        for block in model.blocks:
            x = block(x, torch.ones(len(ids), 1, T, T, dtype=torch.bool))
        return model.lm_head(model.ln_f(x))
    return see_all


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_signatures_hold_on_a_gpt(bug):
    loss_fn, causal, expected, _ = BUGS[bug]
    report = run_checks(_gpt_forward(20, causal), loss_fn, vocab_size=20)
    assert set(report.failed) - {"first_loss"} == expected, str(report)
    assert run_checks(_gpt_forward(20), loss_good, vocab_size=20).passed


def test_zero_logits_catches_summed_and_base_2_losses():
    summed = lambda lg, ids, m: F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]),  # noqa: E731
                                                _labels(ids, m)[:, 1:].reshape(-1), reduction="sum")
    report = _run(summed, True, vocab_size=16)
    assert "zero_logits" in report.failed and "summed" in report["zero_logits"].detail
    bits = _run(lambda lg, ids, m: loss_good(lg, ids, m) / math.log(2), True, vocab_size=16)
    assert "zero_logits" in bits.failed and "bits" in bits["zero_logits"].detail


def test_first_loss_flags_large_initial_logits():
    assert _run(loss_good, True, vocab_size=16)["first_loss"].passed
    model = PrefixMean(16, scale=3.0)
    report = run_checks(lambda ids, mask: model(ids), loss_good, vocab_size=16)
    assert "first_loss" in report.failed and "too large" in report["first_loss"].detail


def test_dropout_reads_as_a_nondeterministic_forward():
    model = PrefixMean(16)
    noisy = lambda ids, mask: F.dropout(model(ids), 0.5, training=True)  # noqa: E731
    report = run_checks(noisy, loss_good, vocab_size=16)
    assert "future" in report.failed and "dropout" in report["future"].detail


def test_token_weights_are_one_over_the_valid_count():
    ids = torch.tensor([[3, 4, 5, 6, 7], [3, 4, 0, 0, 0]])
    mask = (ids != 0).long()
    w = token_weights(loss_good, ids, mask, 9)
    valid = torch.zeros(2, 5)
    for n in range(2):                    # naive: position t is scored when token t+1 is real
        for t in range(4):
            valid[n, t] = float(mask[n, t + 1])
    assert torch.allclose(w, valid / valid.sum(), atol=1e-6)
    per_row = token_weights(loss_row_means, ids, mask, 9)
    assert torch.allclose(per_row[1, 0], torch.tensor(0.5)) and torch.allclose(per_row[0, 0], torch.tensor(1 / 8))


def test_report_prints_as_a_table():
    report = _run(loss_padding, True, vocab_size=16)
    text = str(report)
    assert text == repr(report)
    assert text.splitlines()[0] == "1 of 9 checks failed: pad_id"
    assert text.count("✗ FAIL") == 1 and text.count("✓ pass") == 8
    assert all(name in text for name in CHECK_NAMES)
    with pytest.raises(KeyError):
        report["nonsense"]


def test_bad_arguments_are_clear_errors():
    model = PrefixMean(16)
    fwd = lambda ids, mask: model(ids)  # noqa: E731
    with pytest.raises(TypeError, match="callables"):
        run_checks(None, loss_good, vocab_size=16)
    with pytest.raises(ValueError, match="vocab_size"):
        run_checks(fwd, loss_good, vocab_size=3)
    with pytest.raises(ValueError, match="pad_id"):
        run_checks(fwd, loss_good, vocab_size=16, pad_id=16)
    with pytest.raises(ValueError, match="seq_len"):
        run_checks(fwd, loss_good, vocab_size=16, seq_len=2)
    with pytest.raises(ValueError, match=r"\(N, L, V\)"):
        run_checks(lambda ids, mask: model(ids)[:, :-1], loss_good, vocab_size=16)
    with pytest.raises(TypeError, match="scalar"):
        run_checks(fwd, lambda lg, ids, m: lg.sum(-1), vocab_size=16)
