"""`dpbench report`: a static site, one page per experiment, from the stored tables only.

Each page is generated from the tables the PNG figures come from (results/<exp>/curves.csv,
trace_curves.csv.gz, runs.csv.gz, audits.csv, claims.csv, manifest.json; read by
dpbench.experiment.stored), never from models or cells:

* every figure of the spec as interactive plotly.js charts (`charts`; the rows of
  `experiment.render.figure_tables`, the same the PNG draws, with the majority-class line, the
  paper's fitted rate and the marks of claims that hold or fail significantly at a point, from the
  claims tested on the same selection), or the PNG for a figure kind without a `View`;
* a click on a point opens its *group*: the runs selected for that curve point
  (`curves.selected_by_metric` on runs.csv.gz, the selection that made curves.csv), the candidate
  hyperparameters with their mean validation score, and each run's privacy ledger (mechanism,
  adjacency, sensitivity, accountants and epsilon spent, sigma, steps, sampling, noise-free share,
  claim and reason; identical ledgers are stored once);
* the audits table and figure, the claims table, and the provenance of the results (manifest.json:
  commit, spec hash, package versions, data SHA-256s, cell and wall time).

The site is static and offline: pages load plotly.js (the copy inside the installed `plotly`
package, written once to <out>/assets/) and the page script by relative paths, the data sits in the
page as JSON; nothing is fetched at view time and no server is needed (file:// works).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from html import escape
from importlib import resources
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from dpbench.analysis import curves as curves_mod
from dpbench.core.errors import DpbenchError
from dpbench.core.store import atomic_write_bytes_via, atomic_write_text
from dpbench.experiment import layout, render
from dpbench.experiment import stored as stored_tables
from dpbench.experiment import verdicts as verdicts_mod
from dpbench.report import charts as rf
from dpbench.spec.experiment import DEFAULT_PROFILE, Experiment

ASSETS = ("report.js", "report.css")  # dpbench/report/assets/, copied to <out>/assets/
PLOTLY_FILE = "plotly.min.js"
#: ledger fields shown first (the rest follow under "every field"), in this order
LEDGER_HEAD = ("mechanism", "adjacency", "claim", "claim_reason", "target_epsilon", "delta", "epsilon_spent",
               "sensitivity", "noise_multiplier", "sigma", "noise_std", "steps", "sampling", "noise_free_fraction",
               "paper_claim")


class ReportError(DpbenchError):
    """An experiment has nothing stored to report."""


@dataclass
class Page:
    """One written experiment page: where, how big, what it holds."""

    experiment: str
    path: Path
    bytes: int
    figures: int
    panels: int
    groups: int
    ledgers: int
    audits: int
    claims: int
    seconds: float


def page_name(exp: Experiment) -> str:
    return f"{exp.name}.html" if exp.profile == DEFAULT_PROFILE else f"{exp.name}-{exp.profile}.html"


def _key(label, dataset, model, epsilon) -> tuple:
    eps = None if epsilon is None or (isinstance(epsilon, float) and math.isnan(epsilon)) else round(float(epsilon), 12)
    return (str(label), str(dataset), str(model), eps)


def _json_value(value):
    """A table value as JSON: NaN/None -> None, ±inf -> "inf"/"-inf", numpy scalars -> Python, text
    kept as text."""
    if value is None:
        return None
    if isinstance(value, (float, np.floating)):
        return None if np.isnan(value) else float(value) if np.isfinite(value) else str(float(value))
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


def _finite(value):
    """A parsed ledger with every non-finite number (NaN, inf: valid in the stored JSON, not in the
    page's) written as its text ("nan", "inf")."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class Groups:
    """The point groups of one experiment (a curve point: label, data set, model, epsilon, metric)
    with the runs selected for it, their candidates and their ledgers (deduplicated)."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.ledgers: list[dict] = []
        self._ledger_ids: dict[str, int] = {}
        self._by_key: dict[tuple, int] = {}
        self._any_metric: dict[tuple, int] = {}

    def ledger_id(self, text) -> int | None:
        if not isinstance(text, str) or not text:
            return None
        if text not in self._ledger_ids:
            self._ledger_ids[text] = len(self.ledgers)
            self.ledgers.append(_finite(json.loads(text)))
        return self._ledger_ids[text]

    def add(self, metric: str, key: tuple, record: dict) -> None:
        self._by_key[(metric, *key)] = len(self.records)
        self._any_metric.setdefault(key, len(self.records))
        self.records.append(record)

    def of(self, row: pd.Series) -> int | None:
        """The group of a curves or trace-curves row (a trace metric without a selection of its own
        takes the group of another metric at the same point: the same selected fits)."""
        key = _key(row["label"], row["dataset_label"], row["model_label"], row.get("epsilon"))
        found = self._by_key.get((row.get("metric"), *key))
        return found if found is not None else self._any_metric.get(key)


def _candidates(runs: pd.DataFrame, score: str) -> dict[tuple, tuple[str, list[dict]]]:
    """Per curve point (curves.GROUP): the hyperparameters every candidate shares, and every
    combination run there (only what sets it apart) with its number of runs and mean validation
    `score` (what non-private selection ranks)."""
    out: dict[tuple, tuple[str, list[dict]]] = {}
    if runs.empty:
        return out
    has_score = score in runs
    for keys, group in runs.groupby(curves_mod.GROUP, dropna=False, sort=False):
        combos = {params: json.loads(params) for params in sorted(group["params"].unique())}
        shared = {k: v for k, v in next(iter(combos.values())).items()
                  if all(k in c and c[k] == v for c in combos.values())} if len(combos) > 1 else {}
        rows = []
        for params, part in group.groupby("params", sort=True):
            own = {k: v for k, v in combos[params].items() if k not in shared}
            value = part[score].mean() if has_score else np.nan
            rows.append({"params": rf.params_text(own) or "(none)", "params_json": params,
                         "runs": int(len(part)), "score": _json_value(value)})
        out[_key(*keys)] = (rf.params_text(shared), rows)
    return out


def build_groups(exp: Experiment, runs: pd.DataFrame, selected: dict[str, pd.DataFrame],
                 curves: pd.DataFrame) -> Groups:
    """The point groups of `exp`: `runs` is its runs table (restricted to the spec, `in_spec`),
    `selected` the runs `curves.selected_by_metric` keeps for each metric (the selection that made
    curves.csv); what the curve's guarantee covers and the end-to-end epsilon of private selection
    are the committed curves.csv's (`curves`, what the figures draw)."""
    groups = Groups()
    if runs.empty:
        return groups
    drawn = {(row["metric"], *_key(row["label"], row["dataset_label"], row["model_label"], row["epsilon"])): row
             for row in curves.to_dict("records")}
    candidates: dict[str, dict] = {}
    for metric, chosen in selected.items():
        if chosen.empty or metric not in chosen:
            continue
        score = curves_mod.selection_for(metric, exp.selection)
        if score not in candidates:
            candidates[score] = _candidates(runs, score)
        for keys, part in chosen.groupby(curves_mod.GROUP, dropna=False, sort=False):
            key = _key(*keys)
            chosen_params = set(part["params"])
            shared, combos = candidates[score].get(key, ("", []))
            cands = [{**c, "selected": c["params_json"] in chosen_params} for c in combos]
            for c in cands:
                c.pop("params_json")
            first = part.iloc[0]
            curve = drawn.get((metric, *key), {})
            several = len(chosen_params) > 1  # private selection: each seed's own winner
            runs_out = [{"rep": int(run["rep"]), "value": _json_value(run[metric]),
                         **({"params": rf.params_text(run["params"])} if several else {}),
                         "ledger": groups.ledger_id(run.get("privacy"))}
                        for run in part.sort_values("rep").to_dict("records")]
            groups.add(metric, key, {
                "label": key[0], "dataset": key[1], "model": key[2], "epsilon": key[3], "metric": metric,
                "selected_by": _json_value(first.get("selected_by")), "score": score,
                "curve_claim": _json_value(curve.get("dp_claim")) or None,
                "dp_check": _json_value(curve.get("dp_check")) or None,  # why dpbench's own checks turned a claim
                "eps_end_to_end": _json_value(curve.get("eps_end_to_end")),
                "candidates": cands, "shared_params": shared, "runs": runs_out})
    return groups


def _table_html(table: pd.DataFrame, *, css: str, row_ids: list[int] | None = None, limit_cols: list[str] | None = None
                ) -> str:
    """An HTML table of a data frame (cells escaped, empty for NaN), horizontally scrollable (the audits)."""
    if limit_cols is not None:
        table = table[[c for c in limit_cols if c in table]]
    head = "".join(f"<th>{escape(str(c))}</th>" for c in table.columns)
    body = []
    for i, (_, row) in enumerate(table.iterrows()):
        cells = []
        for column, value in row.items():
            value = _json_value(value)
            text = "" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
            cells.append(f"<td>{escape(text)}</td>")
        attr = f' data-audit="{row_ids[i]}" tabindex="0"' if row_ids is not None else ""
        body.append(f"<tr{attr}>{''.join(cells)}</tr>")
    return (f'<div class="table-wrap"><table class="{css}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


AUDIT_COLUMNS = ["label", "algorithm", "dataset", "model", "canary", "threat", "method", "claim", "adjacency",
                 "claimed_epsilon", "epsilon_lower_bound", "confidence", "ceiling", "broken", "trials",
                 "epsilon_estimate", "epsilon_estimate_low", "epsilon_estimate_high", "estimate"]
#: the claims table's columns (claims.csv, dpbench.analysis.claims.verdicts.Verdict.row): key, header,
#: what it means (the header's hover and the legend under the table)
CLAIM_FIELDS = (
    ("id", "claim", "The claim's id in the experiment's spec (its claims: list). The sentence it tests, "
                    "where it comes from and why it is encoded so are under “the paper's words”."),
    ("verdict", "verdict", "reproduced: the relation holds on the panels its quantifier requires (Holm-adjusted "
                           "p < 0.05); contradicted: it fails significantly; no difference beyond m: the "
                           "difference is shown to lie within the metric's margin m; undecided: none of these "
                           "at the seeds run; vacuous: a screen left nothing that could support it."),
    ("claim", "relation tested", "The sentence as dpbench tests it: a relation between curves (or a trend over ε), "
                                 "with its margin, on the panels (data set · model) its quantifier names."),
    ("where", "deciding panel", "The panel the verdict turns on (and the ε points a screen left out): when "
                                "reproduced, the weakest of the panels that must hold; when contradicted, the "
                                "strongest evidence against; else the weakest support. For an audit claim, what "
                                "the audits found."),
    ("effect", "effect [95 % CI]", "On the deciding panel: the median over seeds of the per-seed statistic (a "
                                   "paired difference, a slope, a spread), with its distribution-free 95 % "
                                   "interval."),
    ("p", "p-value (Holm)", "The p-value the verdict rests on, Holm-adjusted over every hypothesis of the "
                            "experiment: that the claim holds (reproduced, undecided), that it fails "
                            "(contradicted), or that it differs by no more than m (no difference beyond m). "
                            "Below 0.05 decides. Every p-value is under “the paper's words”."),
    ("seeds", "seeds used / needed", "Seeds on the deciding panel; for an undecided claim, after the slash, about "
                                     "how many seeds the observed effects, held fixed, would need to decide it "
                                     "(∞: they never would)."),
)
#: claims.csv's adjusted p-value of each hypothesis, and the verdict that rests on it
CLAIM_P = (("holds", "p_holm"), ("fails", "p_contra_holm"), ("no difference beyond m", "p_equiv_holm"))
VERDICT_P = {"contradicted": "p_contra_holm", "no difference beyond m": "p_equiv_holm"}


def _number(value, digits: int = 4) -> str:
    """A table number: `digits` significant digits, "–" for none, "∞" for infinity."""
    value = _json_value(value)
    if value is None or value == "":
        return "–"
    if isinstance(value, str):
        return {"inf": "∞", "-inf": "−∞"}.get(value, value)
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def _slug(text: str) -> str:
    return "-".join(str(text).split())


def _claim_cells(row: dict) -> dict[str, str]:
    """The HTML of each `CLAIM_FIELDS` cell of one claims.csv row (escaped)."""
    verdict = str(row.get("verdict") or "")
    effect = _number(row.get("effect"))
    if _json_value(row.get("ci_low")) is not None:
        effect += f" [{_number(row.get('ci_low'))}, {_number(row.get('ci_high'))}]"
    seeds = _number(row.get("seeds"))
    if verdict == "undecided" and _json_value(row.get("seeds_needed")) is not None:
        seeds += f" / {_number(row.get('seeds_needed'), 3)}"
    words = [("the paper's words", row.get("quote")), ("source", row.get("source")), ("why so", row.get("note")),
             *((f"p-value (Holm): {name}", _number(row.get(column), 3)) for name, column in CLAIM_P
               if _json_value(row.get(column)) is not None),
             ("status", row.get("status"))]
    details = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in words
                      if _json_value(v) not in (None, ""))
    claim = escape(str(row.get("claim") or ""))
    if details:
        claim += f'<details><summary>the paper\'s words</summary><dl>{details}</dl></details>'
    return {"id": f"<code>{escape(str(row.get('id') or ''))}</code>", "verdict": escape(verdict), "claim": claim,
            "where": escape(_number(row.get("where"))), "effect": escape(effect),
            "p": escape(_number(row.get(VERDICT_P.get(verdict, "p_holm")), 3)), "seeds": escape(seeds)}


def claims_html(claims: pd.DataFrame) -> str:
    """The claims table a person reads: plain headers, each explained by its hover (`CLAIM_FIELDS`) and
    by the legend under the table; every cell labelled (data-label) for the stacked layout of narrow
    windows (report.css: the label, then the cell's content, one <div>); the paper's sentence, its source, the encoding note and every adjusted
    p-value folded into the relation's cell (a <details>), so the table fits its column."""
    head = "".join(f'<th scope="col" class="col-{key}" title="{escape(why)}">{escape(label)}</th>'
                   for key, label, why in CLAIM_FIELDS)
    body = []
    for row in claims.to_dict("records"):
        cells = _claim_cells(row)
        verdict = f" verdict-{escape(_slug(row.get('verdict') or ''))}"
        body.append("<tr>" + "".join(f'<td class="col-{key}{verdict if key == "verdict" else ""}" '
                                     f'data-label="{escape(label)}"><div>{cells[key]}</div></td>'
                                     for key, label, _ in CLAIM_FIELDS) + "</tr>")
    legend = "".join(f"<dt>{escape(label)}</dt><dd>{escape(why)}</dd>" for _, label, why in CLAIM_FIELDS)
    return (f'<div class="table-wrap"><table class="claims stack"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>'
            f'<details class="table-legend"><summary>what the columns mean</summary><dl>{legend}</dl></details>')


def _read_csv(path: Path) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: unreadable ({exc}); restore it (git checkout -- {path})") from None


def _static_files(folder: Path, stem: str, out: Path) -> list[str]:
    """The PNG and PDF of a figure that exist, as links relative to the page folder `out`."""
    return [Path(os.path.relpath(folder / f"{stem}.{ext}", out)).as_posix() for ext in ("png", "pdf")
            if (folder / f"{stem}.{ext}").is_file()]


def _provenance(exp: Experiment, manifest: dict | None, folder: Path) -> dict:
    """What made the results: commit, spec, packages, data files, time (manifest.json)."""
    if manifest is None:
        return {"note": f"{folder / 'manifest.json'} is absent: no provenance recorded"}
    git = manifest.get("git") or {}
    last = manifest.get("last_run") or {}
    cells = manifest.get("cells") or {}
    return {"experiment": manifest.get("experiment", exp.name), "profile": manifest.get("profile"),
            "spec": manifest.get("source"), "spec hash": manifest.get("spec_hash"),
            "commit": (git.get("commit") or "unknown") + (" (uncommitted changes)" if git.get("dirty") else ""),
            "written": manifest.get("created"), "python": manifest.get("python"),
            "platform": manifest.get("platform"), "packages": manifest.get("packages") or {},
            "cells": f"{cells.get('finished', '?')} of {cells.get('total', '?')} finished",
            "partial": manifest.get("partial"),
            "cell time (CPU s, sum over cells)": manifest.get("fit_seconds"),
            "last run": (f"{last.get('ran', 0)} cells computed, {last.get('reused', 0)} reused, "
                         f"{last.get('failed', 0)} failed, {last.get('seconds', 0):,.0f} s wall") if last else None,
            "data files (SHA-256)": manifest.get("data") or {},
            "plugins (reference, SHA-256, version)": {p["reference"]: f"{p['sha256']}, {p.get('version') or '-'}"
                                                     for p in manifest.get("plugins") or []}}


def experiment_data(exp: Experiment, results: str | Path, out: Path, *, baseline: bool = True,
                    data_dir: str | None = None) -> dict:
    """Everything one page shows, as JSON-able data (figures, groups, ledgers, audits, claims,
    provenance). Raises ReportError when nothing of the experiment is stored. `baseline`: draw a
    figure's `baseline: majority` line, read from the data sets' test splits in `data_dir`, else from
    the stored majority.csv, as the PNG does (experiment.render.majority_rates; a data set that has
    neither gets no line)."""
    folder = layout.output_folder(exp, results)
    curves = stored_tables.load_curves(exp, results)
    audits = _read_csv(folder / "audits.csv")
    if curves is None and audits is None:
        raise ReportError(f"{exp.name} [{exp.profile}]: no curves.csv or audits.csv under {folder}/; run "
                          f"`dpbench run {exp.source}` first")
    curves = curves if curves is not None else pd.DataFrame(columns=[*curves_mod.GROUP, "metric"])
    traces = stored_tables.load_traces(exp, results)
    traces = pd.DataFrame() if traces is None else stored_tables.complete_traces(traces, curves)
    runs = stored_tables.load_runs(exp, results) if (folder / layout.RUNS_FILE).is_file() else None
    runs = stored_tables.in_spec(exp, runs) if runs is not None else pd.DataFrame()
    selected = curves_mod.selected_by_metric(runs, exp.metrics, exp.selection, exp.select_per) if not runs.empty else {}
    groups = build_groups(exp, runs, selected, curves)
    verdicts = verdicts_mod.claims_from(exp, selected, audits, data_dir, results=results) if selected else []
    order = [a.label for a in exp.algorithms]
    note = str(curves["partial"].dropna().iloc[0]) if "partial" in curves and curves["partial"].notna().any() else ""
    figures = []
    for shown in render.figure_tables(exp, curves, traces, note=note, baseline=baseline, data_dir=data_dir,
                                        marks=verdicts_mod.significant_marks(verdicts), results=results):
        fig = shown.figure
        entry = None
        if shown.kind.view is not None and not shown.table.empty:
            options = dict(fig.options)
            entry = rf.interactive_figure(shown.table, shown.kind.view, fig.metric, title=shown.title,
                                          algorithm_order=order, group_of=groups.of, figure_id=fig.name,
                                          reference=options.get("reference"),
                                          reference_curve=options.get("reference_curve"))
        if entry is None:
            entry = {"id": fig.name, "title": shown.title, "panels": [],
                     "empty": "no stored rows for this figure" if shown.table.empty else
                     f"figure kind {fig.kind!r} has no interactive view: the static figure is shown"}
        entry["static"] = _static_files(folder, fig.name, out)
        figures.append(entry)
    audit_rows = []
    if audits is not None and not audits.empty:
        audit_rows = [{k: v for k, v in ((k, _json_value(v)) for k, v in row.items()) if v not in (None, "")}
                      for row in audits.to_dict("records")]
        audit_fig = rf.audit_figure(audits, list(range(len(audits))))
        if audit_fig is not None:
            figures.append({**audit_fig, "static": _static_files(folder, "audit", out)})
    claims = _read_csv(folder / "claims.csv")
    manifest = json.loads((folder / "manifest.json").read_text()) if (folder / "manifest.json").is_file() else None
    return {"experiment": exp.name, "profile": exp.profile, "description": exp.description,
            "paper": exp.paper, "figures": figures, "groups": groups.records,
            "ledgers": groups.ledgers, "ledger_head": list(LEDGER_HEAD), "audits": audit_rows,
            "audits_html": _table_html(audits, css="audits", row_ids=list(range(len(audits))),
                                       limit_cols=AUDIT_COLUMNS) if audit_rows else "",
            "claims_html": claims_html(claims) if claims is not None and not claims.empty else "",
            "claims_count": 0 if claims is None else int(len(claims)),
            "verdicts": {} if claims is None or "verdict" not in claims else
            {str(k): int(v) for k, v in claims["verdict"].value_counts().items()},
            "provenance": _provenance(exp, manifest, folder)}


def _script_json(data: dict) -> str:
    """JSON that is safe inside <script type="application/json"> (no "</" can close the element)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="assets/report.css">
<script src="assets/{plotly}"></script>
</head>
<body data-page="experiment">
<header><a class="home" href="index.html">dpbench report</a><h1>{heading}</h1><p class="lead">{lead}</p>
<nav class="toc">{toc}</nav></header>
<main>
<section id="figures"><h2>Figures</h2>
<p class="help">Hover a point for its value, 95% interval over seeds, selected hyperparameters and guarantee;
click it for its privacy ledger. Click a legend entry to hide or show a method. Line style = what the
guarantee covers: solid with filled markers, valid for the curve as drawn; solid with open markers, valid per
run only (hyperparameters selected without privacy, δ ≥ 1/n, or features scaled with their own ranges);
dash-dot, ε claimed by the paper only; dotted, ε not certified; dashed, non-private. ★ / ✕: a claim of the Claims table holds / fails at that
point with significance. ▽: a mean ≤ 0 (a gap of exactly 0) on a log axis, drawn at the panel's floor.</p>
<div id="figure-list"></div></section>
{audits}
{claims}
<section id="provenance"><h2>Provenance</h2><div id="provenance-body"></div></section>
</main>
<aside id="ledger" hidden aria-live="polite"><button type="button" class="close" aria-label="close">×</button>
<div id="ledger-body"></div></aside>
<script type="application/json" id="report-data">{data}</script>
<script src="assets/report.js"></script>
</body>
</html>
"""

INDEX = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dpbench report</title>
<link rel="stylesheet" href="assets/report.css">
</head>
<body data-page="index">
<header><h1>dpbench report</h1>
<p class="lead">One page per experiment: interactive figures, the privacy ledger behind every point, audits,
claims and provenance. Generated by <code>dpbench report</code> from the stored tables.</p></header>
<main>
<div class="table-wrap"><table class="index stack"><thead><tr>{head}</tr></thead><tbody>
{rows}
</tbody></table></div>
</main>
<script>document.body.dataset.ready = "1";</script>
</body>
</html>
"""


def _page_html(exp: Experiment, data: dict) -> str:
    sections = [("figures", "Figures")]
    audits = claims = ""
    if data["audits_html"]:
        sections.append(("audits", "Audits"))
        audits = ('<section id="audits"><h2>Audits</h2><p class="help">Rigorous 95% lower bounds on ε (a bound '
                  'above the claimed ε refutes the claim) and estimates (not bounds). Click a row or a point for '
                  'every field.</p>' + data["audits_html"] + "</section>")
    if data["claims_html"]:
        sections.append(("claims", "Claims"))
        counts = ", ".join(f"{v} {k}" for k, v in data["verdicts"].items())
        claims = (f'<section id="claims"><h2>Claims</h2><p class="help">Each sentence of the paper or README tested '
                  f'with paired statistics over seeds ({escape(counts)}).</p>' + data["claims_html"] + "</section>")
    sections.append(("provenance", "Provenance"))
    toc = " · ".join(f'<a href="#{i}">{t}</a>' for i, t in sections)
    lead = escape(exp.description or "") + (f"<br><span class=\"paper\">{escape(data['paper'])}</span>"
                                            if data.get("paper") else "")
    return PAGE.format(title=escape(f"dpbench · {exp.name}"), heading=escape(f"{exp.name} [{exp.profile}]"),
                       lead=lead, toc=toc, audits=audits, claims=claims, data=_script_json(data),
                       plotly=PLOTLY_FILE)


def write_assets(out: Path) -> None:
    """<out>/assets/: plotly.js from the installed plotly package and the page script and style
    (each rewritten only when its bytes change)."""
    from plotly.offline import get_plotlyjs

    folder = out / "assets"
    folder.mkdir(parents=True, exist_ok=True)
    files = {PLOTLY_FILE: get_plotlyjs().encode()}
    for name in ASSETS:
        files[name] = resources.files("dpbench.report").joinpath("assets", name).read_bytes()
    for name, content in files.items():  # identical bytes leave the file alone (store.atomic_write_bytes_via)
        atomic_write_bytes_via(folder / name, lambda tmp, content=content: Path(tmp).write_bytes(content))


def build(experiments: list[Experiment], results: str | Path = "results", out: str | Path | None = None,
          notify: Callable[[str], None] | None = None, *, baseline: bool = True,
          data_dir: str | None = None, progress: bool = False) -> list[Page]:
    """Write <out>/index.html and one page per experiment (default out: the results folder).

    Every experiment's data is gathered before anything is written, so an experiment with nothing
    stored (ReportError) leaves the site as it was. `baseline`, `data_dir`: `experiment_data`;
    `progress`: a bar over the experiments gathered (seconds each for a paper's).
    """
    out = Path(results if out is None else out)
    gathered = []
    for exp in tqdm(experiments, desc="gathering the report's data", unit="experiment", disable=not progress,
                    leave=False):
        start = time.perf_counter()
        data = experiment_data(exp, results, out, baseline=baseline, data_dir=data_dir)
        gathered.append((exp, data, time.perf_counter() - start))
    out.mkdir(parents=True, exist_ok=True)
    write_assets(out)
    pages = []
    for exp, data, seconds in gathered:
        start = time.perf_counter()
        path = out / page_name(exp)
        text = _page_html(exp, data)
        atomic_write_text(path, text)
        page = Page(experiment=exp.name, path=path, bytes=len(text.encode()),
                    figures=sum(1 for f in data["figures"] if f["panels"]),
                    panels=sum(len(f["panels"]) for f in data["figures"]), groups=len(data["groups"]),
                    ledgers=len(data["ledgers"]), audits=len(data["audits"]), claims=data["claims_count"],
                    seconds=seconds + time.perf_counter() - start)
        pages.append((page, data))
        if notify:
            notify(f"{path}: {page.bytes / 1e6:.2f} MB, {page.figures} interactive figures ({page.panels} panels), "
                   f"{page.groups} points with ledgers ({page.ledgers} distinct), {page.audits} audits, "
                   f"{page.claims} claims ({page.seconds:.1f} s)")
    atomic_write_text(out / "index.html", index_html(pages))
    return [p for p, _ in pages]


#: the index's columns: key, header, what it counts (the header's hover)
INDEX_FIELDS = (
    ("experiment", "experiment", "the experiment's page"),
    ("what", "what", "the spec's description"),
    ("figures", "figures", "interactive figures on the page"),
    ("points", "points", "curve points whose runs and privacy ledgers a click opens"),
    ("audits", "audits", "rows of the audits table"),
    ("claims", "claims", "claims tested, by verdict"),
    ("commit", "commit", "the commit the results were computed at (manifest.json)"),
)


def index_html(pages: list[tuple[Page, dict]]) -> str:
    """index.html: one row per written page (`Page` and its `experiment_data`), every cell labelled
    (data-label) for the stacked layout of narrow windows (report.css)."""
    head = "".join(f'<th scope="col" class="col-{key}" title="{escape(why)}">{escape(label)}</th>'
                   for key, label, why in INDEX_FIELDS)
    rows = []
    for page, data in pages:
        commit = str(data["provenance"].get("commit", ""))[:12]
        verdicts = ", ".join(f"{v} {k}" for k, v in data.get("verdicts", {}).items())
        cells = {"experiment": f'<a class="experiment-link" href="{escape(page.path.name)}">'
                               f'{escape(page.experiment)}</a>',
                 "what": escape(data["description"] or ""), "figures": str(page.figures),
                 "points": str(page.groups), "audits": str(page.audits),
                 "claims": str(page.claims) + (f' <span class="verdicts">({escape(verdicts)})</span>' if verdicts else ""),
                 "commit": f"<code>{escape(commit)}</code>"}
        rows.append("<tr>" + "".join(f'<td class="col-{key}" data-label="{escape(label)}"><div>{cells[key]}</div></td>'
                                     for key, label, _ in INDEX_FIELDS) + "</tr>")
    return INDEX.format(head=head, rows="\n".join(rows))


__all__ = ["build", "claims_html", "experiment_data", "build_groups", "index_html", "Page", "ReportError", "page_name",
           "write_assets"]
