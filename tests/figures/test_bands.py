"""dpbench.figures.bands: the interval drawn without ci columns, and the zero marks of a log axis."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from dpbench.analysis.curves import mean_ci
from dpbench.figures.bands import ZERO_MARKER, band, drawn, place_zero_marks, zero_mark


def test_band_computes_the_interval_from_std_and_count_or_draws_none():
    line = pd.DataFrame({"mean": [1.0, 2.0], "std": [0.5, 0.1], "count": [4, 9]})
    mean, lo, hi, at_floor = band(line, "test_loss", None)
    want_lo, want_hi = mean_ci(np.array([1.0, 2.0]), np.array([0.5, 0.1]), np.array([4.0, 9.0]))
    assert lo == pytest.approx(want_lo) and hi == pytest.approx(want_hi) and not at_floor.any()
    mean, lo, hi, _ = band(pd.DataFrame({"mean": [1.0, 2.0]}), "test_loss", None)
    assert (lo == mean).all() and (hi == mean).all()  # no std and count: no band
    single = pd.DataFrame({"mean": [1.0], "std": [np.nan], "count": [1]})
    _, lo, hi, _ = band(single, "test_loss", None)
    assert lo[0] == hi[0] == 1.0  # an undefined interval (one seed) is no band, not NaN


def test_a_mean_at_or_below_zero_is_not_drawn_among_the_positive_means():
    line = pd.DataFrame({"mean": [0.0, 0.5], "ci_low": [-0.1, 0.4], "ci_high": [0.1, 0.6]})
    mean, lo, hi = drawn(*band(line, "optimality_gap", 0.05))
    assert np.isnan([mean[0], lo[0], hi[0]]).all() and mean[1] == 0.5


def test_zero_marks_sit_on_the_y_axis_below_the_range_labelled_in_the_curves_colour():
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.plot([1, 2], [1e-2, 1.0], color="green")
    zero_mark(ax, "red", np.array([0.5]))  # nothing <= 0: no mark
    zero_mark(ax, "red", np.array([0.0]))  # a horizontal line at exactly 0
    zero_mark(ax, "blue", np.array([-1e-9, 0.3]), np.array([1.5]))  # a point below 0
    bottom = ax.get_ylim()[0]
    place_zero_marks(ax)
    new_bottom = ax.get_ylim()[0]
    marks = [line for line in ax.get_lines() if line.get_label() == "_zero"]
    texts = {t.get_text(): t.get_color() for t in ax.texts}
    on_axis = marks[0]
    plt.close(fig)
    assert new_bottom < bottom  # a strip below everything drawn
    assert texts == {"0": "red", "≤ 0": "blue"}
    assert on_axis.get_marker() == ZERO_MARKER and on_axis.get_xdata()[0] == 0.0 and not on_axis.get_clip_on()
    assert new_bottom < on_axis.get_ydata()[0] < bottom
    assert marks[1].get_xdata().tolist() == [1.5]  # a point's mark at its x
    assert all(line.get_label().startswith("_") for line in marks)  # no legend entry of their own
