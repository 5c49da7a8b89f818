"""``run_checks``: the label-bug checklist of :mod:`lmcore.diagnose`, run against a pipeline.

It builds the probe inputs (:mod:`lmcore.diagnose.probes`), runs the loss rows with hand-made
logits and the model rows through ``forward`` in eval mode, and collects them in a
:class:`~lmcore.diagnose.report.DiagnosisReport`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

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
from .packing import PACKED_NAMES, Packing, check_packed_rows
from .probes import NotFinite, expected_scored, gradient_reading, moves_value, place, ragged_batch
from .report import CHECK_NAMES, CheckRow, DiagnosisReport
from .templates import validate_template, with_template

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
    response_template=None,
    packing: Packing | None = None,
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
    left-padding rows and every probe of left-padded rows (finite_logits reads right-padded and
    full rows only).

    ``response_template`` (a sequence of real token ids, e.g. the tokenised "### Answer:" or an
    assistant header): every loss probe row, and the first-loss row, carries it at positions
    1 .. k, so a prompt/response pipeline has a response to score (the mainstream SFT convention
    masks a row with no template entirely). Probe ids never use the template's ids elsewhere.
    Without it, when ``unscored`` masks every target of a probe row, alignment is skipped.

    ``packing`` (a :class:`~lmcore.diagnose.packing.Packing`) declares a pipeline that packs
    documents into rows: four more rows (packed_isolation, packed_with_mask, packed_positions,
    packed_boundary) call ``forward(input_ids, attention_mask, doc_ids)`` and ``loss_fn(logits,
    input_ids, attention_mask, doc_ids)`` on rows of several documents (see
    :mod:`lmcore.diagnose.packing` for the protocol and the boundary policies).
    """
    s = _settings(**locals())  # every argument, by name
    module = module_of(forward, model)
    real = _real_ids(s)
    gen = torch.Generator().manual_seed(s.seed)
    probes = _probes(s, real, _drawer(real, gen, device), device)
    results = _loss_rows(loss_fn, probes, gen, s)
    model_draw = _drawer(real, torch.Generator().manual_seed(s.seed + 1), device)  # the model rows' own draws
    with eval_mode(module):
        first = _model_rows(results, _checked_forward(forward, s.V), loss_fn, probes, model_draw, module, s)
        if s.packing is not None:
            results.update(_packed_rows(forward, loss_fn, s, model_draw, gen, device))
    return _report(results, first)


def _packed_rows(forward, loss_fn, s: _Settings, draw, gen, device) -> dict:
    """The packed rows, each failed (not raised) by a non-finite loss or logits."""
    raw = _checked_forward(forward, s.V)
    try:
        return check_packed_rows(
            lambda ids, mask, doc: raw(ids, mask, doc), loss_fn, s.packing, s.L, s.V, draw, gen, device
        )
    except (NotFinite, NotFiniteLogits) as err:
        return {n: (False, f"{err} on the packed rows: not finite") for n in PACKED_NAMES}


@dataclass(frozen=True)
class _Settings:
    """run_checks' arguments, validated."""

    V: int
    L: int
    pad_id: int
    eos_id: int | None
    seed: int
    tol: float
    smoothing: float
    z_loss: float
    ratio: float
    aux_loss: bool
    pretrained: bool
    left_padding: bool
    unscored: Callable | None
    template: tuple
    packing: Packing | None

    def loss_terms(self) -> dict:
        """The declared terms the loss-value checks expect (label smoothing, z-loss, another term)."""
        return dict(smoothing=self.smoothing, z_loss=self.z_loss, aux_loss=self.aux_loss)


def _settings(forward, loss_fn, **kw) -> _Settings:
    """Validate run_checks' arguments (all of them, by name; ``model`` and ``device`` are read
    elsewhere) in the order it lists them: a TypeError/ValueError names the first bad one."""
    if not callable(forward) or not callable(loss_fn):
        raise TypeError(
            "forward and loss_fn must be callables: forward(input_ids, attention_mask) "
            "-> logits and loss_fn(logits, input_ids, attention_mask) -> scalar."
        )
    V = require_int_scalar("vocab_size", kw["vocab_size"], min=5)
    L = require_int_scalar("seq_len", kw["seq_len"], min=4)
    pad_id = require_int_scalar("pad_id", kw["pad_id"], min=0, max=V - 1)
    eos_id = kw["eos_id"]
    if eos_id is not None:
        eos_id = require_int_scalar("eos_id", eos_id, min=0, max=V - 1)
    seed = require_int_scalar("seed", kw["seed"])
    tol = require_real("first_loss_tol", kw["first_loss_tol"], min=0)
    smoothing = require_real("label_smoothing", kw["label_smoothing"], min=0, max=1)
    z_coef = require_real("z_loss", kw["z_loss"], min=0)
    ratio = require_real("num_items_ratio", kw["num_items_ratio"], min=0, min_inclusive=False)
    flags = {name: require_bool(name, kw[name]) for name in ("aux_loss", "pretrained", "left_padding")}
    unscored = kw["unscored"]
    if unscored is not None and not callable(unscored):
        raise TypeError(
            "unscored must be None or a callable (input_ids, attention_mask) -> bool (N, L), True "
            f"at tokens that are not targets on purpose; got {type(unscored).__name__}."
        )
    template = validate_template(kw["response_template"], V, L, pad_id, eos_id)
    packing = kw["packing"]
    if packing is not None and not isinstance(packing, Packing):
        raise TypeError(
            "packing must be None or lmcore.diagnose.Packing(boundary=..., bos_id=..., positions=...); "
            f"got {type(packing).__name__}."
        )
    if packing is not None and packing.bos_id is not None:
        bos = require_int_scalar("packing.bos_id", packing.bos_id, min=0, max=V - 1)
        if bos in (pad_id, eos_id, *template):
            raise ValueError(f"packing.bos_id must differ from pad_id, eos_id and the template; got {bos}.")
    return _Settings(
        V,
        L,
        pad_id,
        eos_id,
        seed,
        tol,
        smoothing,
        z_coef,
        ratio,
        **flags,
        unscored=unscored,
        template=template,
        packing=packing,
    )


def _real_ids(s: _Settings) -> torch.Tensor:
    """The ids a real token may take: every id but pad_id, eos_id and the response template's."""
    bos = (s.packing.bos_id,) if s.packing is not None else ()
    return torch.tensor([i for i in range(s.V) if i not in (s.pad_id, s.eos_id, *s.template, *bos)])


def _drawer(real: torch.Tensor, gen: torch.Generator, device) -> Callable:
    """``draw(*shape)``: ids drawn uniformly from ``real`` with ``gen``, on ``device``."""

    def draw(*shape):
        return real[torch.randint(0, len(real), shape, generator=gen)].to(device)

    return draw


def _probes(s: _Settings, real: torch.Tensor, draw: Callable, device) -> dict:
    """The inputs every row reads: ``full`` (the all-ones mask of 2 rows), ``increasing`` (two rows
    of consecutive real ids, 3 apart), ``ids`` (random real ids), ``ragged`` and ``left``
    (right- and left-padded batches, (input_ids, attention_mask))."""
    L = s.L
    start = int((real >= 10).nonzero()[0]) if int(real[-1]) >= 10 else 0
    ragged, ragged_mask = ragged_batch(s.V, L, pad_id=s.pad_id, eos_id=s.eos_id, seed=s.seed)
    special = (ragged == s.pad_id) | (ragged == s.eos_id) | (ragged_mask == 0)
    ragged = torch.where(special, ragged, with_template(ragged, s.template, real))
    return dict(
        full=torch.ones(2, L, dtype=torch.long, device=device),
        increasing=with_template(
            real[(start + torch.arange(L)[None] + torch.tensor([[0], [3]])) % len(real)], s.template, real
        ).to(device),
        ids=with_template(draw(2, L), s.template, real),
        ragged=(ragged.to(device), ragged_mask.to(device)),
        left=tuple(t.to(device) for t in ragged_batch(s.V, L, pad_id=s.pad_id, seed=s.seed, left=True)),
        real=real,
    )


def _checked_forward(forward: Callable, V: int) -> Callable:
    """``forward`` without gradients, its output checked to be logits (N, L, V)."""

    def raw(ids, mask, *doc):
        with torch.no_grad():
            logits = forward(ids, mask, *doc)
        if tuple(getattr(logits, "shape", ())) != (*ids.shape, V):
            raise ValueError(
                f"forward must return logits (N, L, V) = {(*ids.shape, V)}; got "
                f"{getattr(logits, 'shape', type(logits).__name__)}."
            )
        return logits

    return raw


def _report(results: dict, first_loss: float | None) -> DiagnosisReport:
    """The rows in table order; a row whose ``passed`` is None was skipped (and counts as passed)."""
    return DiagnosisReport(
        tuple(
            CheckRow(
                n,
                results[n][0] is not False,
                results[n][1],
                results[n][0] is None,
                first_loss if n == "first_loss" else None,
            )
            for n in (*CHECK_NAMES, *PACKED_NAMES)
            if n in results
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


UNREADABLE = (
    None,
    "skipped: the declared unscored= masks every target of this row's probe (a prompt/response "
    "pipeline whose probe rows hold no response); pass response_template= (its token ids) so the "
    "probe rows carry one",
)


def _loss_rows(loss_fn, probes, gen, s: _Settings) -> dict:
    """The rows that call loss_fn alone, with hand-made logits: {name: (passed, detail)}. They run
    in this order, which is the order they draw from ``gen``."""
    full, ids, (ragged, ragged_mask) = probes["full"], probes["ids"], probes["ragged"]
    results = {"finite_loss": _finite_loss_row(loss_fn, probes, gen, s.V)}
    guarded = _guard(results)
    readable = lambda ids, mask: bool(expected_scored(ids, mask, s.unscored).any())  # noqa: E731
    results["alignment"] = (
        guarded(check_alignment, loss_fn, probes["increasing"], full, s.V)
        if readable(probes["increasing"], full)
        else UNREADABLE
    )
    full_ok, ragged_ok = readable(ids, full), readable(ragged, ragged_mask)
    if not results["finite_loss"][0] and not (full_ok and ragged_ok):
        results["finite_loss"] = (False, results["finite_loss"][1] + "; " + UNREADABLE[1][9:])
    results["perfect_logits"] = (
        guarded(check_perfect, loss_fn, ids, full, s.V, **s.loss_terms(), ratio=s.ratio)
        if full_ok
        else UNREADABLE
    )
    want = expected_scored(ragged, ragged_mask, s.unscored)
    zero_terms = dict(z_loss=s.z_loss, aux_loss=s.aux_loss, ratio=s.ratio)
    results["zero_logits"] = (
        guarded(check_zero, loss_fn, ragged, ragged_mask, s.V, want, **zero_terms)
        if ragged_ok
        else UNREADABLE
    )
    read = _read_ragged(loss_fn, probes, gen, s, finite=bool(results["finite_loss"][0]))
    weight, targets, moved, with_moved = read.weight, read.targets, read.moved, _with_moved(guarded, read)
    results["logit_scale"] = (
        with_moved(
            check_logit_scale,
            loss_fn,
            ragged,
            ragged_mask,
            s.V,
            weight,
            targets,
            moved,
            gen,
            **s.loss_terms(),
        )
        if ragged_ok
        else UNREADABLE
    )
    results["last_unscored"], results["all_scored"] = _coverage_rows(guarded, loss_fn, probes, gen, s)
    results["equal_weights"] = (
        with_moved(lambda: check_equal_weights(weight, moved, want)) if ragged_ok else UNREADABLE
    )
    results["padding_unscored"] = with_moved(
        lambda: check_padding_unscored(moved, weight, targets, ragged, ragged_mask, s.pad_id)
    )
    results["eos_scored"] = guarded(check_eos_scored, targets, ragged_mask, ragged, s.eos_id, want)
    return results


def _finite_loss_row(loss_fn, probes, gen, V):
    """finite_loss: the loss of zero logits on the ragged rows, of random and of perfect logits."""
    full, ids, (ragged, ragged_mask) = probes["full"], probes["ids"], probes["ragged"]
    return check_finite(
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


class _Reading(NamedTuple):
    """What the gradient and the value of loss_fn show on the ragged rows (None where the loss is
    not finite; ``moved_err`` the NotFinite that reading the value met, if any)."""

    weight: torch.Tensor | None
    targets: torch.Tensor | None
    moved: torch.Tensor | None
    moved_err: NotFinite | None


def _read_ragged(loss_fn, probes, gen, s: _Settings, *, finite: bool) -> _Reading:
    """The weight and target of each ragged position (from the gradient) and which positions move
    the value; nothing is read when the loss is not finite."""
    ragged, ragged_mask = probes["ragged"]
    if not finite:
        return _Reading(None, None, None, None)
    weight, targets = gradient_reading(loss_fn, ragged, ragged_mask, s.V, s.smoothing)
    try:
        return _Reading(weight, targets, moves_value(loss_fn, ragged, ragged_mask, s.V, gen), None)
    except NotFinite as err:
        return _Reading(weight, targets, None, err)


def _with_moved(guarded, read: _Reading) -> Callable:
    """Run a row that reads which ragged positions move the value: failed when reading them met a
    non-finite loss, else as ``guarded``."""

    def with_moved(fn, *args, **kw):
        if read.moved_err is not None:
            return False, f"{read.moved_err} on this check's input: the loss is not finite"
        return guarded(fn, *args, **kw)

    return with_moved


def _coverage_rows(guarded, loss_fn, probes, gen, s: _Settings) -> tuple:
    """(last_unscored, all_scored), read on the full rows; both the same row when skipped or failed
    by a non-finite loss."""
    ids, full = probes["ids"], probes["full"]
    coverage = guarded(
        lambda: check_coverage(
            moves_value(loss_fn, ids, full, s.V, gen),
            gradient_reading(loss_fn, ids, full, s.V, s.smoothing)[0],
            expected_scored(ids, full, s.unscored),
            declared=s.unscored is not None,
        )
    )
    return coverage if isinstance(coverage[0], tuple) else (coverage, coverage)


def _model_rows(results, raw, loss_fn, probes, draw, module, s: _Settings):
    """Add the rows that call forward (in eval mode already) to ``results``; returns the first
    loss (None when that row did not run). Every row is skipped when the logits are not finite."""
    full, (left, left_mask) = probes["full"], probes["left"]
    L = full.shape[1]
    ragged, ragged_mask = probes["ragged"]
    results["finite_logits"] = check_finite_logits(
        raw,
        [("random ids", draw(2, L), full), ("right-padded rows", ragged, ragged_mask)]
        + [("left-padded rows", left, left_mask)] * s.left_padding,
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

    on = s.left_padding
    results["future"] = model_row(check_future, call, draw(2, L), full, draw, module is not None)
    results["padding_unread"] = model_row(check_padding_unread, call, left, left_mask, draw, on)
    results["left_padding"] = model_row(check_left_padding, call, left, left_mask, on)
    first_ids = with_template(draw(2, L), s.template, probes["real"])
    first = (
        model_row(
            _guard(results),
            check_first_loss,
            call,
            loss_fn,
            first_ids,
            full,
            s.V,
            s.tol,
            s.pretrained,
            s.ratio,
        )
        if bool(expected_scored(first_ids, full, s.unscored).any())
        else UNREADABLE
    )
    results["first_loss"] = first[:2]
    return first[2] if len(first) == 3 else None
