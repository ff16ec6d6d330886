"""Bolt-on: the sensitivity bounds hold (and are attained) on neighbouring data sets, the noise is the
analytic Gaussian one, step sizes that void the proof are rejected, no claim on the MLP, utility."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.stats import norm

from dpbench import models
from dpbench.algorithms import bolt_on
from dpbench.algorithms.base import REGISTRY, Fit, PrivacyTarget, Problem
from dpbench.algorithms.bolt_on import bolt_on_core, fit_bolt_on, plan_bolt_on
from dpbench.models.base import Model
from dpbench.privacy import gaussian_epsilon
from dpbench.run.cells import Cell, CellContext, run_cell

VARIANTS = bolt_on.VARIANTS


def unit_rows(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)  # ||x|| = 1: the Lipschitz bound is as large as allowed
    w = rng.normal(size=d) * 3
    y = np.where(X @ w + 0.5 * rng.normal(size=n) >= 0, 1.0, -1.0)
    return X, y


class LinearLoss(Model):
    """l(theta; x, y) = -y <theta, x>: G = ||x|| = 1, beta_s = 0, gradient -y x independent of theta.

    Replacing y by -y changes the gradient by exactly 2G, always in the same direction, so every
    inequality in the sensitivity proofs is an equality: the bounds must be attained.
    """

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


def neighbour_gaps(model, X, y, plan, rng, trials):
    """max ||theta_T(D) - theta_T(D')|| over random permutations, positions and replacements."""
    n, d = X.shape
    worst = 0.0
    for trial in range(trials):
        perm = rng.permutation(n)
        theta0 = model.init(rng)
        base = bolt_on_core(model, X, y, perm, plan, theta0)
        # half the time the record the proofs call worst: in the last batch of every pass
        pos = perm[plan.batch_size * plan.batches_per_pass - 1] if trial % 2 == 0 else int(rng.integers(n))
        X2, y2 = X.copy(), y.copy()
        if trial % 3 == 0:  # opposite gradient direction
            X2[pos] = -X[pos]
        else:  # a random unit-norm record with a random label
            v = rng.normal(size=d)
            X2[pos], y2[pos] = v / np.linalg.norm(v), rng.choice([-1.0, 1.0])
        worst = max(worst, float(np.linalg.norm(bolt_on_core(model, X2, y2, perm, plan, theta0) - base)))
    return worst


@pytest.mark.parametrize("variant,l2,lr", [
    ("convex", 0.0, None), ("convex", 0.0, 7.9), ("convex", 0.01, None),
    ("strongly_convex", 0.05, None), ("strongly_convex", 0.5, 1.0),
    ("strongly_convex_constant", 0.05, None), ("strongly_convex_constant", 0.5, None),
])
def test_sensitivity_bound_holds_on_neighbouring_logistic_data(variant, l2, lr):
    X, y = unit_rows(200, 5, seed=0)
    model = models.make("logreg", 5, l2=l2)
    # lipschitz_bound "data" (L = G) is the tighter of the two: checking it checks "paper" too
    plan = plan_bolt_on(model, 200, variant=variant, epochs=3, batch_size=10, lr=lr, lipschitz_bound="data")
    paper = plan_bolt_on(model, 200, variant=variant, epochs=3, batch_size=10, lr=lr, lipschitz_bound="paper")
    assert paper.sensitivity >= plan.sensitivity
    worst = neighbour_gaps(model, X, y, plan, np.random.default_rng(1), trials=120)
    print(f"\n{variant} l2={l2} lr={plan.lr:.3g}: max gap {worst:.4g} <= Delta {plan.sensitivity:.4g} "
          f"(ratio {worst / plan.sensitivity:.2f}; paper L: {worst / paper.sensitivity:.2f})")
    assert 0 < worst <= plan.sensitivity
    assert worst > 0.15 * plan.sensitivity  # not vacuous: logistic gradients differ by <= ~G, not 2G


@pytest.mark.parametrize("variant,l2", [("convex", 0.0), ("strongly_convex", 0.2), ("strongly_convex_constant", 0.2)])
def test_sensitivity_bound_is_attained_by_a_linear_loss(variant, l2):
    """Flip the label of a record in the last batch: the gap equals Delta (no slack in the formulas)."""
    n, d, B = 60, 3, 6
    X, y = unit_rows(n, d, seed=2)
    model = LinearLoss(d, l2=l2)
    plan = plan_bolt_on(model, n, variant=variant, epochs=4, batch_size=B, lipschitz_bound="data",
                        lr=0.7 if variant == "convex" else None)  # beta = l2 here: default 1/beta needs l2 > 0
    perm = np.random.default_rng(3).permutation(n)
    y2 = y.copy()
    y2[perm[B * plan.batches_per_pass - 1]] *= -1
    gap = np.linalg.norm(bolt_on_core(model, X, y2, perm, plan, np.zeros(d))
                         - bolt_on_core(model, X, y, perm, plan, np.zeros(d)))
    assert gap == pytest.approx(plan.sensitivity, rel=1e-9)


def test_sensitivity_formulas():
    model = models.make("logreg", 4, l2=0.01)
    lam, beta = 0.01, 0.26
    c = plan_bolt_on(model, 1000, variant="convex", epochs=3, batch_size=50, lipschitz_bound="paper")
    # L = G + lambda R with R = G/lambda = 100: L = 2; eta = 1/beta
    assert c.radius == pytest.approx(100) and c.lipschitz == pytest.approx(2.0) and c.lr == pytest.approx(1 / beta)
    assert c.sensitivity == pytest.approx(2 * 3 * 2.0 * (1 / beta) / 50)
    s = plan_bolt_on(model, 1000, variant="strongly_convex", epochs=3, batch_size=50)
    assert s.sensitivity == pytest.approx(2 * 2.0 / (lam * 1000))  # 2L/(mu n), independent of k and B
    assert s.step_size(1) == pytest.approx(1 / beta) and s.step_size(1000) == pytest.approx(1 / (lam * 1000))
    # B does not divide n: the tail is unused and the formula uses the B m rows
    s2 = plan_bolt_on(model, 1030, variant="strongly_convex", epochs=3, batch_size=50)
    assert s2.batches_per_pass == 20 and s2.sensitivity == pytest.approx(2 * 2.0 / (lam * 1000))
    k = plan_bolt_on(model, 1000, variant="strongly_convex_constant", epochs=3, batch_size=50, lr=1.0)
    cc = 1 - lam * 1.0
    finite = 2 * 1.0 * 2.0 / 50 * sum(cc ** (j * 20) for j in range(3))
    assert k.sensitivity == pytest.approx(finite)
    assert k.sensitivity <= 2 * 1.0 * 2.0 / 50 / (1 - cc ** 20)  # the table's k -> infinity form
    assert k.sensitivity <= 2 * 3 * 2.0 * 1.0 / 50  # never worse than the convex bound


def balle_wang_sigma(eps, delta, sens):
    """Smallest s with Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D) <= delta, by bisection."""
    def excess(s):
        a, b = sens / (2 * s), eps * s / sens
        return norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b) - delta

    lo, hi = 1e-6 * sens, sens
    while excess(hi) > 0:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return hi


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_noise_is_the_analytic_gaussian_and_ledger_recomputes_epsilon(eps):
    X, y = unit_rows(500, 6, seed=4)
    p = Problem(model=models.make("logreg", 6, l2=1e-3), X=X, y=y)
    delta = 1e-5
    fit = fit_bolt_on(p, PrivacyTarget(eps, delta), np.random.default_rng(9), variant="strongly_convex", l2=0.05)
    led = fit.privacy
    sens = led["sensitivity"]
    assert sens == pytest.approx(2 * (1 + 0.05 * 20) / (0.05 * 500))  # R = 1/lambda = 20
    assert led["noise_std"] == pytest.approx(balle_wang_sigma(eps, delta, sens), rel=1e-7)
    assert led["epsilon_spent"]["analytic_gaussian"] == pytest.approx(gaussian_epsilon(led["noise_std"], delta, sens))
    assert 0.999 * eps < led["epsilon_spent"]["analytic_gaussian"] <= eps * (1 + 1e-9)
    assert led["claim"] == "valid" and led["adjacency"] == "replace-one" and led["delta"] == delta
    assert led["variant"] == "strongly_convex" and led["passes"] == 1 and led["batch_size"] == 50
    # the released vector is theta_T plus exactly one N(0, std^2 I) draw (same RNG order as fit)
    rng = np.random.default_rng(9)
    theta0, perm = p.model.init(rng), rng.permutation(p.n)
    plan = plan_bolt_on(p.model, p.n, variant="strongly_convex", l2=0.05)
    core = bolt_on_core(p.model, X, y, perm, plan, theta0)
    np.testing.assert_array_equal(fit.theta, core + rng.normal(0.0, led["noise_std"], size=6))


def test_laplace_norm_noise_is_pure_epsilon():
    X, y = unit_rows(500, 6, seed=4)
    p = Problem(model=models.make("logreg", 6, l2=1e-3), X=X, y=y)
    led = fit_bolt_on(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), noise="laplace_norm").privacy
    assert led["delta"] == 0.0 and led["noise_scale"] == pytest.approx(led["sensitivity"] / 1.0)
    assert led["epsilon_spent"] == {"laplace_norm": pytest.approx(1.0)} and led["claim"] == "valid"


def test_step_size_above_the_proofs_limit_is_rejected():
    model = models.make("logreg", 4, l2=0.01)
    beta = 0.25 + 0.01
    assert plan_bolt_on(model, 100, variant="convex", lr=2 / beta).lr == pytest.approx(2 / beta)  # limit is fine
    with pytest.raises(ValueError, match="exceeds 2/beta"):
        plan_bolt_on(model, 100, variant="convex", lr=2.01 / beta)
    for variant in ("strongly_convex", "strongly_convex_constant"):
        plan_bolt_on(model, 100, variant=variant, lr=1 / beta)
        with pytest.raises(ValueError, match="exceeds 1/beta"):
            plan_bolt_on(model, 100, variant=variant, lr=1.01 / beta)
    with pytest.raises(ValueError, match="l2 > 0"):
        plan_bolt_on(models.make("logreg", 4, l2=0.0), 100, variant="strongly_convex")
    X, y = unit_rows(100, 4, seed=0)
    with pytest.raises(ValueError, match="exceeds"):
        REGISTRY["bolt_on"].fit(Problem(model, X, y), PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), lr=9.0)


def test_convex_only_and_no_claim_on_the_mlp():
    info = REGISTRY["bolt_on"]
    assert info.fit is bolt_on.fit_bolt_on and info.convex_only and info.private
    X, y = unit_rows(300, 4, seed=0)
    mlp = models.make("mlp", 4, hidden=3)
    fit = fit_bolt_on(Problem(mlp, X, y), PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), lr=0.5)
    assert fit.privacy["claim"] == "none" and "not convex" in fit.privacy["claim_reason"]
    assert fit.privacy["constants"] == "nominal" and np.all(np.isfinite(fit.theta))


def _cell(model, params=()):
    return Cell(algorithm="bolt_on", params=tuple(params), dataset="breast_cancer", dataset_options=(),
                model=model, model_options=(("hidden", 3),) if model == "mlp" else (), epsilon=1.0,
                delta="1/n", rep=0, seed=0)


def test_cell_runner_marks_no_claim_on_the_mlp(data_dir, tmp_path):
    ctx = CellContext(data_dir=str(data_dir), cache_dir=str(tmp_path))
    # L* is irrelevant to the claim: seed the runner's cache so the MLP's multi-start L-BFGS is skipped
    (tmp_path / f"optimum-{_cell('mlp').problem_key}.json").write_text('{"lstar": 0.0}')
    rec = run_cell(_cell("logreg"), ctx)
    assert rec["privacy"]["claim"] == "valid" and rec["metrics"]
    rec = run_cell(_cell("mlp", (("lr", 0.5),)), ctx)
    assert rec["privacy"]["claim"] == "none"
    # the runner's own downgrade (convex_only), independent of what fit reports
    info = REGISTRY["bolt_on"]

    def fit_claiming_valid(problem, privacy, rng, **hyper):
        fit = info.fit(problem, privacy, rng, **hyper)  # drops the fit's own reason: the runner must give one
        return Fit(theta=fit.theta, privacy=dataclasses.replace(fit.privacy, claim="valid", claim_reason=None),
                   trace=fit.trace)

    with REGISTRY.substituted(dataclasses.replace(info, fit=fit_claiming_valid)):
        rec = run_cell(_cell("mlp", (("lr", 0.5),)), ctx)
    assert rec["privacy"]["claim"] == "none" and "convex" in rec["privacy"]["claim_reason"]


def test_accuracy_improves_with_epsilon():
    X, y = unit_rows(4000, 8, seed=5)
    p = Problem(models.make("logreg", 8, l2=1e-3), X[:2000], y[:2000])
    Xt, yt = X[2000:], y[2000:]

    def acc(eps, **kw):
        return float(np.mean([np.mean(p.model.predict(fit_bolt_on(p, PrivacyTarget(eps, 1e-5),
                                                                  np.random.default_rng(s), **kw).theta, Xt) == yt)
                              for s in range(5)]))

    for kw in ({}, {"variant": "strongly_convex", "l2": 0.01, "epochs": 2}):
        hi, lo = acc(8.0, **kw), acc(0.05, **kw)
        assert hi > 0.85 and hi > lo + 0.1, (kw, hi, lo)


# ---- rows outside the unit ball: projected inside the mechanism ------------------------------
def by_hand(X):
    return X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))


@pytest.mark.parametrize("variant,l2,compiled", [("convex", 0.0, True), ("strongly_convex", 0.05, True),
                                                 ("strongly_convex_constant", 0.05, False)])
def test_rows_outside_the_ball_are_projected_and_the_output_is_the_fit_on_projected_rows(variant, l2, compiled,
                                                                                         monkeypatch):
    monkeypatch.setattr(bolt_on.kernels, "jit_enabled", lambda: compiled)  # both core paths
    X, y = unit_rows(400, 5, seed=7)
    X = 0.9 * X
    X[[3, 50, 77, 200]] *= 500.0 / 0.9  # ||x|| = 500: G = 1, beta_s = 1/4 do not hold for these rows
    model = models.make("logreg", 5, l2=1e-3)
    target = PrivacyTarget(1.0, 1e-5)
    kw = dict(variant=variant, l2=l2, epochs=2, batch_size=10)
    fit = fit_bolt_on(Problem(model, X, y), target, np.random.default_rng(5), **kw)
    led = fit.privacy
    assert led["rows_projected"] == 4 and led["row_norm_bound"] == 1.0 and led["claim"] == "valid"
    hand = fit_bolt_on(Problem(model, by_hand(X), y), target, np.random.default_rng(5), **kw)
    np.testing.assert_allclose(fit.theta, hand.theta, rtol=1e-10, atol=1e-12)
    assert hand.privacy["sensitivity"] == led["sensitivity"] and hand.privacy["noise_std"] == led["noise_std"]
    # the projection matters: the same permutation on the raw rows gives a different theta_T
    rng = np.random.default_rng(5)
    theta0, perm = model.init(rng), rng.permutation(400)
    plan = plan_bolt_on(model, 400, **kw)
    raw, projected = (bolt_on_core(model, X_, y, perm, plan, theta0) for X_ in (X, by_hand(X)))
    assert np.linalg.norm(raw - projected) > 1e-4  # far beyond the tolerance above


def test_a_replaced_row_of_norm_500_moves_theta_by_at_most_the_ledgers_sensitivity():
    """Neighbours D, D' (the last row of the last batch replaced by a misclassified row of norm 500):
    with the same seed (same permutation and noise) the two releases differ by the difference of
    the noise-free thetas, which is within Delta; the raw rows would not be."""
    n, d, seed = 200, 5, 2
    X, y = unit_rows(n, d, seed=3)
    X = 0.9 * X
    model = models.make("logreg", d, l2=1e-3)
    target = PrivacyTarget(1.0, 1e-5)
    kw = dict(variant="convex", l2=0.0, epochs=2, batch_size=10, lipschitz_bound="data")
    plan = plan_bolt_on(model, n, **kw)
    rng = np.random.default_rng(seed)
    theta0, perm = model.init(rng), rng.permutation(n)
    base = bolt_on_core(model, X, y, perm, plan, theta0)
    i = perm[plan.batch_size * plan.batches_per_pass - 1]
    X2, y2 = X.copy(), y.copy()
    X2[i], y2[i] = -500.0 * base / np.linalg.norm(base), 1.0
    fit, fit2 = (fit_bolt_on(Problem(model, X_, y_), target, np.random.default_rng(seed), **kw)
                 for X_, y_ in ((X, y), (X2, y2)))
    sens = fit.privacy["sensitivity"]
    assert fit2.privacy["sensitivity"] == sens and fit2.privacy["noise_std"] == fit.privacy["noise_std"]
    assert fit.privacy["rows_projected"] == 0 and fit2.privacy["rows_projected"] == 1
    gap = float(np.linalg.norm(fit.theta - fit2.theta))  # the same noise draw cancels
    assert 0 < gap <= sens
    raw_gap = float(np.linalg.norm(base - bolt_on_core(model, X2, y2, perm, plan, theta0)))
    assert raw_gap > sens, (raw_gap, sens)
