"""Notebook 07's losses, right and wrong: ``loss_fn(logits (N, L, V), input_ids (N, L),
attention_mask (N, L)) -> scalar``, one correct and six with a classic label bug. Re-exported by
:mod:`lmcore.course.debugging.lesson`, whose pipelines train with them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...loss import causal_lm_loss
from ...shift import IGNORE_INDEX, labels_from_attention_mask
from ..toys import EOS

__all__ = [
    "loss_correct",
    "loss_same_position",
    "loss_double_shift",
    "loss_softmax_first",
    "loss_padding_scored",
    "loss_batch_means",
    "loss_eos_is_pad",
]


def _labels(ids, mask):
    return labels_from_attention_mask(ids, mask)


def loss_correct(logits, ids, mask):
    return causal_lm_loss(logits, _labels(ids, mask))


def loss_same_position(logits, ids, mask):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), _labels(ids, mask).reshape(-1))


def loss_double_shift(logits, ids, mask):
    labels = _labels(ids, mask)
    pre_shifted = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], IGNORE_INDEX)], 1)
    return causal_lm_loss(logits, pre_shifted)  # ... and the loss shifts again


def loss_softmax_first(logits, ids, mask):
    return causal_lm_loss(logits.softmax(-1), _labels(ids, mask))


def loss_padding_scored(logits, ids, mask):
    return causal_lm_loss(logits, ids)


def loss_batch_means(logits, ids, mask):
    labels = _labels(ids, mask)
    return torch.stack([causal_lm_loss(logits[i : i + 1], labels[i : i + 1]) for i in range(len(ids))]).mean()


def loss_eos_is_pad(logits, ids, mask):
    labels = ids.masked_fill(ids == EOS, IGNORE_INDEX)  # "ignore the pad id", and PAD is EOS
    return causal_lm_loss(logits, labels)
