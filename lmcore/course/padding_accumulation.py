"""Notebook 05, section 5: gradient accumulation with uneven padding, on one process and across
data-parallel ranks (simulated in one process), and the exercise checker.

The rule is the same at both scales: every piece divides its *summed* NLL by the number of valid
targets of the whole batch (``num_items``); across K ranks that count is all-reduced, and because
DistributedDataParallel averages the ranks' gradients (divides by K), each rank's loss is also
multiplied by K.
"""

from __future__ import annotations

import torch

from ..loss import causal_lm_loss
from ..shift import num_valid_targets
from .checks import Case, check
from .padding import TOKENS, right_padded, toy_model

__all__ = ["accumulation_batch", "flat_grad", "rank_gradients", "check_accumulation"]


def accumulation_batch(seed: int = 0, rows: int = 4, length: int = 12, vocab_size: int = len(TOKENS)):
    """``(input_ids, labels)`` (rows, length), right-padded with very uneven real lengths:
    the first half of the rows are long, the second half short."""
    g = torch.Generator().manual_seed(seed)
    long_, short = (
        length - int(torch.randint(0, 2, (1,), generator=g)),
        2 + int(torch.randint(0, 3, (1,), generator=g)),
    )
    lens = torch.tensor([long_] * (rows // 2) + [short] * (rows - rows // 2))
    return right_padded(torch.randint(3, vocab_size, (rows, length), generator=g), lens)


def flat_grad(model) -> torch.Tensor:
    """All parameter gradients of ``model`` in one 1-D tensor (zeros where a grad is None)."""
    return torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in model.parameters()]
    )


def rank_gradients(seed: int = 0, world_size: int = 2) -> dict:
    """One global batch of ``2 * world_size`` rows with uneven padding, split across
    ``world_size`` simulated ranks (two rows each). Each rank runs its own copy of the same
    model; "DDP" averages their gradients. Returns the valid targets per rank, their all-reduced
    sum, and max |grad - full-batch grad| for three ways of taking each rank's loss:
    its own mean (the default), its sum / the global count, and world_size * sum / global count."""
    ids, labels = accumulation_batch(seed, rows=2 * world_size)
    full = toy_model(seed)
    causal_lm_loss(full(ids), labels).backward()
    g_full = flat_grad(full)
    shards = list(zip(ids.split(2), labels.split(2)))
    counts = [num_valid_targets(y) for _, y in shards]
    total = sum(counts)  # what all_reduce(SUM) of counts gives
    ways = {
        "local mean": lambda x, y, m: causal_lm_loss(m(x), y),
        "sum / global count": lambda x, y, m: causal_lm_loss(m(x), y, num_items=total),
        "world_size * sum / global count": lambda x, y, m: (
            world_size * causal_lm_loss(m(x), y, num_items=total)
        ),
    }
    out = {"counts": counts, "global_count": total}
    for name, loss_of in ways.items():
        grads = []
        for x, y in shards:  # one model copy per rank
            model = toy_model(seed)
            loss_of(x, y, model).backward()
            grads.append(flat_grad(model))
        ddp = torch.stack(grads).mean(0)  # DDP: all-reduce, divide by world_size
        out[name] = float((ddp - g_full).abs().max())
    return out


def _accumulation_grads(accumulate, seed: int, n_micro: int, full_batch: bool = False):
    model = toy_model(seed)
    ids, labels = accumulation_batch(seed, rows=2 * n_micro)
    if full_batch:
        causal_lm_loss(model(ids), labels).backward()
    else:
        accumulate(model, list(zip(ids.split(2), labels.split(2))))
    return flat_grad(model)


def check_accumulation(fn) -> bool:
    """``fn(model, micro_batches)`` must leave model's .grad equal to the full batch's gradient
    of ``causal_lm_loss`` (mean over all valid targets)."""
    cases = [
        Case((s, k), label=f"{k} micro-batches of 2 rows, uneven padding (seed {s})")
        for s, k in ((0, 2), (1, 2), (2, 3), (3, 4))
    ]
    return check(
        "accumulate_gradients",
        lambda s, k: _accumulation_grads(fn, s, k),
        lambda s, k: _accumulation_grads(None, s, k, full_batch=True),
        cases,
        atol=1e-9,
        rtol=1e-6,
        hint="count the valid targets of ALL micro-batches first "
        "(num_valid_targets), then pass that count as num_items to every micro-batch's loss.",
    )
