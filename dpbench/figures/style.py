"""How a curve looks: a colour per method, a line style and marker fill per meaning, and the axis
label of each metric.

Every line style of the static figures means one thing (`STYLE_MEANINGS`, the style key under each
figure, frame.finish): a private curve's by what its DP guarantee covers, read from its `dp_claim`
strings (dpbench.analysis.curves.curve_claim; the weakest claim among its points decides,
`claim_kind`, `claim_meaning`), dashes for the non-private curves, and patterns no curve uses for the
grey reference lines (`REFERENCE_STYLES`). The legend has one entry per method (`legend_name`),
naming the caveats every point of it shares; what differs between its curves is in the line style.
What each guarantee covers is docs/validity.md.
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
#: every line style a curve is drawn with, by meaning: (line style, markers filled? (None: no
#: markers of its own), what the style key says). Private curves by `claim_meaning`; "non-private"
#: the algorithms without epsilon (`nonprivate_styles`)
STYLE_MEANINGS = {
    "valid": ("-", True, "ε valid for the curve as drawn"),
    "selected": ("-", False, "ε valid per run only"),
    "paper-only": ("-.", True, "ε claimed by the paper only"),
    "paper-only selected": ("-.", False, "ε claimed by the paper only, per run"),
    "declared": (":", True, "ε declared by the algorithm"),
    "none": (":", False, "ε not certified"),
    "non-private": ("--", None, "non-private"),
}
#: line style of a private algorithm's curve by what its guarantee covers (`claim_kind`): (line
#: style, markers filled?); `paper-only` curves whose hyperparameters were selected without privacy
#: get open markers (`claim_status`, STYLE_MEANINGS["paper-only selected"])
CLAIM_STYLES = {kind: STYLE_MEANINGS[kind][:2] for kind in ("valid", "selected", "declared", "paper-only", "none")}
#: the grey reference lines, each in a dash pattern no curve style uses: (line style, None, what it is)
REFERENCE_STYLES = {
    "rate": ((0, (10, 3)), None, "a paper's rate, constants fitted"),
    "majority": ((0, (1, 3)), None, "majority class"),
    "radius": ((0, (1, 1)), None, "projection radius"),
    "ceiling": ((0, (4, 1, 1, 1, 1, 1, 1, 1)), None, "multi-run ceiling"),
}
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
                         dashes=(6, 2.5) if i == 0 else (3.5, 2))
        out[label] = style
    return out


def claim_kind(line: pd.DataFrame) -> str:
    """The CLAIM_STYLES key of a curve from its `dp_claim` strings (curves.curve_claim): the weakest
    claim of its points wins; "selected" is valid per run only (selection not private, private
    selection not accounted), or valid with a caveat (a weak delta, feature scaling from the data)."""
    claims = set(line.get("dp_claim", pd.Series(["valid"])).fillna(""))
    # the kind is a claim's first word, before any caveat ("declared; feature scaling ...")
    parts = set("/".join(c.split(" ")[0].rstrip(";,") for c in claims).split("/")) - {""}
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
_AMONG = "selected among {} (not private)"


def _kind_phrase(kind: str, text: str) -> str:
    """What a guarantee of `kind` is called in a legend ("" for a valid one), from the claims' `text`."""
    if kind == "none":
        return "ε not certified"
    if kind == "paper-only":
        return "ε claimed by the paper only"
    if kind == "declared":
        return "ε declared by the algorithm, not dpbench's mechanism"
    return ""


#: `dpbench verify`'s verdicts in a declared run's claim (`dpbench.experiment.verified`), worst first
VERIFY_VERDICTS = ("mismatch", "suspect", "consistent")


def verified_phrase(claims: list[str]) -> str:
    """What `dpbench verify` found at the declared points among `claims` (their `dp_claim` strings):
    "" when it verified none, else the worst verdict found and, unless every declared point was
    verified with that verdict, at how many: "verify consistent", "verify mismatch at 1 of 8 points"."""
    declared = [c for c in claims if c.startswith("declared")]
    found = [v for c in declared for v in VERIFY_VERDICTS if f"verify {v}" in c]
    if not found:
        return ""
    worst = min(found, key=VERIFY_VERDICTS.index)
    count = found.count(worst)
    return f"verify {worst}" + ("" if count == len(declared) else f" at {count} of {len(declared)} points")


def _caveats(kind: str, text: str) -> list[str]:
    """The caveats of claims `text` beside their kind's phrase: hyperparameters selected among k without
    privacy ("among #": the counts are filled in by the caller), and for a valid guarantee what it
    does not cover (selection not accounted, δ ≥ 1/n, scaling from the data) or that it is end to end."""
    parts = [_AMONG.format("#")] if "selection not private" in text and kind != "none" else []
    if kind not in ("valid", "selected"):
        return parts
    for needle, phrase in (("private selection not accounted", "private selection not accounted"),
                           ("weak delta", "δ ≥ 1/n"), ("scaling data-dependent", "scaling data-dependent")):
        if needle in text:
            parts.append(phrase)
    if kind == "valid" and "end to end" in text:
        parts.append("private selection, ε end to end")
    return parts


def _candidates(text: str) -> str:
    """The candidate counts named in claims `text`, "2/6"."""
    return "/".join(map(str, sorted({int(k) for k in _CANDIDATES.findall(text)})))


def claim_status(line: pd.DataFrame) -> tuple[str, bool, str]:
    """(line style, markers filled?, legend suffix) of a private curve from its `dp_claim` strings
    (curves.curve_claim; the weakest of its points wins, `claim_kind`): the kind's phrase, then the
    caveats of all its points."""
    kind = claim_kind(line)
    text = " ".join(c for c in line.get("dp_claim", pd.Series(["valid"])).fillna("") if c)
    style, filled = CLAIM_STYLES[kind]
    caveats = [c.replace("#", _candidates(text)) for c in _caveats(kind, text)]
    among = "selection not private" in text
    phrase = _kind_phrase(kind, text)
    if kind == "declared" and (checked := verified_phrase(list(line.get("dp_claim", pd.Series([])).fillna("")))):
        phrase = f"{phrase}; {checked}"
    if kind == "paper-only":
        filled = filled and not among
    if phrase:
        return style, filled, ", ".join([phrase] + caveats)
    return style, filled, "; ".join(caveats)


def claim_meaning(line: pd.DataFrame) -> str:
    """The STYLE_MEANINGS key of a private curve (`claim_status`'s line style and marker fill)."""
    kind = claim_kind(line)
    if kind == "paper-only" and not claim_status(line)[1]:
        return "paper-only selected"
    return kind


def legend_name(rows: pd.DataFrame, label: str) -> str:
    """The legend entry of a method: its label and the guarantee's phrase and caveats that every one
    of its points shares (`rows`: all its rows in the figure; candidate counts joined, "among 2/6");
    what differs between its curves is their line style (`claim_meaning`, the style key)."""
    claims = rows.get("dp_claim", pd.Series(["valid"] * len(rows), index=rows.index))
    claims = [c for c in claims.where(rows["epsilon"].notna(), "").fillna("") if c] if "epsilon" in rows else \
        [c for c in claims.fillna("") if c]
    if not claims:
        return label
    common = None
    for text in claims:
        kind = claim_kind(pd.DataFrame({"dp_claim": [text]}))
        items = [p for p in [_kind_phrase(kind, text)] + _caveats(kind, text) if p]
        common = items if common is None else [i for i in common if i in items]
    text = " ".join(claims)
    parts = [p.replace("#", _candidates(text)) for p in common] + [p for p in [verified_phrase(claims)] if p]
    return f"{label} — {'; '.join(parts)}" if parts else label


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
