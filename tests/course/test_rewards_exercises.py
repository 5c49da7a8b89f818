"""Notebook 10's exercise checkers and the duplicated-fraction experiment: each checker accepts
right answers, refuses the course's own reference during the learner's call, and rejects the
shortcut and plausible wrong answers. References are independent (float64 softmax sums, rows
packed with lmcore.shift and counted by a loop)."""

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmcore.course.rewards import data as RD  # noqa: E402
from lmcore.course.rewards import duplicates as RDup  # noqa: E402
from lmcore.course.rewards import exercises as RX  # noqa: E402
from lmcore.course.rewards import lesson as R  # noqa: E402
from lmcore.course.rewards import views as RV  # noqa: E402
from lmcore.shift import IGNORE_INDEX, pack_documents  # noqa: E402


def _quiet(checker, fn):
    return checker(fn, quiet=True)


def _stable(z, a):
    z = z.double()
    return float(torch.logsumexp(z, 0) - torch.logsumexp(z[list(a)], 0))


# ---------------------------------------------------------------- several right answers


def test_check_set_nll_accepts_stable_answers(capsys):
    assert RX.check_set_nll(_stable) and "✓ pass" in capsys.readouterr().out
    # another stable form: the log-sum-exp of the acceptable logits written by hand
    by_hand = lambda z, a: float(
        torch.logsumexp(z.double(), 0)
        - (z.double()[list(a)].max() + (z.double()[list(a)] - z.double()[list(a)].max()).exp().sum().log())
    )
    assert _quiet(RX.check_set_nll, by_hand)
    # float32, as the hint's own recipe gives it: logsumexp(z) - logsumexp(z[a]) near 1000 is known
    # to a few float32 spacings of 1000 (review 06-10)
    float32 = lambda z, a: float(torch.logsumexp(z.float(), 0) - torch.logsumexp(z.float()[list(a)], 0))
    assert _quiet(RX.check_set_nll, float32)

    @torch.no_grad()
    def decorated_torch_special(z, a):  # another library route, decorated
        z = z.double()
        return float(-(torch.special.logsumexp(z[list(a)], 0) - torch.special.logsumexp(z, 0)))

    assert _quiet(RX.check_set_nll, decorated_torch_special)


def test_the_new_case_separates_logsumexp_from_summed_softmax():
    z = torch.tensor([1000.0, 0.0, -5.0])
    assert float(torch.softmax(z, 0)[2]) == 0.0 and float(torch.softmax(z.double(), 0)[2]) == 0.0
    assert _stable(z, [2]) == pytest.approx(1005.0, abs=1e-6)
    # shifting by the max before the exponentials does not save the sum of probabilities
    shifted = lambda z, a: float(-torch.log((z.double() - z.double().max()).softmax(0)[list(a)].sum()))
    assert not _quiet(RX.check_set_nll, shifted)


WRONG_SET = {
    "the course's set_nll": lambda z, a: R.set_nll(z, a),
    "naive softmax sum (float32)": lambda z, a: float(-torch.log(torch.softmax(z, 0)[list(a)].sum())),
    "naive softmax sum (float64)": lambda z, a: float(
        -torch.log(torch.softmax(z.double(), 0)[list(a)].sum())
    ),
    "first reference only": lambda z, a: float(torch.logsumexp(z.double(), 0) - z.double()[a[0]]),
    "sum of the single losses": lambda z, a: sum(_stable(z, [i]) for i in a),
    "mean of the single losses": lambda z, a: sum(_stable(z, [i]) for i in a) / len(a),
    "-ln of the largest probability": lambda z, a: min(_stable(z, [i]) for i in a),
    "unstable exp": lambda z, a: -math.log(float(z.double().exp()[a].sum() / z.double().exp().sum())),
}


@pytest.mark.parametrize("name", sorted(WRONG_SET))
def test_check_set_nll_rejects(name, capsys):
    assert not RX.check_set_nll(WRONG_SET[name])
    assert "✗ fail" in capsys.readouterr().out


def test_set_nll_is_refused_only_inside_the_check(capsys):
    assert not RX.check_set_nll(lambda z, a: R.set_nll(z, a))
    out = capsys.readouterr().out
    assert "your function called lmcore.course.rewards.lesson.set_nll: write it yourself" in out
    assert R.set_nll(torch.tensor([0.0, 0.0]), [0]) == pytest.approx(math.log(2))


def test_a_warning_in_a_right_answer_reaches_no_stderr(capfd):
    def warns(z, a):
        import warnings

        warnings.warn("a harmless warning", UserWarning, stacklevel=2)
        return _stable(z, a)

    assert RX.check_set_nll(warns)
    assert capfd.readouterr().err == ""


# ---------------------------------------------------------------- context coverage


def test_check_context_coverage_rejects_mistakes_and_the_reference():
    assert _quiet(RX.check_context_coverage, lambda L, k: max(0, L - max(k, 1)) / (L - 1))
    wrong = {
        "the course's context_coverage": lambda L, k: RD.context_coverage(L, k),
        "t from 0": lambda L, k: max(0, L - k) / L,
        "off by one": lambda L, k: max(0, L - k + 1) / (L - 1),
        "divides by L": lambda L, k: max(0, L - max(k, 1)) / L,
        "negative past the end": lambda L, k: (L - max(k, 1)) / (L - 1),
    }
    for name, fn in wrong.items():
        assert not _quiet(RX.check_context_coverage, fn), name


# ---------------------------------------------------------------- coverage in a packed row


def _packed_reference(lengths, k):
    """Pack real documents with lmcore.shift, then count by a loop."""
    docs = [[5] * (n - 1) for n in lengths]  # pack_documents adds each EOS
    pb = pack_documents(docs, sum(lengths), eos_id=1, pad_id=0)
    assert pb.input_ids.shape == (1, sum(lengths))
    labels, pos = pb.labels[0], pb.position_ids[0]
    valid = seen = 0
    for t in range(1, sum(lengths)):
        if labels[t] == IGNORE_INDEX:
            continue
        valid += 1
        seen += int(pos[t]) >= k  # position t of its document: t tokens of it before
    return seen / valid if valid else 0.0


def _learner(lengths, k):
    valid = sum(n - 1 for n in lengths)
    return sum(max(0, n - max(k, 1)) for n in lengths) / valid if valid else 0.0


@pytest.mark.parametrize("lengths", [[64], [10, 10], [3, 20, 7], [2, 8], [12, 2, 2, 12], [6, 9, 4, 13, 32]])
def test_document_coverage_against_packed_rows(lengths):
    for k in range(0, max(lengths) + 2):
        assert RX.document_coverage(lengths, k) == pytest.approx(_packed_reference(lengths, k), abs=1e-15)


def test_document_coverage_with_eos_only_documents_by_hand():
    # a document of 1 token is its EOS alone: no target of its own, and it cuts the next context
    assert RX.document_coverage([1, 8], 2) == pytest.approx(6 / 7)
    assert RX.document_coverage([12, 1, 1, 12], 0) == 1.0
    assert RX.document_coverage([12, 1, 1, 12], 5) == pytest.approx(14 / 22)


def test_document_coverage_of_one_document_is_context_coverage():
    for k in range(0, 70):
        assert RX.document_coverage([64], k) == pytest.approx(RD.context_coverage(64, k), abs=1e-15)


@pytest.mark.parametrize("bad", [[], 5, [0, 3], [2.5], [1]])
def test_document_coverage_bad_input(bad):
    with pytest.raises((TypeError, ValueError), match="doc_lengths|row"):
        RX.document_coverage(bad, 1)


WRONG_DOC = {
    "the course's document_coverage": lambda d, k: RX.document_coverage(d, k),
    "context_coverage of the whole row": lambda d, k: RD.context_coverage(sum(d), k),
    "document starts counted as targets": lambda d, k: sum(max(0, n - max(k, 1)) for n in d) / (sum(d) - 1),
    "off by one (o > k)": lambda d, k: sum(max(0, n - 1 - k) for n in d) / sum(n - 1 for n in d),
    "no guard at k = 0": lambda d, k: sum(max(0, n - k) for n in d) / sum(n - 1 for n in d),
    "mean of per-document shares": lambda d, k: (
        sum(max(0, n - max(k, 1)) / (n - 1) for n in d if n > 1) / sum(1 for n in d if n > 1)
    ),
    "no clamp": lambda d, k: sum(n - max(k, 1) for n in d) / sum(n - 1 for n in d),
}


def test_check_document_coverage_accepts_the_learner_form(capsys):
    assert RX.check_document_coverage(_learner)
    assert "✓ pass" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(WRONG_DOC))
def test_check_document_coverage_rejects(name, capsys):
    assert not RX.check_document_coverage(WRONG_DOC[name])
    out = capsys.readouterr().out
    assert "✗ fail" in out and "doc_lengths=" in out  # names the first case that differs


def test_stubs_read_not_attempted(capsys):
    def stub(*args):
        raise NotImplementedError

    for checker in (RX.check_set_nll, RX.check_context_coverage, RX.check_document_coverage):
        assert not checker(stub)
    assert capsys.readouterr().out.count("not attempted yet") == 3


# ---------------------------------------------------------------- duplicated fraction


def test_duplicated_mix_keeps_the_size_and_spreads_the_copies():
    base = RD._python_docs().train
    for fraction in (0.0, 0.1, 0.5):
        mix = RDup.duplicated_mix(fraction, total=20_000, slice_chars=200)
        assert len(mix["ids"]) == 20_000 and mix["copies"] == round(fraction * 100)
        assert torch.equal(mix["slice"], base[20_000:20_200])  # beyond the distinct part
        assert len(mix["unique"]) == 20_000 - 200 * mix["copies"]
        assert torch.equal(mix["unique"], base[: len(mix["unique"])])
        # count the copies by sliding the slice over the mix
        windows = mix["ids"].unfold(0, 200, 1)
        assert int((windows == mix["slice"]).all(1).sum()) == mix["copies"]
    starts = (
        (RDup.duplicated_mix(0.5, total=20_000)["ids"].unfold(0, 200, 1) == mix["slice"]).all(1)
    ).nonzero()
    assert starts.min() < 1000 and starts.max() > 19_000  # spread through the set, not at one end


@pytest.mark.parametrize("bad", [-0.1, 0.95, "a"])
def test_duplicated_mix_bad_fraction(bad):
    with pytest.raises((TypeError, ValueError), match="fraction"):
        RDup.duplicated_mix(bad)


def test_duplicate_run_reports_losses_of_its_own_model(monkeypatch):
    calls = []

    def fake_text_run(ids, steps=200, seed=0):
        calls.append(len(ids))
        return RD.text_run(ids[:3000], steps=2, seed=seed, eval_interval=2, eval_batches=1)

    monkeypatch.setattr(RDup, "text_run", fake_text_run)
    RDup.duplicate_run.cache_clear()
    out = RDup.duplicate_run(0.25)
    assert calls == [200_000] and out["copies"] == 250
    mix = RDup.duplicated_mix(0.25)
    assert out["repeated"] == pytest.approx(RD.split_loss(out["run"].model, mix["slice"], rows=3))
    assert out["held_out"] == pytest.approx(RD.split_loss(out["run"].model, RD._python_docs().val))
    RDup.duplicate_run.cache_clear()


def test_duplicate_figure_and_explorer(monkeypatch):
    run = RD.text_run(RD._python_docs().train[:3000], steps=2, eval_interval=1, eval_batches=1)
    a = {"run": run, "copies": 0, "distinct": 2.6, "repeated": 2.7, "held_out": 2.72}
    b = {"run": run, "copies": 500, "distinct": 2.67, "repeated": 1.3, "held_out": 2.83}
    fig = RV.plot_duplicate_fraction(a, b, 0.5)
    assert len(fig.axes) == 2
    plt.close(fig)
    trained = []
    monkeypatch.setattr(RV, "duplicate_run", lambda f: trained.append(f) or b)
    box = RV.duplicate_explorer(a, b, 0.5)
    slider, image = box.children
    assert trained == [] and image.value[:4] == b"\x89PNG"  # the start state trains nothing
    slider.value = 0.1
    assert trained == [0.1]
    plt.close("all")


# ---------------------------------------------------------------- issue 38: the answer matrix's findings


def test_shares_computed_in_float32_pass(capsys):
    """Issue 38: rtol 1e-9 rejected a share computed in float32 ('expected 0.50793651, got
    0.50793654'), e.g. torch's integer sums divided (float32 by default); rtol 1e-6 now, and a
    count off by one is still off by 1 / (L - 1) or more."""
    import numpy as np

    def doc_torch(d, k):
        lengths = torch.tensor(d)
        starts = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
        offset = torch.arange(int(lengths.sum())) - starts
        valid = offset > 0
        return float((valid & (offset >= k)).sum() / valid.sum())

    assert RX.check_context_coverage(
        lambda L, k: float(np.float32(max(0, L - max(k, 1))) / np.float32(L - 1))
    )
    assert RX.check_document_coverage(doc_torch)
    assert capsys.readouterr().out.count("✓ pass") == 2
    for fn in WRONG_DOC.values():
        assert not _quiet(RX.check_document_coverage, fn)
