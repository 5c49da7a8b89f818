"""The answer matrix of notebooks 00-03 (issue 38): surprise; stable_softmax, nll_from_logits,
double_softmax_band, fit_temperature; my_ce_grad, numerical_gradient, smoothed_ce_grad, tied_grads; my_per_position_nll,
colleague_faults, symptom_batches, my_loss_and_grad_norm. See ``_answers.py`` for what each entry holds."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F
from _answers import Answers

from lmcore import handcalc
from lmcore.course.gradients import backprop
from lmcore.course.gradients import lesson as grad_lesson
from lmcore.course.sequence import colleague
from lmcore.course.sequence import exercises as seq
from lmcore.course.softmax_nll import band as sm_band
from lmcore.course.softmax_nll import calibration as sm_calibration
from lmcore.course.softmax_nll import lesson as sm_lesson
from lmcore.course.start import lesson as start_lesson
from lmcore.loss import causal_lm_loss
from lmcore.shift import shift_for_next_token

ANSWERS: dict[str, Answers] = {}


# ---------------------------------------------------------------- 00: surprise(p) = -ln p


def _surprise_log_of_inverse(p):
    return math.log(1 / p)


def _surprise_float32(p):
    return float(-np.log(np.float32(p)))


def _surprise_from_bits(p):  # bits first, then converted: log2(p) * ln 2
    return -math.log2(p) * math.log(2)


@functools.wraps(_surprise_log_of_inverse)
def _surprise_wrapped(p):
    return -float(torch.log(torch.tensor(p, dtype=torch.float64)))


ANSWERS["surprise"] = Answers(
    check=start_lesson.check_surprise,
    right={
        "log_of_inverse": _surprise_log_of_inverse,
        "float32": _surprise_float32,
        "bits_times_ln2": _surprise_from_bits,
        "torch_log_wrapped": _surprise_wrapped,
    },
    wrong={
        "bits": lambda p: -math.log2(p),
        "log10": lambda p: -math.log10(p),
        "sign": lambda p: math.log(p),
        "one_minus_p": lambda p: 1 - p,
        "log_of_one_minus_p": lambda p: -math.log(1 - p) if p < 1 else 0.0,
        "inverse": lambda p: 1 / p,
        "rounded_to_3_decimals": lambda p: round(-math.log(p), 3),
    },
    first_hints={
        "bits": "which logarithm",
        "log10": "which logarithm",
        "rounded_to_3_decimals": "rounded to 3 decimals",
    },
    refused={
        "reference": (lambda p: start_lesson.surprise_reference(p), "that is the reference"),
        "widget_line_parsed": (
            lambda p: float(start_lesson.surprise_line(p).split("loss = ")[1].split()[0]),
            "that is the reference",
        ),
        "handcalc_nll_of_two_logits": (  # -ln p as the loss of the logits [ln p, ln(1 - p)]
            lambda p: handcalc.nll([math.log(p), math.log(max(1 - p, 1e-300))], 0),
            "notebook 01's loss",
        ),
    },
)


# ---------------------------------------------------------------- 01: stable softmax


def _softmax_loop(z):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    return np.array(e) / math.fsum(e)


def _softmax_float32(z):
    z32 = np.asarray(z, dtype=np.float32)
    e = np.exp(z32 - z32.max())
    return e / e.sum()


def _softmax_torch_exp(z):  # the same trick on a tensor, from torch.exp
    t = torch.from_numpy(np.array(z, dtype=np.float64))
    e = torch.exp(t - t.max())
    return (e / e.sum()).numpy()


@functools.wraps(_softmax_loop)
def _softmax_wrapped(z):
    shifted = z - np.max(z)
    return np.exp(shifted) / np.exp(shifted).sum()


def _softmax_in_place(z):
    z -= z.max()
    np.exp(z, out=z)
    z /= z.sum()
    return z


ANSWERS["stable_softmax"] = Answers(
    check=sm_lesson.check_stable_softmax,
    right={
        "loop_fsum": _softmax_loop,
        "float32": _softmax_float32,
        "torch_exp": _softmax_torch_exp,
        "wrapped": _softmax_wrapped,
    },
    wrong={
        "naive": lambda z: np.exp(z) / np.exp(z).sum(),
        "min_shift": lambda z: np.exp(z - z.min()) / np.exp(z - z.min()).sum(),
        "mean_shift": lambda z: np.exp(z - z.mean()) / np.exp(z - z.mean()).sum(),
        "unnormalised": lambda z: np.exp(z - z.max()),
        "in_place": _softmax_in_place,
        "shift_plus_max": lambda z: np.exp(z + z.max()) / np.exp(z + z.max()).sum(),
        "divided_by_max": lambda z: np.exp(z - z.max()) / np.exp(z - z.max()).max(),
    },
    first_hints={
        "naive": "its exp overflows",
        "min_shift": "its exp overflows",
        "mean_shift": "its exp overflows",
        "unnormalised": "add up to",
        "divided_by_max": "add up to",
    },
    refused={
        "reference": (lambda z: handcalc.softmax(z), "write it yourself"),
        "torch_softmax": (lambda z: torch.softmax(torch.from_numpy(z), 0).numpy(), "write it yourself"),
        "exp_minus_handcalc_logsumexp": (lambda z: np.exp(z - handcalc.logsumexp(z)), "write it yourself"),
        "exp_minus_numpy_logaddexp": (lambda z: np.exp(z - np.logaddexp.reduce(z)), "numpy.logaddexp"),
        "exp_minus_pairwise_logaddexp": (
            lambda z: np.exp(z - functools.reduce(np.logaddexp, z)),
            "numpy.logaddexp",
        ),
    },
)


# ---------------------------------------------------------------- 01: NLL from logits


def _nll_loop(z, y):
    m = max(z)
    return m + math.log(math.fsum(math.exp(v - m) for v in z)) - z[y]


def _nll_float32(z, y):
    z32 = np.asarray(z, dtype=np.float32)
    m = z32.max()
    return float(m + np.log(np.exp(z32 - m).sum()) - z32[y])


def _nll_log1p(z, y):  # the largest term taken out of the sum exactly: m + log1p(the rest)
    k = int(np.argmax(z))
    rest = np.exp(np.delete(z, k) - z[k]).sum()
    return float(z[k] + np.log1p(rest) - z[y])


def _nll_shift_first(z, y):  # shift the logits, then the loss of the shifted ones (log of a sum >= 1)
    s = z - np.max(z)
    return float(np.log(np.exp(s).sum()) - s[y])


@functools.wraps(_nll_loop)
def _nll_wrapped(z, y):
    return _nll_shift_first(z, y)


ANSWERS["nll_from_logits"] = Answers(
    check=sm_lesson.check_nll_from_logits,
    right={
        "loop_fsum": _nll_loop,
        "float32": _nll_float32,
        "log1p_of_the_rest": _nll_log1p,
        "shift_first": _nll_shift_first,
        "wrapped": _nll_wrapped,
    },
    wrong={
        "log_of_stable_softmax": lambda z, y: float(
            -np.log(np.exp(z - z.max())[y] / np.exp(z - z.max()).sum())
        ),
        "no_max": lambda z, y: float(np.log(np.exp(z).sum()) - z[y]),
        "bits": lambda z, y: _nll_log1p(z, y) / math.log(2),
        "sign": lambda z, y: -_nll_log1p(z, y),
        "max_left_inside": lambda z, y: float(np.log(np.exp(z - z.max()).sum()) - z[y]),
        "max_instead_of_lse": lambda z, y: float(np.max(z) - z[y]),
        "logsumexp_only": lambda z, y: _nll_log1p(z, y) + z[y],
    },
    first_hints={
        "log_of_stable_softmax": "your loss is inf",
        "no_max": "your loss is inf",
        "bits": "which logarithm",
        "sign": "sign is flipped",
        "max_left_inside": "adding 5 to every logit",
        "max_instead_of_lse": "equal logits",
        "logsumexp_only": "adding 5 to every logit",
    },
    refused={
        "reference": (lambda z, y: handcalc.nll(z, y), "write it yourself"),
        "torch_cross_entropy": (
            lambda z, y: float(F.cross_entropy(torch.from_numpy(z)[None], torch.tensor([y]))),
            "write it yourself",
        ),
        "numpy_logaddexp_reduce": (lambda z, y: float(np.logaddexp.reduce(z) - z[y]), "write it yourself"),
        "numpy_logaddexp_pairwise": (
            lambda z, y: float(functools.reduce(np.logaddexp, z) - z[y]),
            "write it yourself",
        ),
        "torch_logsumexp": (
            lambda z, y: float(torch.logsumexp(torch.from_numpy(z), 0) - z[y]),
            "write it yourself",
        ),
    },
)


# ---------------------------------------------------------------- 01: the double-softmax band


def _band_law(V):
    high = math.log(math.e + V - 1)
    return high - 1, high


def _band_by_trying(V, dtype=torch.float64, gap=50.0):  # another algorithm: the bug at near-one-hot logits
    def bug(top, y):
        z = torch.zeros(V, dtype=dtype)
        z[top] = gap
        return float(F.cross_entropy(torch.softmax(z, -1)[None], torch.tensor([y])))

    return bug(0, 0), bug(1, 0)


def _band_search(V):  # another: the bug at p = (t, 1 - t, 0, ...) read off a grid of t, ends taken
    t = np.linspace(0.0, 1.0, 2001)
    lse = np.log(np.exp(t) + np.exp(1 - t) + (V - 2))
    loss = lse - t  # y holds t
    return float(loss.min()), float(loss.max())


@functools.wraps(_band_law)
def _band_wrapped(V):
    return np.array(_band_law(V))


ANSWERS["double_softmax_band"] = Answers(
    check=sm_band.check_double_softmax_band,
    right={
        "the_ends": _band_law,
        "float32_by_trying": lambda V: _band_by_trying(V, torch.float32),
        "by_trying": _band_by_trying,
        "grid_over_two_tokens": _band_search,
        "as_a_tensor": lambda V: torch.tensor(_band_law(V), dtype=torch.float64),
        "wrapped_array": _band_wrapped,
    },
    wrong={
        "v_not_v_minus_1": lambda V: (math.log(1 + V / math.e), math.log(V + math.e)),
        "swapped": lambda V: _band_law(V)[::-1],
        "ln_v_as_the_top": lambda V: (math.log(V) - 1, math.log(V)),
        "the_right_loss_s_range": lambda V: (0.0, math.inf),
        "zero_to_ln_v": lambda V: (0.0, math.log(V)),
        "bits": lambda V: tuple(x / math.log(2) for x in _band_law(V)),
        "top_from_the_rest_uniform": lambda V: (
            _band_law(V)[0],
            math.log(1 + (V - 1) * math.exp(1 / (V - 1))),
        ),
        "tried_at_logits_of_3": lambda V: _band_by_trying(V, gap=3.0),  # near the ends, not at them
        "one_loss_not_two": lambda V: _band_law(V)[1],
    },
    refused={
        "reference": (sm_band.double_softmax_band_reference, "the course's own answer"),
        "reference_by_another_name": (
            lambda V: (lambda f: f(V))(sm_band.double_softmax_band_reference),
            "the course's own answer",
        ),
    },
    first_hints={
        "v_not_v_minus_1": "your low is no bound",
        "ln_v_as_the_top": "your high is no bound",
        "the_right_loss_s_range": "grow without bound",
        "zero_to_ln_v": "your high is no bound",
        "bits": "which logarithm",
        "swapped": "which end is which",
        "top_from_the_rest_uniform": "your high is no bound",
        "tried_at_logits_of_3": "your low is no bound",
        "one_loss_not_two": "what does your function return",
    },
)


# ---------------------------------------------------------------- 01: the temperature that fits


def _mean_nll_loop(Z, y, T=1.0):
    total, n = 0.0, 0
    for row, target in zip(Z, y):
        if target == -100:
            continue
        z = [v / T for v in row]
        m = max(z)
        total += m + math.log(math.fsum(math.exp(v - m) for v in z)) - z[int(target)]
        n += 1
    return total / n


def _mean_nll_float32(Z, y, T=1.0):
    keep = y != -100
    S = np.asarray(Z[keep], dtype=np.float32) / np.float32(T)
    m = S.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(S - m).sum(axis=1))
    return float((lse - S[np.arange(len(S)), y[keep]]).mean())


def _mean_nll_masked_weights(Z, y, T=1.0):  # every row scored, then a 0/1 weight and its sum
    S = Z / T
    w = (y != -100).astype(np.float64)
    picked = S[np.arange(len(S)), np.where(y == -100, 0, y)]
    m = S.max(axis=1)
    lse = m + np.log(np.exp(S - m[:, None]).sum(axis=1))
    return float(((lse - picked) * w).sum() / w.sum())


def _mean_nll_no_max(Z, y, T=1.0):  # e^(z / T) straight: inf once z / T passes 709
    keep = y != -100
    S = Z[keep] / T
    with np.errstate(over="ignore", invalid="ignore"):
        return float((np.log(np.exp(S).sum(axis=1)) - S[np.arange(len(S)), y[keep]]).mean())


def _golden(loss, Z, y, lo=1e-3, hi=1e4, steps=120):
    """Golden-section search of loss(Z, y, T) over log T; returns (T, the loss at T)."""
    a, b, g = math.log(lo), math.log(hi), (math.sqrt(5) - 1) / 2
    for _ in range(steps):
        c, d = b - g * (b - a), a + g * (b - a)
        if loss(Z, y, math.exp(c)) < loss(Z, y, math.exp(d)):
            b = d
        else:
            a = c
    T = math.exp((a + b) / 2)
    return T, loss(Z, y, T)


def _fit_newton(Z, y):  # Newton on beta = 1 / T: slope mean(E_p[z] - z_y), curvature mean(Var_p z)
    keep = y != -100
    S, t = Z[keep], Z[keep][np.arange(keep.sum()), y[keep]]
    beta = 1.0 / max(float(S.std()), 1e-12)
    for _ in range(200):
        a = beta * S
        p = np.exp(a - a.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        mean_z = (p * S).sum(axis=1)
        slope, curve = (mean_z - t).mean(), ((p * S * S).sum(axis=1) - mean_z**2).mean()
        beta = max(beta - slope / curve, beta / 4)  # a damped step keeps beta positive
    return 1.0 / beta, _mean_nll_loop(Z, y, 1.0 / beta)


def _fit_grid_refined(Z, y):  # a log grid, then finer grids around the best point
    lo, hi = -3.0, 4.0
    for _ in range(8):
        Ts = np.logspace(lo, hi, 101)
        k = int(np.argmin([_mean_nll_masked_weights(Z, y, T) for T in Ts]))
        lo, hi = math.log10(Ts[max(k - 1, 0)]), math.log10(Ts[min(k + 1, 100)])
    T = float(Ts[k])
    return T, _mean_nll_masked_weights(Z, y, T)


@functools.wraps(_fit_newton)
def _fit_wrapped(Z, y):
    return _fit_newton(Z, y)


def _mean_nll_divided_by(Z, y, T, divide):
    keep = y != -100
    S = Z[keep] / T
    per_row = np.logaddexp.reduce(S, axis=1) - S[np.arange(len(S)), y[keep]]
    return float(per_row.sum() / divide(y))


ANSWERS["fit_temperature"] = Answers(
    check=sm_calibration.check_fit_temperature,
    right={
        "golden_section_fsum_loop": lambda Z, y: _golden(_mean_nll_loop, Z, y),
        "float32_golden_section": lambda Z, y: tuple(
            np.float32(v) for v in _golden(_mean_nll_float32, Z, y, steps=60)
        ),
        "newton_on_beta": _fit_newton,
        "refined_grid_masked_weights": _fit_grid_refined,
        "wrapped": _fit_wrapped,
    },
    wrong={
        "a_coarse_grid": lambda Z, y: min(
            ((T, _mean_nll_loop(Z, y, T)) for T in np.logspace(-3, 4, 500)), key=lambda r: r[1]
        ),
        "too_few_steps": lambda Z, y: _golden(_mean_nll_loop, Z, y, steps=12),
        "ignored_rows_scored_as_token_0": lambda Z, y: _golden(
            lambda Z, y, T: _mean_nll_loop(Z, np.where(y == -100, 0, y), T), Z, y
        ),
        "multiplies_by_T": lambda Z, y: _golden(lambda Z, y, T: _mean_nll_loop(Z, y, 1.0 / T), Z, y),
        "divides_by_all_rows": lambda Z, y: (
            _golden(_mean_nll_loop, Z, y)[0],
            _mean_nll_divided_by(Z, y, _golden(_mean_nll_loop, Z, y)[0], len),
        ),
        "the_loss_at_T_1": lambda Z, y: (_golden(_mean_nll_loop, Z, y)[0], _mean_nll_loop(Z, y, 1.0)),
        "the_loss_summed": lambda Z, y: (
            _golden(_mean_nll_loop, Z, y)[0],
            _mean_nll_divided_by(Z, y, _golden(_mean_nll_loop, Z, y)[0], lambda y: 1),
        ),
        "T_only_in_the_logsumexp": lambda Z, y: _golden(
            lambda Z, y, T: float(
                np.mean([np.logaddexp.reduce(z / T) - z[t] for z, t in zip(Z, y) if t != -100])
            ),
            Z,
            y,
            hi=1e3,
        ),
        "returns_T_only": lambda Z, y: _golden(_mean_nll_loop, Z, y)[0],
        "no_max_trick": lambda Z, y: _golden(_mean_nll_no_max, Z, y),
    },
    first_hints={
        "a_coarse_grid": "how does your search know it has arrived",
        "too_few_steps": "how does your search know it has arrived",
        "ignored_rows_scored_as_token_0": "which rows does the loss leave out?",
        "multiplies_by_T": "divide the logits by T, or multiply them?",
        "divides_by_all_rows": "which count did you divide by",
        "the_loss_at_T_1": "at which temperature does the loss you return belong?",
        "returns_T_only": "what does your function return?",
        "no_max_trick": "is every loss your search compares there a finite number",
    },
    refused={
        "reference": (
            lambda Z, y: (
                sm_calibration.best_temperature(Z, y),
                sm_lesson.mean_nll_reference(Z, y, sm_calibration.best_temperature(Z, y)),
            ),
            "write it yourself",
        ),
        "torch_cross_entropy": (
            lambda Z, y: _golden(
                lambda Z, y, T: float(
                    F.cross_entropy(torch.from_numpy(Z / T), torch.from_numpy(y), ignore_index=-100)
                ),
                Z,
                y,
            ),
            "write it yourself",
        ),
    },
)


# ---------------------------------------------------------------- 02: the gradient of the NLL


def _grad_by_engine(loss, leaf):  # autograd's engine called directly, not through torch.autograd
    from torch.autograd.variable import Variable

    return Variable._execution_engine.run_backward(
        (loss,), (torch.ones_like(loss),), False, False, (leaf,), False
    )[0]


def _grad_by_nodes(loss, leaf):  # the recorded graph's nodes called one by one, no engine at all
    total = torch.zeros_like(leaf)
    stack = [(loss.grad_fn, torch.ones_like(loss))]
    while stack:
        node, g = stack.pop()
        if node is None or g is None:
            continue
        if hasattr(node, "variable"):  # AccumulateGrad: a leaf
            if node.variable is leaf:
                total = total + g
            continue
        outs = node(g)
        outs = outs if isinstance(outs, tuple) else (outs,)
        stack += [(nxt, out) for (nxt, _), out in zip(node.next_functions, outs)]
    return total


def _ce_loss_of(z, y):
    t = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    return F.cross_entropy(t[None], torch.tensor([y])), t


def _tied_loss_of(E, x, y):
    e = E.clone().requires_grad_(True)
    return F.cross_entropy((e[x] @ e.T).reshape(-1, E.shape[0]), y.reshape(-1)), e


def _ce_grad_loop(z, y):
    m = max(z)
    e = [math.exp(v - m) for v in z]
    s = math.fsum(e)
    return np.array([v / s - (1.0 if i == y else 0.0) for i, v in enumerate(e)])


def _ce_grad_float32(z, y):
    z32 = np.asarray(z, dtype=np.float32)
    e = np.exp(z32 - z32.max())
    g = e / e.sum()
    g[y] -= np.float32(1.0)
    return g


def _ce_grad_onehot(z, y):  # p - onehot(y), p = exp(z - LSE(z))
    return np.exp(z - np.logaddexp.reduce(z)) - np.eye(len(z))[y]


def _ce_grad_target_as_rest(z, y):  # the target's entry written as minus the others' sum
    e = np.exp(z - np.max(z))
    p = e / e.sum()
    g = p.copy()
    g[y] = -(p.sum() - p[y])
    return g


@functools.wraps(_ce_grad_loop)
def _ce_grad_wrapped(z, y):
    return _ce_grad_onehot(z, y)


def _ce_grad_in_place(z, y):
    z -= z.max()
    np.exp(z, out=z)
    z /= z.sum()
    z[y] -= 1
    return z


ANSWERS["my_ce_grad"] = Answers(
    check=grad_lesson.check_ce_grad,
    right={
        "loop_fsum": _ce_grad_loop,
        "float32": _ce_grad_float32,
        "onehot_lse": _ce_grad_onehot,
        "target_as_rest": _ce_grad_target_as_rest,
        "wrapped": _ce_grad_wrapped,
    },
    wrong={
        "sign": lambda z, y: -_ce_grad_onehot(z, y),
        "softmax_only": lambda z, y: np.exp(z - np.logaddexp.reduce(z)),
        "minus_onehot_only": lambda z, y: -np.eye(len(z))[y],
        "naive_softmax": lambda z, y: np.exp(z) / np.exp(z).sum() - np.eye(len(z))[y],
        "in_place": _ce_grad_in_place,
        "log_probs_minus_onehot": lambda z, y: (z - np.logaddexp.reduce(z)) - np.eye(len(z))[y],
        "minus_p_y_everywhere": lambda z, y: (
            np.exp(z - np.logaddexp.reduce(z)) - np.exp(z[y] - np.logaddexp.reduce(z))
        ),
        "divided_by_V": lambda z, y: _ce_grad_onehot(z, y) / len(z),  # a mean over the V logits
    },
    first_hints={
        "divided_by_V": "but each is",
        "sign": "sign is flipped",
        "softmax_only": "sum to 1",
        "minus_onehot_only": "sum to -1",
        "naive_softmax": "what does exp give there",
        "log_probs_minus_onehot": "what must the entries sum to",
        "minus_p_y_everywhere": "what must the entries sum to",
    },
    refused={
        "reference": (lambda z, y: handcalc.ce_grad(z, y), "that is the reference this exercise replaces"),
        "autograd": (
            lambda z, y: torch.autograd.grad(
                F.cross_entropy(
                    (t := torch.tensor(z, dtype=torch.float64, requires_grad=True))[None], torch.tensor([y])
                ),
                t,
            )[0].numpy(),
            "autograd does the work",
        ),
        "autograd_engine_called_directly": (
            lambda z, y: _grad_by_engine(*_ce_loss_of(z, y)).detach().numpy(),
            "autograd does the work",
        ),
        "graph_nodes_called_by_hand": (
            lambda z, y: _grad_by_nodes(*_ce_loss_of(z, y)).detach().numpy(),
            "autograd does the work",
        ),
    },
)


# ---------------------------------------------------------------- 02: a finite-difference gradient


def _fd_central(f, z, eps):
    g = np.zeros(len(z))
    for i in range(len(z)):
        up, down = z.copy(), z.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (up[i] - down[i])
    return g


def _fd_float32_result(f, z, eps):  # float64 differences, kept in a float32 array
    g = np.zeros(len(z), dtype=np.float32)
    for i, e in enumerate(np.eye(len(z))):
        g[i] = (f(z + eps * e) - f(z - eps * e)) / (2 * eps)
    return g


def _fd_five_point(f, z, eps):  # another stencil: error ~ eps^4
    g = np.zeros(len(z))
    for i, e in enumerate(np.eye(len(z)) * eps):
        g[i] = (-f(z + 2 * e) + 8 * f(z + e) - 8 * f(z - e) + f(z - 2 * e)) / (12 * eps)
    return g


def _fd_richardson(f, z, eps):  # two forward differences, extrapolated: second order too
    return 2 * _fd_forward(f, z, eps / 2) - _fd_forward(f, z, eps)


_fd_wrapped = functools.wraps(_fd_five_point)(lambda f, z, eps: _fd_central(f, z, eps))


def _fd_forward(f, z, eps):
    return np.array([(f(z + eps * e) - f(z)) / eps for e in np.eye(len(z))])


def _fd_backward(f, z, eps):
    return np.array([(f(z) - f(z - eps * e)) / eps for e in np.eye(len(z))])


def _fd_relative_step(f, z, eps):  # the textbook's step eps * max(1, |z_i|): not the eps given
    g = np.zeros(len(z))
    for i in range(len(z)):
        up, down = z.copy(), z.copy()
        up[i] += eps * max(1.0, abs(z[i]))
        down[i] -= eps * max(1.0, abs(z[i]))
        g[i] = (f(up) - f(down)) / (up[i] - down[i])
    return g


def _fd_float32_z(f, z, eps):  # z copied to float32: at |z_i| = 1000 the step rounds
    z, g = z.astype(np.float32), np.zeros(len(z))
    for i in range(len(z)):
        up, down = z.copy(), z.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


def _fd_all_at_once(f, z, eps):  # nudges every coordinate together: a directional derivative
    return np.full(len(z), (f(z + eps) - f(z - eps)) / (2 * eps))


def _fd_in_place(f, z, eps):
    g = np.zeros(len(z))
    for i in range(len(z)):
        z[i] += eps
        up = f(z)
        z[i] -= 2 * eps
        down = f(z)
        z[i] += eps
        g[i] = (up - down) / (2 * eps)
    return g


def _fd_looked_up(f, z, eps):  # the check's f wraps a function of its table: find it, use its gradient
    inside = [cell.cell_contents for cell in f.__closure__ or ()]
    return next(dg for g, dg, _ in grad_lesson._FUNCTIONS.values() if any(g is c for c in inside))(z)


ANSWERS["numerical_gradient"] = Answers(
    check=grad_lesson.check_finite_difference,
    right={
        "central": _fd_central,
        "float32_result": _fd_float32_result,
        "five_point": _fd_five_point,
        "richardson_of_forward": _fd_richardson,
        "wrapped": _fd_wrapped,
    },
    wrong={
        "forward": _fd_forward,
        "backward": _fd_backward,
        "forward_at_1e-8_ignoring_eps": lambda f, z, eps: _fd_forward(f, z, 1e-8),
        "central_at_1e-5_ignoring_eps": lambda f, z, eps: _fd_central(f, z, 1e-5),
        "relative_step": _fd_relative_step,
        "central_with_z_in_float32": _fd_float32_z,
        "divides_by_eps": lambda f, z, eps: 2 * _fd_central(f, z, eps),
        "central_over_two_eps_each_side": lambda f, z, eps: _fd_central(f, z, 2 * eps),
        "all_coordinates_at_once": _fd_all_at_once,
        "nudges_z_in_place": _fd_in_place,
    },
    refused={
        "course_numerical_grad": (
            lambda f, z, eps: grad_lesson.numerical_grad(f, z, eps),
            "that is the reference this exercise replaces",
        ),
        "exact_gradient_table": (_fd_looked_up, "that is the reference this exercise replaces"),
    },
    first_hints={
        "forward": "as the one-sided difference is",
        "backward": "as the one-sided difference (f(z) - f(z - eps e_i)) / eps is",
        "forward_at_1e-8_ignoring_eps": "does it step by the eps it is given?",
        "central_at_1e-5_ignoring_eps": "does it step by the eps it is given?",
        "relative_step": "larger than eps where |z_i| > 1",
        "central_with_z_in_float32": "still eps away from z_i?",
        "divides_by_eps": "over what distance does your difference quotient step?",
        "central_over_two_eps_each_side": "four times a central difference's",
    },
)


# ---------------------------------------------------------------- 02: the label-smoothing gradient


def _smoothed_p_minus_q(z, y, eps):
    e = np.exp(z - np.max(z))
    q = np.full(len(z), eps / len(z))
    q[y] += 1.0 - eps
    return e / e.sum() - q


def _smoothed_float32(z, y, eps):
    z32 = np.asarray(z, dtype=np.float32)
    e = np.exp(z32 - z32.max())
    q = np.full(len(z), np.float32(eps) / len(z), dtype=np.float32)
    q[y] += np.float32(1.0) - np.float32(eps)
    return e / e.sum() - q


def _smoothed_plus_correction(z, y, eps):  # ce_grad plus eps (onehot(y) - 1/V)
    onehot = np.eye(len(z))[y]
    return _ce_grad_loop(z, y) + eps * (onehot - 1.0 / len(z))


def _smoothed_mixture(z, y, eps):  # (1 - eps) ce_grad + eps (p - uniform): the loss is a mixture
    p = np.exp(z - np.logaddexp.reduce(z))
    return (1 - eps) * (p - np.eye(len(z))[y]) + eps * (p - 1.0 / len(z))


_smoothed_wrapped = functools.wraps(_smoothed_p_minus_q)(
    lambda z, y, eps: _smoothed_plus_correction(z, y, eps)
)


def _smoothed_overflowing(z, y, eps):  # p - q with the softmax formed without the max trick
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(z, dtype=np.float64))
        p = e / e.sum()
    q = np.full(len(z), eps / len(z))
    q[y] += 1.0 - eps
    return p - q


def _smoothed_q(z, y, eps, q_of):
    p = np.exp(z - np.logaddexp.reduce(z))
    return p - q_of(len(z), y, eps)


def _q_over_v_minus_1(V, y, eps):  # eps spread over the V - 1 other tokens
    q = np.full(V, eps / (V - 1) if V > 1 else 0.0)
    q[y] = 1.0 - eps
    return q


def _q_target_loses_its_share(V, y, eps):  # eps / V to the others, the target only 1 - eps
    q = np.full(V, eps / V)
    q[y] = 1.0 - eps
    return q


ANSWERS["smoothed_ce_grad"] = Answers(
    check=grad_lesson.check_smoothed_ce_grad,
    right={
        "p_minus_q": _smoothed_p_minus_q,
        "float32": _smoothed_float32,
        "ce_grad_plus_correction": _smoothed_plus_correction,
        "mixture": _smoothed_mixture,
        "wrapped": _smoothed_wrapped,
    },
    wrong={
        "eps_over_V_minus_1": lambda z, y, eps: _smoothed_q(z, y, eps, _q_over_v_minus_1),
        "target_without_its_share": lambda z, y, eps: _smoothed_q(z, y, eps, _q_target_loses_its_share),
        "no_smoothing": lambda z, y, eps: _ce_grad_loop(z, y),
        "eps_not_divided_by_V": lambda z, y, eps: _smoothed_q(
            z, y, eps, lambda V, y, eps: (1 - eps) * np.eye(V)[y] + eps
        ),
        "sign_of_correction": lambda z, y, eps: _ce_grad_loop(z, y) - eps * (np.eye(len(z))[y] - 1 / len(z)),
        "sign": lambda z, y, eps: -_smoothed_p_minus_q(z, y, eps),
        "softmax_without_the_max": _smoothed_overflowing,
    },
    first_hints={"softmax_without_the_max": "what does exp give there"},
    refused={
        "reference": (
            lambda z, y, eps: grad_lesson.smoothed_ce_grad_autograd(z, y, eps),
            "that is the reference this exercise replaces",
        ),
        "autograd_on_label_smoothing": (
            lambda z, y, eps: torch.autograd.grad(
                F.cross_entropy(
                    (t := torch.tensor(z, dtype=torch.float64, requires_grad=True))[None],
                    torch.tensor([y]),
                    label_smoothing=eps,
                ),
                t,
            )[0].numpy(),
            "your function called",
        ),
    },
)


# ---------------------------------------------------------------- 02: the gradient of a tied embedding


def _tied_loops(E, x, y):
    V, D = E.shape
    ids, tgt = x.reshape(-1).tolist(), y.reshape(-1).tolist()
    n = len(ids)
    dE = torch.zeros_like(E)
    for i, t in zip(ids, tgt):
        p = torch.softmax(E[i] @ E.T, dim=-1)
        dz = p.clone()
        dz[t] -= 1.0
        dz /= n
        for v in range(V):
            dE[v] += dz[v] * E[i]  # the head: row v of the output matrix
        dE[i] += dz @ E  # the lookup: back into the row that was read
    return dE


def _tied_float32(E, x, y):
    E32 = E.float()
    ids = x.reshape(-1)
    h = E32[ids]
    P = torch.softmax(h @ E32.T, dim=-1)
    dZ = (P - F.one_hot(y.reshape(-1), E.shape[0]).float()) / ids.numel()
    return (dZ.T @ h).index_add(0, ids, dZ @ E32)


def _tied_onehot_matmul(E, x, y):  # the lookup as a one-hot matrix: H = X E, so dE += X^T dH
    ids = x.reshape(-1)
    X = F.one_hot(ids, E.shape[0]).to(E.dtype)  # (n, V)
    h = X @ E
    dZ = (torch.softmax(h @ E.T, -1) - F.one_hot(y.reshape(-1), E.shape[0]).to(E.dtype)) / ids.numel()
    return dZ.T @ h + X.T @ (dZ @ E)


@torch.no_grad()
def _tied_batched(E, x, y):  # keeps (N, T): einsum over both axes, index_put_ with accumulate
    P = torch.softmax(torch.einsum("ntd,vd->ntv", E[x], E), dim=-1)
    dZ = (P - F.one_hot(y, E.shape[0]).to(E.dtype)) / x.numel()
    dE = torch.einsum("ntv,ntd->vd", dZ, E[x])
    return dE.index_put_((x.reshape(-1),), (dZ @ E).reshape(-1, E.shape[1]), accumulate=True)


def _tied_parts(E, x, y):
    ids = x.reshape(-1)
    h = E[ids]
    dZ = (torch.softmax(h @ E.T, -1) - F.one_hot(y.reshape(-1), E.shape[0]).to(E.dtype)) / ids.numel()
    return ids, h, dZ


def _tied_head_only(E, x, y):
    ids, h, dZ = _tied_parts(E, x, y)
    return dZ.T @ h


def _tied_lookup_only(E, x, y):
    ids, h, dZ = _tied_parts(E, x, y)
    return torch.zeros_like(E).index_add(0, ids, dZ @ E)


def _tied_fancy_index(E, x, y):  # dE[ids] += dH keeps one row per repeated id
    ids, h, dZ = _tied_parts(E, x, y)
    dE = dZ.T @ h
    dE[ids] += dZ @ E
    return dE


def _tied_no_mean(E, x, y):
    return _tied_onehot_matmul(E, x, y) * x.numel()


def _tied_per_row_mean(E, x, y):  # divides by T (the row length), not by N*T
    return _tied_onehot_matmul(E, x, y) * x.numel() / x.shape[1]


def _tied_onehot_of_inputs(E, x, y):  # the one-hot of the ids read, not of the targets
    return _tied_onehot_matmul(E, x, x)


def _tied_logits_not_probabilities(E, x, y):  # dZ from the logits, the softmax forgotten
    ids = x.reshape(-1)
    h = E[ids]
    dZ = (h @ E.T - F.one_hot(y.reshape(-1), E.shape[0]).to(E.dtype)) / ids.numel()
    return (dZ.T @ h).index_add(0, ids, dZ @ E)


ANSWERS["tied_grads"] = Answers(
    check=backprop.check_tied_grads,
    right={
        "loops": _tied_loops,
        "float32": _tied_float32,
        "onehot_matmul": _tied_onehot_matmul,
        "batched_no_grad": _tied_batched,
    },
    wrong={
        "head_only": _tied_head_only,
        "lookup_only": _tied_lookup_only,
        "fancy_index_add": _tied_fancy_index,
        "no_mean": _tied_no_mean,
        "per_row_mean": _tied_per_row_mean,
        "onehot_of_inputs": _tied_onehot_of_inputs,
        "logits_not_probabilities": _tied_logits_not_probabilities,
    },
    first_hints={
        "head_only": "which rows of E did the forward pass read",
        "lookup_only": "through that product",
        "fancy_index_add": "receive both of its contributions",
        "no_mean": "is your gradient one too?",
        "per_row_mean": "being the number of rows",
    },
    refused={
        "course_tied_grads": (
            lambda E, x, y: backprop.tied_grads(E, x, y),
            "that is the course's own answer",
        ),
        "autograd": (
            lambda E, x, y: torch.autograd.grad(
                F.cross_entropy(
                    ((e := E.clone().requires_grad_(True))[x] @ e.T).reshape(-1, E.shape[0]), y.reshape(-1)
                ),
                e,
            )[0],
            "autograd does the work",
        ),
        "autograd_engine_called_directly": (
            lambda E, x, y: _grad_by_engine(*_tied_loss_of(E, x, y)).detach(),
            "autograd does the work",
        ),
        "graph_nodes_called_by_hand": (
            lambda E, x, y: _grad_by_nodes(*_tied_loss_of(E, x, y)).detach(),
            "autograd does the work",
        ),
    },
)


# ---------------------------------------------------------------- 03: per-position NLL, k tokens ahead


def _pp_flat(z, y, k):
    V = z.shape[-1]
    nll = F.cross_entropy(z[:, :-k].reshape(-1, V), y[:, k:].reshape(-1), reduction="none")
    return nll.view(y[:, k:].shape)


def _pp_float32_gather(z, y, k):  # in float32, from log_softmax and gather, ignored targets zeroed
    logp = torch.log_softmax(z[:, :-k].float(), dim=-1)
    target = y[:, k:]
    valid = target != -100
    nll = -logp.gather(-1, target.masked_fill(~valid, 0)[..., None])[..., 0]
    return nll * valid


def _pp_classes_on_dim_1(z, y, k):
    return F.cross_entropy(z[:, :-k].transpose(1, 2), y[:, k:], reduction="none")


def _pp_row_by_row(z, y, k):  # one row at a time: (L-k, V) against (L-k,), then stacked
    return torch.stack([F.cross_entropy(r[:-k], t[k:], reduction="none") for r, t in zip(z, y)])


@torch.no_grad()
def _pp_float64_no_grad(z, y, k):
    return _pp_flat(z.double(), y, k)


def _pp_flatten_unflatten(z, y, k):
    L = z.shape[-2]
    shift_logits, shift_labels = z[..., : L - k, :].contiguous(), y[..., k:].contiguous()
    nll = F.cross_entropy(shift_logits.flatten(0, 1), shift_labels.flatten(), reduction="none")
    return nll.unflatten(0, shift_labels.shape)


def _pp_narrow_loop_over_positions(z, y, k):  # narrow() and a loop over the L - k positions
    L = z.shape[1]
    cols = [F.cross_entropy(z.narrow(1, t, 1)[:, 0], y[:, t + k], reduction="none") for t in range(L - k)]
    return torch.stack(cols, dim=1)


ANSWERS["my_per_position_nll"] = Answers(
    check=seq.check_per_position_nll,
    right={
        "flatten_reshape": _pp_flat,
        "float32_log_softmax_gather": _pp_float32_gather,
        "classes_on_dim_1": _pp_classes_on_dim_1,
        "row_by_row": _pp_row_by_row,
        "float64_no_grad": _pp_float64_no_grad,
        "flatten_unflatten": _pp_flatten_unflatten,
        "loop_over_positions": _pp_narrow_loop_over_positions,
    },
    wrong={
        "unflattened_layout": lambda z, y, k: F.cross_entropy(z[:, :-k], y[:, k:], reduction="none"),
        "no_shift": lambda z, y, k: F.cross_entropy(
            z.reshape(-1, z.shape[-1]), y.reshape(-1), reduction="none"
        ).view(y.shape),
        "shift_the_wrong_way": lambda z, y, k: _pp_flat(z.flip(1), y.flip(1), k).flip(1),
        "always_one_ahead": lambda z, y, k: _pp_flat(z, y, 1),  # k ignored: the (N, L-1) of a causal LM
        "one_ahead_cut_to_length": lambda z, y, k: _pp_flat(z, y, 1)[:, : z.shape[1] - k],
        "not_reshaped_back": lambda z, y, k: _pp_flat(z, y, k).flatten(),
        "mean": lambda z, y, k: F.cross_entropy(z[:, :-k].transpose(1, 2), y[:, k:]),
        "ignored_not_zeroed": lambda z, y, k: (
            -torch.log_softmax(z[:, :-k], -1).gather(-1, y[:, k:].clamp(min=0)[..., None])[..., 0]
        ),
        "view_of_a_slice": lambda z, y, k: F.cross_entropy(
            z[:, :-k].view(-1, z.shape[-1]), y[:, k:].reshape(-1), reduction="none"
        ).view(y[:, k:].shape),
    },
    refused={
        "lmcore_loss": (
            lambda z, y, k: causal_lm_loss(z, y, reduction="none") if k == 1 else _pp_flat(z, y, k),
            "that is lmcore's loss, the one you are rebuilding",
        ),
        "lmcore_shift": (
            lambda z, y, k: (
                F.cross_entropy(shift_for_next_token(z, y)[0].transpose(1, 2), y[:, 1:], reduction="none")
                if k == 1
                else _pp_flat(z, y, k)
            ),
            "write the shift yourself",
        ),
    },
    first_hints={
        "unflattened_layout": "reads the L - k positions as the classes",
        "no_shift": "does the last position of a row have a token k places ahead",
        "shift_the_wrong_way": "on the token before it",
        "always_one_ahead": "how many positions of a row have a token k places ahead",
        "one_ahead_cut_to_length": "on the very next token, one place ahead",
        "not_reshaped_back": "keeps each row's targets in a row of their own",
        "mean": "your result is one number",
        "ignored_not_zeroed": "what should an ignored target contribute",
    },
)


# ---------------------------------------------------------------- 03: the colleague's faults, named


def _faults_search_the_key():  # tries every pair of lines against the key: refused
    from lmcore.course.checks import answer_digest

    key = colleague._KEY
    return {
        s: next(n for n in range(1, 10) if answer_digest("colleague_faults", s, n) == key[s]) for s in key
    }


ANSWERS["colleague_faults"] = Answers(
    check=colleague.check_colleague_faults,
    no_float32="the answers are line numbers: there is no float quantity to compute in float32",
    right={
        "dict": lambda: {"another number": 8, "no number": 4},
        "other_order_numpy_ints": lambda: {"no number": np.int64(4), "another number": np.int32(8)},
        "zero_d_tensors": lambda: {"another number": torch.tensor(8), "no number": torch.tensor(4)},
        "as_text": lambda: {"another number": "8", "no number": "line 4"},
        "from_the_source": lambda: {
            symptom: 1 + next(i for i, s in enumerate(_colleague_lines()) if marker in s)
            for symptom, marker in (("another number", "uniform ="), ("no number", "torch.log("))
        },
    },
    wrong={
        "swapped": lambda: {"another number": 4, "no number": 8},
        "the_return_line": lambda: {"another number": 9, "no number": 4},
        "where_the_nan_shows": lambda: {"another number": 8, "no number": 7},
        "the_mask_line": lambda: {"another number": 5, "no number": 4},
        "one_missing": lambda: {"another number": 8},
    },
    refused={
        "search_the_key": (_faults_search_the_key, "searches the answer key"),
        "ask_the_checker": (
            lambda: next(
                {"another number": a, "no number": b}
                for a in range(1, 10)
                for b in range(1, 10)
                if colleague.check_colleague_faults(lambda a=a, b=b: {"another number": a, "no number": b})
            ),
            "asks the checker",
        ),
    },
)


def _colleague_lines():
    import inspect

    return inspect.getsource(colleague.colleague_smoothed_loss).splitlines()


# ---------------------------------------------------------------- 03: a batch for each of the colleague's symptoms


def _ragged_padded(dtype=torch.float32, seed=0):
    """Right-padded rows whose padded positions' logits are unlike the rest: 'another number'."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(3, 8, 10, generator=g, dtype=dtype)
    y = torch.randint(10, (3, 8), generator=g)
    y[0, 5:], y[2, 2:] = -100, -100
    z[0, 4:] += 5 * torch.randn(4, 10, generator=g, dtype=dtype)
    return z, y


def _moderate_padded(dtype):
    """Padded positions whose logits are four times as spread as the rest: a gap of about 0.1, which
    bfloat16's three digits still show."""
    g = torch.Generator().manual_seed(5)
    z = torch.randn(2, 6, 7, generator=g)
    y = torch.randint(7, (2, 6), generator=g)
    y[1, 3:] = -100
    z[1, 2:] *= 4.0
    return z.to(dtype), y


def _huge_gap(dtype=torch.float32, gap=200.0):
    """One position whose target is far below the top logit: its float32 probability is 0."""
    z = torch.zeros(1, 4, 6, dtype=dtype)
    z[0, 1, 3], z[0, 1, 0] = gap, -gap
    return z, torch.tensor([[1, 2, 0, 5]])


def _from_numpy():
    (z1, y1), (z2, y2) = _ragged_padded(), _huge_gap()
    return {"another number": (z1.numpy(), y1.numpy()), "no number": (z2.numpy(), y2.numpy())}


def _searched():  # another way: try random batches until each symptom shows
    g = torch.Generator().manual_seed(7)
    found = {}
    for scale in (0.5, 1.0, 2.0, 3.0, 10.0, 30.0, 100.0, 300.0) * 4:
        z = scale * torch.randn(2, 6, 5, generator=g)
        y = torch.randint(5, (2, 6), generator=g)
        y[1, 3:] = -100
        ours = float(causal_lm_loss(z, y, label_smoothing=0.1))
        theirs = float(colleague.colleague_smoothed_loss(z, y, 0.1))
        if not math.isfinite(theirs):
            found.setdefault("no number", (z, y))
        elif abs(theirs - ours) > 1e-3 * (1 + abs(ours)) and scale < 5:  # small logits: one cause
            found.setdefault("another number", (z, y))
    return found


@functools.wraps(_searched)
def _symptoms_wrapped():
    return {"another number": _ragged_padded(seed=3), "no number": _huge_gap(gap=400.0)}


ANSWERS["symptom_batches"] = Answers(
    check=colleague.check_symptom_batches,
    right={
        "padded_rows_and_a_huge_gap": lambda: {"another number": _ragged_padded(), "no number": _huge_gap()},
        "float32_batches_as_lists": lambda: {
            "another number": list(_ragged_padded()),
            "no number": list(_huge_gap()),
        },
        "float64_for_another_number": lambda: {
            "another number": _ragged_padded(torch.float64),
            "no number": _huge_gap(torch.float64, gap=800.0),  # float64's probabilities round to 0 later
        },
        "numpy_arrays": _from_numpy,
        "bfloat16_for_another_number": lambda: {
            "another number": _moderate_padded(torch.bfloat16),
            "no number": _huge_gap(),
        },
        "found_by_search": _searched,
        "wrapped": _symptoms_wrapped,
    },
    no_float32="the answer is a pair of batches: the float32 batch is one of the right answers, not a computation",
    wrong={
        "swapped": lambda: {"another number": _huge_gap(), "no number": _ragged_padded()},
        "nothing_ignored": lambda: {
            "another number": (
                _ragged_padded()[0],
                torch.randint(10, (3, 8), generator=torch.Generator().manual_seed(1)),
            ),
            "no number": _huge_gap(),
        },
        "moderate_logits_for_no_number": lambda: {
            "another number": _ragged_padded(),
            "no number": _huge_gap(gap=5.0),
        },
        "every_target_ignored": lambda: {
            "another number": _ragged_padded(),
            "no number": (_huge_gap()[0], torch.full((1, 4), -100)),
        },
        "float64_too_small_a_gap": lambda: {
            "another number": _ragged_padded(),
            "no number": _huge_gap(torch.float64, gap=200.0),  # e^-400 is a float64
        },
        "large_logits_for_another_number": lambda: {
            "another number": (_ragged_padded()[0] * 40, _ragged_padded()[1]),
            "no number": _huge_gap(),
        },
        "one_missing": lambda: {"another number": _ragged_padded()},
        "labels_as_floats": lambda: {
            "another number": (_ragged_padded()[0], _ragged_padded()[1].float()),
            "no number": _huge_gap(),
        },
    },
    refused={
        "the_course_s_batches": (colleague.symptom_batches, "the course's own answer"),
        "the_course_s_batches_by_another_name": (
            lambda: (lambda f: f())(colleague.symptom_batches),
            "the course's own answer",
        ),
    },
    first_hints={
        "swapped": "that is the other symptom",
        "nothing_ignored": "does yours have it?",
        "moderate_logits_for_no_number": "what must the logits be like for float32",
        "every_target_ignored": "a batch no loss can score",
        "float64_too_small_a_gap": "what must the logits be like for float32",
        "one_missing": "what does your function return?",
        "labels_as_floats": "the shapes and types",
    },
)


# ---------------------------------------------------------------- 03: loss and global gradient norm


def _gn_solution(model, ids, reduction):
    model.zero_grad()
    loss = causal_lm_loss(model(ids), ids, reduction=reduction)
    loss.backward()
    squares = sum(float(p.grad.pow(2).sum()) for p in model.parameters() if p.grad is not None)
    return {"loss": loss.item(), "grad_norm": squares**0.5}


def _gn_float32(model, ids, reduction):  # the squares added up in float32
    for p in model.parameters():
        p.grad = None
    loss = causal_lm_loss(model(ids), ids, reduction=reduction)
    loss.backward()
    squares = torch.zeros((), dtype=torch.float32)
    for p in model.parameters():
        if p.grad is not None:
            squares += p.grad.float().pow(2).sum()
    return {"loss": float(loss), "grad_norm": float(squares.sqrt())}


def _gn_autograd_grad(model, ids, reduction):  # torch.autograd.grad: .grad is never read
    params = [p for p in model.parameters() if p.requires_grad]
    loss = causal_lm_loss(model(ids), ids, reduction=reduction)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    flat = torch.cat([g.reshape(-1) for g in grads if g is not None])
    return {"loss": loss.item(), "grad_norm": float(torch.linalg.vector_norm(flat))}


def _gn_norm_of_norms(model, ids, reduction):  # the norm of the per-parameter norms
    model.zero_grad(set_to_none=True)
    loss = causal_lm_loss(model(ids), ids, reduction=reduction)
    loss.backward()
    norms = torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None])
    return {"loss": loss.item(), "grad_norm": norms.norm().item()}


_gn_wrapped = functools.wraps(_gn_solution)(
    lambda model, ids, reduction: _gn_norm_of_norms(model, ids, reduction)
)


def _gn_changed(change):
    def fn(model, ids, reduction):
        out = _gn_solution(model, ids, reduction)
        out["grad_norm"] = change(model, out)
        return out

    return fn


def _gn_stale(model, ids, reduction):  # no zero_grad: adds to the earlier backward's gradients
    loss = causal_lm_loss(model(ids), ids, reduction=reduction)
    loss.backward()
    squares = sum(float(p.grad.pow(2).sum()) for p in model.parameters())
    return {"loss": loss.item(), "grad_norm": squares**0.5}


def _gn_then_a_step(model, ids, reduction):  # the right numbers, then an optimizer step on the model
    out = _gn_solution(model, ids, reduction)
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    return out


ANSWERS["my_loss_and_grad_norm"] = Answers(
    check=seq.check_loss_and_grad_norm,
    right={
        "zero_grad_sum_of_squares": _gn_solution,
        "float32_squares": _gn_float32,
        "autograd_grad_vector_norm": _gn_autograd_grad,
        "norm_of_norms": _gn_norm_of_norms,
        "wrapped": _gn_wrapped,
    },
    wrong={
        "then_steps_the_optimizer": _gn_then_a_step,
        "stale_gradients": _gn_stale,
        "ignores_reduction": lambda m, ids, r: _gn_solution(m, ids, "mean"),
        "sum_of_norms": _gn_changed(lambda m, out: float(sum(p.grad.norm() for p in m.parameters()))),
        "squared_norm": _gn_changed(lambda m, out: out["grad_norm"] ** 2),
        "largest_parameter_norm": _gn_changed(
            lambda m, out: float(max(p.grad.norm() for p in m.parameters()))
        ),
        "norm_of_the_weights": _gn_changed(
            lambda m, out: float(sum(p.detach().pow(2).sum() for p in m.parameters())) ** 0.5
        ),
        "mean_of_squares": _gn_changed(
            lambda m, out: float(torch.cat([p.grad.reshape(-1) for p in m.parameters()]).pow(2).mean().sqrt())
        ),
        "tied_weight_counted_twice": _gn_changed(  # every module's own parameters: the tied one twice
            lambda m, out: (
                sum(
                    float(p.grad.pow(2).sum())
                    for mod in m.modules()
                    for p in mod.parameters(recurse=False)
                    if p.grad is not None
                )
                ** 0.5
            )
        ),
    },
    refused={
        "reference": (
            lambda m, ids, r: seq.reference_loss_and_grad_norm(m, ids, r),
            "that is the course's own reference",
        ),
        "clip_grad_norm": (
            lambda m, ids, r: {
                "loss": (loss := causal_lm_loss(m(ids), ids, reduction=r)).item(),
                "grad_norm": (
                    m.zero_grad(),
                    loss.backward(),
                    float(torch.nn.utils.clip_grad_norm_(m.parameters(), float("inf"))),
                )[2],
            },
            "torch's norm helper",
        ),
        "foreach_norm": (
            lambda m, ids, r: {
                "loss": (loss := causal_lm_loss(m(ids), ids, reduction=r)).item(),
                "grad_norm": (
                    m.zero_grad(),
                    loss.backward(),
                    float(torch.stack(torch._foreach_norm([p.grad for p in m.parameters()])).norm()),
                )[2],
            },
            "torch's norm helper",
        ),
    },
    first_hints={
        "tied_weight_counted_twice": "is it one parameter or two?",
        "stale_gradients": "a .grad that already holds something",
        "ignores_reduction": "what does reduction='sum' ask",
        "sum_of_norms": "split into two parameter tensors",
        "norm_of_the_weights": "the length of the model's weights",
    },
)
