"""Figure kind `metric_over_iterations`: a metric over the iterations of the selected fits (the
algorithms run with `trace_every`), one row of panels per (data set, model), one column per epsilon,
as Wang, Xiao, Devadas, Xu 2020 Figs. 1-2 draw Algorithms 3 and 4 against robust GD
(docs/papers/heavytailed.md).

It reads the trace-curves table (dpbench.analysis.curves.trace_curves), not curves.csv.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpbench.figures.bands import band, drawn, log_floor, zero_mark
from dpbench.figures.frame import finish, key_style
from dpbench.figures.kinds import View, figure_kind
from dpbench.figures.ranges import fit_range
from dpbench.figures.references import draw_radius
from dpbench.figures.style import (LOG_METRICS, axis_label, claim_line, claim_meaning, colours_for, label_order,
                                   legend_name, nonprivate_styles)


@figure_kind("metric_over_iterations", table="traces", needs="trace",
             description="metric over iterations of the selected fits (algorithms with trace_every), "
                         "one row per dataset x model, one column per epsilon",
             view=View(x="step", x_title="iteration", panels=("dataset_label", "model_label", "epsilon"),
                       x_log=False))
def metric_over_iterations(traces: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                           algorithm_order: list[str] | None = None) -> list[Path]:
    """Metric over iterations, one panel per (dataset, model) row x epsilon column.

    Reads a trace-curves table (curves.trace_curves). Every private algorithm is drawn in the
    panel of its epsilon, non-private ones (dashed, each with its own marker) in every column, each
    with its 95% interval band over seeds. Log y for loss/error metrics; the projection radius
    where an estimation error reaches it (references.draw_radius).
    """
    part = traces[traces["metric"] == metric]
    if part.empty:
        return []
    rows = list(dict.fromkeys(zip(part["dataset_label"], part["model_label"])))
    eps_values = sorted(part["epsilon"].dropna().unique()) or [np.nan]
    labels = label_order(part, algorithm_order)
    colours = colours_for(labels)
    names = {label: legend_name(part[part["label"] == label], label) for label in labels}
    nonprivate = nonprivate_styles(part, labels)
    width = max(4.2 * len(eps_values), 7.5)
    fig, axes = plt.subplots(len(rows), len(eps_values), figsize=(width, 3.3 * len(rows)), squeeze=False)
    for r, (dataset, model) in enumerate(rows):
        panel = part[(part["dataset_label"] == dataset) & (part["model_label"] == model)]
        floor = log_floor(panel, metric)
        for c, eps in enumerate(eps_values):
            ax = axes[r][c]
            shown, curves = [], {}
            for label in labels:
                mine = panel[panel["label"] == label]
                private = mine["epsilon"].notna().any()
                line = mine[mine["epsilon"] == eps] if private else mine
                if line.empty:
                    continue
                line = line.sort_values("step")
                shown.append(line)
                steps = line["step"].to_numpy(dtype=float)
                raw = line["mean"].to_numpy(dtype=float)
                mean, lo, hi = drawn(*band(line, metric, floor))
                if private:
                    style, _ = claim_line(line, None, colours[label])
                    style = {"linewidth": 1.5, "markersize": 3.5, **style}
                    key_style(ax, claim_meaning(line))
                else:
                    style = nonprivate[label]
                    key_style(ax, "non-private")
                ax.plot(steps, mean, color=colours[label], label=names[label], **style)
                ax.fill_between(steps, lo, hi, color=colours[label], alpha=0.15, linewidth=0)
                if floor is not None:
                    zero_mark(ax, colours[label], raw, steps[raw <= 0])
                curves[label] = [(steps, mean, lo, hi)]
            if shown:
                rows = pd.concat(shown)
                draw_radius(ax, rows, metric, float(rows["mean"].max()))
            if metric in LOG_METRICS:
                ax.set_yscale("log")
            fit_range(ax, curves, colours, metric in LOG_METRICS)
            ax.set_title(f"{dataset} · {model}" + ("" if pd.isna(eps) else f" · ε = {eps:g}"), fontsize=10)
            ax.grid(True, which="both", alpha=0.25)
            if r == len(rows) - 1:
                ax.set_xlabel("iteration")
            if c == 0:
                ax.set_ylabel(axis_label(metric))
    return finish(fig, axes, width, title, stem, order=[names[lab] for lab in labels], log=metric in LOG_METRICS)
