"""The loss-value checks behind :func:`lmcore.diagnose.run_checks`: a finite loss, the
alignment, the perfect- and zero-logit losses, the logit scale. The other families own their
checks: :mod:`lmcore.diagnose.mask_checks` (which targets are scored, with what weight) and
:mod:`lmcore.diagnose.model_checks` (the model); the probes they share live in
:mod:`lmcore.diagnose.probes`.

Each ``check_*`` returns ``(passed, detail)``; ``passed`` is None for a check that was skipped
(the detail says why). They call ``loss_fn(logits, input_ids, attention_mask)`` with hand-made
logits.
"""

from __future__ import annotations

import math

import torch

from .probes import BIG, NotFinite, loss_value, place

__all__ = ["check_finite", "check_alignment", "check_perfect", "check_zero", "check_logit_scale"]


def check_finite(loss_fn, inputs):
    """inputs: [(what, logits, ids, mask)]; the first non-finite loss fails the row."""
    for what, logits, ids, mask in inputs:
        try:
            loss_value(loss_fn, logits, ids, mask)
        except NotFinite as err:
            return False, (
                f"{err} for {what}: the loss is not finite, so no other loss check can "
                "be read (a 0/0 from dividing by a count of 0 valid targets? log of a "
                "probability 0? logits that overflow?)"
            )
    return True, "the loss is finite for zero, random and perfect logits, ragged rows included"


def check_alignment(loss_fn, ids, mask, V):
    losses = {k: loss_value(loss_fn, place(ids, k, V), ids, mask) for k in (-1, 0, 1, 2, 3)}
    best = min(losses, key=losses.get)
    shown = ", ".join(str(int(i)) for i in ids[0, :4])
    got = ", ".join(str(int(i)) for i in ids[0, best : best + 3]) if best >= 0 else "earlier tokens"
    text = f"ids {shown}, ... are scored against {got}, ..."
    if best == 1 and all(v > losses[1] + 1e-3 for k, v in losses.items() if k != 1):
        return True, f"{text} (position t against token t+1)"
    cause = {
        0: "the shift is missing: each position is compared with its own token, so the "
        "model learns to copy its input",
        2: "the labels are shifted twice (pre-shifted labels passed to a loss that shifts "
        "again): the model learns to predict t+2; every target, EOS included, is still scored, "
        "from two positions earlier",
    }
    return False, f"{text}: " + cause.get(
        best, f"position t is scored against token t{best:+d} (labels rolled or sliced by the wrong offset)"
    )


def _perfect_expected(V, smoothing, z_loss):
    """The loss of logits BIG on the target and 0 elsewhere, with label smoothing and z-loss."""
    log_z = math.log(math.exp(BIG) + V - 1)
    return (1 - smoothing) * (log_z - BIG) + smoothing * (log_z - BIG / V) + z_loss * log_z**2


def check_perfect(loss_fn, ids, mask, V, *, smoothing=0.0, z_loss=0.0, aux_loss=False, ratio=1.0):
    if aux_loss:
        return None, "skipped: aux_loss=True (an auxiliary term of unknown size moves this loss)"
    value, expected = (
        loss_value(loss_fn, place(ids, 1, V), ids, mask),
        _perfect_expected(V, smoothing, z_loss) / ratio,
    )
    known = (
        [f"label smoothing {smoothing:g}"] * bool(smoothing)
        + [f"z-loss {z_loss:g}"] * bool(z_loss)
        + [f"num_items_ratio {ratio:g}"] * (ratio != 1)
    )
    shown = f"{value:.2f}".replace("-0.00", "0.00")  # a float32 sum just below 0 is 0.00, not -0.00
    text = f"loss {shown} for logits perfect on the next token (expected " + (
        f"{expected:.2f} with {' and '.join(known)})" if known else "about 0)"
    )
    if abs(value - expected) < 0.01:
        return True, text
    softmaxed = math.log(V - 1 + math.e) - 1
    half = loss_value(loss_fn, place(ids, 1, V) / 2, ids, mask)  # the same answer, half as sure
    if not known and abs(value - softmaxed) < 0.05 and abs(half - value) < 0.05:
        return False, (
            f"{text}: ln(V - 1 + e) - 1 = {softmaxed:.2f} is the loss of probabilities "
            "taken as logits. Likely cause: softmax is applied before the loss (cross-entropy does "
            "log-softmax itself)"
        )
    if half + 0.01 < value < BIG / 4:  # not the misaligned ~BIG
        return False, (
            f"{text}: the loss grows with the size of a correct logit. Likely causes: label "
            "smoothing or a logit penalty (z-loss); if intended, pass label_smoothing= or z_loss=, "
            "aux_loss=True for another term"
        )
    return False, (
        f"{text}. Likely causes: the loss does not score position t against token t+1 (see "
        "alignment); it transforms the logits (softmax, scaling: see logit_scale); an undeclared "
        "label smoothing or auxiliary loss (pass label_smoothing=, z_loss= or aux_loss=True)"
    )


def _zero_causes(ratio, n_targets, n_real, n_all):
    """The classes of cause of a zero-logit loss of ratio x ln V, most likely first."""
    near = lambda a, b: abs(a - b) < 1e-3 * max(abs(b), 1.0)  # noqa: E731
    if near(ratio, 1 / math.log(2)):
        return "the loss is in bits (log base 2), not nats"
    if near(ratio, n_targets):
        return f"the loss is summed over the {n_targets} targets, not averaged"
    if near(ratio, n_targets / n_real) or near(ratio, n_targets / n_all):
        count = f"the {n_real} real tokens" if near(ratio, n_targets / n_real) else f"all {n_all} tokens"
        return (
            f"the summed NLL is divided by {count}, not by the {n_targets} targets (a row of n "
            "tokens has n - 1 targets)"
        )
    if abs(ratio - 1) < 0.02:
        return (
            "the loss is computed in low precision (a bf16/fp16 cross-entropy: cast the logits to "
            "float32 first); it transforms the logits slightly (see logit_scale); an unreported "
            "small term (pass z_loss= or aux_loss=True)"
        )
    return (
        "the summed NLL is divided by another count, e.g. a global num_items in gradient "
        "accumulation (if intended, pass num_items_ratio = num_items / the batch's targets); the "
        "loss rescales or transforms the logits (see logit_scale); an unreported term (pass "
        "z_loss= or aux_loss=True); it is not a cross-entropy"
    )


def check_zero(loss_fn, ids, mask, V, want, *, z_loss=0.0, aux_loss=False, ratio=1.0):
    if aux_loss:
        return None, "skipped: aux_loss=True (an auxiliary term of unknown size moves this loss)"
    value, ln_v = loss_value(loss_fn, torch.zeros(*ids.shape, V, device=ids.device), ids, mask), math.log(V)
    expected = (ln_v + z_loss * ln_v**2) / ratio
    target = (
        f"ln V = {ln_v:.2f}"
        + (f" + z-loss {z_loss:g} x (ln V)^2" if z_loss else "")
        + (f", divided by num_items_ratio {ratio:g}" if ratio != 1 else "")
    )
    if z_loss or ratio != 1:
        target += f" = {expected:.4f}"
    if abs(value - expected) < 1e-3 * max(1.0, expected / ln_v):
        return True, f"loss {value:.4f} for zero logits = {target}" if z_loss or ratio != 1 else (
            f"loss {value:.2f} for zero logits = {target}"
        )
    n_targets, n_real = int(want.sum()), int(mask.sum())
    cause = _zero_causes(value / expected, n_targets, n_real, mask.numel())
    return False, f"loss {value:.4f} for zero logits, expected {target}. Likely causes: {cause}"


def _weighted_ce(z, targets, weight, smoothing, z_loss):
    """sum over weighted positions of w [(1 - s) NLL + s mean(-log p) + z_loss (log Z)^2], in float64."""
    keep = weight > 0
    z, y, w = z[keep].double(), targets[keep], weight[keep].double()
    logp = torch.log_softmax(z, -1)
    nll = -logp.gather(-1, y[:, None])[:, 0]
    per = (1 - smoothing) * nll - smoothing * logp.mean(-1) + z_loss * torch.logsumexp(z, -1) ** 2
    return float((w * per).sum())


def _solve_scale(g) -> float:
    """The factor a in [0.01, 100] nearest 1 with g(a) = 0 (grid, then bisection), else the grid's
    argmin of |g|."""
    grid = torch.logspace(-2, 2, 401, dtype=torch.float64).tolist()
    vals = [g(a) for a in grid]
    roots = []
    for (a, ga), (b, gb) in zip(zip(grid, vals), zip(grid[1:], vals[1:])):
        if ga * gb <= 0:
            for _ in range(50):
                mid = (a + b) / 2
                a, ga, b, gb = (a, ga, mid, g(mid)) if ga * g(mid) <= 0 else (mid, g(mid), b, gb)
            roots.append((a + b) / 2)
    if roots:
        return min(roots, key=lambda r: abs(math.log(r)))
    return grid[min(range(len(grid)), key=lambda i: abs(vals[i]))]


def check_logit_scale(
    loss_fn, ids, mask, V, weight, targets, moved, gen, *, smoothing=0.0, z_loss=0.0, aux_loss=False
):
    """On random logits (std 2) the loss must equal the cross-entropy of the targets and weights
    its own gradient shows, computed here in float64 (to 1e-4 relative): a loss that rescales,
    softmaxes or rounds its logits gives another value, one that only picks other targets or
    weights does not (those are other rows)."""
    if aux_loss:
        return None, "skipped: aux_loss=True (an auxiliary term of unknown size moves this loss)"
    if smoothing >= 1:
        return None, "skipped: label_smoothing=1 (the loss no longer depends on the targets)"
    w = torch.where(targets >= 0, weight, torch.zeros_like(weight)).cpu()
    if not bool((w > 0).any()):
        return False, "the loss has no gradient with respect to the logits: nothing is learned"
    if bool((moved.cpu() & (w == 0)).any()):
        return None, (
            "skipped: some positions move the loss's value but get no gradient (see all_scored), "
            "so the gradient does not show the whole loss"
        )
    z, z2 = (2.0 * torch.randn(*ids.shape, V, generator=gen) for _ in range(2))
    value, value2 = (loss_value(loss_fn, x.to(ids.device), ids, mask) for x in (z, z2))
    y = targets.cpu()

    def f(a, x=z, s=smoothing):  # a loss c x CE(a x logits) has gradient weights c x a
        return _weighted_ce(a * x, y, w / a * (1 - smoothing) / (1 - s), s, z_loss)

    expected, tol = f(1.0), 1e-4 * max(abs(f(1.0)), 1e-3)
    slope = abs(f(1.001) - f(0.999)) / 0.002
    if abs(value - expected) <= tol:
        band = f" (a loss that rescales its logits by a factor a shows for |a - 1| > {tol / slope:.1g})"
        return True, (
            f"loss {value:.4f} for random logits = {expected:.4f}, the float64 cross-entropy of the "
            f"targets and weights its gradient shows, within 1e-4 relative{band}"
        )
    head = f"loss {value:.4f} for random logits, expected {expected:.4f} (the float64 cross-entropy of the "
    head += "targets and weights its gradient shows, to 1e-4 relative)"
    a = _solve_scale(lambda a: f(a) - value)  # fitted on one draw, confirmed on another
    if abs(a - 1) > 1e-3 and abs(f(a, z2) - value2) <= 10 * tol:
        return False, (
            f"{head}: it is the cross-entropy of the logits x {a:.3g}. Likely causes: the loss "
            "rescales its logits (a temperature, logits / sqrt(d) or a scale applied twice, "
            "mixed-up logit soft-capping)"
        )
    spread = f(1.0, z, 0.5) - f(1.0, z, 0.0)  # f is linear in s / (1 - s)
    r = (value - f(1.0, z, 0.0)) / spread if spread > 0 else -1.0
    k = r / (1 + r) if r > 0 else -1.0
    if 0 < k < 1 and abs(f(1.0, z2, k) - value2) <= 10 * tol:
        return False, (
            f"{head}: it is the cross-entropy with label smoothing {k:.3g}. Likely cause: label "
            f"smoothing; if intended, pass label_smoothing={k:.3g}"
        )
    return False, (
        f"{head}, off by {abs(value - expected) / max(abs(expected), 1e-12):.2g} relative. Likely causes: the loss "
        "transforms the logits (softmax first: see perfect_logits); it is computed in low precision "
        "(bf16/fp16: cast the logits to float32); an undeclared label smoothing or z-loss (pass "
        "label_smoothing= or z_loss=) or another term (aux_loss=True)"
    )
