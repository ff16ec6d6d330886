"""Objective perturbation (KST12, Gaussian): the constants, exactness of the perturbed minimiser,
the claim only for exact minimisers of GLMs with proven constants, nothing on the MLP."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbench import models
from dpbench.algorithms import PrivacyTarget, Problem, objective_perturbation
from dpbench.algorithms.base import REGISTRY
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.algorithms.objective_perturbation import fit_objective_perturbation, solve_perturbed
from dpbench.privacy.erm import kst_objective_variance, kst_regulariser

from problems import logistic_problem


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


@pytest.mark.parametrize("eps", [0.01, 0.25, 3.0])
def test_fit_returns_the_exact_minimiser_for_the_drawn_b(eps):
    p = logistic_problem(n=800, d=5, seed=4, l2=1e-3)
    delta = 1e-5
    fit = fit_objective_perturbation(p, PrivacyTarget(eps, delta), np.random.default_rng(11))
    led = fit.privacy
    beta = (8 * math.log(2 / delta) + 4 * eps) / eps**2  # zeta = 1 (logistic, ||x|| <= 1)
    Delta = 2 * 0.25 / eps
    assert led["noise_variance"] == pytest.approx(beta, rel=1e-12) and led["regulariser_Delta"] == pytest.approx(Delta)
    b = np.random.default_rng(11).normal(0.0, math.sqrt(beta), size=5)  # the fit's first draw
    assert np.linalg.norm(perturbed_gradient(p, fit.theta, b, Delta)) <= 1e-8
    assert led["solver_grad_norm"] <= 1e-8
    assert led["claim"] == "valid" and led["epsilon_spent"] == {"kst12_theorem": eps}
    assert led["zeta"] == 1.0 and led["lambda_H"] == 0.25 and led["constants"] == "model"
    assert led["adjacency"] == "add/remove-one" and "replace-one" in led["adjacency_note"] and led["delta"] == delta and led["model_l2"] == 1e-3


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
