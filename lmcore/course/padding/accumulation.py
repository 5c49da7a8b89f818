"""Notebook 05, section 5: gradient accumulation with uneven padding, on one process and across
data-parallel ranks (simulated in one process), and the exercise checker.

The rule is the same at both scales: every piece divides its *summed* NLL by the number of valid
targets of the whole batch (``num_items``); across K ranks that count is all-reduced, and because
DistributedDataParallel averages the ranks' gradients (divides by K), each rank's loss is also
multiplied by K.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...loss import causal_lm_loss
from ...shift import IGNORE_INDEX, num_valid_targets
from ..checks import Case, check
from .lesson import PAD, TOKENS, right_padded, toy_model

__all__ = ["accumulation_batch", "flat_grad", "rank_gradients", "ragged_micro_batches", "check_accumulation"]


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
    its own mean (the default), its sum / the global count, and world_size * sum / global count;
    ``scale[name]``: the averaged gradient as a multiple of the full batch's (its least-squares
    factor; 1 where it is the full batch's gradient)."""
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
    out = {"counts": counts, "global_count": total, "scale": {}}
    for name, loss_of in ways.items():
        grads = []
        for x, y in shards:  # one model copy per rank
            model = toy_model(seed)
            loss_of(x, y, model).backward()
            grads.append(flat_grad(model))
        ddp = torch.stack(grads).mean(0)  # DDP: all-reduce, divide by world_size
        out[name] = float((ddp - g_full).abs().max())
        out["scale"][name] = float(ddp.double() @ g_full.double() / (g_full.double() @ g_full.double()))
    return out


def ragged_micro_batches(seed: int, n_micro: int, empty: int | None = None):
    """``n_micro`` micro-batches of 2 right-padded rows each, every micro-batch with its own
    length L (12, 6, 9 or 4: no two neighbours alike) and uneven padding: a list of ``(input_ids, labels)``.
    With ``empty``, micro-batch number ``empty`` has no valid target (every label -100, as a chunk of
    prompt-only rows in completion training)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in range(n_micro):
        L = (12, 6, 9, 4)[(seed + k) % 4]
        lens = torch.randint(2, L + 1, (2,), generator=g)
        ids, labels = right_padded(torch.randint(3, len(TOKENS), (2, L), generator=g), lens)
        out.append((ids, torch.full_like(labels, IGNORE_INDEX) if k == empty else labels))
    return out


def _one_forward_reference(seed: int, n_micro: int, empty: int | None = None):
    """The full batch's gradients and mean loss: every row padded to the longest micro-batch's L
    and concatenated, one forward (causal, right padding: the padding changes no real logit)."""
    micro = ragged_micro_batches(seed, n_micro, empty)
    L = max(ids.shape[1] for ids, _ in micro)
    ids = torch.cat([F.pad(x, (0, L - x.shape[1]), value=PAD) for x, _ in micro])
    labels = torch.cat([F.pad(y, (0, L - y.shape[1]), value=IGNORE_INDEX) for _, y in micro])
    model = toy_model(seed)
    loss = causal_lm_loss(model(ids), labels)
    loss.backward()
    return {"the model's gradients": flat_grad(model), "the mean loss you return": float(loss)}


def _learner_run(accumulate, seed: int, n_micro: int, empty: int | None = None):
    """Run ``accumulate(model, micro_batches)`` with the micro-batches as a one-pass iterator and
    every forward recorded; refuse anything but one forward per micro-batch, in order."""
    model, micro = toy_model(seed), ragged_micro_batches(seed, n_micro, empty)
    shapes, backwards = [], []
    hook = model.register_forward_pre_hook(lambda m, args: shapes.append(tuple(args[0].shape)))
    # every forward reads the first weight, so each backward pass computes its gradient once
    on_grad = next(model.parameters()).register_hook(lambda g: backwards.append(1))
    try:
        logged = accumulate(model, iter(micro))
    finally:
        hook.remove()
        on_grad.remove()
    want = [tuple(x.shape) for x, _ in micro]
    if not shapes:
        raise ValueError("the model was never called: did a first pass over the iterator use it up?")
    if shapes != want:
        raise ValueError(
            f"the model saw inputs of shapes {shapes}, not one forward per micro-batch {want}: "
            "accumulation means one forward and backward per micro-batch, never one big batch"
        )
    if len(backwards) != len(micro):
        raise ValueError(
            f"the model's gradients came from {len(backwards)} backward pass{'es' if len(backwards) != 1 else ''} "
            f"for {len(micro)} micro-batches: accumulation runs one backward per micro-batch, so that each "
            "micro-batch's graph is freed before the next forward (the memory it exists to save)"
        )
    if not isinstance(logged, (float, int, torch.Tensor)) or isinstance(logged, bool):
        raise TypeError(f"return the batch's mean loss as a float; got {type(logged).__name__}")
    return {"the model's gradients": flat_grad(model), "the mean loss you return": float(logged)}


_NO_REFERENCE = {
    "lmcore.train.accumulate.accumulate_gradients": "lmcore.train's own loop does this: write it yourself",
    "lmcore.train.accumulate.backward_micro_batches": "lmcore.train's own loop does this: write it yourself",
}


def check_accumulation(fn, quiet: bool = False):
    """``fn(model, micro_batches)``: micro-batches of different lengths and padding, handed as a
    one-pass iterator; afterwards model's .grad must equal the full batch's gradient of
    ``causal_lm_loss`` (mean over all valid targets), and ``fn`` returns that mean loss."""
    cases = [
        Case((s, k), label=f"{k} micro-batches of 2 rows, each its own length and padding (seed {s})")
        for s, k in ((0, 2), (1, 3), (2, 4))
    ] + [Case((3, 3, 1), label="3 micro-batches of 2 rows, the second with no valid target (seed 3)")]
    return check(
        "accumulate_gradients",
        lambda s, k, empty=None: _learner_run(fn, s, k, empty),
        _one_forward_reference,
        cases,  # the kit's tolerances: a loss from float32 logits is right (off by ~4e-8 here, every
        # wrong variant by > 0.06); atol 1e-9, rtol 1e-6 rejected it (issue 38)
        forbid=_NO_REFERENCE,
        quiet=quiet,
        hint=(
            "Compare with one step on the whole batch: does every valid target weigh the same when "
            "the micro-batches hold different numbers of valid targets? Which count must you divide "
            "by, and when do you know it?",
            "every target of the whole batch must weigh 1 / (valid targets of ALL micro-batches), "
            "a count you only know after the last micro-batch; return the batch's mean loss too.",
        ),
    )
