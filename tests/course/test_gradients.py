"""Notebook 02's support code: finite differences, widget state, plot and checkers.

References are independent: torch autograd in float64 and exact derivatives of simple functions.
"""

import functools

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmcore.course.gradients import lesson as G  # noqa: E402
from lmcore.course.gradients import views as GV  # noqa: E402


def _autograd_grad(z, y):
    zt = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    F.cross_entropy(zt[None], torch.tensor([y])).backward()
    return zt.grad.numpy()


def _torch_nll(z, y):
    return float(F.cross_entropy(torch.tensor(z, dtype=torch.float64)[None], torch.tensor([y])))


@pytest.mark.parametrize(
    "f, df, z",
    [
        (lambda z: float((z**3).sum()), lambda z: 3 * z**2, np.array([0.5, -1.0, 2.0])),
        (lambda z: float(np.exp(z).sum()), np.exp, np.array([0.1, 1.3])),
        (lambda z: _torch_nll(z, 2), lambda z: _autograd_grad(z, 2), np.array([1.0, -2.0, 0.5, 3.0])),
    ],
)
def test_numerical_grad_matches_exact(f, df, z):
    assert np.allclose(G.numerical_grad(f, z), df(z), atol=1e-7)


def test_numerical_grad_validates_and_does_not_mutate():
    z = np.array([1.0, 2.0])
    G.numerical_grad(lambda v: float(v.sum()), z)
    assert z.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="f must be"):
        G.numerical_grad(3.0, z)
    with pytest.raises(ValueError, match="eps"):
        G.numerical_grad(lambda v: 0.0, z, eps=0)


@pytest.mark.parametrize(
    "z, y, index, value",
    [([2.0, 1.0, 0.0], 1, 1, None), ([2.0, 1.0, 0.0], 1, 0, 4.5), ([0.3, -2.0, 1.0, 5.0], 3, 2, -7.0)],
)
def test_gradient_state_matches_autograd(z, y, index, value):
    s = G.gradient_state(z, y, index, value)
    moved = np.array(z, dtype=np.float64)
    if value is not None:
        moved[index] = value
    assert np.allclose(s["z"], moved)
    assert s["loss"] == pytest.approx(_torch_nll(moved, y), abs=1e-12)
    assert np.allclose(s["grad"], _autograd_grad(moved, y), atol=1e-12)
    assert s["slope"] == pytest.approx(_autograd_grad(moved, y)[index], abs=1e-12)
    # the curve: loss along that one logit; the tangent touches it at the current point
    k = 37
    row = moved.copy()
    row[index] = s["xs"][k]
    assert s["losses"][k] == pytest.approx(_torch_nll(row, y), abs=1e-12)
    at = np.argmin(np.abs(s["xs"] - moved[index]))
    gap = s["tangent"][at] - s["losses"][at]
    assert abs(gap) < 0.01 + 1e-9
    assert np.all(s["tangent"] <= s["losses"] + 1e-9)  # the loss is convex in each logit


def test_gradient_state_rejects_bad_index():
    with pytest.raises(ValueError, match="index"):
        G.gradient_state([1.0, 2.0], 0, 2)


def test_plot_and_explorer():
    fig = GV.plot_gradient_state()
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2
    assert "1.408" in fig.axes[0].get_title()
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)
    plt.close(fig)
    w = GV.gradient_explorer([2.0, 1.0, 0.0], target=1, index=1)
    which, value, pick = w.children[0].children
    assert value.value == 1.0 and pick.value == 1
    first = w.children[1].value
    assert first[:4] == b"\x89PNG"
    which.value = 0
    assert value.value == 2.0  # choosing another logit starts the slider at that logit's value
    assert w.children[1].value != first
    plt.close("all")


# ---------------------------------------------------------------- checkers


def _stub(*args):
    raise NotImplementedError


def test_checkers_say_not_attempted_for_stub(capsys):
    assert not G.check_ce_grad(_stub)
    assert not G.check_finite_difference(_stub)
    assert not G.check_smoothed_ce_grad(_stub)
    out = capsys.readouterr().out
    assert out.count("not attempted yet") == 3 and "fail" not in out


def _own_ce_grad(z, y):  # independent of lmcore: a loop over math.exp
    import math

    m = max(z)
    e = [math.exp(v - m) for v in z]
    g = np.array(e) / math.fsum(e)
    g[y] -= 1.0
    return g


def test_ce_grad_checker(capsys):
    assert G.check_ce_grad(_own_ce_grad)
    naive = lambda z, y: np.exp(z) / np.exp(z).sum() - np.eye(len(z))[y]  # noqa: E731
    wrongs = [
        lambda z, y: -_own_ce_grad(z, y),  # sign flipped
        lambda z, y: _own_ce_grad(z, y) + np.eye(len(z))[y],  # forgot the onehot
        naive,  # overflows at 1000
        lambda z, y: _own_ce_grad(z, y) / len(z),  # divided by V
    ]
    assert not any(G.check_ce_grad(w) for w in wrongs)
    out, err = capsys.readouterr()
    assert out.count("fail") == 4 and out.count("pass") == 1 and err == ""
    assert not G.check_ce_grad(wrongs[0])
    assert "sign is flipped" in capsys.readouterr().out


def _ce_grad_float32(z, y):  # the notebook's solution, computed in float32
    z32 = np.asarray(z, dtype=np.float32)
    e = np.exp(z32 - z32.max())
    g = e / e.sum()
    g[y] -= np.float32(1.0)
    return g


def test_ce_grad_checker_accepts_a_float32_answer(capsys):
    """Issue 38: rejected at z = [0, 8, 0], y = 1 under atol 1e-9 (p_y - 1 = -0.0006705 is only
    known to float32 spacings of 1 there)."""
    assert G.check_ce_grad(_ce_grad_float32)
    assert "✓ pass" in capsys.readouterr().out


def test_smoothed_nudge_asks_a_question_without_the_formula():
    from lmcore.course.solutions import hints_of

    nudge = hints_of("check_smoothed_ce_grad")[0]
    assert "?" in nudge and "sum_v" not in nudge and "eps / V" not in nudge


def _forward_mode_jacfwd(z, y):
    nll = lambda t: torch.logsumexp(t, 0) - t[y]  # noqa: E731
    return torch.func.jacfwd(nll)(torch.tensor(z, dtype=torch.float64)).numpy()


def _forward_mode_dual(z, y):
    import torch.autograd.forward_ad as fwAD

    t, out = torch.tensor(z, dtype=torch.float64), []
    with fwAD.dual_level():
        for i in range(len(t)):
            d = fwAD.make_dual(t, torch.nn.functional.one_hot(torch.tensor(i), len(t)).double())
            out.append(float(fwAD.unpack_dual(torch.logsumexp(d, 0) - d[y]).tangent))
    return np.array(out)


@pytest.mark.parametrize(
    "cheat",
    [
        lambda z, y: G.handcalc.ce_grad(z, y),
        _autograd_grad,  # autograd (backward)
        lambda z, y: G.numerical_grad(lambda v: G.handcalc.nll(v, y), z),
        _forward_mode_jacfwd,  # forward-mode autodiff (review 00-05: it passed "no autograd")
        _forward_mode_dual,
    ],
)
def test_ce_grad_checker_rejects_the_reference_and_autograd(cheat, capsys):
    assert not G.check_ce_grad(cheat)
    assert "your function called" in capsys.readouterr().out


def _fd(central=True, halve=True, fixed=None):
    """A difference quotient at the caller's eps (or at ``fixed``, ignoring it)."""

    def estimate(f, z, eps):
        eps = fixed or eps
        z = np.asarray(z, dtype=np.float64)
        g = np.empty_like(z)
        for i in range(z.size):
            up, down = z.copy(), z.copy()
            up[i] += eps
            if central:
                down[i] -= eps
            g[i] = (f(up) - f(down)) / ((2 if central and halve else 1) * eps)
        return g

    return estimate


def _relative_step(f, z, eps):  # the textbook's step, relative to |z_i|: larger than the eps given
    z, g = np.asarray(z, dtype=np.float64), []
    for i in range(z.size):
        h, e = eps * max(1.0, abs(z[i])), np.zeros_like(z)
        e[i] = h
        g.append((f(z + e) - f(z - e)) / (2 * h))
    return np.array(g)


def _richardson(f, z, eps):  # another algorithm: two central differences extrapolated
    return (4 * _fd()(f, z, eps / 2) - _fd()(f, z, eps)) / 3


def _five_point(f, z, eps):  # another stencil: error ~ eps^4
    g = np.zeros(len(z))
    for i, e in enumerate(np.eye(len(z)) * eps):
        g[i] = (-f(z + 2 * e) + 8 * f(z + e) - 8 * f(z - e) + f(z - 2 * e)) / (12 * eps)
    return g


def test_finite_difference_checker(capsys):
    assert G.check_finite_difference(_fd())
    assert G.check_finite_difference(_richardson)
    assert G.check_finite_difference(_five_point)
    assert G.check_finite_difference(functools.wraps(_fd())(lambda f, z, eps: _fd()(f, z, eps)))
    wrongs = [
        _fd(central=False),  # forward difference: its error falls only like eps
        _fd(central=False, fixed=1e-8),  # forward, at the textbook's tiny step: accurate, ignores eps
        _fd(fixed=1e-5),  # central, ignoring the caller's eps
        _fd(halve=False),  # forgot the 2 in 2 eps
        _relative_step,  # steps eps * |z_i|, not eps
    ]
    assert not any(G.check_finite_difference(w) for w in wrongs)
    out = capsys.readouterr().out
    assert out.count("fail") == 5 and out.count("pass") == 4


def test_finite_difference_checker_tells_the_order_of_the_error():
    """The tolerance is a second-order estimate's: at every step the check uses, a central
    difference is inside it with room to spare, and a forward difference is far outside it."""
    for case in G._fd_cases():
        key, z, eps = case.args
        exact, allowed = G._FUNCTIONS[key][1](z), G._fd_allowed(key, eps)
        central = np.abs(_fd()(G._FUNCTIONS[key][0], z, eps) - exact).max()
        forward = np.abs(_fd(central=False)(G._FUNCTIONS[key][0], z, eps) - exact).max()
        assert central < allowed / 1.5, case.describe()
        assert forward > 3 * allowed, case.describe()


def test_finite_difference_checker_flags_in_place_nudging(capsys):
    def nudges_input(f, z, eps):  # z[i] += eps; z[i] -= eps does not always restore z exactly
        g = np.empty_like(z)
        for i in range(z.size):
            old = z[i]
            z[i] = old + eps
            hi = f(z)
            z[i] = old - eps
            lo = f(z)
            g[i] = (hi - lo) / (2 * eps)
        return g

    assert not G.check_finite_difference(nudges_input)


def test_finite_difference_checker_refuses_its_table_of_exact_gradients(capsys):
    """Review 00-05: the exact-gradient table answered the check by looking f up."""

    def look_up(f, z, eps):
        return next(grad for fn, grad, _ in G._FUNCTIONS.values() if fn is f)(z)

    assert not G.check_finite_difference(look_up)
    out = capsys.readouterr().out
    assert "fail" in out


def test_finite_difference_checker_rejects_the_course_function(capsys):
    assert not G.check_finite_difference(lambda f, z, eps: G.numerical_grad(f, z, eps))
    assert "your function called lmcore.course.gradients.lesson.numerical_grad" in capsys.readouterr().out


def test_finite_difference_failure_says_by_how_much_and_why(capsys):
    assert not G.check_finite_difference(_fd(central=False))
    out = capsys.readouterr().out
    assert "max |Δ| = 0.011" in out and "allowed 0.00033" in out and len(out.splitlines()) == 1
    assert "eps=0.1" in out and "as the one-sided difference is" in out


# ---------------------------------------------------------------- label smoothing


def _softmax(z):
    e = np.exp(z - np.max(z))
    return e / e.sum()


def _smoothed(z, y, eps):  # the derivation: p - q with q = (1 - eps) onehot + eps / V
    V = len(z)
    return _softmax(z) - ((1 - eps) * np.eye(V)[y] + eps / V)


def test_smoothed_reference_is_autograd_on_torchs_label_smoothing():
    for case in [c.args for c in G._logit_cases(seed=9)]:
        z, y = case
        for eps in (0.0, 0.1, 0.7):
            assert np.allclose(G.smoothed_ce_grad_autograd(z, y, eps), _smoothed(z, y, eps), atol=1e-12)
    with pytest.raises(ValueError, match="eps"):
        G.smoothed_ce_grad_autograd(np.zeros(3), 0, 1.5)


def test_smoothed_checker_accepts_the_derivation_and_ce_grad_plus_a_correction(capsys):
    assert G.check_smoothed_ce_grad(_smoothed)
    plus = lambda z, y, eps: G.handcalc.ce_grad(z, y) + eps * (np.eye(len(z))[y] - 1 / len(z))  # noqa: E731
    assert G.check_smoothed_ce_grad(plus)
    out, err = capsys.readouterr()
    assert out.count("✓ pass") == 2 and err == ""


@pytest.mark.parametrize(
    "wrong",
    [
        lambda z, y, eps: _softmax(z) - np.eye(len(z))[y],  # ignores eps
        lambda z, y, eps: (
            _softmax(z) - np.where(np.arange(len(z)) == y, 1 - eps, eps / (len(z) - 1))
        ),  # eps/(V-1)
        lambda z, y, eps: (1 - eps) * (_softmax(z) - np.eye(len(z))[y]),  # scales the gradient
        lambda z, y, eps: _softmax(z) - (1 - eps) * np.eye(len(z))[y],  # forgot the eps / V
        lambda z, y, eps: _softmax(z) - ((1 - eps) * np.eye(len(z))[y] + eps),  # eps, not eps / V
        lambda z, y, eps: (
            np.exp(z) / np.exp(z).sum() - ((1 - eps) * np.eye(len(z))[y] + eps / len(z))
        ),  # naive
    ],
)
def test_smoothed_checker_rejects_plausible_mistakes(wrong, capsys):
    assert not G.check_smoothed_ce_grad(wrong)
    out, err = capsys.readouterr()
    assert out.startswith("✗ fail") and err == ""


def _autograd_smoothed(z, y, eps):
    zt = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    with torch.enable_grad():
        F.cross_entropy(zt[None], torch.tensor([y]), label_smoothing=eps).backward()
    return zt.grad.numpy()


@pytest.mark.parametrize("cheat", [_autograd_smoothed, G.smoothed_ce_grad_autograd])
def test_smoothed_checker_rejects_autograd_and_the_reference(cheat, capsys):
    assert not G.check_smoothed_ce_grad(cheat)
    assert "your function called" in capsys.readouterr().out


def test_the_current_point_stays_on_the_chart_far_left():
    for value in (-8.0, -15.0, -20.0):
        fig = GV.plot_gradient_state([0.0, 1.0, 0.0], target=1, index=1, value=value)
        ax = fig.axes[0]
        (x,), (y,) = ax.lines[2].get_data()
        lo, hi = ax.get_ylim()
        xlo, xhi = ax.get_xlim()
        assert x == value and lo <= y <= hi and xlo <= x <= xhi, (value, y, hi)
        plt.close(fig)
    w = GV.gradient_explorer([2.0, 1.0, 0.0], target=1, index=1)
    assert w.children[0].children[1].min <= -20.0
    plt.close("all")
