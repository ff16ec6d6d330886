"""Figure kinds `metric_over_n` and `metric_over_d`: a metric over the training size n or the
dimension d of a data set swept over it, on log-log axes, one panel per (swept data set, model).

One line per (algorithm, epsilon): colour by algorithm (one legend entry each), marker by epsilon
(in the style key), each with its 95% band; the non-private algorithms dashed. A panel's y range
spans every curve (dpbench.figures.ranges is not applied: over n or d the curves' slopes across
decades are what the figure shows). Wang, Xiao, Devadas, Xu 2020 Figs. 3-4 are drawn this way
(docs/papers/heavytailed.md), and the DP-SCO rate of output perturbation over n (Di Wang, CS 325
lecture 17, §17.2; docs/papers/dpsco.md) with option `reference: dpsco_rate`.
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
from dpbench.figures.references import ReferenceCurveOption, ReferenceOption, draw_radius, draw_rate
from dpbench.figures.style import (LOG_METRICS, axis_label, claim_line, claim_meaning, colours_for, label_order,
                                   legend_name, nonprivate_styles)

EPSILON_MARKERS = "osD^vP*X"  # one per epsilon of the grid, in increasing order


@figure_kind("metric_over_n", needs="n",
             description="metric over the training size n (log-log), a data set swept over n",
             view=View(x="n_train", x_title="training set size n", panels=("dataset_panel", "model_label"),
                       lines=("epsilon",)))
def metric_over_n(curves: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                  algorithm_order: list[str] | None = None, *, reference: ReferenceOption = None,
                  reference_curve: ReferenceCurveOption = None) -> list[Path]:
    """One panel per (swept dataset, model): metric over the training size n on log-log axes.

    One line per (algorithm, epsilon) — colour by algorithm, marker by epsilon — with its 95%
    interval band; non-private algorithms are dashed. `reference: dpsco_rate` adds, per epsilon,
    the rate a d log(1/delta)/(n^2 eps^2) + b/n of output perturbation (Di Wang, CS 325 lecture
    17, §17.2) in grey, a and b fitted separately to output perturbation's curves (curves.fit_rate):
    the rate's *shape* is the claim, its constants are not given; other rates of curves.RATES
    likewise with one constant.
    """
    return _metric_over_size(curves, metric, stem, "n_train", "training set size n", title, algorithm_order,
                             reference, reference_curve)


@figure_kind("metric_over_d", needs="d", description="metric over the dimension d (log-log), a data set swept over d",
             view=View(x="n_features", x_title="dimension d", panels=("dataset_panel", "model_label"),
                       lines=("epsilon",)))
def metric_over_d(curves: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                  algorithm_order: list[str] | None = None, *, reference: ReferenceOption = None,
                  reference_curve: ReferenceCurveOption = None) -> list[Path]:
    """As `metric_over_n`, over the number of features d of a dataset swept over `d` (Wang, Xiao,
    Devadas, Xu 2020, Fig. 3)."""
    return _metric_over_size(curves, metric, stem, "n_features", "dimension d", title, algorithm_order, reference,
                             reference_curve)


def _metric_over_size(curves: pd.DataFrame, metric: str, stem: str | Path, x: str, x_label: str, title: str,
                      algorithm_order: list[str] | None, reference: str | None,
                      reference_curve: str | None) -> list[Path]:
    """Both kinds over the size column `x` (n_train or n_features): ticks at the swept values, a
    log y axis for every metric (a linear metric's floor is an optimality gap's)."""
    part = curves[curves["metric"] == metric]
    if part.empty:
        return []
    combos = list(dict.fromkeys(zip(part["dataset_panel"], part["model_label"])))  # panels that have data
    labels = label_order(part, algorithm_order)
    colours = colours_for(labels)
    names = {label: legend_name(part[part["label"] == label], label) for label in labels}
    nonprivate = nonprivate_styles(part, labels)
    eps_values = sorted(part["epsilon"].dropna().unique())
    markers = dict(zip(eps_values, EPSILON_MARKERS))
    width = max(4.8 * len(combos), 7.5)
    fig, axes = plt.subplots(1, len(combos), figsize=(width, 4.2), squeeze=False)
    for c, (panel_name, model) in enumerate(combos):
        ax = axes[0][c]
        panel = part[(part["dataset_panel"] == panel_name) & (part["model_label"] == model)]
        floor = log_floor(panel, metric) if metric in LOG_METRICS else log_floor(panel, "optimality_gap")
        for label in labels:
            for eps, line in panel[panel["label"] == label].groupby("epsilon", dropna=False, sort=True):
                line = line.sort_values(x)
                xs = line[x].to_numpy(dtype=float)
                raw = line["mean"].to_numpy(dtype=float)
                mean, lo, hi = drawn(*band(line, metric, floor))
                if not pd.isna(eps):
                    style, _ = claim_line(line, markers.get(eps, "o"), colours[label])
                    style = {"linewidth": 1.5, **style}
                    key_style(ax, claim_meaning(line))
                    key_entry(ax, f"ε = {eps:g}", marker=markers.get(eps, "o"), markersize=4.5,
                              markerfacecolor="white")
                else:
                    style = nonprivate[label]
                    key_style(ax, "non-private")
                ax.plot(xs, mean, color=colours[label], markersize=4, label=names[label], **style)
                ax.fill_between(xs, lo, hi, color=colours[label], alpha=0.15, linewidth=0)
                zero_mark(ax, colours[label], raw, xs[raw <= 0])
        if reference:
            draw_rate(ax, panel, reference, reference_curve, x, markers, metric)
        draw_radius(ax, panel, metric, float(panel["mean"].max()))
        ax.set_xscale("log")
        ax.set_yscale("log")
        sizes = np.sort(panel[x].dropna().unique())
        ax.set_xticks(sizes, [f"{v:,.0f}" for v in sizes], fontsize=8)  # the swept values, not decades
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(f"{panel_name} · {model}", fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
        ax.set_xlabel(x_label)
        if c == 0:
            ax.set_ylabel(axis_label(metric))
    return finish(fig, axes, width, title, stem, extra=seeds_note(part), order=[names[lab] for lab in labels],
                  log=True)
