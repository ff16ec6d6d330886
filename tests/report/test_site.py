"""`dpbench report` without a browser: the page data behind each point is the runs that make it.

The site is built from the committed results (results/<exp>/...), which every clone has. The
browser side (pages load, plots render, hover and click) is tests/test_report_browser.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpbench.analysis import curves as curves_mod
from dpbench.cli.main import main
from dpbench.experiment import stored as stored_tables
from dpbench.experiment import verdicts
from dpbench.report import site as report
from dpbench.spec.experiment import load

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"


def _spec(name: str):
    path = ROOT / ("examples/my_algorithm/experiment.yaml" if name == "my_algorithm" else f"experiments/{name}.yaml")
    return load(path)


def page_data(path: Path) -> dict:
    text = path.read_text()
    found = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
    assert found, f"{path} has no data block"
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def pidp_groups():
    """pidp's groups on Adult (a third of its runs, every kind of curve: non-private, selected
    among k, paper-only, not certified, private selection with its end-to-end epsilon)."""
    exp = _spec("pidp")
    curves = stored_tables.load_curves(exp, RESULTS)
    curves = curves[curves["dataset_label"] == "Adult"]
    runs = stored_tables.in_spec(exp, stored_tables.load_runs(exp, RESULTS))
    runs = runs[runs["dataset_label"] == "Adult"]
    selected = curves_mod.selected_by_metric(runs, exp.metrics, exp.selection)
    return exp, curves, report.build_groups(exp, runs, selected, curves)


def test_every_curve_point_has_the_runs_that_make_its_mean(pidp_groups):
    """The ledger a click opens belongs to the point: the selected runs' values average to the
    curves.csv mean, their ledgers' target epsilon is the point's, and the selected combination is
    the curve's hyperparameters (selection per seed, private or not: one per seed, the curve names the
    combination most seeds chose)."""
    exp, curves, groups = pidp_groups
    assert len(curves) > 200 and curves["dp_claim"].str.contains("end to end").any()
    checked = 0
    for _, row in curves.iterrows():
        gid = groups.of(row)
        assert gid is not None, row[["label", "dataset_label", "model_label", "epsilon", "metric"]].to_dict()
        group = groups.records[gid]
        assert group["metric"] == row["metric"] and group["label"] == row["label"]
        values = [r["value"] for r in group["runs"] if r["value"] is not None]
        assert len(values) == row["count"]
        assert np.mean(values) == pytest.approx(row["mean"], rel=1e-8, abs=1e-12)
        if pd.notna(row["epsilon"]):
            targets = [groups.ledgers[r["ledger"]].get("target_epsilon") for r in group["runs"]]
            assert all(t is None for t in targets) or targets == pytest.approx([row["epsilon"]] * len(targets))
        selected = [c for c in group["candidates"] if c["selected"]]
        assert selected, group["label"]
        if "private" not in str(group["selected_by"]):  # selection per seed: each seed's choice is marked
            assert 1 <= len(selected) <= row["count"] and len(group["candidates"]) == row["candidates"]
        checked += 1
    assert checked == len(curves)


def test_private_selection_points_show_the_noisy_winner_of_each_seed(pidp_groups):
    """Private selection: each seed's run is the one of its random search (draw >= 1) with the
    best noisy score, found here from the runs table directly; the point carries curves.csv's
    end-to-end epsilon and claim."""
    exp, curves, groups = pidp_groups
    runs = stored_tables.in_spec(exp, stored_tables.load_runs(exp, RESULTS))
    tuned = curves[curves["label"] == "DP-SGD (private tuning)"]
    assert len(tuned) > 10
    assert not tuned.empty
    for _, row in tuned.iterrows():
        group = groups.records[groups.of(row)]
        assert group["eps_end_to_end"] == pytest.approx(row["eps_end_to_end"])
        assert group["curve_claim"].startswith("valid end to end")
        mine = runs[(runs["label"] == row["label"]) & (runs["dataset_label"] == row["dataset_label"])
                    & (runs["model_label"] == row["model_label"]) & np.isclose(runs["epsilon"], row["epsilon"])
                    & (runs["draw"] >= 1)]
        for run in group["runs"]:
            draws = mine[mine["rep"] == run["rep"]]
            best = draws["score"].max() if json.loads(draws["tuning"].iloc[0])["score"] == "val_accuracy" \
                else draws["score"].min()
            winners = draws[draws["score"] == best]
            assert run["value"] in set(winners[row["metric"]])


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    exps = [_spec(n) for n in ("quickstart", "audit", "my_algorithm")]
    pages = report.build(exps, results=RESULTS, out=out)  # data from $DPBENCH_DATA (make test sets it)
    return out, exps, pages


def test_site_layout_and_index(site):
    out, exps, pages = site
    assert {p.path.name for p in pages} == {"quickstart.html", "audit.html", "my_algorithm.html"}
    assert (out / "assets" / report.PLOTLY_FILE).stat().st_size > 1_000_000  # the library itself, not a link
    index = (out / "index.html").read_text()
    for page in pages:
        assert f'href="{page.path.name}"' in index
    for page in pages:
        text = page.path.read_text()
        assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text  # offline
        assert 'src="assets/plotly.min.js"' in text


def test_page_figures_match_the_spec_and_curves(site):
    out, exps, _ = site
    exp = next(e for e in exps if e.name == "quickstart")
    data = page_data(out / "quickstart.html")
    assert [f["id"] for f in data["figures"]] == [f.name for f in exp.figures]
    curves = stored_tables.load_curves(exp, RESULTS)
    for fig, spec_fig in zip(data["figures"], exp.figures):
        points = sum(len(t["x"]) for p in fig["panels"] for t in p["traces"] if not t.get("meta"))
        rows = curves[curves["metric"] == spec_fig.metric]
        private = rows["epsilon"].notna().sum()
        public = rows["epsilon"].isna().sum()
        assert points == private + 5 * public  # a non-private mean is a horizontal line of 5 points
        for panel in fig["panels"]:
            for trace in panel["traces"]:
                if trace.get("meta"):  # a band or the majority-class line
                    continue
                assert all(isinstance(g, int) and 0 <= g < len(data["groups"]) for g in trace["customdata"])
                assert all("95% CI" in h or "seed" in h for h in trace["text"])


def test_majority_line_where_the_spec_asks_for_it(site):
    """quickstart's accuracy figure has `baseline: majority`: each panel gets the grey line at its
    data set's majority-class share of the test split (between 1/2 and 1 for these binary sets)."""
    from dpbench.data import data_dir

    files = ("adult/adult.data", "breast-cancer-wisconsin/breast-cancer-wisconsin.data")
    if not all((data_dir() / f).is_file() for f in files):
        pytest.skip("raw data folder absent: the majority line reads the test splits ($DPBENCH_DATA)")
    out, _, _ = site
    fig = next(f for f in page_data(out / "quickstart.html")["figures"] if f["y_title"] == "test accuracy")
    for panel in fig["panels"]:
        lines = [t for t in panel["traces"] if t.get("meta") == "baseline"]
        assert len(lines) == 1, panel["title"]
        assert lines[0]["y"][0] == lines[0]["y"][1] and 0.5 <= lines[0]["y"][0] < 1.0
        assert "majority" in lines[0]["hovertemplate"]


def test_fitted_rate_where_the_spec_asks_for_it(tmp_path):
    """dpsco's figure has `reference: dpsco_rate`: per epsilon a grey line of the rate with the
    constants curves.fit_rate fits to output perturbation's curve, its values the fitted formula's."""
    from dpbench.analysis.curves import fit_rate, reference_curve

    exp = _spec("dpsco")
    report.build([exp], results=RESULTS, out=tmp_path, baseline=False)
    fig = page_data(tmp_path / "dpsco.html")["figures"][0]
    rates = [t for t in fig["panels"][0]["traces"] if t.get("meta") == "rate"]
    curves = stored_tables.load_curves(exp, RESULTS)
    panel = curves[curves["metric"] == exp.figures[0].metric]
    fitted = fit_rate(panel, "dpsco_rate")
    assert fitted is not None and len(rates) == panel["epsilon"].nunique()
    rows = reference_curve(panel, fitted.rate, fitted.curve)
    for trace, (_, part) in zip(rates, rows.groupby("epsilon", sort=True)):
        assert "a d log(1/δ)/(n²ε²) + b/n" in trace["name"] and f"fitted to {fitted.curve}" in trace["name"]
        part = part.sort_values("n_train")
        assert trace["x"] == part["n_train"].astype(float).tolist()
        assert trace["y"] == pytest.approx(fitted.values(part).tolist(), rel=1e-12)
    assert any(e["name"] == rates[0]["name"] for e in fig["legend"])


def test_claim_marks_where_claims_hold_or_fail_significantly(tmp_path):
    """dpsco's claims mark points (pipeline.significant_marks): every marked point of the figure
    gets a star (holds) or a cross (fails) at the curve's value, as in the PNG."""
    exp = _spec("dpsco")
    report.build([exp], results=RESULTS, out=tmp_path, baseline=False)
    fig = page_data(tmp_path / "dpsco.html")["figures"][0]
    drawn = {"star": 0, "x": 0}
    for panel in fig["panels"]:
        for trace in panel["traces"]:
            if trace.get("meta") == "claim":
                drawn[trace["marker"]["symbol"]] += len(trace["x"])
                assert all("claim " in t and ("holds" in t or "fails" in t) for t in trace["text"])
    marks = verdicts.significant_marks(verdicts.claim_verdicts(exp, RESULTS))
    curves = stored_tables.load_curves(exp, RESULTS)
    shown = verdicts.with_marks(curves[curves["metric"] == exp.figures[0].metric], marks)
    texts = shown.loc[shown["epsilon"].notna(), "claim_mark"].fillna("")
    expected = {"star": int(texts.map(lambda t: any(m.strip().startswith("+") for m in t.split(",") if m)).sum()),
                "x": int(texts.map(lambda t: any(m.strip().startswith("-") for m in t.split(",") if m)).sum())}
    assert drawn == expected and sum(drawn.values()) > 0


def test_audit_page_has_every_audit(site):
    out, _, _ = site
    data = page_data(out / "audit.html")
    audits = pd.read_csv(RESULTS / "audit" / "audits.csv")
    assert len(data["audits"]) == len(audits)
    fig = data["figures"][-1]
    assert fig["id"] == "audit"
    ids = [i for t in fig["panels"][0]["traces"] for i in t.get("customdata", [])]
    assert sorted(ids) == sorted(audits.dropna(subset=["claimed_epsilon"]).index.tolist())
    assert data["provenance"]["data files (SHA-256)"] or data["provenance"]["commit"]


def test_nothing_stored_is_an_error_and_writes_nothing(tmp_path):
    exp = _spec("quickstart")
    with pytest.raises(report.ReportError, match="dpbench run"):
        report.build([exp], results=tmp_path / "empty", out=tmp_path / "site")
    assert not (tmp_path / "site").exists()


def test_a_ledger_with_non_finite_numbers_still_makes_a_page():
    groups = report.Groups()
    gid = groups.ledger_id('{"epsilon_spent": {"rdp": Infinity}, "sensitivity": NaN, "steps": 3}')
    assert groups.ledgers[gid] == {"epsilon_spent": {"rdp": "inf"}, "sensitivity": "nan", "steps": 3}
    assert json.loads(report._script_json({"ledgers": groups.ledgers}))["ledgers"][0]["steps"] == 3


def test_script_json_cannot_close_its_element():
    text = report._script_json({"label": "</script><script>alert(1)</script>"})
    assert "</" not in text
    assert json.loads(text)["label"] == "</script><script>alert(1)</script>"


def test_cli_report(tmp_path):
    result = CliRunner().invoke(main, ["report", str(ROOT / "experiments/quickstart.yaml"), "--results",
                                       str(RESULTS), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "quickstart.html").is_file() and "1 pages" in result.output
    empty = CliRunner().invoke(main, ["report", str(ROOT / "experiments/quickstart.yaml"), "--results",
                                      str(tmp_path / "none"), "--out", str(tmp_path / "x")])
    assert empty.exit_code != 0 and "dpbench run" in empty.output


RAW_COLUMNS = ("p_holm", "p_contra_holm", "p_equiv_holm", "seeds_needed", "ci_low", "ci_high")


def _cells(html: str, tag: str) -> list[str]:
    return re.findall(rf"<{tag}\b[^>]*>(.*?)</{tag}>", html, re.S)


def test_claims_table_reads_in_plain_words():
    """pidp's claims table: plain headers, each with a hover that explains it, and the same words in
    the legend under it; no raw column name as a header; every cell labelled with its header (the
    stacked layout of narrow windows); the p-value shown is the one the verdict rests on; an
    undecided claim shows the seeds it would need; the paper's sentence folds into a <details>."""
    claims = pd.read_csv(RESULTS / "pidp" / "claims.csv", keep_default_na=False, na_values=[""])
    html = report.claims_html(claims)
    head = html[html.index("<thead>"):html.index("</thead>")]
    headers = re.findall(r'<th scope="col" class="col-(\w+)" title="([^"]+)">([^<]+)</th>', head)
    assert [(k, label) for k, _, label in headers] == [(k, label) for k, label, _ in report.CLAIM_FIELDS]
    assert [label for *_, label in headers] == ["claim", "verdict", "relation tested", "deciding panel",
                                                 "effect [95 % CI]", "p-value (Holm)", "seeds used / needed"]
    assert all(len(why) > 40 for _, why, _ in headers)
    assert not any(raw in head for raw in RAW_COLUMNS) and "_" not in "".join(label for *_, label in headers)
    legend = html[html.index('class="table-legend"'):]
    assert all(f"<dt>{label}</dt>" in legend for _, label, _ in report.CLAIM_FIELDS)
    rows = _cells(html[html.index("<tbody>"):], "tr")
    assert len(rows) == len(claims)
    for row, claim in zip(rows, claims.to_dict("records")):
        labels = re.findall(r'<td class="col-(\w+)[^"]*" data-label="([^"]+)">', row)
        assert labels == [(k, label) for k, label, _ in report.CLAIM_FIELDS], row[:300]
        assert f"<code>{claim['id']}</code>" in row
        assert f'verdict-{claim["verdict"].replace(" ", "-")}"' in row  # one class, not one per word
        p_cell = re.search(r'data-label="p-value \(Holm\)"><div>([^<]*)<', row).group(1)
        rests_on = {"contradicted": "p_contra_holm", "no difference beyond m": "p_equiv_holm"}.get(
            claim["verdict"], "p_holm")
        assert float(p_cell) == pytest.approx(claim[rests_on], rel=5e-3), (claim["id"], p_cell)
        seeds = re.search(r'data-label="seeds used / needed"><div>([^<]*)<', row).group(1)
        if claim["verdict"] == "undecided" and pd.notna(claim["seeds_needed"]):
            assert seeds == f"{claim['seeds']} / {claim['seeds_needed']:.3g}", seeds
        else:
            assert seeds == str(claim["seeds"])
        assert "<details><summary>the paper's words</summary>" in row and "<dt>the paper&#x27;s words</dt>" in row
    assert "40 / 80" in html  # fig1-small-eps-difference-small-r1: undecided at 40 seeds, ~80 needed


def test_index_labels_every_cell_and_counts_verdicts(site):
    """index.html: a header with a hover per column, every cell labelled for the stacked layout, the
    claims column with the verdicts' counts."""
    out, _, _ = site
    index = (out / "index.html").read_text()
    head = index[index.index("<thead>"):index.index("</thead>")]
    assert re.findall(r'title="[^"]+">([^<]+)</th>', head) == [label for _, label, _ in report.INDEX_FIELDS]
    rows = _cells(index[index.index("<tbody>"):], "tr")
    assert len(rows) == 3
    for row in rows:
        labels = re.findall(r'<td class="col-(\w+)" data-label="([^"]+)">', row)
        assert labels == [(k, label) for k, label, _ in report.INDEX_FIELDS]
    audit_row = next(r for r in rows if 'href="audit.html"' in r)
    assert re.search(r"35 <span class=\"verdicts\">\(\d+ reproduced, ", audit_row), audit_row
