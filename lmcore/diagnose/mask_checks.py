"""The checks of which targets a loss scores and how much each weighs (labels and masking).

A position counts as scored when changing its logits moves the loss's value (``moves_value``)
and when the loss's gradient reaches it (``gradient_reading``): a position whose logits are
detached moves the value but gets no gradient, so the model never learns from it. Each
``check_*`` returns ``(passed, detail)``; ``passed`` is None for a skipped check (the detail says
why). ``want`` is the (N, L) bool of the positions a correct loss scores (``expected_scored``).
"""

from __future__ import annotations

from fractions import Fraction

import torch

__all__ = ["check_coverage", "check_equal_weights", "check_padding_unscored", "check_eos_scored", "gets_grad"]


def gets_grad(weight: torch.Tensor) -> torch.Tensor:
    """(N, L) bool: positions whose gradient weight is more than 1e-4 of the largest."""
    return weight > 1e-4 * max(float(weight.max()), 1e-30)


def _where(mask: torch.Tensor) -> list:
    return sorted({int(t) for t in mask.nonzero()[:, 1]})


def _off_by_one(where: torch.Tensor, want: torch.Tensor, step: int) -> bool:
    """Every position in ``where`` sits next to the declared boundary: its neighbour at
    ``t + step`` disagrees with it in ``want`` (the first target after a declared prompt, step -1,
    or the last declared-unscored position before the response, step +1)."""
    n, t = where.nonzero().unbind(1)
    ok = (t + step >= 0) & (t + step < want.shape[1])
    return bool(ok.all()) and bool((want[n, t + step] != want[n, t]).all())


def _declared_missing(missing, want, where):
    """all_scored's failure when unscored= was declared and the loss masks more than it says."""
    edge = _off_by_one(missing, want, -1)
    return (
        False,
        f"positions {where} are not scored, though the declared unscored= says their targets "
        "are: the loss masks more than the declaration. "
        + (
            "Each is the first target after the declared prompt, so the loss's prompt mask "
            "and the declaration disagree by one position: the loss masks the first response "
            "token (the mask applied after the shift, or ending one token late). Fix the "
            "loss (mask labels up to and including the last template token, then shift) or, "
            "if the loss is right, the declaration"
            if edge
            else "Likely causes: real tokens masked by id (they share an id with a special "
            "token); a loss that keeps only some positions; a declaration that does not "
            "describe the loss's mask"
        ),
    )


def check_coverage(moved, weight, want, declared: bool = False):
    """On full rows: the last position is unscored, every position ``want`` marks is scored (its
    value moves the loss and it gets a gradient), no position declared unscored is scored.
    ``declared``: an ``unscored=`` was given, so a disagreement is the declaration's or the
    loss's, never a mask to declare."""
    L = moved.shape[1]
    grad = gets_grad(weight)
    last = (
        (True, f"the last position (t = {L - 1}) is not scored: it has no next token")
        if not bool((moved | grad)[:, -1].any())
        else (
            False,
            f"the last position (t = {L - 1}) is scored, though it has no next token in the row. "
            "Likely causes: the shift is missing (each position compared with its own token; see "
            "alignment); labels padded to length L with a real token id (Hugging Face pads with "
            "-100, which is right) or rolled (torch.roll wraps the first token round)",
        )
    )
    missing, detached = want & ~moved & ~grad, want & moved & ~grad
    extra = ~want & (moved | grad)
    extra[:, -1] = False
    n_want = int(want[0].sum())
    if bool(missing.any()):
        where = _where(missing)
        if declared and where != [L - 2]:
            return last, _declared_missing(missing, want, where)
        causes = (
            "a double shift drops the last target (see alignment); "
            if where == [L - 2]
            else "prompt/completion masking (if intended, declare it: unscored=lambda input_ids, "
            "attention_mask: <True at tokens that are not targets>); masking by token id drops "
            "real tokens that share an id with a special token; "
        )
        every = (
            False,
            f"positions {where} are not scored (changing their logits leaves the loss unchanged), "
            f"though they have real next tokens. Likely causes: {causes}"
            "a loss that keeps only some positions (a slice, a window)",
        )
    elif bool(detached.any()):
        every = (
            False,
            f"positions {_where(detached)} move the loss's value but get zero gradient: their logits "
            "are detached (.detach(), a torch.no_grad() block, .item() or numpy in the loss), so the "
            "model never learns from them",
        )
    elif bool(extra.any()):
        every = (
            False,
            f"positions {_where(extra)} are scored, though the unscored= declaration says their "
            "targets are not: "
            + (
                "each is the last position before the declared response, so the loss's prompt mask "
                "and the declaration disagree by one position (the mask applied before the shift, "
                "to the inputs, or ending one token early)"
                if _off_by_one(extra, want, 1)
                else "the prompt mask is off (applied before the shift, or to the inputs) or the "
                "declaration does not match the loss"
            ),
        )
    else:
        every = (
            True,
            f"the {n_want} positions with a target are all scored, by value and by gradient"
            + (f" ({L - 1 - n_want} declared unscored are not)" if n_want < L - 1 else ""),
        )
    return last, every


def _ratio_text(r: float) -> str:
    f = Fraction(r).limit_denominator(64)
    return f"{f.numerator}/{f.denominator}" if abs(float(f) - r) < 1e-4 * r else f"{r:.3g}"


def check_equal_weights(weight, moved, want):
    """Every scored target (``want`` and moving the value) gets the same gradient weight."""
    scored = want & moved
    if not bool(scored.any()):
        return False, "no position is scored: the loss does not depend on the logits of any target"
    w = weight[scored]
    if float(w.min()) <= 1e-4 * float(w.max()):
        return False, (
            "some scored targets weigh 0 in the gradient (see all_scored): their logits are "
            "detached, so the model never learns from them"
        )
    if float(w.max() / w.min()) < 1.001:
        return True, "every scored target gets the same weight in the loss (read from the gradient)"
    rows = [(weight[n][s], int(s.sum())) for n, s in enumerate(scored) if s.any()]
    if all(float(r.max() / r.min()) < 1.001 for r, _ in rows):
        (hi, n_hi), (lo, n_lo) = (
            max((float(r.mean()), n) for r, n in rows),
            min((float(r.mean()), n) for r, n in rows),
        )
        return False, (
            f"a target in the row of {n_hi} targets weighs {_ratio_text(hi / lo)} times one "
            f"in the row of {n_lo}. Likely causes: the loss averages per-row or per-batch means "
            "(micro-batch means in gradient accumulation); divide the summed NLL by the number of "
            "valid targets (num_items when accumulating)"
        )
    return False, (
        f"targets in the same row weigh up to {float(w.max() / w.min()):.3g} times each other. Likely "
        "causes: per-token or per-class weights (weight= in cross_entropy, a loss mask with values "
        "other than 0/1), a reduction='none' loss multiplied by something before the mean"
    )


def check_padding_unscored(moved, weight, targets, ids, mask, pad_id):
    """No target after a row's last real token is scored (right-padded rows): neither padding
    positions (PAD -> PAD) nor the last real token against the PAD after it (its target, read
    from the gradient, is the pad id; a last token scored against itself is alignment's, so with
    PAD = EOS this one case cannot be told apart and is left to alignment)."""
    scored = moved | gets_grad(weight)
    after = torch.zeros_like(scored)
    after[:, :-1] = mask[:, 1:] == 0
    bad = scored & after & ((mask == 0) | ((targets == pad_id) & (targets != ids)))
    if not bool(bad.any()):
        return True, (
            "no target after a row's last real token is scored: neither the padding positions "
            "nor the last real token (whose next token is PAD)"
        )
    edge = bad & (mask == 1)
    if bool(edge.any()) and not bool((bad & (mask == 0)).any()):
        return False, (
            f"the last real token of a padded row (t = {_where(edge)}) is scored against the PAD "
            "after it. Likely causes: the mask is applied after the shift on the input side "
            "(labels[:, 1:][attention_mask[:, :-1] == 0] = -100 masks one target too late); build "
            "labels = input_ids.masked_fill(attention_mask == 0, -100), then shift"
        )
    return False, (
        "the logits at padding positions move the loss: padding is scored as targets (PAD -> "
        "PAD). Likely causes: labels not masked where attention_mask is 0 (set them to -100); "
        "a pad id that real tokens do not use but the loss does not ignore"
    )


def check_eos_scored(targets, mask, ids, eos_id, want=None):
    """Each right-padded row ends with EOS; some real position must have EOS as its target (read
    from the gradient, so a target scored from the wrong position still counts: see alignment).
    ``want`` (the positions a correct loss scores): rows whose EOS is declared unscored (a row
    without a response under completion-only training) are not expected to score it."""
    if eos_id is None:
        return None, "skipped: pass eos_id= to check that the EOS target of each row is scored"
    is_eos = (ids == eos_id) & (mask == 1)
    expected = torch.zeros_like(is_eos)
    expected[:, :-1] = is_eos[:, 1:] & (want[:, :-1] if want is not None else True)
    rows = [n for n in range(len(ids)) if bool(expected[n].any())]
    if not rows:
        return None, (
            "skipped: the declared unscored= masks the EOS of every probe row; pass "
            "response_template= (its token ids) so the probe rows carry a response"
        )
    missing = [n for n in rows if not bool(((targets[n] == eos_id) & (mask[n] == 1)).any())]
    if not missing:
        return True, f"the EOS (id {eos_id}) that ends each row is a target of the loss"
    return False, (
        f"the EOS tokens (id {eos_id}) that end rows {missing} are never a target, so the model "
        "never learns to stop. Likely causes: every special token masked by id; PAD = EOS with "
        "the pad id ignored (find padding by the attention mask instead); a completion mask "
        "that ends before EOS"
    )
