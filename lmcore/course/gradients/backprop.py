"""Notebook 02, section 8: the gradient carried from the logits into a linear output head, and
one layer further, into a tied token embedding.

For hidden states ``H`` (n, D), an output matrix ``W`` (V, D) (the layout of ``nn.Linear`` and of
lmcore's tied ``lm_head``), logits ``Z = H W^T`` and the mean NLL over the n targets:
``dZ = (P - Y) / n``, ``dW = (P - Y)^T H / n`` (V, D) and ``dH = (P - Y) W / n`` (n, D).

Exercise 4 goes one layer further: the smallest tied model, ``H = E[x]`` (the embedding lookup)
and ``Z = H E^T`` (the head shares ``E``), so ``dE = dZ^T H`` (the head) plus ``dH`` added into
the rows ``x`` names (the lookup; an id that appears twice receives both rows).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..._validate import require_float, require_int, require_tensor
from ..checks import Case, check, float32_atol
from ..checks.guard import AUTOGRAD

__all__ = [
    "head_grads",
    "head_grads_autograd",
    "tied_grads",
    "tied_grads_autograd",
    "check_tied_grads",
    "explain_tied_grads",
]


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


def _tied_inputs(E, x, y):
    require_tensor("E", E, 2, "(V, D)")
    require_float("E", E)
    for name, t in (("x", x), ("y", y)):
        require_tensor(name, t, 2, "(N, T)")
        require_int(name, t)
    if x.shape != y.shape:
        raise ValueError(f"x and y must both be (N, T); got x {tuple(x.shape)}, y {tuple(y.shape)}.")
    V = E.shape[0]
    for name, t in (("x", x), ("y", y)):
        if t.numel() and not (0 <= int(t.min()) and int(t.max()) < V):
            raise ValueError(
                f"{name} must hold token ids in [0, V = {V}); got [{int(t.min())}, {int(t.max())}]."
            )


def tied_grads(E: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """By hand: ``dE`` (V, D) of the mean NLL of logits ``E[x] @ E.T`` over all N*T targets ``y``
    (a tied embedding: the lookup and the head share ``E``)."""
    _tied_inputs(E, x, y)
    ids = x.reshape(-1)
    h = E[ids]  # (n, D): the lookup
    P = torch.softmax(h @ E.T, dim=-1)
    dZ = (P - F.one_hot(y.reshape(-1), E.shape[0]).to(P.dtype)) / ids.numel()
    return (dZ.T @ h).index_add(0, ids, dZ @ E)  # head + lookup (repeated ids add up)


def tied_grads_autograd(E: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The same ``dE`` from autograd on ``F.cross_entropy`` (the independent reference)."""
    _tied_inputs(E, x, y)
    with torch.enable_grad():
        e = E.detach().clone().requires_grad_(True)
        loss = F.cross_entropy((e[x] @ e.T).reshape(-1, E.shape[0]), y.reshape(-1))
        (dE,) = torch.autograd.grad(loss, e)
    return dE


def _tied_cases(seed: int = 7) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for V, D, N, T in ((3, 2, 1, 4), (5, 3, 2, 3), (4, 6, 2, 5), (7, 4, 3, 4), (6, 5, 1, 1)):
        E = torch.randn(V, D, generator=g, dtype=torch.float64)
        x = torch.randint(V, (N, T), generator=g)
        y = torch.randint(V, (N, T), generator=g)
        repeats = "" if N * T <= V else ", ids repeat"
        cases.append(Case((E, x, y), label=f"E (V, D) = {(V, D)}, x and y (N, T) = {(N, T)}{repeats}"))
    return cases


_OWN = {
    f"lmcore.course.gradients.backprop.{name}": "that is the course's own answer: write the gradient yourself"
    for name in ("head_grads", "head_grads_autograd", "tied_grads", "tied_grads_autograd")
}


def _tied_terms(E, x, y) -> dict:
    """The two terms of dE in float64 (from :func:`head_grads`, the head's dW and the dH the lookup
    adds into the rows ``x`` names), and the lookup term as ``dE[ids] += dH`` leaves it (one row
    per repeated id): what :func:`explain_tied_grads` compares an answer with."""
    E = E.detach().double()
    head, dH = head_grads(E[x], E, y)
    ids, dH = x.reshape(-1), dH.reshape(-1, E.shape[1])
    last_write = torch.zeros_like(E)
    last_write[ids] += dH
    return {"head": head, "lookup": torch.zeros_like(E).index_add(0, ids, dH), "last": last_write}


def explain_tied_grads(fn, case, expected, got) -> str:
    """The part of dE a wrong answer left out or mis-added, as a question (``""`` if none fits):
    the head's term alone, the lookup's term alone, or repeated ids that kept one row."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return ""
    t, g = _tied_terms(*case.args), got.detach().double()
    near = lambda a: torch.allclose(g, a, rtol=1e-4, atol=1e-6)  # noqa: E731
    if near(t["head"]):
        return (
            "your dE is the head's term alone; E is also the lookup table H = E[x]: which rows of E "
            "did the forward pass read, and what flows back into them?"
        )
    if near(t["lookup"]):
        return (
            "your dE is the lookup's term alone; E is also the head, Z = H E^T: what does the "
            "gradient of Z give E through that product?"
        )
    N, T = case.args[1].shape
    for k, what in ((N * T, "the number of targets"), (N, "the number of rows"), (T, "a row's length")):
        if k > 1 and near(expected.detach().double() * k):
            return (
                f"your dE is {k} times the reference here, where x holds {N} row(s) of {T} ids, {k} "
                f"being {what}: the loss is a mean over how many targets, and is your gradient one too?"
            )
    if not torch.equal(t["last"], t["lookup"]) and near(t["head"] + t["last"]):
        return (
            "both terms are there, but an id that appears twice in x: does its row of dE receive "
            "both of its contributions?"
        )
    return ""


def check_tied_grads(fn, quiet: bool = False):
    """Grade ``fn(E (V, D), x (N, T), y (N, T)) -> dE (V, D)`` against autograd. Any use of
    autograd inside ``fn`` (``backward``, ``torch.autograd.grad``, under ``enable_grad`` or not) is
    rejected: the gradient must be worked out."""
    autograd = {
        name: "autograd does the work the exercise asks of you: use the chain rule" for name in AUTOGRAD
    }
    return check(
        "tied-embedding gradient",
        fn,
        tied_grads_autograd,
        _tied_cases(),
        quiet=quiet,
        atol=lambda E, x, y: float32_atol(E),  # a float32 answer is right
        rtol=1e-6,
        forbid=autograd | _OWN,
        explain=explain_tied_grads,
        ratio_hints={
            4.0: "Four times the expected: the loss is a mean; is your gradient one too?",
            0.25: "A quarter of the expected: how many times did you divide?",
        },
        hint=(
            "E is used twice, once as the lookup table and once as the head: does your dE have a "
            "term from each, and does an id that appears twice in x get both of its rows?",
            "dZ = (softmax(E[x] E^T) - onehot(y)) / n; the head gives dZ^T E[x]; the lookup adds "
            "the rows of dH = dZ E into the rows x names, e.g. dE.index_add(0, ids, dH), which adds "
            "repeated ids (dE[ids] += dH does not).",
        ),
    )
