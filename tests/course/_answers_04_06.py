"""The answer matrix of notebooks 04-06 (issue 38): first_loss_at_spread, first_loss_from_logits,
short_run_prediction, first_loss_with_repeats;
my_eos_padded_labels, my_sliding_window_perplexity, accumulate_gradients; my_pack_whole,
my_mask_cross_document_targets, my_document_causal_mask, my_position_ids, my_chat_labels,
my_multi_turn_labels. See ``_answers.py`` for what each entry holds."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F
from _answers import Answers

import lmcore
from lmcore.course.anchor import lesson as an
from lmcore.course.anchor import step0 as s0
from lmcore.course.packing import chat
from lmcore.course.packing import lesson as pk
from lmcore.course.padding import accumulation as acc
from lmcore.course.padding import exercises as pad_ex
from lmcore.course.padding import perplexity as pad_ppl
from lmcore.loss import causal_lm_loss
from lmcore.perplexity import PerplexityMeter
from lmcore.shift import (
    IGNORE_INDEX,
    _restart_positions,
    document_causal_mask,
    labels_from_attention_mask,
    mask_cross_document_targets,
    num_valid_targets,
    pack_documents,
)

ANSWERS: dict[str, Answers] = {}

NO_FLOAT_IDS = "labels and ids are integers: there is no float quantity to compute in float32"
NO_FLOAT_MASK = "the answer is a bool mask: there is no float quantity to compute in float32"


# ---------------------------------------------------------------- 04: what a spread of the logits costs


def _spread_monte_carlo(V, sigma):  # another algorithm: simulate the logits, average logsumexp
    z = torch.randn(4000, V, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * sigma
    return float((torch.logsumexp(z, -1) - z.mean(-1)).mean())


def _spread_quadrature(V, sigma):  # E[e^z] by numerical integration, then the log of V times it
    x = np.linspace(-12.0, 12.0, 24_001)
    density = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    return math.log(V) + math.log(float(np.sum(np.exp(sigma * x) * density) * (x[1] - x[0])))


def _spread_float32(V, sigma):
    return float(torch.tensor(float(V)).log() + torch.tensor(float(sigma)) ** 2 / 2)


def _spread_second_order(V, sigma):  # the law less the next term of E[ln S]: closer than the law
    return math.log(V) + sigma**2 / 2 - math.expm1(sigma**2) / (2 * V)


ANSWERS["first_loss_at_spread"] = Answers(
    check=an.check_first_loss_at_spread,
    right={
        "the_law": lambda V, sigma: math.log(V) + sigma**2 / 2,
        "float32_law": _spread_float32,
        "monte_carlo": _spread_monte_carlo,
        "quadrature": _spread_quadrature,
        "second_order": _spread_second_order,
    },
    wrong={
        "ln_v_only": lambda V, sigma: math.log(V),
        "below_ln_v": lambda V, sigma: math.log(V) - sigma**2 / 2,
        "linear_in_sigma": lambda V, sigma: math.log(V) + sigma,
        "half_sigma": lambda V, sigma: math.log(V) + sigma / 2,
        "no_half": lambda V, sigma: math.log(V) + sigma**2,
        "first_order_exp": lambda V, sigma: math.log(V) + math.log1p(sigma**2 / 2),
        "bits": lambda V, sigma: math.log2(V) + sigma**2 / 2,
        "largest_logit": lambda V, sigma: sigma * math.sqrt(2 * math.log(V)),
    },
    refused={
        "reference": (lambda V, sigma: an.predict_first_loss(V, sigma), "the course's own answer"),
        "measured": (lambda V, sigma: an.iid_logit_loss(V, sigma), "the course's own answer"),
    },
    first_hints={
        "ln_v_only": "more than equal logits, less, or the same?",
        "below_ln_v": "beat a uniform guess",
        "linear_in_sigma": "Which power of a small sigma",
        "half_sigma": "Which power of a small sigma",
        "no_half": "it is not the right size",
        "first_order_exp": "right only for a small sigma",
        "bits": "bits or in nats",
    },
)


# ---------------------------------------------------------------- 04: first loss from the logits


def _fl_float32(logits):  # centred by hand, in float32
    z = logits.float()
    c = z - z.mean(-1, keepdim=True)
    return math.log(z.shape[-1]) + float((c * c).mean()) / 2


def _fl_exact(logits):  # the exact mean loss over every target, which the law approximates
    z = logits.double()
    return float((torch.logsumexp(z, -1) - z.mean(-1)).mean())


def _fl_log_softmax_all_targets(logits):  # -log p averaged over every position and every target
    return float(-F.log_softmax(logits.double(), dim=-1).mean())


def _fl_numpy_rows(logits):  # one position at a time, NumPy, sum of squares / V, fsum
    rows = logits.detach().double().reshape(-1, logits.shape[-1]).numpy()
    spreads = [float(((r - r.mean()) ** 2).sum() / len(r)) for r in rows]
    return math.log(rows.shape[1]) + math.fsum(spreads) / len(spreads) / 2


@torch.no_grad()
def _fl_no_grad_std(logits):  # std per position (correction=0), squared, averaged
    V = logits.size(-1)
    var = logits.double().std(dim=-1, correction=0).pow(2).mean()
    return math.log(V) + float(var) / 2


def _fl_with(spread, log=math.log, vocab_dim=-1):
    def fn(logits):
        return log(logits.shape[vocab_dim]) + spread(logits.double())

    return fn


def _row_var(z):
    return float(z.var(dim=-1, unbiased=False).mean())


ANSWERS["first_loss_from_logits"] = Answers(
    check=an.check_predict_from_logits,
    right={
        "float32_centred": _fl_float32,
        "float32_exact": lambda logits: float((torch.logsumexp(logits, -1) - logits.mean(-1)).mean()),
        "exact_mean_loss": _fl_exact,
        "log_softmax_every_target": _fl_log_softmax_all_targets,
        "numpy_rows_fsum": _fl_numpy_rows,
        "no_grad_std": _fl_no_grad_std,
    },
    wrong={
        "global_variance": _fl_with(lambda z: float(z.var(unbiased=False)) / 2),
        "bits": _fl_with(lambda z: _row_var(z) / 2, log=math.log2),
        "no_half": _fl_with(_row_var),
        "sigma_not_squared": _fl_with(lambda z: math.sqrt(_row_var(z)) / 2),
        "vocab_from_dim_1": _fl_with(lambda z: _row_var(z) / 2, vocab_dim=1),
        "spread_over_positions": _fl_with(lambda z: float(z.var(dim=-2, unbiased=False).mean()) / 2),
        "ln_v_only": _fl_with(lambda z: 0.0),
        "logsumexp_alone": lambda logits: float(torch.logsumexp(logits.double(), -1).mean()),
        "target_is_the_top_logit": lambda logits: float(
            (torch.logsumexp(logits.double(), -1) - logits.double().amax(-1)).mean()
        ),
        "summed_over_positions": _fl_with(lambda z: float(z.var(dim=-1, unbiased=False).sum()) / 2),
        "uncentred_mean_square": _fl_with(lambda z: float(z.pow(2).mean()) / 2),
        "std_averaged_then_squared": _fl_with(
            lambda z: float(z.var(dim=-1, unbiased=False).sqrt().mean()) ** 2 / 2
        ),
    },
    refused={
        "reference": (lambda z: an.predict_from_logits(z), "that is the course's reference"),
        "logit_sigma": (
            lambda z: math.log(z.shape[-1]) + an.logit_sigma(z) ** 2 / 2,
            "that is the course's reference",
        ),
    },
    first_hints={
        "ln_v_only": "raise the mean loss of a random target, or lower it",
        "logsumexp_alone": "Which part of it have you left out?",
        "target_is_the_top_logit": "how often is a uniformly random target the top token",
        "bits": "bits or in nats",
        "no_half": "what factor",
        "sigma_not_squared": "which power",
        "vocab_from_dim_1": "which dimension",
        "spread_over_positions": "one softmax compare",
        "summed_over_positions": "how many other positions",
        "global_variance": "adding one constant",
        "uncentred_mean_square": "adding one constant",
        "std_averaged_then_squared": "averages the positions' spreads before squaring",
    },
)


# ---------------------------------------------------------------- 04: first loss on repeating text


def _rep_float32(logits, input_ids, q):
    z = logits.float()
    mean = z.mean(-1, keepdim=True)
    var = ((z - mean) ** 2).mean()
    lift = (z.gather(-1, input_ids.unsqueeze(-1)) - mean).mean()
    return math.log(z.shape[-1]) + float(var) / 2 - q * float(lift)


def _rep_exact(logits, input_ids, q):  # the exact mean loss: q of the targets own, the rest uniform
    z = logits.double()
    lse, own = torch.logsumexp(z, -1), z.gather(-1, input_ids[..., None])[..., 0]
    return float((q * (lse - own) + (1 - q) * (lse - z.mean(-1))).mean())


def _rep_loop(logits, input_ids, q):  # position by position, Python floats
    N, L, V = logits.shape
    spread, lift = 0.0, 0.0
    for n in range(N):
        for t in range(L):
            row = logits[n, t].double()
            mean = float(row.mean())
            spread += float(((row - mean) ** 2).mean())
            lift += float(row[int(input_ids[n, t])]) - mean
    return math.log(V) + spread / (N * L) / 2 - q * lift / (N * L)


def _rep_other_logits(logits, input_ids, q):  # lift and spread against the other V - 1 logits
    z, V = logits.double(), logits.shape[-1]
    keep = 1 - F.one_hot(input_ids, V).double()
    mean = (z * keep).sum(-1) / (V - 1)
    var = (((z - mean[..., None]) ** 2) * keep).sum(-1) / (V - 1)
    own = z.gather(-1, input_ids[..., None])[..., 0]
    return math.log(V) + float(var.mean()) / 2 - q * float((own - mean).mean())


@torch.no_grad()
def _rep_no_grad(logits, input_ids, q):
    z = logits.double()
    centred = z - z.mean(-1, keepdim=True)
    lift = centred.gather(-1, input_ids[..., None]).mean()
    return math.log(z.shape[-1]) + float(centred.pow(2).mean()) / 2 - q * float(lift)


def _rep_parts(logits, input_ids):
    z = logits.double()
    var = float(z.var(-1, unbiased=False).mean())
    lift = float((z.gather(-1, input_ids[..., None])[..., 0] - z.mean(-1)).mean())
    return math.log(z.shape[-1]), var, lift


def _rep_q_ignored(logits, input_ids, q):  # Exercise 1's answer
    ln_v, var, _ = _rep_parts(logits, input_ids)
    return ln_v + var / 2


def _rep_sign(logits, input_ids, q):
    ln_v, var, lift = _rep_parts(logits, input_ids)
    return ln_v + var / 2 + q * lift


def _rep_every_target_repeats(logits, input_ids, q):
    ln_v, var, lift = _rep_parts(logits, input_ids)
    return ln_v + var / 2 - lift


def _rep_raw_own_logit(logits, input_ids, q):  # the own logit, not centred on its row's mean
    ln_v, var, _ = _rep_parts(logits, input_ids)
    return ln_v + var / 2 - q * float(logits.double().gather(-1, input_ids[..., None]).mean())


def _rep_global_variance(logits, input_ids, q):
    ln_v, _, lift = _rep_parts(logits, input_ids)
    return ln_v + float(logits.double().var(unbiased=False)) / 2 - q * lift


def _rep_next_token(logits, input_ids, q):  # reads the next token's logit: the target, not the input
    return _rep_no_grad(logits, input_ids.roll(-1, dims=1), q)


def _rep_law_weighted(logits, input_ids, q):  # only the other (1 - q) of the targets pay ln V + s^2/2
    ln_v, var, lift = _rep_parts(logits, input_ids)
    return (1 - q) * (ln_v + var / 2) - q * lift


# ---------------------------------------------------------------- 04: what a short run exposes (a prediction)

_SHIFT2, _PREV, _UNTIED, _NOMASK = s0.BROKEN
_FAR, _ON = "far below", "on ln 65"


def _short_run_from_the_code():  # reads each pipeline's slices: is the target among the tokens read?
    reads_target = {_SHIFT2: False, _PREV: True, _UNTIED: True, _NOMASK: True}
    return {name: (_FAR if r else _ON) for name, r in reads_target.items()}


def _short_run_search_the_key():  # hashes every choice against the key: refused
    from lmcore.course.checks import answer_digest

    return {
        k: next(c for c in s0.SHORT_RUN_CHOICES if answer_digest("short_run_prediction", k, c) == v)
        for k, v in s0._SHORT_RUN_KEY.items()
    }


ANSWERS["short_run_prediction"] = Answers(
    check=s0.check_short_run,
    no_float32="the answers are choices between two verdicts: there is no float quantity to compute",
    right={
        "dict": lambda: {_SHIFT2: _ON, _PREV: _FAR, _UNTIED: _FAR, _NOMASK: _FAR},
        "other_order_other_case": lambda: {
            _NOMASK: "Far below",
            _UNTIED: " far below",
            _PREV: _FAR,
            _SHIFT2: "On ln 65",
        },
        "from_the_code": _short_run_from_the_code,
        "a_dict_comprehension": lambda: {k: (_ON if "t+2" in k else _FAR) for k in s0.BROKEN},
    },
    wrong={
        "every_bug_leaks": lambda: {k: _FAR for k in s0.BROKEN},
        "as_at_step_0": lambda: {k: _ON for k in s0.BROKEN},
        "untied_cannot_copy": lambda: {_SHIFT2: _ON, _PREV: _FAR, _UNTIED: _ON, _NOMASK: _FAR},
        "shift_2_leaks_previous_does_not": lambda: {_SHIFT2: _FAR, _PREV: _ON, _UNTIED: _FAR, _NOMASK: _FAR},
        "the_mask_only_matters_at_generation": lambda: {
            _SHIFT2: _ON,
            _PREV: _FAR,
            _UNTIED: _FAR,
            _NOMASK: _ON,
        },
        "one_missing": lambda: {_SHIFT2: _ON, _PREV: _FAR, _UNTIED: _FAR},
        "a_third_choice": lambda: {_SHIFT2: "between", _PREV: _FAR, _UNTIED: _FAR, _NOMASK: _FAR},
    },
    refused={
        "run_the_experiment": (lambda: s0.short_run_verdicts(), "runs the experiment"),
        "search_the_key": (_short_run_search_the_key, "searches the answer key"),
        "ask_the_checker": (
            lambda: next(
                dict(zip(s0.BROKEN, combo))
                for combo in itertools.product(s0.SHORT_RUN_CHOICES, repeat=4)
                if s0.check_short_run(lambda c=combo: dict(zip(s0.BROKEN, c)))
            ),
            "asks the checker",
        ),
    },
)


ANSWERS["first_loss_with_repeats"] = Answers(
    check=s0.check_predict_with_repeats,
    right={
        "float32": _rep_float32,
        "exact_mean_loss": _rep_exact,
        "loop_over_positions": _rep_loop,
        "other_v_minus_1_logits": _rep_other_logits,
        "no_grad_centred": _rep_no_grad,
    },
    wrong={
        "q_ignored": _rep_q_ignored,
        "sign": _rep_sign,
        "every_target_repeats": _rep_every_target_repeats,
        "raw_own_logit": _rep_raw_own_logit,
        "global_variance": _rep_global_variance,
        "next_token_logit": _rep_next_token,
        "law_weighted_by_1_minus_q": _rep_law_weighted,
    },
    first_hints={  # s0._explain_repeats: the mistake whose value on the case the learner's matches
        "q_ignored": "as if q were 0",
        "sign": "larger or smaller",
        "every_target_repeats": "as if q were 1",
        "raw_own_logit": "how far the own token's logit stands above the rest",
        "global_variance": "your spread counts the constant",
        "next_token_logit": "when the target repeats, which token is it?",
        "law_weighted_by_1_minus_q": "what does such a target still pay",
    },
    refused={
        "reference": (lambda z, ids, q: s0.predict_with_repeats(z, ids, q), "that is the course's reference"),
        "exercise_1_and_lift": (
            lambda z, ids, q: an.predict_from_logits(z) - q * s0.own_token_lift(z, ids),
            "that is the course's reference",
        ),
    },
)


# ---------------------------------------------------------------- 05: labels for rows padded with EOS


def _eos_row_loop(input_ids, eos_id):  # row by row: every EOS after the row's first one
    labels = input_ids.clone()
    for row in labels:
        where = (row == eos_id).nonzero().flatten()
        row[where[1:]] = IGNORE_INDEX
    return labels


def _eos_after_an_eos(input_ids, eos_id):  # padding is an EOS that follows an EOS
    is_eos = input_ids == eos_id
    pad = torch.zeros_like(is_eos)
    pad[:, 1:] = is_eos[:, 1:] & is_eos[:, :-1]
    return torch.where(pad, IGNORE_INDEX, input_ids)


def _eos_first_index(input_ids, eos_id):  # argmax finds each row's first EOS; a row without one keeps all
    is_eos = input_ids == eos_id
    L = input_ids.shape[1]
    first = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1), L)
    later = torch.arange(L)[None, :] > first[:, None]
    return input_ids.masked_fill(is_eos & later, IGNORE_INDEX)


@functools.wraps(_eos_row_loop)
def _eos_wrapped(input_ids, eos_id):
    seen = torch.cumsum((input_ids == eos_id).long(), dim=1)
    return torch.where(seen >= 2, torch.full_like(input_ids, IGNORE_INDEX), input_ids)


@torch.no_grad()
def _eos_numpy(input_ids, eos_id):  # NumPy on a copy, back to a tensor
    a = input_ids.numpy().copy()
    a[np.cumsum(a == eos_id, axis=1) > 1] = IGNORE_INDEX
    return torch.from_numpy(a)


def _eos_every_eos(input_ids, eos_id):
    return input_ids.masked_fill(input_ids == eos_id, IGNORE_INDEX)


def _eos_second_kept(input_ids, eos_id):  # off by one: from the third EOS on
    return input_ids.masked_fill((input_ids == eos_id).cumsum(-1) > 2, IGNORE_INDEX)


def _eos_after_first_position(input_ids, eos_id):  # everything after argmax, EOS or not
    is_eos = input_ids == eos_id
    first = is_eos.int().argmax(dim=1)
    return input_ids.masked_fill(torch.arange(input_ids.shape[1])[None] > first[:, None], IGNORE_INDEX)


def _eos_in_place(input_ids, eos_id):
    return input_ids.masked_fill_((input_ids == eos_id).cumsum(-1) > 1, IGNORE_INDEX)


def _eos_fixed_id(input_ids, eos_id):  # this vocabulary's EOS (1), not the argument
    return input_ids.masked_fill((input_ids == 1).cumsum(-1) > 1, IGNORE_INDEX)


def _eos_before_an_eos(input_ids, eos_id):  # an EOS followed by an EOS: the shift turned round
    is_eos = input_ids == eos_id
    pad = torch.zeros_like(is_eos)
    pad[:, :-1] = is_eos[:, :-1] & is_eos[:, 1:]
    return torch.where(pad, IGNORE_INDEX, input_ids)


def _eos_last_kept(input_ids, eos_id):  # keeps the row's LAST EOS, masks the ones before it
    later = (input_ids == eos_id).flip(1).cumsum(1).flip(1) > 1
    return input_ids.masked_fill(later, IGNORE_INDEX)


def _first_label_set(fn, value):
    """``fn``'s labels with position 0 of each row set to ``value`` (-100, or ``"input"``: the
    row's first input id). The shift drops that label, so it is never a target: a right answer
    may leave it either way."""

    def labels(ids, *args, **kwargs):
        out = fn(ids, *args, **kwargs).clone()
        out[:, 0] = ids[:, 0] if value == "input" else value
        return out

    return labels


def _eos_minus_one(ids, eos):  # the right mask, but -1 (another library's ignore value) for -100
    seen = (ids == eos).long().cumsum(dim=1)
    labels = ids.clone()
    labels[(ids == eos) & (seen > 1)] = -1
    return labels


ANSWERS["my_eos_padded_labels"] = Answers(
    check=pad_ex.check_eos_padded_labels,
    no_float32=NO_FLOAT_IDS,
    right={
        "row_loop": _eos_row_loop,
        "first_label_dropped": _first_label_set(_eos_row_loop, -100),  # never a target: either is right
        "eos_after_an_eos": _eos_after_an_eos,
        "argmax_first_index": _eos_first_index,
        "cumsum_wrapped": _eos_wrapped,
        "numpy_no_grad": _eos_numpy,
    },
    wrong={
        "minus_one_for_padding": lambda ids, eos: _eos_minus_one(ids, eos),
        "every_eos": _eos_every_eos,
        "nothing_masked": lambda input_ids, eos_id: input_ids.clone(),
        "second_eos_kept": _eos_second_kept,
        "after_first_eos_position": _eos_after_first_position,
        "in_place": _eos_in_place,
        "fixed_eos_id": _eos_fixed_id,
        "last_eos_kept": _eos_last_kept,
        "shifted_the_wrong_way": _eos_before_an_eos,
    },
    first_hints={
        "minus_one_for_padding": "which label value does the loss leave out?",  # pad_ex._explain_eos_labels: what the token at the first wrong label is
        "every_eos": "how would the model learn to stop?",
        "nothing_masked": "is it text, or padding?",
        "second_eos_kept": "is it text, or padding?",
        "last_eos_kept": "which labels does the fix touch?",
    },
    refused={
        "reference": (lambda ids, e: pad_ex.eos_padded_labels(ids, e), "that is the course's reference"),
        "labels_from_attention_mask": (
            lambda ids, e: labels_from_attention_mask(ids, ((ids == e).cumsum(-1) <= 1).long()),
            "build the labels from the ids alone",
        ),
    },
)


# ---------------------------------------------------------------- 05: sliding-window perplexity


def _win_float32(model, ids, block_size, stride):  # the summed NLL kept as a float32 tensor
    total, n, done = torch.zeros((), dtype=torch.float32), 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + block_size, len(ids))
        window = ids[begin:end][None]
        labels = window.clone()
        labels[:, : max(0, done - begin)] = IGNORE_INDEX
        total += causal_lm_loss(model(window).float(), labels, reduction="sum").float()
        n, done = n + num_valid_targets(labels), end
        if end == len(ids):
            break
    return float(torch.exp(total / n))


def _win_hf_recipe(model, ids, block_size, stride):  # Hugging Face's recipe: the last trg_len labels
    nll_sum, n_tokens, prev_end = 0.0, 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + block_size, len(ids))
        trg_len = end - prev_end
        window = ids[begin:end][None]
        target = window.clone()
        target[:, :-trg_len] = IGNORE_INDEX
        with torch.no_grad():
            loss = causal_lm_loss(model(window), target)  # the mean over its scored tokens
        n = num_valid_targets(target)
        nll_sum, n_tokens, prev_end = nll_sum + float(loss) * n, n_tokens + n, end
        if end == len(ids):
            break
    return math.exp(nll_sum / n_tokens)


def _win_log_softmax(model, ids, block_size, stride):  # each token's -log p by hand, fsum
    nlls, scored, begin = [], 1, 0  # token 0 has no context
    while scored < len(ids):
        end = min(begin + block_size, len(ids))
        if end > scored:
            logp = torch.log_softmax(model(ids[begin:end][None])[0].double(), dim=-1)  # (L, V)
            nlls += [-float(logp[k - begin - 1, ids[k]]) for k in range(max(scored, begin + 1), end)]
            scored = end
        begin += stride
    return math.exp(math.fsum(nlls) / len(nlls))


@torch.no_grad()
def _win_no_grad_pairs(model, ids, block_size, stride):  # (sum, count) per window, combined at the end
    parts, done = [], 0
    starts = range(0, max(1, len(ids) - block_size + stride), stride)
    for begin in starts:
        window = ids[begin : begin + block_size][None]
        labels = window.clone()
        labels[:, : max(0, done - begin)] = IGNORE_INDEX
        parts.append(
            (float(causal_lm_loss(model(window), labels, reduction="sum")), num_valid_targets(labels))
        )
        done = begin + window.shape[1]
    return math.exp(sum(s for s, _ in parts) / sum(c for _, c in parts))


def _win_variant(*, step=None, mask=True, weigh=True, exp=True, tail=True, cut=0):
    """The reference's loop with one thing changed: windows every ``step`` (block_size), no -100
    on the tokens already scored, windows averaged instead of token-weighted, no exp, the tail
    dropped, or the mask off by ``cut``."""

    def fn(model, ids, block_size, stride):
        stride_ = block_size if step == "block" else stride
        last = len(ids) if tail else len(ids) - block_size + 1
        sums, counts, done = [], [], 0
        for begin in range(0, max(0, last), stride_):
            end = min(begin + block_size, len(ids))
            window = ids[begin:end][None]
            labels = window.clone()
            if mask:
                labels[:, : max(0, done - begin + cut)] = IGNORE_INDEX
            sums.append(float(causal_lm_loss(model(window), labels, reduction="sum")))
            counts.append(num_valid_targets(labels))
            done = end
            if end == len(ids):
                break
        mean = sum(sums) / sum(counts) if weigh else sum(s / c for s, c in zip(sums, counts)) / len(sums)
        return math.exp(mean) if exp else mean

    return fn


def _win_meter(model, ids, block_size, stride):
    meter, done = PerplexityMeter(), 0
    for begin in range(0, len(ids), stride):
        end = min(begin + block_size, len(ids))
        window = ids[begin:end][None]
        labels = window.clone()
        labels[:, : max(0, done - begin)] = IGNORE_INDEX
        meter.update(model(window), labels)
        done = end
        if end == len(ids):
            break
    return meter.perplexity


ANSWERS["my_sliding_window_perplexity"] = Answers(
    check=pad_ex.check_sliding_window_perplexity,
    right={
        "float32_sum": _win_float32,
        "hf_recipe_mean_times_count": _win_hf_recipe,
        "log_softmax_by_hand": _win_log_softmax,
        "no_grad_pairs": _win_no_grad_pairs,
    },
    wrong={
        "consecutive_blocks": _win_variant(step="block"),
        "every_token_every_window": _win_variant(mask=False),
        "mean_of_window_means": _win_variant(weigh=False),
        "mean_nll_no_exp": _win_variant(exp=False),
        "tail_dropped": _win_variant(tail=False),
        "mask_one_too_many": _win_variant(cut=1),
        "mask_one_too_few": _win_variant(cut=-1),
    },
    first_hints={  # pad_ex._explain_window: the mistake whose perplexity on the text the learner's matches
        "consecutive_blocks": "windows that never overlap",
        "every_token_every_window": "in every window that holds them",
        "mean_of_window_means": "should a window that scores few tokens count as much",
        "mean_nll_no_exp": "is it a perplexity yet",
        "tail_dropped": "stops before the end of the text",
        "mask_one_too_many": "is every token after the first scored?",
        "mask_one_too_few": "twice, once in each window",
    },
    refused={
        "reference": (
            lambda m, ids, b, s: pad_ppl.sliding_window_perplexity(m, ids, b, s),
            "that is the course's reference",
        ),
        "perplexity_meter": (_win_meter, "the exercise is to do what PerplexityMeter does"),
    },
)


# ---------------------------------------------------------------- 05: gradient accumulation


def _acc_sum_then_scale(model, micro_batches):  # summed NLL per micro-batch, one scale at the end
    total, n = 0.0, 0
    for input_ids, labels in micro_batches:
        loss = causal_lm_loss(model(input_ids), labels, reduction="sum")
        loss.backward()
        total, n = total + float(loss), n + num_valid_targets(labels)
    for p in model.parameters():
        if p.grad is not None:
            p.grad.mul_(1.0 / n)
    return total / n


def _acc_float32(model, micro_batches):  # the loss computed from float32 logits, summed in float32
    total, n = torch.zeros((), dtype=torch.float32), 0
    for input_ids, labels in micro_batches:
        loss = causal_lm_loss(model(input_ids).float(), labels, reduction="sum")
        loss.backward()
        total, n = total + loss.detach(), n + num_valid_targets(labels)
    scale = torch.tensor(1.0 / n, dtype=torch.float32)
    for p in model.parameters():
        if p.grad is not None:
            p.grad *= scale.to(p.grad.dtype)
    return float(total / n)


def _acc_collect_first(model, micro_batches):  # the one pass collects them; the count is known first
    micro = list(micro_batches)
    n = sum(num_valid_targets(labels) for _, labels in micro)
    total = 0.0
    for input_ids, labels in micro:
        loss = causal_lm_loss(model(input_ids), labels, num_items=n)
        loss.backward()
        total += float(loss)
    return total


def _acc_own_mean_times_count(model, micro_batches):  # each mean times its own count, rescaled at the end
    total, n = 0.0, 0
    for input_ids, labels in micro_batches:
        k = num_valid_targets(labels)
        loss = causal_lm_loss(model(input_ids), labels) * k
        loss.backward()
        total, n = total + float(loss), n + k
    for p in model.parameters():
        if p.grad is not None:
            p.grad.div_(n)
    return total / n


@functools.wraps(_acc_sum_then_scale)
def _acc_wrapped(model, micro_batches):  # the count from the shifted labels by hand
    total, n = 0.0, 0
    for input_ids, labels in micro_batches:
        loss = causal_lm_loss(model(input_ids), labels, reduction="sum")
        loss.backward()
        total += loss.item()
        n += int((labels[:, 1:] != IGNORE_INDEX).sum())
    for p in model.parameters():
        if p.grad is not None:
            p.grad /= n
    return total / n


def _acc_variant(*, count=num_valid_targets, own=False, micro_mean=False, zero=False, log="mean"):
    """Collect, count with ``count``, and divide each micro-batch by the whole count, its own
    count (``own``) or by the number of micro-batches (``micro_mean``); ``zero`` zeroes the
    gradients before each backward; ``log`` is what it returns."""

    def fn(model, micro_batches):
        micro = list(micro_batches)
        n = sum(count(labels) for _, labels in micro)
        losses = []
        for input_ids, labels in micro:
            if zero:
                model.zero_grad()
            if micro_mean:
                loss = causal_lm_loss(model(input_ids), labels) / len(micro)
            else:
                loss = causal_lm_loss(model(input_ids), labels, num_items=count(labels) if own else n)
            loss.backward()
            losses.append(float(loss))
        return sum(losses) / len(losses) if log == "mean of micro" else sum(losses)

    return fn


def _acc_no_divide(model, micro_batches):
    total = 0.0
    for input_ids, labels in micro_batches:
        loss = causal_lm_loss(model(input_ids), labels, reduction="sum")
        loss.backward()
        total += float(loss)
    return total


@torch.no_grad()
def _acc_no_grad(model, micro_batches):  # no_grad on a training function: nothing to backward
    return _acc_sum_then_scale(model, micro_batches)


def _acc_lmcore_loop(model, micro_batches):
    from lmcore.train.accumulate import accumulate_gradients

    total, n = accumulate_gradients(model, [{"input_ids": x, "labels": y} for x, y in micro_batches])
    return total / n


def _acc_one_big_forward(model, micro_batches):  # every row padded to the longest: not accumulation
    micro = list(micro_batches)
    L = max(x.shape[1] for x, _ in micro)
    ids = torch.cat([F.pad(x, (0, L - x.shape[1])) for x, _ in micro])
    labels = torch.cat([F.pad(y, (0, L - y.shape[1]), value=IGNORE_INDEX) for _, y in micro])
    loss = causal_lm_loss(model(ids), labels)
    loss.backward()
    return float(loss)


def _acc_one_backward_at_the_end(model, micro_batches):  # every graph kept: the memory is not saved
    losses, n = [], 0
    for input_ids, labels in micro_batches:
        losses.append(causal_lm_loss(model(input_ids), labels, reduction="sum"))
        n += int((labels[:, 1:] != IGNORE_INDEX).sum())
    loss = torch.stack(losses).sum() / n
    loss.backward()
    return float(loss)


def _acc_skip_empty(model, micro_batches):  # a micro-batch with no valid target adds nothing: skipped
    micro = list(micro_batches)
    n = sum(num_valid_targets(labels) for _, labels in micro)
    total = 0.0
    for input_ids, labels in micro:
        if num_valid_targets(labels):
            loss = causal_lm_loss(model(input_ids), labels, num_items=n)
            loss.backward()
            total += float(loss)
    return total


def _acc_with_a_step(model, micro_batches):  # right gradients, then the optimizer's step: not asked
    total = _acc_collect_first(model, micro_batches)
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    return total


ANSWERS["accumulate_gradients"] = Answers(
    check=acc.check_accumulation,
    right={
        "sum_then_scale": _acc_sum_then_scale,
        "float32_loss": _acc_float32,
        "collect_then_num_items": _acc_collect_first,
        "wrapped_shifted_count": _acc_wrapped,
        "empty_micro_batch_skipped": _acc_skip_empty,
    },
    wrong={
        "mean_of_micro_means": _acc_variant(micro_mean=True),
        "own_count_each": _acc_variant(own=True),
        "no_divide": _acc_no_divide,
        "unshifted_count": _acc_variant(count=lambda labels: int((labels != IGNORE_INDEX).sum())),
        "padding_counted": _acc_variant(count=lambda labels: labels[:, 1:].numel()),
        "zero_grad_each": _acc_variant(zero=True),
        "logged_mean_of_micro_losses": _acc_variant(log="mean of micro"),
        "no_grad_decorated": _acc_no_grad,
        # each mean times its own count: 0/0 on a micro-batch with no valid target
        "own_mean_times_count": _acc_own_mean_times_count,
    },
    first_hints={  # acc._explain_accumulation: the weighting of the micro-batches the gradient matches
        "mean_of_micro_means": "gives every micro-batch the same weight",
        "own_count_each": "grows with the number of micro-batches",
        "no_divide": "is it the gradient of a mean?",
        "unshifted_count": "left as targets after the shift",
        "padding_counted": "does a padding position count as a target?",
        "zero_grad_each": "only the last micro-batch's part",
        "logged_mean_of_micro_losses": "your gradients match the whole batch's, and the loss you return",
    },
    refused={
        "lmcore_train_loop": (_acc_lmcore_loop, "lmcore.train's own loop does this"),
        "one_big_forward": (_acc_one_big_forward, "one forward per micro-batch, in order?"),
        "one_backward_at_the_end": (_acc_one_backward_at_the_end, "freed by its own backward"),
        "optimizer_step": (_acc_with_a_step, "also take the optimizer's step?"),
    },
)


# ---------------------------------------------------------------- 06: pack with the whole policy

EOS, PAD = pk.EOS, pk.PAD


def _whole_rows(documents, block_size):  # a list of rows; a new row when the next piece does not fit
    rows, docs = [[]], [[]]
    for k, tokens in enumerate(documents):
        piece = list(tokens) + [EOS]
        if len(rows[-1]) + len(piece) > block_size:
            rows.append([])
            docs.append([])
        rows[-1] += piece
        docs[-1] += [k] * len(piece)
    rows = [r + [PAD] * (block_size - len(r)) for r in rows]
    docs = [d + [-1] * (block_size - len(d)) for d in docs]
    return torch.tensor(rows), torch.tensor(docs)


def _whole_numpy_cursor(documents, block_size):  # a preallocated grid and a (row, column) cursor
    ids = np.full((len(documents), block_size), PAD, dtype=np.int64)
    doc = np.full((len(documents), block_size), -1, dtype=np.int64)
    row, col = 0, 0
    for k, tokens in enumerate(documents):
        n = len(tokens) + 1
        if col + n > block_size:
            row, col = row + 1, 0
        ids[row, col : col + n] = list(tokens) + [EOS]
        doc[row, col : col + n] = k
        col += n
    return torch.from_numpy(ids[: row + 1]), torch.from_numpy(doc[: row + 1])


@torch.no_grad()
def _whole_no_grad(documents, block_size):  # flat lists, the room left computed by modulo
    ids, doc_ids = [], []
    for k, tokens in enumerate(documents):
        room = block_size - len(ids) % block_size
        if len(tokens) + 1 > room and room < block_size:
            ids += [PAD] * room
            doc_ids += [-1] * room
        ids += [*tokens, EOS]
        doc_ids += [k] * (len(tokens) + 1)
    tail = -len(ids) % block_size
    return (
        torch.tensor(ids + [PAD] * tail).reshape(-1, block_size),
        torch.tensor(doc_ids + [-1] * tail).reshape(-1, block_size),
    )


@functools.wraps(_whole_rows)
def _whole_wrapped(documents, block_size):
    return _whole_rows(documents, block_size)


def _whole_variant(*, fit=1, exact_fit_pads=False, eos_doc=None, first_id=0, pad_doc=-1, stream=False):
    """The flat-list loop with one thing changed: the room a document needs (``fit``: its EOS
    counted or not), an exact fit padded, the EOS's document id, the first document's id, the
    padding's document id, or no row closed at all (``stream``)."""

    def fn(documents, block_size):
        ids, doc_ids = [], []
        for k, tokens in enumerate(documents, start=first_id):
            room = -len(ids) % block_size
            need = len(tokens) + fit
            too_big = need >= room if exact_fit_pads else need > room
            if room and too_big and not stream:
                ids, doc_ids = ids + [PAD] * room, doc_ids + [pad_doc] * room
            ids += [*tokens, EOS]
            doc_ids += [k] * len(tokens) + [k if eos_doc is None else eos_doc]
        tail = -len(ids) % block_size
        ids, doc_ids = ids + [PAD] * tail, doc_ids + [pad_doc] * tail
        return torch.tensor(ids).view(-1, block_size), torch.tensor(doc_ids).view(-1, block_size)

    return fn


def _whole_from_the_end(documents, block_size):  # fills rows from the last document backwards
    rows, row, ids = [], [], []
    for k in range(len(documents) - 1, -1, -1):
        piece = [*documents[k], EOS]
        if len(row) + len(piece) > block_size:
            rows.append((row, ids))
            row, ids = [], []
        row, ids = piece + row, [k] * len(piece) + ids
    rows.append((row, ids))
    pad = [(r + [PAD] * (block_size - len(r)), d + [-1] * (block_size - len(d))) for r, d in rows[::-1]]
    return torch.tensor([r for r, _ in pad]), torch.tensor([d for _, d in pad])


def _whole_left_padded(documents, block_size):  # the padding moved to the start of each row
    ids, doc = _whole_rows(documents, block_size)
    order = (ids != PAD).long().argsort(dim=1, stable=True)
    return ids.gather(1, order), doc.gather(1, order)


def _whole_no_eos(documents, block_size):  # the documents packed whole, no EOS after them
    ids, doc_ids = [], []
    for k, tokens in enumerate(documents):
        room = -len(ids) % block_size
        if room and len(tokens) > room:
            ids, doc_ids = ids + [PAD] * room, doc_ids + [-1] * room
        ids, doc_ids = ids + list(tokens), doc_ids + [k] * len(tokens)
    tail = -len(ids) % block_size
    ids, doc_ids = ids + [PAD] * tail, doc_ids + [-1] * tail
    return torch.tensor(ids).view(-1, block_size), torch.tensor(doc_ids).view(-1, block_size)


def _whole_first_fit(documents, block_size):  # each document into the first row with room for it
    rows, docs = [], []
    for k, tokens in enumerate(documents):
        piece = [*tokens, EOS]
        row = next((r for r in range(len(rows)) if len(rows[r]) + len(piece) <= block_size), None)
        if row is None:
            rows.append([])
            docs.append([])
            row = -1
        rows[row] += piece
        docs[row] += [k] * len(piece)
    rows = [r + [PAD] * (block_size - len(r)) for r in rows]
    docs = [d + [-1] * (block_size - len(d)) for d in docs]
    return torch.tensor(rows), torch.tensor(docs)


def _whole_one_per_row(documents, block_size):
    ids = [list(t) + [EOS] + [PAD] * (block_size - len(t) - 1) for t in documents]
    doc = [[k] * (len(t) + 1) + [-1] * (block_size - len(t) - 1) for k, t in enumerate(documents)]
    return torch.tensor(ids), torch.tensor(doc)


def _whole_last_row_dropped(documents, block_size):  # cut to whole rows instead of padding the last
    ids, doc = _whole_no_grad.__wrapped__(documents, block_size)
    full = ids.ne(PAD).any(dim=1) & ids[:, -1].ne(PAD)
    return ids[full | (torch.arange(len(ids)) < len(ids) - 1)], doc[
        full | (torch.arange(len(ids)) < len(ids) - 1)
    ]


ANSWERS["my_pack_whole"] = Answers(
    check=pk.check_pack_whole,
    no_float32=NO_FLOAT_IDS,
    right={
        "rows_of_lists": _whole_rows,
        "numpy_cursor": _whole_numpy_cursor,
        "no_grad_modulo": _whole_no_grad,
        "wrapped": _whole_wrapped,
        # not pack_documents' layout (the first row keeps the slack): the goal allows it
        "fill_from_the_end": _whole_from_the_end,
    },
    wrong={
        "stream": _whole_variant(stream=True),
        "fit_without_eos": _whole_variant(fit=0),
        "exact_fit_padded": _whole_variant(exact_fit_pads=True),
        "eos_document_id_minus_one": _whole_variant(eos_doc=-1),
        "document_ids_from_1": _whole_variant(first_id=1),
        "padding_document_id_0": _whole_variant(pad_doc=0),
        "one_document_per_row": _whole_one_per_row,
        "first_fit": _whole_first_fit,
        "last_row_dropped": _whole_last_row_dropped,
        "left_padded": _whole_left_padded,
        "no_eos": _whole_no_eos,
        "swapped_tuple": lambda docs, b: _whole_rows(docs, b)[::-1],
    },
    first_hints={
        "stream": "no document is cut",
        "fit_without_eos": "no document is cut",
        "exact_fit_padded": "leaves places empty",
        "one_document_per_row": "leaves places empty",
        "first_fit": "in which order must the documents come",
        "eos_document_id_minus_one": "which document does an EOS belong to",
        "document_ids_from_1": "which id does the exercise give each document",
        "padding_document_id_0": "which document id marks padding",
        "last_row_dropped": "is every document in your rows",
        "left_padded": "padding only at the end of a row",
        "no_eos": "what must follow every document",
        "swapped_tuple": "in which order does the exercise ask for them?",
    },
    refused={
        "pack_documents": (
            lambda docs, b: tuple(
                getattr(pack_documents(docs, b, eos_id=EOS, pad_id=PAD, policy="whole"), k)
                for k in ("input_ids", "document_ids")
            ),
            "build the rows yourself",
        ),
        "checker_reference": (lambda docs, b: pk._whole(docs, b), "build the rows yourself"),
    },
)


# ---------------------------------------------------------------- 06: drop the cross-document targets


def _xdoc_loop(labels, document_ids):
    out = labels.clone()
    N, L = labels.shape
    for n in range(N):
        for t in range(1, L):
            if document_ids[n, t] != document_ids[n, t - 1]:
                out[n, t] = IGNORE_INDEX
    return out


def _xdoc_padded_compare(labels, document_ids):  # the change at t, padded on the left with False
    change = F.pad(document_ids[:, 1:] != document_ids[:, :-1], (1, 0), value=False)
    return torch.where(change, IGNORE_INDEX, labels)


def _xdoc_diff(labels, document_ids):
    starts = torch.diff(document_ids, dim=1) != 0  # (N, L-1)
    return torch.cat([labels[:, :1], labels[:, 1:].masked_fill(starts, IGNORE_INDEX)], dim=1)


@torch.no_grad()
def _xdoc_no_grad(labels, document_ids):  # the previous id by roll, the row start left alone
    prev = document_ids.roll(1, dims=1)
    change = prev != document_ids
    change[:, 0] = False
    return labels.masked_fill(change, IGNORE_INDEX)


def _xdoc_before_the_change(labels, document_ids):  # drops a_last -> EOS's label instead
    out = labels.clone()
    out[:, :-1][document_ids[:, 1:] != document_ids[:, :-1]] = IGNORE_INDEX
    return out


def _xdoc_both(labels, document_ids):
    return _xdoc_before_the_change(_xdoc_loop(labels, document_ids), document_ids)


def _xdoc_in_place(labels, document_ids):
    labels[:, 1:][document_ids[:, 1:] != document_ids[:, :-1]] = IGNORE_INDEX
    return labels


def _xdoc_wrong_axis(labels, document_ids):  # compares rows, not positions
    out = labels.clone()
    out[1:][document_ids[1:] != document_ids[:-1]] = IGNORE_INDEX
    return out


def _xdoc_after_an_eos(labels, document_ids):  # finds the boundary from an EOS label, not the ids
    out = labels.clone()
    out[:, 1:][labels[:, :-1] == pk.EOS] = IGNORE_INDEX
    return out


ANSWERS["my_mask_cross_document_targets"] = Answers(
    check=pk.check_mask_cross_document_targets,
    no_float32=NO_FLOAT_IDS,
    right={
        "loop": _xdoc_loop,
        "first_label_dropped": _first_label_set(_xdoc_loop, -100),
        "padded_compare": _xdoc_padded_compare,
        "torch_diff": _xdoc_diff,
        "no_grad_roll": _xdoc_no_grad,
    },
    wrong={
        "label_before_the_change": _xdoc_before_the_change,
        "both_labels": _xdoc_both,
        "in_place": _xdoc_in_place,
        "wrong_axis": _xdoc_wrong_axis,
        "after_an_eos_label": _xdoc_after_an_eos,
        "nothing_dropped": lambda labels, document_ids: labels.clone(),
    },
    first_hints={
        "label_before_the_change": "same document",
        "both_labels": "same document",
        "wrong_axis": "starts document",
        "after_an_eos_label": "starts document",
        "nothing_dropped": "starts document",
    },
    refused={
        "reference": (lambda lab, d: mask_cross_document_targets(lab, d), "write it yourself"),
        "lmcore_top_level": (lambda lab, d: lmcore.mask_cross_document_targets(lab, d), "write it yourself"),
    },
)


# ---------------------------------------------------------------- 06: the block-diagonal causal mask


def _dcm_loop(document_ids):
    N, L = document_ids.shape
    out = torch.zeros(N, L, L, dtype=torch.bool)
    for n in range(N):
        for i in range(L):
            for j in range(i + 1):
                out[n, i, j] = bool(document_ids[n, i] == document_ids[n, j])
    return out


def _dcm_arange(document_ids):  # j <= i from two aranges
    L = document_ids.shape[1]
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (j <= i)[None] & document_ids.unsqueeze(2).eq(document_ids.unsqueeze(1))


def _dcm_tril_3d(document_ids):  # tril of the (N, L, L) same-document tensor itself
    same = document_ids[:, :, None] == document_ids[:, None, :]
    return torch.tril(same)


@torch.no_grad()
def _dcm_no_grad(document_ids):
    L = document_ids.shape[1]
    causal = torch.ones(L, L).tril().bool().expand(document_ids.shape[0], L, L)
    return causal.logical_and(document_ids[:, None, :] == document_ids[:, :, None])


def _dcm_same(document_ids):
    return document_ids[:, :, None] == document_ids[:, None, :]


def _dcm_padding_self(document_ids):
    """Every padding query reads only itself; the real documents as the reference."""
    out = _dcm_loop(document_ids).clone()
    N, L = document_ids.shape
    pad = document_ids < 0
    eye = torch.eye(L, dtype=torch.bool).expand(N, L, L)
    return torch.where(pad[..., None], eye, out)


ANSWERS["my_document_causal_mask"] = Answers(
    check=pk.check_document_causal_mask,
    no_float32=NO_FLOAT_MASK,
    right={
        "loop": _dcm_loop,
        "aranges": _dcm_arange,
        "tril_of_same": _dcm_tril_3d,
        "no_grad_logical_and": _dcm_no_grad,
        "padding_reads_only_itself": _dcm_padding_self,  # harmless: never read, never scored
    },
    wrong={
        "causal_only": lambda d: (
            torch.ones(d.shape[1], d.shape[1], dtype=torch.bool).tril().expand(d.shape[0], -1, -1)
        ),
        "same_document_only": _dcm_same,
        "first_row_for_the_batch": lambda d: _dcm_tril_3d(d)[0],
        "upper_triangle": lambda d: torch.triu(_dcm_same(d)),
        "strictly_causal": lambda d: torch.tril(_dcm_same(d), diagonal=-1),
        "or_instead_of_and": lambda d: (
            torch.ones(d.shape[1], d.shape[1], dtype=torch.bool).tril() | _dcm_same(d)
        ),
        "float_mask": lambda d: _dcm_tril_3d(d).float(),
        "padding_reads_nothing": lambda d: _dcm_tril_3d(d) & (d >= 0)[:, :, None],
    },
    first_hints={
        "causal_only": "should one packed document read another",
        "first_row_for_the_batch": "how many L x L masks",
        "same_document_only": "see the future",
        "upper_triangle": "see the future",
        "strictly_causal": "look at itself",
        "or_instead_of_and": "see the future",
        "float_mask": "bool",
        "padding_reads_nothing": "What may padding read?",
    },
    refused={
        "reference": (lambda d: document_causal_mask(d), "write it yourself"),
        "lmcore_top_level": (lambda d: lmcore.document_causal_mask(d), "write it yourself"),
    },
)


# ---------------------------------------------------------------- 06: position ids for packed documents


def _pos_loop(document_ids):
    out = torch.zeros_like(document_ids)
    for n, row in enumerate(document_ids.tolist()):
        for t in range(1, len(row)):
            out[n, t] = 0 if row[t] != row[t - 1] else out[n, t - 1] + 1
    return out


def _pos_running_counter(document_ids):  # one column at a time, every row at once
    out = torch.zeros_like(document_ids)
    for t in range(1, document_ids.shape[1]):
        same = document_ids[:, t] == document_ids[:, t - 1]
        out[:, t] = torch.where(same, out[:, t - 1] + 1, 0)
    return out


def _pos_count_same_before(document_ids):  # how many earlier tokens of the row share the id
    L = document_ids.shape[1]
    same = document_ids[:, :, None] == document_ids[:, None, :]
    before = torch.ones(L, L, dtype=torch.bool).tril(diagonal=-1)
    return (same & before).sum(dim=-1)


@torch.no_grad()
def _pos_no_grad_groupby(document_ids):  # runs of equal ids, each counted from 0
    rows = [
        [i for _, run in itertools.groupby(row) for i, _ in enumerate(run)] for row in document_ids.tolist()
    ]
    return torch.tensor(rows, dtype=torch.long)


def _pos_start_marked_late(document_ids):  # the change marked on the last token of the old document
    t = torch.arange(document_ids.shape[1]).expand_as(document_ids)
    start = torch.zeros_like(document_ids, dtype=torch.bool)
    start[:, 0] = True
    start[:, :-1] |= document_ids[:, 1:] != document_ids[:, :-1]
    return t - torch.where(start, t, 0).cummax(dim=1).values


def _pos_counted_across_rows(document_ids):  # a document cut across rows keeps counting in its new row
    flat = document_ids.flatten().tolist()
    out = [0]
    for prev, cur in zip(flat, flat[1:]):
        out.append(out[-1] + 1 if cur == prev else 0)
    return torch.tensor(out).view_as(document_ids)


def _pos_padding_zero(document_ids):
    return torch.where(document_ids >= 0, _pos_running_counter(document_ids), 0)


def _pos_mask_cumsum(document_ids):  # position_ids_from_attention_mask: no restart at a document
    real = (document_ids >= 0).long()
    return torch.where(real == 1, real.cumsum(1) - 1, 0)


def _pos_via_pack_documents(document_ids):  # rebuild each row's documents and let pack_documents count
    rows = []
    for row in document_ids.tolist():
        runs = [len(list(run)) for _, run in itertools.groupby(row)]
        packed = pack_documents([[5] * (n - 1) for n in runs], len(row), eos_id=EOS, pad_id=PAD)
        rows.append(packed.position_ids[0])
    return torch.stack(rows)


ANSWERS["my_position_ids"] = Answers(
    check=pk.check_position_ids,
    no_float32=NO_FLOAT_IDS,
    right={
        "loop": _pos_loop,
        "running_counter": _pos_running_counter,
        "count_same_id_before": _pos_count_same_before,
        "no_grad_groupby": _pos_no_grad_groupby,
        "padding_at_zero": _pos_padding_zero,  # padding is never scored nor read: any position
        # int32 ids with padding at the last position the model has: any integer dtype will do
        "int32_padding_at_l_minus_1": lambda d: (
            _pos_running_counter(d).to(torch.int32).masked_fill(d < 0, d.shape[1] - 1)
        ),
    },
    wrong={
        "no_restart": lambda d: torch.arange(d.shape[1]).expand_as(d).clone(),
        "from_one": lambda d: _pos_running_counter(d) + 1,
        "start_marked_late": _pos_start_marked_late,
        "attention_mask_cumsum": _pos_mask_cumsum,
        "counted_across_rows": _pos_counted_across_rows,
        # outside the model's table of L positions: lmcore's GPT raises on either
        "padding_at_minus_1": lambda d: _pos_running_counter(d).masked_fill(d < 0, -1),
        "padding_at_999": lambda d: _pos_running_counter(d).masked_fill(d < 0, 999),
    },
    first_hints={
        "no_restart": "if document 1 started a row of its own",
        "from_one": "which position does the first token of a row get",
        "start_marked_late": "had a row of its own, which position would that token have",
        "attention_mask_cumsum": "if document 1 started a row of its own",
        "counted_across_rows": "cut from row",
        "padding_at_minus_1": "which ids can it take?",
        "padding_at_999": "which ids can it take?",
    },
    refused={
        "reference": (lambda d: _restart_positions(d), "write it yourself"),
        "pack_documents": (_pos_via_pack_documents, "write it yourself"),
    },
)


# ---------------------------------------------------------------- 06: chat labels, one turn

USER, ASSISTANT = pk.USER, pk.ASSISTANT


def _chat_argmax(input_ids, assistant_id=ASSISTANT, pad_id=PAD):  # the index of <assistant> per row
    where = (input_ids == assistant_id).int().argmax(dim=1, keepdim=True)  # (N, 1)
    answer = torch.arange(input_ids.shape[1])[None] > where
    return input_ids.masked_fill(~answer | (input_ids == pad_id), IGNORE_INDEX)


def _chat_row_loop(input_ids, assistant_id=ASSISTANT, pad_id=PAD):
    labels = []
    for row in input_ids.tolist():
        k = row.index(assistant_id)
        labels.append([IGNORE_INDEX] * (k + 1) + [t if t != pad_id else IGNORE_INDEX for t in row[k + 1 :]])
    return torch.tensor(labels, dtype=input_ids.dtype)


def _chat_cummax(input_ids, assistant_id=ASSISTANT, pad_id=PAD):  # "an <assistant> strictly before t"
    seen = (input_ids == assistant_id).cummax(dim=1).values  # from <assistant> on
    before = F.pad(seen[:, :-1], (1, 0), value=False)  # strictly before t
    return torch.where(before & (input_ids != pad_id), input_ids, IGNORE_INDEX)


@torch.no_grad()
def _chat_no_grad(input_ids, assistant_id=ASSISTANT, pad_id=PAD):
    labels = input_ids.clone()
    after = (input_ids == assistant_id).long().cumsum(dim=1)
    labels[(after == 0) | (input_ids == assistant_id) | (input_ids == pad_id)] = IGNORE_INDEX
    return labels


def _chat_variant(*, keep_assistant=False, drop_first=False, pad=True, drop_eos=False):
    """The one-turn mask with one thing changed: <assistant> kept as a target, the answer's first
    token dropped too, padding scored, or EOS dropped as if it were padding."""

    def fn(input_ids, assistant_id=ASSISTANT, pad_id=PAD):
        seen = (input_ids == assistant_id).long().cumsum(dim=1)
        prompt = seen == 0
        if not keep_assistant:
            prompt |= input_ids == assistant_id
        if drop_first:
            prompt |= F.pad(input_ids[:, :-1] == assistant_id, (1, 0), value=False)
        drop = prompt
        if pad:
            drop = drop | (input_ids == pad_id)
        if drop_eos:
            drop = drop | (input_ids == pk.EOS)
        return torch.where(drop, IGNORE_INDEX, input_ids)

    return fn


ANSWERS["my_chat_labels"] = Answers(
    check=chat.check_chat_labels,
    no_float32=NO_FLOAT_IDS,
    right={
        "argmax_index": _chat_argmax,
        "first_label_kept": _first_label_set(_chat_argmax, "input"),  # the <user> id at position 0
        "row_loop": _chat_row_loop,
        "cummax_strictly_before": _chat_cummax,
        "no_grad_cumsum": _chat_no_grad,
    },
    wrong={
        "assistant_token_scored": _chat_variant(keep_assistant=True),
        "answer_first_token_dropped": _chat_variant(drop_first=True),
        "padding_scored": _chat_variant(pad=False),
        "eos_dropped": _chat_variant(drop_eos=True),
        "prompt_scored_instead": lambda x, a=ASSISTANT, p=PAD: torch.where(
            _chat_variant()(x, a, p) == IGNORE_INDEX, x, IGNORE_INDEX
        ).masked_fill(x == p, IGNORE_INDEX),
        # the notebook's constants instead of the arguments
        "ids_hard_coded": lambda x, assistant_id=ASSISTANT, pad_id=PAD: _chat_argmax(x),
    },
    first_hints={
        "assistant_token_scored": "<assistant> marker",
        "answer_first_token_dropped": "assistant's answer",
        "padding_scored": "PAD",
        "eos_dropped": "learn to stop",
        "prompt_scored_instead": "is in the user's turn and your labels score it",
        "ids_hard_coded": "does your function read its arguments",
    },
    refused={
        "reference": (lambda x: chat.chat_labels(x), "write the mask yourself"),
        "multi_turn_reference": (lambda x: chat.multi_turn_labels(x), "write the mask yourself"),
    },
)


# ---------------------------------------------------------------- 06: chat labels, many turns


def _mt_cummax(input_ids, user_id=USER, assistant_id=ASSISTANT, pad_id=PAD):  # the last role token's index
    is_role = (input_ids == user_id) | (input_ids == assistant_id)
    t = torch.arange(input_ids.shape[1]).expand_as(input_ids)
    last = torch.where(is_role, t, -1).cummax(dim=1).values
    in_answer = (last >= 0) & (input_ids.gather(1, last.clamp(min=0)) == assistant_id)
    return torch.where(in_answer & ~is_role & (input_ids != pad_id), input_ids, IGNORE_INDEX)


def _mt_counts(input_ids, user_id=USER, assistant_id=ASSISTANT, pad_id=PAD):
    """Turns alternate, <user> first: inside an answer, as many <assistant> as <user> seen so far."""
    users = (input_ids == user_id).long().cumsum(dim=1)
    assistants = (input_ids == assistant_id).long().cumsum(dim=1)
    keep = (assistants == users) & (users > 0) & (input_ids != assistant_id) & (input_ids != pad_id)
    return torch.where(keep, input_ids, IGNORE_INDEX)


def _mt_python(input_ids, user_id=USER, assistant_id=ASSISTANT, pad_id=PAD):  # a state machine per row
    out = []
    for row in input_ids.tolist():
        speaking, labels = None, []
        for tok in row:
            if tok in (user_id, assistant_id):
                speaking = tok
                labels.append(IGNORE_INDEX)
            else:
                labels.append(tok if speaking == assistant_id and tok != pad_id else IGNORE_INDEX)
        out.append(labels)
    return torch.tensor(out)


@functools.wraps(_mt_python)
def _mt_wrapped(input_ids, user_id=USER, assistant_id=ASSISTANT, pad_id=PAD):  # columns, all rows at once
    state = torch.zeros(input_ids.shape[0], dtype=torch.bool)  # inside an answer?
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    for t in range(input_ids.shape[1]):
        col = input_ids[:, t]
        state = torch.where(col == assistant_id, True, torch.where(col == user_id, False, state))
        keep = state & (col != assistant_id) & (col != pad_id)
        labels[:, t] = torch.where(keep, col, IGNORE_INDEX)
    return labels


def _mt_variant(*, turns="all", roles=True, eos=True):
    """The state machine with one thing changed: only the ``first`` or ``last`` answer scored, the
    role tokens scored, or each turn's EOS dropped."""

    def fn(input_ids, user_id=USER, assistant_id=ASSISTANT, pad_id=PAD):
        labels = _mt_python(input_ids, user_id, assistant_id, pad_id)
        answer = (input_ids == assistant_id).long().cumsum(1)
        if turns == "first":
            labels[answer != 1] = IGNORE_INDEX
        if turns == "last":
            labels[answer != answer[:, -1:]] = IGNORE_INDEX
        if not roles:
            labels = torch.where(input_ids == assistant_id, input_ids, labels)
        if not eos:
            labels[input_ids == pk.EOS] = IGNORE_INDEX
        return labels

    return fn


def _mt_one_turn_per_turn(input_ids, user_id=USER, assistant_id=ASSISTANT, pad_id=PAD):
    """Exercise 5's chat_labels on each <user> ... turn of a row, the turns joined back."""
    rows = []
    for row in input_ids:
        starts = (row == user_id).nonzero().flatten().tolist() + [len(row)]
        parts = [
            chat.chat_labels(row[a:b][None], assistant_id, pad_id)[0] for a, b in zip(starts, starts[1:])
        ]
        rows.append(torch.cat(parts))
    return torch.stack(rows)


ANSWERS["my_multi_turn_labels"] = Answers(
    check=chat.check_multi_turn_labels,
    no_float32=NO_FLOAT_IDS,
    right={
        "cummax_last_role": _mt_cummax,
        "first_label_kept": _first_label_set(_mt_cummax, "input"),
        "role_counts": _mt_counts,
        "python_state_machine": _mt_python,
        "wrapped_columns": _mt_wrapped,
    },
    wrong={
        "one_turn_rule": lambda x, u=USER, a=ASSISTANT, p=PAD: _chat_no_grad(x, a, p),
        "first_answer_only": _mt_variant(turns="first"),
        "last_answer_only": _mt_variant(turns="last"),
        "assistant_token_scored": _mt_variant(roles=False),
        "eos_dropped": _mt_variant(eos=False),
        "padding_scored": lambda x, u=USER, a=ASSISTANT, p=PAD: torch.where(
            x == p, x, _mt_python(x, u, a, p)
        ),
        "zero_for_ignored": lambda x, u=USER, a=ASSISTANT, p=PAD: _mt_python(x, u, a, p).clamp(min=0),
        "shifted_to_l_minus_1": lambda x, u=USER, a=ASSISTANT, p=PAD: _mt_python(x, u, a, p)[:, 1:],
        "float_labels": lambda x, u=USER, a=ASSISTANT, p=PAD: _mt_python(x, u, a, p).float(),
        "shifted_here": lambda x, u=USER, a=ASSISTANT, p=PAD: torch.nn.functional.pad(
            _mt_python(x, u, a, p)[:, 1:], (0, 1), value=-100
        ),
        "ids_hard_coded": lambda x, user_id=USER, assistant_id=ASSISTANT, pad_id=PAD: _mt_python(x),
    },
    first_hints={
        "one_turn_rule": "<user> marker",
        "shifted_here": "where does the next-token shift happen",
        "ids_hard_coded": "does your function read its arguments",
        "zero_for_ignored": "which value does the loss skip",
        "shifted_to_l_minus_1": "Are you shifting here?",
        "float_labels": "which dtype",
        "first_answer_only": "assistant turn 2 of 2",
        "last_answer_only": "assistant turn 1 of 2",
        "assistant_token_scored": "<assistant> marker",
        "eos_dropped": "learn to stop",
        "padding_scored": "PAD",
    },
    refused={
        "reference": (lambda x: chat.multi_turn_labels(x), "write the scan yourself"),
        "one_turn_reference_per_turn": (_mt_one_turn_per_turn, "write the scan yourself"),
    },
)
