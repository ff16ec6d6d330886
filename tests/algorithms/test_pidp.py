"""PIDP-SGD ([S0] = paper 000, Algorithm 1; docs/methods/pidp.md): influence contributions, the lines 9-10 test,
the noise-free branch, the ledger and the MLP's Gauss-Newton/Woodbury solve."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit

from dpbench import models
from dpbench.algorithms import (
    PrivacyTarget,
    Problem,
    pidp,  # registers pidp_sgd
)
from dpbench.algorithms.base import REGISTRY
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.core.ledger import Adjacency
from dpbench.privacy import calibrate_dpsgd_noise, classical_gaussian_sigma, dpsgd_epsilon_report


def lr_problem(n=200, d=5, l2=0.05, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # ||x|| <= 1
    w = rng.normal(size=d) * 2
    y = np.where(X @ w + 0.5 * rng.normal(size=n) >= 0, 1.0, -1.0)
    return Problem(models.make("logreg", d, l2=l2), X, y)


def mlp_problem(n=300, d=6, seed=1, l2=1e-3):
    p = lr_problem(n=n, d=d, seed=seed)
    return Problem(models.make("mlp", d, l2=l2), p.X, p.y)


# ---- 1. influence contributions vs leave-one-out retraining ---------------------------------
def test_influence_contributions_match_leave_one_out_retraining():
    """c_o = H^-1 grad l(theta*; z_i) / n ~ theta*_{-i} - theta* (eq. 11: the sign is +).

    theta*_{-i} minimises (1/n) sum_{j != i} l_j + (l2/2)||theta||^2 -- the influence function
    sets one data weight to 0 and keeps the regulariser, so on the reduced data (mean over n-1)
    the model's l2 becomes l2 n / (n-1). Theorem 4 bounds the error by E (zeta = l2 <=
    lambda_min(H), beta_s = 1/4, C_H = 0.0962, G = 1); measured errors are ~1% of the
    contribution (n = 200) and ~100x below E.
    """
    n, l2 = 200, 0.05
    p = lr_problem(n=n, l2=l2)
    theta, _ = minimize_empirical_risk(p)
    H = p.model.hessian(theta, p.X, p.y)
    assert np.linalg.eigvalsh(H).min() >= l2  # floor at zeta = l2 is a no-op: exact IF
    idx = np.arange(0, n, 23)
    c = pidp.influence_contributions(p, theta, idx, zeta=l2, damping="floor")
    E = pidp.influence_error_bound(0.25, 0.0962, 1.0, l2, n)
    for k, i in enumerate(idx):
        keep = np.arange(n) != i
        reduced = Problem(models.make("logreg", p.X.shape[1], l2=l2 * n / (n - 1)), p.X[keep], p.y[keep])
        theta_minus, _ = minimize_empirical_risk(reduced)
        diff = theta_minus - theta
        err = np.linalg.norm(c[k] - diff)
        assert err <= E
        assert err <= 0.05 * np.linalg.norm(diff)
        assert c[k] @ diff > 0.99 * np.linalg.norm(c[k]) * np.linalg.norm(diff)  # same direction, same sign
    # damping "add" solves with H + zeta I (Remark 5); clip_norm = inf means no clipping
    G = p.model.per_example_grads(theta, p.X[idx], p.y[idx])
    added = pidp.influence_contributions(p, theta, idx, zeta=0.3, damping="add")
    np.testing.assert_allclose(added, np.linalg.solve(H + 0.3 * np.eye(5), G.T).T / n, rtol=1e-10, atol=1e-14)
    lam, V = np.linalg.eigh(H)
    floored = pidp.influence_contributions(p, theta, idx, zeta=0.09, damping="floor")
    np.testing.assert_allclose(floored, (G @ V / np.maximum(lam, 0.09)) @ V.T / n, rtol=1e-10, atol=1e-14)


# ---- 2. lines 9-10 literally == closed form --------------------------------------------------
def _lines_9_10_loop(c, r, eps1, delta1):
    """Lines 9-10 of [S0] Alg. 1 written as a scalar loop, for one step."""
    A = 2 * r * math.exp(eps1) * delta1
    for ci in c:
        if abs(ci) >= A / (math.exp(eps1) - 1):
            return False  # line 9: jump to line 13 (noisy)
    for ci in c:
        if not math.log(A / (A - (math.exp(eps1) - 1) * np.sign(ci) * ci)) <= 2 * eps1:
            return False  # line 10 fails for some i: noisy
    return True


def test_paper_tests_agree_with_closed_form_on_random_draws():
    rng = np.random.default_rng(0)
    n_draws, free_seen = 20000, 0
    for _ in range(n_draws // 500):
        r = 10 ** rng.uniform(-2, 8)
        delta1 = 10 ** rng.uniform(-9, -3)
        eps1 = 10 ** rng.uniform(-2.5, 1.2)
        tau = 2 * r * delta1 * (1 + math.exp(-eps1))
        assert pidp.pidp_threshold(r, eps1, delta1) == pytest.approx(tau, rel=1e-14)
        assert 2 * r * math.exp(eps1) * delta1 / math.expm1(eps1) > tau  # line 9's bound is looser
        m = int(rng.integers(1, 12))
        # scales around tau so both branches (and line 9's region) occur
        c = rng.normal(size=(500, m)) * tau * 10 ** rng.uniform(-1.5, 1.0, size=(500, 1))
        top = np.abs(c).max(axis=1)
        c = c[np.abs(top - tau) > 1e-9 * tau]  # drop exact ties (measure zero)
        literal = pidp.paper_noise_free(c, r, eps1, delta1)
        closed = np.abs(c).max(axis=1) <= tau
        np.testing.assert_array_equal(literal, closed)
        for row, lit in zip(c[:40], literal[:40]):
            assert _lines_9_10_loop(row, r, eps1, delta1) == lit
        free_seen += int(literal.sum())
    assert 0.1 * n_draws < free_seen < 0.9 * n_draws


# ---- 3. the noise-free fraction grows with epsilon -------------------------------------------
def test_noise_free_fraction_grows_with_epsilon_and_is_zero_at_honest_radius():
    """Seen (n = 500, d = 5, R = 2, T = n, delta = 1e-5): radius 1e5 -> noise-free fraction
    0, 0.004, 0.126, 0.834, 1.0 at eps = 0.1, 0.3, 1, 3, 10 (sigma_c = 0.164 at eps = 1 against
    tau = 1.0); at the honest radius 1 (tau = 1e-5) it is 0 at every epsilon."""
    p = lr_problem(n=500)
    epsilons = [0.1, 0.3, 1.0, 3.0, 10.0]

    def fractions(radius):
        return [pidp.fit_pidp_sgd(p, PrivacyTarget(eps, 1e-5), np.random.default_rng(0), epochs=1, rounds=2,
                                  radius=radius).privacy["noise_free_fraction"] for eps in epsilons]

    big = fractions(1e5)
    assert all(b >= a for a, b in zip(big, big[1:]))
    assert big[0] <= 0.01 and big[-1] >= 0.99
    assert fractions(1.0) == [0.0] * len(epsilons)


# ---- 4. radius -> inf: plain clipped SGD; radius -> 0: every step noisy -----------------------
def _reference_sgd(problem, theta0, indices, lr, clip_norm, noise=None):
    model, theta = problem.model, np.array(theta0, dtype=float)
    for t, i in enumerate(indices):
        g, _ = model.clipped_grad_sum(theta, problem.X[i:i + 1], problem.y[i:i + 1], clip_norm)
        theta = theta - lr * (g + model.reg_grad(theta))
        if noise is not None:
            theta = theta - noise[t]
    return theta


@pytest.mark.parametrize("kind", ["logreg", "mlp"])
def test_huge_radius_is_clipped_sgd_and_tiny_radius_is_always_noisy(kind):
    p = lr_problem(n=300, d=5) if kind == "logreg" else mlp_problem(n=300, d=5)
    T, lr, C = 600, 0.1, 0.5  # C < 1: clipping is active
    common = dict(steps=T, rounds=3, lr=lr, clip_norm=C, sigma=0.7, sigma_c=0.2, epsilon1=0.75, delta1=5e-6,
                  E=1e-6, zeta=0.1, hessian_samples=100, record=True)
    seed = 11

    def theta0_and_children():
        rng = np.random.default_rng(seed)
        theta0 = p.model.init(rng)
        return theta0, rng.spawn(4)

    run = pidp.run_pidp(p, np.random.default_rng(seed), radius=1e30, **common)
    assert run.noise_free.all()
    theta0, _ = theta0_and_children()
    np.testing.assert_allclose(run.theta, _reference_sgd(p, theta0, run.indices, lr, C), rtol=1e-9, atol=1e-12)

    tiny = pidp.run_pidp(p, np.random.default_rng(seed), radius=1e-30, **common)
    assert not tiny.noise_free.any()
    np.testing.assert_array_equal(tiny.indices, run.indices)  # same index stream whatever the radius
    theta0, children = theta0_and_children()
    noise = children[3].standard_normal((T, p.model.n_params)) * (lr * 0.7)
    np.testing.assert_allclose(tiny.theta, _reference_sgd(p, theta0, tiny.indices, lr, C, noise),
                               rtol=1e-9, atol=1e-12)


# ---- 5. the ledger ---------------------------------------------------------------------------
def test_ledger_is_paper_only_and_records_what_was_computed():
    p = lr_problem(n=400)
    n, eps, delta, R, zeta, C = 400, 2.0, 1e-5, 4, 0.2, 1.0
    fit = REGISTRY["pidp_sgd"].fit(p, PrivacyTarget(eps, delta), np.random.default_rng(3), epochs=1.5, rounds=R,
                                   zeta=zeta, clip_norm=C, radius=1.5e5)
    led = fit.privacy
    T = round(1.5 * n)
    eps1, eps2, d1, d2 = 0.75 * eps, 0.25 * eps, delta / 2, delta / 2
    assert led["claim"] == "paper-only" and led["private"] is True
    # the paper's claim is replace-one; the accountant's epsilon_spent composes add/remove-one steps
    assert led["adjacency"] == "replace-one" and led["spent_adjacency"] == "add/remove-one"
    assert led.adjacency is Adjacency.REPLACE_ONE and led.spent_adjacency is Adjacency.ADD_REMOVE
    for key in ("mechanism", "target_epsilon", "delta", "epsilon_spent", "epsilon_spent_note", "sigma", "sigma_c",
                "tau", "radius", "zeta", "epsilon1", "epsilon2", "delta1", "delta2", "R", "T_local", "T", "steps",
                "E", "hessian", "noise_free_steps", "noise_free_fraction", "noisy_fraction", "noise_multiplier"):
        assert key in led, key
    assert (led["target_epsilon"], led["delta"], led["R"], led["T"], led["steps"]) == (eps, delta, R, T, T)
    assert led["T_local"] == math.ceil(T / R) and led["T_local_min"] == T // R
    assert led["epsilon1"] == pytest.approx(eps1) and led["epsilon2"] == pytest.approx(eps2)
    assert led["delta1"] == pytest.approx(d1) and led["delta2"] == pytest.approx(d2)
    sigma_c = 2 * math.sqrt(2) * C * R * math.sqrt(math.log(1.25 * R / d2)) / (n * zeta * eps2)
    assert led["sigma_c"] == pytest.approx(sigma_c, rel=1e-12)
    # = the classical Gaussian mechanism at (eps2/R, delta2/R), sensitivity 2G/(n zeta), times R rounds
    assert led["sigma_c"] == pytest.approx(classical_gaussian_sigma(eps2 / R, d2 / R, 2 * C / (n * zeta)), rel=1e-12)
    assert led["tau"] == pytest.approx(2 * 1.5e5 * d1 * (1 + math.exp(-eps1)), rel=1e-12)
    assert led["E"] == pytest.approx((2 * 0.25 * C + 0.1 * C**2 / zeta) / (zeta**2 * n**2), rel=1e-12)
    z = calibrate_dpsgd_noise(eps1, d1, 1 / n, T, accountant="rdp")
    assert led["noise_multiplier"] == pytest.approx(z) and led["sigma"] == pytest.approx(z * C)
    assert led["epsilon_spent"] == pytest.approx(dpsgd_epsilon_report(z, 1 / n, T, d1))
    assert led["epsilon_spent"]["rdp"] <= eps1
    assert led["noise_free_steps"] + led["noisy_steps"] == T
    assert led["noise_free_fraction"] == pytest.approx(led["noise_free_steps"] / T)
    assert 0 < led["noise_free_steps"] < T  # this radius gives a mix
    assert "exact Hessian" in led["hessian"]


def test_hyperparameters_validate():
    info = REGISTRY["pidp_sgd"]
    assert set(info.defaults()) >= {"epochs", "rounds", "lr", "clip_norm", "zeta", "radius", "eps1_fraction",
                                    "delta1_fraction", "smoothness", "hessian_lipschitz", "damping",
                                    "hessian_samples", "calibration", "paper_c"}
    with pytest.raises(ValueError):
        info.param("damping").check("both")
    with pytest.raises(ValueError):
        info.param("eps1_fraction").check(1.0)
    p = lr_problem(n=50)
    with pytest.raises(ValueError, match="rounds"):
        info.fit(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), steps=5, rounds=10)
    with pytest.raises(ValueError, match="epsilon"):
        info.fit(p, PrivacyTarget(None, None), np.random.default_rng(0))


# ---- 6. MLP: Gauss-Newton + Woodbury == dense solve ------------------------------------------
def _dense_ggn(model, theta, X, y):
    """(1/s) sum q_i J_i^T J_i + l2 I with J_i = grad_i / (dl/du) built from per_example_grads."""
    u = model.decision_function(theta, X)
    s_i = -y * expit(-y * u)  # dl/du, never 0
    J = model.per_example_grads(theta, X, y) / s_i[:, None]
    q = expit(y * u) * expit(-y * u)
    return (J.T * q) @ J / X.shape[0] + model.l2 * np.eye(model.n_params)


def _thresholds_between(values: np.ndarray, quantiles: list[float]) -> list[float]:
    """Near each quantile of `values`, the midpoint of the widest gap between neighbouring sorted
    values (within 3 ranks): a threshold that no value ties, so a decision `value <= tau` cannot
    flip by the last bits that another solve path or CPU kernel changes."""
    v = np.sort(values)
    out = []
    for q in quantiles:
        k = int(round(q * (v.size - 1)))
        lo, hi = max(k - 3, 0), min(k + 3, v.size - 2)
        i = lo + int(np.argmax(v[lo + 1:hi + 2] - v[lo:hi + 1]))
        out.append(0.5 * (v[i] + v[i + 1]))
    return out


def _recording_margins(ctx) -> list[float]:
    """Make `ctx` record, at every test of a c_t block, min_i ||c_t[i]| - tau| / tau: how far the
    closest coordinate is from the threshold, where the last bits of another path could flip it."""
    margins: list[float] = []
    plain = ctx.decide_ct

    def decide_ct(c_t):
        if c_t.size:
            margins.append(float(np.min(np.abs(np.abs(c_t) - ctx.tau))) / ctx.tau)
        return plain(c_t)

    ctx.decide_ct = decide_ct
    return margins


@pytest.mark.parametrize("damping", ["add", "floor"])
@pytest.mark.parametrize("s", [30, 120])  # fewer and more rows than n_params = 49
def test_mlp_woodbury_ggn_equals_dense_solve(damping, s):
    p = mlp_problem(n=300, d=6)
    model = p.model
    theta = model.init(np.random.default_rng(0)) * 3.0
    rows = np.sort(np.random.default_rng(1).choice(p.n, size=s, replace=False))
    zeta, C = 0.05, 0.3
    op = pidp._MlpGaussNewton(model, p.X, p.y, theta, rows, zeta=zeta, damping=damping, clip_norm=C, kind="t")
    H = _dense_ggn(model, theta, p.X[rows], p.y[rows])
    if damping == "add":
        Hz = H + zeta * np.eye(model.n_params)
    else:
        lam, V = np.linalg.eigh(H)
        Hz = (V * np.maximum(lam, zeta)) @ V.T
    idx = np.arange(0, p.n, 7)
    G = model.per_example_grads(theta, p.X[idx], p.y[idx])
    G *= np.minimum(1.0, C / np.linalg.norm(G, axis=1))[:, None]
    want = np.linalg.solve(Hz, G.T).T
    got = op.full(idx)
    assert np.max(np.abs(got - want)) <= 1e-8 * np.max(np.abs(want))

    # the staged decision (cheap blocks, Frobenius certificate, exact W1 block) equals the closed
    # form on the full vector; sigma_c = 0 makes it deterministic, tau splits the rows
    E = 1e-7
    full_ct = 2 * (got / p.n + np.copysign(E, got / p.n))
    tops = np.abs(full_ct).max(axis=1)
    for tau in _thresholds_between(tops, [0.2, 0.5, 0.8]):
        radius = tau / (2 * 1e-5 * (1 + math.exp(-1.0)))  # so that pidp_threshold(radius, 1, 1e-5) = tau
        tau = pidp.pidp_threshold(radius, 1.0, 1e-5)
        assert np.min(np.abs(tops - tau)) > 1e-6 * tau  # no row within float noise of the threshold
        ctx = pidp._DecisionContext(n=p.n, E=E, sigma_c=0.0, radius=radius, epsilon1=1.0, delta1=1e-5, tau=tau)
        got_free = op.decide(idx, np.random.default_rng(0), ctx)
        np.testing.assert_array_equal(got_free, tops <= tau)
        assert 0 < got_free.sum() < got_free.size  # the threshold splits the rows

    # with contribution noise: the shortcuts (Frobenius certificate, noisy witnesses) decide
    # exactly like computing every W1 block on the same random draws. The witnesses compute their
    # coordinates by another formula than the full block (last bits differ), so the equality is
    # asserted where no tested coordinate lies within float noise of tau (measured: >= 6e-6 tau)
    idx = np.arange(p.n)
    for sigma_c, radius in [(2e-4, 40.0), (2e-4, 80.0), (5e-4, 100.0), (1e-4, 60.0)]:
        tau = pidp.pidp_threshold(radius, 1.0, 1e-5)
        decided = []
        for shortcuts in (True, False):
            ctx = pidp._DecisionContext(n=p.n, E=E, sigma_c=sigma_c, radius=radius, epsilon1=1.0, delta1=1e-5,
                                        tau=tau)
            margins = _recording_margins(ctx)
            op._shortcuts = shortcuts
            decided.append(op.decide(idx, np.random.default_rng(5), ctx))
            assert min(margins) > pidp._TIE_REL_TOL, (shortcuts, sigma_c, radius, min(margins))
        op._shortcuts = True
        fast, slow = decided
        np.testing.assert_array_equal(fast, slow)
        assert 0 < fast.sum() < fast.size  # both outcomes occur


def test_mlp_fit_runs_and_records_gauss_newton():
    p = mlp_problem(n=300, d=6)
    fit = REGISTRY["pidp_sgd"].fit(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), epochs=1, rounds=3,
                                   hessian_samples=64, radius=1e5)
    led = fit.privacy
    assert np.all(np.isfinite(fit.theta)) and fit.theta.shape == (p.model.n_params,)
    assert "Gauss-Newton" in led["hessian"] and "s=64" in led["hessian"] and led["claim"] == "paper-only"
    exact = REGISTRY["pidp_sgd"].fit(p, PrivacyTarget(1.0, 1e-5), np.random.default_rng(0), epochs=0.5, rounds=2,
                                     hessian="exact", damping="floor")
    assert "exact Hessian" in exact.privacy["hessian"]
