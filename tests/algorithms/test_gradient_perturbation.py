"""BST14 noisy SGD and Wang-Ye-Xu DP-GD: noise formulas, exact calibration, step loop, ledgers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpbench import algorithms, models
from dpbench.algorithms import PrivacyTarget, Problem
from dpbench.algorithms.gradient_perturbation import (
    bst14_core,
    bst14_step_sizes,
    dp_gd_core,
    dp_gd_noise,
)
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.models.linear import LogisticRegression
from dpbench.privacy import dpsgd_epsilon, gaussian_composition_sigma, gaussian_epsilon
from dpbench.privacy.gradient_noise import bst14_sigma, bst14_sigma_sum, wyx17_classical_sigma
from tests.problems import logistic_problem


# ---- noise formulas --------------------------------------------------------------------------
@pytest.mark.parametrize("G,n,eps,delta", [(1.0, 45222, 0.1, 1e-5), (2.5, 300, 1.0, 1e-3), (0.3, 10**6, 3.0, 1e-8)])
def test_bst14_sigma_is_the_sum_form_divided_by_n(G, n, eps, delta):
    sum_form = math.sqrt(32 * G**2 * n**2 * math.log(n / delta) * math.log(1 / delta) / eps**2)
    assert bst14_sigma_sum(G, n, eps, delta) == pytest.approx(sum_form, rel=1e-12)
    assert bst14_sigma(G, n, eps, delta) == pytest.approx(sum_form / n, rel=1e-12)


def test_bst14_sigma_worked_example():
    # 5.66 G sqrt(log(n/delta) log(1/delta)) / eps: ~900 G at eps = 0.1, n = 45,222, delta = 1e-5 (905.02 G)
    assert bst14_sigma(1.0, 45222, 0.1, 1e-5) == pytest.approx(905.023, abs=1e-2)
    assert bst14_sigma(3.0, 45222, 0.1, 1e-5) == pytest.approx(3 * 905.023, abs=3e-2)
    assert bst14_sigma(1.0, 45222, 0.1, 1e-5) == pytest.approx(900, rel=0.01)


def test_wyx17_classical_sigma_closed_form():
    G, T, n, eps, delta, c = 1.5, 40, 5000, 0.5, 1e-6, 3.0
    expected = math.sqrt(c * G**2 * T * math.log(1 / delta) / (n**2 * eps**2))
    assert wyx17_classical_sigma(G, T, n, eps, delta, c) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("T,eps,delta,n,C", [(10, 1.0, 1e-5, 45222, 1.0), (100, 0.1, 1e-5, 2000, 0.5),
                                             (50, 3.0, 1e-6, 27000, 2.0), (1, 0.5, 1e-3, 100, 1.0)])
def test_dp_gd_noise_satisfies_the_gdp_condition_exactly(T, eps, delta, n, C):
    s = dp_gd_noise(eps, delta, steps=T, clip_norm=C, n=n)
    mu = math.sqrt(T) * (2 * C / n) / s  # T composed Gaussians, replace-one sensitivity 2C/n
    achieved = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert achieved == pytest.approx(delta, rel=1e-6)
    assert achieved <= delta * (1 + 1e-9)
    # a little less noise would violate the target
    mu_less = mu * 1.001
    assert norm.cdf(-eps / mu_less + mu_less / 2) - math.exp(eps) * norm.cdf(-eps / mu_less - mu_less / 2) > delta


def test_gdp_noise_multiplier_table():
    n, C = 45222, 1.0
    sens = 2 * C / n
    assert dp_gd_noise(1.0, 1e-5, steps=10, clip_norm=C, n=n) / sens == pytest.approx(11.8, abs=0.05)
    assert dp_gd_noise(0.1, 1e-5, steps=100, clip_norm=C, n=n) / sens == pytest.approx(307, abs=1.0)
    assert dp_gd_noise(1.0, 1e-5, steps=1, clip_norm=C, n=n) / sens == pytest.approx(3.73, abs=0.01)


def test_larger_epsilon_means_less_noise():
    eps = [0.05, 0.1, 0.5, 1.0, 3.0]
    gd = [dp_gd_noise(e, 1e-5, steps=50, clip_norm=1.0, n=1000) for e in eps]
    bst = [bst14_sigma(1.0, 1000, e, 1e-5) for e in eps]
    assert all(a > b for a, b in zip(gd, gd[1:]))
    assert all(a > b for a, b in zip(bst, bst[1:]))
    p = logistic_problem(n=500)
    stds = [algorithms.get("dp_gd").fit(p, PrivacyTarget(e, 1e-5), np.random.default_rng(0), epochs=5)
            .privacy["noise_std_mean_gradient"] for e in (0.1, 1.0)]
    assert stds[0] > stds[1]


# ---- BST14 step loop -------------------------------------------------------------------------
class _LogRegGeneric(LogisticRegression):
    """Same loss; overriding reg_grad forces bst14_core's generic (non-GLM) path."""

    def reg_grad(self, theta):
        return self.l2 * theta


def _reference_bst14(problem, indices, lr, clip, radius):
    """Naive loop: one example, clipped gradient, regulariser, projection (noise 0)."""
    model, X, y = problem.model, problem.X, problem.y
    theta = np.zeros(model.n_params)
    projected = 0
    for i in indices:
        g = model.per_example_grads(theta, X[i:i + 1], y[i:i + 1])[0]
        g_norm = np.linalg.norm(g)
        if g_norm > clip:
            g = g * (clip / g_norm)
        theta = theta - lr * (g + model.l2 * theta)
        if np.linalg.norm(theta) > radius:
            theta = theta * (radius / np.linalg.norm(theta))
            projected += 1
    return theta, projected


@pytest.mark.parametrize("generic", [False, True])
def test_bst14_chunked_loop_equals_naive_loop(generic):
    base = logistic_problem(n=300, d=5, seed=3, l2=1e-2)
    model = _LogRegGeneric(5, l2=1e-2) if generic else base.model
    p = Problem(model=model, X=base.X, y=base.y)
    steps, lr, clip, radius = 250, 0.5, 0.3, 0.8
    theta, _ = bst14_core(p, np.random.default_rng(11), steps=steps, step_size=lambda t: np.full(t.shape, lr),
                          clip_norm=clip, noise_std=0.0, radius=radius, theta0=np.zeros(5), chunk=7)
    indices = np.random.default_rng(11).integers(0, p.n, size=steps)  # the same draws, unchunked
    ref, projected = _reference_bst14(p, indices, lr, clip, radius)
    assert projected > 0  # the projection was exercised
    norms = np.linalg.norm(p.model.per_example_grads(np.zeros(5), p.X, p.y), axis=1)
    assert (norms > clip).any()  # and so was clipping
    np.testing.assert_allclose(theta, ref, rtol=0, atol=1e-12)


def test_bst14_noise_is_scaled_by_the_step_size():
    """Zero data gradient, l2 = 0: theta_T = -sum_t eta_t b_t, std sigma sqrt(sum eta_t^2) per coordinate."""
    d = 2000

    class ZeroGrad(models.base.Model):
        n_params = d

        def init(self, rng):
            return np.zeros(d)

        def clipped_grad_sum(self, theta, X, y, clip_norm):
            return np.zeros(d), np.zeros(X.shape[0])

    p = Problem(model=ZeroGrad(3), X=np.zeros((50, 3)), y=np.ones(50))
    sigma, T = 3.0, 60
    theta, _ = bst14_core(p, np.random.default_rng(4), steps=T, step_size=lambda t: 1.0 / np.sqrt(t),
                          clip_norm=1.0, noise_std=sigma, chunk=16)
    expected = sigma * math.sqrt(sum(1.0 / t for t in range(1, T + 1)))
    assert theta.std() == pytest.approx(expected, rel=0.08)


def test_bst14_step_sizes_are_n_times_the_sum_form():
    G, n, eps, delta, p, r, l2 = 1.0, 1000, 0.5, 1e-5, 7, 50.0, 1e-2
    sigma = bst14_sigma(G, n, eps, delta)
    sigma_sum = bst14_sigma_sum(G, n, eps, delta)
    t = np.array([1, 2, 10, 1000])
    g_step = G + l2 * r  # per-example gradient bound of the regularised loss on the ball
    convex = bst14_step_sizes("bst14_convex", lr=None, radius=r, G=G, p=p, sigma=sigma, mu=l2)(t)
    sum_form = r / np.sqrt(t * (n**2 * g_step**2 + p * sigma_sum**2))  # BST14's convex eta(t), sum form
    np.testing.assert_allclose(convex, n * sum_form, rtol=1e-12)
    strong = bst14_step_sizes("bst14_strongly_convex", lr=None, radius=r, G=G, p=p, sigma=sigma, mu=l2)(t)
    np.testing.assert_allclose(strong, n * (1.0 / (n * l2 * t)), rtol=1e-12)  # Delta_sum = n mu
    with pytest.raises(ValueError, match="radius"):
        bst14_step_sizes("bst14_convex", lr=None, radius=None, G=G, p=p, sigma=sigma, mu=0.0)
    with pytest.raises(ValueError, match="l2 > 0"):
        bst14_step_sizes("bst14_strongly_convex", lr=None, radius=r, G=G, p=p, sigma=sigma, mu=0.0)


@pytest.mark.parametrize("schedule", ["bst14_convex", "bst14_strongly_convex", "constant"])
def test_bst14_projection_keeps_iterates_in_the_ball(schedule):
    p = logistic_problem(n=400, l2=1e-2)
    fit = algorithms.get("noisy_sgd_bst14").fit(p, PrivacyTarget(0.5, 1e-5), np.random.default_rng(0), steps=300,
                                                lr_schedule=schedule, lr=1.0, radius=2.0, trace_every=50)
    assert np.linalg.norm(fit.theta) <= 2.0 * (1 + 1e-12)
    assert fit.privacy["radius"] == 2.0 and [row["step"] for row in fit.trace] == list(range(50, 301, 50))


def test_bst14_ledger():
    p = logistic_problem(n=400, l2=1e-2)
    eps, delta = 1.0, 1e-4
    fit = algorithms.get("noisy_sgd_bst14").fit(p, PrivacyTarget(eps, delta), np.random.default_rng(1), steps=500)
    led = fit.privacy
    G = 1.0  # logistic regression's lipschitz bound
    sigma = bst14_sigma(G, 400, eps, delta)
    assert led["claim"] == "valid" and led["adjacency"] == "replace-one" and led["private"] is True
    assert led["steps_paper"] == 400**2 and led["steps_run"] == 500 and led["steps"] == 500
    assert led["noise_std_mean_gradient"] == pytest.approx(sigma) and led["noise_std_sum"] == pytest.approx(400 * sigma)
    assert led["noise_multiplier"] == pytest.approx(sigma / (2 * G))
    assert led["radius"] == pytest.approx(G / 1e-2) and led["clip_norm"] == G
    spent = led["epsilon_spent"]
    assert spent["bst14_theorem"] == eps
    assert spent["rdp_poisson_approx"] == pytest.approx(dpsgd_epsilon(sigma / 2, 1 / 400, 500, delta, "rdp"))
    assert spent["pld_poisson_approx"] == pytest.approx(dpsgd_epsilon(sigma / 2, 1 / 400, 500, delta, "pld"))
    assert "approximation" in led["accountant_note"]


def test_bst14_steps_are_clamped_to_n_squared_and_null_means_n_squared():
    p = logistic_problem(n=20, l2=1e-2)
    info = algorithms.get("noisy_sgd_bst14")
    fit = info.fit(p, PrivacyTarget(1.0, 1e-3), np.random.default_rng(0), steps=5000)
    assert fit.privacy["steps_run"] == 400 and fit.privacy["steps_requested"] == 5000
    fit = info.fit(p, PrivacyTarget(1.0, 1e-3), np.random.default_rng(0), steps=None, lr_schedule="constant", lr=0.1)
    assert fit.privacy["steps_run"] == 400 and fit.privacy["steps_requested"] is None


def test_bst14_runs_on_the_mlp_with_clipping():
    base = logistic_problem(n=200, d=4)
    p = Problem(model=models.make("mlp", 4), X=base.X, y=base.y)
    fit = algorithms.get("noisy_sgd_bst14").fit(p, PrivacyTarget(1.0, 1e-3), np.random.default_rng(0), steps=40,
                                                lr_schedule="constant", lr=1e-3)
    assert fit.privacy["claim"] == "valid" and fit.privacy["clip_norm"] == 1.0
    assert np.all(np.isfinite(fit.theta)) and fit.theta.shape == (p.model.n_params,)


# ---- DP-GD -----------------------------------------------------------------------------------
def test_dp_gd_without_noise_converges_to_the_nonprivate_minimiser():
    p = logistic_problem(n=1000, d=5, seed=2, l2=1e-2)
    theta_star, _ = minimize_empirical_risk(p)
    theta, _ = dp_gd_core(p, np.random.default_rng(0), steps=600, lr=3.0, clip_norm=1.0, noise_std=0.0)
    assert np.linalg.norm(theta - theta_star) < 1e-6
    # the registered fit with a huge epsilon (paper calibration) gets there too
    fit = algorithms.get("dp_gd").fit(p, PrivacyTarget(1e9, 1e-5), np.random.default_rng(0), epochs=600, lr=3.0,
                                      calibration="paper")
    assert np.linalg.norm(fit.theta - theta_star) < 1e-4


def test_dp_gd_noise_has_the_calibrated_std():
    """Zero gradient, l2 = 0, lr = 1: theta_T = -sum_t b_t, std s sqrt(T) per coordinate."""
    d = 3000

    class ZeroGrad(models.base.Model):
        n_params = d

        def init(self, rng):
            return np.zeros(d)

        def clipped_grad_sum(self, theta, X, y, clip_norm):
            return np.zeros(d), np.zeros(X.shape[0])

    p = Problem(model=ZeroGrad(3), X=np.zeros((10, 3)), y=np.ones(10))
    theta, _ = dp_gd_core(p, np.random.default_rng(0), steps=25, lr=1.0, clip_norm=1.0, noise_std=0.2)
    assert theta.std() == pytest.approx(0.2 * 5, rel=0.06)


def test_dp_gd_ledger_gdp_and_paper_calibrations():
    p = logistic_problem(n=800)
    eps, delta, T = 0.5, 1e-5, 20
    info = algorithms.get("dp_gd")
    fit = info.fit(p, PrivacyTarget(eps, delta), np.random.default_rng(0), epochs=T, clip_norm=0.5)
    led = fit.privacy
    sens = 2 * 0.5 / 800
    assert led["sensitivity"] == pytest.approx(sens) and led["adjacency"] == "replace-one"
    assert led["noise_std_mean_gradient"] == pytest.approx(gaussian_composition_sigma(eps, delta, T, sens))
    assert led["epsilon_spent"]["gdp"] <= eps * (1 + 1e-9) and led["claim"] == "valid"
    assert led["epsilon_spent"]["gdp"] == pytest.approx(eps, rel=1e-6)
    # paper closed form with c = 1 buys more than the target (c ~ 4.8 is needed): labelled paper-only
    paper = info.fit(p, PrivacyTarget(eps, delta), np.random.default_rng(0), epochs=T, calibration="paper").privacy
    s = wyx17_classical_sigma(1.0, T, 800, eps, delta, 1.0)
    assert paper["noise_std_mean_gradient"] == pytest.approx(s)
    assert paper["epsilon_spent"]["gdp"] == pytest.approx(gaussian_epsilon(s, delta, 2 / 800, T))
    assert paper["epsilon_spent"]["gdp"] > eps and paper["claim"] == "paper-only"
    generous = info.fit(p, PrivacyTarget(eps, delta), np.random.default_rng(0), epochs=T, calibration="paper",
                        c=20.0).privacy
    assert generous["epsilon_spent"]["gdp"] < eps and generous["claim"] == "valid" and generous["c"] == 20.0


# ---- registration ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["noisy_sgd_bst14", "dp_gd"])
def test_registered_as_private_for_any_model(name):
    info = algorithms.get(name)
    assert info.private and not info.convex_only  # clipping bounds the sensitivity: the MLP is covered too


# ---- unbounded rows: the step's sensitivity is the clipping norm's, whatever the data --------
def _neighbours_with_a_huge_row():
    problem = logistic_problem(n=200, d=5, seed=3)
    X2 = problem.X.copy()
    # ||x|| = 500 on the wrong side of theta = 0.3 (margin -335): its logistic gradient has norm ~500, not <= G = 1
    X2[7] = -problem.y[7] * 500.0 * np.ones(5) / np.sqrt(5)
    return problem, Problem(model=problem.model, X=X2, y=problem.y)


def test_dp_gd_step_moves_by_at_most_its_sensitivity_on_a_row_of_norm_500():
    D, D2 = _neighbours_with_a_huge_row()
    theta0 = np.full(5, 0.3)
    lr, C, n = 1.0, 1.0, D.n
    step = [dp_gd_core(p, np.random.default_rng(0), steps=1, lr=lr, clip_norm=C, noise_std=0.0, theta0=theta0)[0]
            for p in (D, D2)]
    assert np.linalg.norm(step[0] - step[1]) <= lr * 2 * C / n * (1 + 1e-12)  # the ledger's sensitivity 2C/n
    raw = [theta0 - lr * D_.model.grad(theta0, D_.X, D_.y) for D_ in (D, D2)]  # the same step without clipping
    assert np.linalg.norm(raw[0] - raw[1]) > 10 * lr * 2 * C / n


def test_bst14_step_moves_by_at_most_its_sensitivity_on_a_row_of_norm_500():
    D, D2 = _neighbours_with_a_huge_row()
    theta0 = np.full(5, 0.3)
    rng = np.random.default_rng(0)
    hits = np.flatnonzero(rng.integers(0, D.n, size=400) == 7)  # the steps (same stream) that sample row 7
    assert hits.size
    steps = int(hits[0]) + 1  # run until the huge row has been used once
    out = [bst14_core(p, np.random.default_rng(0), steps=steps, step_size=lambda t: np.full(t.shape, 0.5),
                      clip_norm=1.0, noise_std=0.0, theta0=theta0)[0] for p in (D, D2)]
    assert 0 < np.linalg.norm(out[0] - out[1]) <= 0.5 * 2 * 1.0 * (1 + 1e-12)  # eta * 2G, the ledger's per-step bound
