import math

import numpy as np

from lmcore.course.start.lesson import check_surprise, environment_report, surprise_line


def test_check_surprise_accepts_the_solution_and_rejects_wrong_ones(capsys):
    assert check_surprise(lambda p: -math.log(p))
    assert not check_surprise(lambda p: -math.log2(p))  # bits, not nats
    assert not check_surprise(lambda p: 1 - p)  # not a log at all
    assert not check_surprise(lambda p: math.log(p))  # sign
    assert "Hint" in capsys.readouterr().out


def test_surprise_line_values():
    assert "9.210 nats" in surprise_line(1e-4)
    assert f"{-np.log2(0.5):.3f} bits" in surprise_line(0.5)


def test_environment_report_keys():
    rep = environment_report()
    assert set(rep) == {"python", "torch", "numpy", "ipywidgets", "device"}


def test_check_surprise_rejects_the_reference_call(capsys):
    from lmcore.course.start.lesson import surprise_reference

    assert not check_surprise(lambda p: surprise_reference(p))
    assert "your function called lmcore.course.start.lesson.surprise_reference" in capsys.readouterr().out
