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
from ..checks import Case, check, only_match
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
    every forward recorded; refuse anything but one forward and one backward per micro-batch, in
    order (a micro-batch with no valid target may be skipped: it adds nothing), or a step taken."""
    model, micro = toy_model(seed), ragged_micro_batches(seed, n_micro, empty)
    before = [p.detach().clone() for p in model.parameters()]
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
    scored = [tuple(x.shape) for x, y in micro if num_valid_targets(y)]
    if not shapes:
        raise ValueError("the model was never called: did a first pass over the iterator use it up?")
    if shapes not in (want, scored):
        raise ValueError(  # a check's own question (it ends with "?") is the whole diagnosis
            f"the model saw inputs of shapes {shapes} for micro-batches of shapes {want}: does your "
            "loop run one forward per micro-batch, in order?"
        )
    if len(backwards) not in (len(shapes), len(scored)):
        raise ValueError(
            f"{len(backwards)} backward pass{'es' if len(backwards) != 1 else ''} for {len(shapes)} forwards: "
            "is each micro-batch's graph freed by its own backward before the next forward?"
        )
    if any(not torch.equal(a, p.detach()) for a, p in zip(before, model.parameters())):
        raise ValueError(
            "the model's weights changed: should a function that accumulates the batch's gradient in "
            ".grad also take the optimizer's step?"
        )
    if not isinstance(logged, (float, int, torch.Tensor)) or isinstance(logged, bool):
        raise TypeError(f"return the batch's mean loss as a float; got {type(logged).__name__}")
    return {"the model's gradients": flat_grad(model), "the mean loss you return": float(logged)}


def _micro_gradients(seed: int, n_micro: int, empty: int | None = None):
    """Each micro-batch's own part of the work: (the gradient of its *summed* NLL, zeros for one
    with no valid target; its labels). Every gradient a learner's loop builds is a weighted sum
    of these gradients."""
    model, out = toy_model(seed), []
    for ids, labels in ragged_micro_batches(seed, n_micro, empty):
        model.zero_grad()
        if num_valid_targets(labels):
            causal_lm_loss(model(ids), labels, reduction="sum").backward()
        out.append((flat_grad(model).clone(), labels))  # zeros where no backward ran
    return out


_ACCUMULATION_QUESTIONS = {
    "micro means": "your gradient gives every micro-batch the same weight, whatever its number of valid "
    "targets: in one step on the whole batch, does a target in a micro-batch with few valid targets "
    "count more than one in a full micro-batch?",
    "own count": "your gradient adds up whole micro-batch means, so it grows with the number of "
    "micro-batches, and a target in a micro-batch with few valid targets counts more: should either "
    "depend on how the batch was cut?",
    "no divide": "your gradient grows with the number of valid targets in the batch: is it the "
    "gradient of a mean?",
    "unshifted": "your count is larger than the number of targets the loss scores: which labels are "
    "left as targets after the shift, and did your count see the same ones?",
    "padding": "your count includes positions whose label is -100: does a padding position count as "
    "a target?",
    "zero grad": "your gradients hold only the last micro-batch's part: what happened to what the "
    "earlier backward passes had left in .grad?",
    "loss over K": "your gradients match the whole batch's, and the loss you return is its mean "
    "divided by the number of micro-batches: what does each micro-batch's loss stand for already, "
    "and what does averaging them do to it?",
    "loss": "your gradients match the whole batch's, but the loss you return does not: is it the "
    "loss whose gradient you accumulated?",
}


def _accumulation_mistakes(seed: int, n_micro: int, empty: int | None = None):
    """(the right gradient, [(the gradient a plausible mistake gives, the question it gets)]):
    each micro-batch's summed-NLL gradient weighed by one over nothing, a count before the shift,
    a count with the padding (shifted or not), the whole count with only the last micro-batch
    kept (.grad zeroed before each backward), and, where every micro-batch has a valid target,
    the number of micro-batches times its own count, or its own count."""
    ask, parts = _ACCUMULATION_QUESTIONS, _micro_gradients(seed, n_micro, empty)
    grads, labels = [g for g, _ in parts], [lab for _, lab in parts]
    counts = [num_valid_targets(lab) for lab in labels]
    K, total = len(parts), sum(counts)
    weights = [
        ([1.0] * K, ask["no divide"]),
        ([1 / sum(int((lab != IGNORE_INDEX).sum()) for lab in labels)] * K, ask["unshifted"]),
        ([1 / sum(lab[:, 1:].numel() for lab in labels)] * K, ask["padding"]),
        ([1 / sum(lab.numel() for lab in labels)] * K, ask["padding"]),
        ([0.0] * (K - 1) + [1 / total], ask["zero grad"]),
    ]
    if all(counts):  # a micro-batch with no valid target makes its own mean 0/0
        weights += [
            ([1 / (K * n) for n in counts], ask["micro means"]),
            ([1 / n for n in counts], ask["own count"]),
        ]
    return sum(grads) / total, [(sum(w * g for w, g in zip(ws, grads)), q) for ws, q in weights]


def _same_gradient(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal to float32 accuracy (~1e-7 here), with room to spare: the mistakes lie 3% apart or more."""
    return float((a - b).abs().max()) <= 1e-4 * max(float(a.abs().max()), float(b.abs().max()))


def _explain_accumulation(fn, case, expected, got) -> str:
    """The mistake whose gradient the learner's matches (:func:`_accumulation_mistakes`), as a
    question; ``""`` unless exactly one does. Right gradients with a wrong loss get their own:
    the mean of micro-batch losses each already divided by the whole count, or any other."""
    key, loss_key = "the model's gradients", "the mean loss you return"
    e, g = expected[key], got[key]
    if not isinstance(g, torch.Tensor) or g.shape != e.shape or not bool(torch.isfinite(g).all()):
        return ""
    g = g.detach().double()
    if _same_gradient(g, e.double()):  # the gradients are right: the loss is not
        mean, n_micro = expected[loss_key], case.args[1]
        over_k = abs(float(got[loss_key]) - mean / n_micro) <= 1e-4 * abs(mean)
        return _ACCUMULATION_QUESTIONS["loss over K" if over_k else "loss"]
    right, mistakes = _accumulation_mistakes(*case.args)
    named = {q for v, q in mistakes if _same_gradient(g, v) and not _same_gradient(v, right)}
    return only_match(named)


_NO_REFERENCE = {
    "lmcore.train.accumulate.accumulate_gradients": "lmcore.train's own loop does this: write it yourself",
    "lmcore.train.accumulate.backward_micro_batches": "lmcore.train's own loop does this: write it yourself",
}


def _accumulation_cases() -> list[Case]:
    """(seed, n_micro[, empty]): micro-batches of different lengths and padding, one case with a
    micro-batch that has no valid target."""
    return [
        Case((s, k), label=f"{k} micro-batches of 2 rows, each its own length and padding (seed {s})")
        for s, k in ((0, 2), (1, 3), (2, 4))
    ] + [Case((3, 3, 1), label="3 micro-batches of 2 rows, the second with no valid target (seed 3)")]


def check_accumulation(fn, quiet: bool = False):
    """``fn(model, micro_batches)``: micro-batches of different lengths and padding, handed as a
    one-pass iterator; afterwards model's .grad must equal the full batch's gradient of
    ``causal_lm_loss`` (mean over all valid targets), and ``fn`` returns that mean loss."""
    return check(
        "accumulate_gradients",
        lambda s, k, empty=None: _learner_run(fn, s, k, empty),
        _one_forward_reference,
        _accumulation_cases(),  # the kit's tolerances: a loss from float32 logits is right (off by
        # ~4e-8 here, every wrong variant by > 0.06); atol 1e-9, rtol 1e-6 rejected it (issue 38)
        forbid=_NO_REFERENCE,
        quiet=quiet,
        explain=_explain_accumulation,
        hint=(
            "Compare with one step on the whole batch: does every valid target weigh the same when "
            "the micro-batches hold different numbers of valid targets? Which count must you divide "
            "by, and when do you know it?",
            "every target of the whole batch must weigh 1 / (valid targets of ALL micro-batches), "
            "a count you only know after the last micro-batch; return the batch's mean loss too.",
        ),
    )
