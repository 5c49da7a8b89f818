"""Notebook 09, section 4: the floor token by token. Every validation target scored by the
trained model and by the perfect model, grouped by slot or role, and the gap split by role.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import torch

from ...loss import causal_lm_loss
from ...shift import IGNORE_INDEX
from .lesson import SLOTS, exact_slot_entropy, oracle_probs, token_slots

__all__ = ["per_target_nll", "ROLES", "slot_breakdown", "gap_breakdown"]


@torch.no_grad()
def per_target_nll(
    model, corpus, *, low: int = 0, high: int = 9, ops=("+",), split: str = "val", block_size: int = 32
) -> dict:
    """Every scored target of ``split``: its slot, the model's NLL and the perfect model's
    NLL (nats), as arrays of equal length. Turns are packed whole, as in training."""
    pb = corpus.packed(split, block_size)
    was_training = model.training
    model.eval()
    logits = torch.cat(
        [
            model(
                pb.input_ids[i : i + 256],
                document_ids=pb.document_ids[i : i + 256],
                position_ids=pb.position_ids[i : i + 256],
            )
            for i in range(0, len(pb.input_ids), 256)
        ]
    )
    model.train(was_training)
    nll = causal_lm_loss(logits.double(), pb.labels, reduction="none")  # (N, L-1)
    probs = oracle_probs(low, high, tuple(ops))
    slots, mine, best = [], [], []
    for r, row in enumerate(pb.input_ids.tolist()):
        for j in range(1, len(row)):
            if int(pb.labels[r, j]) == IGNORE_INDEX:
                continue
            start = j - int(pb.position_ids[r, j])
            slots.append(token_slots(row[start : j + 1])[-1])
            mine.append(float(nll[r, j - 1]))
            best.append(-math.log(probs[tuple(row[start:j])][row[j]]))
    return {"slot": np.array(slots), "model": np.array(mine), "oracle": np.array(best)}


ROLES = {"a": "prompt digits", "b": "prompt digits", "c": "answer"}  # the rest: formatting


def slot_breakdown(table: dict, *, by: str = "slot", low: int = 0, high: int = 9, ops=("+",)):
    """Rows ``(name, share of targets, model mean NLL, exact entropy per token)`` per slot (or
    per role with ``by="role"``); the exact values come from :func:`exact_slot_entropy`."""
    if by not in ("slot", "role"):
        raise ValueError(f"by must be 'slot' or 'role'; got {by!r}.")
    key = (lambda s: s) if by == "slot" else (lambda s: ROLES.get(s, "formatting"))
    exact = defaultdict(lambda: [0.0, 0.0])
    for s, (n, nats) in exact_slot_entropy(low, high, ops).items():
        exact[key(s)][0] += n
        exact[key(s)][1] += nats
    names = np.array([key(s) for s in table["slot"]])
    order = list(dict.fromkeys(key(s) for s in SLOTS))
    return [
        (g, float((names == g).mean()), float(table["model"][names == g].mean()), exact[g][1] / exact[g][0])
        for g in order
        if (names == g).any()
    ]


def gap_breakdown(table: dict) -> dict:
    """The model's gap above the floor on these targets, ``mean(model - oracle)``, split by
    role: each role's part is its summed excess over *all* targets, so the parts add up to the
    gap. Returns ``{role: nats per target}`` plus ``"total"``."""
    excess = np.asarray(table["model"], dtype=np.float64) - np.asarray(table["oracle"], dtype=np.float64)
    roles = np.array([ROLES.get(s, "formatting") for s in table["slot"]])
    parts = {
        r: float(excess[roles == r].sum() / len(excess)) for r in ("prompt digits", "formatting", "answer")
    }
    parts["total"] = float(excess.mean())
    return parts
