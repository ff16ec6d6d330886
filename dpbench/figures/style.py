"""How a curve looks: a colour per label, line style and markers by what its DP guarantee covers,
dashes for the non-private curves, and the axis label of each metric.

A private curve's guarantee is read from its `dp_claim` strings (dpbench.analysis.curves.curve_claim):
the weakest claim among its points decides the line style (`CLAIM_STYLES`, `claim_kind`) and the
legend suffix ("selected among k (not private)", "ε not certified", ...; `claim_status`), so one
label drawn solid on one panel and dotted on another has two legend entries. What each guarantee
covers is docs/validity.md.
"""

from __future__ import annotations

import re

import matplotlib
import pandas as pd

from dpbench.run.metrics import METRICS

#: metrics drawn on a log y axis (a mean <= 0 then sits at the panel's floor, dpbench.figures.bands)
LOG_METRICS = {"optimality_gap", "estimation_error", "test_loss", "excess_population_risk"}
#: axis labels (matplotlib mathtext); run.metrics.METRICS keeps the plain-text descriptions
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
#: line style of a private algorithm's curve by what its guarantee covers (`claim_kind`): (line
#: style, markers filled?); `paper-only` curves whose hyperparameters were selected without privacy
#: get open markers too (`claim_status`)
CLAIM_STYLES = {"valid": ("-", True), "selected": ("-", False), "declared": ("-.", False), "paper-only": ("-.", True),
                "none": (":", False)}
#: grey of everything that is not a measured curve: reference rates, the majority class, the radius
REFERENCE_COLOUR = "0.45"
#: sparse open markers of the non-private curves when a figure has several (`nonprivate_styles`)
NONPRIVATE_MARKERS = "sDX^"


def axis_label(metric: str) -> str:
    """The y axis label of `metric` (mathtext), its plain description for a metric without one."""
    return AXIS_LABELS.get(metric, METRICS.get(metric, (metric,))[0])


def colours_for(labels: list[str]) -> dict[str, tuple]:
    """One tab10 colour per label, in the order given (the eleventh label reuses the first colour)."""
    cmap = matplotlib.colormaps["tab10"]
    return {label: cmap(i % 10) for i, label in enumerate(labels)}


def label_order(part: pd.DataFrame, algorithm_order: list[str] | None) -> list[str]:
    """The labels drawn, once each, in the spec's order (then table order)."""
    labels = list(algorithm_order or []) + list(dict.fromkeys(part["label"]))
    return list(dict.fromkeys(lab for lab in labels if lab in set(part["label"])))


def nonprivate_styles(part: pd.DataFrame, labels: list[str]) -> dict[str, dict]:
    """Plot keywords of the non-private labels (epsilon empty): dashed lines; with several (robust
    GD and its minibatch twin) each gets its own sparse marker and the first a wider line below the
    others, so coinciding curves stay visible."""
    private = set(part.loc[part["epsilon"].notna(), "label"])
    names = [lab for lab in labels if lab not in private]
    out = {}
    for i, label in enumerate(names):
        style = {"linestyle": "--", "linewidth": 1.5, "zorder": 2.2}
        if len(names) > 1:
            style.update(marker=NONPRIVATE_MARKERS[i % 4], markevery=0.12, markersize=4.5, markerfacecolor="white",
                         linewidth=2.6 if i == 0 else 1.4, zorder=2.0 if i == 0 else 2.4 + 0.01 * i,
                         dashes=(6, 2.5) if i == 0 else (2.5, 1.5))
        out[label] = style
    return out


def claim_kind(line: pd.DataFrame) -> str:
    """The CLAIM_STYLES key of a curve from its `dp_claim` strings (curves.curve_claim): the weakest
    claim of its points wins; "selected" is valid per run only (selection not private, private
    selection not accounted), or valid with a caveat (a weak delta, feature scaling from the data)."""
    claims = set(line.get("dp_claim", pd.Series(["valid"])).fillna(""))
    parts = set("/".join(c.split(" ")[0] for c in claims).split("/")) - {""}
    if "none" in parts:
        return "none"
    if "paper-only" in parts:
        return "paper-only"
    if "declared" in parts:
        return "declared"
    if any("per run" in c or "weak delta" in c or "scaling data-dependent" in c for c in claims):
        return "selected"
    return "valid"


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
    if kind == "declared":
        checked = next((f"; verify {v}" for v in ("mismatch", "suspect", "consistent") if f"verify {v}" in text), "")
        return style, filled, ("ε declared by the algorithm, not dpbench's mechanism" + checked
                               + (f", {among}" if among else ""))
    parts = [among] if among else []
    if "private selection not accounted" in text:
        parts.append("private selection not accounted")
    if "weak delta" in text:
        parts.append("δ ≥ 1/n")
    if "scaling data-dependent" in text:
        parts.append("scaling data-dependent")
    if kind == "valid" and "end to end" in text:
        parts.append("private selection, ε end to end")
    return style, filled, "; ".join(parts)


def claim_line(line: pd.DataFrame, marker: str | None, colour, name: str | None = None) -> tuple[dict, str]:
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
