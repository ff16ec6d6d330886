"""Sample-size sweeps end to end: `sweep:` datasets, the exact excess population risk of
`synthetic_population`, and the metric-over-n figure with the DP-SCO reference rate."""

from __future__ import annotations

import numpy as np
import pytest

from dpbench import algorithms, data, models
from dpbench.analysis import curves
from dpbench.experiment import pipeline, render
from dpbench.spec import experiment as spec

SWEEP_SPEC = """
name: sweep
seeds: 2
datasets:
  - {name: synthetic_population, label: pool, options: {pool: 5000, d: 5}, sweep: {n: [200, 1600]}}
models: [{name: logreg, options: {l2: 0.05}}]
epsilons: [1.0]
delta: 1.0e-6
metrics: [excess_population_risk]
algorithms:
  - nonprivate
  - {name: dpsgd, params: {epochs: 3, batch_size: 32, lr: 1.0}}
figures:
  - {name: over-n, kind: metric_over_n, metric: excess_population_risk, reference: dpsco_rate}
"""


@pytest.fixture(scope="module")
def sweep_outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    path = root / "sweep.yaml"
    path.write_text(SWEEP_SPEC)
    exp = spec.load(path)
    pipeline.run_experiment(exp, results=root / "results", progress=False)
    return exp, render.render(exp, results=root / "results")


def test_population_optimum_is_the_pool_minimum(sweep_outputs):
    _, out = sweep_outputs
    runs = out.runs
    assert runs["population_lstar"].nunique() == 1  # one pool, one optimum for every n and seed
    pool = data.load("synthetic_population", seed=3, n=10, pool=5000, d=5)
    model = models.make("logreg", 5, l2=0.05)
    theta, lstar = algorithms.nonprivate.minimize_empirical_risk(
        algorithms.Problem(model=model, X=pool.X_test, y=pool.y_test), np.random.default_rng(0))
    assert np.linalg.norm(model.grad(theta, pool.X_test, pool.y_test)) < 1e-9
    assert runs["population_lstar"].iloc[0] == pytest.approx(lstar, abs=1e-12)
    assert (runs["excess_population_risk"] >= -1e-12).all()
    # the ERM's excess population risk falls with n (statistical term ~ 1/n)
    erm = runs[runs["algorithm"] == "nonprivate"].groupby("n_train")["excess_population_risk"].mean()
    assert erm.index.tolist() == [200, 1600] and erm.iloc[1] < erm.iloc[0] / 2


def test_curves_carry_the_panel_and_n_and_the_figure_is_written(sweep_outputs):
    _, out = sweep_outputs
    curves = out.curves
    assert set(curves["dataset_panel"]) == {"pool"}
    assert set(curves["dataset_label"]) == {"pool n=200", "pool n=1600"}
    assert sorted(curves["n_train"].unique()) == [200.0, 1600.0]
    assert [p.suffix for p in out.figures] == [".png", ".pdf"] and all(p.stat().st_size > 0 for p in out.figures)


def test_dpsco_rate_formula():
    n = np.array([100.0, 1000.0])
    rate = curves.dpsco_rate(n, d=10, epsilon=0.5, delta=1e-6)
    expected = 10 * np.log(1e6) / (n**2 * 0.25) + 1 / n
    assert np.allclose(rate, expected, rtol=1e-14)
    # the two regimes: slope -2 while the privacy term dominates, -1 once 1/n does
    slope = lambda a, b: np.log(curves.dpsco_rate(np.array(b), 10, 0.5, 1e-6) / curves.dpsco_rate(np.array(a), 10, 0.5, 1e-6)) / np.log(b / a)  # noqa: E731
    assert slope(10.0, 20.0) == pytest.approx(-2, abs=0.05) and slope(1e7, 2e7) == pytest.approx(-1, abs=0.01)


def test_output_perturbation_excess_risk_slope_lies_between_the_notes_regimes():
    """Paper 002: output perturbation on GD has excess population risk d log(1/delta)/(n^2 eps^2) + 1/n,
    so over n its log-log slope lies between -2 (privacy term) and -1 (statistical term)."""
    from dpbench.algorithms.output_perturbation import fit_output_perturbation_gd

    ns, risks = [400, 1600, 6400, 25600], []
    model = models.make("logreg", 10, l2=0.05)
    for n in ns:
        values = []
        for seed in range(6):
            ds = data.load("synthetic_population", seed=seed, n=n, pool=20000, d=10, val_fraction=0.0)
            if not values:
                theta_p, lstar_p = algorithms.nonprivate.minimize_empirical_risk(
                    algorithms.Problem(model=model, X=ds.X_test, y=ds.y_test), np.random.default_rng(0))
            fit = fit_output_perturbation_gd(algorithms.Problem(model=model, X=ds.X_train, y=ds.y_train),
                                             algorithms.PrivacyTarget(1.0, 1e-6), np.random.default_rng(seed),
                                             epochs=100)
            values.append(model.loss(fit.theta, ds.X_test, ds.y_test) - lstar_p)
        risks.append(np.mean(values))
    slope = np.polyfit(np.log(ns), np.log(risks), 1)[0]
    assert -2.2 <= slope <= -0.9, (slope, risks)
    # and it is not flat: a 64x larger sample cuts the risk by well over 64^0.9
    assert risks[0] / risks[-1] > 64 ** 0.9
