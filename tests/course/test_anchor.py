"""Notebook 04's support code: the ln V table, first losses, the sigma^2/2 law, the leaky run."""

import itertools
import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")

from lmcore.course.anchor import diagnoses as dg  # noqa: E402
from lmcore.course.anchor import lesson as an  # noqa: E402
from lmcore.course.anchor import step0 as s0  # noqa: E402
from lmcore.course.anchor import views as anv  # noqa: E402


def test_anchor_table_reproduces_the_well_known_anchors():
    worked = {5: (1.61, 2.32), 32_000: (10.37, 14.97), 50_257: (10.82, 15.62), 128_256: (11.76, 16.97)}
    rows = an.anchor_table()
    assert [r["V"] for r in rows] == list(worked)
    for r in rows:
        assert (round(r["nats"], 2), round(r["bits"], 2)) == worked[r["V"]]
    assert an.anchor_table({"x": 2})[0]["bits"] == 1.0


def test_predict_first_loss():
    assert an.predict_first_loss(50_257, 0.0) == math.log(50_257)
    assert math.isclose(an.predict_first_loss(1000, 2.0), math.log(1000) + 2.0)


def test_fresh_gpt_first_loss_is_near_ln_v():
    for V in (5, 50_257):
        m = an.first_loss(V)
        assert abs(m["loss"] - math.log(V)) < 0.05
        assert m["sigma"] < 0.2 and math.isclose(m["predicted"], math.log(V) + m["sigma"] ** 2 / 2)


def test_a_larger_init_scale_raises_the_first_loss():
    small, large = an.first_loss(1000), an.first_loss(1000, init_std=0.3)
    assert large["sigma"] > 5 * small["sigma"]
    assert large["loss"] > small["loss"] + 0.3


def test_iid_logit_loss_follows_sigma_squared_over_two():
    assert math.isclose(an.iid_logit_loss(1000, 0.0), math.log(1000), rel_tol=1e-12)
    for s in (0.5, 1.0):
        assert abs(an.iid_logit_loss(50_257, s) - (math.log(50_257) + s * s / 2)) < 0.02
    # independent check of the estimator: average F.cross_entropy over every target
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3, 50, generator=g, dtype=torch.float64) * 1.5
    every = torch.stack([F.cross_entropy(z, torch.full((3,), v)) for v in range(50)]).mean()
    assert math.isclose(an.iid_logit_loss(50, 1.5, rows=3, seed=0), float(every), rel_tol=1e-9)


def test_leaky_pipeline_reuses_the_input_as_target():
    data = torch.arange(100)
    x, y = an.get_batch_leaky(data, [3, 50], 5)
    assert torch.equal(x, y)
    x, y = an.get_batch_reference(data, [3, 50], 5)
    assert x.tolist() == [[3, 4, 5, 6, 7], [50, 51, 52, 53, 54]]
    assert torch.equal(y, x + 1)


def test_leaky_run_starts_below_ln_v_and_the_fixed_one_does_not():
    lnv = math.log(65)
    leaky = an.pipeline_run(an.get_batch_leaky, steps=10)
    fixed = an.pipeline_run(an.get_batch_reference, steps=10)
    assert leaky[0] < lnv - 0.1 and leaky[-1] < leaky[0] - 1.0
    assert all(abs(v - lnv) < 0.1 for v in fixed)


def test_plot_first_loss_returns_a_figure():
    fig = anv.plot_first_loss(1000, 0.05)
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2
    assert "1,000" in fig.axes[0].get_title() and "1,000" in fig.axes[1].get_title()
    assert fig.axes[0].get_ylabel().startswith("first loss") and "ln V" in fig.axes[0].get_ylabel()


def test_excess_over_vocab_is_half_sigma_squared_once_v_is_large():
    # small sigma: second-order Taylor of logsumexp(z) - mean(z) - ln V is (1 - 1/V) sigma^2 / 2
    s = 0.08
    for V, excess in anv.excess_over_vocab(s):
        assert excess == pytest.approx((1 - 1 / V) * s * s / 2, rel=0.05), V
    # large sigma: the law holds at large V and fails (well below) at small V
    pts = dict(anv.excess_over_vocab(2.0))
    assert pts[128_256] == pytest.approx(2.0, abs=0.05)
    assert pts[2] < 1.0 and pts[100] < 2.0 - 0.05


def _stub(*args):
    raise NotImplementedError


def _np_sigma(z):
    z = z.double().reshape(-1, z.shape[-1]).numpy()
    return float(np.sqrt(np.mean(np.var(z, axis=1))))


def test_logit_sigma_is_the_spread_within_each_position():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(3, 4, 50, generator=g) * 0.7
    assert math.isclose(an.logit_sigma(z), _np_sigma(z), rel_tol=1e-9)
    shifted = z + 5.0 * torch.randn(3, 4, 1, generator=g)  # a constant per position
    assert math.isclose(an.logit_sigma(shifted), an.logit_sigma(z), rel_tol=1e-5)
    with pytest.raises(TypeError, match="logits"):
        an.logit_sigma(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="logits"):
        an.logit_sigma(torch.ones(2, 1))


def test_expected_first_loss_is_the_mean_over_every_target():
    g = torch.Generator().manual_seed(2)
    z = torch.randn(2, 3, 40, generator=g, dtype=torch.float64) * 1.3
    flat = z.reshape(-1, 40)
    every = torch.stack([F.cross_entropy(flat, torch.full((6,), v)) for v in range(40)]).mean()
    assert math.isclose(an.expected_first_loss(z), float(every), rel_tol=1e-10)


def test_jensen_bounds_the_expected_loss_between_ln_v_and_ln_v_plus_half_sigma_squared():
    for V, s in ((100, 0.5), (1000, 1.0), (50, 2.0), (5000, 3.0)):  # the bound holds in
        loss = an.iid_logit_loss(V, s, rows=256)  # expectation: allow noise
        assert math.log(V) <= loss <= math.log(V) + s * s / 2 + 0.01
    # where a few large logits dominate (V not >> e^(sigma^2)) the bound is far from tight
    assert an.iid_logit_loss(50, 3.0, rows=256) < math.log(50) + 4.5 - 0.5
    for s in (0.5, 1.0, 2.0):
        assert abs(an.mean_exp_normal(s) / math.exp(s * s / 2) - 1) < 0.02


def test_head_first_loss_follows_gain_times_std_times_sqrt_d():
    for D, gain in ((768, 1.0), (4096, 1.0), (4096, 4 / 64)):
        m = an.head_first_loss(D, 2048, gain=gain, rows=32)
        assert math.isclose(m["sigma_formula"], gain * 0.02 * math.sqrt(D))
        assert abs(m["sigma"] - m["sigma_formula"]) < 0.02 * m["sigma_formula"]
        assert abs(m["expected"] - (math.log(2048) + m["sigma_formula"] ** 2 / 2)) < 0.02
    wide = an.head_first_loss(4096, 2048, rows=32)
    assert 0.78 < wide["expected"] - wide["ln_v"] < 0.86  # an untied head at D = 4096


def test_standard_gain_one_gpt_starts_above_ln_v_and_lmcore_gain_does_not():
    std = an.first_loss(2048, n_embd=768, final_gain=1.0, batch=2, length=16)
    assert std["gain"] == 1.0 and abs(std["sigma"] - 0.02 * math.sqrt(768)) < 0.03
    assert 0.13 < std["expected"] - std["ln_v"] < 0.17
    ours = an.first_loss(2048, n_embd=768, batch=2, length=16)
    assert math.isclose(ours["gain"], 4 / math.sqrt(768), rel_tol=1e-6)
    assert abs(ours["sigma"] - 0.08) < 0.01 and ours["expected"] - ours["ln_v"] < 0.01
    untied = an.first_loss(2048, n_embd=768, final_gain=1.0, tied=False, batch=2, length=16)
    assert 0.13 < untied["expected"] - untied["ln_v"] < 0.17


def test_check_predict_from_logits_accepts_and_rejects(capsys):
    def mine(z):
        V = z.shape[-1]
        return math.log(V) + _np_sigma(z) ** 2 / 2

    def unbiased(z):
        return math.log(z.shape[-1]) + float(z.double().var(-1).mean()) / 2

    assert an.check_predict_from_logits(mine) and an.check_predict_from_logits(unbiased)

    def exact(z):  # the exact mean loss the law approximates (review 00-05: rejected by 0.0054)
        z = z.double()
        return float((torch.logsumexp(z, -1) - z.mean(-1)).mean())

    def float32_centred(z):  # float32, centred by hand
        c = z.float() - z.float().mean(-1, keepdim=True)
        return math.log(z.shape[-1]) + float((c * c).mean()) / 2

    assert an.check_predict_from_logits(exact) and an.check_predict_from_logits(float32_centred)
    wrongs = [
        lambda z: math.log(z.shape[-1]) + float(z.std()) ** 2 / 2,  # global std
        lambda z: math.log2(z.shape[-1]) + _np_sigma(z) ** 2 / 2,  # bits
        lambda z: math.log(z.shape[-1]) + _np_sigma(z) ** 2,  # no 1/2
        lambda z: math.log(z.shape[-1]) + _np_sigma(z) / 2,  # sigma, not sigma^2
        lambda z: math.log(z.shape[1]) + _np_sigma(z) ** 2 / 2,  # L, not V
        lambda z: math.log(z.shape[-1]),
    ]  # no spread
    assert not any(an.check_predict_from_logits(w) for w in wrongs)
    assert not an.check_predict_from_logits(_stub)
    out = capsys.readouterr().out
    assert out.count("fail") == len(wrongs) and "not attempted yet" in out
    for reference in (an.predict_from_logits, lambda z: math.log(z.shape[-1]) + an.logit_sigma(z) ** 2 / 2):
        assert not an.check_predict_from_logits(reference)
    out = capsys.readouterr().out
    assert (
        "called lmcore.course.anchor.lesson.predict_from_logits" in out
        and "called lmcore.course.anchor.lesson.logit_sigma" in out
    )


# ---------------------------------------------------------------- step 0: what it can and cannot see


def test_step0_sees_only_the_tied_own_input_leak_and_misreads_repeats():
    r = s0.step0_losses()
    lnv = r["ln V"]
    for name in (
        "honest (target = next token)",
        "shift by 2 (target = token t+2)",
        "target = previous token",
        "target = own input, untied output matrix",
        "causal mask one token too wide (t reads t+1)",
    ):
        assert abs(r[name] - lnv) < 0.05, name
    assert r["target = own input, tied (no shift)"] < lnv - 0.15
    assert lnv - 0.3 < r["honest, on text repeating its token half the time"] < lnv - 0.08


def test_repeating_tokens_repeat_at_the_asked_rate():
    ids = s0.repeating_tokens(50, 0.5, 64, 64, seed=3)
    rate = float((ids[:, 1:] == ids[:, :-1]).double().mean())
    assert abs(rate - (0.5 + 0.5 / 50)) < 0.02
    assert (
        float(
            (s0.repeating_tokens(50, 0.0, 64, 64)[:, 1:] == s0.repeating_tokens(50, 0.0, 64, 64)[:, :-1])
            .double()
            .mean()
        )
        < 0.05
    )
    with pytest.raises(ValueError, match="q"):
        s0.repeating_tokens(50, 1.5, 2, 2)


def test_own_token_lift_and_the_repeat_law_against_a_loop():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(300, (2, 5), generator=g)
    z = 0.2 * torch.randn(2, 5, 300, generator=g, dtype=torch.float64) + 0.7 * F.one_hot(ids, 300)
    lift = sum(float(z[n, t, ids[n, t]] - z[n, t].mean()) for n in range(2) for t in range(5)) / 10
    assert s0.own_token_lift(z, ids) == pytest.approx(lift, rel=1e-12)
    # the law against the exact expectation: q of the targets own, the rest uniform over V
    lse = torch.logsumexp(z, -1)
    own = z.gather(-1, ids[..., None])[..., 0]
    for q in (0.0, 0.3, 1.0):
        exact = float((q * (lse - own) + (1 - q) * (lse - z.mean(-1))).mean())
        assert s0.predict_with_repeats(z, ids, q) == pytest.approx(exact, abs=0.01)
    with pytest.raises(ValueError, match="do not match"):
        s0.own_token_lift(z, ids[:, :4])


def test_an_honest_first_loss_on_repeats_follows_the_law():
    m = s0.repeat_first_loss(65, 0.5)
    assert abs(m["loss"] - m["predicted"]) < 0.05 and m["loss"] < m["ln_v"] - 0.08
    assert abs(m["q_seen"] - 0.5) < 0.05


def test_check_predict_with_repeats(capsys):
    def mine(z, ids, q):
        zz = z.double()
        var = float(zz.var(-1, unbiased=False).mean())
        lift = float((zz.gather(-1, ids[..., None])[..., 0] - zz.mean(-1)).mean())
        return math.log(z.shape[-1]) + var / 2 - q * lift

    assert s0.check_predict_with_repeats(mine)

    def exact(z, ids, q):  # the exact mean loss (review 00-05: rejected at atol 1e-6 by 3e-4)
        z = z.double()
        lse, own = torch.logsumexp(z, -1), z.gather(-1, ids[..., None])[..., 0]
        return float((q * (lse - own) + (1 - q) * (lse - z.mean(-1))).mean())

    def other_logits(z, ids, q):  # lift and sigma measured against the other V - 1 logits
        z, V = z.double(), z.shape[-1]
        keep = 1 - F.one_hot(ids, V).double()
        mean = (z * keep).sum(-1) / (V - 1)
        var = (((z - mean[..., None]) ** 2) * keep).sum(-1) / (V - 1)
        own = z.gather(-1, ids[..., None])[..., 0]
        return math.log(V) + float(var.mean()) / 2 - q * float((own - mean).mean())

    for right in (exact, other_logits, torch.no_grad()(mine)):
        assert s0.check_predict_with_repeats(right), capsys.readouterr().out
    capsys.readouterr()

    def raw_own_logit(z, ids, q):  # not centred on the row mean
        zz = z.double()
        return (
            math.log(z.shape[-1])
            + float(zz.var(-1, unbiased=False).mean()) / 2
            - q * float(zz.gather(-1, ids[..., None]).mean())
        )

    def global_variance(z, ids, q):
        return (
            mine(z, ids, q)
            - float(z.double().var(-1, unbiased=False).mean()) / 2
            + float(z.double().var()) / 2
        )

    wrongs = [
        lambda z, ids, q: mine(z, ids, 0.0),  # the repeats ignored: Exercise 2's answer
        lambda z, ids, q: mine(z, ids, 1.0),  # every target taken as a repeat
        lambda z, ids, q: mine(z, ids, -q),  # + q * lift: the sign
        raw_own_logit,
        global_variance,
        lambda z, ids, q: s0.predict_with_repeats(z, ids, q),
        lambda z, ids, q: an.predict_from_logits(z) - q * s0.own_token_lift(z, ids),
        _stub,
    ]
    for w in wrongs:
        assert not s0.check_predict_with_repeats(w)
    out = capsys.readouterr().out
    assert "called lmcore.course.anchor.step0.predict_with_repeats" in out and "not attempted yet" in out
    assert "called lmcore.course.anchor.lesson.predict_from_logits" in out


def test_the_first_loss_mistakes_never_read_as_one_another():
    """Exercise 2's first hint names a mistake only when the value matches it alone: on every case,
    two mistakes with different questions that a failing value (2e-3 or more off) could match lie
    further apart than the 5e-4 each one reaches."""
    for case in an._logit_cases():
        z = case.args[0].double()
        e = an.predict_from_logits(z)
        live = [(v, q) for v, q in dg._mistakes(z) if abs(v - e) > 2e-3 - 5e-4]
        for (u, x), (v, y) in itertools.combinations(live, 2):
            assert x == y or abs(u - v) > 1e-3, (case.label, x, y)


def test_the_repeat_mistakes_never_read_as_one_another():
    """Exercise 3's likewise: on every case, the mistakes that change the value there, taken in
    pairs with different questions, lie further apart than their two tolerances reach."""
    for case in s0._repeat_cases():
        z, ids, q = case.args
        e = s0.predict_with_repeats(z, ids, q)
        live = [(v, t, w) for v, t, w in s0._repeat_mistakes(z, ids, q) if abs(v - e) >= t]
        assert len({w for *_, w in live}) >= 2, case.label
        for (u, a, x), (v, b, y) in itertools.combinations(live, 2):
            assert x == y or abs(u - v) > a + b, (case.label, x, y)


@pytest.mark.slow
def test_after_training_on_random_tokens_only_the_pipelines_that_read_their_target_fall_below_ln_v():
    """A shift by 2 is a misalignment, not a leak: trained on random tokens it stays on ln V with
    the honest pipeline, while the three that see their target fall far below (review 00-05, 04)."""
    for seed in (0, 1):
        r = s0.losses_after_training(60, seed=seed)
        lnv = r.pop("ln V")
        for name in ("honest (target = next token)", "shift by 2 (target = token t+2)"):
            assert abs(r.pop(name) - lnv) < 0.05, (seed, name)
        assert set(r) == {
            "target = previous token",
            "target = own input, untied output matrix",
            "causal mask one token too wide (t reads t+1)",
            "target = own input, tied (no shift)",
        }
        assert all(loss < lnv - 1.0 for loss in r.values()), (seed, r)


@pytest.mark.slow
def test_the_short_run_key_is_what_the_run_shows_on_two_seeds():
    """Exercise 3's hashed key against the run it predicts (seed 0, the notebook's, and seed 1)."""
    from lmcore.course.checks import answer_digest

    for seed in (0, 1):
        verdicts = s0.short_run_verdicts(seed=seed)
        assert set(verdicts) == set(s0.BROKEN) and set(verdicts.values()) <= set(s0.SHORT_RUN_CHOICES)
        for name, verdict in verdicts.items():
            assert answer_digest("short_run_prediction", name, verdict) == s0._SHORT_RUN_KEY[name], (
                seed,
                name,
            )


def test_losses_after_training_checks_its_arguments():
    for bad in (0, 1.5, "60"):
        with pytest.raises((ValueError, TypeError), match="steps"):
            s0.losses_after_training(bad)
    with pytest.raises((ValueError, TypeError), match="vocab_size"):
        s0.losses_after_training(1, vocab_size=1)


def test_first_loss_at_spread_reference_is_the_monte_carlo_expectation():
    """The check's expectation, ln V + sigma^2/2 - (e^(sigma^2) - 1) / (2V), against Monte Carlo
    (300 to 4,000 rows of i.i.d. logits, float64) on every case; and the law is tight on every case."""
    from lmcore.course.anchor import spread

    for V, sigma in spread._CASES:
        assert V >= 30 * math.exp(sigma**2)
        if sigma == 0:
            assert spread.expected_loss_at_spread(V, sigma) == math.log(V)
            continue
        rows = 4_000 if V <= 8_192 else 300
        z = torch.randn(rows, V, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * sigma
        mc = torch.logsumexp(z, -1) - z.mean(-1)
        tolerance = 4 * float(mc.std()) / math.sqrt(rows) + 1e-4
        assert abs(float(mc.mean()) - spread.expected_loss_at_spread(V, sigma)) < tolerance, (V, sigma)
        assert spread._allowed(V, sigma) < 0.0075
