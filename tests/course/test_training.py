"""Notebook 08's support code: AdamW by hand, the phases read from a run, exposure-bias measurements, the
sampling widget's state, top-p properties, word share, plots and the exercise checkers.

References are independent: torch.optim.AdamW, F.cross_entropy in float64, naive loops.
"""

import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmcore.course.training import exposure as E  # noqa: E402
from lmcore.course.training import exposure_views as EV  # noqa: E402
from lmcore.course.training import lesson as T  # noqa: E402
from lmcore.course.training import views as TV  # noqa: E402
from lmcore.data.tokenizers import CharTokenizer  # noqa: E402
from lmcore.model import GPT, GPTConfig  # noqa: E402

TEXT = "abcdefghij "


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(TEXT), block_size=16, n_layer=1, n_head=2, n_embd=16)).eval()
    with torch.no_grad():  # sharper than at init, so filters matter
        model.wte.weight.mul_(30)
    return model, CharTokenizer(TEXT)


def test_preset_for():
    assert T.preset_for("cpu") == "cpu" and T.preset_for(torch.device("cuda")) == "gpu"
    assert T.preset_for("meta") == "cpu"


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adamw_by_hand_matches_torch_over_three_steps(wd):
    g = torch.Generator().manual_seed(1)
    p = torch.randn(4, 5, generator=g, dtype=torch.float64)
    q = p.clone().requires_grad_(True)
    opt = torch.optim.AdamW([q], lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=wd)
    m = v = None
    for step in range(1, 4):
        grad = torch.randn(4, 5, generator=g, dtype=torch.float64) * 10 ** (step - 2)
        q.grad = grad.clone()
        opt.step()
        p, m, v = T.adamw_by_hand(p, grad, lr=1e-2, betas=(0.9, 0.99), weight_decay=wd, m=m, v=v, step=step)
        assert torch.allclose(p, q.detach(), atol=1e-12, rtol=1e-10)


def test_adamw_first_step_moves_by_lr():
    p = torch.zeros(3, dtype=torch.float64)
    new, _, _ = T.adamw_by_hand(p, torch.tensor([1e-4, -3.0, 50.0], dtype=torch.float64), lr=0.1)
    assert torch.allclose(new, torch.tensor([-0.1, 0.1, -0.1], dtype=torch.float64), atol=1e-5)


def _history(vals, every=10):
    return [{"step": i * every, "train_loss": v + 0.1, "val_loss": v} for i, v in enumerate(vals)]


def _dense(gaps, losses, every=5):
    return [{"step": i * every, "loss": v, "frequency_gap": g} for i, (g, v) in enumerate(zip(gaps, losses))]


def test_read_phases_puts_the_boundaries_where_the_measurements_do():
    h = _history([5.0, 3.0, 2.8, 2.7, 2.65, 2.62, 2.6])  # records every 10 steps, 0..60
    d = _dense([1.0, 0.5, 0.2, 0.09, 0.05], [5.0, 4.0, 3.5, 3.2, 3.0])  # steps 0..20
    ph = T.read_phases(h, d)
    # phase 1 ends where the gap has closed by 90% (0.09 <= 0.1: step 15); phase 3 starts at
    # the first record within a tenth of the drop (2.4) of the final 2.6: 2.8 at step 20
    assert ph["steps"] == [0, 15, 20, 60]
    assert ph["loss"] == [5.0, 3.2, 2.8, 2.6]
    assert np.allclose(ph["drops"], [1.8, 0.4, 0.2]) and ph["total_drop"] == pytest.approx(2.4)
    assert sum(ph["shares"]) == pytest.approx(1.0) and ph["shares"][0] == pytest.approx(0.75)
    assert np.allclose(ph["step_shares"], [15 / 60, 5 / 60, 40 / 60])
    assert T.read_phases(h, d, gap_closed=0.5)["steps"][1] == 5  # 0.5 <= 0.5
    assert T.read_phases(h, d, last_share=0.5)["steps"][2] == 15  # not before phase 1 ends
    never = T.read_phases(h, _dense([1.0, 0.9], [5.0, 4.5]))
    assert never["steps"][1] == 5  # the gap never closed: phase 1 runs to the last dense point


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"gap_closed": 1.0}, "gap_closed"),
        ({"last_share": 0}, "last_share"),
        ({"gap_closed": True}, "gap_closed"),
    ],
)
def test_read_phases_refuses_bad_thresholds(kwargs, words):
    h, d = _history([5.0, 3.0, 2.8]), _dense([1.0, 0.05], [5.0, 3.0])
    with pytest.raises(ValueError, match=words):
        T.read_phases(h, d, **kwargs)
    with pytest.raises(ValueError, match="2\\+ records"):
        T.read_phases(h[:1], d)
    with pytest.raises(ValueError, match="dense 1\\+"):
        T.read_phases(h, [])


def test_plot_loss_curves_lines_phases_dense_points_and_best():
    h = _history([4.6, 3.5, 3.0, 2.8, 2.7, 2.65])
    d = _dense([1.0, 0.5, 0.05], [4.6, 4.0, 3.6], every=4)
    fig = TV.plot_loss_curves(h, math.log(103), 3.25, phases=T.read_phases(h, d), dense=d, best_step=40)
    ax = fig.axes[0]
    flat = [ln.get_ydata()[0] for ln in ax.lines if len(set(ln.get_ydata())) == 1]
    assert any(abs(y - math.log(103)) < 1e-12 for y in flat) and 3.25 in flat
    assert {t.get_text() for t in ax.texts} == {"1 frequencies", "2 context", "3 flattening"}
    assert ax.get_xscale() == "symlog" and "log scale" in ax.get_xlabel()
    val = next(ln for ln in ax.lines if ln.get_label() == "validation")
    # the validation line runs through the dense points, then the records after them
    assert list(val.get_xdata()) == [0, 4, 8, 10, 20, 30, 40, 50]
    assert list(val.get_ydata())[:4] == [4.6, 4.0, 3.6, 3.5]
    assert any("best record (step 40)" in ln.get_label() for ln in ax.lines)
    assert ax.get_ylabel() and ax.get_title()
    plt.close(fig)
    plain = TV.plot_loss_curves(h)
    assert plain.axes[0].get_xscale() == "linear" and not plain.axes[0].texts
    plt.close(plain)


def _naive_filtered(logits, T_, k=None, p=None):
    z = [float(v) / T_ for v in logits]
    m = max(z)
    probs = [math.exp(v - m) for v in z]
    probs = [q / sum(probs) for q in probs]
    order = sorted(range(len(z)), key=lambda i: -probs[i])
    keep = set(order[:k] if k else order)
    if p is not None:
        mass, keep_p = 0.0, set()
        for i in order:
            if mass >= p:
                break
            keep_p.add(i)
            mass += probs[i]
        keep &= keep_p
    total = sum(probs[i] for i in keep)
    return np.array([probs[i] / total if i in keep else 0.0 for i in range(len(z))])


@pytest.mark.parametrize("T_, k, p", [(1.0, None, None), (0.7, 3, None), (1.3, None, 0.6), (0.9, 4, 0.5)])
def test_sampling_state_distribution(tiny, T_, k, p):
    model, tok = tiny
    s = T.sampling_state(model, tok, "abc d", temperature=T_, top_k=k, top_p=p, n_new=15, seed=4)
    with torch.no_grad():
        logits = model(torch.tensor([tok.encode("abc d")]))[0, -1]
    assert np.allclose(s["probs"], _naive_filtered(logits, T_, k, p), atol=1e-6)
    assert np.allclose(s["raw"], _naive_filtered(logits, T_), atol=1e-6)
    assert s["kept"] == int((s["probs"] > 0).sum()) and (k is None or s["kept"] <= k)
    assert len(s["sample"]) == 15 and set(s["sample"]) <= set(TEXT)  # n_new, past block_size - 1
    again = T.sampling_state(model, tok, "abc d", temperature=T_, top_k=k, top_p=p, n_new=15, seed=4)
    assert again["sample"] == s["sample"]


def test_sampling_state_off_values_greedy_and_errors(tiny):
    model, tok = tiny
    off = T.sampling_state(model, tok, "ab", top_k=0, top_p=1.0, n_new=3)
    assert off["kept"] == len(TEXT)
    greedy = T.sampling_state(model, tok, "ab", temperature=0, n_new=3)
    assert greedy["kept"] == 1 and greedy["probs"].max() == 1.0
    with pytest.raises(ValueError, match="not in this tokenizer"):
        T.sampling_state(model, tok, "xyz", n_new=3)
    with pytest.raises(ValueError, match="prompt"):
        T.sampling_state(model, tok, "", n_new=3)


def test_sampling_reads_the_trained_positions_and_its_length_is_not_capped(tiny):
    """generate slides its window: a sample is as long as asked; the next-token distribution
    of a long prompt is the one after its last context_limit tokens."""
    model, tok = tiny
    assert T.context_limit(model) == 15
    assert len(T.sampling_state(model, tok, "abcdefghij", n_new=50)["sample"]) == 50
    long = T.sampling_state(model, tok, "abcdefghij" * 3, n_new=40)  # 30 > 15: the last 15 read
    with torch.no_grad():
        ref = torch.softmax(model(torch.tensor([tok.encode(("abcdefghij" * 3)[-15:])]))[0, -1].double(), -1)
    assert len(long["sample"]) == 40 and np.allclose(long["raw"], ref.numpy(), atol=1e-6)


def test_plots_and_widget(tiny):
    model, tok = tiny
    s = T.sampling_state(model, tok, "ab", top_k=3, n_new=5)
    fig = TV.plot_next_token_distribution(s, tok, k=8)
    assert len(fig.axes[0].get_xticks()) == 8
    plt.close(fig)
    fig = EV.plot_mistake_effect(np.linspace(0, 1, 11), 4)
    assert len(fig.axes[0].patches) == 11
    plt.close(fig)
    box = TV.sampling_explorer(model, tok, "ab", n_new=5)
    controls = box.children[0].children[0].children
    image, text = box.children[0].children[1], box.children[1]
    before = image.value
    controls[1].value = 0.3  # temperature
    assert image.value != before and "<pre>" in text.value
    controls[0].value = "xyz"  # a prompt outside the vocabulary
    assert "not in this tokenizer" in text.value
    assert T.show_char("\n") == "⏎" and T.show_char(" ") == "␣" and T.show_char("a") == "a"


# ---------------------------------------------------------------- exercises


def _top_p_solution(probs, p):
    sorted_p, order = torch.sort(probs, descending=True)
    mass_before = torch.cumsum(sorted_p, 0) - sorted_p
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order] = mass_before < p
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum()


def _naive_top_p(probs, p):
    probs = [float(v) for v in probs]
    return _naive_filtered([math.log(v) for v in probs], 1.0, None, p)


def test_top_p_reference_against_naive_loop():
    g = torch.Generator().manual_seed(0)
    for V in (3, 10, 40):
        w = torch.rand(V, generator=g, dtype=torch.float64) ** 2
        for p in (0.1, 0.5, 0.95):
            assert np.allclose(
                T.top_p_reference(w / w.sum(), p).numpy(), _naive_top_p(w / w.sum(), p), atol=1e-12
            )


def _excludes_crossing(probs, p):
    s, order = torch.sort(probs, descending=True)
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order] = torch.cumsum(s, 0) <= p
    keep[order[0]] = True
    out = torch.where(keep, probs, 0.0)
    return out / out.sum()


def _no_renormalise(probs, p):
    out = _top_p_solution(probs, p)
    return out * probs[out > 0].sum()


def _ascending(probs, p):
    s, order = torch.sort(probs)
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order] = torch.cumsum(s, 0) - s < p
    out = torch.where(keep, probs, 0.0)
    return out / out.sum()


def _unsorted(probs, p):
    keep = torch.cumsum(probs, 0) - probs < p
    out = torch.where(keep, probs, 0.0)
    return out / out.sum()


@pytest.mark.parametrize("wrong", [_excludes_crossing, _no_renormalise, _ascending, _unsorted])
def test_top_p_checker(wrong, capsys):
    assert T.check_top_p(_top_p_solution)
    assert not T.check_top_p(wrong)
    assert "✗ fail" in capsys.readouterr().out


def test_top_p_checker_refuses_lmcores_filter_and_its_own_reference(capsys):
    """Review 06-10: check_top_p refused nothing, so lmcore.sample.filter_logits passed."""
    from lmcore.sample import filter_logits

    for cheat in (
        T.top_p_reference,
        lambda probs, p: torch.softmax(filter_logits(probs.log(), top_p=p), -1),
    ):
        assert not T.check_top_p(cheat)
        assert "your function called" in capsys.readouterr().out
    assert T.check_top_p(torch.no_grad()(_top_p_solution))  # a decorated right answer


def test_checkers_say_not_attempted(capsys):
    def stub(*args):
        raise NotImplementedError

    assert not T.check_top_p(stub)
    assert capsys.readouterr().out.count("not attempted yet") == 1


def test_single_mistake_effect_against_a_naive_loop(tiny):
    model, _ = tiny
    ids = torch.randint(len(TEXT), (6, 12), generator=torch.Generator().manual_seed(3))
    got = E.single_mistake_effect(model, ids, 4, seed=5)
    g = torch.Generator().manual_seed(5)  # the same corruption, rebuilt
    bad = ids.clone()
    bad[:, 4] = (ids[:, 4] + torch.randint(1, len(TEXT), (6,), generator=g)) % len(TEXT)
    assert (bad[:, 4] != ids[:, 4]).all()
    with torch.no_grad():
        lc, lb = model(ids).double(), model(bad).double()
    ref = np.zeros(11)
    for t in range(11):
        ref[t] = np.mean(
            [
                float(F.cross_entropy(lb[n, t], ids[n, t + 1]) - F.cross_entropy(lc[n, t], ids[n, t + 1]))
                for n in range(6)
            ]
        )
    assert np.allclose(got, ref, atol=1e-5)
    assert np.abs(got[:4]).max() < 1e-6  # causal: nothing before the mistake
    with pytest.raises(ValueError, match="position"):
        E.single_mistake_effect(model, ids, 11)


def test_free_running_loss_against_float64_cross_entropy(tiny):
    model, _ = tiny
    rows = torch.randint(len(TEXT), (5, 14), generator=torch.Generator().manual_seed(1))
    fr = E.free_running_loss(model, rows, prompt_len=4, seed=3)
    own = fr["own_ids"]
    assert own.shape == rows.shape and torch.equal(own[:, :4], rows[:, :4])
    assert not torch.equal(own, rows)
    for key, x in (("own", own), ("real", rows)):
        with torch.no_grad():
            logits = model(x).double()
        ref = np.array(
            [[float(F.cross_entropy(logits[n, t], x[n, t + 1])) for t in range(3, 13)] for n in range(5)]
        ).mean(0)
        assert fr[key].shape == (10,) and np.allclose(fr[key], ref, atol=1e-5)
    again = E.free_running_loss(model, rows, prompt_len=4, seed=3)
    assert torch.equal(again["own_ids"], own)  # seeded
    for bad in (dict(prompt_len=0), dict(prompt_len=14)):
        with pytest.raises(ValueError, match="prompt_len"):
            E.free_running_loss(model, rows, **bad)
    with pytest.raises(ValueError, match="block_size|reads at most"):
        E.free_running_loss(model, torch.zeros(2, 20, dtype=torch.long))


def test_growth_and_plot():
    assert E.growth(np.r_[np.zeros(8), np.ones(8), np.full(16, 2.0)]) == pytest.approx(2.0)
    assert E.growth(np.arange(20.0), first=4, last=4) == pytest.approx(16.0)
    with pytest.raises(ValueError, match="at least"):
        E.growth(np.zeros(5))
    fig = EV.plot_free_running({"own": np.ones(10), "real": np.zeros(10)})
    assert len(fig.axes[0].lines) == 2 and fig.axes[0].get_title()
    plt.close(fig)


PROPS = ("most_likely", "reaches_p", "smallest", "renormalised")


def test_top_p_properties_accept_the_reference_and_catch_wrong_filters():
    g = torch.Generator().manual_seed(0)
    for V in (5, 30, 103):
        w = torch.rand(V, generator=g, dtype=torch.float64) ** 3
        raw = w / w.sum()
        for p in (0.3, 0.9):
            ok = T.top_p_properties(raw.numpy(), T.top_p_reference(raw, p).numpy(), p)
            assert ok["most_likely"] and ok["reaches_p"] and ok["smallest"] and ok["renormalised"]
            assert ok["kept"] == int(
                (
                    torch.cumsum(raw.sort(descending=True).values, 0) - raw.sort(descending=True).values < p
                ).sum()
            )
            ref = T.top_p_reference(raw, p)
            for wrong in (_excludes_crossing, _no_renormalise, _ascending, _unsorted):
                out = wrong(raw, p)
                if not torch.allclose(out, ref):  # where the wrong filter differs, it is caught
                    props = T.top_p_properties(raw.numpy(), out.numpy(), p)
                    assert not all(props[k] for k in PROPS), (wrong.__name__, V, p)
            everything = T.top_p_properties(raw.numpy(), raw.numpy(), p)  # no filter at all
            assert not everything["smallest"]


def test_word_share():
    vocab = {"the", "return", "value"}
    assert T.word_share("The return value, the value!", vocab) == pytest.approx(4 / 5)  # "The" != "the"
    assert T.word_share("xq zzv the", vocab) == pytest.approx(1 / 3)
    assert math.isnan(T.word_share("1 + 2 ;", vocab))


def test_repeated_ngram_share_against_a_count_by_hand():
    assert E.repeated_ngram_share([1, 2, 3, 4, 5, 6], 2) == 0.0  # nothing repeats
    # "abab ab": bigrams ab ba ab ba ab -> 3 of 5 already seen
    assert E.repeated_ngram_share(torch.tensor([0, 1, 0, 1, 0, 1]), 2) == 3 / 5
    assert E.repeated_ngram_share(np.full(10, 7), 4) == 6 / 7  # a loop: all but the first
    rows = torch.tensor([[1, 2, 3, 4, 5], [1, 1, 1, 1, 1]])
    assert E.repeated_ngram_share(rows, 2) == (0 / 4 + 3 / 4) / 2  # a mean over rows
    rng = np.random.default_rng(0)
    text = rng.integers(0, 3, size=200)
    naive = (
        sum(any(tuple(text[j : j + 3]) == tuple(text[i : i + 3]) for j in range(i)) for i in range(198)) / 198
    )
    assert abs(E.repeated_ngram_share(text, 3) - naive) < 1e-12


def test_repeated_ngram_share_checks_its_arguments():
    for bad_n in (0, 2.0, True):
        with pytest.raises((TypeError, ValueError), match="n"):
            E.repeated_ngram_share([1, 2, 3], bad_n)
    for bad in ([1, 2], [[1.5, 2.0, 3.0]], np.zeros((2, 2, 5), dtype=int)):
        with pytest.raises(ValueError, match="ids"):
            E.repeated_ngram_share(bad, 3)


def test_top_p_checker_accepts_float32_and_refuses_lmcores_sampling_distribution(capsys):
    """Issue 38: a filter in float32 is right (rtol 1e-5 on the kept tokens, a dropped one must
    still be 0); lmcore.sample.next_token_distribution runs lmcore's filter without calling
    filter_logits, and is refused as well."""
    from lmcore.sample import next_token_distribution

    assert T.check_top_p(lambda probs, p: _top_p_solution(probs.float(), p))
    assert "✓ pass" in capsys.readouterr().out
    assert not T.check_top_p(lambda probs, p: next_token_distribution(probs.log(), top_p=p).double())
    assert "called lmcore.sample.next_token_distribution" in capsys.readouterr().out

    def leaks(probs, p):  # a dropped token left at a small probability is still wrong
        out = _top_p_solution(probs, p)
        return torch.where(out > 0, out, 1e-7 * probs)

    assert not T.check_top_p(leaks)
