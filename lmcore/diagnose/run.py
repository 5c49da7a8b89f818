"""``run_checks``: the label-bug checklist of :mod:`lmcore.diagnose`, run against a pipeline.

It builds the probe inputs (:mod:`lmcore.diagnose.probes`), runs the loss rows with hand-made
logits and the model rows through ``forward`` in eval mode, and collects them in a
:class:`~lmcore.diagnose.report.DiagnosisReport`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._validate import require_bool, require_int_scalar, require_real
from .loss_checks import check_alignment, check_finite, check_logit_scale, check_perfect, check_zero
from .mask_checks import check_coverage, check_eos_scored, check_equal_weights, check_padding_unscored
from .model_checks import (
    NotFiniteLogits,
    check_finite_logits,
    check_first_loss,
    check_future,
    check_left_padding,
    check_padding_unread,
    eval_mode,
    module_of,
    real_logits,
)
from .probes import NotFinite, expected_scored, gradient_reading, moves_value, place, ragged_batch
from .report import CHECK_NAMES, CheckRow, DiagnosisReport

__all__ = ["run_checks"]


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

    def draw(*shape, gen=gen):
        return real[torch.randint(0, len(real), shape, generator=gen)].to(device)

    full = torch.ones(2, L, dtype=torch.long, device=device)
    start = int((real >= 10).nonzero()[0]) if int(real[-1]) >= 10 else 0
    probes = dict(
        full=full,
        increasing=real[(start + torch.arange(L)[None] + torch.tensor([[0], [3]])) % len(real)].to(device),
        ids=draw(2, L),
        ragged=tuple(t.to(device) for t in ragged_batch(V, L, pad_id=pad_id, eos_id=eos_id, seed=seed)),
        left=tuple(t.to(device) for t in ragged_batch(V, L, pad_id=pad_id, seed=seed, left=True)),
    )
    declared = dict(smoothing=smoothing, z_loss=z_coef, aux_loss=aux_loss, ratio=ratio, unscored=unscored)
    results = _loss_rows(loss_fn, V, probes, gen, declared, pad_id, eos_id)

    def raw(ids, mask):
        with torch.no_grad():
            logits = forward(ids, mask)
        if tuple(getattr(logits, "shape", ())) != (*ids.shape, V):
            raise ValueError(
                f"forward must return logits (N, L, V) = {(*ids.shape, V)}; got "
                f"{getattr(logits, 'shape', type(logits).__name__)}."
            )
        return logits

    model_gen = torch.Generator().manual_seed(seed + 1)  # the model probes' own draws
    with eval_mode(module):
        value = _model_rows(
            results,
            raw,
            loss_fn,
            V,
            probes,
            lambda *shape: draw(*shape, gen=model_gen),
            module is not None,
            dict(tol=tol, pretrained=pretrained, left_padding=left_padding, ratio=ratio),
        )
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


def _guard(results):
    """Run a loss check, skipped when the loss is not finite, failed when its input makes it so."""

    def guarded(fn, *args, **kw):
        if not results["finite_loss"][0]:
            return None, "skipped: the loss is not finite (see finite_loss)"
        try:
            return fn(*args, **kw)
        except NotFinite as err:
            return False, f"{err} on this check's input: the loss is not finite"

    return guarded


def _loss_rows(loss_fn, V, probes, gen, declared, pad_id, eos_id) -> dict:
    """The rows that call loss_fn alone, with hand-made logits: {name: (passed, detail)}."""
    full, ids, increasing = probes["full"], probes["ids"], probes["increasing"]
    ragged, ragged_mask = probes["ragged"]
    smoothing, ratio, unscored = declared["smoothing"], declared["ratio"], declared["unscored"]
    values = dict(smoothing=smoothing, z_loss=declared["z_loss"], aux_loss=declared["aux_loss"])
    results = {
        "finite_loss": check_finite(
            loss_fn,
            [
                (
                    "zero logits on ragged rows",
                    torch.zeros(*ragged.shape, V, device=ids.device),
                    ragged,
                    ragged_mask,
                ),
                ("random logits", torch.randn(2, full.shape[1], V, generator=gen).to(ids.device), ids, full),
                ("perfect logits", place(ids, 1, V), ids, full),
            ],
        )
    }
    guarded = _guard(results)
    results["alignment"] = guarded(check_alignment, loss_fn, increasing, full, V)
    results["perfect_logits"] = guarded(check_perfect, loss_fn, ids, full, V, **values, ratio=ratio)
    want = expected_scored(ragged, ragged_mask, unscored)
    results["zero_logits"] = guarded(
        check_zero,
        loss_fn,
        ragged,
        ragged_mask,
        V,
        want,
        z_loss=declared["z_loss"],
        aux_loss=declared["aux_loss"],
        ratio=ratio,
    )
    finite, moved_err, moved = results["finite_loss"][0], None, None
    weight, targets = gradient_reading(loss_fn, ragged, ragged_mask, V, smoothing) if finite else (None, None)
    try:
        moved = moves_value(loss_fn, ragged, ragged_mask, V, gen) if finite else None
    except NotFinite as err:
        moved_err = err

    def with_moved(fn, *args, **kw):  # rows that read which ragged positions move the value
        if moved_err is not None:
            return False, f"{moved_err} on this check's input: the loss is not finite"
        return guarded(fn, *args, **kw)

    results["logit_scale"] = with_moved(
        check_logit_scale, loss_fn, ragged, ragged_mask, V, weight, targets, moved, gen, **values
    )
    coverage = guarded(
        lambda: check_coverage(
            moves_value(loss_fn, ids, full, V, gen),
            gradient_reading(loss_fn, ids, full, V, smoothing)[0],
            expected_scored(ids, full, unscored),
        )
    )
    results["last_unscored"], results["all_scored"] = (
        coverage if isinstance(coverage[0], tuple) else (coverage, coverage)
    )
    results["equal_weights"] = with_moved(lambda: check_equal_weights(weight, moved, want))
    results["padding_unscored"] = with_moved(
        lambda: check_padding_unscored(moved, weight, targets, ragged, ragged_mask, pad_id)
    )
    results["eos_scored"] = guarded(check_eos_scored, targets, ragged_mask, ragged, eos_id)
    return results


def _model_rows(results, raw, loss_fn, V, probes, draw, switched, settings):
    """Add the rows that call forward (in eval mode already) to ``results``; returns the first
    loss (None when that row did not run)."""
    full, (left, left_mask) = probes["full"], probes["left"]
    L = full.shape[1]
    results["finite_logits"] = check_finite_logits(
        raw, [("random ids", draw(2, L), full), ("left-padded rows", left, left_mask)]
    )
    if not results["finite_logits"][0]:
        skip = (None, "skipped: the logits are not finite at real tokens (see finite_logits)")
        for name in ("future", "padding_unread", "left_padding", "first_loss"):
            results[name] = skip
        return None

    def call(ids, mask):
        return real_logits(raw(ids, mask), mask)[0]

    def model_row(fn, *args):
        try:
            return fn(*args)
        except NotFiniteLogits as err:
            return False, f"{err} on this check's input (see finite_logits)"

    on = settings["left_padding"]
    results["future"] = model_row(check_future, call, draw(2, L), full, draw, switched)
    results["padding_unread"] = model_row(check_padding_unread, call, left, left_mask, draw, on)
    results["left_padding"] = model_row(check_left_padding, call, left, left_mask, on)
    first = model_row(
        _guard(results),
        check_first_loss,
        call,
        loss_fn,
        draw(2, L),
        full,
        V,
        settings["tol"],
        settings["pretrained"],
        settings["ratio"],
    )
    results["first_loss"] = first[:2]
    return first[2] if len(first) == 3 else None
