"""The floor explorer's committed short runs are tied to the code that would train them: the
same settings, the same config, the same corpus, and (one run retrained here) the same curve."""

import json

import pytest

from lmcore.course.floor import explorer_runs as FE
from lmcore.course.floor.lesson import RANGES


def _body():
    return json.loads(FE.EXPLORER_RUNS.read_text())


def test_every_setting_the_widget_offers_is_committed_once():
    keys = [(r["high"], r["ops"], r["steps"]) for r in _body()["runs"]]
    assert sorted(keys) == sorted(FE.SETTINGS) and len(keys) == len(set(keys))
    assert {h for h, _, _ in FE.SETTINGS} == set(RANGES)


def test_each_run_has_the_config_and_corpus_the_code_would_train_now():
    for run in _body()["runs"]:
        expected = json.loads(json.dumps(FE.run_record(run["high"], run["ops"], run["steps"])))
        got = {k: run[k] for k in expected}
        assert got == expected, (
            f"explorer run {run['high'], run['ops'], run['steps']} is stale: rerun "
            "python -m lmcore.course.floor.explorer_runs --jobs 2"
        )
        steps = [h["step"] for h in run["history"]]
        assert steps[0] == 0 and steps[-1] == run["steps"] and steps == sorted(steps)
        em = FE.committed_exact_match(run["high"], run["ops"], run["steps"])
        assert em["n_seen"] > 0 and 0 <= em["seen"] <= 1
        assert (em["unseen"] is None) == (em["n_unseen"] == 0) and 0 <= (em["unseen"] or 0) <= 1
    assert FE.committed_exact_match(99, "+", 600)["n_unseen"] == 200  # the wide range: many never seen


@pytest.mark.slow
def test_a_retrained_run_matches_its_committed_curve():
    """The model and training loop are what the config and corpus cannot pin: retrain one run.
    Float64 keeps CPU-to-CPU differences in the losses' fourth decimal; a changed model moves them
    by far more."""
    committed = FE.committed_curve(9, "+", 150)
    trained = FE.short_curve(9, "+", 150, cached=False)
    assert [h["step"] for h in trained] == [h["step"] for h in committed]
    for key in ("train_loss", "val_loss"):
        worst = max(abs(a[key] - b[key]) for a, b in zip(trained, committed))
        assert worst < 5e-3, f"{key} differs from the committed curve by up to {worst:.4f}"
