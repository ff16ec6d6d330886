"""[S4] Algorithm 4 (`ht_robust_gd`) and Holland's RGD (`rgd`): sensitivity on worst-case neighbours,
noise-free equivalence, utility under heavy tails, ledger, minibatches, traces, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpbench.algorithms.robust_gd as RGD  # registers ht_robust_gd and rgd
import dpbench.privacy.robust_mean as RM
from dpbench import algorithms, data, models
from dpbench.algorithms import PrivacyTarget, Problem
from dpbench.models.linear import RidgeRegression
from dpbench.privacy import gaussian_epsilon, zcdp_to_dp
from dpbench.privacy.robust_mean import (
    PHI_BOUND,
    alg4_eps_tilde,
    alg4_sigma,
    robust_beta,
    robust_mean,
    robust_mean_sensitivity,
    robust_scale,
    robust_sum,
)
from tests.problems import logistic_problem

HT = algorithms.get("ht_robust_gd")
RGD_INFO = algorithms.get("rgd")


def ridge_problem(n: int = 3000, d: int = 5, seed: int = 0, noise_sigma: float = 1.5) -> Problem:
    """Heavy-tailed linear data: Gaussian x, centred LogNormal(0, noise_sigma) noise; ridge (l2 = 1e-3)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = np.ones(d) / math.sqrt(d)
    y = X @ w + rng.lognormal(0.0, noise_sigma, n) - math.exp(noise_sigma**2 / 2)
    return Problem(model=models.make("ridge", d), X=X, y=y)


# ---- sensitivity and the per-sample bound -----------------------------------------------------
def test_replace_one_sensitivity_on_worst_case_neighbours():
    """Replace one row so that its gradient coordinates go from +G to -G (G huge): the robust
    mean moves by 2 s sup E phi / n per coordinate, at most the stated (4sqrt2/3) s sqrt(p)/n and,
    with beta_m = log(100), at least 96% of it (sup E phi(x(1 + xi/sqrt(beta))) = 0.968 * 2sqrt2/3)."""
    p_dim, n = 4, 500
    base = ridge_problem(n=n, d=p_dim)
    model, w = base.model, np.array([0.3, -0.2, 0.1, 0.5])
    signs = np.array([1.0, -1.0, 1.0, -1.0])
    s, beta = robust_scale(n, 1.0, 0.01), robust_beta(0.01, "log")
    bound = robust_mean_sensitivity(s, n, p_dim)
    G = 1e12
    X1 = base.X.copy()
    X1[0] = signs
    y_plus, y_minus = base.y.copy(), base.y.copy()
    y_plus[0] = float(signs @ w) - G / 2  # gradient 2 (<w, x> - y) x = +G x
    y_minus[0] = float(signs @ w) + G / 2  # = -G x
    g_plus = robust_mean(model.per_example_grads(w, X1, y_plus), s, beta)
    g_minus = robust_mean(model.per_example_grads(w, X1, y_minus), s, beta)
    diff = np.linalg.norm(g_plus - g_minus)
    assert diff <= bound
    assert diff >= 0.96 * bound
    # random heavy-tailed replacements never exceed it either
    rng = np.random.default_rng(3)
    g0 = robust_mean(model.per_example_grads(w, base.X, base.y), s, beta)
    for _ in range(200):
        i = int(rng.integers(n))
        X2, y2 = base.X.copy(), base.y.copy()
        X2[i] = rng.standard_t(1.0, p_dim) * 10.0 ** rng.uniform(0, 6)
        y2[i] = rng.standard_t(1.0) * 10.0 ** rng.uniform(0, 8)
        g2 = robust_mean(model.per_example_grads(w, X2, y2), s, beta)
        assert np.linalg.norm(g2 - g0) <= bound


def test_per_sample_values_are_clipped_even_if_the_evaluation_misbehaves(monkeypatch):
    """The clip, not the accuracy of the special functions, is what the privacy proof relies on."""
    s = 7.0
    rows = np.array([[3e3, -5e1, 1e9, -2e2]])  # all entries outside the polynomial branch
    honest = robust_sum(rows, s, 4.6)
    assert np.all(np.abs(honest) <= PHI_BOUND * s)
    monkeypatch.setattr(RM, "_direct_form", lambda x, b: np.full_like(x, 1e6))
    monkeypatch.setattr(RM, "_quadrature_form", lambda x, b: np.full_like(x, 1e6))
    broken = robust_sum(rows, s, 4.6)
    np.testing.assert_allclose(np.abs(broken), PHI_BOUND * s, rtol=1e-15)
    assert np.array_equal(np.sign(broken), np.sign(rows[0]))


# ---- ht_robust_gd without noise is rgd ---------------------------------------------------------
@pytest.mark.parametrize("batch_size", [None, 400])
def test_ht_robust_gd_without_noise_equals_rgd(batch_size):
    p = ridge_problem(n=2000)
    kw = dict(steps=30, v=4.0, delta_prime=0.05, beta_m="2log", batch_size=batch_size, trace_every=10)
    rgd = RGD_INFO.fit(p, PrivacyTarget(None, None), np.random.default_rng(5), **kw)
    plan = RGD.plan_robust_gd(p.model, p.n, algorithm="test", **kw)
    theta, trace = RGD.robust_gd_core(p, np.random.default_rng(5), steps=plan.steps, lr=plan.lr, scale=plan.scale,
                                      beta=plan.beta_m, noise_std=0.0, batch_size=plan.batch_size,
                                      trace_every=plan.trace_every)
    assert np.array_equal(theta, rgd.theta)
    assert [t["step"] for t in trace] == [t["step"] for t in rgd.trace]
    # a huge epsilon makes the noise negligible; batches are drawn from their own stream, so they coincide
    ht = HT.fit(p, PrivacyTarget(1e12, 1e-5), np.random.default_rng(5), **kw)
    assert ht.privacy["noise_std"] < 1e-6
    np.testing.assert_allclose(ht.theta, rgd.theta, rtol=0, atol=1e-5)
    assert not np.array_equal(ht.theta, rgd.theta)  # the noise was added


# ---- utility ---------------------------------------------------------------------------------------
def _plain_gd(problem: Problem, steps: int, lr: float) -> np.ndarray:
    w = np.zeros(problem.model.n_params)
    for _ in range(steps):
        w = w - lr * problem.model.grad(w, problem.X, problem.y)
    return w


def test_rgd_beats_mean_gradient_descent_under_heavy_tails():
    """synthetic_linear (paper 004 §6), n = 20,000 (16,000 train), d = 10, ridge, 50 steps, lr = 1/2.001.

    Measured ||w - w*|| over seeds 0-3, log-normal sigma_n = 1.5: RGD 0.09-0.11, plain GD 0.15-0.20
    (RGD better on every seed); sigma_n = 1, seeds 0-1: RGD 0.046/0.047, GD 0.046/0.056."""
    errors = {}
    for noise_sigma, seeds in ((1.5, range(4)), (1.0, range(2))):
        for seed in seeds:
            ds = data.load("synthetic_linear", seed=seed, n=20_000, noise_sigma=noise_sigma, test_fraction=0.1,
                           val_fraction=0.1)
            p = Problem(model=models.make("ridge", 10), X=ds.X_train, y=ds.y_train)
            fit = RGD_INFO.fit(p, PrivacyTarget(None, None), np.random.default_rng(0))
            assert fit.privacy["lr"] == pytest.approx(1 / 2.001)
            gd = _plain_gd(p, 50, fit.privacy["lr"])
            errors.setdefault(noise_sigma, []).append(
                (np.linalg.norm(fit.theta - ds.w_star), np.linalg.norm(gd - ds.w_star)))
    heavy = np.array(errors[1.5])
    assert heavy[:, 0].max() < 0.15
    assert heavy[:, 0].mean() < 0.75 * heavy[:, 1].mean()
    assert np.all(heavy[:, 0] < heavy[:, 1])
    light = np.array(errors[1.0])
    assert light[:, 0].mean() <= 1.1 * light[:, 1].mean()


def test_ht_robust_gd_approaches_rgd_as_epsilon_grows():
    p = ridge_problem(n=4000)
    w_star = np.ones(5) / math.sqrt(5)
    rgd = RGD_INFO.fit(p, PrivacyTarget(None, None), np.random.default_rng(0))
    errs = [np.linalg.norm(HT.fit(p, PrivacyTarget(eps, 1e-5), np.random.default_rng(0)).theta - rgd.theta)
            for eps in (1.0, 100.0, 1e4)]
    assert errs[0] > errs[1] > errs[2] and errs[2] < 0.01
    assert np.linalg.norm(rgd.theta - w_star) < 0.2


# ---- ledger ------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps,delta,steps,batch_size", [(1.0, 1e-5, 50, None), (0.1, 1e-6, 20, None),
                                                        (0.5, 1e-5, 40, 500), (4.0, 1e-3, 5, 1000)])
def test_ledger_recomputes_the_target_epsilon(eps, delta, steps, batch_size):
    p = ridge_problem(n=3000)
    fit = HT.fit(p, PrivacyTarget(eps, delta), np.random.default_rng(0), steps=steps, batch_size=batch_size, v=2.0)
    led = fit.privacy
    m = p.n if batch_size is None else batch_size
    s = robust_scale(m, 2.0, 0.01)
    et = alg4_eps_tilde(eps, delta)
    sigma = alg4_sigma(2.0, 5, steps, m, 0.01, et)
    sens = robust_mean_sensitivity(s, m, 5)
    assert led["private"] is True and led["claim"] == "valid" and led["adjacency"] == "replace-one"
    assert led["epsilon_spent"]["zcdp"] == pytest.approx(eps, rel=1e-9)
    assert led["epsilon_spent"]["zcdp"] == pytest.approx(zcdp_to_dp(steps * sens**2 / (2 * sigma**2), delta), rel=1e-12)
    assert led["epsilon_spent"]["gdp"] == pytest.approx(gaussian_epsilon(sigma, delta, sens, steps), rel=1e-9)
    assert led["epsilon_spent"]["gdp"] < led["epsilon_spent"]["zcdp"]
    assert led["eps_tilde"] == pytest.approx(et, rel=1e-15) and led["rho"] == pytest.approx(et, rel=1e-12)
    assert led["noise_std"] == pytest.approx(sigma, rel=1e-15) and led["scale"] == pytest.approx(s, rel=1e-15)
    assert led["sensitivity"] == pytest.approx(sens, rel=1e-15)
    assert led["sensitivity_per_coordinate"] == pytest.approx(4 * math.sqrt(2) / 3 * s / m, rel=1e-12)
    assert led["value_bound"] == pytest.approx(PHI_BOUND * s) and led["beta_m"] == pytest.approx(math.log(100))
    assert led["v"] == 2.0 and led["delta_prime"] == 0.01 and led["steps"] == steps and led["delta"] == delta
    assert led["batch_size"] == batch_size and led["rows_per_step"] == m and led["target_epsilon"] == eps
    assert "data-independent" in led["claim_reason"]


def test_rgd_ledger_is_non_private():
    p = ridge_problem(n=500)
    led = RGD_INFO.fit(p, PrivacyTarget(None, None), np.random.default_rng(0), steps=3).privacy
    assert led["private"] is False and led["claim"] == "none" and led["epsilon_spent"] == {}
    assert led["scale"] == pytest.approx(robust_scale(500, 1.0, 0.01))


# ---- minibatches, traces, projection --------------------------------------------------------------
class RecordingRidge(RidgeRegression):
    """Ridge that records, per per_example_grads call, the rows it was given (by their row id)."""

    def __init__(self, n_features: int):
        super().__init__(n_features)
        self.calls: list[np.ndarray] = []

    def per_example_grads(self, theta, X, y):
        self.calls.append(np.asarray(X[:, 0]).copy())  # column 0 holds the row id
        return super().per_example_grads(theta, X, y)


@pytest.mark.parametrize("name", ["ht_robust_gd", "rgd"])
def test_minibatch_runs_T_steps_of_B_distinct_rows(name):
    n, B, T = 5000, 1000, 12
    base = ridge_problem(n=n, d=3)
    X = base.X.copy()
    X[:, 0] = np.arange(n)
    model = RecordingRidge(3)
    p = Problem(model=model, X=X, y=base.y)
    fit = algorithms.get(name).fit(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), steps=T, batch_size=B)
    assert len(model.calls) == T
    for rows in model.calls:
        assert rows.size == B and np.unique(rows).size == B
    assert not np.array_equal(np.sort(model.calls[0]), np.sort(model.calls[1]))  # fresh batch each step
    led = fit.privacy
    assert led["batch_size"] == B and led["rows_per_step"] == B and led["steps"] == T
    assert led["scale"] == pytest.approx(robust_scale(B, 1.0, 0.01))
    assert led["sampling"]["rate"] == pytest.approx(B / n)


def test_full_batch_uses_every_row_each_step_in_blocks():
    n, T = 30_000, 3
    base = ridge_problem(n=n, d=20)
    X = base.X.copy()
    X[:, 0] = np.arange(n)
    model = RecordingRidge(20)
    RGD_INFO.fit(Problem(model=model, X=X, y=base.y), PrivacyTarget(None, None), np.random.default_rng(0), steps=T)
    rows_per_block = RM.BLOCK_ENTRIES // 20
    per_step = math.ceil(n / rows_per_block)
    assert len(model.calls) == T * per_step
    for t in range(T):
        assert np.array_equal(np.concatenate(model.calls[t * per_step:(t + 1) * per_step]), np.arange(n))


@pytest.mark.parametrize("steps,every,expected", [(23, 5, [0, 5, 10, 15, 20, 23]), (20, 5, [0, 5, 10, 15, 20]),
                                                  (3, 10, [0, 3]), (4, 1, [0, 1, 2, 3, 4]), (7, 0, [])])
@pytest.mark.parametrize("name", ["ht_robust_gd", "rgd"])
def test_trace_snapshots(name, steps, every, expected):
    p = ridge_problem(n=800)
    fit = algorithms.get(name).fit(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(1), steps=steps,
                                   trace_every=every)
    assert [row["step"] for row in fit.trace] == expected
    assert all(set(row) == {"step", "theta"} for row in fit.trace)
    if expected:
        assert np.array_equal(fit.trace[0]["theta"], np.zeros(5))  # model.init for ridge
        assert np.array_equal(fit.trace[-1]["theta"], fit.theta)
        assert fit.trace[-1]["theta"] is not fit.theta
        thetas = [row["theta"] for row in fit.trace]
        assert all(not np.array_equal(a, b) for a, b in zip(thetas, thetas[1:]))  # snapshots, not one buffer


def test_projection_keeps_every_iterate_in_the_ball():
    p = ridge_problem(n=1000)
    fit = HT.fit(p, PrivacyTarget(0.5, 1e-5), np.random.default_rng(0), steps=20, radius=0.3, trace_every=1)
    assert fit.privacy["radius"] == 0.3
    assert all(np.linalg.norm(row["theta"]) <= 0.3 * (1 + 1e-12) for row in fit.trace)
    assert np.linalg.norm(fit.theta) == pytest.approx(0.3)  # w* has norm 1: the constraint binds


def test_runs_on_logistic_regression_and_the_mlp_with_a_valid_claim():
    lp = logistic_problem(n=600, d=4)
    fit = HT.fit(lp, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), steps=10)
    assert fit.privacy["lr"] == pytest.approx(1 / (0.25 + lp.model.l2)) and fit.privacy["claim"] == "valid"
    mp = Problem(model=models.make("mlp", 4), X=lp.X, y=lp.y)
    fit = HT.fit(mp, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), steps=5)
    assert fit.privacy["claim"] == "valid" and fit.privacy["lr"] == RGD.DEFAULT_LR_NO_SMOOTHNESS
    assert fit.theta.shape == (mp.model.n_params,) and np.all(np.isfinite(fit.theta))
    assert fit.privacy["n_params"] == mp.model.n_params


# ---- validation and registration -------------------------------------------------------------------
BAD = [({"steps": 0}, "must be >= 1"), ({"steps": 2.5}, "must be an integer"), ({"lr": -1.0}, "must be > 0"),
       ({"lr": float("nan")}, "must be finite"), ({"v": 0.0}, "must be > 0"), ({"delta_prime": 0.0}, "must be > 0"),
       ({"delta_prime": 1.5}, "must be <= 1"), ({"beta_m": "3log"}, "must be one of log, 2log"),
       ({"radius": -1.0}, "must be > 0"), ({"batch_size": 0}, "must be >= 1"), ({"trace_every": -1}, "must be >= 0"),
       ({"steps": True}, "must be a number")]
#: what the declarations cannot express: delta' < 1 (Param's maximum is inclusive), batch_size <= n
BAD_FOR_THE_DATA = [({"delta_prime": 1.0}, "delta_prime must be in (0, 1)"),
                    ({"batch_size": 10_000}, "batch_size must be <=")]


@pytest.mark.parametrize("name", ["ht_robust_gd", "rgd"])
@pytest.mark.parametrize("params,needle", BAD)
def test_bad_hyperparameters_are_rejected_by_their_declaration(name, params, needle):
    with pytest.raises(ValueError) as info:
        algorithms.get(name).validate(params)
    message = str(info.value)
    (key,) = params
    assert message.startswith(f"{key}: ") and needle in message and "\n" not in message


@pytest.mark.parametrize("name", ["ht_robust_gd", "rgd"])
@pytest.mark.parametrize("params,needle", BAD_FOR_THE_DATA)
def test_hyperparameters_the_declaration_cannot_check_give_one_line_errors(name, params, needle):
    p = ridge_problem(n=300)
    algorithms.get(name).validate(params)  # each value alone is allowed
    with pytest.raises(ValueError) as info:
        algorithms.get(name).fit(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), **params)
    message = str(info.value)
    assert needle in message and message.startswith(f"{name}: ") and "\n" not in message


def test_ht_robust_gd_needs_a_privacy_target():
    with pytest.raises(ValueError, match="needs a target epsilon and delta"):
        HT.fit(ridge_problem(n=100), PrivacyTarget(None, None), np.random.default_rng(0))
    with pytest.raises(ValueError, match="delta must be in"):
        HT.fit(ridge_problem(n=100), PrivacyTarget(1.0, 1.5), np.random.default_rng(0))


@pytest.mark.parametrize("info", [HT, RGD_INFO])
def test_registered_with_documented_defaults(info):
    assert info.private is (info.name == "ht_robust_gd") and not info.convex_only
    assert info.defaults() == {"steps": 50, "lr": None, "v": 1.0, "delta_prime": 0.01, "beta_m": "log",
                               "radius": None, "batch_size": None, "trace_every": 0}


def test_rgd_declares_the_same_hyperparameters_as_ht_robust_gd():
    """The baseline must accept and mean what ht_robust_gd does (same s, beta_m, lr rule), so a spec sweeps both."""
    assert [p.describe() for p in RGD_INFO.params] == [p.describe() for p in HT.params]
