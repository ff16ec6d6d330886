"""Figure kind `metric_over_epsilon`: a metric over the privacy budget epsilon (log x), one panel
per (data set, model), the non-private algorithms as dashed horizontal lines.

A private curve's points sit at the end-to-end epsilon of private selection (tuning and training)
where the curves table has one, else at the per-run target (`x_epsilon`); stars and crosses mark
the points where a claim of claims.csv holds or fails with significance (`CLAIM_MARKS`). One panel's
y range is not set by one method far off the others (dpbench.figures.ranges).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd

from dpbench.figures.bands import band, drawn, log_floor, zero_mark
from dpbench.figures.frame import finish, key_entry, key_style, seeds_note
from dpbench.figures.kinds import View, figure_kind
from dpbench.figures.ranges import fit_range
from dpbench.figures.references import (BaselineOption, ReferenceCurveOption, ReferenceOption, draw_majority,
                                        draw_rate, majority_value)
from dpbench.figures.style import (LOG_METRICS, axis_label, claim_line, claim_meaning, colours_for, label_order,
                                   legend_name, nonprivate_styles)

#: the claim marks in the style key: (marker, size, what it says)
CLAIM_MARKS = {"+": ("*", 11, "a claim of claims.csv holds here (significant)"),
               "-": ("X", 8, "a claim of claims.csv fails here (significant)")}


def x_epsilon(line: pd.DataFrame) -> np.ndarray:
    """Where a private curve's points sit on the epsilon axis: the end-to-end epsilon of private
    selection (tuning + training) where the curves table has one, else the per-run target."""
    eps = line["epsilon"].to_numpy(dtype=float)
    if "eps_end_to_end" in line:
        total = line["eps_end_to_end"].to_numpy(dtype=float)
        eps = np.where(np.isfinite(total), total, eps)
    return eps


@figure_kind("metric_over_epsilon", description="metric over epsilon (log x), one panel per dataset x model, "
                                                "non-private algorithms as dashed lines",
             view=View(x="epsilon", x_title="privacy budget ε", panels=("dataset_label", "model_label")))
def metric_over_epsilon(curves: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                        algorithm_order: list[str] | None = None, *, reference: ReferenceOption = None,
                        reference_curve: ReferenceCurveOption = None,
                        baseline: BaselineOption = None) -> list[Path]:
    """One panel per (dataset, model): metric mean over log-scaled epsilon with its 95% interval band.

    Private algorithms are lines over epsilon; non-private ones (epsilon empty) are dashed
    horizontal lines with their band (a mean <= 0 on a log axis: a zero mark on the y axis,
    bands.zero_mark). `reference`: a rate fitted per panel (references.draw_rate);
    `baseline: majority`: the majority-class accuracy (column `majority_accuracy`, added by
    dpbench.experiment.render.figure_tables). Writes <stem>.png and <stem>.pdf; returns their paths.
    """
    part = curves[curves["metric"] == metric]
    if part.empty:
        return []
    datasets = list(dict.fromkeys(part["dataset_label"]))
    models = list(dict.fromkeys(part["model_label"]))
    labels = label_order(part, algorithm_order)
    colours = colours_for(labels)
    names = {label: legend_name(part[part["label"] == label], label) for label in labels}
    nonprivate = nonprivate_styles(part, labels)
    width = max(4.2 * len(datasets), 7.5)
    fig, axes = plt.subplots(len(models), len(datasets), figsize=(width, 3.3 * len(models)),
                             squeeze=False, sharex=True)
    eps_all = x_epsilon(part[part["epsilon"].notna()])
    xlim = (eps_all.min() / 1.3, eps_all.max() * 1.3) if eps_all.size else (0.01, 10)
    notes = []
    log = metric in LOG_METRICS
    for r, model in enumerate(models):
        for c, dataset in enumerate(datasets):
            ax = axes[r][c]
            panel = part[(part["dataset_label"] == dataset) & (part["model_label"] == model)]
            floor = log_floor(panel, metric)
            shown = {label: [_draw_curve(ax, panel[panel["label"] == label], metric, floor, colours[label],
                                         names[label], nonprivate.get(label), xlim)]
                     for label in labels if (panel["label"] == label).any()}
            if reference:
                draw_rate(ax, panel, reference, reference_curve, "epsilon", None, metric)
            majority = ()
            if baseline == "majority" and metric == "accuracy":
                if draw_majority(ax, panel):
                    majority = (majority_value(panel),)
                else:
                    notes.append(f"{dataset}")
            ax.set_xscale("log")
            ax.set_xlim(*xlim)
            epsilon_ticks(ax, part["epsilon"].dropna().unique(), xlim)
            if log:
                ax.set_yscale("log")
            fit_range(ax, shown, colours, log, majority)
            ax.set_title(f"{dataset} · {model}", fontsize=10)
            ax.grid(True, which="both", alpha=0.25)
            if r == len(models) - 1:
                ax.set_xlabel("privacy budget ε")
            if c == 0:
                ax.set_ylabel(axis_label(metric))
    extra = seeds_note(part)
    if notes:
        extra = (extra + " · " if extra else "") + \
            f"majority class not drawn for {', '.join(dict.fromkeys(notes))} (data not available when drawn)"
    return finish(fig, axes, width, title, stem, extra=extra, order=[names[label] for label in labels], log=log)


def _draw_curve(ax, line: pd.DataFrame, metric: str, floor: float | None, colour, name: str,
                nonprivate: dict | None, xlim: tuple[float, float]) -> tuple:
    """One method's curve in a panel with its band, claim marks and zero marks; returns it as drawn
    (x, mean, band low, band high) for the panel's range (ranges.fit_range)."""
    line = line.iloc[np.argsort(x_epsilon(line), kind="stable")]
    raw = line["mean"].to_numpy(dtype=float)
    mean, lo, hi = drawn(*band(line, metric, floor))
    if line["epsilon"].isna().all():
        key_style(ax, "non-private")
        xs = np.array(xlim)
        if np.isfinite(mean[0]):
            ax.plot(xs, [mean[0]] * 2, color=colour, label=name, **nonprivate)
            ax.axhspan(lo[0], hi[0], color=colour, alpha=0.12, linewidth=0)
        else:  # a mean <= 0 on a log axis: a zero mark on the y axis, its name in the legend all the same
            ax.plot([], [], color=colour, label=name, **nonprivate)
            zero_mark(ax, colour, raw[:1])
        return xs, np.full(2, mean[0]), np.full(2, lo[0]), np.full(2, hi[0])
    eps = x_epsilon(line)
    kwargs, _ = claim_line(line, "o", colour)
    key_style(ax, claim_meaning(line))
    ax.plot(eps, mean, markersize=3.5, color=colour, linewidth=1.5, label=name, **kwargs)
    ax.fill_between(eps, lo, hi, color=colour, alpha=0.18, linewidth=0)
    if floor is not None and (raw <= 0).any():
        zero_mark(ax, colour, raw, eps[raw <= 0])
    _claim_marks(ax, line, eps, mean, colour)
    return eps, mean, lo, hi


def _claim_marks(ax, line: pd.DataFrame, eps: np.ndarray, mean: np.ndarray, colour) -> bool:
    """Stars (claim holds) and crosses (claim fails) on the points of `line` that a per-point claim
    marks (column claim_mark, "+id" / "-id" joined by ", ", dpbench.experiment.verdicts.with_marks),
    each kind once in the style key (CLAIM_MARKS); True when any was drawn."""
    if "claim_mark" not in line:
        return False
    marks = line["claim_mark"].fillna("").astype(str).to_numpy()
    found = False
    for sign, (marker, size, meaning) in CLAIM_MARKS.items():
        at = np.array([any(m.strip().startswith(sign) for m in text.split(",")) if text else False for text in marks])
        if at.any():
            ax.plot(eps[at], mean[at], linestyle="none", marker=marker, markersize=size, markerfacecolor=colour,
                    markeredgecolor="black", markeredgewidth=0.6, zorder=5)
            key_entry(ax, meaning, marker=marker, markersize=size * 0.8, markerfacecolor="white",
                      markeredgecolor="black", markeredgewidth=0.6)
            found = True
    return found


def epsilon_ticks(ax, grid: np.ndarray, xlim: tuple[float, float]) -> None:
    """Ticks at the grid's epsilons (labelled, so every swept value reads off the axis) and at every
    decade in range; with more than 10 values, decades and labelled minor ticks instead."""
    grid = sorted(set(float(v) for v in grid))
    decades = [10.0 ** k for k in range(-6, 6) if xlim[0] <= 10.0 ** k <= xlim[1]]
    # a decade as close as 1.5x to a grid value would print over it (0.08 and 0.1)
    values = sorted(set(grid) | {d for d in decades if all(abs(np.log(d / g)) > np.log(1.5) for g in grid)})
    if len(values) > 10:
        ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.LogFormatterSciNotation(labelOnlyBase=False,
                                                                              minor_thresholds=(2, 0.5)))
        return
    ax.set_xticks(values, [f"{v:g}" for v in values], fontsize=7.5)
    ax.xaxis.set_minor_locator(matplotlib.ticker.LogLocator(base=10, subs=np.arange(2, 10) * 0.1))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
