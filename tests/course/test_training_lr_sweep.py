"""Notebook 08's learning-rate sweep: the runs it reports are the runs it trained, and the
band it shows (crawl, best, diverge) holds on two seeds."""

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from lmcore.course.toys import fit, toy_gpt  # noqa: E402
from lmcore.course.training.lr_sweep import lr_sweep, plot_lr_sweep  # noqa: E402
from lmcore.data import load_corpus  # noqa: E402


@pytest.fixture(scope="module")
def corpus():
    return load_corpus("python-docs")


def test_each_curve_is_a_plain_fit_of_the_same_model_on_the_same_batches(corpus):
    s = lr_sweep(corpus, [3e-3], steps=6, seed=2, n_val=4)
    model = toy_gpt(corpus.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=32, seed=2)
    g = torch.Generator().manual_seed(2)
    again = fit(model, lambda step: corpus.batch("train", 8, 32, generator=g)["input_ids"], steps=6, lr=3e-3)
    assert s["curves"][3e-3] == again
    assert s["ln_v"] == math.log(corpus.vocab_size) and s["lrs"] == [3e-3]
    wide = lr_sweep(corpus, [3e-3], steps=3, seed=2, n_val=4, batch_size=5)  # rows per step
    g = torch.Generator().manual_seed(2)
    model = toy_gpt(corpus.vocab_size, block_size=32, n_layer=1, n_head=2, n_embd=32, seed=2)
    assert wide["curves"][3e-3] == fit(
        model, lambda step: corpus.batch("train", 5, 32, generator=g)["input_ids"], steps=3, lr=3e-3
    )


@pytest.mark.slow
def test_too_small_crawls_too_large_diverges_on_two_seeds(corpus):
    for seed in (0, 1):
        s = lr_sweep(corpus, [1e-4, 3e-3, 1.0], seed=seed)
        assert s["val"][1e-4] > s["val"][3e-3] + 0.8, s["val"]  # crawls
        assert s["curves"][1.0][-1] > s["ln_v"], s["curves"][1.0][-5:]  # diverges above ln V
        assert s["val"][3e-3] < s["ln_v"] - 1.5


def test_lr_sweep_checks_its_arguments(corpus):
    for bad in ([], "0.1", 0.1, None):
        with pytest.raises(TypeError, match="lrs"):
            lr_sweep(corpus, bad)
    for bad in ([0.0], [-1e-3], [float("nan")]):
        with pytest.raises(ValueError, match="lrs"):
            lr_sweep(corpus, bad)
    with pytest.raises((TypeError, ValueError), match="steps"):
        lr_sweep(corpus, [1e-3], steps=0)
    with pytest.raises((TypeError, ValueError), match="seed"):
        lr_sweep(corpus, [1e-3], seed=-1)
    with pytest.raises((TypeError, ValueError), match="batch_size"):
        lr_sweep(corpus, [1e-3], batch_size=0)


def test_the_plot_draws_every_rate(corpus):
    s = lr_sweep(corpus, [1e-3, 1e-2], steps=12, n_val=2)
    fig = plot_lr_sweep(s, smooth=4)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == ["lr 0.001", "lr 0.01", "ln V"]
    with pytest.raises((TypeError, ValueError), match="smooth"):
        plot_lr_sweep(s, smooth=0)
    diverged = {"lrs": [1e-3, 1.0], "curves": {1e-3: [4.6, 3.0], 1.0: [4.6, 100.0]}, "ln_v": 4.6}
    lines = plot_lr_sweep(diverged, smooth=1).axes[0].get_lines()
    assert lines[1].get_label() == "lr 1 (off the scale, drawn at the top)"
    assert max(lines[1].get_ydata()) == pytest.approx(5.6)  # drawn at the top edge, in view


# ---- the prediction exercise's judge (lr_prediction): the rules it states, applied per seed


def _sweep(val, last, ln_v=4.6):
    from lmcore.course.training.lr_prediction import RATES

    return {
        "lrs": list(RATES),
        "val": dict(zip(RATES, val)),
        "curves": {r: [ln_v, x] for r, x in zip(RATES, last)},
        "ln_v": ln_v,
    }


def test_the_judge_applies_its_rules_and_accepts_either_answer_where_seeds_disagree():
    from lmcore.course.training.lr_prediction import sweep_outcome

    a = _sweep((4.0, 2.9, 2.8, 2.9, 3.7, 9.0), (4.0, 2.9, 2.4, 2.6, 3.1, 9.0))
    b = _sweep((4.0, 2.9, 2.8, 2.7, 3.5, float("nan")), (4.0, 2.9, 2.4, 2.6, 4.7, float("inf")))
    out = sweep_outcome({0: a, 1: b})
    assert out["crawls"][1e-4] == {True} and out["crawls"][1e-3] == {False}
    assert out["crawls"][0.1] == {True, False}  # 0.9 nats below ln V on seed 0; diverged on seed 1
    assert out["diverges"][0.1] == {False, True} and out["diverges"][1.0] == {True}
    assert out["crawls"][1.0] == {False}  # a diverged run does not crawl, whatever its held-out loss
    assert out["best"] == {3e-3, 1e-2}
    with pytest.raises(TypeError, match="sweeps"):
        sweep_outcome([a])


def test_a_prediction_is_graded_as_recorded_before_the_run(capsys, fresh_kernel):
    from lmcore.course.training.lr_prediction import check_lr_prediction, lock_prediction

    sweeps = {0: _sweep((4.0, 2.9, 2.8, 2.9, 3.2, 9.0), (4.0, 2.9, 2.4, 2.6, 3.1, 9.0))}

    def never_recorded():
        return {}

    assert not check_lr_prediction(never_recorded, sweeps)
    assert "nothing recorded" in capsys.readouterr().out

    def stub():
        raise NotImplementedError

    lock_prediction(stub)
    assert not check_lr_prediction(stub, sweeps)
    assert "not attempted yet" in capsys.readouterr().out

    def reads_the_run():  # in a fresh kernel the run's results do not exist yet when it is recorded
        return sweeps_of_a_later_cell  # noqa: F821

    lock_prediction(reads_the_run)
    assert not check_lr_prediction(reads_the_run, sweeps)
    assert "NameError" in capsys.readouterr().out
    with pytest.raises(TypeError, match="fn"):
        lock_prediction({"crawls": []})


@pytest.fixture
def fresh_kernel(monkeypatch):
    """No sweep has finished yet, as in a kernel that runs the notebook from the top."""
    from lmcore.course.training import lr_sweep as sweep_module

    monkeypatch.setattr(sweep_module.LEDGER, "finished", [])


def test_a_prediction_recorded_after_the_sweep_ran_fails(corpus, capsys, fresh_kernel):
    """The loopholes: record (again) once the sweep's results exist and check against that sweep,
    or run the sweep again after recording a prediction made with its results in view."""
    from lmcore.course.training.lr_prediction import check_lr_prediction, lock_prediction
    from lmcore.course.training.lr_sweep import LEDGER

    _tick = LEDGER.stamp

    def my_lr_prediction():
        return {"crawls": [1e-4], "diverges": [1.0], "best": 3e-3}

    lock_prediction(my_lr_prediction)  # before the sweep: judged
    sweeps = {
        0: dict(_sweep((4.0, 2.9, 2.8, 2.9, 3.2, 9.0), (4.0, 2.9, 2.4, 2.6, 3.1, 9.0)), started=_tick())
    }
    assert check_lr_prediction(my_lr_prediction, sweeps), capsys.readouterr().out
    lock_prediction(my_lr_prediction)  # the same answer, recorded again after that sweep began
    assert not check_lr_prediction(my_lr_prediction, sweeps)
    assert "recorded after the sweep ran" in capsys.readouterr().out
    later = {0: dict(sweeps[0], started=_tick())}  # no sweep has printed results yet: judged again
    assert check_lr_prediction(my_lr_prediction, later), capsys.readouterr().out

    real = [lr_sweep(corpus, [1e-3], steps=1, n_val=1) for _ in range(2)]  # results now printed
    assert real[0]["started"] < real[1]["started"]  # each sweep is stamped when it begins
    lock_prediction(my_lr_prediction)  # hindsight: recorded with those results in view
    rerun = {0: dict(sweeps[0], started=_tick())}  # the sweep's cell run again after it
    assert not check_lr_prediction(my_lr_prediction, rerun)
    assert "results were printed in this kernel" in capsys.readouterr().out

    import importlib

    from lmcore.course.training import lr_sweep as sweep_module

    importlib.reload(sweep_module)  # a learner wipes the module's memory of finished sweeps
    lock_prediction(my_lr_prediction)  # the stamps are clock time: still later than that sweep's
    assert not check_lr_prediction(my_lr_prediction, sweeps)
    assert "recorded after the sweep ran" in capsys.readouterr().out


@pytest.mark.slow
def test_the_notebooks_prediction_passes_on_the_real_sweep(corpus, capsys, fresh_kernel):
    from lmcore.course.training.lr_prediction import RATES, check_lr_prediction, lock_prediction

    def my_lr_prediction():
        return {"crawls": [1e-4], "diverges": [1.0], "best": 3e-3}

    lock_prediction(my_lr_prediction)  # as the notebook's cell does: recorded, then the sweep runs
    sweeps = {seed: lr_sweep(corpus, list(RATES), seed=seed) for seed in (0, 1)}
    assert check_lr_prediction(my_lr_prediction, sweeps), capsys.readouterr().out
