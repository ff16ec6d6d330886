"""Regression check: statuses of the paired comparison, and a 10% noise edit that must fail."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpbench.algorithms import dpsgd
from dpbench.analysis import check
from dpbench.cli.main import main
from tests.conftest import REPO

# Noise-dominated and trained long enough that a 10% noise change is systematic: the optimality
# gap averages over d = 105 coordinates, so its per-seed moves all point the same way (measured
# paired z ~ 8), while re-drawing the random streams moves it by ~1 SE.
CHECK_SPEC = """
name: checkme
seed: 0
seeds: 8
datasets: [{name: adult, options: {n: 3000}}]
models: [logreg]
algorithms:
  - name: nonprivate
  - name: dpsgd
    params: {epochs: 10, batch_size: 64, lr: 1.0}
epsilons: [0.5, 1.0]
delta: 1/n
metrics: [accuracy, optimality_gap]
"""


def points(values: dict[int, float], label="dpsgd", eps=1.0, metric="accuracy") -> pd.DataFrame:
    return pd.DataFrame([{"label": label, "dataset_label": "d", "model_label": "m", "epsilon": eps,
                          "metric": metric, "rep": r, "value": v} for r, v in values.items()])


def status(new, ref) -> str:
    return check.compare(new, ref)["status"].tolist()


def test_statuses_of_the_paired_comparison():
    ref = points({0: 0.80, 1: 0.82, 2: 0.78, 3: 0.81})
    assert status(ref, ref) == ["same"]
    assert status(points({0: 0.80, 1: 0.82, 2: 0.78, 3: 0.81 + 1e-12}), ref) == ["same"]  # float noise
    # seeds move both ways by seed noise: the paired mean difference is within 3 SE
    assert status(points({0: 0.81, 1: 0.80, 2: 0.79, 3: 0.815}), ref) == ["within"]
    # the same mean from different per-seed values is not "same"
    assert status(points({0: 0.82, 1: 0.80, 2: 0.78, 3: 0.81}), ref) == ["within"]
    # every seed moves the same way, by much less than the spread between seeds: a systematic drift
    assert status(points({0: 0.795, 1: 0.816, 2: 0.774, 3: 0.806}), ref) == ["DRIFT"]
    assert status(points({0: 0.80, 1: 0.82}), ref) == ["DRIFT"]  # seeds differ: the profile changed
    both = check.compare(points({0: 1.0}, eps=2.0), points({0: 1.0}, eps=1.0))
    assert sorted(both["status"]) == ["missing", "new"]
    nonprivate = points({0: 0.9, 1: 0.91}, label="nonprivate", eps=np.nan)
    assert status(nonprivate, nonprivate) == ["same"]


def test_each_point_says_the_smallest_shift_it_would_call_a_drift():
    ref = points({0: 0.80, 1: 0.82, 2: 0.78, 3: 0.81})
    new = points({0: 0.81, 1: 0.80, 2: 0.79, 3: 0.815})
    (row,) = check.compare(new, ref, k=3.0).to_dict("records")
    d = np.array([0.01, -0.02, 0.01, 0.005])
    assert row["detectable"] == pytest.approx(3.0 * d.std(ddof=1) / 2.0)  # k SE of the paired difference
    assert row["status"] == "within" and abs(row["delta"]) < row["detectable"]
    text = check.report(check.compare(new, ref, k=3.0), 3.0)
    assert "smallest shift each moved point would call a DRIFT (3 SE of its paired difference)" in text
    assert "detectable" in text
    (one,) = check.compare(points({0: 0.9}), points({0: 0.8})).to_dict("records")  # one seed: any move beyond noise
    assert one["status"] == "DRIFT" and one["detectable"] < 1e-6


@pytest.fixture(scope="module")
def checkme(tmp_path_factory, data_dir):
    """CHECK_SPEC run once (its cells stored under results/), shared by the tests of this module."""
    from dpbench.experiment import pipeline
    from dpbench.spec import experiment as spec_mod

    folder = tmp_path_factory.mktemp("checkme")
    path = folder / "checkme.yaml"
    path.write_text(CHECK_SPEC)
    exp = spec_mod.load(path)
    pipeline.run_experiment(exp, results=folder / "results", data_dir=str(data_dir), backend="sequential",
                            progress=False)
    return path, exp, folder / "results"


def test_a_10_percent_noise_edit_fails_the_check(checkme, data_dir, monkeypatch):
    """The float envelope is left out (--no-envelope): what it measures, and that DP-SGD on logistic
    regression has none beyond float noise, is tests/analysis/test_check_across_cpus.py's."""
    spec, _, results = checkme
    args = ["check", str(spec), "--results", str(results), "--data", str(data_dir),
            "--backend", "sequential", "--no-progress"]
    runner = CliRunner()
    created = runner.invoke(main, args + ["--update", "--reuse", "--no-envelope"])  # the stored run
    assert created.exit_code == 0, created.output
    assert "(48 values" in created.output, created.output
    unchanged = runner.invoke(main, args)  # recomputed in a temporary folder: the same numbers
    assert unchanged.exit_code == 0 and "6 same" in unchanged.output, unchanged.output

    original = dpsgd.dpsgd_noise_multiplier
    monkeypatch.setattr(dpsgd, "dpsgd_noise_multiplier", lambda *a, **k: 1.1 * original(*a, **k))
    edited = runner.invoke(main, args)
    assert edited.exit_code == 1, edited.output
    assert "FAILED" in edited.output and "|delta|/SE" in edited.output and "ref_mean" in edited.output
    drift = [line.split() for line in edited.output.splitlines() if line.strip().startswith("DRIFT")]
    assert {(row[1], row[5]) for row in drift} >= {("dpsgd", "optimality_gap")}  # both epsilons' gaps
    assert sum(row[5] == "optimality_gap" for row in drift) == 2
    assert all(row[1] == "dpsgd" for row in drift)  # only the edited algorithm moved
    assert "--update" in edited.stderr


def test_redrawn_random_streams_stay_within_seed_noise(checkme, tmp_path, data_dir):
    """A benign change (another experiment seed re-draws splits and streams) is not a drift here."""
    from dpbench.experiment import pipeline, verdicts
    from dpbench.spec import experiment as spec_mod

    _, exp, results = checkme
    other = spec_mod.from_dict({**exp.resolved, "seed": 1}, name="checkme")
    pipeline.run_experiment(other, results=tmp_path / "b", data_dir=str(data_dir), backend="sequential",
                            progress=False)
    table = check.compare(verdicts.seed_points(other, tmp_path / "b"), verdicts.seed_points(exp, results))
    gaps = table[(table["label"] == "dpsgd") & (table["metric"] == "optimality_gap")]
    assert set(gaps["status"]) == {"within"}


def test_missing_reference_is_a_one_line_error(tmp_path, data_dir):
    spec = tmp_path / "checkme.yaml"
    spec.write_text(CHECK_SPEC.replace("seeds: 8", "seeds: 1").replace("[0.5, 1.0]", "[1.0]"))
    out = CliRunner().invoke(main, ["check", str(spec), "--results", str(tmp_path / "r"), "--data", str(data_dir),
                                    "--backend", "sequential", "--no-progress"])
    assert out.exit_code == 2 and "no reference" in out.stderr and "--update" in out.stderr


@pytest.mark.parametrize("spec_path", sorted(str(p) for p in (REPO / "experiments").glob("*.yaml")))
def test_every_experiment_ships_a_ci_reference(spec_path):
    from dpbench.experiment import layout
    from dpbench.spec import experiment as spec

    exp = spec.load(spec_path, profile="ci")
    ref = layout.reference_path(exp, REPO / "results")
    assert ref.is_file(), f"{ref} missing: run `dpbench check {spec_path} --profile ci --update` and commit it"
    assert len(pd.read_csv(ref)) > 0


def test_each_metric_uses_its_own_selection():
    from dpbench.analysis.curves import curves_table, selected_by_metric

    rows = []
    for params, val_acc, val_loss, acc, gap in (("a", 0.9, 0.5, 0.88, 0.30), ("b", 0.8, 0.2, 0.79, 0.05)):
        for rep in (0, 1):
            rows.append({"label": "x", "dataset_label": "d", "model_label": "m", "epsilon": 1.0, "rep": rep,
                         "params": params, "algorithm": "x", "dataset": "d", "model": "m", "dataset_panel": "d", "n_train": 100,
                         "n_params": 3, "delta": 1e-5, "val_accuracy": val_acc,
                         "val_loss": val_loss, "accuracy": acc, "optimality_gap": gap, "dp_claim": "valid",
                         "eps_rdp": 1.0, "eps_pld": 0.9, "noise_free_fraction": np.nan})
    runs = pd.DataFrame(rows)
    curves = curves_table(selected_by_metric(runs, ("accuracy", "optimality_gap")))
    by_metric = curves.set_index("metric")
    assert by_metric.loc["accuracy", "params"] == "a" and by_metric.loc["accuracy", "selected_by"] == "val_accuracy"
    assert by_metric.loc["optimality_gap", "params"] == "b" and by_metric.loc["optimality_gap", "mean"] == 0.05
    forced = curves_table(selected_by_metric(runs, ("accuracy", "optimality_gap"), "val_loss")).set_index("metric")
    assert set(forced["params"]) == {"b"}
    points = check.seed_points(selected_by_metric(runs, ("accuracy", "optimality_gap")))
    assert sorted(points["value"]) == [0.05, 0.05, 0.88, 0.88]


def test_validation_scores_within_float_noise_are_a_tie_broken_by_parameter_order():
    from dpbench.analysis.curves import select

    def runs(loss_b: float) -> pd.DataFrame:
        return pd.DataFrame([{"label": "x", "dataset_label": "d", "model_label": "m", "epsilon": 1.0, "rep": 0,
                              "params": params, "val_loss": loss, "val_accuracy": 0.9}
                             for params, loss in (("a", 0.5), ("b", loss_b))])

    # "b" is lower by last bits only (as another CPU could make it): a tie, so the first in order
    assert set(select(runs(0.5 * (1 - 1e-12)), "val_loss")["params"]) == {"a"}
    assert set(select(runs(0.5 * (1 + 1e-12)), "val_loss")["params"]) == {"a"}
    # a real difference still wins
    assert set(select(runs(0.5 * (1 - 1e-4)), "val_loss")["params"]) == {"b"}
    # accuracy ties fall through to the loss, with the same rule
    assert set(select(runs(0.5 * (1 - 1e-4)), "val_accuracy")["params"]) == {"b"}
    assert set(select(runs(0.5 * (1 - 1e-12)), "val_accuracy")["params"]) == {"a"}
