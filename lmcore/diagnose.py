"""The label-bug checklist, run against any model + loss pipeline.

``run_checks(forward, loss_fn, vocab_size=V)`` feeds the pipeline inputs whose right answer is
known (increasing ids, perfect and zero logits, ragged right-padded rows ending in EOS,
left-padded rows, changed future tokens) and reports which expectation broke; each failing row
names its likely cause. Signatures: a NaN/inf loss -> finite_loss; missing shift -> alignment,
perfect_logits, last_unscored; double shift -> alignment, perfect_logits, all_scored (and
eos_scored); softmax before the loss -> perfect_logits; padding scored -> padding_unscored;
EOS ignored by id -> eos_scored; per-row or per-batch means -> equal_weights; a model that sees
the future -> future; a model that ignores the attention mask -> padding_unread, left_padding;
left padding without position reset -> left_padding. The checks live in
:mod:`lmcore.diagnose_checks` (with :mod:`lmcore.diagnose_mask_checks` and
:mod:`lmcore.diagnose_model_checks`), the probe inputs and readings in
:mod:`lmcore.diagnose_probes`, the report in :mod:`lmcore.diagnose_report`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import diagnose_checks as C
from ._validate import require_bool, require_int_scalar, require_real
from .diagnose_model_checks import eval_mode, module_of
from .diagnose_probes import ragged_batch, token_weights
from .diagnose_report import CHECK_NAMES, CheckRow, DiagnosisReport

__all__ = ["CHECK_NAMES", "CheckRow", "DiagnosisReport", "run_checks", "token_weights", "ragged_batch"]


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
    module = module_of(forward, model)

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
    with eval_mode(module):
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
