"""The label-bug checklist, run against any model + loss pipeline.

``run_checks(forward, loss_fn, vocab_size=V)`` feeds the pipeline inputs whose right answer is
known (increasing ids, perfect and zero logits, ragged right-padded rows ending in EOS,
left-padded rows, changed future tokens) and reports which expectation broke; each failing row
names its likely cause. Signatures: a NaN/inf loss -> finite_loss; missing shift -> alignment,
perfect_logits, last_unscored; double shift -> alignment, perfect_logits, all_scored (and
eos_scored); softmax before the loss -> perfect_logits; padding scored -> padding_unscored;
EOS ignored by id -> eos_scored; per-row or per-batch means -> equal_weights; a model that sees
the future -> future; a model that ignores the attention mask -> padding_unread, left_padding;
left padding without position reset -> left_padding. The checks themselves live in
:mod:`lmcore.diagnose_checks`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import diagnose_checks as C
from ._validate import require_bool, require_int_scalar, require_real

__all__ = ["CHECK_NAMES", "CheckRow", "DiagnosisReport", "run_checks", "token_weights", "ragged_batch"]

CHECK_NAMES = (
    "finite_loss",
    "alignment",
    "perfect_logits",
    "zero_logits",
    "last_unscored",
    "all_scored",
    "equal_weights",
    "padding_unscored",
    "eos_scored",
    "future",
    "padding_unread",
    "left_padding",
    "first_loss",
)


@dataclass(frozen=True)
class CheckRow:
    """One line of the report: the check's ``name``, whether it ``passed`` (a ``skipped`` row
    counts as passed), why, and the measured ``value`` where there is one (first_loss)."""

    name: str
    passed: bool
    detail: str
    skipped: bool = False
    value: float | None = None

    @property
    def mark(self) -> str:
        return "– skip" if self.skipped else "✓ pass" if self.passed else "✗ FAIL"

    def __str__(self) -> str:
        return f"{self.name}: {self.mark}: {self.detail}"


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

    @property
    def skipped(self) -> tuple:
        return tuple(r.name for r in self.rows if r.skipped)

    def __getitem__(self, name: str) -> CheckRow:
        found = [r for r in self.rows if r.name == name]
        if not found:
            raise KeyError(f"no check named {name!r}; the checks are {[r.name for r in self.rows]}")
        return found[0]

    def __str__(self) -> str:
        w, run = max(len(r.name) for r in self.rows), len(self.rows) - len(self.skipped)
        head = (
            f"all {run} checks passed"
            if self.passed
            else f"{len(self.failed)} of {run} checks failed: {', '.join(self.failed)}"
        )
        head += f" ({len(self.skipped)} skipped: {', '.join(self.skipped)})" if self.skipped else ""
        return "\n".join(
            [head, f"{'check'.ljust(w)}  result  detail"]
            + [f"{r.name.ljust(w)}  {r.mark}  {r.detail}" for r in self.rows]
        )

    __repr__ = __str__


def ragged_batch(
    vocab_size: int,
    seq_len: int = 16,
    *,
    pad_id: int = 0,
    eos_id: int | None = None,
    seed: int = 0,
    left: bool = False,
):
    """The ragged batch the checks use: ``(input_ids, attention_mask)`` (3, L), real lengths
    L, L//2 + 1, L - 3 (right padding; each row ends with ``eos_id`` when given), or with
    ``left=True`` L, L - L//4, L//2 padded on the left. Real tokens never use pad_id or eos_id."""
    V = require_int_scalar("vocab_size", vocab_size, min=5)
    L = require_int_scalar("seq_len", seq_len, min=4)
    pad_id = require_int_scalar("pad_id", pad_id, min=0, max=V - 1)
    eos_id = None if eos_id is None else require_int_scalar("eos_id", eos_id, min=0, max=V - 1)
    g = torch.Generator().manual_seed(
        require_int_scalar("seed", seed) + (7 if require_bool("left", left) else 0)
    )
    real = torch.tensor([i for i in range(V) if i not in (pad_id, eos_id)])
    ids = real[torch.randint(0, len(real), (3, L), generator=g)]
    lengths = torch.tensor([L, L - L // 4, L // 2] if left else [L, L // 2 + 1, L - 3])
    pos = torch.arange(L)[None]
    mask = (pos >= L - lengths[:, None]) if left else (pos < lengths[:, None])
    if eos_id is not None and not left:
        ids = ids.masked_fill(pos == lengths[:, None] - 1, eos_id)
    return ids.masked_fill(~mask, pad_id), mask.long()


def token_weights(
    loss_fn: Callable, input_ids: torch.Tensor, attention_mask: torch.Tensor, vocab_size: int
) -> torch.Tensor:
    """How much each position's logits count in ``loss_fn``: (N, L), 0 where nothing is scored.

    Read from the gradient at zero logits and scaled so that a cross-entropy term with
    coefficient w reads w: a token-weighted mean over n targets gives 1/n at each of them.
    """
    vocab_size = require_int_scalar("vocab_size", vocab_size, min=2)
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise TypeError(f"input_ids must be a 2-D tensor (N, L); got {type(input_ids).__name__}.")
    logits = torch.zeros(*input_ids.shape, vocab_size, device=input_ids.device, requires_grad=True)
    with torch.enable_grad():
        loss = loss_fn(logits, input_ids, attention_mask)
        if not (isinstance(loss, torch.Tensor) and loss.requires_grad):
            raise ValueError(
                "loss_fn's result has no gradient with respect to the logits; is it "
                "detached (.item(), .detach(), torch.no_grad())?"
            )
        if loss.numel() != 1 or not bool(torch.isfinite(loss).all()):
            raise ValueError(
                f"loss_fn must return a finite scalar; got {loss.detach().flatten()[:4].tolist()}."
            )
        (grad,) = torch.autograd.grad(loss, logits)
    return grad.norm(dim=-1) / math.sqrt((vocab_size - 1) / vocab_size)


def _module_of(forward, model):
    if model is not None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"model must be a torch.nn.Module (the one forward calls); got {type(model).__name__}."
            )
        return model
    if isinstance(forward, torch.nn.Module):
        return forward
    owner = getattr(forward, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


@contextlib.contextmanager
def _eval_mode(module):
    """Every submodule in eval mode inside; each one's previous mode restored after."""
    modes = [(m, m.training) for m in module.modules()] if module is not None else []
    for m, _ in modes:
        m.training = False
    try:
        yield
    finally:
        for m, was in modes:
            m.training = was


def run_checks(
    forward: Callable,
    loss_fn: Callable,
    *,
    vocab_size: int,
    seq_len: int = 16,
    pad_id: int = 0,
    eos_id: int | None = None,
    seed: int = 0,
    first_loss_tol: float = 0.1,
    label_smoothing: float = 0.0,
    z_loss: float = 0.0,
    aux_loss: bool = False,
    pretrained: bool = False,
    left_padding: bool = True,
    model=None,
    device="cpu",
) -> DiagnosisReport:
    """Run the label-bug checklist on a pipeline; returns a :class:`DiagnosisReport`.

    ``forward(input_ids (N, L), attention_mask (N, L)) -> logits (N, L, V)``;
    ``loss_fn(logits, input_ids, attention_mask) -> scalar`` builds its labels, shifts and
    masks by itself. Real tokens never use ``pad_id`` or ``eos_id``; right-padded rows end with
    ``eos_id`` when given (which may equal ``pad_id``). The model checks run in eval mode (of
    ``model``, of ``forward`` itself if it is a module, or of the module a bound method
    belongs to), each module's mode restored after. Tell the checks what is intended:
    ``label_smoothing`` and ``z_loss`` (coefficient of mean (log Z)^2 over the scored targets)
    change the expected perfect/zero-logit losses; ``aux_loss=True`` (another term) skips them;
    ``pretrained=True`` skips first_loss, which otherwise expects ln V within
    ``first_loss_tol * ln V``; ``left_padding=False`` skips the left-padding rows.
    """
    if not callable(forward) or not callable(loss_fn):
        raise TypeError(
            "forward and loss_fn must be callables: forward(input_ids, attention_mask) "
            "-> logits and loss_fn(logits, input_ids, attention_mask) -> scalar."
        )
    V = require_int_scalar("vocab_size", vocab_size, min=5)
    L = require_int_scalar("seq_len", seq_len, min=4)
    pad_id = require_int_scalar("pad_id", pad_id, min=0, max=V - 1)
    if eos_id is not None:
        eos_id = require_int_scalar("eos_id", eos_id, min=0, max=V - 1)
    seed = require_int_scalar("seed", seed)
    tol = require_real("first_loss_tol", first_loss_tol, min=0)
    smoothing = require_real("label_smoothing", label_smoothing, min=0, max=1)
    z_coef = require_real("z_loss", z_loss, min=0)
    aux_loss, pretrained = require_bool("aux_loss", aux_loss), require_bool("pretrained", pretrained)
    left_padding = require_bool("left_padding", left_padding)
    module = _module_of(forward, model)

    gen = torch.Generator().manual_seed(seed)
    real = torch.tensor([i for i in range(V) if i not in (pad_id, eos_id)])  # ids a real token may take

    def draw(*shape):
        return real[torch.randint(0, len(real), shape, generator=gen)].to(device)

    def call(ids, mask):
        with torch.no_grad():
            logits = forward(ids, mask)
        if tuple(getattr(logits, "shape", ())) != (*ids.shape, V):
            raise ValueError(
                f"forward must return logits (N, L, V) = {(*ids.shape, V)}; got "
                f"{getattr(logits, 'shape', type(logits).__name__)}."
            )
        if not bool(torch.isfinite(logits).all()):
            raise ValueError(
                "forward returned NaN or infinite logits for valid input ids: the "
                "checks need finite logits (check the model's weights and init)."
            )
        return logits

    full = torch.ones(2, L, dtype=torch.long, device=device)
    start = int((real >= 10).nonzero()[0]) if int(real[-1]) >= 10 else 0
    increasing = real[(start + torch.arange(L)[None] + torch.tensor([[0], [3]])) % len(real)].to(device)
    ids = draw(2, L)
    ragged, ragged_mask = (t.to(device) for t in ragged_batch(V, L, pad_id=pad_id, eos_id=eos_id, seed=seed))
    left, left_mask = (t.to(device) for t in ragged_batch(V, L, pad_id=pad_id, seed=seed, left=True))

    results = {
        "finite_loss": C.check_finite(
            loss_fn,
            [
                (
                    "zero logits on ragged rows",
                    torch.zeros(*ragged.shape, V, device=device),
                    ragged,
                    ragged_mask,
                ),
                ("random logits", torch.randn(2, L, V, generator=gen).to(device), ids, full),
                ("perfect logits", C.place(ids, 1, V), ids, full),
            ],
        )
    }

    def guarded(fn, *args, **kw):
        if not results["finite_loss"][0]:
            return None, "skipped: the loss is not finite (see finite_loss)"
        try:
            return fn(*args, **kw)
        except C.NotFinite as err:
            return False, f"{err} on this check's input: the loss is not finite"

    results["alignment"] = guarded(C.check_alignment, loss_fn, increasing, full, V)
    results["perfect_logits"] = guarded(
        C.check_perfect, loss_fn, ids, full, V, smoothing=smoothing, z_loss=z_coef, aux_loss=aux_loss
    )
    results["zero_logits"] = guarded(
        C.check_zero, loss_fn, ragged, ragged_mask, V, z_loss=z_coef, aux_loss=aux_loss
    )
    coverage = guarded(C.check_coverage, loss_fn, ids, full, V, gen)
    results["last_unscored"], results["all_scored"] = (
        coverage if isinstance(coverage[0], tuple) else (coverage, coverage)
    )
    results["equal_weights"] = guarded(
        lambda: C.check_equal_weights(token_weights(loss_fn, ragged, ragged_mask, V), ragged_mask)
    )
    results["padding_unscored"] = guarded(C.check_padding_unscored, loss_fn, ragged, ragged_mask, V, gen)
    results["eos_scored"] = guarded(C.check_eos_scored, loss_fn, ragged, ragged_mask, V, eos_id, gen)
    with _eval_mode(module):
        results["future"] = C.check_future(call, draw(2, L), full, draw, module is not None)
        results["padding_unread"] = C.check_padding_unread(call, left, left_mask, draw, left_padding)
        results["left_padding"] = C.check_left_padding(call, left, left_mask, left_padding)
        first = guarded(C.check_first_loss, call, loss_fn, draw(2, L), full, V, tol, pretrained)
        results["first_loss"] = first[:2]
        value = first[2] if len(first) == 3 else None
    return DiagnosisReport(
        tuple(
            CheckRow(
                n,
                results[n][0] is not False,
                results[n][1],
                results[n][0] is None,
                value if n == "first_loss" else None,
            )
            for n in CHECK_NAMES
        )
    )
