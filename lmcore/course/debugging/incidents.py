"""Notebook 07's bugs that shipped: six label, normalisation and packing bugs released in widely
used libraries and later fixed, each reproduced in a few lines on 07's toy task, trained (its
reported loss falls like a correct one's) and given to :func:`lmcore.diagnose.run_checks`, which
must fail the rows that name its class. Every pipeline here is called as ``forward(input_ids,
attention_mask, doc_ids=None)`` and ``loss_fn(logits, input_ids, attention_mask, doc_ids=None)``
(the packed probes pass ``doc_ids``, the document index of each token; the others leave it out).
The citations are the public issue and pull-request threads; the reproductions are ours.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..._validate import require_real
from ...diagnose import Packing, run_checks
from ...loss import causal_lm_loss
from ...shift import (
    IGNORE_INDEX,
    _restart_positions,
    labels_from_attention_mask,
    mask_cross_document_targets,
    num_valid_targets,
)
from ..toys import EOS, PAD, cpu_threads, fit, forward_with_mask
from .data import L, V, training_batch
from .lesson import pipeline_gpt
from .losses import loss_batch_means, loss_double_shift  # 07's own: the same bugs, section 4

__all__ = [
    "Incident",
    "INCIDENTS",
    "CONTROLS",
    "doc_ids_from_eos",
    "show_code",
    "train_incident",
    "diagnose_incident",
    "incident_rows",
    "global_num_items_failed",
]

STEPS = 40  # enough for every reported loss to fall by more than 0.25


@dataclass(frozen=True)
class Incident:
    """One bug that shipped: its class, where it was reported and fixed, what it did, the rows of
    ``run_checks`` that name its class, and the pipeline that reproduces it."""

    key: str
    cls: str
    cited: str  # "owner/repo issue #N, fixed by PR #M", as in the public record
    what: str
    rows: tuple
    loss: Callable  # loss_fn(logits, input_ids, attention_mask[, doc_ids])
    declared: tuple = ()  # (name, value) pairs: what the pipeline does on purpose, for run_checks
    call: str = "padded"  # forward: "padded", "packed", "packed_no_block", "packed_mask_drops_block"
    batch: str = "padded"  # training batches: "padded" or "packed"

    @property
    def packing(self) -> Packing | None:
        return Packing() if self.batch == "packed" else None


# --- the losses: the correct one, then each bug in its few lines ----------------------------


def doc_ids_from_eos(ids):
    """The document index of each token of a packed row: documents end at EOS."""
    ends = (ids == EOS).long()
    return ends.cumsum(-1) - ends


def loss_correct(logits, ids, mask, doc_ids=None):
    labels = labels_from_attention_mask(ids, mask)
    if doc_ids is not None:  # a packed row: the first token of a document is not a target
        labels = mask_cross_document_targets(labels, doc_ids)
    return causal_lm_loss(logits, labels)


def loss_count_plus_one(logits, ids, mask):
    labels = labels_from_attention_mask(ids, mask)
    nll = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), reduction="sum")
    num_items = (labels != IGNORE_INDEX).sum()  # counted before the shift: one more per row
    return nll / num_items


def loss_smoothing_over_padding(logits, ids, mask, eps=0.1):
    labels = labels_from_attention_mask(ids, mask)[:, 1:].flatten()
    logp = logits[:, :-1].flatten(0, 1).log_softmax(-1)
    valid = labels != IGNORE_INDEX
    nll = -logp[valid].gather(1, labels[valid, None]).mean()
    smooth = -logp.mean(-1).mean()  # the uniform term averaged over every position, padding too
    return (1 - eps) * nll + eps * smooth


# --- the forwards: how the model sees a packed row ------------------------------------------


def _forward(model, call):
    def forward(ids, mask=None, doc_ids=None):
        if call == "padded" or doc_ids is None:
            return forward_with_mask(model, ids, torch.ones_like(ids) if mask is None else mask)
        positions = _restart_positions(doc_ids)  # pack_documents' own
        if call == "packed_no_block":  # positions reset per document, attention still crosses
            return model(ids, position_ids=positions)
        if call == "packed_mask_drops_block" and mask is not None:  # a 2-D mask replaces the block mask
            return model(ids, document_ids=torch.where(mask == 1, 0, -1), position_ids=positions)
        return model(ids, document_ids=doc_ids, position_ids=positions)

    return forward


INCIDENTS = {
    i.key: i
    for i in [
        Incident(
            "double_shift",
            "a double shift",
            "huggingface/transformers PR #46784 (Moonshine; the same in Florence-2, PR #46898, and Git, PR #47395)",
            "the model class shifted labels that its loss function shifted again",
            ("alignment", "perfect_logits", "all_scored"),
            loss_double_shift,
        ),
        Incident(
            "count_plus_one",
            "a token count one too high per row",
            "huggingface/transformers PR #46204 (num_items_in_batch)",
            "the loss was divided by the labels counted before the shift: one target too many per row",
            ("zero_logits",),
            loss_count_plus_one,
        ),
        Incident(
            "smoothing_over_padding",
            "label smoothing normalised by the wrong count",
            "pytorch/pytorch issue #73205 (label_smoothing with ignore_index); again in transformers, issue #46731, fixed by PR #47261",
            "the smoothing term was averaged over every position, ignored ones included",
            ("padding_unscored",),
            loss_smoothing_over_padding,
            declared=(("label_smoothing", 0.1),),  # the smoothing itself is intended
        ),
        Incident(
            "sequence_means",
            "per-sequence (per-micro-batch) means averaged",
            "huggingface/transformers issue #24725, fixed by PRs #34191, #34198 and #34283 (gradient accumulation)",
            "each micro-batch's mean loss weighed the same, however many targets it held",
            ("equal_weights",),
            loss_batch_means,
        ),
        Incident(
            "mask_drops_block",
            "a packed mask dropped beside an all-ones mask",
            "huggingface/trl PR #3673 (FlashAttention-2 and position_ids); AI-Hypercomputer/maxtext issue #878, fixed by PR #913",
            "passing an all-ones 2-D attention mask switched the document mask off",
            ("packed_with_mask",),
            loss_correct,
            call="packed_mask_drops_block",
            batch="packed",
        ),
        Incident(
            "positions_only",
            "position ids reset, attention still across documents",
            "axolotl-ai-cloud/axolotl PR #3796 (SDPA/eager sample packing); NVIDIA/Megatron-LM issue #415",
            "positions restarted per document but every token still attended to earlier documents",
            ("packed_isolation",),
            loss_correct,
            call="packed_no_block",
            batch="packed",
        ),
    ]
}


# the controls: the correct pipeline, padded and packed, declared the same way, must pass every row
CONTROLS = {
    c.key: c
    for c in [
        Incident("correct", "none (the control)", "", "shift once, ignore padding", (), loss_correct),
        Incident(
            "correct_packed",
            "none (the control)",
            "",
            "a block-diagonal mask, positions per document, the boundary target dropped",
            (),
            loss_correct,
            call="packed",
            batch="packed",
        ),
    ]
}


def _entry(key: str) -> Incident:
    if key in INCIDENTS:
        return INCIDENTS[key]
    if key in CONTROLS:
        return CONTROLS[key]
    raise ValueError(f"key must be one of {[*INCIDENTS, *CONTROLS]}; got {key!r}")


def show_code(key: str) -> None:
    """Print the few lines that make incident ``key`` (its loss, or how its forward calls the model)."""
    inc = _entry(key)
    if inc.call.startswith("packed_") and inc.call != "packed":
        lines = inspect.getsource(_forward).splitlines()
        marker = {"packed_no_block": "packed_no_block", "packed_mask_drops_block": "packed_mask_drops_block"}[
            inc.call
        ]
        at = next(i for i, line in enumerate(lines) if marker in line)
        counted = next(line for line in lines if "positions = " in line)  # where `positions` comes from
        print("# in forward(ids, mask, doc_ids) of a packed row; `call` names the pipeline")
        print("\n".join(line[4:] for line in [counted, *lines[at : at + 2]]))
    else:
        print(inspect.getsource(inc.loss).rstrip())


def _pipeline(key: str, seed: int = 0):
    inc = _entry(key)
    model = pipeline_gpt(seed)
    return model, _forward(model, inc.call), inc.loss


def _batch(kind: str, step: int):
    ids, mask = training_batch(kind, step)
    return (ids, mask, doc_ids_from_eos(ids)) if kind == "packed" else (ids, mask)


@functools.cache
def train_incident(key: str, steps: int = STEPS, lr: float = 1e-2) -> tuple:
    """The loss incident ``key``'s pipeline reports at each of ``steps`` Adam steps (07's batches)."""
    model, forward, loss_fn = _pipeline(key)
    kind = _entry(key).batch
    with cpu_threads(1):
        return tuple(
            fit(
                model,
                lambda step: _batch(kind, step),
                steps=steps,
                lr=lr,
                loss_fn=lambda _m, b: loss_fn(forward(*b), *b),
            )
        )


@functools.cache
def diagnose_incident(key: str):
    """``run_checks`` on incident ``key``'s pipeline (a fresh model), packing declared where it packs."""
    inc = _entry(key)
    model, forward, loss_fn = _pipeline(key)
    kw = dict(inc.declared) | ({"packing": inc.packing} if inc.packing else {})
    return run_checks(forward, loss_fn, vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS, model=model, **kw)


def incident_rows(key: str) -> dict:
    """What 07 prints for incident ``key``: its reported loss falls, and the rows that failed."""
    losses = train_incident(key)
    report = diagnose_incident(key)
    return {
        "first": losses[0],
        "last5": sum(losses[-5:]) / 5,
        "failed": report.failed,
        "names_its_class": set(_entry(key).rows) <= set(report.failed),
    }


def global_num_items_failed(ratio: float) -> list:
    """The rows ``run_checks`` fails for the correct padded pipeline whose loss is divided by an
    undeclared global ``num_items``, ``ratio`` times the batch's own number of targets (as under
    gradient accumulation over about ``ratio`` micro-batches), on a fresh model."""
    ratio = require_real("ratio", ratio, min=0.0, min_inclusive=False)
    model, forward, _ = _pipeline("correct")

    def loss_fn(logits, ids, mask):
        labels = labels_from_attention_mask(ids, mask)
        return causal_lm_loss(logits, labels, reduction="sum") / (ratio * num_valid_targets(labels))

    return run_checks(forward, loss_fn, vocab_size=V, seq_len=L, pad_id=PAD, eos_id=EOS, model=model).failed
