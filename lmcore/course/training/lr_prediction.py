"""Notebook 08's prediction exercise: before the learning-rate sweep runs, the learner says which
rates of its grid will crawl, which will diverge and which will end lowest; the sweep judges it.

A prediction is only a prediction if it is made before the run. :func:`lock_prediction`, called
by the sweep's cell before it trains, records the learner's answer (calls that would run the
experiment instead, or ask the judge, are refused); :func:`check_lr_prediction`, after the run,
grades the recorded answer and fails when the function now returns something else, or when the
answer was recorded after the sweep it is checked against began (each sweep and each recorded
prediction carries a number from one counter): what the run judges is what was said before it.
In a fresh kernel (Run All, the autograder) a prediction that
reads the sweep's results cannot even be made: they do not exist yet when it is recorded.

The judge (:func:`sweep_outcome`) reads each seed's runs with the rules the exercise states: a
rate **diverges** when its last training loss is above ln V (or not finite), **crawls** when it
did not diverge and its held-out loss is still within :data:`CRAWL_NATS` of ln V, and the **best** rate has
the lowest held-out loss. Where the seeds disagree about a rate, either answer is right.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

from ..autograding import when_grading
from ..checks import FAIL, PASS, TODO, CheckResult, hint_for, run_learner
from ..checks import say_line as _line
from ..checks.guard import captured_warnings, recorded_calls
from . import lr_sweep as _sweeps  # its LEDGER, read at each use (a reloaded module's own)

__all__ = ["RATES", "CRAWL_NATS", "lock_prediction", "sweep_outcome", "check_lr_prediction"]

RATES = (1e-4, 1e-3, 3e-3, 1e-2, 1e-1, 1.0)  # the grid the notebook sweeps
CRAWL_NATS = 1.0  # a run that ends less than this far below ln V has crawled
_NAME = "lr prediction"
_KEYS = ("crawls", "diverges", "best")
_RUN_IT = "that runs the experiment: a prediction is made before the run, from what you know"
_FORBID = {
    "lmcore.course.training.lr_sweep.lr_sweep": _RUN_IT,
    "lmcore.course.toys.fit": _RUN_IT,
    "lmcore.train.loop.train": _RUN_IT,
    "lmcore.course.training.lr_prediction.sweep_outcome": "that asks the judge, which needs the run",
    "lmcore.course.training.lr_prediction.check_lr_prediction": "that asks the judge, which needs the run",
}
_LOCKED: dict[str, tuple[str, object]] = {}  # function name -> ("value" | "todo" | "error", payload)
_LOCKED_AT: dict[str, int] = {}  # function name -> when it was recorded (lr_sweep's counter)


def _rate(x) -> float:
    """``x`` as one of :data:`RATES` (a rate written 1, 1.0, 1e0 or as a numpy float is that
    rate); ValueError naming it otherwise."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"{x!r} is not a learning rate: write rates as numbers, e.g. 1e-3")
    for r in RATES:
        if math.isclose(float(x), r, rel_tol=1e-6):  # a rate written in float32 is that rate
            return r
    raise ValueError(f"{x!r} is not one of the rates the sweep runs, {list(RATES)}")


def _normalised(answer) -> dict:
    """``{"crawls": frozenset, "diverges": frozenset, "best": rate}`` from the learner's dict;
    ValueError (what is wrong with its form) otherwise."""
    if not isinstance(answer, dict):
        raise ValueError(f"a prediction is a dict with the keys {list(_KEYS)}; got {type(answer).__name__}")
    missing = [k for k in _KEYS if k not in answer]
    if missing:
        raise ValueError(f"the prediction has no {missing[0]!r}")
    sets = {}
    for key in ("crawls", "diverges"):
        value = answer[key]
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise ValueError(f"{key!r} is a list of rates (an empty list if none); got {value!r}")
        sets[key] = frozenset(_rate(x) for x in value)
    both = sets["crawls"] & sets["diverges"]
    if both:
        raise ValueError(f"lr {min(both):g} is in both 'crawls' and 'diverges'")
    return {**sets, "best": _rate(answer["best"])}


def lock_prediction(fn: Callable[[], dict]) -> None:
    """Record ``fn()``, the learner's prediction, before the run (call it first in the sweep's
    cell). Prints one line: what was recorded, or why nothing was."""
    if not callable(fn):
        raise TypeError(f"fn must be the prediction function; got {type(fn).__name__}.")
    name = getattr(fn, "__name__", "prediction")
    run = run_learner(fn, forbidden=dict(_FORBID))  # the learner's error is reported at the check
    _LOCKED_AT[name] = _sweeps.LEDGER.stamp()  # a sweep that began before this cannot judge it
    if run.todo:
        _LOCKED[name] = ("todo", None)
        print(f"{TODO} {_NAME}: no prediction recorded; the sweep runs anyway.")
        return
    if run.called:
        _LOCKED[name] = ("error", f"your prediction called {run.called}: {_FORBID[run.called]}")
    elif run.error is not None:
        _LOCKED[name] = (
            "error",
            f"your prediction raised {type(run.error).__name__}: {str(run.error)[:200]}",
        )
    else:
        _LOCKED[name] = ("value", run.value)
    kind, payload = _LOCKED[name]
    print(f"{_NAME} recorded: {payload!r}" if kind == "value" else f"{_NAME} not recorded: {payload}.")


def sweep_outcome(sweeps: dict) -> dict:
    """What the runs did, by the exercise's rules: ``{"crawls": {lr: set of verdicts over the
    seeds}, "diverges": {...}, "best": set of best rates}`` from ``{seed: lr_sweep(...)}``."""
    if not isinstance(sweeps, dict) or not sweeps:
        raise TypeError("sweeps must be {seed: lr_sweep(...)} for one seed or more.")
    crawls = {r: set() for r in RATES}
    diverges = {r: set() for r in RATES}
    best = set()
    for s in sweeps.values():
        ln_v, val, curves = s["ln_v"], s["val"], s["curves"]
        for r in RATES:
            last = curves[r][-1] if curves[r] else math.inf
            diverged = not math.isfinite(last) or last > ln_v
            diverges[r].add(diverged)
            crawls[r].add(not diverged and ln_v - val[r] < CRAWL_NATS)
        best.add(min(RATES, key=lambda r: val[r]))
    return {"crawls": crawls, "diverges": diverges, "best": best}


def _seeds_say(sweeps, what: str, r: float) -> str:
    """The measurement behind one verdict, per seed, to 2 decimals."""
    parts = []
    for seed, s in sweeps.items():
        if what == "crawls":
            gap = s["ln_v"] - s["val"][r]
            parts.append(
                f"seed {seed}: held-out {gap:.2f} nats below ln V"
                if gap >= 0
                else f"seed {seed}: held-out {-gap:.2f} nats above ln V"
            )
        else:
            parts.append(f"seed {seed}: last training loss {s['curves'][r][-1]:.2f}, ln V {s['ln_v']:.2f}")
    return "; ".join(parts)


_QUESTIONS = {  # (what was said wrongly, what was said) -> the question the failure asks
    ("crawls", True): "an Adam step moves each weight by about lr, whatever the gradient's size: how far "
    "can a weight travel in 200 steps at lr {r:g}, against the 0.02 the weights start at?",
    ("crawls", False): "how far can a weight travel in 200 steps at lr {r:g} (an Adam step moves each "
    "weight by about lr), and is that far for weights that start at about 0.02?",
    ("diverges", True): "its last loss is below ln V: it learned, only less than the best rate. Where "
    "do you draw the line between learning noisily and climbing back above ln V for good, and which "
    "curve in the plot crosses it?",
    ("diverges", False): "at lr {r:g} one step moves each weight by about {r:g}, against the 0.02 "
    "they start at: can the next step undo an overshoot of that size?",
}


def _mismatch(pred: dict, outcome: dict, sweeps: dict) -> tuple[str, str]:
    """The first place the prediction and the runs disagree, as a line and a question ("" if none)."""
    for r in RATES:
        for what in ("crawls", "diverges"):
            said = r in pred[what]
            if said in outcome[what][r]:
                continue
            verb = what[:-1]  # crawl, diverge
            said_text, ran_text = ("would", "did not") if said else ("would not", "did")
            return (
                f"you said lr {r:g} {said_text} {verb}; the run {ran_text} {verb} ({_seeds_say(sweeps, what, r)}).",
                _QUESTIONS[(what, said)].format(r=r),
            )
    if pred["best"] not in outcome["best"]:
        best = sorted(outcome["best"])
        s = next(iter(sweeps.values()))
        return (
            f"you said lr {pred['best']:g} ends lowest; the run's lowest held-out loss is at "
            f"{' or '.join(f'{b:g}' for b in best)} (seed {next(iter(sweeps))}: "
            f"{s['val'][best[0]]:.2f} nats there, {s['val'][pred['best']]:.2f} at {pred['best']:g}).",
            "of the rates that neither crawl nor diverge, what do the larger ones gain in 200 steps, "
            "and what do they lose? Read where each curve of the plot ends, and how much it shakes.",
        )
    return "", ""


def _recorded_after(locked_at: int, sweeps) -> bool:
    """Whether a prediction recorded at ``locked_at`` came after one of ``sweeps`` began (a sweep
    without a ``started`` stamp, one not made by ``lr_sweep``, is not judged on time)."""
    if not isinstance(sweeps, dict):
        return False
    started = [
        s["started"] for s in sweeps.values() if isinstance(s, dict) and isinstance(s.get("started"), int)
    ]
    return any(locked_at > t for t in started)


@when_grading
def check_lr_prediction(fn: Callable[[], dict], sweeps: dict, *, quiet: bool = False) -> CheckResult:
    """Grade the prediction :func:`lock_prediction` recorded from ``fn`` before the sweep, against
    ``sweeps`` (``{seed: lr_sweep(corpus, RATES, seed=seed)}``); a prediction that differs from
    ``fn()`` now fails (it was changed after the run), and so does one recorded after a sweep of
    ``sweeps`` began (``lr_sweep`` stamps each sweep, :func:`lock_prediction` each record)."""
    hint = (  # (nudge, fuller hint): show_solution reads them here
        "how far does a weight travel in 200 Adam steps at each rate, against the 0.02 it starts at?",
        "An Adam step moves each weight by about lr, whatever the gradient's size, and the weights start "
        "at about 0.02. At 1e-4, 200 steps move a weight about 0.02, its own size: the loss barely "
        "leaves ln V. At 1, one step moves it 50 times its size: the loss jumps above ln V and stays. "
        "Between, every rate learns; the short run ends lowest where the steps are large but do not yet "
        "overshoot: here 3e-3, with 1e-2 and 1e-1 learning but ending higher.",
    )
    name = getattr(fn, "__name__", "prediction")
    if name not in _LOCKED:
        return _line(
            f"{FAIL} {_NAME}: nothing recorded; run the sweep's cell (it records your prediction, then runs).",
            quiet,
            False,
        )
    kind, payload = _LOCKED[name]
    if kind == "todo":
        return _line(
            f"{TODO} {_NAME}: write your prediction, then restart the kernel and run from the top (a "
            "prediction recorded after a sweep's results were printed in this kernel is not judged).",
            quiet,
            False,
        )
    if kind == "error":
        return _line(f"{FAIL} {_NAME}: {payload}.", quiet, False)
    seen = _sweeps.LEDGER.first_finished()  # (a refused call inside the prediction is named first)
    if seen is not None and _LOCKED_AT.get(name, 0) > seen:
        return _line(
            f"{FAIL} {_NAME}: your prediction was recorded after a sweep's results were printed in "
            "this kernel, so it was made with them in view: restart the kernel and run from the top "
            "(your prediction's cell records it before anything trains).",
            quiet,
            False,
        )
    if _recorded_after(_LOCKED_AT.get(name, 0), sweeps):
        return _line(
            f"{FAIL} {_NAME}: your prediction was recorded after the sweep ran; the run judges only "
            "what was said before it: re-run the sweep's cell (it records your prediction, then "
            "trains), then this check.",
            quiet,
            False,
        )
    try:
        pred = _normalised(payload)
    except ValueError as exc:
        return _line(f"{FAIL} {_NAME}: {exc}.", quiet, False)
    try:
        with captured_warnings(), recorded_calls(dict(_FORBID)):
            now = _normalised(fn())
    except Exception:  # noqa: BLE001 - a function that no longer runs has changed too
        now = None
    if now != pred:
        return _line(
            f"{FAIL} {_NAME}: your function now returns another prediction than the one recorded "
            "before the sweep; the run judges what was said before it: to change it, restart the "
            "kernel and run from the top.",
            quiet,
            False,
        )
    said, question = _mismatch(pred, sweep_outcome(sweeps), sweeps)
    if said:
        return _line(f"{FAIL} {_NAME}: {said}{hint_for(_NAME, hint, question, fn)}", quiet, False)
    return _line(f"{PASS} {_NAME}: every rate where the runs put it, on {len(sweeps)} seed(s).", quiet, True)
