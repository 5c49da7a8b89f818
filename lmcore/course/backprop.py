"""Notebook 02, section 8: the gradient carried from the logits into a linear output head.

For hidden states ``H`` (n, D), an output matrix ``W`` (V, D) (the layout of ``nn.Linear`` and of
lmcore's tied ``lm_head``), logits ``Z = H W^T`` and the mean NLL over the n targets:
``dZ = (P - Y) / n``, ``dW = (P - Y)^T H / n`` (V, D) and ``dH = (P - Y) W / n`` (n, D).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._validate import require_float, require_int, require_tensor
from .checks import Case, check

__all__ = ["head_grads", "head_grads_autograd", "check_head_grads"]


def _inputs(H, W, y):
    for name, t, ndim, shape, kind in (
        ("H", H, 3, "(N, T, D)", require_float),
        ("W", W, 2, "(V, D)", require_float),
        ("y", y, 2, "(N, T)", require_int),
    ):
        require_tensor(name, t, ndim, shape)
        kind(name, t)
    if H.shape[-1] != W.shape[1] or H.shape[:2] != y.shape:
        raise ValueError(
            f"H (N, T, D), W (V, D) and y (N, T) must agree; got H {tuple(H.shape)}, "
            f"W {tuple(W.shape)}, y {tuple(y.shape)}."
        )


def head_grads(H: torch.Tensor, W: torch.Tensor, y: torch.Tensor):
    """By hand: ``(dW (V, D), dH (N, T, D))`` of the mean NLL of logits ``H W^T`` over all N*T
    targets ``y``."""
    _inputs(H, W, y)
    N, T, D = H.shape
    n = N * T
    h = H.reshape(n, D)
    P = torch.softmax(h @ W.T, dim=-1)  # (n, V)
    Y = F.one_hot(y.reshape(n), W.shape[0]).to(P.dtype)  # (n, V)
    dZ = (P - Y) / n
    return dZ.T @ h, (dZ @ W).reshape(N, T, D)


def head_grads_autograd(H: torch.Tensor, W: torch.Tensor, y: torch.Tensor):
    """The same two gradients from autograd on ``F.cross_entropy`` (the independent reference)."""
    _inputs(H, W, y)
    with torch.enable_grad():
        h = H.detach().clone().requires_grad_(True)
        w = W.detach().clone().requires_grad_(True)
        loss = F.cross_entropy((h @ w.T).reshape(-1, W.shape[0]), y.reshape(-1))
        dW, dH = torch.autograd.grad(loss, (w, h))
    return dW, dH


def _cases(seed: int = 7) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for N, T, D, V in ((1, 1, 2, 3), (1, 4, 3, 5), (2, 3, 4, 6), (3, 5, 8, 7), (2, 6, 5, 11)):
        H = torch.randn(N, T, D, generator=g, dtype=torch.float64)
        W = torch.randn(V, D, generator=g, dtype=torch.float64)
        y = torch.randint(V, (N, T), generator=g)
        cases.append(Case((H, W, y), label=f"H (N, T, D) = {(N, T, D)}, W (V, D) = {(V, D)}"))
    return cases


def check_head_grads(fn, quiet: bool = False) -> bool:
    """Grade ``fn(H (N, T, D), W (V, D), y (N, T)) -> (dW (V, D), dH (N, T, D))`` against
    autograd. Autograd is switched off while ``fn`` runs: the gradients must be worked out."""

    def by_hand(*args):
        with torch.no_grad():
            return fn(*args)

    return check(
        "head gradients",
        by_hand,
        head_grads_autograd,
        _cases(),
        quiet=quiet,
        atol=1e-9,
        rtol=1e-7,
        hint="flatten to n = N*T rows; dZ = (softmax(H W^T) - onehot(y)) / n; then "
        "dW = dZ^T H has W's shape (V, D) and dH = dZ W has H's shape.",
    )
