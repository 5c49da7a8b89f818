"""Adversarial inputs to lmcore.diagnose: every bad setting is a TypeError/ValueError naming the
argument; a loss that is NaN or infinite (everywhere or only for some logits) is reported as not
finite, never blamed on alignment; forward's NaN logits at real tokens are a failing row, at
positions the mask excludes ignored; wrong shapes and non-scalar losses are clear errors; token_weights and ragged_batch validate their arguments."""

import math

import pytest
import torch
import torch.nn.functional as F
from _adversarial import NOT_INTS, NOT_REALS, raises

from lmcore.diagnose import ragged_batch, run_checks, token_weights

V = 12


def forward(ids, mask):  # causal, mask-aware, deterministic: a bag of prefix
    g = torch.Generator().manual_seed(0)
    E, W = torch.randn(V, 4, generator=g), 0.05 * torch.randn(4, V, generator=g)
    m = mask.float()[..., None]
    return ((E[ids] * m).cumsum(1) / m.cumsum(1).clamp(min=1)) @ W


def loss_good(logits, ids, mask):
    labels = ids.masked_fill(mask == 0, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


def test_the_baseline_pipeline_passes():
    assert run_checks(forward, loss_good, vocab_size=V, eos_id=1).passed


INT_ARGS = {
    "vocab_size": (V, [4, 0, -3]),
    "seq_len": (16, [3, 0, -1]),
    "pad_id": (0, [-1, V]),
    "eos_id": (1, [-1, V, V + 5]),
    "seed": (0, []),
}


@pytest.mark.parametrize("name", sorted(INT_ARGS))
@pytest.mark.parametrize("bad", [b for b in NOT_INTS if b is not None] + [None])
def test_int_settings_reject_what_is_not_an_int(name, bad):
    if name == "eos_id" and bad is None:
        assert run_checks(forward, loss_good, vocab_size=V, eos_id=None).passed  # None: no EOS row
        return
    kw = {"vocab_size": V, name: bad}
    with raises(TypeError, name):
        run_checks(forward, loss_good, **kw)


@pytest.mark.parametrize("name, bad", [(n, b) for n, (_, bads) in INT_ARGS.items() for b in bads])
def test_int_settings_reject_values_out_of_range(name, bad):
    kw = {"vocab_size": V, name: bad}
    with raises(ValueError, name):
        run_checks(forward, loss_good, **kw)


REAL_ARGS = {
    "first_loss_tol": [-0.1, float("nan"), float("inf")],
    "label_smoothing": [-0.1, 1.5, float("nan")],
    "z_loss": [-1e-4, float("nan"), float("inf")],
}


@pytest.mark.parametrize("name", sorted(REAL_ARGS))
@pytest.mark.parametrize("bad", NOT_REALS)
def test_real_settings_reject_what_is_not_a_number(name, bad):
    with raises(TypeError, name):
        run_checks(forward, loss_good, vocab_size=V, **{name: bad})


@pytest.mark.parametrize("name, bad", [(n, b) for n, bads in REAL_ARGS.items() for b in bads])
def test_real_settings_reject_values_out_of_range(name, bad):
    with raises(ValueError, name):
        run_checks(forward, loss_good, vocab_size=V, **{name: bad})


@pytest.mark.parametrize("name", ["aux_loss", "pretrained", "left_padding"])
@pytest.mark.parametrize("bad", [1, 0, "yes", None, torch.tensor(True)])
def test_flags_must_be_bools(name, bad):
    with raises(TypeError, name):
        run_checks(forward, loss_good, vocab_size=V, **{name: bad})


@pytest.mark.parametrize("bad", ["a module", 3, forward])
def test_model_must_be_a_module(bad):
    with raises(TypeError, "model"):
        run_checks(forward, loss_good, vocab_size=V, model=bad)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_loss_that_is_never_finite_is_named(value):
    report = run_checks(forward, lambda lg, i, m: loss_good(lg, i, m) * value, vocab_size=V, eos_id=1)
    assert report.failed == ("finite_loss",), str(report)
    assert "not finite" in report["finite_loss"].detail


def test_a_loss_that_overflows_only_for_large_logits_is_named():
    def naive(logits, ids, mask):  # log of a softmax computed by hand, float16
        p = logits.half().exp() / logits.half().exp().sum(-1, keepdim=True)
        labels = ids.masked_fill(mask == 0, -100)[:, 1:]
        valid = labels != -100
        return -p[:, :-1].float().log().gather(-1, labels.clamp(min=0)[..., None])[..., 0][valid].mean()

    report = run_checks(forward, naive, vocab_size=V)
    assert report.failed == ("finite_loss",), str(report)
    assert "perfect logits" in report["finite_loss"].detail


def test_a_loss_that_is_nan_on_one_check_only_fails_that_row():
    calls = {"n": 0}

    def sometimes(logits, ids, mask):
        calls["n"] += 1
        return loss_good(logits, ids, mask) * (float("nan") if calls["n"] == 12 else 1.0)

    report = run_checks(forward, sometimes, vocab_size=V, eos_id=1)
    # one probe's NaN fails the rows that read it: coverage 2 rows, the ragged value probe 3
    assert 1 <= len(report.failed) <= 3 and "finite_loss" not in report.failed
    assert all("not finite" in report[name].detail for name in report.failed)


@pytest.mark.parametrize(
    "bad",
    [
        lambda i, m: forward(i, m) * float("nan"),
        lambda i, m: forward(i, m).masked_fill(i[..., None] == 3, float("inf")),
    ],
)
def test_non_finite_logits_from_forward_at_real_tokens_are_a_report_row(bad):
    report = run_checks(bad, loss_good, vocab_size=V)
    assert "finite_logits" in report.failed and "NaN/inf" in report["finite_logits"].detail
    assert all(report[n].skipped for n in ("future", "padding_unread", "left_padding", "first_loss"))
    assert not any(report[n].skipped for n in ("alignment", "equal_weights"))  # the loss rows still run


def test_nan_at_positions_the_mask_excludes_is_ignored_and_said_so():
    nan_at_pads = lambda i, m: forward(i, m).masked_fill(m[..., None] == 0, float("nan"))  # noqa: E731
    report = run_checks(nan_at_pads, loss_good, vocab_size=V)
    assert report.passed, str(report)
    assert "ignored" in report["finite_logits"].detail and "positions the attention mask excludes" in (
        report["finite_logits"].detail
    )


@pytest.mark.parametrize(
    "bad",
    [
        lambda i, m: forward(i, m)[..., :-1],
        lambda i, m: forward(i, m).tolist(),
        lambda i, m: None,
        lambda i, m: forward(i, m)[0],
    ],
)
def test_forward_of_the_wrong_shape_is_a_clear_error(bad):
    with raises(ValueError, "(N, L, V)"):
        run_checks(bad, loss_good, vocab_size=V)


@pytest.mark.parametrize(
    "bad",
    [
        lambda lg, i, m: "2.5",
        lambda lg, i, m: None,
        lambda lg, i, m: True,
        lambda lg, i, m: lg.sum((0, 2)),
        lambda lg, i, m: [1.0],
    ],
)
def test_a_loss_that_is_not_a_scalar_is_a_clear_error(bad):
    with raises(TypeError, "scalar"):
        run_checks(forward, bad, vocab_size=V)


def test_callables_are_required():
    for f, l in ((None, loss_good), (forward, "loss"), (3, 4)):
        with raises(TypeError, "callables"):
            run_checks(f, l, vocab_size=V)


@pytest.mark.parametrize(
    "bad, exc",
    [
        (0, ValueError),
        (1, ValueError),
        (-2, ValueError),
        (True, TypeError),
        (2.0, TypeError),
        ("16", TypeError),
        (None, TypeError),
    ],
)
def test_token_weights_vocab_size(bad, exc):
    ids = torch.tensor([[3, 4, 5]])
    with raises(exc, "vocab_size"):
        token_weights(loss_good, ids, torch.ones_like(ids), bad)


@pytest.mark.parametrize(
    "ids", [[[3, 4, 5]], torch.tensor([3, 4, 5]), torch.zeros(1, 2, 3, dtype=torch.long)]
)
def test_token_weights_input_ids_must_be_2d_tensors(ids):
    with raises(TypeError, "input_ids"):
        token_weights(loss_good, ids, None, V)


@pytest.mark.parametrize(
    "loss_fn, words",
    [
        (lambda lg, i, m: loss_good(lg, i, m).detach(), "no gradient"),
        (lambda lg, i, m: loss_good(lg, i, m) / 0 * 0, "finite"),
        (lambda lg, i, m: lg.sum(-1), "finite scalar"),
    ],
)
def test_token_weights_rejects_detached_nan_and_non_scalar_losses(loss_fn, words):
    ids = torch.tensor([[3, 4, 5]])
    with raises(ValueError, words):
        token_weights(loss_fn, ids, torch.ones_like(ids), V)


@pytest.mark.parametrize(
    "kw, exc, name",
    [
        (dict(vocab_size=3), ValueError, "vocab_size"),
        (dict(vocab_size=12.0), TypeError, "vocab_size"),
        (dict(vocab_size=12, seq_len=2), ValueError, "seq_len"),
        (dict(vocab_size=12, pad_id=12), ValueError, "pad_id"),
        (dict(vocab_size=12, eos_id=True), TypeError, "eos_id"),
        (dict(vocab_size=12, left=1), TypeError, "left"),
    ],
)
def test_ragged_batch_validates(kw, exc, name):
    with raises(exc, name):
        ragged_batch(**kw)


def test_every_report_row_is_finite_text_for_extreme_but_valid_settings():
    for kw in (
        dict(vocab_size=5, seq_len=4, pad_id=4, eos_id=4),
        dict(vocab_size=5000, seq_len=4),
        dict(vocab_size=V, seq_len=64, label_smoothing=1.0),
        dict(vocab_size=V, first_loss_tol=0),
    ):
        report = run_checks(
            lambda i, m, kw=kw: (
                forward(i % V, m) if kw["vocab_size"] == V else torch.zeros(*i.shape, kw["vocab_size"])
            ),
            loss_good,
            **kw,
        )
        assert all(isinstance(r.detail, str) and r.detail for r in report.rows)
        assert "nan" not in str(report).lower() or not report["finite_loss"].passed
    assert math.isfinite(run_checks(forward, loss_good, vocab_size=V)["first_loss"].value)
