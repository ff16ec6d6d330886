"""Objective perturbation (KST12, Gaussian): the constants, exactness of the perturbed minimiser,
the claim only for exact minimisers of GLMs with proven constants, nothing on the MLP."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from dpbench import models
from dpbench.algorithms import PrivacyTarget, Problem, objective_perturbation
from dpbench.algorithms.base import REGISTRY
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.algorithms.objective_perturbation import fit_objective_perturbation, solve_perturbed
from dpbench.privacy.erm import kst_internal_epsilon, kst_objective_variance, kst_regulariser, kst_replace_one_epsilon
from tests.problems import logistic_problem


@pytest.mark.parametrize("zeta,eps,delta", [(1.0, 0.01, 1e-5), (1.0, 0.25, 1e-4), (2.0, 3.0, 1e-9), (0.5, 1.0, 0.5)])
def test_kst_variance_equals_the_table1_form(zeta, eps, delta):
    beta = kst_objective_variance(zeta, eps, delta)
    assert beta == pytest.approx(zeta**2 * (8 * math.log(2 / delta) + 4 * eps) / eps**2, rel=1e-12)
    assert beta == pytest.approx(4 * zeta**2 * (math.log(4 / delta**2) + eps) / eps**2, rel=1e-12)  # [S3] Table 1


def test_kst_regulariser():
    assert kst_regulariser(0.25, 0.01) == pytest.approx(50.0)  # logistic: 1/(2 eps)
    assert kst_regulariser(2.0, 0.5) == pytest.approx(8.0)
    for bad in (dict(lambda_H=0.0, epsilon=1.0), dict(lambda_H=1.0, epsilon=-1.0)):
        with pytest.raises(ValueError):
            kst_regulariser(**bad)
    with pytest.raises(ValueError, match="delta"):
        kst_objective_variance(1.0, 1.0, 0.0)


def perturbed_gradient(p, theta, b, Delta):
    """(1/n) sum grad l + (Delta/n) theta + l2 theta + b/n, from the per-example gradients."""
    G = p.model.per_example_grads(theta, p.X, p.y)
    return G.sum(axis=0) / p.n + (Delta / p.n) * theta + p.model.l2 * theta + b / p.n


@pytest.mark.parametrize("scale,Delta", [(0.0, 0.0), (1.0, 0.5), (1000.0, 50.0), (30.0, 2.0)])
def test_solve_perturbed_meets_the_optimality_condition(scale, Delta):
    p = logistic_problem(n=500, d=6, seed=1, l2=1e-4)
    b = np.random.default_rng(2).normal(0.0, 1.0, size=6) * scale
    theta, info = solve_perturbed(p, b, Delta)
    assert np.linalg.norm(perturbed_gradient(p, theta, b, Delta)) <= 1e-10
    assert info["grad_norm"] <= 1e-10 and info["solver"] == "lbfgs+newton"

    def J(t):
        return p.model.loss(t, p.X, p.y) + Delta / (2 * p.n) * t @ t + b @ t / p.n

    rng = np.random.default_rng(3)
    assert all(J(theta) <= J(theta + 1e-3 * rng.normal(size=6)) for _ in range(20))  # a minimum, not a saddle
    if scale == 0.0:  # no perturbation: the non-private minimiser
        np.testing.assert_allclose(theta, minimize_empirical_risk(p)[0], atol=1e-8)


def replace_one_root(target):
    """eps_int with eps_int + log(1 + eps_int/2) = target, by scipy's brentq (independent of erm.py)."""
    return brentq(lambda e: e + math.log1p(e / 2) - target, 0.0, target, xtol=1e-300, rtol=1e-15)


@pytest.mark.parametrize("target", [1e-4, 0.01, 0.1, 0.25, 1.0, 3.0, 20.0])
def test_replace_one_calibration_solves_the_equation(target):
    eps_int = kst_internal_epsilon(target)
    assert eps_int == pytest.approx(replace_one_root(target), rel=1e-13)
    assert kst_replace_one_epsilon(eps_int) == eps_int + math.log1p(eps_int / 2)
    assert kst_replace_one_epsilon(eps_int) <= target  # exactly, in float64: the claim is never over target
    assert kst_replace_one_epsilon(eps_int * (1 + 1e-12)) > target * (1 - 1e-15)  # and not needlessly small
    assert target / 1.5 <= eps_int < target


def test_replace_one_calibration_rejects_bad_targets():
    for bad in (0.0, -1.0, math.inf, math.nan, True):
        with pytest.raises(ValueError, match="target_epsilon"):
            kst_internal_epsilon(bad)
    with pytest.raises(ValueError, match="epsilon"):
        kst_replace_one_epsilon(0.0)


@pytest.mark.parametrize("eps", [0.01, 0.25, 3.0])
def test_fit_returns_the_exact_minimiser_for_the_drawn_b(eps):
    p = logistic_problem(n=800, d=5, seed=4, l2=1e-3)
    delta = 1e-5
    fit = fit_objective_perturbation(p, PrivacyTarget(eps, delta), np.random.default_rng(11))
    led = fit.privacy
    eps_int = replace_one_root(eps)  # calibrated so that the replace-one guarantee is eps
    beta = (8 * math.log(2 / delta) + 4 * eps_int) / eps_int**2  # zeta = 1 (logistic, ||x|| <= 1)
    Delta = 2 * 0.25 / eps_int
    assert led["epsilon_internal"] == pytest.approx(eps_int, rel=1e-13)
    assert led["noise_variance"] == pytest.approx(beta, rel=1e-12) and led["regulariser_Delta"] == pytest.approx(Delta)
    b = np.random.default_rng(11).normal(0.0, math.sqrt(beta), size=5)  # the fit's first draw
    assert np.linalg.norm(perturbed_gradient(p, fit.theta, b, Delta)) <= 1e-8
    assert led["solver_grad_norm"] <= 1e-8
    assert led["claim"] == "valid" and led["adjacency"] == "replace-one"
    spent = led["epsilon_spent"]
    assert list(spent) == ["kst12_theorem"] and spent["kst12_theorem"] <= eps
    assert spent["kst12_theorem"] == pytest.approx(eps_int + math.log1p(eps_int / 2), rel=1e-13)
    assert spent["kst12_theorem"] == pytest.approx(eps, rel=1e-12)
    assert led["zeta"] == 1.0 and led["lambda_H"] == 0.25 and led["constants"] == "model"
    assert led["row_norm_bound"] == 1.0 and "rows_projected" in led  # (rows of norm 1 + 1 ulp count)
    assert led["delta"] == delta and led["model_l2"] == 1e-3


def exact_privacy_loss(pD, pD2, b, Delta, beta):
    """log p_D(theta) / p_D'(theta) at theta = theta_priv(D, b), from the change of variables
    b(theta; D) = -n (grad L_ref(theta; D) + (Delta/n) theta) (module docstring): Gaussian part plus
    log Jacobian ratio, with the Jacobian n Hess L_ref + Delta I."""
    theta, info = solve_perturbed(pD, b, Delta)
    assert info["grad_norm"] <= 1e-10
    n, m = pD.n, pD.model
    b2 = -n * (m.grad(theta, pD2.X, pD2.y) + (Delta / n) * theta)
    gauss = (float(b2 @ b2) - float(b @ b)) / (2 * beta)  # log nu(b) - log nu(b2), nu = N(0, beta I)
    jac = [np.linalg.slogdet(n * m.hessian(theta, q.X, q.y) + Delta * np.eye(m.n_params))[1] for q in (pD, pD2)]
    return gauss + jac[0] - jac[1]


def test_replace_one_privacy_loss_is_within_the_spent_epsilon():
    """The derivation numerically: the exact privacy loss between D and D' (one record replaced by
    the one whose gradient is opposite) stays within eps_int + log(1 + eps_int/2) = eps for every
    sampled b (the bad event has probability <= delta = 1e-6), and uses much of it."""
    eps, delta = 1.0, 1e-6
    p = logistic_problem(n=60, d=3, seed=9, l2=1e-2)
    eps_int = kst_internal_epsilon(eps)
    Delta, beta = kst_regulariser(0.25, eps_int), kst_objective_variance(1.0, eps_int, delta)
    X2, y2 = p.X.copy(), p.y.copy()
    X2[0] = -p.X[0] / np.linalg.norm(p.X[0])  # same label, opposite unit direction: gradients differ by ~2 zeta
    p2 = Problem(p.model, X2, y2)
    rng = np.random.default_rng(0)
    losses = np.array([exact_privacy_loss(p, p2, rng.normal(0.0, math.sqrt(beta), size=3), Delta, beta)
                       for _ in range(300)])
    worst = float(np.max(np.abs(losses)))
    assert worst <= eps, worst
    assert worst > 0.1 * eps  # not vacuous (the bound holds to the delta-tail: ~5.5 sd here)


def test_an_inexact_minimiser_is_only_paper_claimed(monkeypatch):
    p = logistic_problem(n=300, d=4)
    real = objective_perturbation.solve_perturbed

    def sloppy(problem, b, Delta, **kw):
        theta, info = real(problem, b, Delta, **kw)
        return theta + 1e-4, {**info, "grad_norm": 1e-6}

    monkeypatch.setattr(objective_perturbation, "solve_perturbed", sloppy)
    led = fit_objective_perturbation(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0)).privacy
    assert led["claim"] == "paper-only" and led["epsilon_spent"] == {}
    assert "exact minimiser" in led["claim_reason"] and led["solver_grad_norm"] == 1e-6


def test_no_claim_on_the_mlp_or_on_ridge():
    info = REGISTRY["objective_perturbation"]
    assert info.convex_only and info.private and info.fit is fit_objective_perturbation
    p = logistic_problem(n=200, d=4)
    mlp = models.make("mlp", 4)
    fit = info.fit(Problem(mlp, p.X, p.y), PrivacyTarget(0.5, 1e-5), np.random.default_rng(0), maxiter=15)
    led = fit.privacy
    assert fit.theta.shape == (mlp.n_params,) and np.all(np.isfinite(fit.theta))
    assert led["claim"] == "none" and led["epsilon_spent"] == {} and led["constants"] == "nominal"
    assert led["solver"] == "lbfgs" and led["lbfgs_iterations"] <= 15
    assert "not convex" in led["claim_reason"] and "rank one" in led["claim_reason"]
    assert led["zeta"] == 1.0 and led["lambda_H"] == 0.25
    ridge = models.make("ridge", 4)
    led = info.fit(Problem(ridge, p.X, p.y), PrivacyTarget(0.5, 1e-5), np.random.default_rng(0)).privacy
    assert led["claim"] == "none" and "no global gradient bound" in led["claim_reason"]


def test_utility_approaches_the_nonprivate_minimiser_at_large_epsilon():
    p = logistic_problem(n=3000, d=6, seed=5)
    theta_star, lstar = minimize_empirical_risk(p)
    gaps = {}
    for eps in (0.05, 20.0):
        fits = [fit_objective_perturbation(p, PrivacyTarget(eps, 1e-5), np.random.default_rng(s)) for s in range(3)]
        gaps[eps] = np.mean([p.model.loss(f.theta, p.X, p.y) - lstar for f in fits])
    assert 0 <= gaps[20.0] < 0.01 < gaps[0.05]


def test_rows_outside_the_ball_are_projected_and_the_output_is_the_fit_on_projected_rows():
    p = logistic_problem(n=500, d=4, seed=6, l2=1e-3)
    X = 0.9 * p.X
    X[[0, 10, 99]] *= 500.0 / np.linalg.norm(X[[0, 10, 99]], axis=1, keepdims=True)  # ||x|| = 500
    target = PrivacyTarget(0.5, 1e-5)
    fit = fit_objective_perturbation(Problem(p.model, X, p.y), target, np.random.default_rng(8))
    led = fit.privacy
    assert led["rows_projected"] == 3 and led["row_norm_bound"] == 1.0 and led["claim"] == "valid"
    hand_X = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    hand = fit_objective_perturbation(Problem(p.model, hand_X, p.y), target, np.random.default_rng(8))
    np.testing.assert_allclose(fit.theta, hand.theta, rtol=1e-8, atol=1e-10)
    assert hand.privacy["noise_variance"] == led["noise_variance"]
    # the projection matters: the exact minimiser for the same b on the raw rows is elsewhere
    b = np.random.default_rng(8).normal(0.0, led["noise_std"], size=4)
    raw, _ = solve_perturbed(Problem(p.model, X, p.y), b, led["regulariser_Delta"])
    assert np.linalg.norm(raw - fit.theta) > 1e-3


def test_nominal_constant_models_keep_their_rows():
    p = logistic_problem(n=200, d=4)
    X = p.X.copy()
    X[0] *= 500.0
    led = fit_objective_perturbation(Problem(models.make("ridge", 4), X, p.y), PrivacyTarget(0.5, 1e-5),
                                     np.random.default_rng(0)).privacy
    assert led["claim"] == "none" and "rows_projected" not in led
