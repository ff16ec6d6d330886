"""[S4] Algorithm 1 (``ht_sample_aggregate``): disjoint partition + exact subset ERM + NRS07 aggregation;
the claim is valid only when every condition of NRS07 Thm 4.2 / its Gaussian noise lemma holds (one test per
condition); trace and error conventions."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpbench.algorithms.sample_aggregate  # noqa: F401  (registers ht_sample_aggregate)
from dpbench import data, models
from dpbench.algorithms import PrivacyTarget, Problem
from dpbench.algorithms.base import REGISTRY
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.algorithms.sample_aggregate import claim_conditions, fit_sample_aggregate, subset_solutions
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


ALL_CONDITIONS = ("eps > 2d/sqrt(m)", "eps < 1", "0 < delta < 1", "ceil(s/beta) <= m", "m > ln(n)^2")


def _claim(problem, eps, delta, m):
    return fit_sample_aggregate(problem, PrivacyTarget(eps, delta), np.random.default_rng(0), subsets=m).privacy


def _failed(led):
    return sorted(name for name, holds in led["conditions"].items() if not holds)


def test_ledger_valid_when_every_condition_holds(linear):
    problem, _ = linear
    # d = 2, delta = 0.1: ceil(s/beta) = ceil(4 sqrt(500)(2 + ln 20)/0.9) = 497 <= 500; 2d/sqrt(m) = 0.179 < 0.9 < 1;
    # ln(12000)^2 = 88 < 500
    m, d, eps, delta = 500, 2, 0.9, 0.1
    led = _claim(problem, eps, delta, m)
    assert led["claim"] == "valid" and led["epsilon_spent"] == {"nrs07_theorem": eps}
    assert "claim_reason" not in led or not led["claim_reason"]
    assert set(led["conditions"]) == set(ALL_CONDITIONS) and all(led["conditions"].values())
    assert led["adjacency"] == "replace-one" and led["subsets"] == m and led["rows_per_subset"] == [24, 24]
    assert led["gamma"] == pytest.approx(eps / (5 * math.sqrt(2 * math.log(2 / delta))))
    assert led["beta"] == pytest.approx(eps / (4 * (d + math.log(2 / delta))))
    assert led["top_count_required"] == 497 == led["top_count"]  # the theorem's count, not capped at m
    assert led["noise_std"] == pytest.approx(led["smooth_bound"] / led["gamma"])
    assert led["s"] == pytest.approx(math.sqrt(m)) and led["t0"] == math.ceil((m + math.sqrt(m)) / 2 + 1)


def test_eps_at_or_above_one_is_paper_only(linear):
    """Gaussian admissible-noise lemma of NRS07: eps in (0, 1). Every other condition holds here."""
    problem, _ = linear
    for eps in (1.0, 1.5):
        led = _claim(problem, eps, 0.1, 500)
        assert led["claim"] == "paper-only" and led["epsilon_spent"] == {}
        assert _failed(led) == ["eps < 1"]
        assert "eps in (0, 1)" in led["claim_reason"] and f"got eps = {eps:g}" in led["claim_reason"]


def test_averaged_count_above_m_is_paper_only(linear):
    """ceil(s/beta) > m: rho(t) would average more values than there are; the cap at m is not the theorem's."""
    problem, _ = linear
    led = _claim(problem, 0.9, 0.1, 400)  # ceil(20 * 4 (2 + ln 20)/0.9) = 445 > 400; 2d/sqrt(m) = 0.2 < 0.9
    assert led["claim"] == "paper-only" and led["epsilon_spent"] == {}
    assert _failed(led) == ["ceil(s/beta) <= m"]
    assert led["top_count_required"] == 445 and led["top_count"] == 400
    assert "ceil(s/beta)" in led["claim_reason"] and "445 <= m = 400" in led["claim_reason"]


def test_eps_below_2d_over_sqrt_m_is_paper_only(linear):
    """eps <= 2d/sqrt(m) (NRS07 Thm 4.2 as quoted in [S4] Thm 1). It implies ceil(s/beta) > m
    (4(d + ln(2/delta)) > 2d), so that condition fails with it; the reason names both."""
    problem, _ = linear
    led = _claim(problem, 0.3, 1e-5, 100)  # threshold 2*2/sqrt(100) = 0.4
    assert led["claim"] == "paper-only" and led["epsilon_spent"] == {}
    assert _failed(led) == sorted(["eps > 2d/sqrt(m)", "ceil(s/beta) <= m"])
    assert "eps > 2d/sqrt(m)" in led["claim_reason"] and "0.4" in led["claim_reason"]
    assert "ceil(s/beta)" in led["claim_reason"]


def test_few_subsets_for_many_rows_is_paper_only():
    """m <= ln(n)^2 (finite reading of m = omega(log^2 n)); every other condition holds."""
    rng = np.random.default_rng(3)
    n, d = 100_000, 2  # ln(n)^2 = 132.5
    X = rng.standard_normal((n, d))
    y = X @ np.array([0.6, -0.8]) + 0.1 * rng.standard_normal(n)
    problem = Problem(model=models.make("ridge", d), X=X, y=y)
    # delta = 0.9, eps = 0.99: ceil(4 sqrt(130)(2 + ln(2/0.9))/0.99) = 129 <= 130; 2d/sqrt(m) = 0.35
    led = _claim(problem, 0.99, 0.9, 130)
    assert led["claim"] == "paper-only" and led["epsilon_spent"] == {}
    assert _failed(led) == ["m > ln(n)^2"]
    assert "omega(log^2 n)" in led["claim_reason"] and "132.5" in led["claim_reason"]
    ok = _claim(Problem(problem.model, X[:50_000], y[:50_000]), 0.99, 0.9, 130)  # ln(50000)^2 = 117 < 130
    assert ok["claim"] == "valid" and all(ok["conditions"].values())


def test_several_failures_are_all_named(linear):
    problem, _ = linear
    led = _claim(problem, 1.0, 1e-5, 100)
    assert led["claim"] == "paper-only" and led["epsilon_spent"] == {}
    assert _failed(led) == sorted(["eps < 1", "ceil(s/beta) <= m"])
    assert led["claim_reason"].count("; ") == 1


def test_delta_outside_0_1_is_an_error(linear):
    """delta in (0, 1) (the lemma's range) is checked as an error, not a claim: ln(2/delta) needs delta < 2 and
    delta >= 1 is no guarantee."""
    problem, _ = linear
    for delta in (0.0, 1.0):
        with pytest.raises(ValueError, match="delta"):
            _claim(problem, 0.9, delta, 20)


def test_claim_conditions_function():
    conds = {c["name"]: c["holds"] for c in claim_conditions(0.9, 0.1, 2, 500, 12_000)}
    assert conds == dict.fromkeys(ALL_CONDITIONS, True)
    conds = {c["name"]: c["holds"] for c in claim_conditions(0.5, 2.0, 2, 500, 12_000)}
    assert not conds["0 < delta < 1"] and not conds["ceil(s/beta) <= m"]


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
    ({"subsets": 6}, "subsets: must be >= 7"),
    ({"subsets": 10.5}, "subsets: must be an integer"),
    ({"diameter": 0.0}, "diameter: must be > 0"),
    ({"trace_every": -2}, "trace_every: must be >= 0"),
])
def test_bad_hyperparameters_are_rejected_by_their_declaration(params, match):
    with pytest.raises(ValueError, match=match) as info:
        REGISTRY["ht_sample_aggregate"].validate(params)
    assert "\n" not in str(info.value)


def test_more_subsets_than_rows_is_a_one_line_error(linear):
    problem, _ = linear
    with pytest.raises(ValueError, match="subsets=1000000 exceeds") as info:
        fit_sample_aggregate(problem, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), subsets=10**6)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="needs a target epsilon"):
        fit_sample_aggregate(problem, PrivacyTarget(None, None), np.random.default_rng(0))
