"""`make figures`: every figure builds from the notebooks' plotting functions into a real PNG."""

import matplotlib.image as mpimg
import numpy as np

from lmcore.course.build.figures import FIGURES, build_figures


def test_every_figure_is_a_real_image(tmp_path):
    paths = build_figures(tmp_path, quick=True)
    assert sorted(p.stem for p in paths) == sorted(FIGURES)
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
        img = mpimg.imread(path)
        assert img.shape[0] >= 200 and img.shape[1] >= 400, (path, img.shape)
        assert np.ptp(img[..., :3]) > 0.5, f"{path} is blank"  # not a flat image


def test_the_full_training_figure_draws_notebook_08s_reference_run():
    """Without --quick the curve is the committed cpu-preset run (tied to the preset by
    test_training_reference.py), not a retraining: every record of it is drawn."""
    import json

    import matplotlib.pyplot as plt

    from lmcore.course.build.figures import FIGURES
    from lmcore.course.training.reference import REFERENCE_DIR

    fig = FIGURES["training_loss_curve"](False)
    history = json.loads((REFERENCE_DIR / "history.json").read_text())
    drawn = [list(line.get_ydata()) for ax in fig.axes for line in ax.get_lines()]
    assert [r["val_loss"] for r in history] in drawn
    plt.close(fig)
