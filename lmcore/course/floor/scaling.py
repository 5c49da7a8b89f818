"""Notebook 09, a scaling fit: the floor run at a few widths, and ``L(N) = E + A N^-alpha``
fitted to the final validation losses against the parameter counts N. Its constant E is what
the fit expects of a model of unbounded size trained the same way; the notebook compares it with
the exact entropy.
"""

from __future__ import annotations

import numpy as np

from .run import train_floor_run

__all__ = ["width_runs", "fit_power_law"]


def width_runs(widths=(4, 8, 16), *, seed: int = 0) -> list[tuple[int, int, float]]:
    """The floor run (same data, steps and schedule) at each width in ``widths`` (one head for
    width 4, two above): ``[(width, parameters, final validation loss)]``."""
    out = []
    for w in widths:
        if isinstance(w, bool) or not isinstance(w, int) or w < 2 or w % 2:
            raise ValueError(f"every width must be an even int >= 2; got {w!r}.")
        run = train_floor_run(seed=seed, n_embd=w, n_head=1 if w < 8 else 2)
        out.append((w, run.model.num_parameters(), float(run.history[-1]["val_loss"])))
    return out


def fit_power_law(n, loss, *, alphas=None) -> dict:
    """Least squares ``loss ~ E + A n^-alpha``: for each alpha on a grid (default 0.05..3 in
    steps of 0.005), E and A are linear, solved exactly; the alpha with the smallest squared
    error wins. Returns ``{"E", "A", "alpha", "rms"}`` (rms: the root mean squared residual)."""
    n, loss = np.asarray(n, dtype=np.float64), np.asarray(loss, dtype=np.float64)
    if n.ndim != 1 or n.shape != loss.shape or n.size < 4 or np.any(n <= 0):
        raise ValueError("n and loss must be 1-D of the same length >= 4 (3 parameters, 1 to spare), n > 0.")
    grid = np.arange(0.05, 3.0 + 1e-9, 0.005) if alphas is None else np.asarray(alphas, dtype=np.float64)
    best = None
    for a in grid:
        x = np.stack([np.ones_like(n), n**-a], 1)
        coef = np.linalg.lstsq(x, loss, rcond=None)[0]
        sse = float(((x @ coef - loss) ** 2).sum())
        if best is None or sse < best[0]:
            best = (sse, float(a), coef)
    sse, a, (e, amp) = best
    return {"E": float(e), "A": float(amp), "alpha": a, "rms": float(np.sqrt(sse / n.size))}
