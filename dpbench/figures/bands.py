"""Where a curve is drawn: its means and their 95% confidence band over seeds, kept inside the
metric's range, and on a log axis the panel's floor and the zero marks.

A band is the 95% interval of the mean over seeds (Student t; curves.csv `ci_low`, `ci_high`,
dpbench.analysis.curves.mean_ci). On a log axis a mean <= 0 (a non-private optimality gap) has no
logarithm: it is not drawn among the positive means but as a zero mark in a strip below them
(`zero_mark`, `place_zero_marks`): on the y axis itself for a horizontal line, at its x for a point,
labelled "0" (or "≤ 0") in the curve's colour. A band's lower edge is clipped to a decade below its
mean and never below the panel's floor (`log_floor`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpbench.analysis.curves import mean_ci
from dpbench.figures.style import LOG_METRICS
from dpbench.run.metrics import BOUNDS

ZERO_MARKER = ">"  # a horizontal line at 0, on the y axis of a log panel
ZERO_POINT_MARKER = "v"  # a point at 0 of a log panel, at its x
ZERO_STRIP = 0.09  # the zero marks' strip below a log panel's range, a fraction of its height
GAP_FLOOR = 1e-6  # the floor of a log panel without a single positive mean (nothing else to go by)


def log_floor(panel: pd.DataFrame, metric: str) -> float | None:
    """The lowest value a log-axis panel draws: a decade below its smallest positive mean (so the
    floor is below every positive mean and at most one decade under the lowest of them), below which no
    band goes (a mean <= 0 is a zero mark, `zero_mark`). GAP_FLOOR when no mean is positive; None
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


def drawn(mean: np.ndarray, lo: np.ndarray, hi: np.ndarray, at_floor: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`band`'s mean and band without the means <= 0 of a log axis (NaN: no point, no band there;
    they are zero marks)."""
    gone = np.where(at_floor, np.nan, 1.0)
    return mean * gone, lo * gone, hi * gone


def zero_mark(ax, colour, means: np.ndarray, xs: np.ndarray | None = None) -> None:
    """Record a curve's means <= 0 on a log panel (`means`: the curve's own, at least one <= 0):
    on the y axis (`xs` None: a horizontal line) or at `xs`; labelled "0" when they are exactly 0,
    else "≤ 0". Drawn by `place_zero_marks` once the panel's range is settled."""
    low = means[means <= 0]
    if not low.size:
        return
    text = "0" if np.all(low == 0) else "≤ 0"
    ax.__dict__.setdefault("_dpbench_zeros", []).append((colour, text, None if xs is None else np.asarray(xs)))


def place_zero_marks(ax) -> None:
    """The zero marks of a log panel (`zero_mark`) in a strip added below its range (ZERO_STRIP of its
    height): a horizontal line's as a marker on the y axis (outside the data, unclipped) with its
    label beside it, a point's as an open down-triangle at its x; each label in its curve's colour."""
    zeros = getattr(ax, "_dpbench_zeros", [])
    if not zeros:
        return
    bottom, top = ax.get_ylim()
    span = np.log10(top / bottom)
    new_bottom = bottom / 10 ** (span * ZERO_STRIP / (1 - ZERO_STRIP))
    level = np.sqrt(bottom * new_bottom)  # the strip's middle, on the log scale
    ax.set_ylim(new_bottom, top)
    on_axis = ax.get_yaxis_transform()  # x in axes fraction, y in data
    at = 0
    for colour, text, xs in zeros:
        if xs is None:
            ax.plot([0.0], [level], transform=on_axis, linestyle="none", marker=ZERO_MARKER, markersize=7,
                    color=colour, clip_on=False, zorder=6, label="_zero")
        else:
            ax.plot(xs, np.full(len(xs), level), linestyle="none", marker=ZERO_POINT_MARKER, markersize=6,
                    color=colour, markerfacecolor="white", zorder=6, label="_zero")
        ax.annotate(text, (0.0, level), xycoords=on_axis, xytext=(6 + 16 * at, 0), textcoords="offset points",
                    ha="left", va="center", fontsize=8, color=colour, fontweight="bold")
        at += 1
