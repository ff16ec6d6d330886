"""Where a curve is drawn: its means and their 95% confidence band over seeds, kept inside the
metric's range, and on a log axis the panel's floor.

A band is the 95% interval of the mean over seeds (Student t; curves.csv `ci_low`, `ci_high`,
dpbench.analysis.curves.mean_ci). On a log axis a mean <= 0 (a non-private optimality gap) has no
logarithm: it is drawn at the panel's floor, a decade below its smallest positive mean, with an
open down-triangle (`FLOOR_MARKER`), and a band's lower edge is clipped to a decade below its mean
and never below the floor.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpbench.analysis.curves import mean_ci
from dpbench.figures.style import LOG_METRICS
from dpbench.run.metrics import BOUNDS

FLOOR_MARKER = "v"  # a mean <= 0 drawn at a log panel's floor
GAP_FLOOR = 1e-6  # the floor of a log panel without a single positive mean (nothing else to go by)


def log_floor(panel: pd.DataFrame, metric: str) -> float | None:
    """The lowest value a log-axis panel draws: a decade below its smallest positive mean (so the
    floor is below every positive mean and at most one decade under the lowest of them), where a
    mean <= 0 is drawn (`FLOOR_MARKER`) and no band goes below. GAP_FLOOR when no mean is positive; None
    for a linear axis."""
    if metric not in LOG_METRICS:
        return None
    positive = panel["mean"][panel["mean"] > 0]
    return float(positive.min()) / 10 if not positive.empty else GAP_FLOOR


def _interval(line: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of each mean: the table's `ci_low`, `ci_high` (curves.with_ci), computed by
    curves.mean_ci for a table without them, or the mean itself without std and count."""
    mean = line["mean"].to_numpy(dtype=float)
    if "ci_low" in line and "ci_high" in line:
        return line["ci_low"].to_numpy(dtype=float), line["ci_high"].to_numpy(dtype=float)
    if "std" in line and "count" in line:
        return mean_ci(mean, line["std"].to_numpy(dtype=float), line["count"].to_numpy(dtype=float))
    return mean, mean


def band(line: pd.DataFrame, metric: str, floor: float | None
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lower, upper, at_floor) of a curve as drawn: its 95% interval (`_interval`, no band
    where it is undefined) kept inside the metric's range (metrics.BOUNDS: accuracy in [0, 1]). On
    a log axis (`floor` given) a mean <= 0 is drawn at `floor` (`at_floor` marks it) and a band's
    lower edge is clipped to at most a decade below its mean and never below the floor (an
    interval reaching 0 would otherwise spike down the whole axis)."""
    mean = line["mean"].to_numpy(dtype=float)
    lo, hi = _interval(line)
    lo, hi = np.where(np.isfinite(lo), lo, mean), np.where(np.isfinite(hi), hi, mean)
    low, high = BOUNDS.get(metric, (-np.inf, np.inf))
    lo, hi = np.clip(lo, low, high), np.clip(hi, low, high)
    at_floor = np.zeros(mean.shape, dtype=bool)
    if floor is not None:  # clipped, not spiking: at most a decade below the mean, never below the floor
        at_floor = mean <= 0
        mean = np.maximum(mean, floor)
        lo, hi = np.maximum(lo, np.maximum(mean / 10, floor)), np.maximum(hi, mean)
    return mean, lo, hi, at_floor


def floor_markers(ax, xs: np.ndarray, ys: np.ndarray, colour) -> None:
    """Open down-triangles at the means <= 0 drawn at a log panel's floor, and a grey legend entry."""
    if len(xs):
        ax.plot(xs, ys, linestyle="none", marker=FLOOR_MARKER, markersize=6, color=colour, markerfacecolor="white",
                zorder=4, label="_floor")
        ax.plot([], [], linestyle="none", marker=FLOOR_MARKER, markersize=6, color="0.3", markerfacecolor="white",
                label="mean ≤ 0, drawn at the panel's floor")
