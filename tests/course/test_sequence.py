"""Notebook 03's support code: the word vocabulary, the tables, the cheating models, the checkers."""

import math

import matplotlib
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")

from lmcore import causal_lm_loss, shift_for_next_token  # noqa: E402
from lmcore.course.sequence import colleague  # noqa: E402
from lmcore.course.sequence import lesson as sq  # noqa: E402
from lmcore.course.sequence import views as sqv  # noqa: E402
from lmcore.model import GPT, GPTConfig  # noqa: E402


def _model(V=11, L=12, seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=V, block_size=L, n_layer=2, n_head=2, n_embd=16)).eval()


def test_words_and_encode():
    assert sq.words("The cat, sat!", bos=True, eos=True) == ["<bos>", "the", "cat", "sat", "<eos>"]
    assert sq.words("the zebra") == ["the", "<unk>"]
    ids = sq.encode("The cat sat on the mat")
    assert ids.shape == (1, 7) and ids[0, 0] == sq.BOS
    assert [sq.WORDS[i] for i in ids[0, 1:].tolist()] == "the cat sat on the mat".split()
    with pytest.raises(TypeError, match="text"):
        sq.words(3)


def test_context_target_table_has_L_minus_1_rows():
    rows = sq.context_target_table("the cat sat on the mat".split())
    assert len(rows) == 5
    assert rows[0] == ("the", "cat") and rows[-1] == ("the cat sat on the", "mat")


def test_forward_logits_causal_is_the_model_and_noncausal_sees_the_future():
    model, ids = _model(), torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(sq.forward_logits(model, ids), model(ids))
        changed = ids.clone()
        changed[:, -1] = (changed[:, -1] + 1) % 11
        # a causal model's earlier positions ignore the last token; a non-causal one's do not
        torch.testing.assert_close(model(changed)[:, :-1], model(ids)[:, :-1])
        a = sq.forward_logits(model, ids, causal=False)[:, :-1]
        b = sq.forward_logits(model, changed, causal=False)[:, :-1]
        assert (a - b).abs().max() > 1e-4


def test_noncausal_path_reproduces_model_when_given_the_causal_mask():
    # guards forward_logits against drift in the model's internals
    model, ids = _model(), torch.randint(11, (2, 6), generator=torch.Generator().manual_seed(2))
    L = ids.shape[1]
    with torch.no_grad():
        x = model.wte(ids) + model.wpe(torch.arange(L)[None])
        for block in model.blocks:
            x = block(x, torch.ones(L, L, dtype=torch.bool).tril())
        torch.testing.assert_close(model.lm_head(model.ln_f(x)), model(ids))


def test_teacher_forcing_equals_a_loop_of_prefix_forwards():
    model, ids = _model(), torch.randint(11, (3, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        loop = torch.stack([model(ids[:, : t + 1])[:, -1] for t in range(9)], dim=1)
        torch.testing.assert_close(sq.prefix_logits(model, ids), loop)
        torch.testing.assert_close(sq.prefix_logits(model, ids), model(ids), atol=1e-5, rtol=1e-5)
        assert (
            sq.prefix_logits(model, ids, causal=False) - sq.forward_logits(model, ids, causal=False)
        ).abs().max() > 1e-4


def test_next_token_loss_against_float64_cross_entropy():
    g = torch.Generator().manual_seed(4)
    z, y = torch.randn(2, 5, 7, generator=g), torch.randint(7, (2, 5), generator=g)
    ref = F.cross_entropy(z[:, :-1].double().reshape(-1, 7), y[:, 1:].reshape(-1))
    assert math.isclose(float(sq.next_token_loss(z, y)), float(ref), rel_tol=1e-6)
    ref0 = F.cross_entropy(z.double().reshape(-1, 7), y.reshape(-1))
    assert math.isclose(float(sq.next_token_loss(z, y, shift=False)), float(ref0), rel_tol=1e-6)


def test_the_two_cheats_and_the_honest_model():
    lnv = math.log(16)
    honest = sq.train_tiny_lm(steps=40)[1]
    copy = sq.train_tiny_lm(shift=False, steps=40)[1]
    peek_model, peek = sq.train_tiny_lm(causal=False, steps=60)
    assert min(honest) > lnv - 0.1  # random tokens: nothing honest to learn
    assert copy[0] < lnv - 0.1 and copy[-1] < 0.1  # tied embeddings: copying starts at init
    assert peek[0] > lnv - 0.1 and peek[-1] < 0.3  # peeking must be learned
    ids = torch.randint(16, (16, 16), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        generation_time = sq.next_token_loss(sq.prefix_logits(peek_model, ids, causal=False), ids)
    assert float(generation_time) > lnv


def test_position_table_against_an_independent_computation():
    model = _model(V=len(sq.WORDS), L=32)
    ids = sq.encode("the cat sat on the mat")
    with torch.no_grad():
        logp = torch.log_softmax(model(ids)[0].double(), -1)
    rows = sq.position_table(model, "The cat sat on the mat")
    assert len(rows) == 6 and rows[0]["context"] == "<bos>" and rows[0]["target"] == "the"
    for t, r in enumerate(rows):
        y = int(ids[0, t + 1])
        assert math.isclose(r["loss"], -float(logp[t, y]), rel_tol=1e-5)
        assert math.isclose(r["prob"], math.exp(-r["loss"]), rel_tol=1e-9)
    plain = sq.position_table(model, "the cat sat on the mat", shift=False)
    assert len(plain) == 7 and plain[2]["target"] == "cat" and plain[2]["context"].endswith("cat")
    text = sq.format_position_table(rows)
    assert "6 targets" in text and f"{sum(r['loss'] for r in rows) / 6:.3f}" in text
    assert "no scored position" in sq.format_position_table([])


def test_trained_word_model_has_learned_the_corpus():
    rows = sq.position_table(sq.train_word_model(), "the cat sat on the mat")
    assert rows[4]["target"] == "the" and rows[4]["prob"] > 0.9  # "on" -> "the"
    assert rows[2]["prob"] < 0.6  # "cat" -> sat/ate/ran


def test_a_word_model_trained_without_the_shift_copies_its_input():
    copier, honest = sq.train_word_model(shift=False), sq.train_word_model()
    own = sq.position_table(copier, "the dog sat on the rug", shift=False)
    nxt = sq.position_table(copier, "the dog sat on the rug")
    assert min(r["prob"] for r in own) > 0.9 and max(r["prob"] for r in nxt) < 0.05
    assert max(r["prob"] for r in sq.position_table(honest, "the dog sat on the rug", shift=False)) < 0.05


def test_plot_label_shift_returns_a_figure():
    fig = sqv.plot_label_shift()
    assert isinstance(fig, matplotlib.figure.Figure) and "6 (input" in fig.axes[0].get_title()
    assert "3 (input" in sqv.plot_label_shift(["a", "b", "c", "d"]).axes[0].get_title()


def _my_loss(logits, labels):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    y = labels[:, 1:]
    valid = y != -100
    nll = -logp.gather(-1, y.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (nll * valid).sum() / valid.sum()


def _stub(*args):
    raise NotImplementedError


def _flat_nll(z, y, k=1):
    V = z.shape[-1]
    return F.cross_entropy(z[:, :-k].reshape(-1, V), y[:, k:].reshape(-1), reduction="none").view(
        y[:, k:].shape
    )


def test_check_per_position_nll_accepts_both_layouts_and_rejects_wrong_ones(capsys):
    assert sq.check_per_position_nll(_flat_nll)
    assert sq.check_per_position_nll(
        lambda z, y, k: F.cross_entropy(z[:, :-k].transpose(1, 2), y[:, k:], reduction="none")
    )
    capsys.readouterr()

    def viewed(z, y, k):  # RuntimeError: a slice is not contiguous
        V = z.shape[-1]
        return F.cross_entropy(z[:, :-k].view(-1, V), y[:, k:].reshape(-1), reduction="none").view(
            y[:, k:].shape
        )

    def shifted_by_lmcore(z, y, k):
        zs, ys = shift_for_next_token(z, y)
        return F.cross_entropy(zs.transpose(1, 2), ys, reduction="none")

    wrongs = [
        lambda z, y, k: F.cross_entropy(z[:, :-k], y[:, k:], reduction="none"),  # (N, L-k, V) as is
        lambda z, y, k: F.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1), reduction="none").view(
            y.shape
        ),
        lambda z, y, k: _flat_nll(z, y, k).flatten(),  # not reshaped back
        lambda z, y, k: _flat_nll(z, y),  # k ignored: always one token ahead
        lambda z, y, k: F.cross_entropy(z[:, :-k].transpose(1, 2), y[:, k:]),  # the mean
        lambda z, y, k: -torch.log_softmax(z[:, :-k], 1).gather(-1, y[:, k:].clamp(min=0)[..., None])[..., 0],
        viewed,
        shifted_by_lmcore,
        lambda z, y, k: causal_lm_loss(z, y, reduction="none"),
        _stub,
    ]
    for wrong in wrongs:
        assert not sq.check_per_position_nll(wrong)
    out = capsys.readouterr().out
    assert "L - k = V" in out and "view size is not compatible" in out and "not attempted yet" in out
    assert "called lmcore.shift.shift_for_next_token" in out and "called lmcore.loss.causal_lm_loss" in out
    assert "how many positions of a row have a token k places ahead" in out


def test_the_per_position_reference_is_float64_cross_entropy_and_lmcores_loss_at_k_1():
    from lmcore.course.sequence.exercises import _k_ahead_nll, _per_position_cases

    cases = _per_position_cases()
    assert {c.args[2] for c in cases} == {1, 2, 3}
    assert any(c.args[0].shape[1] - c.args[2] == c.args[0].shape[2] for c in cases)  # L - k = V
    for case in cases:
        z, y, k = case.args
        got = _k_ahead_nll(z, y, k).double()
        N, L, V = z.shape
        for n in range(N):  # a naive loop in float64
            for t in range(L - k):
                target = int(y[n, t + k])
                want = 0.0 if target == -100 else float(-torch.log_softmax(z[n, t].double(), -1)[target])
                assert abs(float(got[n, t]) - want) <= 1e-5 * max(1.0, abs(want))
        if k == 1:
            assert torch.equal(_k_ahead_nll(z, y, 1), causal_lm_loss(z, y, reduction="none"))


def test_the_colleague_s_faults_show_on_the_course_s_batches_as_the_reveal_says():
    """colleague.symptom_batches: on "another number" the colleague's loss differs from lmcore's
    and the version with only its smoothing masked agrees (the fault is line 8's alone); on "no
    number" it is inf or nan, lmcore's loss is finite, and log_softmax in place of log(softmax)
    makes it finite (line 4's)."""
    batches = colleague.symptom_batches()
    z, y = batches["another number"]
    ours = float(causal_lm_loss(z.double(), y, label_smoothing=0.1))
    assert abs(float(colleague.colleague_smoothed_loss(z, y, 0.1)) - ours) > 1e-3
    assert float(colleague.line_8_fixed(z.double(), y, 0.1)) == pytest.approx(ours, rel=1e-12)
    z, y = batches["no number"]
    assert not math.isfinite(float(colleague.colleague_smoothed_loss(z, y, 0.1)))
    assert math.isfinite(float(causal_lm_loss(z, y, label_smoothing=0.1)))
    logp = torch.log_softmax(z[:, :-1], -1)
    assert bool(torch.isfinite(logp).all())


def test_line_8_fixed_is_lmcores_smoothed_loss_where_log_of_softmax_is_exact():
    g = torch.Generator().manual_seed(4)
    z = torch.randn(3, 7, 9, generator=g, dtype=torch.float64)
    y = torch.randint(9, (3, 7), generator=g)
    y[0, 4:], y[2, 1:] = -100, -100
    for eps in (0.0, 0.1, 0.3):
        ref = causal_lm_loss(z, y, label_smoothing=eps)
        assert float(colleague.line_8_fixed(z, y, eps)) == pytest.approx(float(ref), rel=1e-12)


def test_check_symptom_batches_says_not_attempted_for_a_stub_and_refuses_the_course_s_batches(capsys):
    assert not colleague.check_symptom_batches(_stub)
    assert "not attempted yet" in capsys.readouterr().out
    assert not colleague.check_symptom_batches(colleague.symptom_batches)
    assert "course's own answer" in capsys.readouterr().out
