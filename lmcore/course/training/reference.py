"""Notebook 08's reference run: the ``cpu`` preset's run, trained once and committed with lmcore
(``lmcore/course/training/reference_run/``), so that grading (and a learner on a slow machine who asks for
it) need not repeat 1,500 steps that no graded exercise depends on.

``reference_run(out_dir, corpus)`` returns what :func:`lmcore.train.train` would have returned
(a :class:`lmcore.train.TrainResult`) and leaves ``checkpoint.pt`` (and ``best.pt``) in
``out_dir``, as the run would have. The committed checkpoint keeps the weights exactly and AdamW's
two moments in bfloat16 (a third of the size; a run resumed from it continues from rounded
moments, not bit for bit). :func:`use_reference_run` decides: asked for (the notebook's
``USE_REFERENCE_RUN``, or ``LMCORE_USE_REFERENCE_RUN=1`` in the kernel's environment, which CI's
student-edition and browser runs set: nbval, which verifies the training path, removes it), or
under nbgrader's autograder, and only where the run fits (the ``cpu`` preset, the same vocabulary).

It also carries section 6's two short runs, as the notebook's training path produced them:
the retrained start's measurements (``first_steps.json``) and the small-slice run's history and
best (``small_slice.json``), so that grading skips those runs too; and section 4's sweeps
(``sweeps.json``: the learning-rate sweep on two seeds and the batch-size sweep, 36 short runs),
which :func:`lmcore.course.training.lr_sweep.lr_sweep` returns under the autograder when they were
recorded for the same call on the same corpus (:func:`recorded_sweep`): grading judges the
learner's prediction against the recorded sweep, as it judges everything else against the
reference run. ``python -m lmcore.course.training.lr_sweep --record`` records them anew.

``python -m lmcore.course.training.reference notebooks/runs/08_training_run`` writes the folder
from the run directory of an executed notebook 08 (``--short-runs-only``: only the two JSON
files); ``tests/course/test_training_reference.py`` checks it against the preset.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import fields
from pathlib import Path

import torch

from ...data import corpus_fingerprint
from ...train import TrainConfig, TrainResult, load_checkpoint, load_model, save_checkpoint
from ...train.checkpoint import tokenizer_state
from ...train.resume import copy_checkpoint
from ..autograding import grading
from .dynamics import load_first_steps

__all__ = [
    "REFERENCE_DIR",
    "REFERENCE_ENV",
    "REFERENCE_PRESET",
    "corpus_fingerprint",
    "reference_info",
    "reference_fits",
    "use_reference_run",
    "reference_run",
    "reference_first_steps",
    "reference_small_slice",
    "write_reference_run",
    "write_reference_dynamics",
    "SWEEP_CALLS",
    "recorded_sweep",
]

REFERENCE_DIR = Path(__file__).resolve().with_name("reference_run")
REFERENCE_PRESET = "cpu"
REFERENCE_ENV = "LMCORE_USE_REFERENCE_RUN"  # "1": load the run wherever 08 would train (CI's reruns)
_FILES = ("checkpoint.pt", "best.pt")
FIRST_STEPS, SMALL_SLICE = "first_steps.json", "small_slice.json"  # section 6's two short runs
SWEEPS = "sweeps.json"  # section 4's sweeps, for the autograder
# The calls of lr_sweep that notebook 08 makes (section 4): the rate sweep on seeds 0 and 1, and the
# batch-size sweep (1,600 rows read at 2, 8 or 32 rows a step); tests/course/test_training_reference.py
# checks the notebook makes exactly these.
SWEEP_CALLS = tuple(
    [dict(lrs=[1e-4, 1e-3, 3e-3, 1e-2, 1e-1, 1.0], steps=200, seed=s, n_val=64, batch_size=8) for s in (0, 1)]
    + [
        dict(lrs=[1e-3, 3e-3, 1e-2, 3e-2], steps=1_600 // b, seed=s, n_val=64, batch_size=b)
        for s in (0, 1)
        for b in (2, 8, 32)
    ]
)


def reference_info(source=REFERENCE_DIR) -> dict:
    """What ``reference.json`` records: the preset, the corpus fingerprint, where it was trained."""
    path = Path(source) / "reference.json"
    if not path.exists():
        raise FileNotFoundError(f"no reference run at {source} (reference.json missing).")
    return json.loads(path.read_text(encoding="utf-8"))


def reference_fits(corpus, preset_name: str, source=REFERENCE_DIR) -> str | None:
    """None if the reference run can stand in for this run; else why not, in words."""
    if preset_name != REFERENCE_PRESET:
        return f"the reference run is the {REFERENCE_PRESET!r} preset's; this machine trains {preset_name!r}"
    try:
        info = reference_info(source)
    except FileNotFoundError as err:
        return str(err)
    if info.get("tokenizer") != tokenizer_state(corpus.tokenizer):
        return "this Python's help text has another vocabulary than the one the reference run was trained on"
    return None


def use_reference_run(requested, corpus, preset_name: str, source=REFERENCE_DIR, *, log=print) -> bool:
    """True when notebook 08 should load the reference run instead of training: ``requested``
    (the notebook's ``USE_REFERENCE_RUN``), ``LMCORE_USE_REFERENCE_RUN=1`` in the environment
    or under nbgrader's autograder, and the run fits (:func:`reference_fits`; if it does not,
    says why and returns False: the notebook trains)."""
    if not isinstance(requested, bool):
        raise TypeError(f"requested must be True or False; got {requested!r}.")
    if not (requested or grading() or os.environ.get(REFERENCE_ENV) == "1"):
        return False
    why = reference_fits(corpus, preset_name, source)
    if why is not None:
        log(f"training after all: {why}.")
        return False
    return True


def _config(state: dict) -> TrainConfig:
    known = {f.name for f in fields(TrainConfig)}
    kwargs = {k: v for k, v in state.items() if k in known}
    kwargs["betas"] = tuple(kwargs.get("betas", (0.9, 0.99)))
    return TrainConfig(**kwargs)


def reference_run(out_dir, corpus, device="cpu", source=REFERENCE_DIR) -> TrainResult:
    """The committed run as :func:`lmcore.train.train` returns it, its checkpoints copied into
    ``out_dir`` (``checkpoint.pt``, and ``best.pt`` at the lowest validation loss)."""
    source, out_dir = Path(source), Path(out_dir)
    why = reference_fits(corpus, REFERENCE_PRESET, source)
    if why is not None:
        raise ValueError(f"the reference run does not fit this corpus: {why}.")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in _FILES:
        if (source / name).exists():
            copy_checkpoint(source / name, out_dir / name)
    if not (source / "best.pt").exists():
        copy_checkpoint(out_dir / "checkpoint.pt", out_dir / "best.pt")  # the last record was the best
    model, _, ck = load_model(out_dir / "checkpoint.pt", map_location=device)
    return TrainResult(
        model,
        list(ck["history"]),
        status="finished",
        corpus=corpus,
        config=_config(ck["train_config"]),
        best_step=ck["best_step"],
        best_val_loss=ck["best_val_loss"],
        best_path=out_dir / "best.pt",
    )


def reference_first_steps(corpus, cfg, source=REFERENCE_DIR) -> dict:
    """Section 6's retrained start, as the notebook's own run measured it
    (:func:`lmcore.course.training.dynamics.load_first_steps`: records, samples, windows)."""
    return load_first_steps(Path(source) / FIRST_STEPS, corpus, cfg)


def reference_small_slice(source=REFERENCE_DIR) -> TrainResult:
    """Section 6's small-slice run as :func:`lmcore.train.train` returned it, without its model
    and checkpoints (``model`` and ``best_path`` are None): history, config and best."""
    body = json.loads((Path(source) / SMALL_SLICE).read_text(encoding="utf-8"))
    return TrainResult(
        None,
        body["history"],
        status=body["status"],
        config=_config(body["train_config"]),
        best_step=body["best_step"],
        best_val_loss=body["best_val_loss"],
    )


def _compact(src: Path, dst: Path) -> dict:
    """Copy a checkpoint with AdamW's moments in bfloat16 (weights and everything else as they are)."""
    ck = load_checkpoint(src)
    for state in ck["optimizer"]["state"].values():
        for key in ("exp_avg", "exp_avg_sq"):
            if key in state:
                state[key] = state[key].to(torch.bfloat16)
    ck.pop("format", None)
    save_checkpoint(dst, **ck)
    return ck


def write_reference_run(run_dir, corpus, dest=REFERENCE_DIR) -> Path:
    """Write ``dest`` from a finished run in ``run_dir`` (its ``checkpoint.pt``, ``best.pt``):
    the checkpoints (compacted), ``history.json`` and ``reference.json``."""
    run_dir, dest = Path(run_dir), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    ck = _compact(run_dir / "checkpoint.pt", dest / "checkpoint.pt")
    if ck["best_step"] != ck["step"]:
        _compact(run_dir / "best.pt", dest / "best.pt")
    else:
        (dest / "best.pt").unlink(missing_ok=True)
    (dest / "history.json").write_text(json.dumps(ck["history"], indent=1) + "\n")
    info = {
        "preset": REFERENCE_PRESET,
        "corpus": ck["train_config"]["corpus"],
        "corpus_sha256": corpus_fingerprint(corpus),
        "tokenizer": tokenizer_state(corpus.tokenizer),
        "steps": ck["step"],
        "best_step": ck["best_step"],
        "trained_with": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "machine": platform.machine(),
        },
    }
    (dest / "reference.json").write_text(json.dumps(info, indent=1) + "\n")
    return dest


def write_reference_dynamics(run_dir, dest=REFERENCE_DIR) -> Path:
    """Copy section 6's two short runs from an executed notebook's ``run_dir`` into ``dest``:
    ``first_steps.json`` as the notebook wrote it, and the small-slice run's history and best
    (from ``run_dir/small_slice/checkpoint.pt``) as ``small_slice.json``."""
    run_dir, dest = Path(run_dir), Path(dest)
    (dest / FIRST_STEPS).write_text((run_dir / FIRST_STEPS).read_text(encoding="utf-8"), encoding="utf-8")
    ck = load_checkpoint(run_dir / "small_slice" / "checkpoint.pt")
    body = {
        "status": "finished" if ck["step"] == ck["train_config"]["max_steps"] else "stopped",
        "train_config": ck["train_config"],
        "history": ck["history"],
        "best_step": ck["best_step"],
        "best_val_loss": ck["best_val_loss"],
    }
    (dest / SMALL_SLICE).write_text(json.dumps(body, indent=1) + "\n")
    return dest


def main(argv=None) -> int:
    from ...data import load_corpus

    argv = sys.argv[1:] if argv is None else argv
    short_only = "--short-runs-only" in argv
    args = [a for a in argv if a != "--short-runs-only"]
    if len(args) != 1:
        sys.exit(
            "usage: python -m lmcore.course.training.reference RUN_DIR [--short-runs-only]  "
            "(the run directory of an executed notebook 08, cpu preset)"
        )
    if not short_only:
        ck = load_checkpoint(Path(args[0]) / "checkpoint.pt")
        print(f"wrote {write_reference_run(args[0], load_corpus(ck['train_config']['corpus']))}")
    print(f"wrote section 6's short runs into {write_reference_dynamics(args[0])}")
    return 0


def _sweep_key(corpus, lrs, steps, seed, n_val, batch_size) -> dict:
    return {
        "corpus_sha256": corpus_fingerprint(corpus),
        "lrs": [float(lr) for lr in lrs],
        "steps": int(steps),
        "seed": int(seed),
        "n_val": int(n_val),
        "batch_size": int(batch_size),
    }


def recorded_sweep(corpus, lrs, steps, seed, n_val, batch_size, source=REFERENCE_DIR) -> dict | None:
    """The sweep recorded in ``sweeps.json`` for exactly this call of ``lr_sweep`` on this corpus
    (``{"lrs", "curves", "val", "ln_v"}``, rates as floats), else None (then the sweep runs)."""
    path = Path(source) / SWEEPS
    if not path.exists():
        return None
    key = _sweep_key(corpus, lrs, steps, seed, n_val, batch_size)
    for entry in json.loads(path.read_text(encoding="utf-8")):
        if entry["key"] == key:
            lrs = key["lrs"]
            return {
                "lrs": lrs,
                "curves": {lr: entry["curves"][repr(lr)] for lr in lrs},
                "val": {lr: entry["val"][repr(lr)] for lr in lrs},
                "ln_v": entry["ln_v"],
            }
    return None


if __name__ == "__main__":
    sys.exit(main())
