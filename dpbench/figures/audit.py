"""The audit figure: audited against claimed epsilon for every audit of an experiment (audits.csv).

`audit_figure` is a plain function, not a registered figure kind: a figure kind draws one metric
of the curves or trace-curves table, chosen by a spec's `figures:` entry
(`draw(table, metric, stem, ...)`, dpbench.figures.kinds), while this figure draws the audits
table, which has no metric, and is drawn for every experiment with audits
(dpbench.experiment.render), not on request. The lower bounds and estimates are explained in
docs/audits.md.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpbench.figures.frame import finish
from dpbench.figures.style import REFERENCE_COLOUR, REFERENCE_STYLES

AUDIT_RATIO_MAX = 2.0  # the right panel's x range: a ratio beyond it is drawn at the edge as ">"
THREAT_SHORT = {"final_model": "final model", "all_updates": "all updates"}
AUDIT_NOTE = ("bounds: 95% confidence (Clopper-Pearson multi-run; Steinke-Nasr-Jagielski one run, 1,000 canaries, "
              "100 guesses) · estimates (GDP or the declared per-step mechanism) are not bounds · every number: "
              "audits.csv · docs/audits.md")
#: the marker of each audit method; filled for a valid claim, open for the paper's only or none
METHOD_MARKERS = {"multi-run": "o", "one-run": "D"}
DIAGONAL = {"color": "0.2", "linewidth": 1.0, "linestyle": "-"}  # audited = claimed, on both panels


def audit_rows(audits: pd.DataFrame) -> pd.DataFrame:
    """The audits with a claimed epsilon, with the columns every audit row has: a table without
    `method` or `threat` holds multi-run audits of the final model, one without estimates has NaN."""
    data = audits.dropna(subset=["claimed_epsilon"]).copy()
    for column, default in (("method", "multi-run"), ("threat", "final_model")):
        data[column] = data[column].fillna(default) if column in data else default
    for column in ("epsilon_estimate", "epsilon_estimate_low", "epsilon_estimate_high"):
        if column not in data:
            data[column] = np.nan
    return data


def _audit_row_label(part: pd.DataFrame) -> str:
    """A row of the ratio panel: the label, what the adversary sees and how many trainings."""
    multi = part[part["method"] == "multi-run"]
    threat = THREAT_SHORT.get(str(part["threat"].iloc[0]), str(part["threat"].iloc[0]))
    trials = f"{int(multi['trials'].max()):,}/side" if not multi.empty else "one run"
    return f"{part['label'].iloc[0]}  [{threat}, {trials}]"


def audit_figure(audits: pd.DataFrame, stem: str | Path, title: str = "") -> list[Path]:
    """Audited against claimed epsilon (left) and audited / claimed per audit (right).

    Both panels draw one audit the same way: colour by claimed epsilon, marker by method (circle:
    multi-run bound, diamond: one-run bound; `METHOD_MARKERS`), filled when the claim is a valid
    guarantee and open when it is the paper's only (or none); the line audited = claimed (a bound
    beyond it refutes the claim at the audits' confidence) solid on both. Left: claimed epsilon (x)
    against the rigorous lower bounds (y) and the multi-run ceiling (grey, REFERENCE_STYLES
    "ceiling"). Right: one row per audit label (its threat model and trials a side), the bounds
    divided by the claimed epsilon, with the estimate (GDP or measured mechanism; not a bound) as a
    tick on a pale bar, its interval: how much of the claim an adversary demonstrates (bound) or
    appears to have (estimate). Ratios beyond AUDIT_RATIO_MAX are drawn at the edge as ">". Writes
    <stem>.png and <stem>.pdf; returns their paths (none without an audit with a claimed epsilon).
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
    left.plot([0, top], [0, top], label="audited = claimed ε (a bound beyond it: refuted)", **DIAGONAL)
    if not multi.empty:
        left.axhline(ceiling, color=REFERENCE_COLOUR, linestyle=REFERENCE_STYLES["ceiling"][0], linewidth=1,
                     label=f"multi-run ceiling ({int(multi['trials'].max()):,} trials a side)")
    jitter = 0.25 / max(len(labels), 1)
    for i, label in enumerate(labels):
        part = data[data["label"] == label]
        x = part["claimed_epsilon"] + (i - (len(labels) - 1) / 2) * jitter
        for j, row in part.iterrows():
            left.plot(x[j], row["epsilon_lower_bound"], **_bound_style(row, eps_colour[row["claimed_epsilon"]]),
                      alpha=0.85)
    left.set_xlim(0, top)
    left.set_ylim(0, top)
    left.set_xlabel("claimed ε")
    left.set_ylabel("audited lower bound on ε (95%)")
    right.axvline(1.0, **DIAGONAL)
    k = len(eps_values)
    for i, label in enumerate(labels):
        part = data[data["label"] == label]
        for j, eps in enumerate(eps_values):
            y = i + (j - (k - 1) / 2) * (0.7 / max(k, 1))
            colour = eps_colour[eps]
            for _, row in part[part["claimed_epsilon"] == eps].iterrows():
                ratio = float(row["epsilon_lower_bound"]) / eps
                style = _bound_style(row, colour)
                if ratio > AUDIT_RATIO_MAX:
                    style["marker"] = ">"
                right.plot(min(ratio, AUDIT_RATIO_MAX), y, **style)
                est = float(row["epsilon_estimate"])
                if row["method"] == "multi-run" and np.isfinite(est):
                    lo = float(row["epsilon_estimate_low"]) / eps
                    hi = float(row["epsilon_estimate_high"]) / eps
                    right.plot([min(lo, AUDIT_RATIO_MAX), min(hi if np.isfinite(hi) else np.inf, AUDIT_RATIO_MAX)],
                               [y, y], color=colour, linewidth=2, alpha=0.25, solid_capstyle="butt", zorder=1.5)
                    right.plot(min(est / eps, AUDIT_RATIO_MAX), y, marker="|", markersize=8, color=colour,
                               linestyle="none")
    right.set_yticks(range(len(labels)))
    right.set_yticklabels([_audit_row_label(data[data["label"] == label]) for label in labels], fontsize=7.5)
    right.set_ylim(len(labels) - 0.5, -0.5)
    right.set_xlim(0, AUDIT_RATIO_MAX * 1.03)
    right.set_xlabel("audited / claimed ε")
    _audit_key(right, eps_colour, data)
    for ax in (left, right):
        ax.grid(True, alpha=0.25)
    return finish(fig, axes, width, textwrap.fill(title, 130), stem, note=AUDIT_NOTE)


def _bound_style(row: pd.Series, colour) -> dict:
    """Plot keywords of one audit's bound: marker by method, filled for a valid claim, open otherwise."""
    return {"linestyle": "none", "marker": METHOD_MARKERS.get(str(row["method"]), "o"),
            "markersize": 5 if row["method"] == "one-run" else 6, "color": colour,
            "markerfacecolor": colour if row["claim"] == "valid" else "white"}


def _audit_key(ax, eps_colour: dict, data: pd.DataFrame) -> None:
    """The legend entries of the audit figure (drawn empty on `ax`): a colour per claimed epsilon, then
    the markers in grey: each method's, filled and open, the estimate and the edge marker."""
    for eps, colour in eps_colour.items():
        ax.plot([], [], linestyle="none", marker="s", color=colour, label=f"claimed ε = {eps:g}")
    grey = "0.35"
    for method, marker in METHOD_MARKERS.items():
        if (data["method"] == method).any():
            for valid, face, what in ((True, grey, "valid claim"), (False, "white", "paper-only / no claim")):
                ax.plot([], [], linestyle="none", marker=marker, color=grey, markerfacecolor=face,
                        label=f"{method} bound, {what}")
    ax.plot([], [], linestyle="none", marker="|", markersize=8, color=grey, label="estimate (not a bound)")
    ax.plot([], [], color=grey, linewidth=2, alpha=0.25, solid_capstyle="butt", label="its interval")
    ax.plot([], [], linestyle="none", marker=">", color=grey, label=f"beyond {AUDIT_RATIO_MAX:g}")
