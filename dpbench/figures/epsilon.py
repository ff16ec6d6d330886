"""Figure kind `metric_over_epsilon`: a metric over the privacy budget epsilon (log x), one panel
per (data set, model), the non-private algorithms as dashed horizontal lines.

A private curve's points sit at the end-to-end epsilon of private selection (tuning and training)
where the curves table has one, else at the per-run target (`x_epsilon`); stars and crosses mark
the points where a claim of claims.csv holds or fails with significance (`CLAIM_MARK_NOTE`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd

from dpbench.figures.bands import band, floor_markers, log_floor
from dpbench.figures.frame import finish, seeds_note
from dpbench.figures.kinds import View, figure_kind
from dpbench.figures.references import BaselineOption, ReferenceCurveOption, ReferenceOption, draw_majority, draw_rate
from dpbench.figures.style import LOG_METRICS, axis_label, claim_line, colours_for, label_order, nonprivate_styles

CLAIM_MARK_NOTE = ("★: a claim of claims.csv holds at this ε with significance (paired over seeds, Bonferroni over "
                   "the claims and their points); ✕: it fails there significantly")


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
    horizontal lines with their band. `reference`: a rate fitted per panel (references.draw_rate);
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
    nonprivate = nonprivate_styles(part, labels)
    width = max(4.2 * len(datasets), 7.5)
    fig, axes = plt.subplots(len(models), len(datasets), figsize=(width, 3.3 * len(models)),
                             squeeze=False, sharex=True)
    eps_all = x_epsilon(part[part["epsilon"].notna()])
    xlim = (eps_all.min() / 1.3, eps_all.max() * 1.3) if eps_all.size else (0.01, 10)
    notes = []
    marked = False
    for r, model in enumerate(models):
        for c, dataset in enumerate(datasets):
            ax = axes[r][c]
            panel = part[(part["dataset_label"] == dataset) & (part["model_label"] == model)]
            floor = log_floor(panel, metric)
            for label in labels:
                line = panel[panel["label"] == label]
                line = line.iloc[np.argsort(x_epsilon(line), kind="stable")]
                if line.empty:
                    continue
                mean, lo, hi, low_mask = band(line, metric, floor)
                colour = colours[label]
                if line["epsilon"].isna().all():
                    style = nonprivate[label]
                    ax.plot(xlim, [mean[0]] * 2, color=colour, label=label, **style)
                    ax.axhspan(lo[0], hi[0], color=colour, alpha=0.12, linewidth=0)
                    if low_mask[0]:
                        floor_markers(ax, np.geomspace(*xlim, 7)[1:-1], np.full(5, mean[0]), colour)
                else:
                    eps = x_epsilon(line)
                    kwargs, name = claim_line(line, "o", colour)
                    ax.plot(eps, mean, markersize=3.5, color=colour, linewidth=1.5, label=name, **kwargs)
                    ax.fill_between(eps, lo, hi, color=colour, alpha=0.18, linewidth=0)
                    floor_markers(ax, eps[low_mask], mean[low_mask], colour)
                    marked |= _claim_marks(ax, line, eps, mean, colour)
            if reference:
                draw_rate(ax, panel, reference, reference_curve, "epsilon", None, metric)
            if baseline == "majority" and metric == "accuracy":
                if not draw_majority(ax, panel):
                    notes.append(f"{dataset}")
            ax.set_xscale("log")
            ax.set_xlim(*xlim)
            epsilon_ticks(ax, part["epsilon"].dropna().unique(), xlim)
            if metric in LOG_METRICS:
                ax.set_yscale("log")
            ax.set_title(f"{dataset} · {model}", fontsize=10)
            ax.grid(True, which="both", alpha=0.25)
            if r == len(models) - 1:
                ax.set_xlabel("privacy budget ε")
            if c == 0:
                ax.set_ylabel(axis_label(metric))
    extra = ""
    if baseline == "majority" and metric == "accuracy":
        extra = "dashed grey: accuracy of always predicting the test split's majority class (mean over seeds)"
        if notes:
            extra += f" — not drawn for {', '.join(dict.fromkeys(notes))} (data not available when drawn)"
    if marked:
        extra = (extra + " · " if extra else "") + CLAIM_MARK_NOTE
    seeds = seeds_note(part)
    if seeds:
        extra = (extra + " · " if extra else "") + seeds
    return finish(fig, axes, width, title, stem, extra=extra, order=labels, log=metric in LOG_METRICS)


def _claim_marks(ax, line: pd.DataFrame, eps: np.ndarray, mean: np.ndarray, colour) -> bool:
    """Stars (claim holds) and crosses (claim fails) on the points of `line` that a per-point claim
    marks (column claim_mark, "+id" / "-id" joined by ", ", dpbench.experiment.verdicts.with_marks);
    True when any was drawn."""
    if "claim_mark" not in line:
        return False
    marks = line["claim_mark"].fillna("").astype(str).to_numpy()
    drawn = False
    for sign, marker, size in (("+", "*", 11), ("-", "X", 8)):
        at = np.array([any(m.strip().startswith(sign) for m in text.split(",")) if text else False for text in marks])
        if at.any():
            ax.plot(eps[at], mean[at], linestyle="none", marker=marker, markersize=size, markerfacecolor=colour,
                    markeredgecolor="black", markeredgewidth=0.6, zorder=5)
            drawn = True
    return drawn


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
