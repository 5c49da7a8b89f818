"""Notebook 10, duplicated data: a training set of fixed size in which a fraction of the
characters is one slice repeated, the rest distinct text, trained for the same steps (the same
tokens seen) as the all-distinct set; the losses on the distinct part, on the repeated slice and
on held-out text. The widget's runs are cached, one per fraction."""

from __future__ import annotations

from functools import lru_cache

import torch

from ..._validate import require_int_scalar, require_real
from .data import _python_docs, split_loss, text_run

__all__ = ["FRACTIONS", "duplicated_mix", "duplicate_run"]

FRACTIONS = (0.0, 0.1, 0.25, 0.5)  # the widget's choices


def duplicated_mix(fraction: float, *, total: int = 200_000, slice_chars: int = 200) -> dict:
    """Training ids of ``total`` characters from the Python docs' training split: a ``fraction``
    of them copies of one ``slice_chars`` slice (taken from beyond the distinct part, so it is
    in the set only as copies), spread evenly between chunks of distinct text.

    Returns ``{"ids", "unique", "slice", "copies"}`` (the distinct text and the slice as ids).
    """
    fraction = require_real("fraction", fraction, min=0.0, max=0.9)
    total = require_int_scalar("total", total, min=1_000)
    slice_chars = require_int_scalar("slice_chars", slice_chars, min=64, max=total // 10)
    base = _python_docs().train
    if total + slice_chars > len(base):
        raise ValueError(f"total + slice_chars must fit in the docs' {len(base):,} training characters.")
    copies = round(fraction * total / slice_chars)
    unique, piece = base[: total - copies * slice_chars], base[total : total + slice_chars]
    chunks = torch.tensor_split(unique, copies + 1)
    parts = [p for i, c in enumerate(chunks) for p in ((c, piece) if i < copies else (c,))]
    return {"ids": torch.cat(parts), "unique": unique, "slice": piece, "copies": copies}


@lru_cache(maxsize=len(FRACTIONS) + 2)
def duplicate_run(fraction: float, steps: int = 200, seed: int = 0) -> dict:
    """:func:`text_run` on :func:`duplicated_mix` (``fraction``): the run and its losses per
    character on the distinct training text, on the repeated slice and on held-out text."""
    mix = duplicated_mix(fraction)
    run = text_run(mix["ids"], steps=steps, seed=seed)
    L = run.model.config.block_size
    return {
        "run": run,
        "copies": mix["copies"],
        "distinct": split_loss(run.model, mix["unique"]),
        "repeated": split_loss(run.model, mix["slice"], rows=len(mix["slice"]) // L),
        "held_out": split_loss(run.model, _python_docs().val),
    }
