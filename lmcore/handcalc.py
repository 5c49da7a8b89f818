"""One position, by hand: softmax, log-softmax, NLL and its gradient on plain lists or NumPy.

``z`` is a list or 1-D array of V logits and ``y`` the index of the correct token. Everything is
computed in float64 and stays finite for logits of any size (|z| ~ 1000 included) because the
maximum is subtracted before exponentiating: softmax(z) = softmax(z - c) for any constant c.
"""

from __future__ import annotations

import numpy as np

__all__ = ["softmax", "log_softmax", "logsumexp", "nll", "ce_grad"]


def _logits(z) -> np.ndarray:
    how = "Pass the V logits of one position as a list of numbers, e.g. [2.0, 1.0, 0.1]."
    if isinstance(z, (list, tuple)) and any(isinstance(v, (bool, np.bool_, str, bytes)) for v in z):
        raise TypeError(f"z must be a list or 1-D array of numbers (logits); got {z!r:.80}. {how}")
    if hasattr(z, "detach") and hasattr(z, "numpy"):  # a torch tensor, even one needing grad
        z = z.detach().cpu().numpy()
    try:
        raw = np.asarray(z)
    except ValueError as exc:  # ragged nested lists
        raise ValueError(
            f"z must be a non-empty 1-D list of logits for one position; got {z!r:.80} ({exc}). {how}"
        ) from None
    if raw.dtype.kind not in "iuf":
        raise TypeError(
            f"z must be a list or 1-D array of numbers (logits); got {z!r:.80} "
            f"(NumPy dtype {raw.dtype}). {how}"
        )
    arr = raw.astype(np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"z must be a non-empty 1-D list of logits for one position; got shape "
            f"{arr.shape}. For a batch, call it once per position."
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"z must hold finite logits; got {arr.tolist()[:8]}.")
    return arr


def _target(y, V: int) -> int:
    if isinstance(y, (bool, np.bool_)) or not isinstance(y, (int, np.integer)):
        raise TypeError(f"y must be an int, the index of the correct token; got {y!r}.")
    if not 0 <= y < V:
        raise ValueError(f"y must be a token index in [0, {V}) for {V} logits; got {y}.")
    return int(y)


def logsumexp(z) -> float:
    """log(sum(exp(z))), computed as max(z) + log(sum(exp(z - max(z))))."""
    z = _logits(z)
    m = z.max()
    return float(m + np.log(np.exp(z - m).sum()))


def log_softmax(z) -> np.ndarray:
    """log p = z - logsumexp(z): exact and finite even where p underflows to 0."""
    z = _logits(z)
    return z - logsumexp(z)


def softmax(z) -> np.ndarray:
    """p_i = exp(z_i - max z) / sum_j exp(z_j - max z): positive, sums to 1."""
    z = _logits(z)
    e = np.exp(z - z.max())
    return e / e.sum()


def nll(z, y) -> float:
    """-log p_y = logsumexp(z) - z_y, the cross-entropy of one position in nats."""
    z = _logits(z)
    return float(-log_softmax(z)[_target(y, z.size)])


def ce_grad(z, y) -> np.ndarray:
    """d nll / d z = softmax(z) - onehot(y): sums to 0, negative only at the target."""
    z = _logits(z)
    g = softmax(z)
    g[_target(y, z.size)] -= 1.0
    return g
