"""Notebook 04's support code: the ln V table, first losses, the sigma^2/2 law, the leaky run."""
import math

import matplotlib
import torch
import torch.nn.functional as F

matplotlib.use("Agg")

from lmcore.course import anchor as an  # noqa: E402


def test_anchor_table_reproduces_the_seed_numbers():
    seed = {5: (1.61, 2.32), 32_000: (10.37, 14.97), 50_257: (10.82, 15.62),
            128_256: (11.76, 16.97)}
    rows = an.anchor_table()
    assert [r["V"] for r in rows] == list(seed)
    for r in rows:
        assert (round(r["nats"], 2), round(r["bits"], 2)) == seed[r["V"]]
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
    fig = an.plot_first_loss(1000, 0.05)
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2
    assert "1,000" in fig.axes[0].get_title()


def _stub(*args):
    raise NotImplementedError


def test_check_predict_first_loss_accepts_and_rejects(capsys):
    assert an.check_predict_first_loss(lambda V, s: math.log(V) + s * s / 2)
    assert not an.check_predict_first_loss(lambda V, s: math.log2(V) + s * s / 2)   # bits
    assert not an.check_predict_first_loss(lambda V, s: math.log(V))               # no sigma
    assert not an.check_predict_first_loss(lambda V, s: math.log(V) + s * s)       # no 1/2
    assert not an.check_predict_first_loss(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_check_get_batch_accepts_and_rejects():
    def mine(data, starts, B):
        x = torch.stack([data[s: s + B] for s in starts])
        y = torch.stack([data[s + 1: s + 1 + B] for s in starts])
        return x, y

    assert an.check_get_batch(mine, quiet=True)
    assert not an.check_get_batch(an.get_batch_leaky, quiet=True)

    def two_ahead(data, starts, B):
        return mine(data, starts, B)[0], torch.stack([data[s + 2: s + 2 + B] for s in starts])

    def both_moved(data, starts, B):
        y = mine(data, starts, B)[1]
        return y, y

    assert not an.check_get_batch(two_ahead, quiet=True)
    assert not an.check_get_batch(both_moved, quiet=True)
