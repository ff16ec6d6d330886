"""Grey reference lines a figure draws beside its measured curves, and the options that ask for them.

* a paper's rate with its constants fitted to one curve (`draw_rate`; option `reference`, the
  rates of dpbench.analysis.curves.RATES fitted by curves.fit_rate): the rate's shape is what a
  paper states, its constants are not given;
* the accuracy of always predicting the test split's majority class (`draw_majority`; option
  `baseline: majority`);
* the projection radius R where an estimation error reaches it (`draw_radius`).

The options are declared once here as annotated types; each figure kind names the ones it takes
in its signature (dpbench.figures.kinds reads them from there).
"""

from __future__ import annotations

import json
from typing import Annotated

import numpy as np
import pandas as pd

from dpbench.analysis.curves import RATES, fit_rate, reference_curve
from dpbench.core.registry import Param
from dpbench.figures.frame import corner_note
from dpbench.figures.style import REFERENCE_COLOUR, REFERENCE_STYLES

REFERENCE_LINES = tuple(RATES)  # reference rates a figure can draw (curves.RATES)
BASELINES = ("majority",)

ReferenceOption = Annotated[str | None, Param(
    "a paper's rate drawn in grey, its constant(s) fitted (least squares in log space) to the curve named by "
    "reference_curve (default: the rate's algorithm): dpsco_rate (excess population risk, paper 002 §17.2, two "
    "constants, output perturbation), dpsgd_rate (optimality gap, paper 000 Thm. 1, DP-SGD), heavy_tailed_rate "
    "(estimation error, √ of paper 004 Thm. 7, Alg. 4)", choices=REFERENCE_LINES, paper="papers 000, 002, 004")]
ReferenceCurveOption = Annotated[str | None, Param(
    "label of the curve the reference rate's constants are fitted to (default: the first curve of the rate's "
    "algorithm)")]
BaselineOption = Annotated[str | None, Param(
    "majority: the accuracy of predicting the test split's majority class, a dotted grey line per panel, its value in the right margin "
    "(read from the data sets' splits, else from the stored results/<exp>/majority.csv)", choices=BASELINES)]


def majority_value(panel: pd.DataFrame) -> float:
    """The majority-class accuracy of the panel's test split (column `majority_accuracy`; NaN without)."""
    if "majority_accuracy" not in panel:
        return float("nan")
    return float(panel["majority_accuracy"].mean())


def draw_majority(ax, panel: pd.DataFrame) -> bool:
    """The majority-class accuracy of the panel's test split (`majority_value`, a column added by
    dpbench.experiment.render.figure_tables) as a grey line (REFERENCE_STYLES["majority"]) with its
    value in the right margin, outside the data area where no curve is; False when the table has no
    value for this panel."""
    value = majority_value(panel)
    if not np.isfinite(value):
        return False
    ax.axhline(value, color=REFERENCE_COLOUR, linestyle=REFERENCE_STYLES["majority"][0], linewidth=1.5, zorder=1.5,
               label="majority class (test split)")
    ax.annotate(f"{value:.3f}", (1.0, value), xycoords=ax.get_yaxis_transform(), xytext=(3, 0),
                textcoords="offset points", ha="left", va="center", fontsize=7, color=REFERENCE_COLOUR,
                annotation_clip=False)
    return True


def draw_rate(ax, panel: pd.DataFrame, name: str, curve: str | None, x: str, markers: dict | None,
              metric: str) -> None:
    """A paper's rate (curves.RATES[name]) in grey with its constants fitted to one curve of the
    panel (curves.fit_rate): one line per epsilon of that curve over `x` (n or d; marker by
    epsilon), or one line over epsilon (`markers` None); the fitted constants are written in the
    panel's corner, the formula and its source in the legend. A rate that bounds another metric
    is not drawn, and the corner says so."""
    if metric not in RATES[name].metrics:
        corner_note(ax, f"{name} not drawn: it bounds {', '.join(RATES[name].metrics)}")
        return
    fitted = fit_rate(panel, name, curve)
    if fitted is None:
        return
    rows = reference_curve(panel, fitted.rate, fitted.curve)
    legend = f"{fitted.rate.formula} ({fitted.rate.source}), fitted to {fitted.curve}"
    style = {"color": REFERENCE_COLOUR, "linewidth": 1.3, "linestyle": REFERENCE_STYLES["rate"][0], "zorder": 1.8}
    if markers is None:
        rows = rows.sort_values("epsilon")
        ax.plot(rows["epsilon"].to_numpy(dtype=float), fitted.values(rows), label=legend, **style)
    else:
        for eps, part in rows.groupby("epsilon", sort=True):
            part = part.sort_values(x)
            xs, ys = part[x].to_numpy(dtype=float), fitted.values(part)
            ax.plot(xs, ys, marker=markers.get(eps, "o"), markersize=3, markerfacecolor="none",
                    label=legend, **style)
            _mark_turn(ax, fitted, part, xs, ys)
    names = "ab" if len(fitted.constants) > 1 else "c"
    text = ", ".join(f"{k} = {v:.3g}" for k, v in zip(names, fitted.constants))
    corner_note(ax, f"rate fit: {text}", first=True)


def _mark_turn(ax, fitted, rows: pd.DataFrame, xs: np.ndarray, ys: np.ndarray) -> None:
    """On a two-term rate, where its terms are equal (the turn from the first term's slope to the
    second's), found between two sizes by interpolation in log-log: a grey bar, and a corner note."""
    if len(fitted.constants) != 2 or len(xs) < 2:
        return
    first, second = (c * term(rows) for c, term in zip(fitted.constants, fitted.rate.terms))
    ratio = np.log(first / second)
    for i in range(len(xs) - 1):
        if ratio[i] > 0 >= ratio[i + 1]:
            w = ratio[i] / (ratio[i] - ratio[i + 1])
            turn = float(np.exp(np.log(xs[i]) + w * np.log(xs[i + 1] / xs[i])))
            value = float(np.exp(np.log(ys[i]) + w * np.log(ys[i + 1] / ys[i])))
            ax.plot([turn], [value], marker="|", markersize=14, markeredgewidth=1.5, color=REFERENCE_COLOUR,
                    linestyle="none", zorder=3)
            eps = float(rows["epsilon"].iloc[0])
            corner_note(ax, f"| terms equal at n ≈ {float(f'{turn:.2g}'):,.0f} (ε = {eps:g})")
            return


def radii(rows: pd.DataFrame) -> list[float]:
    """The positive projection radii in the `params` of these rows (hyperparameter `radius`), sorted."""
    out = set()
    for text in rows.get("params", pd.Series(dtype=str)).dropna().unique():
        try:
            value = json.loads(text).get("radius")
        except (TypeError, ValueError, AttributeError):
            continue
        if isinstance(value, (int, float)) and value > 0:
            out.add(float(value))
    return sorted(out)


def draw_radius(ax, rows: pd.DataFrame, metric: str, top: float) -> None:
    """Where the metric is an estimation error ||theta - w*|| and the runs project onto a ball
    (`radius` in their params), a horizontal line at the radius R: an iterate on the ball has
    ||theta|| = R, so a curve near R sits on it (||theta - w*|| is within ||w*|| of R). Drawn only
    when a curve comes within a factor 2 of R (otherwise the line would only stretch the axis)."""
    if metric != "estimation_error" or not np.isfinite(top):
        return
    for radius in radii(rows):
        if top >= radius / 2:
            ax.axhline(radius, color=REFERENCE_COLOUR, linestyle=REFERENCE_STYLES["radius"][0], linewidth=1.0,
                       alpha=0.9, zorder=1.6,
                       label=f"projection radius R = {radius:g} ($\\|\\theta\\|_2 \\leq R$; "
                             "a curve at R sits on the ball)")
