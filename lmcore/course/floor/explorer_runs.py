"""The floor explorer's short runs, trained once and committed with lmcore
(``explorer_runs.json`` beside this module), so that moving the explorer's controls shows a
curve at once instead of training for seconds to a minute on every move.

Each run is :func:`lmcore.course.floor.run.train_floor_run` on operands ``0..high`` with the
operators ``ops`` for ``steps`` steps, for every setting the widget offers (:data:`SETTINGS`),
with its trained model's greedy exact match on questions its training turns never held and on
ones they held (:func:`lmcore.course.floor.sums.exact_match`).
The file records, per run, the training config and the SHA-256 of the corpus's token ids, and
``tests/course/test_floor_explorer_runs.py`` fails when either no longer matches what the code
would train (and retrains one run to compare its curve), so the committed curves cannot drift
from the code. :func:`short_curve` uses them; ``cached=False`` trains.

``python -m lmcore.course.floor.explorer_runs`` rewrites the file (``--jobs N`` processes).
"""

from __future__ import annotations

import argparse
import json
import platform
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import torch

from ...data import corpus_fingerprint
from .lesson import RANGES
from .run import N_DOCUMENTS, floor_config, floor_corpus, train_floor_run
from .sums import exact_match, new_turns

__all__ = [
    "EXPLORER_RUNS",
    "STEPS",
    "OPS",
    "SETTINGS",
    "run_record",
    "committed_curve",
    "committed_exact_match",
    "short_curve",
    "write_explorer_runs",
]

EXPLORER_RUNS = Path(__file__).resolve().with_name("explorer_runs.json")
STEPS = (150, 600)  # the explorer's run lengths
OPS = ("+", "+-*")
SETTINGS = tuple((high, ops, steps) for steps in STEPS for ops in OPS for high in RANGES)
_KEEP = ("step", "tokens", "train_loss", "val_loss", "lr")  # not tokens_per_s: the machine's speed


def _overrides(steps: int) -> dict:
    return dict(max_steps=steps, eval_interval=max(1, steps // 10))


def run_record(high: int, ops: str, steps: int) -> dict:
    """What identifies a run: its setting, its config and its corpus's fingerprint (no training)."""
    corpus = floor_corpus(high=high, ops=tuple(ops), n_documents=N_DOCUMENTS, seed=0)
    return {
        "high": high,
        "ops": ops,
        "steps": steps,
        "config": asdict(floor_config(seed=0, **_overrides(steps))),
        "corpus_sha256": corpus_fingerprint(corpus),
    }


def _train(setting) -> dict:
    high, ops, steps = setting
    torch.set_num_threads(1)
    result = train_floor_run(high=high, ops=tuple(ops), **_overrides(steps))
    history = [{k: h[k] for k in _KEEP} for h in result.history]
    return {
        **run_record(high, ops, steps),
        "history": history,
        "exact_match": _exact_match(result, high, ops),
    }


def _exact_match(result, high: int, ops: str) -> dict:
    """Greedy exact match of the trained model on up to 200 questions its training turns never
    held (None where they held every one) and on as many they held."""
    unseen = new_turns(result.corpus, high=high, ops=tuple(ops))
    seen = new_turns(result.corpus, high=high, ops=tuple(ops), seen=True)
    return {
        "unseen": exact_match(result.model, unseen) if unseen else None,
        "n_unseen": len(unseen),
        "seen": exact_match(result.model, seen),
        "n_seen": len(seen),
    }


@lru_cache(maxsize=1)
def _committed(path: str) -> dict:
    body = json.loads(Path(path).read_text(encoding="utf-8"))
    return {(r["high"], r["ops"], r["steps"]): r for r in body["runs"]}


def committed_curve(high: int, ops: str, steps: int, path=EXPLORER_RUNS) -> list | None:
    """The committed history of the run ``(high, ops, steps)``, or None if the file lacks it."""
    path = Path(path)
    if not path.exists():
        return None
    run = _committed(str(path)).get((high, ops, steps))
    return None if run is None else [dict(h) for h in run["history"]]


def committed_exact_match(high: int, ops: str, steps: int, path=EXPLORER_RUNS) -> dict | None:
    """The committed run's greedy exact match on questions its training turns never held and on
    ones they held (``unseen``, ``n_unseen``, ``seen``, ``n_seen``), or None if the file lacks it."""
    path = Path(path)
    if not path.exists():
        return None
    run = _committed(str(path)).get((high, ops, steps))
    return None if run is None or "exact_match" not in run else dict(run["exact_match"])


_TRAINED: dict = {}


def short_curve(high: int, ops: str = "+", steps: int = 150, *, cached: bool = True) -> list:
    """The history of the explorer's run on operands 0..high: the committed one (``cached``, and
    committed for this setting), else trained here once per setting (seconds to a minute)."""
    history = committed_curve(high, ops, steps) if cached else None
    if history is None:
        key = (high, ops, steps)
        if key not in _TRAINED:
            _TRAINED[key] = train_floor_run(high=high, ops=tuple(ops), **_overrides(steps)).history
        history = _TRAINED[key]
    return history


def write_explorer_runs(dest=EXPLORER_RUNS, *, jobs: int = 1, settings=SETTINGS) -> Path:
    """Train every setting (``jobs`` processes, one thread each) and write ``dest``."""
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        runs = list(pool.map(_train, settings))
    body = {
        "trained_with": {"python": platform.python_version(), "torch": torch.__version__},
        "runs": runs,
    }
    dest = Path(dest)
    dest.write_text(
        json.dumps(body, indent=None, separators=(",", ":")).replace('{"high"', '\n{"high"') + "\n",
        encoding="utf-8",
    )
    _committed.cache_clear()
    return dest


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Train and commit the floor explorer's short runs.")
    parser.add_argument("--jobs", type=int, default=1, help="processes (each on one thread)")
    parser.add_argument("--dest", default=str(EXPLORER_RUNS))
    args = parser.parse_args(argv)
    print(f"wrote {write_explorer_runs(args.dest, jobs=args.jobs)} ({len(SETTINGS)} runs)")


if __name__ == "__main__":
    main()
