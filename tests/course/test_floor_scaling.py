"""Notebook 09's scaling fit: the fit recovers a power law it is given, and the width runs
validate their widths (the runs themselves are the notebook's, checked there)."""

import numpy as np
import pytest

from lmcore.course.floor import scaling as FS


@pytest.mark.parametrize("e, a, alpha", [(0.545, 1678.0, 1.345), (2.0, 5.0, 0.3), (0.0, 30.0, 0.75)])
def test_fit_recovers_a_known_power_law(e, a, alpha):
    n = np.array([572.0, 1912.0, 6896.0, 26080.0])
    fit = FS.fit_power_law(n, e + a * n**-alpha)
    assert fit["alpha"] == pytest.approx(alpha, abs=0.003)
    assert fit["E"] == pytest.approx(e, abs=2e-3 * max(1, a * n[-1] ** -alpha))
    assert fit["rms"] < 1e-3


def test_fit_matches_numpy_polyfit_at_a_fixed_alpha():
    n, loss = np.array([10.0, 20.0, 40.0, 80.0, 160.0]), np.array([3.0, 2.1, 1.7, 1.55, 1.5])
    fit = FS.fit_power_law(n, loss, alphas=[0.8])
    slope, icpt = np.polyfit(n**-0.8, loss, 1)  # loss = icpt + slope * n^-0.8
    assert fit["E"] == pytest.approx(icpt) and fit["A"] == pytest.approx(slope) and fit["alpha"] == 0.8


@pytest.mark.parametrize(
    "n, loss", [([1, 2, 3], [1, 1, 1]), ([1, 2, 3, 4], [1, 1, 1]), ([0, 2, 3, 4], [1, 1, 1, 1])]
)
def test_fit_validates(n, loss):
    with pytest.raises(ValueError):
        FS.fit_power_law(n, loss)


@pytest.mark.parametrize("widths", [(3,), (0,), (8.0,), (True,)])
def test_width_runs_validate_before_training(widths):
    with pytest.raises(ValueError, match="width"):
        FS.width_runs(widths)
