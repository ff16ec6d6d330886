"""Output perturbation of full-batch GD ([S2] Alg. 1 / ZZMW): the sensitivity bound holds (and is
attained) on neighbouring data sets, the noise is the analytic Gaussian one, step sizes that void the
contraction are rejected, no claim on the MLP."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpbench import models
from dpbench.algorithms import PrivacyTarget, Problem
from dpbench.algorithms.base import REGISTRY
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.algorithms.output_perturbation import fit_output_perturbation_gd, output_gd_core, plan_output_gd
from dpbench.models.base import Model
from dpbench.privacy import gaussian_epsilon
from dpbench.privacy.erm import output_gd_sensitivity, zzmw_sensitivity


def unit_rows(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)  # ||x|| = 1: gradients as large as the bound allows
    y = np.where(X @ (rng.normal(size=d) * 3) + 0.5 * rng.normal(size=n) >= 0, 1.0, -1.0)
    return X, y


class LinearLoss(Model):
    """l(theta; x, y) = -y <theta, x>: G = 1, beta_s = 0; flipping y changes the gradient by exactly 2G."""

    name = "linear"
    lipschitz = 1.0
    smoothness = 0.0

    @property
    def n_params(self):
        return self.n_features

    def init(self, rng):
        return np.zeros(self.n_features)

    def per_example_losses(self, theta, X, y):
        return -y * (X @ theta)

    def per_example_grads(self, theta, X, y):
        return -y[:, None] * X

    def data_grad(self, theta, X, y):
        return -(X.T @ y) / X.shape[0]


# ---- the formulas --------------------------------------------------------------------------
@pytest.mark.parametrize("G,n,mu,lr,T", [(1.0, 100, 0.1, 1.0, 1), (2.0, 1000, 0.01, 3.9, 50), (1.0, 50, 0.3, 2.0, 400)])
def test_strongly_convex_sensitivity_is_the_contracted_sum(G, n, mu, lr, T):
    direct = sum(2 * lr * G / n * (1 - lr * mu) ** s for s in range(T))
    assert output_gd_sensitivity(G, n, mu, lr, T) == pytest.approx(direct, rel=1e-12)
    # the limit T -> inf; at T = 400 the sum equals it to the last bit, so allow float noise
    assert output_gd_sensitivity(G, n, mu, lr, T) <= 2 * G / (n * mu) * (1 + 1e-12)
    assert output_gd_sensitivity(G, n, mu, lr, T) <= output_gd_sensitivity(G, n, 0.0, lr, T) * (1 + 1e-12)


def test_convex_sensitivity_and_the_strongly_convex_bound_wins_for_large_T():
    assert output_gd_sensitivity(1.5, 200, 0.0, 0.5, 30) == pytest.approx(2 * 0.5 * 1.5 * 30 / 200)
    assert output_gd_sensitivity(1.0, 200, 0.05, 4.0, 1) == pytest.approx(output_gd_sensitivity(1.0, 200, 0.0, 4.0, 1))
    big_T = output_gd_sensitivity(1.0, 200, 0.05, 4.0, 1000)
    assert big_T == pytest.approx(2 / (200 * 0.05)) and big_T < 0.01 * output_gd_sensitivity(1.0, 200, 0.0, 4.0, 1000)


def test_zzmw_bound_and_it_is_looser():
    assert zzmw_sensitivity(2.0, 100, 0.1, 0.35) == pytest.approx(5 * 2.0 * 0.45 / (100 * 0.1 * 0.35))
    for alpha, beta in [(1e-4, 0.25), (0.1, 0.35), (1.0, 1.0)]:
        assert zzmw_sensitivity(1.0, 100, alpha, beta) > 2 / (100 * alpha)  # >= the [D] limit


@pytest.mark.parametrize("args,match", [
    ((1.0, 100, 0.5, 3.0, 10), "lr \\* mu"), ((1.0, 0, 0.1, 1.0, 10), "n must"), ((1.0, 100, -0.1, 1.0, 10), "mu"),
    ((1.0, 100, 0.1, 1.0, 0), "T must"), ((0.0, 100, 0.1, 1.0, 10), "G must"), ((1.0, 100, 0.1, 0.0, 10), "lr"),
])
def test_invalid_sensitivity_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        output_gd_sensitivity(*args)


# ---- the bound on neighbouring data sets ---------------------------------------------------
def neighbour_gap(model, X, y, plan, rng, trials):
    """max ||theta_T(D) - theta_T(D')|| over replacements of one row, including adversarial ones."""
    n, d = X.shape
    run = lambda X_, y_: output_gd_core(model, X_, y_, np.zeros(d), steps=plan.steps, lr=plan.lr, l2=plan.l2,
                                        radius=plan.radius)
    base = run(X, y)
    far = int(np.argmax(np.abs(X @ base)))  # the record with the largest margin
    worst = 0.0
    for trial in range(trials):
        i = far if trial < 3 else int(rng.integers(n))
        X2, y2 = X.copy(), y.copy()
        if trial % 3 == 0:
            y2[i] = -y[i]  # flip the label
        elif trial % 3 == 1:
            X2[i] = -X[i]  # opposite direction, same label
        else:
            v = rng.normal(size=d)
            X2[i], y2[i] = v / np.linalg.norm(v), rng.choice([-1.0, 1.0])
        worst = max(worst, float(np.linalg.norm(run(X2, y2) - base)))
    return worst


@pytest.mark.parametrize("T,lr,l2", [(20, None, 0.0), (200, 2.0, 0.0), (100, None, 0.01), (300, None, 0.1),
                                     (300, 5.0, 0.05)])
def test_sensitivity_bound_holds_on_neighbouring_logistic_data(T, lr, l2):
    X, y = unit_rows(200, 5, seed=0)
    model = models.make("logreg", 5, l2=l2)
    plan = plan_output_gd(model, 200, epochs=T, lr=lr, lipschitz_bound="data")  # L = G: the tighter bound
    paper = plan_output_gd(model, 200, epochs=T, lr=lr, lipschitz_bound="paper")
    assert paper.sensitivity >= plan.sensitivity
    worst = neighbour_gap(model, X, y, plan, np.random.default_rng(1), trials=30)
    assert 0 < worst <= plan.sensitivity
    assert worst > 0.15 * plan.sensitivity  # not vacuous (logistic gradients differ by ~G, not 2G)


@pytest.mark.parametrize("T,lr,l2", [(50, 0.7, 0.0), (40, None, 0.2), (500, None, 0.05), (30, 4.0, 0.25)])
def test_sensitivity_bound_is_attained_by_a_linear_loss(T, lr, l2):
    """Flip one label: the injected difference is exactly 2 lr G x / n every step: gap == Delta."""
    n, d = 60, 3
    X, y = unit_rows(n, d, seed=2)
    model = LinearLoss(d, l2=l2)
    plan = plan_output_gd(model, n, epochs=T, lr=lr, lipschitz_bound="data")
    y2 = y.copy()
    y2[7] *= -1
    run = lambda y_: output_gd_core(model, X, y_, np.zeros(d), steps=T, lr=plan.lr, l2=plan.l2, radius=plan.radius)
    assert np.linalg.norm(run(y2) - run(y)) == pytest.approx(plan.sensitivity, rel=1e-9)


def test_plan_constants_and_step_size_limit():
    model = models.make("logreg", 4, l2=0.01)
    beta, mu = 0.26, 0.01
    plan = plan_output_gd(model, 1000, epochs=50)
    assert plan.lr == pytest.approx(1 / beta) and plan.radius == pytest.approx(100.0)
    assert plan.lipschitz == pytest.approx(2.0)  # L = G + lambda R = 1 + 0.01 * 100
    assert plan.sensitivity == pytest.approx(2 * 2.0 / (1000 * mu) * (1 - (1 - mu / beta) ** 50))
    assert plan.zzmw_sensitivity == pytest.approx(5 * 2.0 * (mu + beta) / (1000 * mu * beta))
    assert not plan.zzmw_step_condition and plan_output_gd(model, 1000, lr=1 / (beta + mu)).zzmw_step_condition
    assert plan_output_gd(model, 1000, lipschitz_bound="data").lipschitz == 1.0
    assert plan_output_gd(model, 1000, l2=0.0).radius is None
    assert plan_output_gd(model, 1000, l2=0.1).l2 == 0.1  # replaces the model's l2
    assert plan_output_gd(model, 1000, lr=2 / (beta + mu)).lr == pytest.approx(2 / (beta + mu))  # the limit is fine
    with pytest.raises(ValueError, match="exceeds 2/\\(beta\\+mu\\)"):
        plan_output_gd(model, 1000, lr=2.01 / (beta + mu))
    X, y = unit_rows(100, 4, seed=0)
    with pytest.raises(ValueError, match="exceeds"):
        REGISTRY["output_perturbation_gd"].fit(Problem(model, X, y), PrivacyTarget(1.0, 1e-5),
                                               np.random.default_rng(0), lr=8.0)


# ---- the noise -----------------------------------------------------------------------------
def balle_wang_excess(s, eps, delta, sens):
    a, b = sens / (2 * s), eps * s / sens
    return norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b) - delta


@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 3.0])
def test_noise_is_the_analytic_gaussian_and_the_release_is_core_plus_one_draw(eps):
    X, y = unit_rows(400, 6, seed=4)
    p = Problem(models.make("logreg", 6, l2=1e-3), X, y)
    delta = 1e-5
    fit = fit_output_perturbation_gd(p, PrivacyTarget(eps, delta), np.random.default_rng(9), epochs=60, l2=0.05)
    led = fit.privacy
    sens, s = led["sensitivity"], led["noise_std"]
    L = 1 + 0.05 * 20  # R = G / lambda = 20
    assert sens == pytest.approx(2 * L / (400 * 0.05) * (1 - (1 - 0.05 / 0.3) ** 60))
    # Balle & Wang's condition holds with equality at the returned std (independent scipy check)
    assert balle_wang_excess(s, eps, delta, sens) == pytest.approx(0.0, abs=1e-6 * delta)
    assert balle_wang_excess(s, eps, delta, sens) <= 0 < balle_wang_excess(0.999 * s, eps, delta, sens)
    assert led["epsilon_spent"]["analytic_gaussian"] == pytest.approx(gaussian_epsilon(s, delta, sens))
    assert 0.999 * eps < led["epsilon_spent"]["analytic_gaussian"] <= eps * (1 + 1e-9)
    assert led["claim"] == "valid" and led["adjacency"] == "replace-one" and led["constants"] == "model"
    rng = np.random.default_rng(9)
    theta0 = p.model.init(rng)
    plan = plan_output_gd(p.model, 400, epochs=60, l2=0.05)
    core = output_gd_core(p.model, X, y, theta0, steps=60, lr=plan.lr, l2=0.05, radius=plan.radius)
    np.testing.assert_allclose(fit.theta, core + rng.normal(0.0, s, size=6), rtol=1e-12, atol=1e-15)  # one draw added to the core; last bits are not compared
    assert fit.trace == []


def test_no_claim_on_the_mlp():
    info = REGISTRY["output_perturbation_gd"]
    assert info.convex_only and info.private and info.fit is fit_output_perturbation_gd
    X, y = unit_rows(200, 4, seed=0)
    mlp = models.make("mlp", 4)
    fit = info.fit(Problem(mlp, X, y), PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), epochs=10)
    led = fit.privacy
    assert fit.theta.shape == (mlp.n_params,) and np.all(np.isfinite(fit.theta))
    assert led["claim"] == "none" and led["constants"] == "nominal" and "not convex" in led["claim_reason"]
    assert led["data_lipschitz"] == 1.0 and led["smoothness"] == pytest.approx(0.25 + mlp.l2)


def test_utility_approaches_the_nonprivate_minimiser_at_large_epsilon():
    X, y = unit_rows(3000, 5, seed=6)
    p = Problem(models.make("logreg", 5, l2=1e-2), X, y)
    _, lstar = minimize_empirical_risk(p)
    gaps = {}
    for eps in (0.05, 20.0):
        fits = [fit_output_perturbation_gd(p, PrivacyTarget(eps, 1e-5), np.random.default_rng(s), epochs=300)
                for s in range(3)]
        gaps[eps] = np.mean([p.model.loss(f.theta, X, y) - lstar for f in fits])
    assert 0 <= gaps[20.0] < 0.01 < gaps[0.05]


# ---- rows outside the unit ball: projected inside the mechanism ------------------------------
def rows_with_outliers(n, d, seed, outliers=(0, 5, 11), norm_=500.0):
    """Rows with ||x|| = 0.9 (inside the ball with room to spare) except `outliers`, of norm `norm_`."""
    X, y = unit_rows(n, d, seed)
    X = 0.9 * X
    X[list(outliers)] *= norm_ / 0.9
    return X, y


def by_hand(X):
    return X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))


def test_rows_outside_the_ball_are_projected_and_the_output_is_the_fit_on_projected_rows():
    X, y = rows_with_outliers(300, 5, seed=7)
    model = models.make("logreg", 5, l2=1e-3)
    target = PrivacyTarget(1.0, 1e-5)
    fit = fit_output_perturbation_gd(Problem(model, X, y), target, np.random.default_rng(4), epochs=80, l2=0.05)
    led = fit.privacy
    assert led["rows_projected"] == 3 and led["row_norm_bound"] == 1.0 and led["claim"] == "valid"
    hand = fit_output_perturbation_gd(Problem(model, by_hand(X), y), target, np.random.default_rng(4), epochs=80,
                                      l2=0.05)
    np.testing.assert_allclose(fit.theta, hand.theta, rtol=1e-10, atol=1e-12)
    assert hand.privacy["sensitivity"] == led["sensitivity"] and hand.privacy["noise_std"] == led["noise_std"]
    # the projection matters: the raw rows give a different theta_T
    plan = plan_output_gd(model, 300, epochs=80, l2=0.05)
    raw = output_gd_core(model, X, y, np.zeros(5), steps=80, lr=plan.lr, l2=0.05, radius=plan.radius)
    projected = output_gd_core(model, by_hand(X), y, np.zeros(5), steps=80, lr=plan.lr, l2=0.05, radius=plan.radius)
    assert np.linalg.norm(raw - projected) > 1e-3  # far beyond the tolerance above


def noise_free(fit, model, seed):
    """fit.theta minus its noise: the fit draws theta0 then one N(0, std^2 I) vector from rng(seed)."""
    rng = np.random.default_rng(seed)
    model.init(rng)
    return fit.theta - rng.normal(0.0, fit.privacy["noise_std"], size=fit.theta.shape[0])


@pytest.mark.parametrize("l2,T,bound", [(0.05, 100, "data"), (0.01, 100, "paper"), (0.0, 30, "data")])
def test_a_replaced_row_of_norm_500_moves_theta_by_at_most_the_ledgers_sensitivity(l2, T, bound):
    """Neighbours D, D' (one row replaced by a row of norm 500, aimed against theta_T): the noise-free
    thetas of the two fits are within Delta_T; the GD core on the raw rows is not, so the
    projection is what makes the bound hold."""
    n, d, seed = 200, 5, 3
    X, y = rows_with_outliers(n, d, seed=8, outliers=(1, 2))
    model = models.make("logreg", d, l2=1e-3)
    target = PrivacyTarget(1.0, 1e-5)
    kw = dict(epochs=T, l2=l2, lipschitz_bound=bound)
    plan = plan_output_gd(model, n, **kw)
    core = lambda X_, y_: output_gd_core(model, X_, y_, np.zeros(d), steps=T, lr=plan.lr, l2=l2, radius=plan.radius)
    base = core(by_hand(X), y)
    X2, y2 = X.copy(), y.copy()
    X2[40], y2[40] = -500.0 * base / np.linalg.norm(base), 1.0  # misclassified, gradient norm ~500 against theta_T
    fit, fit2 = (fit_output_perturbation_gd(Problem(model, X_, y_), target, np.random.default_rng(seed), **kw)
                 for X_, y_ in ((X, y), (X2, y2)))
    sens = fit.privacy["sensitivity"]
    assert fit2.privacy["sensitivity"] == sens == pytest.approx(plan.sensitivity)
    assert fit.privacy["rows_projected"] == 2 and fit2.privacy["rows_projected"] == 3
    theta, theta2 = noise_free(fit, model, seed), noise_free(fit2, model, seed)
    np.testing.assert_allclose(theta, base, rtol=1e-9, atol=1e-12)  # exactly Gaussian around this
    gap = float(np.linalg.norm(theta - theta2))
    assert 0 < gap <= sens
    raw_gap = float(np.linalg.norm(core(X, y) - core(X2, y2)))  # the core without the projection
    assert raw_gap > sens, (raw_gap, sens)
