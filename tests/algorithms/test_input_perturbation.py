"""Input perturbation ([S3] Alg. 1): the variance is eqs. (9)/(12), the noise is drawn once with the
right shape and scale, the fit is GD on the perturbed data, and the ledger never claims an epsilon."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbench import models
from dpbench.algorithms import PrivacyTarget, Problem
from dpbench.algorithms.base import REGISTRY
from dpbench.algorithms.input_perturbation import fit_input_perturbation, perturb_features
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.privacy.erm import input_perturbation_variance
from tests.problems import logistic_problem


def eq9(G, T, n, eps, delta, c, Delta):
    return c * G**2 * T * math.log(1 / delta) / (n * (n - 1) * math.sqrt(Delta) * eps**2)


def eq12(G, T, n, eps, delta, c):
    return c * G**2 * T * math.log(1 / delta) / (n * (n - 1) * eps**2)


@pytest.mark.parametrize("G,T,n,eps,delta,c,Delta", [
    (1.0, 100, 27134, 0.01, 1e-5, 1.0, 1e-4), (2.5, 7, 50, 0.25, 1e-3, 3.0, 0.5), (1.0, 1, 2, 3.0, 0.5, 0.1, 2.0),
])
def test_variance_is_eq9_and_eq12(G, T, n, eps, delta, c, Delta):
    assert input_perturbation_variance(G, T, n, eps, delta, c=c, strong_convexity=Delta) == pytest.approx(
        eq9(G, T, n, eps, delta, c, Delta), rel=1e-12)
    assert input_perturbation_variance(G, T, n, eps, delta, c=c) == pytest.approx(eq12(G, T, n, eps, delta, c),
                                                                                 rel=1e-12)


def test_sqrt_delta_inflates_the_variance_100x_at_the_default_l2():
    sc = input_perturbation_variance(1.0, 100, 1000, 0.1, 1e-5, strong_convexity=1e-4)
    pl = input_perturbation_variance(1.0, 100, 1000, 0.1, 1e-5)
    assert sc / pl == pytest.approx(100.0)


def test_sigma_shrinks_like_one_over_sqrt_n_n_minus_one():
    sigmas = {n: math.sqrt(input_perturbation_variance(1.0, 50, n, 0.1, 1e-5)) for n in (10, 100, 10000)}
    for a, b in [(10, 100), (100, 10000), (10, 10000)]:
        assert sigmas[a] / sigmas[b] == pytest.approx(math.sqrt(b * (b - 1) / (a * (a - 1))), rel=1e-12)


@pytest.mark.parametrize("kwargs,match", [
    (dict(n=1), "n must be"), (dict(delta=1.0), "delta"), (dict(epsilon=0.0), "epsilon"), (dict(c=-1.0), "c must"),
    (dict(T=1.5), "T must"), (dict(strong_convexity=0.0), "strong_convexity"), (dict(G=float("nan")), "G must"),
])
def test_invalid_arguments_are_rejected(kwargs, match):
    args = dict(G=1.0, T=10, n=100, epsilon=0.1, delta=1e-5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        input_perturbation_variance(**args)


def test_shared_noise_is_one_vector_for_all_rows_and_has_the_formula_std():
    X = np.random.default_rng(0).normal(size=(40, 5))
    sigma = math.sqrt(input_perturbation_variance(1.0, 100, 40, 0.5, 1e-5))  # ~0.12
    rng = np.random.default_rng(1)
    Xt, z = perturb_features(X, sigma, "shared", rng)
    assert z.shape == (5,)
    np.testing.assert_allclose(Xt - X, np.broadcast_to(z, X.shape), atol=1e-15)
    draws = np.array([perturb_features(X, sigma, "shared", rng)[1] for _ in range(20000)])  # 1e5 coordinates
    assert draws.std() == pytest.approx(sigma, rel=0.01) and abs(draws.mean()) < 0.01 * sigma


def test_per_example_noise_is_independent_per_row_and_has_the_formula_std():
    X = np.zeros((20000, 5))
    sigma = math.sqrt(input_perturbation_variance(1.0, 10, 20000, 0.01, 1e-5, strong_convexity=1e-2))
    Xt, z = perturb_features(X, sigma, "per_example", np.random.default_rng(2))
    assert z.shape == X.shape
    np.testing.assert_array_equal(Xt, z)
    assert z.std() == pytest.approx(sigma, rel=0.01)
    assert abs(np.corrcoef(z[:-1, 0], z[1:, 0])[0, 1]) < 0.03  # rows are not the same draw
    with pytest.raises(ValueError, match="noise must be"):
        perturb_features(X, sigma, "per_instance", np.random.default_rng(0))


@pytest.mark.parametrize("noise,theorem", [("shared", "strongly_convex"), ("per_example", "pl")])
def test_fit_is_full_batch_gd_on_the_perturbed_data(noise, theorem):
    p = logistic_problem(n=300, d=5, l2=1e-3)
    eps, delta, T, lr = 0.2, 1e-4, 30, 2.0
    fit = fit_input_perturbation(p, PrivacyTarget(eps, delta), np.random.default_rng(7), epochs=T, lr=lr,
                                 noise=noise, theorem=theorem, c=2.0)
    led = fit.privacy
    expected = eq9(1.0, T, 300, eps, delta, 2.0, 1e-3) if theorem == "strongly_convex" else eq12(1.0, T, 300, eps,
                                                                                                  delta, 2.0)
    assert led["sigma"] == pytest.approx(math.sqrt(expected), rel=1e-12)
    # reconstruct: z first (same RNG order), then theta_0, then T steps of theta -= lr * grad L_hat
    rng = np.random.default_rng(7)
    Xt, z = perturb_features(p.X, led["sigma"], noise, rng)
    theta = p.model.init(rng)
    for _ in range(T):
        theta = theta - lr * (Xt.T @ (-p.y / (1 + np.exp(p.y * (Xt @ theta)))) / p.n + 1e-3 * theta)
    np.testing.assert_allclose(fit.theta, theta, rtol=1e-10, atol=1e-12)
    assert led["claim"] == "paper-only" and led["epsilon_spent"] == {} and led["private"] is True
    assert "docs/methods/input-perturbation.md" in led["claim_reason"] and led["noise"] == noise and led["theorem"] == theorem
    assert led["steps"] == T and led["lr"] == lr and led["c"] == 2.0 and led["adjacency"] == "replace-one"
    if noise == "shared":
        assert led["feature_noise_norm"] == pytest.approx(np.linalg.norm(z))
    assert fit.trace == []


def test_trace_is_the_clean_training_loss():
    p = logistic_problem(n=300, d=5)
    fit = fit_input_perturbation(p, PrivacyTarget(0.05, 1e-4), np.random.default_rng(0), epochs=25, trace_every=10)
    assert [row["step"] for row in fit.trace] == [10, 20, 25]
    assert fit.trace[-1]["train_loss"] == pytest.approx(p.model.loss(fit.theta, p.X, p.y))  # clean X, not X + z


def test_strongly_convex_theorem_needs_a_positive_l2():
    p = logistic_problem(n=200, d=4, l2=0.0)
    with pytest.raises(ValueError, match="theorem: pl"):
        fit_input_perturbation(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0))
    fit = fit_input_perturbation(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), theorem="pl")
    assert fit.privacy["strong_convexity"] is None


def test_mlp_runs_with_nominal_constants_and_still_claims_nothing():
    p = logistic_problem(n=200, d=4)
    mlp = models.make("mlp", 4)
    info = REGISTRY["input_perturbation"]
    assert info.private and info.fit is fit_input_perturbation
    fit = info.fit(Problem(mlp, p.X, p.y), PrivacyTarget(0.1, 1e-5), np.random.default_rng(0), epochs=5)
    assert fit.theta.shape == (mlp.n_params,) and np.all(np.isfinite(fit.theta))
    led = fit.privacy
    assert led["claim"] == "paper-only" and led["epsilon_spent"] == {} and led["constants"] == "nominal"
    assert "premises fail" in led["claim_reason"]


def test_shared_noise_is_absorbed_by_the_intercept():
    """Shared noise and a free intercept (docs/methods/input-perturbation.md, Privacy, item 4): with an
    unregularised intercept feature (constant c), the minimiser on
    X + z (shared z) has exactly the clean weights w* on the other features, and intercept weight
    (c w0* - w*.z_rest) / (c + z_0): the noise leaves no trace in w (epsilon = infinity at convergence).
    Per-example noise does change w."""
    rng = np.random.default_rng(3)
    n, d = 400, 4
    c = 1 / math.sqrt(d + 1)
    F = rng.uniform(size=(n, d)) / math.sqrt(d + 1)
    X = np.column_stack([F, np.full(n, c)])  # ||x|| <= 1, intercept feature last
    y = np.where(F @ np.array([3, -2, 1, 2.0]) - 0.7 + 0.3 * rng.normal(size=n) >= 0, 1.0, -1.0)  # not separable
    model = models.make("logreg", d + 1, l2=0.0)
    w_clean, _ = minimize_empirical_risk(Problem(model, X, y))
    Xt, z = perturb_features(X, 0.3, "shared", np.random.default_rng(4))
    w_shared, _ = minimize_empirical_risk(Problem(model, Xt, y))
    np.testing.assert_allclose(w_shared[:d], w_clean[:d], rtol=1e-7, atol=1e-8)
    assert w_shared[d] == pytest.approx((c * w_clean[d] - w_clean[:d] @ z[:d]) / (c + z[d]), rel=1e-7)
    Xp, _ = perturb_features(X, 0.3, "per_example", np.random.default_rng(4))
    w_per, _ = minimize_empirical_risk(Problem(model, Xp, y))
    assert np.linalg.norm(w_per[:d] - w_clean[:d]) > 0.1 * np.linalg.norm(w_clean[:d])
