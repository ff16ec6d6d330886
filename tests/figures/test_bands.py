"""dpbench.figures.bands: the interval drawn without ci columns, and the floor's markers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from dpbench.analysis.curves import mean_ci
from dpbench.figures.bands import FLOOR_MARKER, band, floor_markers


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


def test_floor_markers_draw_open_triangles_and_one_named_entry():
    fig, ax = plt.subplots()
    floor_markers(ax, np.array([]), np.array([]), "red")
    assert not ax.get_lines()
    floor_markers(ax, np.array([1.0, 2.0]), np.array([1e-3, 1e-3]), "red")
    lines = ax.get_lines()
    plt.close(fig)
    assert [line.get_marker() for line in lines] == [FLOOR_MARKER, FLOOR_MARKER]
    assert lines[0].get_label().startswith("_")  # the points are not a legend entry of their own
    assert lines[1].get_label() == "mean ≤ 0, drawn at the panel's floor" and len(lines[1].get_xdata()) == 0
    assert lines[0].get_markerfacecolor() == "white"
