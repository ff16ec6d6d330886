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

AUDIT_RATIO_MAX = 2.0  # the right panel's x range: a ratio beyond it is drawn at the edge as ">"
THREAT_SHORT = {"final_model": "final model", "all_updates": "all updates"}
AUDIT_NOTE = ("bounds hold at 95% confidence (Clopper-Pearson, multi-run; Steinke-Nasr-Jagielski, one run with 1,000 "
              "canaries and 100 guesses) · estimates assume a Gaussian trade-off (GDP) or the declared per-step "
              "mechanism (measured), they are not bounds · every number: audits.csv")


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

    Left: claimed epsilon (x) against the rigorous lower bounds (y): multi-run (circles) and one-run
    (crosses), blue when the claim is a valid guarantee, red when it is the paper's only (or none);
    the diagonal y = x (a bound above it refutes the claim at the audits' confidence) and the
    multi-run ceiling. Right: one row per audit label (its threat model and trials a side), the
    same bounds divided by the claimed epsilon, coloured by the claimed epsilon, with the estimate
    (GDP or measured mechanism; not a bound) as a tick with its interval: how much of the claim
    an adversary demonstrates (bound) or appears to have (estimate). Ratios beyond
    AUDIT_RATIO_MAX are drawn at the edge as ">". Writes <stem>.png and <stem>.pdf; returns their
    paths (none without an audit with a claimed epsilon).
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
    return finish(fig, axes, width, textwrap.fill(title, 130), stem, note=AUDIT_NOTE)
