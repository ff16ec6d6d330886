"""Figures that say what they show, and redrawing them from the committed tables.

* dpbench.experiment.stored: the committed runs table read back gives the committed curves.csv back
  (byte for byte as pipeline.render writes it), and `dpbench plot --from-runs` redraws without cells;
* curves.csv's 95% intervals (`ci_low`, `ci_high`) against Student-t quantiles from a table;
* the log-axis floor (a decade below the smallest positive mean) and the clipped bands;
* the reference rates: the DP-SCO rate's two constants fitted separately to output perturbation
  (two regimes), checked against an independent least-squares fit;
* the legend states each curve's guarantee.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpbench.analysis import curves
from dpbench.cli.main import main
from dpbench.experiment import pipeline, render
from dpbench.experiment import stored as stored_tables
from dpbench.figures.bands import GAP_FLOOR, band, log_floor
from dpbench.figures.epsilon import epsilon_ticks
from dpbench.figures.frame import merged_legend
from dpbench.figures.references import radii
from dpbench.figures.style import claim_status
from dpbench.spec import experiment as spec

REPO = Path(__file__).resolve().parents[2]


def _curves_csv(table: pd.DataFrame) -> str:
    buffer = io.StringIO()
    table.to_csv(buffer, index=False, float_format="%.10g")  # as pipeline.render writes curves.csv
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------
# the committed tables
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [pytest.param("pidp", marks=pytest.mark.slow),
                                  pytest.param("inputpert", marks=pytest.mark.slow), "heavytailed", "dpsco"])
def test_committed_runs_table_gives_the_committed_curves_back(name):  # the paper-scale tables: make test-slow
    exp = spec.load(REPO / "experiments" / f"{name}.yaml")
    runs = stored_tables.load_runs(exp, REPO / "results")
    assert not stored_tables.coverage(exp, runs).missing  # the committed table covers the spec's grid
    derived = curves.curves_table(curves.selected_by_metric(runs, exp.metrics, exp.selection))
    committed = (REPO / "results" / name / "curves.csv").read_text()
    if "ci_low" not in committed.splitlines()[0]:  # a committed curves.csv without the interval columns
        derived = derived.drop(columns=["ci_low", "ci_high"])
    assert _curves_csv(derived) == committed


def test_load_runs_gives_runs_table_dtypes_and_plot_from_runs_redraws_without_cells(tiny_spec, tmp_path,
                                                                                        data_dir):
    path = tiny_spec
    # labels that read as missing or as numbers unless the text columns are read as text
    path.write_text(path.read_text().replace("  - name: nonprivate", "  - {name: nonprivate, label: NA}")
                    .replace("  - name: dpsgd", "  - name: dpsgd\n    label: '1e5'"))
    exp = spec.load(path)
    results = tmp_path / "results"
    pipeline.run_experiment(exp, results=results, data_dir=str(data_dir), progress=False)
    out = render.render(exp, results=results)
    loaded = stored_tables.load_runs(exp, results)
    pd.testing.assert_frame_equal(loaded, out.runs.drop(columns=["fit_seconds"]), check_exact=True)
    committed = (results / "tiny" / "curves.csv").read_text()

    shutil.rmtree(results / "tiny" / "cells")  # a fresh clone: no per-cell store
    (results / "tiny" / "curves.csv").unlink()
    plain = CliRunner().invoke(main, ["plot", str(path), "--results", str(results), "--no-progress"])
    assert plain.exit_code != 0 and "no stored cells" in plain.output
    redraw = CliRunner().invoke(main, ["plot", str(path), "--results", str(results), "--no-progress", "--from-runs"])
    assert redraw.exit_code == 0, redraw.output
    assert (results / "tiny" / "curves.csv").read_text() == committed
    assert (results / "tiny" / "accuracy.png").stat().st_size > 0

    (results / "tiny" / "runs.csv.gz").unlink()
    missing = CliRunner().invoke(main, ["plot", str(path), "--results", str(results), "--no-progress", "--from-runs"])
    assert missing.exit_code == 2 and "runs.csv.gz not found" in missing.output


def test_committed_trace_curves_get_intervals_and_params():
    exp = spec.load(REPO / "experiments" / "heavytailed.yaml")
    traces = stored_tables.load_traces(exp, REPO / "results")
    committed = pd.read_csv(REPO / "results" / "heavytailed" / "curves.csv")
    full = stored_tables.complete_traces(traces, committed)
    assert full["params"].notna().all() and full["ci_low"].notna().all()
    assert (full["ci_low"] <= full["mean"] + 1e-12).all() and (full["mean"] <= full["ci_high"] + 1e-12).all()
    assert stored_tables.load_traces(spec.load(REPO / "experiments" / "dpsco.yaml"), REPO / "results") is None


# ---------------------------------------------------------------------------------------------
# 95% intervals of the mean
# ---------------------------------------------------------------------------------------------
#: t_{0.975, df} from a printed table (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.2)
T_975 = {1: 12.706, 2: 4.303, 4: 2.776, 9: 2.262, 99: 1.984}


def test_ci_columns_match_student_t_from_a_table():
    rng = np.random.default_rng(0)
    runs = []
    for label, n in (("a", 2), ("b", 3), ("c", 5), ("d", 10), ("e", 100), ("f", 1)):
        for rep, value in enumerate(rng.normal(1.0, 0.3, n)):
            runs.append({"label": label, "dataset_label": "d", "model_label": "m", "epsilon": 1.0, "algorithm": "x",
                         "dataset_panel": "d", "n_train": 100, "n_params": 3, "delta": 1e-5, "n_features": 3,
                         "dataset": "d", "model": "m", "params": "{}", "selected_by": "val_loss", "candidates": 1,
                         "curve_claim": "valid", "eps_end_to_end": np.nan, "eps_rdp": np.nan, "eps_pld": np.nan,
                         "noise_free_fraction": np.nan, "accuracy": value, "rep": rep})
    runs = pd.DataFrame(runs)
    table = curves.curves_table({"accuracy": runs}).set_index("label")
    assert list(table.columns[-6:]) == ["mean", "std", "sem", "count", "ci_low", "ci_high"]
    for label, group in runs.groupby("label"):
        values = group["accuracy"].to_numpy()
        n, row = values.size, table.loc[label]
        if n == 1:
            assert np.isnan(row["ci_low"]) and np.isnan(row["ci_high"])
            continue
        half = T_975[n - 1] * values.std(ddof=1) / np.sqrt(n)
        assert row["ci_low"] == pytest.approx(values.mean() - half, rel=2e-4)
        assert row["ci_high"] == pytest.approx(values.mean() + half, rel=2e-4)
    low, high = curves.mean_ci(2.0, 0.5, 5)  # the same interval claims use (dpbench.analysis.claims)
    assert (float(low), float(high)) == pytest.approx((2.0 - 2.776 * 0.5 / np.sqrt(5), 2.0 + 2.776 * 0.5 / np.sqrt(5)),
                                                      rel=1e-4)


# ---------------------------------------------------------------------------------------------
# log axes: floor and bands
# ---------------------------------------------------------------------------------------------
def test_log_floor_is_a_decade_below_the_smallest_positive_mean_and_bands_are_clipped():
    panel = pd.DataFrame({"mean": [0.0, -1e-9, 3e-3, 0.2, 40.0], "std": [0.0, 1e-9, 4e-3, 0.5, 1.0],
                          "count": [5] * 5})
    panel = curves.with_ci(panel)
    floor = log_floor(panel, "optimality_gap")
    smallest = 3e-3
    assert smallest / 10 <= floor < smallest
    mean, lo, hi, at_floor = band(panel, "optimality_gap", floor)
    assert at_floor.tolist() == [True, True, False, False, False]
    assert (mean[at_floor] == floor).all() and (mean[~at_floor] == panel["mean"][~at_floor]).all()
    assert (lo >= floor).all() and (lo >= mean / 10 - 1e-15).all() and (lo <= mean).all() and (hi >= mean).all()
    # a band whose interval reaches below 0 stops a decade under its mean instead of spiking to the floor
    assert lo[3] == pytest.approx(0.02) and panel["ci_low"][3] < 0
    assert log_floor(panel, "accuracy") is None  # linear axis
    assert log_floor(pd.DataFrame({"mean": [0.0, -1.0]}), "optimality_gap") == GAP_FLOOR


def test_accuracy_bands_stay_in_range_and_epsilon_ticks_do_not_collide():
    line = curves.with_ci(pd.DataFrame({"mean": [0.95, 0.5], "std": [0.2, 0.3], "count": [3, 3]}))
    mean, lo, hi, at_floor = band(line, "accuracy", None)
    assert (lo >= 0).all() and (hi <= 1).all() and not at_floor.any()
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set_xscale("log")
    epsilon_ticks(ax, np.array([0.01, 0.02, 0.04, 0.08, 0.15, 0.25]), (0.0077, 0.33))
    ticks = list(ax.get_xticks())
    plt.close(fig)
    assert ticks == [0.01, 0.02, 0.04, 0.08, 0.15, 0.25]  # every swept value; no 0.1 printed over 0.08


# ---------------------------------------------------------------------------------------------
# reference rates
# ---------------------------------------------------------------------------------------------
def _independent_two_term_fit(points: pd.DataFrame) -> tuple[float, float]:
    """Least squares of log(a P + b S) against log(mean), by a grid then Nelder-Mead on (log a, log b)."""
    from scipy.optimize import minimize

    d, delta = points["n_params"].to_numpy(float), points["delta"].to_numpy(float)
    n, eps = points["n_train"].to_numpy(float), points["epsilon"].to_numpy(float)
    privacy, statistical = d * np.log(1 / delta) / (n ** 2 * eps ** 2), 1 / n
    y = np.log(points["mean"].to_numpy(float))

    def loss(v):
        return float(np.sum((np.log(np.exp(v[0]) * privacy + np.exp(v[1]) * statistical) - y) ** 2))

    grid = [(la, lb) for la in np.linspace(-5, 15, 81) for lb in np.linspace(-10, 10, 81)]
    start = min(grid, key=loss)
    best = minimize(loss, start, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000})
    return float(np.exp(best.x[0])), float(np.exp(best.x[1]))


def test_dpsco_rate_fits_each_term_on_output_perturbation_and_shows_both_regimes():
    committed = pd.read_csv(REPO / "results" / "dpsco" / "curves.csv")
    panel = committed[committed["metric"] == "excess_population_risk"]
    fitted = curves.fit_rate(panel, "dpsco_rate")
    assert fitted.curve == "output perturbation GD" and fitted.points == 18  # 9 sizes x 2 epsilons, one method
    points = panel[panel["label"] == "output perturbation GD"]
    a, b = _independent_two_term_fit(points)
    assert fitted.constants == pytest.approx((a, b), rel=1e-4)
    slopes = {}
    for eps in (0.1, 1.0):
        n, rate = curves.fitted_dpsco_rate(panel, eps)
        slopes[eps] = np.diff(np.log(rate)) / np.diff(np.log(n))
    # eps = 0.1: the privacy term dominates at every n (slope -2); eps = 1: -2 at small n, turning
    # towards -1 where the b/n term takes over (n ~ a d log(1/delta) / (b eps^2))
    assert slopes[0.1] == pytest.approx(-2, abs=0.03)
    assert slopes[1.0][0] == pytest.approx(-2, abs=0.05) and slopes[1.0][-1] > -1.5
    turn = a * 10 * np.log(1e6) / b
    assert 250 < turn < 64000
    # one constant for both terms (the old fit) would have turned at d log(1/delta)/eps^2 = 138 rows
    assert 10 * np.log(1e6) < 250


def test_single_constant_rates_match_the_closed_form_and_refuse_other_metrics():
    committed = pd.read_csv(REPO / "results" / "heavytailed" / "curves.csv")
    panel = committed[(committed["metric"] == "estimation_error")
                      & (committed["dataset_panel"] == "log-normal over n")]
    fitted = curves.fit_rate(panel, "heavy_tailed_rate", "Alg. 4")
    points = panel[panel["label"] == "Alg. 4"]
    shape = points["n_params"] * np.sqrt(np.log(1 / points["delta"]) / points["n_train"]) / points["epsilon"]
    assert fitted.constants[0] == pytest.approx(float(np.exp(np.mean(np.log(points["mean"] / shape)))), rel=1e-12)
    assert fitted.points == 12 and "Alg. 4" in fitted.describe()
    assert curves.fit_rate(panel, "heavy_tailed_rate", "no such curve") is None
    assert curves.RATES["dpsgd_rate"].metrics == ("optimality_gap",)


# ---------------------------------------------------------------------------------------------
# the legend says what each curve's guarantee covers
# ---------------------------------------------------------------------------------------------
def test_legend_names_carry_the_guarantee_and_merge_candidate_counts():
    def status(*claims):
        return claim_status(pd.DataFrame({"dp_claim": list(claims)}))

    assert status("valid") == ("-", True, "")
    assert status("valid per run; selection not private (4 candidates)") == \
        ("-", False, "selected among 4 (not private)")
    assert status("none") == (":", False, "ε not certified")
    assert status("paper-only") == ("-.", True, "ε claimed by the paper only")
    assert status("paper-only per run; selection not private (2 candidates)") == \
        ("-.", False, "ε claimed by the paper only, selected among 2 (not private)")
    assert status("valid end to end (private selection, 4 candidates)")[2] == "private selection, ε end to end"
    assert status("valid; weak delta (>= 1/n)")[2] == "δ ≥ 1/n"

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, squeeze=False)
    axes[0][0].plot([0, 1], [0, 1], label="ZZMW17 — selected among 4 (not private)")
    axes[0][0].plot([0, 1], [0, 1], label="WYX17 — selected among 2 (not private)")
    axes[0][1].plot([0, 1], [0, 1], label="WYX17 — selected among 6 (not private)")
    axes[0][1].plot([0, 1], [0, 1], label="ZZMW17 — ε not certified")
    axes[0][1].plot([0, 1], [0, 1], label="a rate")
    _, names = merged_legend(axes, ["WYX17", "ZZMW17"])
    plt.close(fig)
    assert names == ["WYX17 — selected among 2/6 (not private)", "ZZMW17 — selected among 4 (not private)",
                     "ZZMW17 — ε not certified", "a rate"]


def test_projection_radius_is_read_from_the_params():
    rows = pd.DataFrame({"params": ['{"radius": 10.0, "lr": 0.2}', '{"radius": null}', "{}", None]})
    assert radii(rows) == [10.0]


@pytest.mark.parametrize("spec_path", ["experiments/quickstart.yaml", "experiments/dpsco.yaml",
                                       "examples/my_algorithm/experiment.yaml"])
def test_the_committed_figures_are_recorded_for_the_current_drawing_code(tmp_path, spec_path):
    """Redrawing an experiment from its committed tables draws nothing: figures.json records, for
    every figure, the digest of its rows and of today's drawing code, so a rerun on a clean clone
    leaves the figures and figures.json as committed (a figure module edited without redrawing
    the committed figures fails here)."""
    import json

    exp = spec.load(REPO / spec_path)
    committed = REPO / "results" / exp.name
    drawn_with = json.loads((committed / "manifest.json").read_text())["packages"]["matplotlib"]
    import matplotlib

    if matplotlib.__version__ != drawn_with:
        pytest.skip(f"the committed figures were drawn with matplotlib {drawn_with}, this is "
                    f"{matplotlib.__version__}: every figure would be redrawn")
    folder = tmp_path / exp.name
    shutil.copytree(committed, folder, ignore=shutil.ignore_patterns("cells", "profiles", "*.html"))
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    render.render(exp, results=tmp_path, from_runs=True)
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    changed = sorted(name for name in before if after.get(name) != before[name])
    assert not changed, (f"{changed} changed: the committed figures are stale for the drawing code; "
                         f"`dpbench plot {spec_path} --from-runs` redraws them")
