"""Notebook 01's support code: widget state, the double-softmax demo, plots and checkers.

References are independent: torch in float64, math, naive formulas on safe inputs.
"""

import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lmcore.course.softmax_nll import band as B  # noqa: E402
from lmcore.course.softmax_nll import calibration as C  # noqa: E402
from lmcore.course.softmax_nll import lesson as S  # noqa: E402
from lmcore.course.softmax_nll import views as SV  # noqa: E402


@pytest.mark.parametrize(
    "z, y, T",
    [([2.0, 1.0, 0.0], 1, 1.0), ([3.0, -1.0, 0.5, 2.0], 3, 0.3), ([1000.0, 999.0, 998.0, 0.0, -5.0], 0, 7.5)],
)
def test_softmax_state_matches_torch(z, y, T):
    s = S.softmax_state(z, y, T)
    zt = torch.tensor(z, dtype=torch.float64) / T
    assert np.allclose(s["probs"], torch.softmax(zt, 0).numpy(), atol=1e-12)
    ref = float(F.cross_entropy(zt[None], torch.tensor([y])))
    assert s["loss_nats"] == pytest.approx(ref, abs=1e-12)
    assert s["loss_bits"] == pytest.approx(ref / math.log(2), abs=1e-12)
    assert s["p_target"] == pytest.approx(math.exp(-ref), rel=1e-12)


def test_softmax_state_worked_numbers():
    s = S.softmax_state([2, 1, 0], 1)
    assert round(s["p_target"], 3) == 0.245 and round(s["loss_nats"], 3) == 1.408


@pytest.mark.parametrize(
    "T, exc",
    [(0, ValueError), (-1.0, ValueError), (float("nan"), ValueError), (True, TypeError), ("1", TypeError)],
)
def test_softmax_state_rejects_bad_temperature(T, exc):
    with pytest.raises(exc, match="temperature"):
        S.softmax_state([1.0, 2.0, 3.0], 0, T)


def test_temperature_sharpens_and_flattens():
    cold, warm = S.softmax_state([2, 1, 0], 0, 0.2), S.softmax_state([2, 1, 0], 0, 5.0)
    assert cold["probs"].max() > 0.99 and warm["probs"].max() < 0.45


def test_double_softmax_against_naive_formulas():
    z, y = np.array([2.0, 1.0, 0.0]), 1
    d = S.double_softmax(z, y)
    p = np.exp(z) / np.exp(z).sum()
    q = np.exp(p) / np.exp(p).sum()
    assert d["loss_right"] == pytest.approx(-math.log(p[y]), abs=1e-12)
    assert d["loss_wrong"] == pytest.approx(-math.log(q[y]), abs=1e-12)
    assert np.allclose(d["grad_right"], p - np.eye(3)[y], atol=1e-12)
    # the bug's gradient, by central differences of its loss
    f = lambda v: (
        -np.log((np.exp(np.exp(v) / np.exp(v).sum()) / np.exp(np.exp(v) / np.exp(v).sum()).sum())[y])
    )  # noqa: E731
    fd = np.array([(f(z + 1e-6 * e) - f(z - 1e-6 * e)) / 2e-6 for e in np.eye(3)])
    assert np.allclose(d["grad_wrong"], fd, atol=1e-7)
    assert np.abs(d["grad_wrong"]).sum() < 0.5 * np.abs(d["grad_right"]).sum()


def test_double_softmax_validates():
    with pytest.raises(ValueError, match="y must be"):
        S.double_softmax([1.0, 2.0], 2)


def test_double_softmax_squashes_confident_losses():
    right = S.double_softmax([0.0, 10.0, 0.0], 1)
    wrong = S.double_softmax([10.0, 0.0, 0.0], 1)
    # probabilities in [0, 1] as logits: the loss stays between ln(1 + 2/e) and ln(2 + e)
    for d in (right, wrong):
        assert math.log(1 + 2 / math.e) - 1e-9 <= d["loss_wrong"] <= math.log(2 + math.e) + 1e-9
    assert right["loss_right"] < 1e-3 and right["loss_wrong"] > 0.5
    assert wrong["loss_right"] > 9.9 and wrong["loss_wrong"] < 1.6


def test_double_softmax_plot_matches_per_point_losses():
    fig = SV.plot_double_softmax([-3.0, 0.0, 4.0], others=(1.0, -1.0))
    right, wrong = (line.get_ydata() for line in fig.axes[0].get_lines())
    for k, a in enumerate([-3.0, 0.0, 4.0]):
        d = S.double_softmax([a, 1.0, -1.0], 0)
        assert right[k] == pytest.approx(d["loss_right"], abs=1e-12)
        assert wrong[k] == pytest.approx(d["loss_wrong"], abs=1e-12)
    plt.close(fig)


def test_plots_return_labelled_figures():
    for fig in (
        SV.plot_softmax_state(),
        SV.plot_softmax_state([1, 2, 3, 4, 5], 4, 0.5, list("abcde")),
        SV.plot_nll_curve(),
        SV.plot_double_softmax(),
    ):
        assert isinstance(fig, matplotlib.figure.Figure)
        ax = fig.axes[0]
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
        plt.close(fig)
    fig = SV.plot_softmax_state()
    assert "1.408 nats" in fig.axes[0].get_title() and "2.031 bits" in fig.axes[0].get_title()
    plt.close(fig)


def test_explorer_builds_and_validates():
    w = SV.softmax_explorer([1.0, 0.0, -1.0, 2.0], target=3)
    controls = w.children[0].children
    assert len(controls) == 7  # 4 logits, +c to all, target, temperature
    assert [c.value for c in controls[:4]] == [1.0, 0.0, -1.0, 2.0] and controls[5].value == 3
    image = w.children[1]
    first = image.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    controls[0].value = 5.0  # moving a slider redraws the picture
    assert image.value != first and image.value[:4] == b"\x89PNG"
    assert controls[4].description == "+c (all)" and controls[4].max >= 1000  # reaches overflow territory
    plt.close("all")


def test_adding_c_to_every_logit_changes_the_logits_fed_in_but_not_the_bars():
    base, moved = (
        SV.plot_softmax_state([2.0, 1.0, 0.0], 1),
        SV.plot_softmax_state([2.0, 1.0, 0.0], 1, shift=1000.0),
    )
    heights = lambda fig: [round(r.get_height(), 12) for r in fig.axes[0].patches]  # noqa: E731
    assert heights(base) == heights(moved) and base.axes[0].get_title() == moved.axes[0].get_title()
    assert "[1002, 1001, 1000]" in moved.axes[0].get_xlabel() and "[2, 1, 0]" in base.axes[0].get_xlabel()
    with pytest.raises(ValueError, match="3 to 5"):
        SV.softmax_explorer([1.0, 2.0])
    plt.close("all")


# ---------------------------------------------------------------- checkers


def _torch_softmax(z):
    return torch.softmax(torch.tensor(z, dtype=torch.float64), 0).numpy()


def _torch_nll(z, y):
    return float(F.cross_entropy(torch.tensor(z, dtype=torch.float64)[None], torch.tensor([y])))


def _own_softmax(z):  # an independent correct answer: a loop over math.exp, shifted by the max
    m = max(z)
    e = [math.exp(v - m) for v in z]
    return np.array(e) / math.fsum(e)


def _own_nll(z, y):  # another one: the largest term out of the sum exactly, log1p of the rest
    z = np.asarray(z, dtype=np.float64)
    k = int(np.argmax(z))
    return float(z[k] + np.log1p(np.exp(np.delete(z, k) - z[k]).sum()) - z[y])


def _naive_softmax(z):
    e = np.exp(z)
    return e / e.sum()


def _min_shift_softmax(z):
    e = np.exp(z - z.min())
    return e / e.sum()


def _mean_shift_softmax(z):
    e = np.exp(z - z.mean())
    return e / e.sum()


def _unnormalised(z):
    return np.exp(z - z.max())


def _in_place_softmax(z):
    z -= z.max()
    np.exp(z, out=z)
    z /= z.sum()
    return z


def test_stable_softmax_checker_accepts_independent_solution(capsys):
    assert S.check_stable_softmax(_own_softmax)
    assert "pass" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong", [_naive_softmax, _min_shift_softmax, _mean_shift_softmax, _unnormalised, _in_place_softmax]
)
def test_stable_softmax_checker_rejects(wrong, capsys):
    assert not S.check_stable_softmax(wrong)
    out, err = capsys.readouterr()
    assert "fail" in out and err == ""


@pytest.mark.parametrize(
    "cheat",
    [
        lambda z: __import__("lmcore").handcalc.softmax(z),
        _torch_softmax,
        lambda z: F.softmax(torch.from_numpy(z), -1).numpy(),
        lambda z: torch.from_numpy(z).softmax(0).numpy(),
        lambda z: np.exp(__import__("lmcore").handcalc.log_softmax(z)),
        # the same kernels under other names (review 00-05)
        lambda z: torch.special.softmax(torch.from_numpy(z), 0).numpy(),
        lambda z: torch.special.log_softmax(torch.from_numpy(z), 0).exp().numpy(),
        lambda z: torch._softmax(torch.from_numpy(z), 0, False).numpy(),
        lambda z: torch.ops.aten._softmax(torch.from_numpy(z), 0, False).numpy(),
        lambda z: torch.ops.aten._log_softmax.default(torch.from_numpy(z), 0, False).exp().numpy(),
    ],
)
def test_stable_softmax_checker_rejects_the_reference_and_library_calls(cheat, capsys):
    assert not S.check_stable_softmax(cheat)
    assert "your function called" in capsys.readouterr().out


def test_checkers_say_not_attempted_for_stub(capsys):
    def stub(*args):
        raise NotImplementedError

    assert not S.check_stable_softmax(stub) and not S.check_nll_from_logits(stub)
    assert not C.check_fit_temperature(stub) and not B.check_double_softmax_band(stub)
    out = capsys.readouterr().out
    assert out.count("not attempted yet") == 4 and "fail" not in out


def _log_of_stable_softmax(z, y):  # underflows: p_y = 0 for z=[1000, 0], y=1
    e = np.exp(z - z.max())
    return float(-np.log(e[y] / e.sum()))


def _naive_nll(z, y):
    return float(-np.log(np.exp(z[y]) / np.exp(z).sum()))


def _log2_nll(z, y):
    return _own_nll(z, y) / math.log(2)


def _missing_minus(z, y):
    return -_own_nll(z, y)


def _lse_without_max(z, y):
    return float(np.log(np.exp(z).sum()) - z[y])


def test_nll_checker_accepts_independent_solution(capsys):
    assert S.check_nll_from_logits(_own_nll)
    assert "pass" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong", [_log_of_stable_softmax, _naive_nll, _log2_nll, _missing_minus, _lse_without_max]
)
def test_nll_checker_rejects(wrong, capsys):
    assert not S.check_nll_from_logits(wrong)
    out, err = capsys.readouterr()
    assert "fail" in out and err == ""


def test_nll_checker_names_bits_and_a_flipped_sign(capsys):
    assert not S.check_nll_from_logits(_log2_nll)
    assert "which logarithm did you take" in capsys.readouterr().out
    assert not S.check_nll_from_logits(_missing_minus)
    assert "sign is flipped" in capsys.readouterr().out


@pytest.mark.parametrize(
    "cheat",
    [
        lambda z, y: __import__("lmcore").handcalc.nll(z, y),
        _torch_nll,
        lambda z, y: float(__import__("lmcore").handcalc.logsumexp(z) - z[y]),
        lambda z, y: float(torch.logsumexp(torch.from_numpy(z), 0) - z[y]),
        lambda z, y: float(-F.log_softmax(torch.from_numpy(z), -1)[y]),
        lambda z, y: float(torch.special.logsumexp(torch.from_numpy(z), 0) - z[y]),
        lambda z, y: float(torch.ops.aten.logsumexp(torch.from_numpy(z), [0]) - z[y]),
        lambda z, y: float(
            torch._C._nn.cross_entropy_loss(torch.from_numpy(z)[None], torch.tensor([y]), None, 1, -100, 0.0)
        ),
        lambda z, y: float(
            torch._C._nn.nll_loss_nd(
                torch.from_numpy(z).log_softmax(0)[None], torch.tensor([y]), None, 1, -100
            )
        ),
    ],
)
def test_nll_checker_rejects_the_reference_and_library_calls(cheat, capsys):
    assert not S.check_nll_from_logits(cheat)
    assert "your function called" in capsys.readouterr().out


# ---------------------------------------------------------------- exercise 4: the temperature that fits


def _mean_nll_loop(Z, y, T=1.0):  # independent: a plain loop over math.exp
    total, n = 0.0, 0
    for row, target in zip(np.asarray(Z, dtype=np.float64), y):
        if target == -100:
            continue
        z = [v / T for v in row]
        m = max(z)
        total += m + math.log(math.fsum(math.exp(v - m) for v in z)) - z[int(target)]
        n += 1
    return total / n


def test_mean_nll_reference_matches_a_loop_and_validates():
    for case in C._cases():
        for T in (0.3, 1.0, 7.0):
            assert math.isclose(
                S.mean_nll_reference(*case.args, T), _mean_nll_loop(*case.args, T), rel_tol=1e-12
            )
    with pytest.raises(ValueError, match="at least one"):
        S.mean_nll_reference(np.zeros((2, 3)), np.array([-100, -100]))
    with pytest.raises(ValueError, match="T"):
        S.mean_nll_reference(np.zeros((2, 3)), np.array([0, 1]), 0.0)
    with pytest.raises(ValueError, match="Z must be"):
        S.mean_nll_reference(np.zeros(3), np.array([0]))


def test_best_temperature_is_the_bottom_of_a_dense_grid():
    """Against brute force: no T on a dense log grid around it beats it, and its neighbours a
    relative 1e-3 away are worse on both sides."""
    for case in C._cases():
        Z, y = case.args
        best = C.best_temperature(Z, y)
        assert 0.1 < best < 1000  # as the exercise says
        at_best = _mean_nll_loop(Z, y, best)
        grid = best * np.exp(np.linspace(-3, 3, 2001))
        assert min(_mean_nll_loop(Z, y, T) for T in grid) >= at_best - 1e-12
        assert _mean_nll_loop(Z, y, best * 1.001) > at_best and _mean_nll_loop(Z, y, best / 1.001) > at_best


def test_best_temperature_refuses_a_batch_with_no_finite_best():
    top = np.array([[3.0, 0.0], [0.0, 3.0]])
    with pytest.raises(ValueError, match="T -> 0"):
        C.best_temperature(top, np.array([0, 1]))  # every target on top: the loss falls as T -> 0
    with pytest.raises(ValueError, match="T grows"):
        C.best_temperature(top, np.array([1, 0]))  # every target at the bottom
    with pytest.raises(ValueError, match="at least one"):
        C.best_temperature(top, np.array([-100, -100]))


def test_fit_temperature_nudge_asks_a_question_without_the_method(capsys):
    from lmcore.course.solutions import hints_of

    nudge, full = hints_of("check_fit_temperature")
    assert nudge.rstrip().endswith("?") and "beta" not in nudge and "bisect" not in nudge
    assert "bisect" in full


# ---------------------------------------------------------------- float32 answers (issue 38)


def _nll_float32(z, y):  # the notebook's solution, computed in float32
    z32 = np.asarray(z, dtype=np.float32)
    m = z32.max()
    return float(m + np.log(np.exp(z32 - m).sum()) - z32[y])


def test_nll_checker_accepts_a_float32_answer(capsys):
    """Issue 38: a float32 answer is right. It was rejected at z = [2, 1, 0] (expected 1.407606,
    got 1.4076061) under an rtol of 1e-7."""
    assert S.check_nll_from_logits(_nll_float32)
    assert capsys.readouterr().out.count("✓ pass") == 1


def test_double_softmax_band_is_where_the_bug_lives():
    """The band's ends against the bug itself (float64 autograd-free evaluation): random logits of
    every scale stay inside, near-one-hot logits reach each end to 1e-12, and the band is one nat wide."""
    from lmcore.course.softmax_nll.band import double_softmax_band_reference as band

    g = torch.Generator().manual_seed(0)
    for V in (2, 3, 7, 1000):
        low, high = band(V)
        assert high - low == pytest.approx(1.0, abs=1e-12)
        z = (
            torch.randn(4000, V, generator=g, dtype=torch.float64)
            * torch.logspace(-2, 2, 4000, dtype=torch.float64)[:, None]
        )
        y = torch.randint(V, (4000,), generator=g)
        bug = F.cross_entropy(torch.softmax(z, -1), y, reduction="none")
        assert low - 1e-12 <= float(bug.min()) and float(bug.max()) <= high + 1e-12  # rounding only
        ends = []
        for top in (0, 1):
            z1 = torch.zeros(V, dtype=torch.float64)
            z1[top] = 40.0
            ends.append(float(F.cross_entropy(torch.softmax(z1, -1)[None], torch.tensor([0]))))
        assert ends[0] == pytest.approx(low, abs=1e-12) and ends[1] == pytest.approx(high, abs=1e-12)
    with pytest.raises(ValueError, match="V"):
        band(1)
    with pytest.raises(TypeError, match="V"):
        band(3.0)
