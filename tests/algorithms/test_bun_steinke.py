"""[S4] Algorithm 3 (``ht_bun_steinke``): ledger recomputed from the eps_c used, the printed variant flagged,
noise that shrinks with n only when corrected, convergence on heavy-tailed synthetic_linear data,
minibatch and trace conventions, one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpbench.algorithms.bun_steinke  # noqa: F401  (registers ht_bun_steinke)
from dpbench import data, models
from dpbench.algorithms import PrivacyTarget, Problem
from dpbench.algorithms.base import REGISTRY
from dpbench.algorithms.bun_steinke import fit_bun_steinke
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.privacy import zcdp_to_dp
from dpbench.privacy.smooth_sensitivity import alg3_eps_c, eps_tilde

TARGET = PrivacyTarget(epsilon=1.0, delta=1e-5)


def linear_problem(n=20_000, seed=0, **options):
    ds = data.load("synthetic_linear", seed=seed, n=n, **options)
    return Problem(model=models.make("ridge", ds.n_features), X=ds.X_train, y=ds.y_train), ds


@pytest.fixture(scope="module")
def linear():
    return linear_problem()


def test_registered_with_documented_defaults():
    info = REGISTRY["ht_bun_steinke"]
    assert info.private and not info.convex_only
    assert info.defaults() == {"steps": 50, "lr": None, "kappa": 4.0, "center": 0.0, "trim": 1,
                               "variant": "corrected", "radius": None, "batch_size": None, "trace_every": 0}
    with pytest.raises(ValueError, match="one of corrected, printed"):
        info.param("variant").check("paper")


def test_corrected_ledger_recomputes_the_target(linear):
    problem, _ = linear
    fit = fit_bun_steinke(problem, TARGET, np.random.default_rng(0), steps=20)
    led = fit.privacy
    d, T = problem.model.n_params, 20
    assert led["claim"] == "valid" and led["adjacency"] == "replace-one" and led["variant"] == "corrected"
    assert led["eps_c"] == pytest.approx(eps_tilde(1.0, 1e-5) / math.sqrt(d * T), rel=1e-14)
    assert led["noise_s"] == pytest.approx(led["eps_c"] / 4)
    assert led["smooth_t"] == pytest.approx(led["eps_c"] ** 2 / 16)
    assert led["rho"] == pytest.approx(d * T * led["eps_c"] ** 2 / 2, rel=1e-14)
    assert led["epsilon_spent"]["zcdp"] == pytest.approx(1.0, rel=1e-12)
    assert led["epsilon_spent"]["zcdp"] == zcdp_to_dp(led["rho"], 1e-5)
    assert led["interval"] == [-2.0, 2.0] and led["kappa"] == 4.0 and led["trim"] == 1
    assert led["lr"] == pytest.approx(1 / (2.0 + 1e-3))  # 1/(beta_s + l2) for ridge


def test_printed_variant_is_flagged_paper_only(linear):
    problem, _ = linear
    led = fit_bun_steinke(problem, TARGET, np.random.default_rng(0), steps=5, variant="printed").privacy
    assert led["claim"] == "paper-only" and led["epsilon_spent"] == {}
    for defect in ("not t-smooth", "1/(n-2m)", "eps/sqrt(dT)"):
        assert defect in led["claim_reason"]
    d, T = problem.model.n_params, 5
    assert led["eps_c"] == pytest.approx(1.0 / math.sqrt(d * T))
    # what the corrected (zCDP) accounting says for the eps_c used: eps^2/2 + eps sqrt(2 ln(1/delta))
    assert led["zcdp_epsilon_if_smooth"] == pytest.approx(0.5 + math.sqrt(2 * math.log(1e5)), rel=1e-12)
    assert not led["data_clamped"]


def test_noise_shrinks_with_n_when_corrected_but_not_as_printed():
    small, _ = linear_problem(n=2_000)
    large, _ = linear_problem(n=20_000)
    scale = {}
    for variant in ("corrected", "printed"):
        for name, problem in (("small", small), ("large", large)):
            fit = fit_bun_steinke(problem, TARGET, np.random.default_rng(1), steps=3, variant=variant)
            scale[variant, name] = fit.privacy["noise_multiplier_mean"]
    ratio = scale["corrected", "small"] / scale["corrected", "large"]
    assert ratio == pytest.approx((large.n - 2) / (small.n - 2), rel=0.05)  # S^ ~ kappa/(n - 2m)
    # as printed the prior term e^{-mt}(b - a) has no 1/(n - 2m): the scale does not fall with n
    assert scale["printed", "small"] / scale["printed", "large"] < 1.5
    assert scale["printed", "large"] > 1000 * scale["corrected", "large"]


def test_converges_towards_w_star_at_large_epsilon(linear):
    problem, ds = linear
    theta_erm, _ = minimize_empirical_risk(problem)
    errors = []
    for seed in range(3):
        fit = fit_bun_steinke(problem, PrivacyTarget(10.0, 1e-5), np.random.default_rng(seed))
        errors.append(np.linalg.norm(fit.theta - ds.w_star))
    erm_error = np.linalg.norm(theta_erm - ds.w_star)
    assert max(errors) < 0.15 and max(errors) < erm_error + 0.1  # start: ||0 - w*|| = 1


def test_logistic_model_runs_and_is_valid():
    ds = data.load("synthetic_logistic", seed=0, n=10_000)
    problem = Problem(model=models.make("logreg", ds.n_features), X=ds.X_train, y=ds.y_train)
    fit = fit_bun_steinke(problem, PrivacyTarget(10.0, 1e-5), np.random.default_rng(0), kappa=2.0)
    assert fit.privacy["claim"] == "valid" and fit.privacy["lr"] == pytest.approx(1 / (0.25 + 1e-4))
    cos = fit.theta @ ds.w_star / np.linalg.norm(fit.theta)
    assert cos > 0.9  # logistic regression estimates the direction of w*


def test_minibatch_trace_projection_and_determinism(linear):
    problem, _ = linear
    fit = fit_bun_steinke(problem, TARGET, np.random.default_rng(3), steps=20, batch_size=500, trace_every=7,
                          radius=0.5)
    assert [e["step"] for e in fit.trace] == [0, 7, 14, 20]
    np.testing.assert_array_equal(fit.trace[0]["theta"], np.zeros(problem.model.n_params))
    np.testing.assert_array_equal(fit.trace[-1]["theta"], fit.theta)
    assert all(np.linalg.norm(e["theta"]) <= 0.5 + 1e-12 for e in fit.trace)
    led = fit.privacy
    assert led["rows_per_step"] == 500 and led["batch_size"] == 500
    assert led["epsilon_spent"]["zcdp"] == pytest.approx(1.0, rel=1e-12)  # no amplification claimed
    full = fit_bun_steinke(problem, TARGET, np.random.default_rng(3), steps=20)
    assert led["noise_multiplier_mean"] > 20 * full.privacy["noise_multiplier_mean"]  # n -> B
    assert full.trace == []
    again = fit_bun_steinke(problem, TARGET, np.random.default_rng(3), steps=20, batch_size=500, trace_every=7,
                            radius=0.5)
    np.testing.assert_array_equal(again.theta, fit.theta)
    one = fit_bun_steinke(problem, TARGET, np.random.default_rng(3), steps=3, trace_every=5)
    assert [e["step"] for e in one.trace] == [0, 3]


@pytest.mark.parametrize("params,match", [
    ({"steps": 0}, "steps: must be >= 1"),
    ({"steps": 2.5}, "steps: must be an integer"),
    ({"kappa": 0.0}, "kappa: must be > 0"),
    ({"trim": -1}, "trim: must be >= 0"),
    ({"variant": "paper"}, "variant: must be one of corrected, printed"),
    ({"lr": -1.0}, "lr: must be > 0"),
    ({"radius": 0.0}, "radius: must be > 0"),
    ({"batch_size": 0}, "batch_size: must be >= 1"),
    ({"trace_every": -1}, "trace_every: must be >= 0"),
    ({"center": float("inf")}, "center: must be finite"),
])
def test_bad_hyperparameters_are_rejected_by_their_declaration(params, match):
    with pytest.raises(ValueError, match=match) as info:
        REGISTRY["ht_bun_steinke"].validate(params)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("params,match", [
    ({"batch_size": 10**6}, "batch_size=1000000 exceeds"),
    ({"batch_size": 4, "trim": 2}, "trim=2 needs more than 2\\*trim rows"),
])
def test_hyperparameters_that_do_not_fit_the_data_are_one_line_errors(linear, params, match):
    problem, _ = linear
    with pytest.raises(ValueError, match=match) as info:
        fit_bun_steinke(problem, TARGET, np.random.default_rng(0), **params)
    assert "\n" not in str(info.value)


def test_privacy_target_and_eps_c_range(linear):
    problem, _ = linear
    with pytest.raises(ValueError, match="needs a target epsilon"):
        fit_bun_steinke(problem, PrivacyTarget(None, None), np.random.default_rng(0))
    # one step, 10 coordinates: eps~ = 34 -> eps_c = 10.8 > 8.97 where the CDP condition fails
    assert alg3_eps_c(1000.0, 1e-5, 10, 1) > 8.97
    with pytest.raises(ValueError, match="eps_c = .* exceeds 8.969"):
        fit_bun_steinke(problem, PrivacyTarget(1000.0, 1e-5), np.random.default_rng(0), steps=1)
