"""The label-bug checklist, run against any model + loss pipeline.

``run_checks(forward, loss_fn, vocab_size=V)`` feeds the pipeline inputs whose right answer is
known (increasing ids, perfect and zero logits, changed future tokens, a changed pad id) and
reports which expectation broke; each failing row names its likely cause. Signatures: missing
shift -> alignment, perfect_logits, last_unscored; double shift -> alignment, perfect_logits,
all_scored; softmax before the loss -> perfect_logits; padding scored -> pad_id; per-row or
per-batch means -> equal_weights; a model that sees the future -> future.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

__all__ = ["CHECK_NAMES", "CheckRow", "DiagnosisReport", "run_checks", "token_weights"]

CHECK_NAMES = ("alignment", "perfect_logits", "zero_logits", "last_unscored", "all_scored",
               "equal_weights", "pad_id", "future", "first_loss")
_BIG = 20.0  # the "perfect" logit: loss per target log(1 + (V-1) e^-20), about 0


@dataclass(frozen=True)
class CheckRow:
    """One line of the report: the check's ``name``, whether it ``passed``, and why."""
    name: str
    passed: bool
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {'✓ pass' if self.passed else '✗ FAIL'}: {self.detail}"


@dataclass(frozen=True)
class DiagnosisReport:
    """The rows of :func:`run_checks`; prints as a table."""
    rows: tuple

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows)

    @property
    def failed(self) -> tuple:
        """Names of the failing checks in table order: the bug's signature."""
        return tuple(r.name for r in self.rows if not r.passed)

    def __getitem__(self, name: str) -> CheckRow:
        found = [r for r in self.rows if r.name == name]
        if not found:
            raise KeyError(f"no check named {name!r}; the checks are {[r.name for r in self.rows]}")
        return found[0]

    def __str__(self) -> str:
        w = max(len(r.name) for r in self.rows)
        head = (f"all {len(self.rows)} checks passed" if self.passed else
                f"{len(self.failed)} of {len(self.rows)} checks failed: {', '.join(self.failed)}")
        return "\n".join([head, f"{'check'.ljust(w)}  result  detail"] +
                         [f"{r.name.ljust(w)}  {'✓ pass' if r.passed else '✗ FAIL'}  {r.detail}"
                          for r in self.rows])

    __repr__ = __str__


def _loss(loss_fn, logits, ids, mask) -> float:
    """loss_fn's value as a float, without building a graph."""
    with torch.no_grad():
        value = loss_fn(logits, ids, mask)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"loss_fn must return a scalar (a one-element tensor or a float); got "
                        f"{tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}.")
    return float(value)


def _place(ids: torch.Tensor, offset: int, V: int) -> torch.Tensor:
    """Logits (N, L, V): _BIG on ids[:, t + offset] at each position t where that exists, else 0."""
    N, L = ids.shape
    logits = torch.zeros(N, L, V, device=ids.device)
    for t in range(max(0, -offset), min(L, L - offset)):
        logits[torch.arange(N), t, ids[:, t + offset]] = _BIG
    return logits


def _alignment(loss_fn, ids, mask, V):
    losses = {k: _loss(loss_fn, _place(ids, k, V), ids, mask) for k in (-1, 0, 1, 2, 3)}
    best = min(losses, key=losses.get)
    shown = ", ".join(str(int(i)) for i in ids[0, :4])
    got = ", ".join(str(int(i)) for i in ids[0, best:best + 3]) if best >= 0 else "earlier tokens"
    text = f"ids {shown}, ... are scored against {got}, ..."
    if best == 1 and all(v > losses[1] + 1e-3 for k, v in losses.items() if k != 1):
        return True, f"{text} (position t against token t+1)"
    cause = {0: "the shift is missing: each position is compared with its own token, so the "
                "model learns to copy its input",
             2: "the labels are shifted twice (pre-shifted labels passed to a loss that shifts "
                "again): the model learns to predict t+2"}
    return False, f"{text}: " + cause.get(best, f"position t is scored against token t{best:+d}")


def _perfect(loss_fn, ids, mask, V):
    value = _loss(loss_fn, _place(ids, 1, V), ids, mask)
    text = f"loss {value:.2f} for logits perfect on the next token (expected about 0)"
    if value < 0.01:
        return True, text
    softmaxed = math.log(V - 1 + math.e) - 1
    if abs(value - softmaxed) < 0.05:
        return False, (f"{text}: ln(V - 1 + e) - 1 = {softmaxed:.2f} is the loss of probabilities "
                       "taken as logits: softmax is applied before the loss (cross-entropy does "
                       "log-softmax itself)")
    return False, (f"{text}: the loss does not score position t against token t+1 (see "
                   "alignment) or transforms the logits (softmax, scaling, smoothing)")


def _zero(loss_fn, ids, mask, V):
    value, ln_v = _loss(loss_fn, torch.zeros(*ids.shape, V, device=ids.device), ids, mask), math.log(V)
    if abs(value - ln_v) < 1e-3:
        return True, f"loss {value:.2f} for zero logits = ln V = {ln_v:.2f}"
    ratio = value / ln_v
    cause = ("the loss is in bits (log base 2), not nats" if abs(ratio - 1 / math.log(2)) < 1e-3
             else f"the loss is summed over {round(ratio)} targets, not averaged"
             if ratio > 1.5 and abs(ratio - round(ratio)) < 1e-3
             else "the loss rescales or transforms the logits, or is not a cross-entropy")
    return False, f"loss {value:.2f} for zero logits, expected ln V = {ln_v:.2f}: {cause}"


def _coverage(loss_fn, ids, mask, V, gen):
    """Which positions' logits move the loss: L tokens should give targets at 0..L-2."""
    N, L = ids.shape
    base = torch.randn(N, L, V, generator=gen).to(ids.device)
    ref, scored = _loss(loss_fn, base, ids, mask), []
    for t in range(L):
        other = base.clone()
        other[:, t] = 3.0 * torch.randn(N, V, generator=gen).to(ids.device)
        if abs(_loss(loss_fn, other, ids, mask) - ref) > 1e-5 * max(1.0, abs(ref)):
            scored.append(t)
    missing = [t for t in range(L - 1) if t not in scored]
    last = ((True, f"the last position (t = {L - 1}) is not scored: it has no next token")
            if L - 1 not in scored else
            (False, f"the last position (t = {L - 1}) is scored, though it has no next token in "
                    "the row: the shift is missing (each position compared with its own token)"))
    every = ((True, f"positions 0..{L - 2} are all scored: {L} tokens give {L - 1} targets")
             if not missing else
             (False, f"positions {missing} are not scored, though {L} tokens give {L - 1} targets:"
                     " a double shift drops the last target; masking by token id drops real tokens"))
    return last, every


def token_weights(loss_fn: Callable, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  vocab_size: int) -> torch.Tensor:
    """How much each position's logits count in ``loss_fn``: (N, L), 0 where nothing is scored.

    Read from the gradient at zero logits and scaled so that a cross-entropy term with
    coefficient w reads w: a token-weighted mean over n targets gives 1/n at each of them.
    """
    logits = torch.zeros(*input_ids.shape, vocab_size, device=input_ids.device, requires_grad=True)
    with torch.enable_grad():
        loss = loss_fn(logits, input_ids, attention_mask)
        if not (isinstance(loss, torch.Tensor) and loss.requires_grad):
            raise ValueError("loss_fn's result has no gradient with respect to the logits; is it "
                             "detached (.item(), .detach(), torch.no_grad())?")
        (grad,) = torch.autograd.grad(loss, logits)
    return grad.norm(dim=-1) / math.sqrt((vocab_size - 1) / vocab_size)


def _equal_weights(loss_fn, ids, mask, V):
    weight = token_weights(loss_fn, ids, mask, V)
    scored = weight > 1e-6 * weight.max()
    if not bool(scored.any()):
        return False, "no position is scored: the loss does not depend on the logits"
    if float(weight[scored].max() / weight[scored].min()) < 1.001:
        return True, "every scored target gets the same weight in the loss"
    per_row = [float(w[s].mean()) for w, s in zip(weight, scored) if s.any()]
    return False, (f"targets weigh up to {max(per_row) / min(per_row):.2f}x more in shorter rows: "
                   "the loss averages per-row or per-batch means; divide the summed NLL by the "
                   "number of valid targets (num_items when accumulating)")


def _pad(loss_fn, ids, mask, V, pad_id, gen):
    logits = torch.randn(*ids.shape, V, generator=gen).to(ids.device)
    alt = (pad_id + 1) % V
    a = _loss(loss_fn, logits, ids, mask)
    b = _loss(loss_fn, logits, ids.masked_fill(mask == 0, alt), mask)
    if abs(a - b) <= 1e-6 * max(1.0, abs(a)):
        return True, f"changing the pad id from {pad_id} to {alt} leaves the loss at {a:.2f}"
    return False, (f"changing the pad id from {pad_id} to {alt} moves the loss from {a:.2f} to "
                   f"{b:.2f}: padding is scored as targets, or found by its id instead of the "
                   "attention mask; set labels to -100 where attention_mask is 0")


def _future(forward, ids, mask, draw):
    N, L = ids.shape
    with torch.no_grad():
        out = forward(ids, mask)
        if not torch.equal(out, forward(ids, mask)):
            return False, "forward gives different logits for the same input (dropout on? model.eval())"
        tol = 1e-5 * max(1.0, float(out.abs().max()))
        for cut in sorted({1, L // 2, L - 1}):
            changed = ids.clone()
            changed[:, cut:] = draw(N, L - cut)
            changed[:, cut] = torch.where(changed[:, cut] == ids[:, cut], draw(N, 1)[:, 0], changed[:, cut])
            moved = ((forward(changed, mask)[:, :cut] - out[:, :cut]).abs().amax(dim=(0, 2)) > tol).nonzero()
            if len(moved):
                return False, (f"the logits at position {int(moved[0])} change when only tokens from "
                               f"position {cut} on change: the model sees the future (no causal "
                               "mask, or its inputs are the labels)")
    return True, "changing tokens from position c on leaves the logits before c unchanged"


def _first_loss(forward, loss_fn, ids, mask, V, tol):
    with torch.no_grad():
        logits = forward(ids, mask)
    if tuple(getattr(logits, "shape", ())) != (*ids.shape, V):
        raise ValueError(f"forward must return logits (N, L, V) = {(*ids.shape, V)}; got "
                         f"{getattr(logits, 'shape', type(logits).__name__)}.")
    value, ln_v = _loss(loss_fn, logits, ids, mask), math.log(V)
    text = f"first loss {value:.2f} vs ln V = {ln_v:.2f} (before training)"
    if abs(value - ln_v) <= tol * ln_v:
        return True, text
    if value < ln_v:
        return False, (f"{text}: far below ln V at init: the target leaks into the input (check "
                       "the shift and the causal mask), or the model is already trained")
    return False, f"{text}: far above ln V: the initial logits are too large (check the init scale)"


def run_checks(forward: Callable, loss_fn: Callable, *, vocab_size: int, seq_len: int = 16,
               pad_id: int = 0, seed: int = 0, first_loss_tol: float = 0.1,
               device="cpu") -> DiagnosisReport:
    """Run the label-bug checklist on a pipeline; returns a :class:`DiagnosisReport`.

    ``forward(input_ids (N, L), attention_mask (N, L)) -> logits (N, L, V)``;
    ``loss_fn(logits, input_ids, attention_mask) -> scalar`` shifts and masks by itself. Real
    tokens never use ``pad_id``; padding sits at the end of short rows. The first loss may lie
    ``first_loss_tol * ln V`` from ln V: run the checks before training. Inputs are made on
    ``device``.
    """
    if not callable(forward) or not callable(loss_fn):
        raise TypeError("forward and loss_fn must be callables: forward(input_ids, attention_mask) "
                        "-> logits and loss_fn(logits, input_ids, attention_mask) -> scalar.")
    for name, value, low in (("vocab_size", vocab_size, 5), ("seq_len", seq_len, 4)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}; got {value!r}.")
    if isinstance(pad_id, bool) or not isinstance(pad_id, int) or not 0 <= pad_id < vocab_size:
        raise ValueError(f"pad_id must be a token id in [0, {vocab_size}); got {pad_id!r}.")
    V, L = vocab_size, seq_len
    gen = torch.Generator().manual_seed(seed)
    real = torch.tensor([i for i in range(V) if i != pad_id])         # ids a real token may take

    def draw(n, length):
        return real[torch.randint(0, V - 1, (n, length), generator=gen)].to(device)

    full = torch.ones(2, L, dtype=torch.long, device=device)
    start = int((real >= 10).nonzero()[0]) if int(real[-1]) >= 10 else 0
    increasing = real[(start + torch.arange(L)[None] + torch.tensor([[0], [3]])) % (V - 1)].to(device)
    ids = draw(2, L)
    lengths = torch.tensor([L, L // 2 + 1, L - 3])
    ragged_mask = (torch.arange(L)[None] < lengths[:, None]).long().to(device)
    ragged = draw(3, L).masked_fill(ragged_mask == 0, pad_id)

    results = {"first_loss": _first_loss(forward, loss_fn, draw(2, L), full, V, first_loss_tol),
               "alignment": _alignment(loss_fn, increasing, full, V),
               "perfect_logits": _perfect(loss_fn, ids, full, V),
               "zero_logits": _zero(loss_fn, ragged, ragged_mask, V)}
    results["last_unscored"], results["all_scored"] = _coverage(loss_fn, ids, full, V, gen)
    results["equal_weights"] = _equal_weights(loss_fn, ragged, ragged_mask, V)
    results["pad_id"] = _pad(loss_fn, ragged, ragged_mask, V, pad_id, gen)
    results["future"] = _future(forward, draw(2, L), full, draw)
    return DiagnosisReport(tuple(CheckRow(n, bool(results[n][0]), results[n][1]) for n in CHECK_NAMES))
