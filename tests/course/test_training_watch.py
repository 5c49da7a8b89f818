"""Notebook 08's watched run (lmcore.course.training.watch): records printed and drawn as they
come, the progress bar's settings, and an interrupt that leaves the partial run, a message, and
the reference run for the rest of the notebook (or a clear error where none fits)."""

from dataclasses import replace

import pytest

from lmcore.course.training import watch as W
from lmcore.data import load_corpus
from lmcore.train import PRESETS, preset

TINY = dict(max_steps=6, eval_interval=2, eval_batches=1, batch_size=4, warmup_steps=1)


@pytest.fixture(scope="module")
def corpus():
    return load_corpus("python-docs")


def _cfg():
    return preset("cpu", **TINY)


def test_a_finished_run_returns_itself_and_prints_each_record(tmp_path, corpus, capsys):
    result, partial = W.train_watched(_cfg(), corpus, model=None, out_dir=tmp_path / "run", ln_v=4.0)
    assert partial is None and result.status == "finished"
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("step ")]
    assert [int(x.split()[1]) for x in lines] == [0, 2, 4, 6]
    assert (tmp_path / "run" / "checkpoint.pt").exists()


def _interrupt_after(monkeypatch, n_records):
    """Make the n-th printed record raise KeyboardInterrupt, as a learner's interrupt would
    arrive in the middle of the run."""
    seen, show = [], W.show_record

    def interrupting(r):
        seen.append(r)
        show(r)
        if len(seen) == n_records:
            raise KeyboardInterrupt

    monkeypatch.setattr(W, "show_record", interrupting)


def test_an_interrupt_gives_the_partial_run_and_the_reference_run(tmp_path, corpus, capsys, monkeypatch):
    _interrupt_after(monkeypatch, 3)  # after step 2's checkpoint was written
    out_dir = tmp_path / "runs" / "08_training_run"
    result, partial = W.train_watched(_cfg(), corpus, model=None, out_dir=out_dir)
    assert partial.status == "interrupted" and [r["step"] for r in partial.history] == [0, 2, 4]
    assert result.status == "finished" and result.history[-1]["step"] == PRESETS["cpu"].max_steps
    said = capsys.readouterr().out
    assert "Interrupted after 4 of 6 steps" in said and "reads the reference run" in said
    assert (out_dir / "checkpoint.pt").exists()  # the reference run's, for the cells below
    assert (out_dir.with_name("08_training_run.interrupted") / "checkpoint.pt").exists()  # the partial run's


def test_an_interrupt_without_a_fitting_reference_run_is_a_clear_error(tmp_path, corpus, capsys, monkeypatch):
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(W.RunInterrupted, match="run this cell again"):
        W.train_watched(_cfg(), corpus, model=None, out_dir=tmp_path / "run", preset_name="gpu")
    out = capsys.readouterr().out
    assert "Interrupted after 0 of 6 steps" in out
    assert "`partial`" not in out  # the cell raises: no name `partial` is ever assigned


def test_the_train_bar_has_a_total_and_redraws_at_most_once_a_second(corpus, monkeypatch):
    made = {}

    class Bar:
        def __init__(self, **kw):
            made.update(kw)

        def update(self, n):
            made["updates"] = made.get("updates", 0) + n

        def set_postfix(self, refresh=True, **kw):
            made["refresh"] = refresh

        def close(self):
            made["closed"] = True

    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    from lmcore.train import train

    train(replace(_cfg(), progress=True), corpus)
    assert made["total"] == 6 and made["mininterval"] >= 1.0 and made["unit"] == "step"
    assert made["updates"] == 6 and made["refresh"] is False and made["closed"]


def test_live_curve_checks_its_argument():
    with pytest.raises(ValueError, match="max_steps"):
        W.LiveCurve(0)
    with pytest.raises(ValueError, match="max_steps"):
        W.LiveCurve(True)


def test_live_curve_redraws_in_place_at_every_record(capsys):
    class Handle:
        figures = []

        def update(self, fig):
            self.figures.append(fig.axes[0].get_title())

    curve = W.LiveCurve(10, 4.6)
    curve(dict(step=0, train_loss=4.6, val_loss=4.6, lr=0.0, tokens_per_s=0.0))
    assert curve.handle is None  # outside a notebook kernel it only prints
    curve.handle, curve.history = Handle(), []
    for step, loss in ((0, 4.6), (5, 3.0), (10, 2.5)):
        curve(dict(step=step, train_loss=loss, val_loss=loss, lr=1e-3, tokens_per_s=100.0))
    assert Handle.figures == ["step 0 of 10", "step 5 of 10", "step 10 of 10"]
    assert capsys.readouterr().out.count("step ") == 4  # every record printed


def test_the_progress_bar_counts_steps_and_leaves_one_line(capsys):
    bar = W.ProgressBar(5)
    assert bar.handle is None and bar.bar.total == 5 and bar.bar.mininterval >= 1.0
    assert not any(bar.step(s) for s in range(3))  # never asks the run to stop
    line = bar.close()
    assert line.startswith("training: 3 of 5 steps in ") and line.endswith(" min")
