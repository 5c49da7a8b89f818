"""Plots of a training run: ``python -m lmcore.course.training_views runs/NAME`` draws
``runs/NAME/loss.png`` from the ``history.json`` that ``python -m lmcore.train`` wrote."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from .training import plot_loss_curves

__all__ = ["plot_run", "main"]


def plot_run(out_dir) -> Path:
    """Draw ``out_dir/loss.png`` from ``out_dir/history.json``; return its path."""
    out_dir = Path(out_dir)
    src = out_dir / "history.json"
    if not src.is_file():
        raise FileNotFoundError(f"{src} does not exist: pass the --out folder of a finished "
                                "python -m lmcore.train run.")
    run = json.loads(src.read_text())
    vocab = run.get("vocab_size")
    fig = plot_loss_curves(run["history"], math.log(vocab) if vocab else None, run.get("unigram_entropy"),
                           title=f"{run.get('preset', '?')} preset on {run.get('corpus', '?')}")
    fig.savefig(out_dir / "loss.png", dpi=120)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return out_dir / "loss.png"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lmcore.course.training_views",
                                description="Plot the loss curves of a python -m lmcore.train run.")
    p.add_argument("out", help="the --out folder of the run (holds history.json)")
    print(f"wrote {plot_run(p.parse_args(argv).out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
