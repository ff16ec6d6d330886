"""Figures from curves tables only (never from models or data), one function per figure kind."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path
from typing import Annotated

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpbench.curves import fitted_dpsco_rate  # noqa: E402
from dpbench.figures import figure_kind  # noqa: E402
from dpbench.metrics import BOUNDS, METRICS  # noqa: E402
from dpbench.registry import Param  # noqa: E402
from dpbench.store import atomic_write_bytes_via  # noqa: E402

LOG_METRICS = {"optimality_gap", "estimation_error", "test_loss", "excess_population_risk"}
# line style of a private algorithm's curve by what its guarantee covers (curves' `dp_claim`,
# curves.curve_claim): (line style, marker filled?)
CLAIM_STYLES = {"valid": ("-", True), "selected": ("-", False), "paper-only": ("-.", False), "none": (":", False)}
BAND_NOTE = ("bands: ±1 std over seeds, kept inside the metric's range; on a log axis a value at or below 0 "
             "(e.g. a non-private gap) is drawn at the panel's floor")
CLAIM_NOTE = ("solid, filled markers: valid DP guarantee for the curve as drawn (one hyperparameter setting, or "
              "private selection drawn at its end-to-end ε) · solid, open markers: valid per run only: the "
              "hyperparameters were selected without an ε that covers the selection, or δ ≥ 1/n · "
              "dash-dot: ε claimed by the paper only (proof unsound) · dotted: no valid DP claim for this model · "
              "dashed: non-private · " + BAND_NOTE)
REFERENCE_LINES = ("dpsco_rate",)  # reference rates a metric_over_n figure can draw (curves.dpsco_rate)
GAP_FLOOR = 1e-6  # log axes never go below this noise floor of L*, whatever the data (ALGORITHMS.md §0.2 rule 4)


def _colours(labels: list[str]) -> dict[str, tuple]:
    cmap = plt.get_cmap("tab10")
    return {label: cmap(i % 10) for i, label in enumerate(labels)}


@figure_kind("metric_over_epsilon", description="metric over epsilon (log x), one panel per dataset x model, "
                                                "non-private algorithms as dashed lines")
def metric_over_epsilon(curves: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                        algorithm_order: list[str] | None = None) -> list[Path]:
    """One panel per (dataset, model): metric mean over log-scaled epsilon with a ±1 std band (`_band`).

    Private algorithms are lines over epsilon; non-private ones (epsilon empty) are dashed
    horizontal lines with their band. Writes <stem>.png and <stem>.pdf; returns their paths.
    """
    part = curves[curves["metric"] == metric]
    if part.empty:
        return []
    datasets = list(dict.fromkeys(part["dataset_label"]))
    models = list(dict.fromkeys(part["model_label"]))
    labels = algorithm_order or list(dict.fromkeys(part["label"]))
    labels = list(dict.fromkeys(lab for lab in labels if lab in set(part["label"])))  # drawn ones, once each
    colours = _colours(labels)
    width = max(4.2 * len(datasets), 7.5)
    fig, axes = plt.subplots(len(models), len(datasets), figsize=(width, 3.3 * len(models)),
                             squeeze=False, sharex=True)
    eps_all = _x_epsilon(part[part["epsilon"].notna()])
    xlim = (eps_all.min() / 1.3, eps_all.max() * 1.3) if eps_all.size else (0.01, 10)
    for r, model in enumerate(models):
        for c, dataset in enumerate(datasets):
            ax = axes[r][c]
            panel = part[(part["dataset_label"] == dataset) & (part["model_label"] == model)]
            floor = _log_floor(panel, metric)
            for label in labels:
                line = panel[panel["label"] == label]
                line = line.iloc[np.argsort(_x_epsilon(line), kind="stable")]
                if line.empty:
                    continue
                mean, lo, hi = _band(line, metric, floor)
                colour = colours[label]
                if line["epsilon"].isna().all():
                    ax.axhline(mean[0], color=colour, linestyle="--", linewidth=1.5, label=label)
                    ax.axhspan(lo[0], hi[0], color=colour, alpha=0.12, linewidth=0)
                else:
                    eps = _x_epsilon(line)
                    ax.plot(eps, mean, markersize=3.5, color=colour, linewidth=1.5, label=label,
                            **_claim_kwargs(line, "o", colour))
                    ax.fill_between(eps, lo, hi, color=colour, alpha=0.18, linewidth=0)
            ax.set_xscale("log")
            ax.set_xlim(*xlim)
            if metric in LOG_METRICS:
                ax.set_yscale("log")
            ax.set_title(f"{dataset} · {model}", fontsize=10)
            ax.grid(True, which="both", alpha=0.25)
            if r == len(models) - 1:
                ax.set_xlabel("privacy budget ε")
            if c == 0:
                ax.set_ylabel(METRICS.get(metric, (metric,))[0] if metric != "optimality_gap"
                              else "optimality gap L(θ) − L*")
    return _finish(fig, axes, width, title, stem)


def _log_floor(panel: pd.DataFrame, metric: str) -> float | None:
    """The lowest value a log-axis panel draws: half its smallest positive mean (at least
    GAP_FLOOR), so a value at or below 0 (a non-private optimality gap) sits at the bottom of the
    data instead of stretching the axis over empty decades. None for a linear axis."""
    if metric not in LOG_METRICS:
        return None
    positive = panel["mean"][panel["mean"] > 0]
    return max(GAP_FLOOR, float(positive.min()) / 2) if not positive.empty else GAP_FLOOR


def _band(line: pd.DataFrame, metric: str, floor: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lower, upper) of a curve's ±1 std band over seeds, inside the metric's range
    (metrics.BOUNDS: accuracy in [0, 1]). On a log axis (`floor` given) everything is at least
    `floor` and the lower edge at least a tenth of the mean, so a spread as wide as the mean does
    not stretch the axis over decades."""
    mean, std = line["mean"].to_numpy(dtype=float), np.nan_to_num(line["std"].to_numpy(dtype=float))
    low, high = BOUNDS.get(metric, (-np.inf, np.inf))
    lo, hi = np.clip(mean - std, low, high), np.clip(mean + std, low, high)
    if floor is not None:
        mean = np.maximum(mean, floor)
        lo, hi = np.maximum(lo, np.maximum(mean / 10, floor)), np.maximum(hi, floor)
    return mean, lo, hi


def _finish(fig, axes, width: float, title: str, stem: str | Path, note: str = CLAIM_NOTE) -> list[Path]:
    """Shared legend, claim-style footer and title below/above the panels; save png and pdf."""
    handles, names = [], []
    for ax in axes.flat:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    # legend and footer below the panels, with the room they need at this width
    label_in = 0.6 + 0.075 * max((len(n) for n in names), default=10)  # handle + text at fontsize 10
    ncol = max(1, min(len(names), int(width // max(2.4, label_in))))
    legend_rows = -(-len(names) // ncol)
    footer = textwrap.fill(note, width=int(width * 15))
    bottom_in = 0.25 * footer.count("\n") + 0.3 + 0.28 * legend_rows + 0.15
    height = fig.get_figheight() + bottom_in
    fig.set_figheight(height)
    fig.text(0.5, 0.01, footer, ha="center", va="bottom", fontsize=7, color="0.35")
    fig.legend(handles, names, loc="lower center", ncol=ncol, frameon=False,
               bbox_to_anchor=(0.5, (0.25 * footer.count("\n") + 0.3) / height))
    if title:
        title = textwrap.fill(title, width=int(width * 11))
        fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, bottom_in / height, 1, 1 - 0.35 * (title.count("\n") + 1) / height if title else 1))
    stem = Path(stem)
    paths = []
    for suffix in (".png", ".pdf"):
        path = stem.with_suffix(suffix)
        # no creation date in the PDF: the same curves give the same bytes (no churn on re-render)
        meta = {"CreationDate": None} if suffix == ".pdf" else {}
        atomic_write_bytes_via(path, lambda tmp, s=suffix, m=meta: fig.savefig(tmp, dpi=130, format=s[1:], metadata=m))
        paths.append(path)
    plt.close(fig)
    return paths


def _x_epsilon(line: pd.DataFrame) -> np.ndarray:
    """Where a private curve's points sit on the epsilon axis: the end-to-end epsilon of private
    selection (tuning + training) where the curves table has one, else the per-run target."""
    eps = line["epsilon"].to_numpy(dtype=float)
    if "eps_end_to_end" in line:
        total = line["eps_end_to_end"].to_numpy(dtype=float)
        eps = np.where(np.isfinite(total), total, eps)
    return eps


def _claim_kwargs(line: pd.DataFrame, marker: str | None, colour) -> dict:
    """Line style and markers of a private curve by `claim_kind`: markers are filled only for a
    guarantee that covers the curve as drawn; a curve without markers of its own (over
    iterations) gets sparse open ones when its selection is not private, so it still differs
    from a valid one."""
    style, filled = CLAIM_STYLES[claim_kind(line)]
    if marker is None:
        return {"linestyle": style} if filled or style != "-" else \
            {"linestyle": style, "marker": "o", "markevery": 0.1, "markerfacecolor": "white"}
    return {"linestyle": style, "marker": marker, "markerfacecolor": colour if filled else "white"}


def claim_kind(line: pd.DataFrame) -> str:
    """The CLAIM_STYLES key of a curve from its `dp_claim` strings (curves.curve_claim): the weakest
    claim of its points wins; "selected" is valid per run only (selection not private, private
    selection not accounted, or a weak delta)."""
    claims = set(line.get("dp_claim", pd.Series(["valid"])).fillna(""))
    parts = set("/".join(c.split(" ")[0] for c in claims).split("/")) - {""}
    if "none" in parts:
        return "none"
    if "paper-only" in parts:
        return "paper-only"
    if any("per run" in c or "weak delta" in c for c in claims):
        return "selected"
    return "valid"


@figure_kind("metric_over_n", needs="n",
             description="metric over the training size n (log-log), a data set swept over n")
def metric_over_n(curves: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                  algorithm_order: list[str] | None = None, *,
                  reference: Annotated[str | None, Param("a reference rate drawn per epsilon, its constant fitted",
                                                         choices=REFERENCE_LINES,
                                                         paper="paper 002 §17.2")] = None) -> list[Path]:
    """One panel per (swept dataset, model): metric over the training size n on log-log axes.

    One line per (algorithm, epsilon) — colour by algorithm, marker by epsilon — with a ±1 std
    band; non-private algorithms are dashed. `reference: dpsco_rate` adds, per epsilon, the
    notes' rate c (d log(1/delta)/(n^2 eps^2) + 1/n) in grey, with the one free constant c fitted
    (least squares in log space) to the private curves of that epsilon: the rate's *shape* is the
    claim, its constant is not given.
    """
    return _metric_over_size(curves, metric, stem, "n_train", "training set size n", title, algorithm_order,
                             reference)


@figure_kind("metric_over_d", needs="d", description="metric over the dimension d (log-log), a data set swept over d")
def metric_over_d(curves: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                  algorithm_order: list[str] | None = None) -> list[Path]:
    """As `metric_over_n`, over the number of features d of a dataset swept over `d` (paper 004 Fig. 3)."""
    return _metric_over_size(curves, metric, stem, "n_features", "dimension d", title, algorithm_order, None)


def _metric_over_size(curves: pd.DataFrame, metric: str, stem: str | Path, x: str, x_label: str, title: str,
                      algorithm_order: list[str] | None, reference: str | None) -> list[Path]:
    part = curves[curves["metric"] == metric]
    if part.empty:
        return []
    combos = list(dict.fromkeys(zip(part["dataset_panel"], part["model_label"])))  # panels that have data
    labels = algorithm_order or list(dict.fromkeys(part["label"]))
    labels = list(dict.fromkeys(lab for lab in labels if lab in set(part["label"])))
    colours = _colours(labels)
    eps_values = sorted(part["epsilon"].dropna().unique())
    markers = dict(zip(eps_values, "osD^vP*X"))
    width = max(4.8 * len(combos), 7.5)
    fig, axes = plt.subplots(1, len(combos), figsize=(width, 3.8), squeeze=False)
    for c, (panel_name, model) in enumerate(combos):
        ax = axes[0][c]
        panel = part[(part["dataset_panel"] == panel_name) & (part["model_label"] == model)]
        floor = max(GAP_FLOOR, _log_floor(panel, metric) or 0.0)  # log-log axes for every metric
        for label in labels:
            for eps, line in panel[panel["label"] == label].groupby("epsilon", dropna=False, sort=True):
                line = line.sort_values(x)
                xs = line[x].to_numpy(dtype=float)
                mean, lo, hi = _band(line, metric, floor)
                private = not pd.isna(eps)
                style = _claim_kwargs(line, markers.get(eps, "o"), colours[label]) if private else {"linestyle": "--"}
                ax.plot(xs, mean, color=colours[label], linewidth=1.5, markersize=4,
                        label=f"{label}, ε = {eps:g}" if private else label, **style)
                ax.fill_between(xs, lo, hi, color=colours[label], alpha=0.15, linewidth=0)
        if reference == "dpsco_rate":
            _draw_dpsco_rate(ax, panel, eps_values, markers)
        ax.set_xscale("log")
        ax.set_yscale("log")
        sizes = np.sort(panel[x].dropna().unique())
        ax.set_xticks(sizes, [f"{v:,.0f}" for v in sizes], fontsize=8)  # the swept values, not decades
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(f"{panel_name} · {model}", fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
        ax.set_xlabel(x_label)
        if c == 0:
            ax.set_ylabel(METRICS.get(metric, (metric,))[0])
    return _finish(fig, axes, width, title, stem)


def _draw_dpsco_rate(ax, panel: pd.DataFrame, eps_values: list[float], markers: dict) -> None:
    """Per epsilon, the rate fitted to that epsilon's curves (curves.fitted_dpsco_rate) in grey."""
    for eps in eps_values:
        line = fitted_dpsco_rate(panel, eps)
        if line is None:
            continue
        n, rate = line
        ax.plot(n, rate, color="0.5", linewidth=1.2,
                linestyle=(0, (6, 2, 1, 2, 1, 2)), marker=markers.get(eps, "o"), markersize=3,
                markerfacecolor="none", label=f"rate c(d log(1/δ)/(n²ε²) + 1/n), ε = {eps:g}")


@figure_kind("metric_over_iterations", table="traces", needs="trace",
             description="metric over iterations of the selected fits (algorithms with trace_every), "
                         "one row per dataset x model, one column per epsilon")
def metric_over_iterations(traces: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                           algorithm_order: list[str] | None = None) -> list[Path]:
    """Paper 004 Figs. 1-2: metric over iterations, one panel per (dataset, model) row x epsilon column.

    Reads a trace-curves table (curves.trace_curves). Every private algorithm is drawn in the
    panel of its epsilon, non-private ones (dashed) in every column, each with a ±1 std band
    over seeds. Log y for loss/error metrics.
    """
    part = traces[traces["metric"] == metric]
    if part.empty:
        return []
    rows = list(dict.fromkeys(zip(part["dataset_label"], part["model_label"])))
    eps_values = sorted(part["epsilon"].dropna().unique()) or [np.nan]
    labels = algorithm_order or list(dict.fromkeys(part["label"]))
    labels = list(dict.fromkeys(lab for lab in labels if lab in set(part["label"])))
    colours = _colours(labels)
    width = max(4.2 * len(eps_values), 7.5)
    fig, axes = plt.subplots(len(rows), len(eps_values), figsize=(width, 3.3 * len(rows)), squeeze=False)
    for r, (dataset, model) in enumerate(rows):
        panel = part[(part["dataset_label"] == dataset) & (part["model_label"] == model)]
        floor = _log_floor(panel, metric)
        for c, eps in enumerate(eps_values):
            ax = axes[r][c]
            for label in labels:
                mine = panel[panel["label"] == label]
                private = mine["epsilon"].notna().any()
                line = mine[mine["epsilon"] == eps] if private else mine
                if line.empty:
                    continue
                line = line.sort_values("step")
                steps = line["step"].to_numpy(dtype=float)
                mean, lo, hi = _band(line, metric, floor)
                style = _claim_kwargs(line, None, colours[label]) if private else {"linestyle": "--"}
                ax.plot(steps, mean, color=colours[label], linewidth=1.5, label=label, markersize=3.5, **style)
                ax.fill_between(steps, lo, hi, color=colours[label], alpha=0.15, linewidth=0)
            if metric in LOG_METRICS:
                ax.set_yscale("log")
            ax.set_title(f"{dataset} · {model}" + ("" if pd.isna(eps) else f" · ε = {eps:g}"), fontsize=10)
            ax.grid(True, which="both", alpha=0.25)
            if r == len(rows) - 1:
                ax.set_xlabel("iteration")
            if c == 0:
                ax.set_ylabel(METRICS.get(metric, (metric,))[0])
    return _finish(fig, axes, width, title, stem)


def _audit_rows(audits: pd.DataFrame) -> pd.DataFrame:
    """The audits table with the columns every audit row has (older tables: multi-run, final model)."""
    data = audits.dropna(subset=["claimed_epsilon"]).copy()
    for column, default in (("method", "multi-run"), ("threat", "final_model")):
        data[column] = data[column].fillna(default) if column in data else default
    for column in ("epsilon_estimate", "epsilon_estimate_low", "epsilon_estimate_high"):
        if column not in data:
            data[column] = np.nan
    return data


AUDIT_RATIO_MAX = 2.0  # the right panel's x range: a ratio beyond it is drawn at the edge as ">"
THREAT_SHORT = {"final_model": "final model", "all_updates": "all updates"}


def _audit_row_label(part: pd.DataFrame) -> str:
    """A row of the ratio panel: the label, what the adversary sees and how many trainings."""
    multi = part[part["method"] == "multi-run"]
    threat = THREAT_SHORT.get(str(part["threat"].iloc[0]), str(part["threat"].iloc[0]))
    trials = f"{int(multi['trials'].max()):,}/side" if not multi.empty else "one run"
    return f"{part['label'].iloc[0]}  [{threat}, {trials}]"


def audit_figure(audits: pd.DataFrame, stem: str | Path, title: str = "") -> list[Path]:
    """Audited against claimed epsilon (left) and audited / claimed per audit (right).

    Left: claimed epsilon (x) against the rigorous lower bounds (y): multi-run (circles) and one-run
    (crosses), blue when the claim is a valid guarantee, red when it is the paper's only (or none);
    the diagonal y = x (a bound above it refutes the claim at the audits' confidence) and the
    multi-run ceiling. Right: one row per audit label (its threat model and trials a side), the
    same bounds divided by the claimed epsilon, coloured by the claimed epsilon, with the estimate
    (GDP or measured mechanism; not a bound) as a tick with its interval: how much of the claim
    an adversary demonstrates (bound) or appears to have (estimate). Ratios beyond
    AUDIT_RATIO_MAX are drawn at the edge as ">".
    """
    data = _audit_rows(audits)
    if data.empty:
        return []
    labels = list(dict.fromkeys(data["label"]))
    eps_values = sorted(data["claimed_epsilon"].unique())
    eps_colour = dict(zip(eps_values, plt.get_cmap("viridis")(np.linspace(0.0, 0.85, len(eps_values)))))
    width = 15.0
    fig, axes = plt.subplots(1, 2, figsize=(width, max(5.5, 0.3 * len(labels) + 1.0)), squeeze=False,
                             gridspec_kw={"width_ratios": (1.0, 1.3)})
    left, right = axes[0]
    left.set_box_aspect(1)
    multi = data[data["method"] == "multi-run"]
    ceiling = float(multi["ceiling"].max()) if not multi.empty else float(data["ceiling"].max())
    top = max(float(data["claimed_epsilon"].max()), ceiling) * 1.08
    left.plot([0, top], [0, top], color="0.3", linewidth=1, label="audited = claimed ε (a bound above it: refuted)")
    if not multi.empty:
        left.axhline(ceiling, color="0.6", linestyle="--", linewidth=1,
                     label=f"multi-run ceiling ({int(multi['trials'].max()):,} trials a side)")
    jitter = 0.25 / max(len(labels), 1)
    for i, label in enumerate(labels):
        part = data[data["label"] == label]
        x = part["claimed_epsilon"] + (i - (len(labels) - 1) / 2) * jitter
        valid = part["claim"] == "valid"
        for method, marker in (("multi-run", "o"), ("one-run", "x")):
            for mask, colour in ((valid, "tab:blue"), (~valid, "tab:red")):
                pick = mask & (part["method"] == method)
                if pick.any():
                    left.plot(x[pick], part.loc[pick, "epsilon_lower_bound"], linestyle="none", marker=marker,
                              markersize=5 if marker == "x" else 6, color=colour, alpha=0.8,
                              markerfacecolor=colour if marker == "o" else None)
    for name, colour, marker in (("valid claim: multi-run bound (o), one-run bound (x)", "tab:blue", "o"),
                                 ("paper-only / no claim: multi-run bound (o), one-run bound (x)", "tab:red", "o")):
        left.plot([], [], linestyle="none", marker=marker, color=colour, label=name)
    left.set_xlim(0, top)
    left.set_ylim(0, top)
    left.set_xlabel("claimed ε")
    left.set_ylabel("audited lower bound on ε (95%)")
    right.axvline(1.0, color="0.3", linewidth=1)
    k = len(eps_values)
    for i, label in enumerate(labels):
        part = data[data["label"] == label]
        for j, eps in enumerate(eps_values):
            y = i + (j - (k - 1) / 2) * (0.7 / max(k, 1))
            colour = eps_colour[eps]
            for _, row in part[part["claimed_epsilon"] == eps].iterrows():
                ratio = float(row["epsilon_lower_bound"]) / eps
                beyond = ratio > AUDIT_RATIO_MAX
                if row["method"] == "one-run":
                    right.plot(min(ratio, AUDIT_RATIO_MAX), y, marker=">" if beyond else "x", markersize=5,
                               color=colour, linestyle="none")
                    continue
                face = colour if row["claim"] == "valid" else "none"
                right.plot(min(ratio, AUDIT_RATIO_MAX), y, marker=">" if beyond else "o", markersize=5.5,
                           color=colour, markerfacecolor=face, linestyle="none")
                est = float(row["epsilon_estimate"])
                if np.isfinite(est):
                    lo = float(row["epsilon_estimate_low"]) / eps
                    hi = float(row["epsilon_estimate_high"]) / eps
                    right.plot([min(lo, AUDIT_RATIO_MAX), min(hi if np.isfinite(hi) else np.inf, AUDIT_RATIO_MAX)],
                               [y, y], color=colour, linewidth=0.8, alpha=0.45)
                    right.plot(min(est / eps, AUDIT_RATIO_MAX), y, marker="|", markersize=8, color=colour,
                               linestyle="none")
    right.set_yticks(range(len(labels)))
    right.set_yticklabels([_audit_row_label(data[data["label"] == label]) for label in labels], fontsize=7.5)
    right.set_ylim(len(labels) - 0.5, -0.5)
    right.set_xlim(0, AUDIT_RATIO_MAX * 1.03)
    right.set_xlabel("audited / claimed ε")
    for eps in eps_values:
        right.plot([], [], linestyle="none", marker="s", color=eps_colour[eps], label=f"claimed ε = {eps:g}")
    for name, style in (("multi-run bound (filled: valid claim, open: paper-only / none)", {"marker": "o"}),
                        ("estimate | with its interval (not a bound)", {"marker": "|", "markersize": 8}),
                        ("one-run bound", {"marker": "x"}), (f"beyond {AUDIT_RATIO_MAX:g}", {"marker": ">"})):
        right.plot([], [], linestyle="none", color="0.4", label=name, **style)
    for ax in (left, right):
        ax.grid(True, alpha=0.25)
    return _finish(fig, axes, width, textwrap.fill(title, 130), stem, note=AUDIT_NOTE)


AUDIT_NOTE = ("bounds hold at 95% confidence (Clopper-Pearson, multi-run; Steinke-Nasr-Jagielski, one run with 1,000 "
              "canaries and 100 guesses) · estimates assume a Gaussian trade-off (GDP) or the declared per-step "
              "mechanism (measured), they are not bounds · every number: audits.csv")
