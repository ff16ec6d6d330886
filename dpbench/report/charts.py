"""Interactive figures of the report: plotly.js traces from the same rows as the static figures.

`interactive_figure` turns the rows a figure shows (experiment.render.figure_tables) into one small
plotly.js chart per panel, laid out by the figure kind's `View` (figures.View): one line per
algorithm label (and per value of the view's `lines` columns) with its 95% band, the line style
and markers saying what the curve's guarantee covers exactly as in the PNG
(figures.style.claim_status, figures.style.CLAIM_STYLES: solid filled = valid, solid open = valid
per run only, dash-dot = the paper's claim only (open markers: declared by the algorithm), dotted = not
certified; dashed = non-private), and
a legend entry per (label, guarantee) shared by the panels. Every point carries its hover text (value, interval, seeds,
selected hyperparameters, candidates, guarantee) and, as customdata, the id of the point group
whose privacy ledger a click opens (dpbench.report.site). As in the PNG: the majority-class line
(`baseline: majority`), a paper's rate fitted per panel (`reference`, curves.fit_rate) and stars /
crosses where a claim holds / fails significantly (column claim_mark). `audit_figure` is the
claimed-against-audited chart of an audits table. Nothing here reads files or models.
"""

from __future__ import annotations

import json
import re
from html import escape
from typing import Callable

import matplotlib.colors
import numpy as np
import pandas as pd

from dpbench.algorithms.base import REGISTRY as ALGORITHMS
from dpbench.analysis.curves import RATES, fit_rate, reference_curve
from dpbench.figures.audit import THREAT_SHORT, audit_rows
from dpbench.figures.bands import band, log_floor
from dpbench.figures.epsilon import x_epsilon
from dpbench.figures.kinds import View
from dpbench.figures.style import (LOG_METRICS, PLAIN_AXIS_LABELS, STYLE_MEANINGS, claim_meaning, claim_status,
                                   colours_for, label_order, legend_name)
from dpbench.run.metrics import METRICS

#: matplotlib line styles (figures.style.CLAIM_STYLES and the non-private dashes) as plotly.js dashes
DASHES = {"-": "solid", "--": "dash", "-.": "dashdot", ":": "dot"}
#: the grey reference lines (figures.style.REFERENCE_STYLES: patterns no curve uses) as (the legend's
#: swatch name, report.js DASH_SVG; the trace's plotly.js dash)
REFERENCE_DASHES = {"rate": ("longdash", "longdash"), "majority": ("loosedot", "1px,4px")}
#: the grey of the style key's swatches (they explain a line style, not a method)
KEY_COLOUR = "#555555"
#: what x means in hover text, by the view's x column
X_NAMES = {"epsilon": "ε", "n_train": "n", "n_features": "d", "step": "iteration"}
BAND_OPACITY = 0.18
#: a mean <= 0 (a non-private optimality gap is exactly 0) on a log axis: drawn at the panel's floor with an
#: open down-triangle, as the PNG draws it (figures.bands.floor_markers, figures.frame.LOG_NOTE)
FLOOR_SYMBOL = "triangle-down-open"
FLOOR_COLOUR = "#4d4d4d"
FLOOR_ENTRY = "mean ≤ 0 (e.g. a gap of exactly 0), drawn at the floor of the log axis"

#: the group id of a row (its privacy ledger, dpbench.report.site), or None without one
GroupOf = Callable[[pd.Series], "int | None"]


def y_title(metric: str) -> str:
    return PLAIN_AXIS_LABELS.get(metric, METRICS.get(metric, (metric,))[0])


#: the longest line of an axis title, in characters: a y title runs along the panel's plot area, 240 px
#: high (a 340 px panel less its margins), and 28 characters of 12 px type take ~200 px, room for a font
#: wider than the test machine's
TITLE_CHARS = 28
TITLE_FONT = 12
MINOR_GRID = "#f3f3f3"
#: log-axis labels inside this range are plain decimals (0.001 ... 1000), outside it 10^k
PLAIN_TICKS = (1e-3, 1e4)
#: labelled ticks of a log axis, coarsest first: decades, then 1-2-5, then every digit (`log_ticks`)
MANTISSAS = ((1,), (1, 2, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9))
#: a log axis's labelled values reach this many decades beyond the panel's data, so zooming out keeps labels
TICK_MARGIN = 3


def axis_title(text: str, width: int = TITLE_CHARS) -> str:
    """`text` in lines (plotly.js's `<br>`) of at most `width` characters where it can be.

    A label of words followed by a formula (figures.style.PLAIN_AXIS_LABELS: "optimality gap L(θ; D_train)
    − L*") breaks before the formula, its first word with a character other than a letter, when both
    parts fit; anything else breaks at spaces; a word longer than `width` stays whole."""
    if len(text) <= width:
        return text
    words = text.split(" ")
    start = next((i for i, w in enumerate(words) if not w.isalpha()), len(words))
    head, tail = " ".join(words[:start]), " ".join(words[start:])
    if 0 < start < len(words) and len(head) <= width and len(tail) <= width:
        return f"{head}<br>{tail}"
    lines, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join([*lines, line])


def tick_label(value: float) -> str:
    """A log axis's label of `value` (m × 10^k, m a digit): a plain decimal inside `PLAIN_TICKS`
    (0.02, 1, 500), else 10^k or m×10^k in plotly.js's markup (10<sup>−5</sup>)."""
    k = int(np.floor(np.log10(value) + 1e-9))
    m = int(round(value / 10.0 ** k))
    if PLAIN_TICKS[0] <= value < PLAIN_TICKS[1]:
        return f"{m * 10.0 ** k:.{max(0, -k)}f}"
    power = f"10<sup>{'−' if k < 0 else ''}{abs(k)}</sup>"
    return power if m == 1 else f"{m}×{power}"


def log_ticks(values) -> dict:
    """The ticks of a log axis drawn over `values` (a panel's coordinates on that axis; only the positive
    finite ones count), as plotly.js axis attributes.

    Labelled: the decades (10^k) when two or more lie within the values' range; with fewer, 1, 2 and 5
    × 10^k, else every digit × 10^k, whichever first puts two labels within the range, each labelled
    with its full value (`tick_label`), never a bare digit; a range too short even for that (less than
    a step between digits) gets plotly.js's linear steps on the log axis (dtick "L<step>"), labelled
    in full too. Minor ticks and grid lines, unlabelled, mark 2 ... 9 × 10^k between labelled decades
    and 1-2-5 ticks. The labelled values run `TICK_MARGIN` decades beyond the range."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not v.size:
        return {"dtick": 1}
    lo, hi = float(v.min()), float(v.max())
    low, high = int(np.floor(np.log10(lo) + 1e-9)), int(np.floor(np.log10(hi) + 1e-9))
    minor = {"dtick": "D1", "ticks": "outside", "ticklen": 3, "tickcolor": "#bbb", "showgrid": True,
             "gridcolor": MINOR_GRID}
    for mantissas in MANTISSAS:
        inside = [m * 10.0 ** k for k in range(low, high + 1) for m in mantissas
                  if lo * (1 - 1e-9) <= m * 10.0 ** k <= hi * (1 + 1e-9)]
        if len(inside) >= 2:
            vals = [float(f"{m}e{k}") for k in range(low - TICK_MARGIN, high + TICK_MARGIN + 1) for m in mantissas]
            return {"tickmode": "array", "tickvals": vals, "ticktext": [tick_label(x) for x in vals],
                    **({"minor": minor} if len(mantissas) < 9 else {})}
    step = float(f"{(hi - lo) / 3:.0e}") if hi > lo else 10.0 ** (low - 1)
    return {"tickmode": "linear", "tick0": 0, "dtick": f"L{step:g}"}


def axis_layouts(title: str) -> dict:
    """An axis's plotly.js attributes for each scale the page's switch offers, {"linear": ..., "log":
    ...}: its title in lines that fit (`axis_title`) with room made for them (automargin); a panel's
    `log_ticks` complete the log one."""
    base = {"title": {"text": axis_title(title), "font": {"size": TITLE_FONT}}, "automargin": True,
            "zeroline": False}
    # a log axis's labelled ticks are marked (6 px) so their labels clear the shorter minor ticks (3 px)
    return {"linear": {**base, "type": "linear"},
            "log": {**base, "type": "log", "ticks": "outside", "ticklen": 6, "tickcolor": "#888"}}


def _panel_ticks(traces: list[dict]) -> dict:
    """A panel's `log_ticks` for x and y over every coordinate its traces draw."""
    return {axis: log_ticks([v for t in traces for v in t.get(axis, [])
                             if isinstance(v, (int, float)) and not isinstance(v, bool)]) for axis in ("x", "y")}


def _fmt(value) -> str:
    """A number for hover text: 4 significant digits, thousands separated for integers."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    value = float(value)
    if value.is_integer() and abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def params_text(params: str | dict | float | None) -> str:
    """Hyperparameters (a curve's JSON, or the parsed dict) as `name=value, ...` without the unset ones."""
    if isinstance(params, str) and params:
        try:
            params = json.loads(params)
        except ValueError:
            return params
    if not isinstance(params, dict):
        return ""
    return ", ".join(f"{k}={v}" for k, v in params.items() if v is not None)


#: the method a parameter's declaration says it serves: its doc ends with "(sgd)", "(L-BFGS)" or "(sgd; ...)"
_SERVES = re.compile(r"\(([^();]+)(?:;[^()]*)?\)\s*$")


def _method_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(text).lower())


def used_params(algorithm: str | None, params: str | dict | float | None) -> dict | str | float | None:
    """`params` without the settings the curve's method does not use.

    The rule: where an algorithm declares a `method` parameter with `choices` (`nonprivate`: lbfgs or
    sgd), a parameter whose declaration (core.registry.Param.doc) ends with one of those choices in
    parentheses ("passes over the data (sgd)", "random restarts ... (L-BFGS)"; case, "-" and "; more"
    ignored) serves that method only, and is left out when the curve's `method` is another one. So a
    non-private L-BFGS curve shows method and restarts, not the SGD settings (epochs, batch_size, lr,
    lr_schedule, trace_every) it ignores. Anything else (no such declaration, an unknown algorithm, a
    plugin that does not load) is returned as given."""
    if isinstance(params, str) and params:
        try:
            params = json.loads(params)
        except ValueError:
            return params
    if not isinstance(params, dict) or "method" not in params or not isinstance(algorithm, str):
        return params
    try:
        declared = {p.name: p for p in ALGORITHMS[algorithm].params}
    except Exception:  # noqa: BLE001 - a plugin that does not load here: its hover shows every setting
        return params
    method = declared.get("method")
    if method is None or not method.choices:
        return params
    methods = {_method_key(c) for c in method.choices}
    used = _method_key(params["method"])
    out = {}
    for name, value in params.items():
        serves = _SERVES.search(declared[name].doc) if name in declared else None
        serves = _method_key(serves.group(1)) if serves else ""
        if serves in methods and serves != used:
            continue
        out[name] = value
    return out


HOVER_WIDTH = 52  # characters per hover line: a panel is ~400 px wide at its narrowest


def _wrapped(text: str, width: int = HOVER_WIDTH) -> str:
    """`text` (comma-separated items) broken into lines of at most `width` characters, HTML-escaped."""
    lines, line = [], ""
    for item in text.split(", "):
        if line and len(line) + 2 + len(item) > width:
            lines.append(line + ",")
            line = item
        else:
            line = f"{line}, {item}" if line else item
    lines.append(line)
    return "<br>  ".join(escape(x) for x in lines)


def _panel_title(view: View, keys: tuple) -> str:
    parts = []
    for column, value in zip(view.panels, keys):
        if column == "epsilon":
            parts.append("non-private" if pd.isna(value) else f"ε = {value:g}")
        else:
            parts.append(str(value))
    return " · ".join(parts)


def _panels(part: pd.DataFrame, view: View) -> list[tuple[tuple, pd.DataFrame]]:
    """(panel keys, rows) per panel in table order. With epsilon among the panel columns, the
    non-private rows (epsilon empty) join every private panel of their other keys."""
    if "epsilon" not in view.panels:
        return [(keys if isinstance(keys, tuple) else (keys,), rows)
                for keys, rows in part.groupby(list(view.panels), sort=False, dropna=False)]
    private, public = part[part["epsilon"].notna()], part[part["epsilon"].isna()]
    if private.empty:
        return [(keys, rows) for keys, rows in part.groupby(list(view.panels), sort=False, dropna=False)]
    out = []
    others = [c for c in view.panels if c != "epsilon"]
    for keys, rows in private.groupby(list(view.panels), sort=False):
        same = dict(zip(view.panels, keys))
        mask = np.ones(len(public), dtype=bool)
        for column in others:
            mask &= (public[column] == same[column]).to_numpy()
        out.append((keys, pd.concat([rows, public[mask]])))
    return sorted(out, key=lambda item: tuple(str(k) if c != "epsilon" else float(k)
                                              for c, k in zip(view.panels, item[0])))


def _xs(line: pd.DataFrame, view: View) -> np.ndarray:
    return x_epsilon(line) if view.x == "epsilon" else line[view.x].to_numpy(dtype=float)


def _hover(row: pd.Series, view: View, metric: str, x: float, mean: float, panel: str) -> str:
    """The hover text of one point: where it is, its mean and interval over seeds, how its
    hyperparameters were chosen and what its guarantee covers."""
    name = escape(str(row["label"]))
    where = f"{X_NAMES.get(view.x, view.x)} = {_fmt(x)}"
    if view.x == "epsilon" and pd.isna(row.get("epsilon")):
        where = "non-private"
    elif view.x == "epsilon" and np.isfinite(row.get("eps_end_to_end", np.nan)):
        where += f" end to end (target per run {row['epsilon']:g})"
    elif view.x != "epsilon" and pd.notna(row.get("epsilon")):
        where += f" · ε = {row['epsilon']:g}"
    seeds = int(row["count"]) if pd.notna(row.get("count")) else 0
    ci = f" (95% CI {_fmt(row['ci_low'])} – {_fmt(row['ci_high'])})" if pd.notna(row.get("ci_low")) else ""
    lines = [f"<b>{name}</b> · {escape(panel)}", where,
             f"{escape(metric)}: {_fmt(row['mean'])}{ci}, {seeds} seed{'s' if seeds != 1 else ''}"]
    if mean != row["mean"]:
        lines.append(f"▽ {_fmt(row['mean'])}, drawn at the floor {_fmt(mean)} of the log axis (a mean ≤ 0 has no log)")
    chosen = params_text(used_params(row.get("algorithm"), row.get("params")))
    if chosen:
        k = row.get("candidates")
        among = f" among {int(k)} candidates" if pd.notna(k) and int(k) > 1 else ""
        by = row.get("selected_by")
        lines.append(f"hyperparameters: {_wrapped(chosen)}")
        if pd.notna(by) and (among or str(by).startswith("private")):
            lines.append(f"selected by {escape(str(by))}{among}")
    claim = row.get("dp_claim")
    if isinstance(claim, str) and claim:
        lines.append(f"guarantee: {_wrapped(claim.replace('; ', ', '))}")
    if isinstance(row.get("claim_mark"), str) and row["claim_mark"]:
        lines.append(f"claims marked here: {escape(row['claim_mark'])}")
    return "<br>".join(lines)


def _colour_hex(colours: dict, label: str) -> str:
    return matplotlib.colors.to_hex(colours[label])


def interactive_figure(shown: pd.DataFrame, view: View, metric: str, *, title: str, algorithm_order: list[str],
                       group_of: GroupOf, figure_id: str, reference: str | None = None,
                       reference_curve: str | None = None) -> dict | None:
    """The JSON-able description of one interactive figure, or None when no row has `metric`.

    {"id", "title", "x_title", "y_title", "x_log", "y_log", "legend": [{"name", "colour", "dash",
    "filled", "symbol" (the plotly.js marker symbol of the entry's line traces), "marker" (False: a line
    without markers), "key" (True: explains a marker, hides nothing)}], "panels": [{"title", "traces":
    [plotly.js trace, ...]}]}. A mean <= 0 on a log axis is drawn at the panel's floor with
    `FLOOR_SYMBOL` in place of its curve's marker (the trace's marker.symbol is then a list), its hover
    says so, and the legend gets the `FLOOR_ENTRY` key. A band trace (fill
    between the 95% interval edges, no hover) precedes its line and shares its `legendgroup`, so
    hiding a legend entry hides both. `reference`, `reference_curve`: the figure's options of the
    same names (a paper's rate fitted per panel, `_rate_traces`).
    """
    part = shown[shown["metric"] == metric] if "metric" in shown else shown.iloc[0:0]
    if part.empty:
        return None
    labels = label_order(part, algorithm_order)
    colours = colours_for(labels)
    log_y = metric in LOG_METRICS or view.x in ("n_train", "n_features")
    nonprivate_labels = [lab for lab in labels if part.loc[part["label"] == lab, "epsilon"].isna().all()]
    names = {lab: legend_name(part[part["label"] == lab], lab) for lab in labels if lab not in nonprivate_labels}
    legend: dict[str, dict] = {}
    panels = []
    x_private = _xs(part[part["epsilon"].notna()], view) if view.x == "epsilon" else np.array([])
    for keys, panel in _panels(part, view):
        name = _panel_title(view, keys)
        floor = log_floor(panel, metric if metric in LOG_METRICS else
                                ("optimality_gap" if log_y else metric))
        traces = []
        for label in labels:
            mine = panel[panel["label"] == label]
            if mine.empty:
                continue
            for line_keys, line in (mine.groupby(list(view.lines), sort=True, dropna=False) if view.lines
                                    else [((), mine)]):
                traces += _line_traces(line, view, metric, floor, name, label, colours, nonprivate_labels,
                                       x_private, line_keys, group_of, legend, names)
        traces += _majority_trace(panel, view, metric, legend)
        if reference and metric in RATES[reference].metrics:
            traces += _rate_traces(panel, view, reference, reference_curve, legend)
        panels.append({"title": name, "traces": traces, "log_ticks": _panel_ticks(traces)})
    return {"id": figure_id, "title": title, "x_title": view.x_title, "y_title": y_title(metric),
            "x_log": view.x_log, "y_log": bool(log_y), "panels": panels,
            "axes": {"x": axis_layouts(view.x_title), "y": axis_layouts(y_title(metric))},
            "legend": sorted(legend.values(), key=lambda e: bool(e.get("key")))}  # keys last, the rest as met


def _line_traces(line: pd.DataFrame, view: View, metric: str, floor: float | None, panel: str, label: str,
                 colours: dict, nonprivate_labels: list[str], x_private: np.ndarray, line_keys,
                 group_of: GroupOf, legend: dict, names: dict[str, str] | None = None) -> list[dict]:
    """The band and line traces of one curve, its legend entry and its line style's key (added to
    `legend`). One entry per method (`names`: figures.style.legend_name, the caveats all its points
    share), as in the PNG: where its curves differ in line style, its swatch is a square of its colour
    and the style key says what each line style means."""
    colour = _colour_hex(colours, label)
    xs = _xs(line, view)
    order = np.argsort(xs, kind="stable")
    line, xs = line.iloc[order], xs[order]
    mean, lo, hi, at_floor = band(line, metric, floor)
    private = line["epsilon"].notna().any()
    if private:
        style, filled, suffix = claim_status(line)
        entry = (names or {}).get(label) or (f"{label} — {suffix}" if suffix else label)
        if view.lines == ("epsilon",):
            entry = f"{label}, ε = {line['epsilon'].iloc[0]:g}" + (f" — {suffix}" if suffix else "")
        dash, symbol = DASHES[style], "circle" if filled else "circle-open"
        meaning = claim_meaning(line)
    else:
        entry, dash, symbol, meaning = label, "dash", "square-open", "non-private"
        if len(nonprivate_labels) > 1:
            symbol = ["square-open", "diamond-open", "x-thin-open", "triangle-up-open"][
                nonprivate_labels.index(label) % 4]
    _style_key(legend, meaning)
    groups = [group_of(row) for _, row in line.iterrows()]
    hovers = [_hover(row, view, metric, x, m, panel) for (_, row), x, m in zip(line.iterrows(), xs, mean)]
    if view.x == "epsilon" and not private:  # a horizontal line across the private points' range
        span = (x_private.min(), x_private.max()) if x_private.size else (0.01, 10.0)
        xs = np.geomspace(span[0], span[1], 5)
        mean, lo, hi = (np.full(5, v[0]) for v in (mean, lo, hi))
        groups, hovers, at_floor = groups[:1] * 5, hovers[:1] * 5, np.repeat(at_floor[:1], 5)
    method_entry(legend, entry, colour, dash, symbol)
    if at_floor.any():
        legend.setdefault(FLOOR_ENTRY, {"name": FLOOR_ENTRY, "colour": FLOOR_COLOUR, "dash": "none", "filled": False,
                                        "symbol": FLOOR_SYMBOL, "group": FLOOR_ENTRY, "key": True})
    x_list = [float(x) for x in xs]
    band_trace = {"type": "scatter", "mode": "lines", "x": x_list + x_list[::-1],
                  "y": [float(v) for v in hi] + [float(v) for v in lo[::-1]], "fill": "toself",
                  "fillcolor": colour, "opacity": BAND_OPACITY, "line": {"width": 0}, "hoverinfo": "skip",
                  "legendgroup": entry, "showlegend": False, "meta": "band"}
    line_trace = {"type": "scatter", "mode": "lines+markers", "x": x_list, "y": [float(v) for v in mean],
                  "line": {"color": colour, "dash": dash, "width": 2},
                  "marker": {"symbol": symbol, "size": 7, "color": colour,
                             "line": {"color": colour, "width": 1.5}},
                  "text": hovers, "hovertemplate": "%{text}<extra></extra>", "customdata": groups,
                  "legendgroup": entry, "showlegend": False, "name": entry}
    if view.x == "step" and len(x_list) > 30:  # long traces: markers would hide the line
        line_trace["mode"] = "lines"
    if at_floor.any():  # a mean <= 0 on a log axis: a ▽ at the floor instead of the curve's marker, as in the PNG
        line_trace["marker"]["symbol"] = [FLOOR_SYMBOL if low else symbol for low in at_floor]
        plain = 7 if line_trace["mode"] == "lines+markers" else 0  # a long trace: only its ▽ get markers
        line_trace["mode"] = "lines+markers"
        line_trace["marker"]["size"] = [9 if low else plain for low in at_floor]
    marks = _claim_mark_traces(line, xs, mean, colour, entry, groups) if private else []
    return [band_trace, line_trace, *marks]


def _claim_mark_traces(line: pd.DataFrame, xs: np.ndarray, mean: np.ndarray, colour: str, entry: str,
                       groups: list) -> list[dict]:
    """Stars where a claim holds with significance at a point, crosses where it fails (column
    claim_mark, experiment.verdicts.with_marks: "+id" / "-id", several joined by ", "), as the PNG
    marks them (figures.epsilon.metric_over_epsilon); they hide with their curve."""
    if "claim_mark" not in line:
        return []
    marks = line["claim_mark"].fillna("").astype(str).tolist()
    out = []
    for sign, symbol, size, verb in (("+", "star", 15, "holds"), ("-", "x", 11, "fails")):
        at = [i for i, text in enumerate(marks) if any(m.strip().startswith(sign) for m in text.split(",") if m)]
        if not at:
            continue
        ids = [", ".join(m.strip()[1:] for m in marks[i].split(",") if m.strip().startswith(sign)) for i in at]
        out.append({"type": "scatter", "mode": "markers", "x": [float(xs[i]) for i in at],
                    "y": [float(mean[i]) for i in at], "legendgroup": entry, "name": entry, "showlegend": False,
                    "marker": {"symbol": symbol, "size": size, "color": colour, "line": {"color": "black", "width": 0.8}},
                    "customdata": [groups[i] for i in at], "meta": "claim",
                    "text": [f"claim {escape(c)} {verb} here (paired over seeds, significant after Bonferroni)"
                             for c in ids],
                    "hovertemplate": "%{text}<extra></extra>"})
    return out


MAJORITY = "majority class of the test split"
RATE_COLOUR = "#737373"
#: matplotlib mathtext of curves.RATES formulas -> plain text
MATHTEXT = (("$", ""), ("\\,", " "), ("\\log", "log"), ("\\delta", "δ"), ("\\varepsilon", "ε"),
            ("\\sqrt", "√"), ("^2", "²"), ("{", "("), ("}", ")"))


def plain_formula(formula: str) -> str:
    for old, new in MATHTEXT:
        formula = formula.replace(old, new)
    return formula


def method_entry(legend: dict, entry: str, colour: str, dash: str, symbol: str) -> dict:
    """A method's legend entry, added once: its curve's line and marker, or, once two of its curves
    differ in either, a filled square of its colour (what each style means is the style key's)."""
    known = legend.setdefault(entry, {"name": entry, "colour": colour, "dash": dash, "filled": symbol == "circle",
                                      "symbol": symbol})
    if (known["dash"], known["symbol"]) != (dash, symbol) and known["symbol"] != "square":
        known.update({"dash": "none", "symbol": "square", "filled": True})
    return known


def _style_key(legend: dict, meaning: str) -> None:
    """The style key's entry of a line style (figures.style.STYLE_MEANINGS), once per figure: a grey
    swatch with what the style means; it explains, hides nothing."""
    style, filled, text = STYLE_MEANINGS[meaning]
    symbol = "square-open" if filled is None else ("circle" if filled else "circle-open")
    legend.setdefault(f"style:{meaning}", {"name": text, "colour": KEY_COLOUR, "dash": DASHES[style],
                                           "filled": bool(filled), "symbol": symbol, "group": f"style:{meaning}",
                                           "key": True})


def _rate_traces(panel: pd.DataFrame, view: View, name: str, curve: str | None, legend: dict) -> list[dict]:
    """A paper's rate (curves.RATES[name]) with its constants fitted to one curve of the panel
    (curves.fit_rate), grey long dashes, as figures.references.draw_rate draws it: one line over epsilon, or one
    per epsilon over n or d."""
    fitted = fit_rate(panel, name, curve)
    if fitted is None:
        return []
    rows = reference_curve(panel, fitted.rate, fitted.curve)
    entry = f"{plain_formula(fitted.rate.formula)} ({fitted.rate.source}), fitted to {fitted.curve}"
    legend.setdefault(entry, {"name": entry, "colour": RATE_COLOUR, "dash": REFERENCE_DASHES["rate"][0],
                              "filled": False, "marker": False})
    names = "ab" if len(fitted.constants) > 1 else "c"
    constants = ", ".join(f"{k} = {v:.3g}" for k, v in zip(names, fitted.constants))
    hover = f"{escape(entry)}<br>{constants}<extra></extra>"
    parts = [rows] if view.x == "epsilon" else [part for _, part in rows.groupby("epsilon", sort=True)]
    traces = []
    for part in parts:
        part = part.iloc[np.argsort(_xs(part, view), kind="stable")]
        traces.append({"type": "scatter", "mode": "lines", "x": [float(x) for x in _xs(part, view)],
                       "y": [float(v) for v in fitted.values(part)], "legendgroup": entry, "name": entry,
                       "line": {"color": RATE_COLOUR, "dash": REFERENCE_DASHES["rate"][1], "width": 1.5},
                       "showlegend": False,
                       "meta": "rate", "hovertemplate": hover})
    return traces


def _majority_trace(panel: pd.DataFrame, view: View, metric: str, legend: dict) -> list[dict]:
    """The majority-class accuracy of the panel's data set (column `majority_accuracy`, added by
    experiment.render.figure_tables for `baseline: majority`) as a grey loosely dotted line across the
    panel, as the PNG draws it."""
    if metric != "accuracy" or "majority_accuracy" not in panel or panel["majority_accuracy"].isna().all():
        return []
    xs = _xs(panel[panel["epsilon"].notna()] if view.x == "epsilon" else panel, view)
    xs = xs[np.isfinite(xs)]
    if not xs.size:
        return []
    rate = float(panel["majority_accuracy"].dropna().iloc[0])
    legend.setdefault(MAJORITY, {"name": MAJORITY, "colour": "#888888", "dash": REFERENCE_DASHES["majority"][0],
                                 "filled": False, "marker": False})
    return [{"type": "scatter", "mode": "lines", "x": [float(xs.min()), float(xs.max())], "y": [rate, rate],
             "line": {"color": "#888888", "dash": REFERENCE_DASHES["majority"][1], "width": 1.5},
             "legendgroup": MAJORITY,
             "name": MAJORITY, "showlegend": False, "meta": "baseline",
             "hovertemplate": f"accuracy of always predicting the test split's majority class: {rate:.4g} "
                              f"(mean over the seeds' splits)<extra></extra>"}]


AUDIT_COLOURS = {"valid": "#1f77b4", "other": "#d62728"}


def audit_figure(audits: pd.DataFrame, audit_ids: list[int], figure_id: str = "audit") -> dict | None:
    """Claimed ε (x) against the audits' 95% lower bounds (y): multi-run (circles) and one-run
    (crosses), blue for a valid claim, red for the paper's only or none, and the diagonal (a bound
    above it refutes the claim), as figures.audit.audit_figure's left panel. customdata: the audit's row
    id (`audit_ids`, aligned with `audits`)."""
    data = audits.assign(_id=audit_ids).dropna(subset=["claimed_epsilon"])
    if data.empty:
        return None
    data = audit_rows(data)
    top = float(max(data["claimed_epsilon"].max(), data["epsilon_lower_bound"].max())) * 1.08
    traces = [{"type": "scatter", "mode": "lines", "x": [0, top], "y": [0, top], "hoverinfo": "skip",
               "line": {"color": "#555", "width": 1}, "legendgroup": "audited = claimed ε",
               "name": "audited = claimed ε", "showlegend": False}]
    legend = {"audited = claimed ε": {"name": "audited = claimed ε (a bound above it refutes the claim)",
                                      "colour": "#555", "dash": "solid", "filled": False, "group": "audited = claimed ε"}}
    for method, symbol in (("multi-run", "circle"), ("one-run", "x")):
        for kind in ("valid", "other"):
            pick = data[(data["method"] == method) & ((data["claim"] == "valid") == (kind == "valid"))]
            if pick.empty:
                continue
            name = f"{'valid claim' if kind == 'valid' else 'paper-only / no claim'}: {method} bound"
            hovers = [_audit_hover(row) for _, row in pick.iterrows()]
            traces.append({"type": "scatter", "mode": "markers", "x": pick["claimed_epsilon"].astype(float).tolist(),
                           "y": pick["epsilon_lower_bound"].astype(float).tolist(),
                           "marker": {"symbol": symbol, "size": 9, "color": AUDIT_COLOURS[kind], "opacity": 0.8},
                           "text": hovers, "hovertemplate": "%{text}<extra></extra>",
                           "customdata": [int(i) for i in pick["_id"]], "legendgroup": name, "name": name,
                           "showlegend": False})
            legend[name] = {"name": name, "colour": AUDIT_COLOURS[kind], "dash": "none",
                            "filled": symbol == "circle", "symbol": symbol}
    y_name = "audited lower bound on ε (95%)"
    return {"id": figure_id, "title": "audited lower bound against claimed ε", "x_title": "claimed ε",
            "y_title": y_name, "x_log": False, "y_log": False,
            "axes": {"x": axis_layouts("claimed ε"), "y": axis_layouts(y_name)},
            "legend": list(legend.values()),
            "panels": [{"title": "all audits", "traces": traces, "log_ticks": _panel_ticks(traces)}]}


def _audit_hover(row: pd.Series) -> str:
    threat = THREAT_SHORT.get(str(row.get("threat")), str(row.get("threat")))
    lines = [f"<b>{escape(str(row['label']))}</b>", f"{escape(str(row['method']))}, adversary sees the {threat}",
             f"claimed ε = {_fmt(row['claimed_epsilon'])} ({escape(str(row['claim']))})",
             f"audited lower bound (95%): {_fmt(row['epsilon_lower_bound'])}"]
    est = row.get("epsilon_estimate")
    if pd.notna(est) and np.isfinite(float(est)):
        lines.append(f"estimate (not a bound): {_fmt(est)} [{_fmt(row.get('epsilon_estimate_low'))}, "
                     f"{_fmt(row.get('epsilon_estimate_high'))}]")
    if pd.notna(row.get("trials")):
        lines.append(f"trials: {_fmt(row['trials'])} a side")
    return "<br>".join(lines)


__all__ = ["audit_figure", "axis_layouts", "axis_title", "interactive_figure", "log_ticks", "params_text",
           "tick_label", "used_params", "y_title"]
