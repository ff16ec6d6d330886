"""dpbench.figures.ranges: one method far off the others does not set a panel's y range."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from dpbench.figures.ranges import Outlier, find_outlier, fit_range, short


def test_a_method_reaching_beyond_the_others_by_more_than_their_span_is_far_off():
    extents = {"A": (0.80, 0.84), "B": (0.78, 0.83), "Bolt-on": (0.48, 0.82)}
    assert find_outlier(extents, log=False) == Outlier("Bolt-on", "below", 0.48, 0.82)
    assert find_outlier(extents, log=False).note() == "Bolt-on below, 0.48–0.82"
    gaps = {"A": (0.01, 0.3), "B": (0.02, 0.2), "Bolt-on": (2.0, 4000.0)}
    assert find_outlier(gaps, log=True).note() == "Bolt-on above, 2–4e3"


def test_no_method_is_far_off_when_it_stays_within_a_span_or_there_are_only_two():
    assert find_outlier({"A": (0.80, 0.84), "B": (0.70, 0.83), "C": (0.66, 0.82)}, log=False) is None
    assert find_outlier({"A": (0.80, 0.84), "B": (0.1, 0.2)}, log=False) is None  # which one? neither
    # a reference value the panel shows (the majority class) widens the others' range
    extents = {"A": (0.95, 0.99), "B": (0.96, 0.99), "C": (0.65, 0.72)}
    assert find_outlier(extents, log=False) is not None
    assert find_outlier(extents, log=False, fixed=(0.80,)) is None
    # nearly coinciding curves do not make a near one far off (least span: half a decade on a log axis)
    assert find_outlier({"A": (1.0, 1.01), "B": (1.0, 1.02), "C": (1.5, 2.0)}, log=True) is None


def test_fit_range_sets_the_range_from_the_others_and_marks_the_far_curve_at_the_edge():
    fig, ax = plt.subplots()
    xs = np.array([1.0, 2.0, 3.0])
    curves = {"A": [(xs, np.array([0.80, 0.82, 0.84]), np.array([0.79, 0.81, 0.83]), np.array([0.81, 0.83, 0.85]))],
              "B": [(xs, np.array([0.78, 0.80, 0.83]), np.array([0.77, 0.79, 0.82]), np.array([0.79, 0.81, 0.84]))],
              "C": [(xs, np.array([0.48, 0.60, 0.82]), np.array([0.40, 0.5, 0.8]), np.array([0.55, 0.7, 0.84]))]}
    for label, ((x, m, _, _),) in curves.items():
        ax.plot(x, m, label=label)
    outlier = fit_range(ax, curves, {"A": "k", "B": "k", "C": "red"}, log=False)
    bottom, top = ax.get_ylim()
    arrows = [line for line in ax.get_lines() if line.get_label() == "_beyond"]
    plt.close(fig)
    assert outlier.label == "C" and 0.75 < bottom < 0.77 and 0.85 < top < 0.87
    assert [a.get_xdata().tolist() for a in arrows] == [[1.0, 2.0]]  # the two points below the panel
    assert arrows[0].get_color() == "red" and arrows[0].get_marker() == "v"


def test_short_values_for_notes():
    assert [short(v) for v in (0.4812, 3843.0, 2.5e-5, 12.0)] == ["0.48", "3.8e3", "2.5e-5", "12"]
