"""The label-bug checklist, run against any model + loss pipeline.

``run_checks(forward, loss_fn, vocab_size=V)`` feeds the pipeline inputs whose right answer is
known (increasing ids, perfect, zero and random logits, ragged right-padded rows ending in EOS,
left-padded rows, changed future tokens) and reads back values and gradients: which positions
move the loss's value, which get a gradient and with what weight, and which target id each
gradient pushes up. Each failing row names the classes of cause that produce it, most likely
first, and how to declare an intended choice (``label_smoothing``, ``z_loss``, ``aux_loss``,
``unscored`` for completion-only masking, ``num_items_ratio`` for a global denominator,
``pretrained``, ``left_padding=False`` for a pipeline that never left-pads, ``model``).

A signature (the set of failing rows) names a *class* of bug, not one bug. Tested signatures
(tests/test_diagnose.py, tests/test_diagnose_pipelines.py):

- finite_loss: a NaN/inf loss (a mean over 0 targets, log of 0); every other loss row is skipped;
- alignment, perfect_logits, last_unscored: the shift is missing;
- alignment, perfect_logits, all_scored: a double shift (EOS is still a target, from two
  positions earlier; eos_scored fails only for a row of 2 tokens);
- alignment, perfect_logits, padding_unscored, eos_scored: labels taken from another row (or
  shifted by another offset);
- perfect_logits, logit_scale: softmax before the loss, or an undeclared label smoothing or
  z-loss (the details tell these apart);
- logit_scale: the logits rescaled inside the loss (a temperature, logits / 2), caught at any
  factor a with |a - 1| above the bound the passing row prints;
- zero_logits, logit_scale: a cross-entropy in low precision (bf16);
- zero_logits, first_loss: a loss in bits, or summed instead of averaged;
- zero_logits: a denominator that counts tokens instead of targets, or a global num_items not
  declared (num_items_ratio=); these two share the signature, the detail names the count;
- all_scored: positions not scored: intended prompt masking not declared (unscored=), real
  tokens masked by id, or a declared prompt mask that is off by one;
- all_scored, equal_weights: positions whose logits are detached (value moves, zero gradient);
- equal_weights: per-row or per-micro-batch means averaged, or per-class weights;
- padding_unscored: padding scored (PAD -> PAD), or the off-by-one of masking the input side
  after the shift (the last real token scored against the PAD after it);
- eos_scored: EOS masked by its id (every special token masked, or PAD = EOS with the pad id
  ignored); the two share the signature;
- finite_logits: NaN/inf logits at real tokens (NaN only where the mask excludes, as with
  nn.TransformerEncoderLayer's eval fast path under left padding, is ignored and said so);
- future: the model sees the future (no causal mask, a mask off by one);
- padding_unread, left_padding: the attention mask ignored or inverted; correct when the
  pipeline never left-pads (a GRU, a model called without the mask): pass left_padding=False;
- left_padding: left padding without position reset;
- first_loss: initial logits too large (far above ln V), or a leak / a trained start (below).

Blind spots: packed documents under a plain causal mask (the probes have no document
boundaries), what an aux_loss=True term does, and with PAD = EOS the last real token scored
against the PAD after it (it looks like EOS -> EOS). The checks live in
:mod:`lmcore.diagnose_checks` (with :mod:`lmcore.diagnose_mask_checks` and
:mod:`lmcore.diagnose_model_checks`), the probe inputs and readings in
:mod:`lmcore.diagnose_probes`, the report in :mod:`lmcore.diagnose_report`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import diagnose_checks as C
from ._validate import require_bool, require_int_scalar, require_real
from .diagnose_model_checks import NotFiniteLogits, eval_mode, module_of, real_logits
from .diagnose_probes import expected_scored, gradient_reading, moves_value, ragged_batch, token_weights
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
    unscored: Callable | None = None,
    num_items_ratio: float = 1.0,
    model=None,
    device="cpu",
) -> DiagnosisReport:
    """Run the label-bug checklist on a pipeline; returns a :class:`DiagnosisReport`.

    ``forward(input_ids (N, L), attention_mask (N, L)) -> logits (N, L, V)``;
    ``loss_fn(logits, input_ids, attention_mask) -> scalar`` builds its labels, shifts and
    masks by itself. Real tokens never use ``pad_id`` or ``eos_id``; right-padded rows end with
    ``eos_id`` when given (which may equal ``pad_id``). The model checks run in eval mode (of
    ``model``, of ``forward`` itself if it is a module, or of the module a bound method
    belongs to), each module's mode restored after, and read only the positions the attention
    mask gives a real token (NaN there fails finite_logits; NaN elsewhere is ignored and said so).

    Declare what a correct pipeline does on purpose; each declaration changes an expectation:
    ``label_smoothing`` and ``z_loss`` (coefficient of mean (log Z)^2 over the scored targets)
    the perfect-, zero- and random-logit losses; ``unscored(input_ids, attention_mask) -> bool
    (N, L)``, True at tokens that are not targets on purpose (a prompt under completion-only
    training), the set of positions expected scored; ``num_items_ratio`` (the loss is the summed
    NLL / num_items with num_items = num_items_ratio x the batch's own number of targets, as
    under gradient accumulation with a global count) the expected losses, divided by it.
    ``aux_loss=True`` (another term of unknown size) skips the loss-value rows;
    ``pretrained=True`` skips first_loss, which otherwise expects ln V within
    ``first_loss_tol * ln V``; ``left_padding=False`` (the pipeline never left-pads) skips the
    left-padding rows.
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
    ratio = require_real("num_items_ratio", num_items_ratio, min=0, min_inclusive=False)
    aux_loss, pretrained = require_bool("aux_loss", aux_loss), require_bool("pretrained", pretrained)
    left_padding = require_bool("left_padding", left_padding)
    if unscored is not None and not callable(unscored):
        raise TypeError(
            "unscored must be None or a callable (input_ids, attention_mask) -> bool (N, L), True "
            f"at tokens that are not targets on purpose; got {type(unscored).__name__}."
        )
    module = module_of(forward, model)

    gen = torch.Generator().manual_seed(seed)
    real = torch.tensor([i for i in range(V) if i not in (pad_id, eos_id)])  # ids a real token may take

    model_gen = torch.Generator().manual_seed(seed + 1)  # the model probes' own draws

    def draw(*shape, gen=gen):
        return real[torch.randint(0, len(real), shape, generator=gen)].to(device)

    def model_draw(*shape):
        return draw(*shape, gen=model_gen)

    def raw(ids, mask):
        with torch.no_grad():
            logits = forward(ids, mask)
        if tuple(getattr(logits, "shape", ())) != (*ids.shape, V):
            raise ValueError(
                f"forward must return logits (N, L, V) = {(*ids.shape, V)}; got "
                f"{getattr(logits, 'shape', type(logits).__name__)}."
            )
        return logits

    def call(ids, mask):
        return real_logits(raw(ids, mask), mask)[0]

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

    values = dict(smoothing=smoothing, z_loss=z_coef, aux_loss=aux_loss)
    results["alignment"] = guarded(C.check_alignment, loss_fn, increasing, full, V)
    results["perfect_logits"] = guarded(C.check_perfect, loss_fn, ids, full, V, **values, ratio=ratio)
    want = expected_scored(ragged, ragged_mask, unscored)
    results["zero_logits"] = guarded(
        C.check_zero, loss_fn, ragged, ragged_mask, V, want, z_loss=z_coef, aux_loss=aux_loss, ratio=ratio
    )
    finite, moved_err, moved = results["finite_loss"][0], None, None
    weight, targets = gradient_reading(loss_fn, ragged, ragged_mask, V, smoothing) if finite else (None, None)
    try:
        moved = moves_value(loss_fn, ragged, ragged_mask, V, gen) if finite else None
    except C.NotFinite as err:
        moved_err = err

    def with_moved(fn, *args, **kw):  # rows that read which ragged positions move the value
        if moved_err is not None:
            return False, f"{moved_err} on this check's input: the loss is not finite"
        return guarded(fn, *args, **kw)

    results["logit_scale"] = with_moved(
        C.check_logit_scale, loss_fn, ragged, ragged_mask, V, weight, targets, moved, gen, **values
    )
    coverage = guarded(
        lambda: C.check_coverage(
            moves_value(loss_fn, ids, full, V, gen),
            gradient_reading(loss_fn, ids, full, V, smoothing)[0],
            expected_scored(ids, full, unscored),
        )
    )
    results["last_unscored"], results["all_scored"] = (
        coverage if isinstance(coverage[0], tuple) else (coverage, coverage)
    )
    results["equal_weights"] = with_moved(lambda: C.check_equal_weights(weight, moved, want))
    results["padding_unscored"] = with_moved(
        lambda: C.check_padding_unscored(moved, weight, targets, ragged, ragged_mask, pad_id)
    )
    results["eos_scored"] = guarded(C.check_eos_scored, targets, ragged_mask, ragged, eos_id)
    with eval_mode(module):
        model_probes = [("random ids", model_draw(2, L), full), ("left-padded rows", left, left_mask)]
        results["finite_logits"] = C.check_finite_logits(raw, model_probes)
        ok = results["finite_logits"][0]

        def model_row(fn, *args):
            if not ok:
                return None, "skipped: the logits are not finite at real tokens (see finite_logits)"
            try:
                return fn(*args)
            except NotFiniteLogits as err:
                return False, f"{err} on this check's input (see finite_logits)"

        results["future"] = model_row(
            C.check_future, call, model_draw(2, L), full, model_draw, module is not None
        )
        results["padding_unread"] = model_row(
            C.check_padding_unread, call, left, left_mask, model_draw, left_padding
        )
        results["left_padding"] = model_row(C.check_left_padding, call, left, left_mask, left_padding)
        if ok:
            first = model_row(
                lambda: guarded(
                    C.check_first_loss, call, loss_fn, model_draw(2, L), full, V, tol, pretrained, ratio
                )
            )
        else:
            first = model_row(None)
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
