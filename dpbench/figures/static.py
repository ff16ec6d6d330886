"""Figures from curves tables only (never from models or data), one function per figure kind.

What every figure says on its face:
  * bands are the 95% confidence interval of the mean over seeds (curves.csv `ci_low`, `ci_high`,
    curves.mean_ci), kept inside the metric's range;
  * on a log axis a mean <= 0 (a non-private optimality gap) is drawn at the panel's floor, a
    decade below its smallest positive mean, with a down-triangle; a band's lower edge is clipped
    to a decade below its mean (and to the floor);
  * a private curve's guarantee is in its line style (CLAIM_STYLES) and in its legend entry
    ("label — selected among k (not private)", "— ε not certified", ...): one entry per (label,
    guarantee), so a label drawn solid on one panel and dotted on another has two;
  * reference lines in grey: a paper's rate with its constants fitted to one curve (curves.RATES,
    curves.fit_rate; option `reference`), the majority-class accuracy (option `baseline`), the
    projection radius where an estimation error reaches it.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Annotated

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpbench.analysis.curves import RATES, fit_rate, mean_ci, reference_curve  # noqa: E402
from dpbench.core.registry import Param  # noqa: E402
from dpbench.core.store import atomic_write_bytes_via  # noqa: E402
from dpbench.figures.kinds import View, figure_kind  # noqa: E402
from dpbench.run.metrics import BOUNDS, METRICS  # noqa: E402

LOG_METRICS = {"optimality_gap", "estimation_error", "test_loss", "excess_population_risk"}
#: axis labels (matplotlib mathtext); metrics.METRICS keeps the plain-text descriptions
AXIS_LABELS = {
    "accuracy": "test accuracy",
    "optimality_gap": "optimality gap\n$L(\\theta; D_{\\mathrm{train}}) - L^*$",
    "test_loss": "test risk\n$L(\\theta; D_{\\mathrm{test}})$",
    "estimation_error": "estimation error\n$\\|\\theta - w^*\\|_2$",
    "excess_population_risk": "excess population risk\n$L_P(\\theta) - \\min\\, L_P$",
}
#: the same in plain text with Unicode (the interactive report, dpbench.report.charts)
PLAIN_AXIS_LABELS = {
    "accuracy": "test accuracy",
    "optimality_gap": "optimality gap L(θ; D_train) − L*",
    "test_loss": "test risk L(θ; D_test)",
    "estimation_error": "estimation error ‖θ − w*‖₂",
    "excess_population_risk": "excess population risk L_P(θ) − min L_P",
}
# line style of a private algorithm's curve by what its guarantee covers (curves' `dp_claim`,
# curves.curve_claim): (line style, marker filled?); `paper-only` curves whose hyperparameters were
# selected without privacy get open markers (`claim_status`)
CLAIM_STYLES = {"valid": ("-", True), "selected": ("-", False), "paper-only": ("-.", True), "none": (":", False)}
FLOOR_MARKER = "v"  # a mean <= 0 drawn at a log panel's floor
BAND_NOTE = "bands: 95% confidence interval of the mean over seeds (Student t; curves.csv ci_low, ci_high), kept " \
            "inside the metric's range"
LOG_NOTE = ("log axes: ▽ = a mean ≤ 0, drawn at the panel's floor (a decade below its smallest positive mean); "
            "a band's lower edge is clipped to a decade below its mean (an interval reaching 0 has no log)")
CLAIM_NOTE = ("line style = what the DP guarantee covers (the legend says it too): solid, filled markers: valid for "
              "the curve as drawn (one hyperparameter setting, or private selection drawn at its end-to-end ε) · solid, "
              "open markers: valid per run only (hyperparameters selected among k on validation data with no ε for "
              "the selection, or δ ≥ 1/n) · dash-dot: ε claimed by the paper only (proof unsound; open markers: also "
              "selected among k) · dotted: ε not certified for this model · dashed: non-private · " + BAND_NOTE)
REFERENCE_LINES = tuple(RATES)  # reference rates a figure can draw (curves.RATES)
BASELINES = ("majority",)
GAP_FLOOR = 1e-6  # the floor of a log panel without a single positive mean (nothing else to go by)
REFERENCE_COLOUR = "0.45"


def colours_for(labels: list[str]) -> dict[str, tuple]:
    cmap = plt.get_cmap("tab10")
    return {label: cmap(i % 10) for i, label in enumerate(labels)}


def _axis_label(metric: str) -> str:
    return AXIS_LABELS.get(metric, METRICS.get(metric, (metric,))[0])


# ------------------------------------------------------------------------------------------------
# options shared by the figure kinds (declared per kind: `figure_kind` reads the signature)
# ------------------------------------------------------------------------------------------------
ReferenceOption = Annotated[str | None, Param(
    "a paper's rate drawn in grey, its constant(s) fitted (least squares in log space) to the curve named by "
    "reference_curve (default: the rate's algorithm): dpsco_rate (excess population risk, paper 002 §17.2, two "
    "constants, output perturbation), dpsgd_rate (optimality gap, paper 000 Thm. 1, DP-SGD), heavy_tailed_rate "
    "(estimation error, √ of paper 004 Thm. 7, Alg. 4)", choices=REFERENCE_LINES, paper="papers 000, 002, 004")]
ReferenceCurveOption = Annotated[str | None, Param(
    "label of the curve the reference rate's constants are fitted to (default: the first curve of the rate's "
    "algorithm)")]
BaselineOption = Annotated[str | None, Param(
    "majority: the accuracy of predicting the test split's majority class, a dashed grey line per panel "
    "(read from the data sets' splits, which the tables do not record)", choices=BASELINES)]


@figure_kind("metric_over_epsilon", description="metric over epsilon (log x), one panel per dataset x model, "
                                                "non-private algorithms as dashed lines",
             view=View(x="epsilon", x_title="privacy budget ε", panels=("dataset_label", "model_label")))
def metric_over_epsilon(curves: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                        algorithm_order: list[str] | None = None, *, reference: ReferenceOption = None,
                        reference_curve: ReferenceCurveOption = None,
                        baseline: BaselineOption = None) -> list[Path]:
    """One panel per (dataset, model): metric mean over log-scaled epsilon with its 95% interval band.

    Private algorithms are lines over epsilon; non-private ones (epsilon empty) are dashed
    horizontal lines with their band. `reference`: a rate fitted per panel (`_draw_rate`);
    `baseline: majority`: the majority-class accuracy (column `majority_accuracy`, added by
    pipeline.draw_figures). Writes <stem>.png and <stem>.pdf; returns their paths.
    """
    part = curves[curves["metric"] == metric]
    if part.empty:
        return []
    datasets = list(dict.fromkeys(part["dataset_label"]))
    models = list(dict.fromkeys(part["model_label"]))
    labels = label_order(part, algorithm_order)
    colours = colours_for(labels)
    nonprivate = _nonprivate_styles(part, labels)
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
                        _floor_markers(ax, np.geomspace(*xlim, 7)[1:-1], np.full(5, mean[0]), colour)
                else:
                    eps = x_epsilon(line)
                    kwargs, name = _claim_line(line, "o", colour)
                    ax.plot(eps, mean, markersize=3.5, color=colour, linewidth=1.5, label=name, **kwargs)
                    ax.fill_between(eps, lo, hi, color=colour, alpha=0.18, linewidth=0)
                    _floor_markers(ax, eps[low_mask], mean[low_mask], colour)
                    marked |= _claim_marks(ax, line, eps, mean, colour)
            if reference:
                _draw_rate(ax, panel, reference, reference_curve, "epsilon", None, metric)
            if baseline == "majority" and metric == "accuracy":
                if not _draw_majority(ax, panel):
                    notes.append(f"{dataset}")
            ax.set_xscale("log")
            ax.set_xlim(*xlim)
            _epsilon_ticks(ax, part["epsilon"].dropna().unique(), xlim)
            if metric in LOG_METRICS:
                ax.set_yscale("log")
            ax.set_title(f"{dataset} · {model}", fontsize=10)
            ax.grid(True, which="both", alpha=0.25)
            if r == len(models) - 1:
                ax.set_xlabel("privacy budget ε")
            if c == 0:
                ax.set_ylabel(_axis_label(metric))
    extra = ""
    if baseline == "majority" and metric == "accuracy":
        extra = "dashed grey: accuracy of always predicting the test split's majority class (mean over seeds)"
        if notes:
            extra += f" — not drawn for {', '.join(dict.fromkeys(notes))} (data not available when drawn)"
    if marked:
        extra = (extra + " · " if extra else "") + CLAIM_MARK_NOTE
    return _finish(fig, axes, width, title, stem, extra=extra, order=labels, log=metric in LOG_METRICS)


CLAIM_MARK_NOTE = ("★: a claim of claims.csv holds at this ε with significance (paired over seeds, Bonferroni over "
                   "the claims and their points); ✕: it fails there significantly")


def _claim_marks(ax, line: pd.DataFrame, eps: np.ndarray, mean: np.ndarray, colour) -> bool:
    """Stars (claim holds) and crosses (claim fails) on the points of `line` that a per-point
    claim marks (column claim_mark, `pipeline.draw_figures`); True when any was drawn."""
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


def label_order(part: pd.DataFrame, algorithm_order: list[str] | None) -> list[str]:
    """The labels drawn, once each, in the spec's order (then table order)."""
    labels = list(algorithm_order or []) + list(dict.fromkeys(part["label"]))
    return list(dict.fromkeys(lab for lab in labels if lab in set(part["label"])))


def _nonprivate_styles(part: pd.DataFrame, labels: list[str]) -> dict[str, dict]:
    """Dashed lines for the non-private labels; with several (RGD and its minibatch twin) each gets
    its own sparse marker and the first a wider line below the others, so coinciding curves stay
    visible."""
    private = set(part.loc[part["epsilon"].notna(), "label"])
    names = [lab for lab in labels if lab not in private]
    out = {}
    for i, label in enumerate(names):
        style = {"linestyle": "--", "linewidth": 1.5, "zorder": 2.2}
        if len(names) > 1:
            style.update(marker="sDX^"[i % 4], markevery=0.12, markersize=4.5, markerfacecolor="white",
                         linewidth=2.6 if i == 0 else 1.4, zorder=2.0 if i == 0 else 2.4 + 0.01 * i,
                         dashes=(6, 2.5) if i == 0 else (2.5, 1.5))
        out[label] = style
    return out


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


def _floor_markers(ax, xs: np.ndarray, ys: np.ndarray, colour) -> None:
    """Open down-triangles at the means <= 0 drawn at a log panel's floor, and a grey legend entry."""
    if len(xs):
        ax.plot(xs, ys, linestyle="none", marker=FLOOR_MARKER, markersize=6, color=colour, markerfacecolor="white",
                zorder=4, label="_floor")
        ax.plot([], [], linestyle="none", marker=FLOOR_MARKER, markersize=6, color="0.3", markerfacecolor="white",
                label="mean ≤ 0, drawn at the panel's floor")


def _epsilon_ticks(ax, grid: np.ndarray, xlim: tuple[float, float]) -> None:
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


def _finish(fig, axes, width: float, title: str, stem: str | Path, note: str | None = None,
            extra: str = "", order: list[str] | None = None, log: bool = True) -> list[Path]:
    """Shared legend, footer and title below/above the panels; save png and pdf.

    Legend entries that differ only in a candidate count ("selected among 2" / "among 6", the same
    line style) are merged into one ("among 2/6"); entries follow `order` (the labels), reference
    lines last, in as many columns as fit the width. `note`: the footer (default: the claim styles
    and the bands, `log` saying whether a panel has a log axis); `extra`: a first footer line
    (what a figure's reference line is).
    """
    _place_corner_notes(fig, axes)
    handles, names = _merged_legend(axes, order or [])
    note = _claim_note(log) if note is None else note
    text = "\n".join(textwrap.fill(t, width=int(width * 15)) for t in (extra, note) if t)
    lines = text.count("\n") + 1 if text else 0
    footer_in = 0.125 * lines + 0.12
    legend_in = 0.0
    if names:
        renderer = fig.canvas.get_renderer()
        for ncol in range(min(len(names), 4), 0, -1):  # the most columns that fit the width
            legend = fig.legend(handles, names, loc="lower center", ncol=ncol, frameon=False, fontsize=9)
            box = legend.get_window_extent(renderer)
            if box.width / fig.dpi <= width * 0.97 or ncol == 1:
                break
            legend.remove()
        legend_in = box.height / fig.dpi
    bottom_in = footer_in + legend_in + 0.2
    if title:
        title = textwrap.fill(title, width=int(width * 11))
    title_in = 0.2 * (title.count("\n") + 1) if title else 0.0  # the panels keep their height
    height = fig.get_figheight() + bottom_in + title_in
    fig.set_figheight(height)
    if names:
        legend.set_bbox_to_anchor((0.5, (footer_in + 0.05) / height), transform=fig.transFigure)
    if text:
        fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=7, color="0.3", linespacing=1.25)
    if title:
        fig.suptitle(title, fontsize=11, y=1 - 0.08 / height, va="top")
    fig.tight_layout(rect=(0, bottom_in / height, 1, 1))  # tight_layout makes room for the suptitle itself
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


def _claim_note(log: bool) -> str:
    return CLAIM_NOTE + (" · " + LOG_NOTE if log else "")


_AMONG = re.compile(r"among (\d+)")


def _merged_legend(axes, order: list[str]) -> tuple[list, list[str]]:
    """(handles, names) of every panel, each name once, names equal but for "among <k>" merged, in
    the order of the labels they start with (`order`), the rest (reference lines) after."""
    handles, names = [], []
    for ax in axes.flat:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names and not n.startswith("_"):
                handles.append(h)
                names.append(n)
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        groups.setdefault(_AMONG.sub("among #", n), []).append(i)
    merged = []
    for key, members in groups.items():
        name = names[members[0]]
        if len(members) > 1 and "among #" in key:
            ks = sorted({int(k) for i in members for k in _AMONG.findall(names[i])})
            name = key.replace("among #", "among " + "/".join(map(str, ks)))
        merged.append((handles[members[0]], name))

    def rank(name: str) -> int:
        starts = [i for i, label in enumerate(order) if name == label or name.startswith((label + " — ", label + ", "))]
        return max(starts, key=lambda i: len(order[i])) if starts else len(order)

    merged.sort(key=lambda hn: rank(hn[1]))  # stable: a label's entries keep their order
    return [h for h, _ in merged], [n for _, n in merged]


def x_epsilon(line: pd.DataFrame) -> np.ndarray:
    """Where a private curve's points sit on the epsilon axis: the end-to-end epsilon of private
    selection (tuning + training) where the curves table has one, else the per-run target."""
    eps = line["epsilon"].to_numpy(dtype=float)
    if "eps_end_to_end" in line:
        total = line["eps_end_to_end"].to_numpy(dtype=float)
        eps = np.where(np.isfinite(total), total, eps)
    return eps


_CANDIDATES = re.compile(r"\((\d+) candidates?\)")


def claim_status(line: pd.DataFrame) -> tuple[str, bool, str]:
    """(line style, markers filled?, legend suffix) of a private curve from its `dp_claim` strings
    (curves.curve_claim; the weakest of its points wins, `claim_kind`)."""
    kind = claim_kind(line)
    claims = [c for c in line.get("dp_claim", pd.Series(["valid"])).fillna("") if c]
    text = " ".join(claims)
    ks = sorted({int(k) for k in _CANDIDATES.findall(text)})
    among = f"selected among {'/'.join(map(str, ks))} (not private)" if "selection not private" in text else ""
    style, filled = CLAIM_STYLES[kind]
    if kind == "none":
        return style, filled, "ε not certified"
    if kind == "paper-only":
        return style, filled and not among, "ε claimed by the paper only" + (f", {among}" if among else "")
    parts = [among] if among else []
    if "private selection not accounted" in text:
        parts.append("private selection not accounted")
    if "weak delta" in text:
        parts.append("δ ≥ 1/n")
    if kind == "valid" and "end to end" in text:
        parts.append("private selection, ε end to end")
    return style, filled, "; ".join(parts)


def _claim_line(line: pd.DataFrame, marker: str | None, colour, name: str | None = None) -> tuple[dict, str]:
    """Plot keywords and legend name of a private curve: line style and markers by its guarantee
    (`claim_status`; markers filled only for a guarantee that covers the curve as drawn; a curve
    without markers of its own, over iterations, gets sparse open ones when its guarantee is per
    run only), the name `label — <guarantee>`."""
    style, filled, suffix = claim_status(line)
    label = name or str(line["label"].iloc[0])
    name = f"{label} — {suffix}" if suffix else label
    if marker is None:
        kwargs = {"linestyle": style} if filled or style != "-" else \
            {"linestyle": style, "marker": "o", "markevery": 0.1, "markerfacecolor": "white"}
        return kwargs, name
    return {"linestyle": style, "marker": marker, "markerfacecolor": colour if filled else "white"}, name


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


def _draw_majority(ax, panel: pd.DataFrame) -> bool:
    """The majority-class accuracy of the panel's test split (column `majority_accuracy`), dashed grey;
    False when the table has no value for this panel."""
    if "majority_accuracy" not in panel or panel["majority_accuracy"].isna().all():
        return False
    value = float(panel["majority_accuracy"].mean())
    ax.axhline(value, color=REFERENCE_COLOUR, linestyle=(0, (4, 2.5)), linewidth=1.2, zorder=1.5,
               label="majority class (test split)")
    ax.annotate(f"{value:.3f}", (1.0, value), xycoords=("axes fraction", "data"), xytext=(-2, 2),
                textcoords="offset points", ha="right", va="bottom", fontsize=7, color=REFERENCE_COLOUR,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 0.5})
    return True


def _draw_rate(ax, panel: pd.DataFrame, name: str, curve: str | None, x: str, markers: dict | None,
               metric: str) -> None:
    """A paper's rate (curves.RATES[name]) in grey with its constants fitted to one curve of the
    panel (curves.fit_rate): one line per epsilon of that curve over `x` (n or d; marker by
    epsilon), or one line over epsilon (`markers` None); the fitted constants are written in the
    panel's corner, the formula and its source in the legend."""
    if metric not in RATES[name].metrics:
        _corner_note(ax, f"{name} not drawn: it bounds {', '.join(RATES[name].metrics)}")
        return
    fitted = fit_rate(panel, name, curve)
    if fitted is None:
        return
    rows = reference_curve(panel, fitted.rate, fitted.curve)
    legend = f"{fitted.rate.formula} ({fitted.rate.source}), fitted to {fitted.curve}"
    style = {"color": REFERENCE_COLOUR, "linewidth": 1.3, "linestyle": (0, (6, 2, 1, 2)), "zorder": 1.8}
    if markers is None:
        rows = rows.sort_values("epsilon")
        ax.plot(rows["epsilon"].to_numpy(dtype=float), fitted.values(rows), label=legend, **style)
    else:
        for eps, part in rows.groupby("epsilon", sort=True):
            part = part.sort_values(x)
            xs, ys = part[x].to_numpy(dtype=float), fitted.values(part)
            ax.plot(xs, ys, marker=markers.get(eps, "o"), markersize=3, markerfacecolor="none",
                    label=f"{legend}, ε = {eps:g}", **style)
            _mark_turn(ax, fitted, part, xs, ys)
    names = "ab" if len(fitted.constants) > 1 else "c"
    text = ", ".join(f"{k} = {v:.3g}" for k, v in zip(names, fitted.constants))
    _corner_note(ax, f"rate fit: {text}", first=True)


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
            _corner_note(ax, f"| terms equal at n ≈ {float(f'{turn:.2g}'):,.0f} (ε = {eps:g})")
            return


def _corner_note(ax, text: str, first: bool = False) -> None:
    """A small grey note placed by `_finish` in the panel corner with the fewest data points."""
    if not hasattr(ax, "_dpbench_notes"):
        ax._dpbench_notes = []
    ax._dpbench_notes.insert(0, text) if first else ax._dpbench_notes.append(text)


def _place_corner_notes(fig, axes) -> None:
    for ax in axes.flat:
        notes = getattr(ax, "_dpbench_notes", None)
        if not notes:
            continue
        ax.get_xlim(), ax.get_ylim()  # settle autoscaling before mapping data to the axes box
        points = [ax.transAxes.inverted().transform(ax.transData.transform(np.column_stack(line.get_data())))
                  for line in ax.get_lines() if len(line.get_xdata())]
        xy = np.concatenate(points) if points else np.zeros((0, 2))
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        corners = {(0.98, 0.97, "right", "top"): (0.6, 0.82), (0.02, 0.97, "left", "top"): (0.0, 0.82),
                   (0.98, 0.03, "right", "bottom"): (0.6, 0.0), (0.02, 0.03, "left", "bottom"): (0.0, 0.0)}

        def crowd(box: tuple[float, float]) -> int:
            x0, y0 = box
            return int(np.sum((xy[:, 0] >= x0) & (xy[:, 0] <= x0 + 0.4) & (xy[:, 1] >= y0) & (xy[:, 1] <= y0 + 0.18)))

        (x, y, ha, va), _ = min(corners.items(), key=lambda item: crowd(item[1]))
        ax.text(x, y, "\n".join(notes), transform=ax.transAxes, ha=ha, va=va, fontsize=7, color=REFERENCE_COLOUR,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1})


def _radii(rows: pd.DataFrame) -> list[float]:
    """The projection radii in the `params` of these rows (hyperparameter `radius`)."""
    out = set()
    for text in rows.get("params", pd.Series(dtype=str)).dropna().unique():
        try:
            value = json.loads(text).get("radius")
        except (TypeError, ValueError, AttributeError):
            continue
        if isinstance(value, (int, float)) and value > 0:
            out.add(float(value))
    return sorted(out)


def _draw_radius(ax, rows: pd.DataFrame, metric: str, top: float) -> None:
    """Where the metric is an estimation error ||theta - w*|| and the runs project onto a ball
    (`radius` in their params), a horizontal line at the radius R: an iterate on the ball has
    ||theta|| = R, so a curve near R sits on it (||theta - w*|| is within ||w*|| of R). Drawn only
    when a curve comes within a factor 2 of R (otherwise the line would only stretch the axis)."""
    if metric != "estimation_error" or not np.isfinite(top):
        return
    for radius in _radii(rows):
        if top >= radius / 2:
            ax.axhline(radius, color=REFERENCE_COLOUR, linestyle="-", linewidth=0.9, alpha=0.8, zorder=1.6,
                       label=f"projection radius R = {radius:g} ($\\|\\theta\\|_2 \\leq R$; "
                             "a curve at R sits on the ball)")


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
    the notes' rate a d log(1/delta)/(n^2 eps^2) + b/n in grey, a and b fitted separately to output
    perturbation's curves (curves.fit_rate): the rate's *shape* is the claim, its constants are not
    given; other rates of curves.RATES likewise with one constant.
    """
    return _metric_over_size(curves, metric, stem, "n_train", "training set size n", title, algorithm_order,
                             reference, reference_curve)


@figure_kind("metric_over_d", needs="d", description="metric over the dimension d (log-log), a data set swept over d",
             view=View(x="n_features", x_title="dimension d", panels=("dataset_panel", "model_label"),
                       lines=("epsilon",)))
def metric_over_d(curves: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                  algorithm_order: list[str] | None = None, *, reference: ReferenceOption = None,
                  reference_curve: ReferenceCurveOption = None) -> list[Path]:
    """As `metric_over_n`, over the number of features d of a dataset swept over `d` (paper 004 Fig. 3)."""
    return _metric_over_size(curves, metric, stem, "n_features", "dimension d", title, algorithm_order, reference,
                             reference_curve)


def _metric_over_size(curves: pd.DataFrame, metric: str, stem: str | Path, x: str, x_label: str, title: str,
                      algorithm_order: list[str] | None, reference: str | None,
                      reference_curve: str | None) -> list[Path]:
    part = curves[curves["metric"] == metric]
    if part.empty:
        return []
    combos = list(dict.fromkeys(zip(part["dataset_panel"], part["model_label"])))  # panels that have data
    labels = label_order(part, algorithm_order)
    colours = colours_for(labels)
    nonprivate = _nonprivate_styles(part, labels)
    eps_values = sorted(part["epsilon"].dropna().unique())
    markers = dict(zip(eps_values, "osD^vP*X"))
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
                mean, lo, hi, low_mask = band(line, metric, floor)
                private = not pd.isna(eps)
                if private:
                    style, name = _claim_line(line, markers.get(eps, "o"), colours[label], f"{label}, ε = {eps:g}")
                    style = {"linewidth": 1.5, **style}
                else:
                    style, name = nonprivate[label], label
                ax.plot(xs, mean, color=colours[label], markersize=4, label=name, **style)
                ax.fill_between(xs, lo, hi, color=colours[label], alpha=0.15, linewidth=0)
                _floor_markers(ax, xs[low_mask], mean[low_mask], colours[label])
        if reference:
            _draw_rate(ax, panel, reference, reference_curve, x, markers, metric)
        _draw_radius(ax, panel, metric, float(panel["mean"].max()))
        ax.set_xscale("log")
        ax.set_yscale("log")
        sizes = np.sort(panel[x].dropna().unique())
        ax.set_xticks(sizes, [f"{v:,.0f}" for v in sizes], fontsize=8)  # the swept values, not decades
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(f"{panel_name} · {model}", fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
        ax.set_xlabel(x_label)
        if c == 0:
            ax.set_ylabel(_axis_label(metric))
    return _finish(fig, axes, width, title, stem, order=labels, log=True)


@figure_kind("metric_over_iterations", table="traces", needs="trace",
             description="metric over iterations of the selected fits (algorithms with trace_every), "
                         "one row per dataset x model, one column per epsilon",
             view=View(x="step", x_title="iteration", panels=("dataset_label", "model_label", "epsilon"),
                       x_log=False))
def metric_over_iterations(traces: pd.DataFrame, metric: str, stem: str | Path, title: str = "",
                           algorithm_order: list[str] | None = None) -> list[Path]:
    """Paper 004 Figs. 1-2: metric over iterations, one panel per (dataset, model) row x epsilon column.

    Reads a trace-curves table (curves.trace_curves). Every private algorithm is drawn in the
    panel of its epsilon, non-private ones (dashed, each with its own marker) in every column, each
    with its 95% interval band over seeds. Log y for loss/error metrics; the projection radius
    where an estimation error reaches it (`_draw_radius`).
    """
    part = traces[traces["metric"] == metric]
    if part.empty:
        return []
    rows = list(dict.fromkeys(zip(part["dataset_label"], part["model_label"])))
    eps_values = sorted(part["epsilon"].dropna().unique()) or [np.nan]
    labels = label_order(part, algorithm_order)
    colours = colours_for(labels)
    nonprivate = _nonprivate_styles(part, labels)
    width = max(4.2 * len(eps_values), 7.5)
    fig, axes = plt.subplots(len(rows), len(eps_values), figsize=(width, 3.3 * len(rows)), squeeze=False)
    for r, (dataset, model) in enumerate(rows):
        panel = part[(part["dataset_label"] == dataset) & (part["model_label"] == model)]
        floor = log_floor(panel, metric)
        for c, eps in enumerate(eps_values):
            ax = axes[r][c]
            drawn = []
            for label in labels:
                mine = panel[panel["label"] == label]
                private = mine["epsilon"].notna().any()
                line = mine[mine["epsilon"] == eps] if private else mine
                if line.empty:
                    continue
                line = line.sort_values("step")
                drawn.append(line)
                steps = line["step"].to_numpy(dtype=float)
                mean, lo, hi, low_mask = band(line, metric, floor)
                if private:
                    style, name = _claim_line(line, None, colours[label])
                    style = {"linewidth": 1.5, "markersize": 3.5, **style}
                else:
                    style, name = nonprivate[label], label
                ax.plot(steps, mean, color=colours[label], label=name, **style)
                ax.fill_between(steps, lo, hi, color=colours[label], alpha=0.15, linewidth=0)
                _floor_markers(ax, steps[low_mask], mean[low_mask], colours[label])
            if drawn:
                shown = pd.concat(drawn)
                _draw_radius(ax, shown, metric, float(shown["mean"].max()))
            if metric in LOG_METRICS:
                ax.set_yscale("log")
            ax.set_title(f"{dataset} · {model}" + ("" if pd.isna(eps) else f" · ε = {eps:g}"), fontsize=10)
            ax.grid(True, which="both", alpha=0.25)
            if r == len(rows) - 1:
                ax.set_xlabel("iteration")
            if c == 0:
                ax.set_ylabel(_axis_label(metric))
    return _finish(fig, axes, width, title, stem, order=labels, log=metric in LOG_METRICS)


def audit_rows(audits: pd.DataFrame) -> pd.DataFrame:
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
    data = audit_rows(audits)
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
