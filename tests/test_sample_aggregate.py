"""[S4] Algorithm 1 (``ht_sample_aggregate``): disjoint partition + exact subset ERM + NRS07 aggregation;
the claim is valid only when eps > 2d/sqrt(m); trace and error conventions."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpbench.algorithms.sample_aggregate  # noqa: F401  (registers ht_sample_aggregate)
from dpbench import data, models
from dpbench.algorithms import PrivacyTarget, Problem
from dpbench.algorithms.base import REGISTRY
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.algorithms.sample_aggregate import fit_sample_aggregate, subset_solutions
from dpbench.algorithms.sgd import project_to_ball
from dpbench.privacy.smooth_sensitivity import center_of_attention


@pytest.fixture(scope="module")
def linear():
    ds = data.load("synthetic_linear", seed=0, n=20_000, d=2)
    return Problem(model=models.make("ridge", 2), X=ds.X_train, y=ds.y_train), ds


def test_registered_with_documented_defaults():
    info = REGISTRY["ht_sample_aggregate"]
    assert info.private and not info.convex_only
    assert info.defaults() == {"subsets": 1000, "diameter": 4.0, "trace_every": 0}


def test_subsets_are_a_disjoint_partition_solved_exactly(linear):
    problem, _ = linear
    m, radius = 8, 0.6
    sols = subset_solutions(problem, np.random.default_rng(0), m, radius)
    perm = np.random.default_rng(0).permutation(problem.n)
    for i, idx in enumerate(np.array_split(perm, m)):
        idx = np.sort(idx)
        theta, _ = minimize_empirical_risk(Problem(problem.model, problem.X[idx], problem.y[idx]))
        np.testing.assert_allclose(sols[i], project_to_ball(theta, radius), rtol=1e-10, atol=1e-12)
    assert np.all(np.linalg.norm(sols, axis=1) <= radius + 1e-12)
    assert sum(len(p) for p in np.array_split(perm, m)) == problem.n


def test_ledger_valid_only_when_eps_exceeds_2d_over_sqrt_m(linear):
    problem, _ = linear
    m, d = 100, 2  # threshold 2d/sqrt(m) = 0.4
    fit = fit_sample_aggregate(problem, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), subsets=m)
    led = fit.privacy
    assert led["claim"] == "valid" and led["epsilon_spent"] == {"nrs07_theorem": 1.0}
    assert led["adjacency"] == "replace-one" and led["subsets"] == m and led["rows_per_subset"] == [120, 120]
    assert led["gamma"] == pytest.approx(1.0 / (5 * math.sqrt(2 * math.log(2e5))))
    assert led["beta"] == pytest.approx(1.0 / (4 * (d + math.log(2e5))))
    assert led["noise_std"] == pytest.approx(led["smooth_bound"] / led["gamma"])
    assert led["s"] == 10.0 and led["t0"] == 56 and led["diameter"] == 4.0
    low = fit_sample_aggregate(problem, PrivacyTarget(0.3, 1e-5), np.random.default_rng(0), subsets=m).privacy
    assert low["claim"] == "paper-only" and low["epsilon_spent"] == {}
    assert "eps > 2d/sqrt(m)" in low["claim_reason"] and "0.4" in low["claim_reason"]


def test_release_is_centre_plus_calibrated_gaussian(linear):
    problem, _ = linear
    rng = np.random.default_rng(5)
    fit = fit_sample_aggregate(problem, PrivacyTarget(2.0, 1e-5), rng, subsets=50, diameter=3.0)
    replay = np.random.default_rng(5)
    problem.model.init(replay)
    sols = subset_solutions(problem, replay, 50, 1.5)
    agg = center_of_attention(sols, 2.0, 1e-5, 3.0)
    np.testing.assert_allclose(fit.theta, agg.center + agg.noise_std * replay.standard_normal(2), rtol=1e-12)
    assert fit.privacy["center_index"] == agg.center_index


def test_recovers_w_star_at_very_large_epsilon(linear):
    problem, ds = linear
    fit = fit_sample_aggregate(problem, PrivacyTarget(1000.0, 1e-5), np.random.default_rng(1), subsets=200)
    assert fit.privacy["noise_std"] < 0.1
    assert np.linalg.norm(fit.theta - ds.w_star) < 0.5  # start ||0 - w*|| = 1; each subset has 60 rows


def test_trace_convention(linear):
    problem, _ = linear
    fit = fit_sample_aggregate(problem, PrivacyTarget(1.0, 1e-5), np.random.default_rng(2), subsets=20,
                               trace_every=3)
    assert [e["step"] for e in fit.trace] == [0, 1]
    np.testing.assert_array_equal(fit.trace[0]["theta"], np.zeros(2))
    np.testing.assert_array_equal(fit.trace[1]["theta"], fit.theta)
    assert fit_sample_aggregate(problem, PrivacyTarget(1.0, 1e-5), np.random.default_rng(2), subsets=20).trace == []


@pytest.mark.parametrize("params,match", [
    ({"subsets": 6}, "subsets must be an integer >= 7"),
    ({"subsets": 10.5}, "subsets must be an integer"),
    ({"subsets": 10**6}, "subsets=1000000 exceeds"),
    ({"diameter": 0.0}, "diameter must be a finite number > 0"),
    ({"trace_every": -2}, "trace_every must be"),
])
def test_bad_hyperparameters_are_one_line_errors(linear, params, match):
    problem, _ = linear
    with pytest.raises(ValueError, match=match) as info:
        fit_sample_aggregate(problem, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), **params)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="needs a target epsilon"):
        fit_sample_aggregate(problem, PrivacyTarget(None, None), np.random.default_rng(0))
