"""The answer matrix of notebooks 07-10 (issue 38): name_the_bugs, my_loss_fn (07); my_lr_at,
my_lr_prediction, top_p_filter (08); my_lowest_loss, my_constrained_chance, my_floor (09);
my_set_nll, my_context_coverage, my_document_coverage, my_decode_step (10). See ``_answers.py``
for what each entry holds."""

from __future__ import annotations

import copy
import functools
import math
from collections import Counter, OrderedDict

import numpy as np
import torch
import torch.nn.functional as F
from _answers import Answers

import lmcore
from lmcore import causal_lm_loss
from lmcore.course.checks import answer_digest
from lmcore.course.debugging import exercises as DX
from lmcore.course.debugging import losses as DL
from lmcore.course.floor import decoding as FD
from lmcore.course.floor import exercises as FX
from lmcore.course.floor import lesson as FL
from lmcore.course.rewards import data as RD
from lmcore.course.rewards import exercises as RX
from lmcore.course.rewards import inference as RI
from lmcore.course.rewards import lesson as RL
from lmcore.course.training import exercises as TX
from lmcore.course.training import lesson as TL
from lmcore.course.training import lr_prediction as TP
from lmcore.data import ChatTokenizer, chat_arithmetic_entropy
from lmcore.sample import filter_logits, next_token_distribution
from lmcore.train import lr_at

ANSWERS: dict[str, Answers] = {}
TOK = ChatTokenizer()


# ---------------------------------------------------------------- 07: name the bugs (choices)

_BUGS = {
    "P": "mask_after_shift",
    "Q": "token_denominator",
    "R": "correct",
    "S": "specials_masked",
    "T": "detached",
    "U": "log_of_softmax",
}


def _bugs_literal():
    return {
        "P": "mask_after_shift",
        "Q": "token_denominator",
        "R": "correct",
        "S": "specials_masked",
        "T": "detached",
        "U": "log_of_softmax",
    }


def _bugs_zip():
    return dict(
        zip(
            "PQRSTU",
            [
                "mask_after_shift",
                "token_denominator",
                "correct",
                "specials_masked",
                "detached",
                "log_of_softmax",
            ],
        )
    )


def _bugs_reversed_ordered():  # filled in another order, an OrderedDict (a dict subclass)
    out = OrderedDict()
    for letter in "UTSRQP":
        out[letter] = _BUGS[letter]
    return out


@functools.wraps(_bugs_literal)
def _bugs_wrapped():
    return {letter: cause for letter, cause in sorted(_BUGS.items())}


def _bugs_with(**changed):
    return lambda: dict(_BUGS, **changed)


def _bugs_by_digest():  # a search of the key: every choice hashed until one matches
    return {
        letter: next(c for c in DX.BUG_CHOICES if answer_digest("name_the_bugs", letter, c) == digest)
        for letter, digest in DX._MYSTERY_KEY.items()
    }


def _bugs_by_sha256():  # the same search with hashlib itself
    import hashlib

    def digest(letter, c):
        return hashlib.sha256(f"name_the_bugs\x00{letter!r}\x00{c!r}".encode()).hexdigest()

    return {
        letter: next(c for c in DX.BUG_CHOICES if digest(letter, c) == key)
        for letter, key in DX._MYSTERY_KEY.items()
    }


def _bugs_by_the_checker():  # an oracle search through the checker (one probe shown)
    guess = {letter: "correct" for letter in "PQRSTU"}
    DX.check_mystery(lambda: guess)
    return guess


ANSWERS["name_the_bugs"] = Answers(
    check=DX.check_mystery,
    no_float32="the answers are choices (keys of BUG_CHOICES), no float quantity",
    right={
        "literal": _bugs_literal,
        "zip_of_two_lists": _bugs_zip,
        "reversed_ordered_dict": _bugs_reversed_ordered,
        "wrapped": _bugs_wrapped,
    },
    wrong={
        "P_the_signatures_other_cause": _bugs_with(P="padding_scored"),
        "Q_global_num_items": _bugs_with(Q="global_num_items"),
        "S_eos_is_pad": _bugs_with(S="eos_is_pad"),
        "T_batch_means": _bugs_with(T="batch_means"),
        "R_and_T_swapped": _bugs_with(R="detached", T="correct"),
        "everything_correct": lambda: dict.fromkeys("PQRSTU", "correct"),
        "U_correct_as_R_passes_every_row_too": _bugs_with(U="correct"),
        "R_and_U_swapped": _bugs_with(R="log_of_softmax", U="correct"),
        "U_softmax_first": _bugs_with(U="softmax_first"),
        "titles_not_keys": lambda: {k: DX.BUG_CHOICES[v] for k, v in _BUGS.items()},
        "lowercase_letters": lambda: {k.lower(): v for k, v in _BUGS.items()},
        "a_list_not_a_dict": lambda: list(_BUGS.values()),
    },
    refused={
        "search_of_the_key_by_answer_digest": (_bugs_by_digest, "the answer key"),
        "search_of_the_key_by_sha256": (_bugs_by_sha256, "the answer key"),
        "oracle_search_through_the_checker": (_bugs_by_the_checker, "the checker"),
    },
)


# ---------------------------------------------------------------- 07: completion-only loss


def _completion_labels(ids, mask):
    prompt = torch.arange(ids.shape[1]) < DX.PROMPT
    return ids.masked_fill((mask == 0) | prompt, -100)


def _z(logits, ids, mask, where=None, power=2, reduce="mean"):
    """Z_LOSS times (log Z)^power over the positions ``where`` (default: those the loss scores)."""
    if where is None:
        where = torch.zeros(ids.shape, dtype=torch.bool)
        where[:, :-1] = _completion_labels(ids, mask)[:, 1:] != -100
    log_z = torch.logsumexp(logits, -1)[where].pow(power)
    return DX.Z_LOSS * (log_z.mean() if reduce == "mean" else log_z.sum())


def _plus_z(fn):
    """A completion loss plus the right z-loss (taken before fn runs: fn may change its inputs)."""

    def plus_z(lg, ids, m):
        z = _z(lg, ids, m)
        return fn(lg, ids, m) + z

    return plus_z


def _loss_reshape(logits, input_ids, attention_mask):
    V = logits.shape[-1]
    labels = _completion_labels(input_ids, attention_mask)
    nll = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))
    return nll + _z(logits, input_ids, attention_mask)


def _loss_transpose_sum_over_count(logits, input_ids, attention_mask):  # (N, V, L) layout, sum / count
    labels = _completion_labels(input_ids, attention_mask)[:, 1:]
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels, reduction="sum")
    keep = labels != -100
    z_sum = torch.logsumexp(logits[:, :-1], -1).pow(2).masked_fill(~keep, 0).sum()  # (log Z)^2 summed
    return (nll + DX.Z_LOSS * z_sum) / keep.sum()


def _loss_float32_by_hand(logits, input_ids, attention_mask):  # log-softmax by the max trick, float32
    z = logits[:, :-1].float()
    labels = _completion_labels(input_ids, attention_mask)[:, 1:]
    keep = labels != -100
    m = z.amax(-1, keepdim=True)
    log_z = m + (z - m).exp().sum(-1, keepdim=True).log()  # (N, L-1, 1)
    logp = z - log_z
    picked = logp.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    per_target = -picked + DX.Z_LOSS * log_z[..., 0] ** 2
    return (per_target * keep).sum() / keep.sum()


def _loss_row_sums(logits, input_ids, attention_mask):  # per-row sums first, then one division
    labels = _completion_labels(input_ids, attention_mask)
    total, count = 0.0, 0
    for i in range(len(input_ids)):
        y = labels[i, 1:]
        total = total + F.cross_entropy(logits[i, :-1], y, reduction="sum", ignore_index=-100)
        total = total + DX.Z_LOSS * torch.logsumexp(logits[i, :-1][y != -100], -1).pow(2).sum()
        count += int((y != -100).sum())
    return total / count


@functools.wraps(_loss_reshape)
def _loss_wrapped(logits, input_ids, attention_mask):
    return _loss_reshape(logits, input_ids, attention_mask)


def _loss_without_prompt_mask(lg, ids, m):
    labels = ids.masked_fill(m == 0, -100)
    return F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), labels[:, 1:].reshape(-1))


def _loss_prompt_off_by_one(lg, ids, m):  # masks the first PROMPT targets, not the prompt's tokens
    labels = ids.masked_fill(m == 0, -100)[:, 1:].clone()
    labels[:, : DX.PROMPT] = -100
    return F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), labels.reshape(-1))


def _loss_token_count(lg, ids, m):
    labels = _completion_labels(ids, m)
    nll = F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), labels[:, 1:].reshape(-1), reduction="sum")
    return nll / m.sum()


def _loss_row_means(lg, ids, m):
    keep = [i for i in range(len(ids)) if m[i, DX.PROMPT :].sum() > 0]
    return torch.stack([_loss_reshape(lg[i : i + 1], ids[i : i + 1], m[i : i + 1]) for i in keep]).mean()


def _loss_no_shift(lg, ids, m):
    labels = _completion_labels(ids, m)
    return F.cross_entropy(lg.reshape(-1, lg.shape[-1]), labels.reshape(-1))


def _loss_sum(lg, ids, m):
    labels = _completion_labels(ids, m)
    return F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), labels[:, 1:].reshape(-1), reduction="sum")


def _loss_in_place(lg, ids, m):
    ids[(m == 0) | (torch.arange(ids.shape[1]) < DX.PROMPT)] = -100
    return F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1))


def _loss_double_shift(lg, ids, m):  # labels shifted, then sliced again: position t -> token t + 2
    labels = _completion_labels(ids, m)[:, 1:]
    return F.cross_entropy(lg[:, :-2].reshape(-1, lg.shape[-1]), labels[:, 1:].reshape(-1))


def _loss_padding_scored(lg, ids, m):  # the prompt masked, the padding left as targets
    labels = ids.masked_fill(torch.arange(ids.shape[1]) < DX.PROMPT, -100)
    return F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), labels[:, 1:].reshape(-1))


def _loss_padding_masked_by_position(lg, ids, m):  # -100 where the INPUT is padding, after the shift
    targets = ids[:, 1:].clone()
    targets[(m[:, :-1] == 0) | (torch.arange(ids.shape[1] - 1) < DX.PROMPT - 1)] = -100
    return F.cross_entropy(lg[:, :-1].transpose(1, 2), targets)  # the last real token -> PAD is scored


def _loss_eos_masked(lg, ids, m):  # special tokens are not targets: EOS masked with the padding
    labels = _completion_labels(ids, m).masked_fill(ids == DX.EOS, -100)
    return F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), labels[:, 1:].reshape(-1))


def _loss_count_plus_one(lg, ids, m):  # one more than the targets in the denominator
    labels = _completion_labels(ids, m)[:, 1:]
    nll = F.cross_entropy(lg[:, :-1].reshape(-1, lg.shape[-1]), labels.reshape(-1), reduction="sum")
    return nll / ((labels != -100).sum() + 1)


def _loss_last_positions_detached(lg, ids, m):  # the value counts every target; the last 3 get no gradient
    cut = torch.cat([lg[:, :-3], lg[:, -3:].detach()], dim=1)
    return _loss_reshape(cut, ids, m)


def _loss_bfloat16(lg, ids, m):  # the loss computed on bfloat16 logits
    return _loss_reshape(lg.bfloat16(), ids, m).float()


ANSWERS["my_loss_fn"] = Answers(
    check=DX.check_loss_fn,
    right={
        "reshape": _loss_reshape,
        "transpose_sum_over_count": _loss_transpose_sum_over_count,
        "float32_log_softmax_by_hand": _loss_float32_by_hand,
        "row_sums_then_one_division": _loss_row_sums,
        "wrapped": _loss_wrapped,
    },
    wrong={
        "no_prompt_mask": _plus_z(_loss_without_prompt_mask),
        "prompt_off_by_one": _plus_z(_loss_prompt_off_by_one),
        "divided_by_tokens": _plus_z(_loss_token_count),
        "mean_of_row_means": _loss_row_means,
        "no_shift": _plus_z(_loss_no_shift),
        "sum_not_mean": _plus_z(_loss_sum),
        "softmax_first": lambda lg, ids, m: _loss_reshape(lg.softmax(-1), ids, m),
        "modifies_input_ids": _plus_z(_loss_in_place),
        "double_shift": _plus_z(_loss_double_shift),
        "padding_scored": _plus_z(_loss_padding_scored),
        "padding_masked_after_the_shift": _plus_z(_loss_padding_masked_by_position),
        "eos_masked": _plus_z(_loss_eos_masked),
        "count_plus_one": _plus_z(_loss_count_plus_one),
        "constant_added": lambda lg, ids, m: _loss_reshape(lg, ids, m) + 1e-3,
        "no_z_loss": lambda lg, ids, m: _loss_reshape(lg, ids, m) - _z(lg, ids, m),
        "z_loss_at_every_position": lambda lg, ids, m: (
            _loss_reshape(lg, ids, m)
            - _z(lg, ids, m)
            + _z(lg, ids, m, where=torch.ones(ids.shape, dtype=torch.bool))
        ),
        "z_loss_at_every_real_token": lambda lg, ids, m: (
            _loss_reshape(lg, ids, m) - _z(lg, ids, m) + _z(lg, ids, m, where=m == 1)
        ),
        "z_loss_at_the_completion_tokens_own_positions": lambda lg, ids, m: (
            _loss_reshape(lg, ids, m)
            - _z(lg, ids, m)
            + _z(lg, ids, m, where=_completion_labels(ids, m) != -100)
        ),
        "z_loss_at_the_real_positions_that_predict": lambda lg, ids, m: (
            _loss_reshape(lg, ids, m)
            - _z(lg, ids, m)
            + _z(
                lg, ids, m, where=torch.cat([m[:, :-1] == 1, torch.zeros_like(m[:, :1], dtype=torch.bool)], 1)
            )
        ),
        "z_loss_coefficient_1e-3": lambda lg, ids, m: _loss_reshape(lg, ids, m) + 9 * _z(lg, ids, m),
        "z_loss_on_detached_logits": lambda lg, ids, m: (
            _loss_reshape(lg, ids, m) - _z(lg, ids, m) + _z(lg.detach(), ids, m)
        ),
        "z_loss_summed": lambda lg, ids, m: (
            _loss_reshape(lg, ids, m) - _z(lg, ids, m) + _z(lg, ids, m, reduce="sum")
        ),
        "log_z_not_squared": lambda lg, ids, m: (
            _loss_reshape(lg, ids, m) - _z(lg, ids, m) + _z(lg, ids, m, power=1)
        ),
        "log_of_a_sum_of_exps": lambda lg, ids, m: (
            _loss_reshape(lg, ids, m)
            - _z(lg, ids, m)
            + DX.Z_LOSS
            * torch.log(lg[:, :-1].exp().sum(-1))[_completion_labels(ids, m)[:, 1:] != -100].pow(2).mean()
        ),
        "bfloat16": _loss_bfloat16,
        "last_positions_detached": _loss_last_positions_detached,
    },
    refused={
        "lmcore_loss": (
            lambda lg, ids, m: causal_lm_loss(lg, _completion_labels(ids, m)) + _z(lg, ids, m),
            "called lmcore.loss.causal_lm_loss",
        ),
        "the_checks_reference": (
            lambda lg, ids, m: DX._completion_loss(lg, ids, m),
            "that is the check's reference",
        ),
        "the_notebooks_loss_correct": (DL.loss_correct, "called lmcore"),
    },
    first_hints={  # DX.explain_loss: the first position graded wrongly, as a question
        "no_prompt_mask": "should the model learn to write the prompt?",
        "prompt_off_by_one": "the first of the completion",
        "divided_by_tokens": "how many of those tokens are targets?",
        "mean_of_row_means": "however long its row?",
        "no_shift": "the token it already holds",
        "sum_not_mean": "grows with their number",
        "softmax_first": "raw scores",
        "double_shift": "not the token after it",
        "padding_scored": "last real token",
        "padding_masked_after_the_shift": "last real token",
        "eos_masked": "when to stop writing",
        "count_plus_one": "what does your loss divide by?",
        "constant_added": "besides the mean NLL and the z-loss",
        "no_z_loss": "what does the exercise add to it, and where?",
        "z_loss_at_every_position": "which positions' log Z should the penalty see?",
        "z_loss_at_every_real_token": "which positions' log Z should the penalty see?",
        "z_loss_at_the_completion_tokens_own_positions": "which positions' log Z should the penalty see?",
        "z_loss_summed": "a sum or a mean?",
        "z_loss_on_detached_logits": "does autograd not follow back to the logits?",
        "z_loss_at_the_real_positions_that_predict": "which positions' log Z should the penalty see?",
        "z_loss_coefficient_1e-3": "which coefficient multiplies",
        "log_z_not_squared": "which power of log Z",
        "log_of_a_sum_of_exps": "an inf or a nan out of large logits",
        "bfloat16": "in which precision",
        "last_positions_detached": "cuts it from the graph?",
    },
)


# ---------------------------------------------------------------- 08: the learning-rate schedule


def _lr_branches(step, *, lr, min_lr, warmup_steps, max_steps):
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)


def _lr_float32(step, *, lr, min_lr, warmup_steps, max_steps):
    f = np.float32
    if step < warmup_steps:
        return float(f(lr) * f(step + 1) / f(warmup_steps))
    if step >= max_steps:
        return float(f(min_lr))
    progress = f(step - warmup_steps) / f(max(1, max_steps - warmup_steps))
    return float(f(min_lr) + f(0.5) * (f(1) + np.cos(f(np.pi) * progress)) * (f(lr) - f(min_lr)))


def _lr_clipped_numpy(step, *, lr, min_lr, warmup_steps, max_steps):  # one cosine, clipped, no branch after
    warm = lr * (step + 1) / max(warmup_steps, 1)
    t = np.clip((step - warmup_steps) / max(1, max_steps - warmup_steps), 0.0, 1.0)
    cosine = min_lr + (lr - min_lr) * (np.cos(np.pi * t) + 1) / 2
    return float(warm if step < warmup_steps else cosine)


def _lr_cos_squared(step, *, lr, min_lr, warmup_steps, max_steps):  # (1 + cos x) / 2 = cos^2(x / 2)
    if step < warmup_steps:
        return (step + 1) * lr / warmup_steps
    t = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    return min_lr + (lr - min_lr) * math.cos(math.pi * t / 2) ** 2


@functools.wraps(_lr_branches)
def _lr_wrapped(step, **kw):
    return _lr_branches(step, **kw)


def _lr_warmup_from_zero(step, **kw):
    if step < kw["warmup_steps"]:
        return kw["lr"] * step / kw["warmup_steps"]
    return _lr_branches(step, **kw)


def _lr_cosine_counts_from_0(step, *, lr, min_lr, warmup_steps, max_steps):
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    return min_lr + 0.5 * (1 + math.cos(math.pi * step / max_steps)) * (lr - min_lr)


def _lr_cosine_to_zero(step, *, lr, min_lr, warmup_steps, max_steps):
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * progress)) * lr


def _lr_rises_again(step, *, lr, min_lr, warmup_steps, max_steps):
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)


def _lr_linear_decay(step, *, lr, min_lr, warmup_steps, max_steps):
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    return lr - (step - warmup_steps) / max(1, max_steps - warmup_steps) * (lr - min_lr)


def _lr_decay_over_one_step_less(step, *, lr, min_lr, warmup_steps, max_steps):  # lands a step early: right
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps - 1))
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)


def _lr_shaped(shape, warm=None):
    """Warmup ``warm(step, lr, warmup_steps)`` (lr * (step + 1) / warmup_steps, lmcore's, by
    default), then min_lr + (lr - min_lr) * shape(t) over the decay, min_lr after."""

    def schedule(step, *, lr, min_lr, warmup_steps, max_steps):
        if step < warmup_steps:
            return warm(step, lr, warmup_steps) if warm else lr * (step + 1) / warmup_steps
        if step >= max_steps:
            return min_lr
        return min_lr + (lr - min_lr) * shape((step - warmup_steps) / max(1, max_steps - warmup_steps))

    return schedule


def _lr_smoothstep(step, **kw):  # another curve flat at both ends: 1 - (3t^2 - 2t^3)
    return _lr_shaped(lambda t: 1 - t * t * (3 - 2 * t))(step, **kw)


def _lr_warmup_from_half(step, *, lr, min_lr, warmup_steps, max_steps):  # equal steps from lr/2 (W > 1)
    if step < warmup_steps:
        if warmup_steps == 1:
            return lr
        return lr / 2 + lr / 2 * step / (warmup_steps - 1)
    return _lr_branches(step, lr=lr, min_lr=min_lr, warmup_steps=warmup_steps, max_steps=max_steps)


def _lr_quarter_cosine(step, **kw):  # flat at the start, steep at the end
    return _lr_shaped(lambda t: math.cos(math.pi * t / 2))(step, **kw)


def _lr_hold_line_hold(step, **kw):  # flat ends by the letter, corners at both joins
    return _lr_shaped(lambda t: 1.0 if t <= 0.05 else 0.0 if t >= 0.95 else 1 - (t - 0.05) / 0.9)(step, **kw)


def _lr_cut_halfway(step, **kw):  # lr, then min_lr from halfway: flat at both ends, all the drop in one step
    return _lr_shaped(lambda t: 1.0 if t < 0.5 else 0.0)(step, **kw)


def _lr_by_lmcore_scheduler(step, **kw):  # torch's LambdaLR over lmcore's lr_at: lr_at all the same
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=kw["lr"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, **kw) / kw["lr"])
    for _ in range(step):
        opt.step()
        sched.step()
    return opt.param_groups[0]["lr"]


ANSWERS["my_lr_at"] = Answers(
    check=TX.check_lr_schedule,
    right={
        "branches": _lr_branches,
        "float32": _lr_float32,
        "clipped_numpy": _lr_clipped_numpy,
        "cos_squared_half_angle": _lr_cos_squared,
        "wrapped": _lr_wrapped,
        "smoothstep": _lr_smoothstep,
        "lands_a_step_early": _lr_decay_over_one_step_less,
        "warmup_in_equal_steps_from_half": _lr_warmup_from_half,
    },
    wrong={
        "warmup_from_zero": _lr_warmup_from_zero,
        "cosine_counts_from_step_0": _lr_cosine_counts_from_0,
        "cosine_to_zero": _lr_cosine_to_zero,
        "rises_again_after_max_steps": _lr_rises_again,
        "linear_decay": _lr_linear_decay,
        "quarter_cosine": _lr_quarter_cosine,
        "cut_to_min_lr_halfway": _lr_cut_halfway,
        "hold_line_hold": _lr_hold_line_hold,
    },
    first_hints={
        "warmup_from_zero": "an update at that rate",
        "cosine_counts_from_step_0": "must the decay start from",
        "cosine_to_zero": "turn back up",
        "rises_again_after_max_steps": "once the decay is over",
        "linear_decay": "leave its start",
        "quarter_cosine": "arrive at its end",
        "cut_to_min_lr_halfway": "over the whole phase",
        "hold_line_hold": "which curve turns gradually",
    },
    refused={
        "lmcore_lr_at": (lambda step, **kw: lr_at(step, **kw), "called lmcore.train.optim.lr_at"),
        "torch_scheduler_over_lr_at": (_lr_by_lmcore_scheduler, "called lmcore.train.optim.lr_at"),
    },
)


# ---------------------------------------------------------------- 08: predicting the learning-rate sweep
# The judge reads only the sweep's numbers: these are notebook 08's two seeds as it printed them
# (held-out loss, last training loss per rate), so the matrix needs no training.
_HELD_OUT = {0: (4.006, 2.941, 2.782, 2.905, 3.219, 88.949), 1: (4.018, 2.981, 2.755, 2.955, 3.229, 74.446)}
_LAST = {0: (4.049, 2.863, 2.399, 2.631, 3.053, 133.543), 1: (3.995, 2.955, 2.674, 2.899, 3.142, 74.137)}
_SWEEPS = {
    seed: {
        "lrs": list(TP.RATES),
        "val": dict(zip(TP.RATES, _HELD_OUT[seed])),
        "curves": {r: [4.6, last] for r, last in zip(TP.RATES, _LAST[seed])},
        "ln_v": 4.635,
    }
    for seed in (0, 1)
}


def _judge_prediction(fn):  # what the notebook does: record before the run, grade after it
    from lmcore.course.training import lr_sweep as sweep_module

    finished = sweep_module.LEDGER.finished[:]  # as in a fresh kernel: no sweep has printed results yet
    sweep_module.LEDGER.finished.clear()
    try:
        TP.lock_prediction(fn)
        return TP.check_lr_prediction(fn, _SWEEPS)
    finally:
        sweep_module.LEDGER.finished[:] = finished


def _predict(crawls=(1e-4,), diverges=(1.0,), best=3e-3):
    def my_lr_prediction():
        return {"crawls": list(crawls), "diverges": list(diverges), "best": best}

    return my_lr_prediction


def _predict_numpy():  # numpy floats, a tuple and a set, the keys in another order
    return {"best": np.float64(0.003), "diverges": (1,), "crawls": {np.float32(1e-4)}}


def _predict_by_reasoning():  # the rule of thumb as code: an Adam step moves a weight by about lr
    init, steps = 0.02, 200
    crawls = [r for r in TP.RATES if r * steps <= init]
    diverges = [r for r in TP.RATES if r > 10 * init]
    return {"crawls": crawls, "diverges": diverges, "best": 3e-3}


@functools.cache
def _predict_cached():  # a decorated function
    return {"crawls": [0.0001], "diverges": [1e0], "best": 0.003}


def _predict_by_running_it():  # runs (a sliver of) the sweep instead of predicting
    from lmcore.course.training.lr_sweep import lr_sweep
    from lmcore.data import load_corpus

    lr_sweep(load_corpus("python-docs"), [1e-3], steps=1, n_val=1)
    return _predict()()


def _predict_by_asking_the_judge():
    TP.sweep_outcome(_SWEEPS)
    return _predict()()


_CALLS = []


def _predict_changed_after_the_run():  # says one thing before the run and another after it
    _CALLS.append(1)
    return _predict(best=1e-2 if len(_CALLS) % 2 else 3e-3)()


ANSWERS["my_lr_prediction"] = Answers(
    check=_judge_prediction,
    no_float32="the answer is a choice among the sweep's rates, no computed float",
    right={
        "literal": _predict(),
        "numpy_floats_tuple_and_set": _predict_numpy,
        "rule_of_thumb_as_code": _predict_by_reasoning,
        "decorated": _predict_cached,
    },
    wrong={
        "0.001_crawls": _predict(crawls=(1e-4, 1e-3)),
        "nothing_crawls": _predict(crawls=()),
        "0.1_diverges": _predict(diverges=(0.1, 1.0)),
        "nothing_diverges": _predict(diverges=()),
        "best_is_the_largest_that_learns": _predict(best=0.1),
        "best_0.01": _predict(best=1e-2),
        "a_rate_not_in_the_grid": _predict(best=5e-3),
        "crawls_and_diverges_both": _predict(crawls=(1e-4, 1.0)),
        "a_list_not_a_dict": lambda: [1e-4, 1.0, 3e-3],
    },
    first_hints={
        "0.001_crawls": "travel in 200 steps at lr 0.001",
        "nothing_crawls": "travel in 200 steps at lr 0.0001",
        "0.1_diverges": "learning noisily",
        "nothing_diverges": "undo an overshoot",
        "best_is_the_largest_that_learns": "what do the larger ones gain",
        "best_0.01": "what do the larger ones gain",
    },
    refused={
        "running_the_sweep": (_predict_by_running_it, "that runs the experiment"),
        "asking_the_judge": (_predict_by_asking_the_judge, "asks the judge"),
        "changed_after_the_run": (_predict_changed_after_the_run, "recorded before the sweep"),
    },
)


# ---------------------------------------------------------------- 08: top-p filtering


def _top_p_sorted(probs, p):
    sorted_p, order = torch.sort(probs, descending=True)
    mass_before = torch.cumsum(sorted_p, 0) - sorted_p
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order] = mass_before < p
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum()


def _top_p_float32(probs, p):
    return _top_p_sorted(probs.float(), p)


def _top_p_loop(probs, p):  # add the most likely tokens one at a time until the mass reaches p
    values = probs.tolist()
    order = sorted(range(len(values)), key=lambda i: -values[i])
    kept, mass = [], 0.0
    for i in order:
        kept.append(i)
        mass += values[i]
        if mass >= p:
            break
    out = torch.zeros_like(probs)
    out[kept] = probs[kept]
    return out / out.sum()


def _top_p_numpy_cut(probs, p):  # the count of tokens to keep from a cumulative sum, NumPy
    x = probs.numpy()
    order = np.argsort(-x, kind="stable")
    k = int(np.searchsorted(np.cumsum(x[order]), p)) + 1
    out = np.zeros_like(x)
    out[order[:k]] = x[order[:k]]
    return torch.from_numpy(out / out.sum())


@torch.no_grad()
def _top_p_no_grad(probs, p):
    return _top_p_sorted(probs, p)


def _top_p_excludes_crossing(probs, p):
    s, order = torch.sort(probs, descending=True)
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order] = torch.cumsum(s, 0) <= p
    keep[order[0]] = True
    out = torch.where(keep, probs, 0.0)
    return out / out.sum()


def _top_p_no_renormalise(probs, p):
    out = _top_p_sorted(probs, p)
    return out * probs[out > 0].sum()


def _top_p_ascending(probs, p):
    s, order = torch.sort(probs)
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order] = torch.cumsum(s, 0) - s < p
    out = torch.where(keep, probs, 0.0)
    return out / out.sum()


def _top_p_unsorted(probs, p):
    keep = torch.cumsum(probs, 0) - probs < p
    out = torch.where(keep, probs, 0.0)
    return out / out.sum()


def _top_p_sorted_order_returned(probs, p):  # forgets to put the tokens back in their order
    s, _ = torch.sort(probs, descending=True)
    out = torch.where(torch.cumsum(s, 0) - s < p, s, 0.0)
    return out / out.sum()


def _top_p_last_tied_first(probs, p):  # at a tie, the later token first: the other smallest set
    order = sorted(range(len(probs)), key=lambda k: (-float(probs[k]), -k))
    out, mass = torch.zeros_like(probs), 0.0
    for k in order:
        if mass >= p:
            break
        out[k], mass = probs[k], mass + float(probs[k])
    return out / out.sum()


def _top_p_every_tie_at_the_edge(probs, p):  # a threshold: keeps every token tied with the crossing one
    s, _ = torch.sort(probs, descending=True)
    edge = s[int((torch.cumsum(s, 0) >= p - 1e-12).nonzero()[0, 0])]
    out = torch.where(probs >= edge, probs, 0.0)
    return out / out.sum()


def _top_p_mass_before_at_most_p(probs, p):  # <= p: keeps the next token when the mass before it is p
    s, i = torch.sort(probs, descending=True)
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[i] = torch.cumsum(s, 0) - s <= p
    out = torch.where(keep, probs, 0.0)
    return out / out.sum()


ANSWERS["top_p_filter"] = Answers(
    check=TL.check_top_p,
    right={
        "the_other_tied_token": _top_p_last_tied_first,
        "sorted_mass_before": _top_p_sorted,
        "float32": _top_p_float32,
        "loop_until_p": _top_p_loop,
        "numpy_searchsorted": _top_p_numpy_cut,
        "no_grad": _top_p_no_grad,
    },
    wrong={
        "excludes_the_crossing_token": _top_p_excludes_crossing,
        "not_renormalised": _top_p_no_renormalise,
        "ascending_sort": _top_p_ascending,
        "cumulative_in_vocabulary_order": _top_p_unsorted,
        "returned_in_sorted_order": _top_p_sorted_order_returned,
        "every_tie_at_the_edge_kept": _top_p_every_tie_at_the_edge,
        "mass_before_at_most_p": _top_p_mass_before_at_most_p,
        "large_p_skipped": lambda probs, p: probs.clone() if p > 0.9 else _top_p_sorted(probs, p),
    },
    first_hints={  # TL._explain_top_p: the property the mistake broke, as a question
        "excludes_the_crossing_token": "takes the sum across p",
        "not_renormalised": "what must a distribution you draw from add up to",
        "ascending_sort": "the smallest set that reaches p",
        "cumulative_in_vocabulary_order": "less likely than one you dropped",
        "returned_in_sorted_order": "sorted by size",
        "every_tie_at_the_edge_kept": "the smallest set that reaches p",
        "mass_before_at_most_p": "the smallest set that reaches p",
        "large_p_skipped": "the smallest set that reaches p",
    },
    refused={
        "lmcore_filter_logits": (
            lambda probs, p: torch.softmax(filter_logits(probs.log(), top_p=p), -1),
            "called lmcore.sample.filter_logits",
        ),
        "the_checks_reference": (TL.top_p_reference, "that is the check's reference"),
        "lmcore_next_token_distribution": (
            lambda probs, p: next_token_distribution(probs.log(), top_p=p).double(),
            "lmcore's filter",
        ),
    },
)


# ---------------------------------------------------------------- 09: the lowest loss on a sample (conditional entropy)


def _entropy_mask(p):
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _floor_counter(contexts, tokens):  # group by context with Counters, one context at a time
    from collections import defaultdict

    groups = defaultdict(Counter)
    for c, x in zip(contexts.tolist(), tokens.tolist()):
        groups[c][x] += 1
    n = len(tokens)
    return sum(
        sum(g.values()) / n * _entropy_mask(np.array(list(g.values())) / sum(g.values()))
        for g in groups.values()
    )


def _floor_per_pair_mean(contexts, tokens):  # the mean over pairs of -ln(n_cx / n_c)
    pairs = np.stack([contexts, tokens], 1)
    _, inv, joint = np.unique(pairs, axis=0, return_inverse=True, return_counts=True)
    _, cinv, ctx = np.unique(contexts, return_inverse=True, return_counts=True)
    return float(-np.log(joint[inv.ravel()] / ctx[cinv.ravel()]).mean())


def _floor_chain_rule(contexts, tokens):  # H(C, T) - H(C), the chain rule, in float32
    joint = np.unique(np.stack([contexts, tokens], 1), axis=0, return_counts=True)[1].astype(np.float32)
    ctx = np.unique(contexts, return_counts=True)[1].astype(np.float32)
    h = lambda c: -(c / c.sum() * np.log(c / c.sum())).sum()  # noqa: E731
    return float(h(joint) - h(ctx))


def _floor_torch_fit(contexts, tokens):  # another algorithm: fit free logits per context by LBFGS
    _, ci = np.unique(contexts, return_inverse=True)
    _, ti = np.unique(tokens, return_inverse=True)
    z = torch.zeros(int(ci.max()) + 1, int(ti.max()) + 1, dtype=torch.float64, requires_grad=True)
    ci, ti = torch.from_numpy(ci.ravel()), torch.from_numpy(ti.ravel())
    opt = torch.optim.LBFGS(
        [z], max_iter=2000, tolerance_grad=1e-13, tolerance_change=1e-16, line_search_fn="strong_wolfe"
    )

    def loss():
        opt.zero_grad()
        out = -torch.log_softmax(z, 1)[ci, ti].mean()
        out.backward()
        return out

    for _ in range(3):
        opt.step(loss)
    return float(loss())


@functools.wraps(_floor_counter)
def _floor_wrapped(contexts, tokens):
    return _floor_per_pair_mean(contexts, tokens)


def _floor_ignoring_contexts(contexts, tokens):
    return _entropy_mask(np.unique(tokens, return_counts=True)[1] / len(tokens))


def _floor_each_context_once(contexts, tokens):
    return float(
        np.mean([_floor_ignoring_contexts(None, tokens[contexts == c]) for c in np.unique(contexts)])
    )


ANSWERS["my_lowest_loss"] = Answers(
    check=FX.check_lowest_loss,
    right={
        "counters": _floor_counter,
        "per_pair_mean": _floor_per_pair_mean,
        "chain_rule_float32": _floor_chain_rule,
        "lbfgs_fit": _floor_torch_fit,
        "wrapped": _floor_wrapped,
    },
    wrong={
        "bits": lambda c, t: _floor_counter(c, t) / math.log(2),
        "log10": lambda c, t: _floor_counter(c, t) / math.log(10),
        "sign": lambda c, t: -_floor_counter(c, t),
        "a_model_can_memorise_every_pair": lambda c, t: 0.0,
        "contexts_ignored": _floor_ignoring_contexts,
        "joint_entropy_of_the_pairs": lambda c, t: _entropy_mask(
            np.unique(np.stack([c, t], 1), axis=0, return_counts=True)[1] / len(t)
        ),
        "each_context_counted_once": _floor_each_context_once,
        "uniform_over_tokens_seen_per_context": lambda c, t: float(
            np.mean([math.log(np.unique(t[c == x]).size) for x in c])
        ),
        "a_total_not_a_mean": lambda c, t: len(t) * _floor_counter(c, t),
        "zero_counts_give_nan": lambda c, t: float(
            sum(
                -np.sum(
                    (f := np.bincount(t[c == x], minlength=t.max() + 1) / len(t))
                    * np.log(f / (c == x).mean())
                )
                for x in np.unique(c)
            )
        ),
    },
    first_hints={
        "bits": "which logarithm",
        "log10": "which logarithm",
        "sign": "sign flipped",
        "a_model_can_memorise_every_pair": "followed by different tokens",
        "contexts_ignored": "ignores the contexts",
        "joint_entropy_of_the_pairs": "one outcome",
        "each_context_counted_once": "counts once",
        "uniform_over_tokens_seen_per_context": "the uniform model over the tokens seen",
        "a_total_not_a_mean": "a total over",
        "zero_counts_give_nan": "0 * ln 0",
    },
    refused={
        "course_entropy_per_context": (
            lambda c, t: sum(
                (c == x).mean() * FL.entropy(np.unique(t[c == x], return_counts=True)[1] / (c == x).sum())
                for x in np.unique(c)
            ),
            "called lmcore.course.floor.lesson.entropy",
        ),
        "torch_categorical_entropy": (
            lambda c, t: sum(
                (c == x).mean()
                * float(
                    torch.distributions.Categorical(
                        probs=torch.from_numpy(np.unique(t[c == x], return_counts=True)[1] / (c == x).sum())
                    ).entropy()
                )
                for x in np.unique(c)
            ),
            "a library's entropy or KL in one call",
        ),
        "lmcore_unigram_entropy_per_context": (
            lambda c, t: sum(
                (c == x).mean()
                * lmcore.data.base.unigram_entropy(torch.from_numpy(t[c == x].astype(np.int64)))
                for x in np.unique(c)
            ),
            "lmcore's unigram entropy in one call",
        ),
    },
)


# ---------------------------------------------------------------- 09: the constrained sampler's chance


def _keep(logits, allowed):
    keep = torch.zeros(logits.shape[-1], dtype=torch.bool)
    keep[list(allowed)] = True
    return keep


def _chance_masked_softmax(logits, allowed, token):
    return torch.softmax(logits.masked_fill(~_keep(logits, allowed), float("-inf")), -1)[..., token]


def _chance_logsumexp(logits, allowed, token):  # exp(z_t - logsumexp over the allowed), 0 if forbidden
    if token not in allowed:
        return torch.zeros(logits.shape[:-1], dtype=logits.dtype)
    return torch.exp(logits[..., token] - torch.logsumexp(logits[..., list(allowed)], -1))


def _chance_softmax_of_the_allowed(logits, allowed, token):  # a softmax over the allowed columns alone
    if token not in allowed:
        return torch.zeros(logits.shape[:-1])
    return torch.softmax(logits[..., list(allowed)].float(), -1)[..., list(allowed).index(token)]


def _chance_numpy_loop(logits, allowed, token):  # numpy, one row at a time, max subtracted by hand
    rows = logits.detach().numpy().reshape(-1, logits.shape[-1])
    out = []
    for row in rows:
        z = row[list(allowed)]
        e = np.exp(z - z.max())
        out.append(e[list(allowed).index(token)] / e.sum() if token in allowed else 0.0)
    return np.array(out).reshape(tuple(logits.shape[:-1]))


def _chance_minus_1e9(logits, allowed, token):  # -1e9 instead of -inf: exp underflows to 0
    return torch.softmax(torch.where(_keep(logits, allowed), logits, -1e9), -1)[..., token]


def _chance_free(logits, allowed, token):  # the free model's chance: the constraint ignored
    return torch.softmax(logits, -1)[..., token]


def _chance_uniform(logits, allowed, token):  # every allowed token alike
    value = 1 / len(allowed) if token in allowed else 0.0
    return torch.full(logits.shape[:-1], value, dtype=logits.dtype)


def _chance_free_renormalised(logits, allowed, token):  # p_t / P_A from the free softmax: 0 / 0 far apart
    p = torch.softmax(logits, -1)
    return p[..., token] / p[..., list(allowed)].sum(-1) * (token in allowed)


def _chance_exp_over_allowed(logits, allowed, token):  # no max subtracted: overflow at 30,000
    e = torch.exp(logits)
    return e[..., token] / e[..., list(allowed)].sum(-1) * (token in allowed)


def _chance_penalty(logits, allowed, token):  # a finite penalty: enough at logits of 3, not of 30,000
    return torch.softmax(logits - 1e4 * (~_keep(logits, allowed)), -1)[..., token]


def _chance_set_to_minus_1e4(logits, allowed, token):  # forbidden logits set to -1e4, not to -inf
    return torch.softmax(logits.masked_fill(~_keep(logits, allowed), -1e4), -1)[..., token]


def _chance_forbidden_too(logits, allowed, token):  # the renormalised chance, even for a forbidden token
    return torch.exp(logits[..., token] - torch.logsumexp(logits[..., list(allowed)], -1))


def _chance_in_place(logits, allowed, token):
    logits.masked_fill_(~_keep(logits, allowed), float("-inf"))
    return torch.softmax(logits, -1)[..., token]


def _chance_whole_row(logits, allowed, token):  # the whole distribution, not the token's chance
    return torch.softmax(logits.masked_fill(~_keep(logits, allowed), float("-inf")), -1)


ANSWERS["my_constrained_chance"] = Answers(
    check=FX.check_constrained_chance,
    right={
        "masked_softmax": _chance_masked_softmax,
        "logsumexp": _chance_logsumexp,
        "softmax_of_the_allowed_float32": _chance_softmax_of_the_allowed,
        "numpy_loop": _chance_numpy_loop,
        "minus_1e9": _chance_minus_1e9,
        "no_grad": torch.no_grad()(_chance_masked_softmax),
        # float32 from the raw logits: a few float32 spacings off near 800 (a learner's was refused)
        "float32_raw_logsumexp": lambda z, allowed, token: _chance_logsumexp(z.float(), allowed, token),
    },
    wrong={
        "clamped_to_1000": lambda z, allowed, token: _chance_masked_softmax(
            z.clamp(-1000, 1000), allowed, token
        ),
        "free_chance": _chance_free,
        "uniform_over_allowed": _chance_uniform,
        "free_renormalised": _chance_free_renormalised,
        "exp_without_max": _chance_exp_over_allowed,
        "finite_penalty": _chance_penalty,
        "set_to_minus_1e4": _chance_set_to_minus_1e4,
        "forbidden_token_too": _chance_forbidden_too,
        "in_place": _chance_in_place,
        "whole_row": _chance_whole_row,
    },
    first_hints={
        "free_chance": "where does its probability go",
        "uniform_over_allowed": "forget which allowed token",
        "free_renormalised": "not a number",
        "exp_without_max": "not a number",
        "finite_penalty": "which logits decide",
        "forbidden_token_too": "how often",
    },
    refused={
        "course_allow_only": (
            lambda logits, allowed, token: torch.softmax(FD.allow_only(logits, allowed), -1)[..., token],
            "write it yourself",
        ),
        "course_allow_only_by_partial": (
            lambda logits, allowed, token: torch.softmax(
                functools.partial(FD.allow_only)(logits, allowed), -1
            )[..., token],
            "called lmcore.course.floor.decoding.allow_only",
        ),
    },
)


# ---------------------------------------------------------------- 09: the subtraction floor


def _digits(x):
    return len(str(x))


def _floor_enumerate(high):
    nats = targets = 0.0
    for a in range(high + 1):
        for b in range(a + 1):
            p = 1 / ((high + 1) * (a + 1))
            nats -= p * math.log(p)
            targets += p * (_digits(a) + _digits(b) + _digits(a - b) + 5)
    return nats / targets


def _floor_float32(high):
    f = np.float32
    nats = targets = f(0)
    for a in range(high + 1):
        for b in range(a + 1):
            p = f(1) / (f(high + 1) * f(a + 1))
            nats -= p * np.log(p)
            targets += p * f(_digits(a) + _digits(b) + _digits(a - b) + 5)
    return float(nats / targets)


def _floor_closed_form(high):  # H(a) + H(b | a) over E[targets], the expectation a by a
    nats = math.log(high + 1) + sum(math.log(a + 1) for a in range(high + 1)) / (high + 1)
    per_a = [
        sum(_digits(a) + _digits(b) + _digits(a - b) for b in range(a + 1)) / (a + 1) for a in range(high + 1)
    ]
    return nats / (5 + sum(per_a) / (high + 1))


def _floor_tokenizer(high):  # the targets counted by the tokenizer, as the chat corpus counts them
    nats = targets = 0.0
    for a in range(high + 1):
        for b in range(a + 1):
            p = 1 / ((high + 1) * (a + 1))
            nats += p * math.log((high + 1) * (a + 1))
            targets += p * len(TOK.encode(f"<user> {a} - {b} = <assistant> {a - b} ."))
    return nats / targets


@functools.wraps(_floor_enumerate)
def _floor_wrapped(high):
    return _floor_closed_form(high)


def _mean_targets(h):
    return sum(
        (_digits(a) + _digits(b) + _digits(a - b) + 5) / ((h + 1) * (a + 1))
        for a in range(h + 1)
        for b in range(a + 1)
    )


def _floor_mean_of_ratios(h):
    tot = 0.0
    for a in range(h + 1):
        for b in range(a + 1):
            p = 1 / ((h + 1) * (a + 1))
            tot += p * (-math.log(p)) / (_digits(a) + _digits(b) + _digits(a - b) + 5)
    return tot


def _floor_two_digits_at_most(h):  # 1 + (x >= 10) digits: right up to 99, short by one from 100 on
    two = lambda x: 1 + (x >= 10)  # noqa: E731
    nats = math.log(h + 1) + sum(math.log(a + 1) for a in range(h + 1)) / (h + 1)
    targets = sum(
        (two(a) + two(b) + two(a - b) + 5) / ((h + 1) * (a + 1)) for a in range(h + 1) for b in range(a + 1)
    )
    return nats / targets


def _floor_pairs_equally_likely(h):
    pairs = [(a, b) for a in range(h + 1) for b in range(a + 1)]
    return math.log(len(pairs)) / (
        sum(_digits(a) + _digits(b) + _digits(a - b) + 5 for a, b in pairs) / len(pairs)
    )


ANSWERS["my_floor"] = Answers(
    check=FX.check_subtraction_floor,
    right={
        "enumerate": _floor_enumerate,
        "float32": _floor_float32,
        "closed_form": _floor_closed_form,
        "tokenizer_counts": _floor_tokenizer,
        "wrapped": _floor_wrapped,
    },
    wrong={
        "b_uniform_as_in_plus": lambda h: 2 * math.log(h + 1) / _mean_targets(h),
        "mean_of_ratios": _floor_mean_of_ratios,
        "pairs_equally_likely": _floor_pairs_equally_likely,
        "per_turn_not_per_target": lambda h: _floor_enumerate(h) * _mean_targets(h),
        "fixed_8_targets": lambda h: _floor_enumerate(h) * _mean_targets(h) / 8,
        "no_EOS_target": lambda h: _floor_enumerate(h) * _mean_targets(h) / (_mean_targets(h) - 1),
        "bits": lambda h: _floor_enumerate(h) / math.log(2),
        "the_plus_corpus": lambda h: chat_arithmetic_entropy(high=h),
        "two_digits_at_most": _floor_two_digits_at_most,
    },
    first_hints={"two_digits_at_most": "once an operand reaches 100"},
    refused={
        "course_subtraction_floor": (
            lambda h: FX.subtraction_floor(h),
            "called lmcore.course.floor.exercises.subtraction_floor",
        ),
        "course_entropy_of_the_turns": (
            lambda h: (
                FL.entropy(np.array([1 / ((h + 1) * (a + 1)) for a in range(h + 1) for _ in range(a + 1)]))
                / _mean_targets(h)
            ),
            "called lmcore.course.floor.lesson.entropy",
        ),
    },
)


# ---------------------------------------------------------------- 10: several right answers


def _set_logsumexp(z, a):
    z = z.double()
    return float(torch.logsumexp(z, 0) - torch.logsumexp(z[list(a)], 0))


def _set_float32(z, a):
    z = z.float()
    return float(torch.logsumexp(z, 0) - torch.logsumexp(z[list(a)], 0))


def _set_max_trick_numpy(z, a):  # both log-sum-exps by the max trick, NumPy
    x = z.double().numpy()
    s = x[list(a)]
    return float(x.max() + np.log(np.exp(x - x.max()).sum()) - s.max() - np.log(np.exp(s - s.max()).sum()))


def _set_log_softmax_then_lse(z, a):  # log-probabilities first, then log-sum-exp of the right ones
    return float(-torch.logsumexp(torch.log_softmax(z.double(), 0)[list(a)], 0))


@torch.no_grad()
def _set_no_grad(z, a):
    return _set_logsumexp(z, a)


def _set_single(z, i):
    return _set_logsumexp(z, [i])


ANSWERS["my_set_nll"] = Answers(
    check=RX.check_set_nll,
    right={
        "logsumexp": _set_logsumexp,
        "float32": _set_float32,
        "max_trick_numpy": _set_max_trick_numpy,
        "log_softmax_then_logsumexp": _set_log_softmax_then_lse,
        "no_grad": _set_no_grad,
    },
    wrong={
        "naive_softmax_sum": lambda z, a: float(-torch.log(torch.softmax(z.double(), 0)[list(a)].sum())),
        "first_answer_only": lambda z, a: _set_single(z, a[0]),
        "sum_of_single_losses": lambda z, a: sum(_set_single(z, i) for i in a),
        "mean_of_single_losses": lambda z, a: sum(_set_single(z, i) for i in a) / len(a),
        "largest_probability_only": lambda z, a: min(_set_single(z, i) for i in a),
        "max_instead_of_logsumexp": lambda z, a: float(z.double().max() - z.double()[list(a)].max()),
        "sign": lambda z, a: -_set_logsumexp(z, a),
        "float32_softmax_sum": lambda z, a: float(-torch.log(torch.softmax(z.float(), 0)[list(a)].sum())),
        "exp_without_max_shift": lambda z, a: float(-torch.log(z[list(a)].exp().sum() / z.exp().sum())),
        "probability_clamped": lambda z, a: float(
            -torch.log(torch.softmax(z.double(), 0)[list(a)].sum().clamp(min=1e-12))
        ),
    },
    first_hints={
        "naive_softmax_sum": "leaves floating point's range",
        "float32_softmax_sum": "a probability that rounds to 0",
        "exp_without_max_shift": "an exp that overflows",
        "first_answer_only": "the loss of id 0 alone",
        "sum_of_single_losses": "the sum of the separate losses",
        "mean_of_single_losses": "the mean of the separate losses",
        "max_instead_of_logsumexp": "only the largest logit",
        "probability_clamped": "when floating point could not hold it",
    },
    refused={
        "course_set_nll": (lambda z, a: RL.set_nll(z, a), "called lmcore.course.rewards.lesson.set_nll"),
        "course_set_nll_by_partial": (functools.partial(RL.set_nll), "write it yourself"),
    },
)


# ---------------------------------------------------------------- 10: context coverage


def _cov_formula(L, k):
    return max(0, L - max(k, 1)) / (L - 1)


def _cov_float32(L, k):
    return float(np.float32(max(0, L - max(k, 1))) / np.float32(L - 1))


def _cov_count(L, k):  # count the targets t = 1 .. L - 1 with t >= k
    return sum(1 for t in range(1, L) if t >= k) / (L - 1)


def _cov_fraction(L, k):  # the exact share, a fractions.Fraction
    from fractions import Fraction

    return Fraction(sum(1 for t in range(1, L) if t >= k), L - 1)


def _cov_complement(L, k):  # one minus the share that sees fewer than k
    short = min(L - 1, max(k - 1, 0))
    return 1 - short / (L - 1)


@functools.wraps(_cov_formula)
def _cov_wrapped(L, k):
    return float(torch.arange(1, L).ge(k).double().mean())


ANSWERS["my_context_coverage"] = Answers(
    check=RX.check_context_coverage,
    right={
        "formula": _cov_formula,
        "float32": _cov_float32,
        "count": _cov_count,
        "complement": _cov_complement,
        "torch_mean_wrapped": _cov_wrapped,
        # the exact share as a fraction: a number like any other (a learner's 5/7 was rejected)
        "exact_fraction": _cov_fraction,
    },
    wrong={
        "t_from_0": lambda L, k: max(0, L - k) / L,
        "off_by_one": lambda L, k: max(0, L - k + 1) / (L - 1),
        "divides_by_L": lambda L, k: max(0, L - max(k, 1)) / L,
        "negative_past_the_end": lambda L, k: (L - max(k, 1)) / (L - 1),
        "strictly_more_than_k": lambda L, k: sum(1 for t in range(1, L) if t > k) / (L - 1),
        "count_not_share": lambda L, k: max(0, L - max(k, 1)),
        "k_0_counts_l_targets": lambda L, k: max(0, L - k) / (L - 1),
    },
    first_hints={  # RX._explain_coverage: the count each one makes
        "t_from_0": "the row's tokens",
        "divides_by_L": "the row's tokens",
        "off_by_one": "1 target more",
        "strictly_more_than_k": "1 target fewer",
        "negative_past_the_end": "fewer than no targets",
        "count_not_share": "a count, not a share",
        "k_0_counts_l_targets": "more than all of them",
    },
    refused={
        "course_context_coverage": (
            lambda L, k: RD.context_coverage(L, k),
            "called lmcore.course.rewards.data.context_coverage",
        ),
        "course_context_coverage_itself": (RD.context_coverage, "write it yourself"),
        "next_exercise_on_one_document": (
            lambda L, k: RX.document_coverage([L], k),
            "called lmcore.course.rewards.exercises.document_coverage",
        ),
    },
)


# ---------------------------------------------------------------- 10: coverage in a packed row


def _doc_formula(d, k):
    valid = sum(n - 1 for n in d)
    return sum(max(0, n - max(k, 1)) for n in d) / valid if valid else 0.0


def _doc_float32(d, k):
    valid = np.float32(sum(n - 1 for n in d))
    return float(np.float32(sum(max(0, n - max(k, 1)) for n in d)) / valid) if valid else 0.0


def _doc_loop_over_the_row(d, k):  # walk the row token by token, the offset reset at each document
    valid = seen = 0
    for n in d:
        for offset in range(1, n):
            valid += 1
            seen += offset >= k
    return seen / valid if valid else 0.0


def _doc_torch_offsets(d, k):  # every position's offset in its document, from a cumulative sum
    lengths = torch.tensor(d)
    starts = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    offset = torch.arange(int(lengths.sum())) - starts
    valid = offset > 0
    return float((valid & (offset >= k)).sum() / valid.sum()) if valid.any() else 0.0


@functools.wraps(_doc_formula)
def _doc_wrapped(d, k):
    return _doc_loop_over_the_row(d, k)


ANSWERS["my_document_coverage"] = Answers(
    check=RX.check_document_coverage,
    right={
        "formula": _doc_formula,
        "float32": _doc_float32,
        "loop_over_the_row": _doc_loop_over_the_row,
        "torch_offsets": _doc_torch_offsets,
        "wrapped": _doc_wrapped,
    },
    wrong={
        "the_whole_row_as_one_document": lambda d, k: _cov_formula(sum(d), k),
        "document_starts_counted_as_targets": lambda d, k: (
            sum(max(0, n - max(k, 1)) for n in d) / (sum(d) - 1)
        ),
        "off_by_one_more_than_k": lambda d, k: sum(max(0, n - 1 - k) for n in d) / sum(n - 1 for n in d),
        "no_guard_at_k_0": lambda d, k: sum(max(0, n - k) for n in d) / sum(n - 1 for n in d),
        "mean_of_per_document_shares": lambda d, k: (
            sum(max(0, n - max(k, 1)) / (n - 1) for n in d if n > 1) / sum(1 for n in d if n > 1)
        ),
        "no_clamp": lambda d, k: sum(n - max(k, 1) for n in d) / sum(n - 1 for n in d),
    },
    first_hints={
        "the_whole_row_as_one_document": "a single document",
        "document_starts_counted_as_targets": "every position of the row but the first",
        "mean_of_per_document_shares": "the mean of the documents' own shares",
    },
    refused={
        "course_document_coverage": (
            lambda d, k: RX.document_coverage(d, k),
            "called lmcore.course.rewards.exercises.document_coverage",
        ),
        "course_context_coverage_per_document": (
            lambda d, k: sum(RD.context_coverage(n, k) * (n - 1) for n in d if n > 1) / sum(n - 1 for n in d),
            "called lmcore.course.rewards.data.context_coverage",
        ),
    },
)


# ---------------------------------------------------------------- 10: one decode step


def _decode(model, token, cache, *, pos=lambda P: P, append_first=True, extend=True, causal=False, ln_f=True):
    P = cache[0][0].shape[2]
    x = model.wte(token)[:, None] + model.wpe.weight[pos(P)]
    new = []
    for block, (k_old, v_old) in zip(model.blocks, cache):
        attn, h = block.attn, block.ln_1(x)
        N, _, D = h.shape
        q, k, v = (
            t.view(N, 1, attn.n_head, D // attn.n_head).transpose(1, 2) for t in attn.c_attn(h).split(D, 2)
        )
        k_all, v_all = torch.cat([k_old, k], 2), torch.cat([v_old, v], 2)
        if append_first:
            y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=causal)
        else:
            y = F.scaled_dot_product_attention(q, k_old, v_old)
        new.append((k_all, v_all) if extend else (k_old, v_old))
        x = x + attn.c_proj(y.transpose(1, 2).reshape(N, 1, D))
        x = x + block.mlp(block.ln_2(x))
    return model.lm_head(model.ln_f(x) if ln_f else x)[:, 0], new


def _decode_manual_softmax(model, token, cache):  # attention by hand: (N, H, 1, P + 1) scores, 2-D layout
    P = cache[0][0].shape[2]
    x = model.wte(token) + model.wpe(torch.tensor(P))  # (N, D): no length axis at all
    new = []
    for block, (k_old, v_old) in zip(model.blocks, cache):
        attn = block.attn
        N, D = x.shape
        H = attn.n_head
        q, k, v = (t.reshape(N, H, 1, D // H) for t in attn.c_attn(block.ln_1(x)).split(D, 1))
        k, v = torch.cat([k_old, k], 2), torch.cat([v_old, v], 2)
        new.append((k, v))
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // H), -1)
        x = x + attn.c_proj((w @ v).reshape(N, D))
        x = x + block.mlp(block.ln_2(x))
    return model.lm_head(model.ln_f(x)), new


def _heads(t, H):  # (N, 1, D) -> (N, H, 1, D / H)
    N, _, D = t.shape
    return t.view(N, 1, H, D // H).permute(0, 2, 1, 3)


def _decode_einsum(model, token, cache):  # einsum over named axes, the scores in float64 as given
    P = cache[0][0].shape[2]
    x = model.wte(token)[:, None] + model.wpe.weight[P][None, None]
    new = []
    for block, (k_old, v_old) in zip(model.blocks, cache):
        attn = block.attn
        N, _, D = x.shape
        H = attn.n_head
        q, k, v = attn.c_attn(block.ln_1(x)).split(D, 2)
        k, v = torch.cat([k_old, _heads(k, H)], 2), torch.cat([v_old, _heads(v, H)], 2)
        new.append((k, v))
        s = torch.einsum("nhqd,nhkd->nhqk", _heads(q, H), k) * (D // H) ** -0.5
        y = torch.einsum("nhqk,nhkd->nhqd", s.softmax(-1), v)
        x = x + attn.c_proj(y.permute(0, 2, 1, 3).reshape(N, 1, D))
        x = x + block.mlp(block.ln_2(x))
    return model.lm_head(model.ln_f(x))[:, 0], new


def _decode_float32(model, token, cache):  # the step on a float32 copy of the model and cache
    m32 = copy.deepcopy(model).float()
    logits, new = _decode(m32, token, [(k.float(), v.float()) for k, v in cache])
    return logits, new


@torch.no_grad()
def _decode_no_grad(model, token, cache):
    return _decode(model, token, cache)


def _decode_by_attention_forward(model, token, cache):  # the block's attention module on the new token
    P = cache[0][0].shape[2]
    x = model.wte(token)[:, None] + model.wpe.weight[P]
    for block in model.blocks:
        x = x + block.attn(block.ln_1(x))
        x = x + block.mlp(block.ln_2(x))
    return model.lm_head(model.ln_f(x))[:, 0], cache


ANSWERS["my_decode_step"] = Answers(
    check=RX.check_decode_step,
    right={
        "sdpa": _decode,
        "float32": _decode_float32,
        "manual_softmax_2d": _decode_manual_softmax,
        "einsum": _decode_einsum,
        "no_grad": _decode_no_grad,
    },
    wrong={
        "position_P_plus_1": lambda m, t, c: _decode(m, t, c, pos=lambda P: P + 1),
        "position_P_minus_1": lambda m, t, c: _decode(m, t, c, pos=lambda P: P - 1),
        "position_0": lambda m, t, c: _decode(m, t, c, pos=lambda P: 0),
        "attends_before_appending_its_key": lambda m, t, c: _decode(m, t, c, append_first=False),
        "returns_the_old_cache": lambda m, t, c: _decode(m, t, c, extend=False),
        "is_causal_on_one_query": lambda m, t, c: _decode(m, t, c, causal=True),
        "no_ln_f": lambda m, t, c: _decode(m, t, c, ln_f=False),
    },
    first_hints={
        "returns_the_old_cache": "the cache you return",
        "no_ln_f": "every step of GPT.forward",
        "is_causal_on_one_query": "reads key 0 alone",
        "position_P_plus_1": "which position number comes after them",
        "position_P_minus_1": "which position number comes after them",
        "position_0": "which position number comes after them",
    },
    refused={
        "course_forward_cached": (
            lambda m, t, c: (lambda o: (o[0][:, 0], o[1]))(RI.forward_cached(m, t[:, None], c)),
            "write the step yourself",
        ),
        "course_cached_pass": (  # the body of forward_cached, under its private name
            lambda m, t, c: (lambda o: (o[0][:, 0], o[1]))(RI._cached_pass(m, t[:, None], list(c))),
            "write the step yourself",
        ),
        "the_attention_modules_forward": (_decode_by_attention_forward, "write the attention step yourself"),
    },
)
