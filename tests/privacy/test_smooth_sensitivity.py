"""Smooth-sensitivity maths of [S4] (paper 004): the Bun-Steinke trimmed mean (exact S*, the O(n) bound S^,
the printed scale), arsinh-normal noise and its CDP condition, Algorithm 3 accounting, and the NRS07
sample-and-aggregate centre of attention (docs/methods/heavy-tailed.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbench.privacy import zcdp_to_dp
from dpbench.privacy.smooth_sensitivity import (
    EPS_C_MAX,
    alg3_eps_c,
    alg3_epsilon,
    alg3_zcdp,
    arsinh_normal,
    arsinh_normal_min_eps,
    bun_steinke_mean,
    bun_steinke_params,
    center_of_attention,
    eps_tilde,
    printed_scale,
    sample_aggregate_release,
    trimmed_mean,
    trimmed_mean_smooth_sensitivity,
    trimmed_mean_smooth_sensitivity_exact,
)


def random_case(rng):
    """Small heavy-tailed set (often beyond [a, b]), a trim m with n > 2m, t and an interval."""
    n = int(rng.integers(3, 13))
    m = int(rng.integers(0, (n - 1) // 2 + 1))
    x = rng.standard_t(2, size=n) * rng.uniform(0.2, 3.0)
    a = float(rng.uniform(-2.0, 0.0))
    b = a + float(rng.uniform(0.1, 3.0))
    t = float(rng.uniform(0.01, 1.5))
    return x, m, t, a, b


def local_sensitivity(x, m, a, b):
    """Brute force: replace each element by a or b (the extremes after clamping) and re-run."""
    base = trimmed_mean(x, m, a, b)
    best = 0.0
    for i in range(len(x)):
        for v in (a, b):
            y = x.copy()
            y[i] = v
            best = max(best, abs(trimmed_mean(y, m, a, b) - base))
    return best


# ---- trimmed mean and its smooth sensitivity ---------------------------------------------------
def test_trimmed_mean_is_the_clamped_middle_mean_per_column():
    rng = np.random.default_rng(0)
    U = rng.standard_t(2, size=(41, 5)) * 3
    a, b, m = -2.0, 1.5, 3
    expected = [np.sort(np.clip(U[:, j], a, b))[m:41 - m].mean() for j in range(5)]
    np.testing.assert_allclose(trimmed_mean(U, m, a, b), expected, rtol=1e-13, atol=1e-14)
    assert trimmed_mean(U[:, 2], m, a, b) == pytest.approx(expected[2], rel=1e-13)
    assert trimmed_mean(U, 0, a, b) == pytest.approx(np.clip(U, a, b).mean(axis=0), rel=1e-13)
    # m = 1 (the default trim) takes the min/max/sum shortcut; m = 2 the partition: both as sorted
    for m in (1, 2):
        expected = [np.sort(np.clip(U[:, j], a, b))[m:41 - m].mean() for j in range(5)]
        np.testing.assert_allclose(trimmed_mean(U, m, a, b), expected, rtol=1e-13, atol=1e-14)
        S = trimmed_mean_smooth_sensitivity(U, m, 0.3, a, b)
        S_exact = [trimmed_mean_smooth_sensitivity(U[:, j], m, 0.3, a, b) for j in range(5)]
        np.testing.assert_allclose(S, S_exact, rtol=1e-13)


def test_smooth_bound_dominates_exact_smooth_sensitivity_dominates_local_sensitivity():
    rng = np.random.default_rng(1)
    for _ in range(300):
        x, m, t, a, b = random_case(rng)
        ls = local_sensitivity(x, m, a, b)
        exact = trimmed_mean_smooth_sensitivity_exact(x, m, t, a, b)
        bound = trimmed_mean_smooth_sensitivity(x, m, t, a, b)
        assert exact >= ls - 1e-12
        assert bound >= exact - 1e-12
        # the k = 0 term of S* is the local sensitivity itself (t -> infinity keeps only k = 0)
        assert trimmed_mean_smooth_sensitivity_exact(x, m, 60.0, a, b) == pytest.approx(ls, rel=1e-12, abs=1e-12)


def test_smooth_bounds_are_t_smooth_on_neighbours():
    rng = np.random.default_rng(2)
    for _ in range(3000):
        x, m, t, a, b = random_case(rng)
        y = x.copy()
        y[rng.integers(len(x))] = rng.choice([a - 5.0, b + 5.0, rng.uniform(a, b), 1e6 * rng.standard_normal()])
        for f in (trimmed_mean_smooth_sensitivity, trimmed_mean_smooth_sensitivity_exact):
            sx, sy = f(x, m, t, a, b), f(y, m, t, a, b)
            assert sx <= math.exp(t) * sy * (1 + 1e-12) and sy <= math.exp(t) * sx * (1 + 1e-12)


def test_vectorised_columns_equal_one_column_at_a_time():
    rng = np.random.default_rng(3)
    U = rng.lognormal(0.0, 2.0, size=(30, 4)) - 3.0
    a = np.array([-1.0, -2.0, 0.0, -5.0])
    b = np.array([1.0, 0.5, 3.0, 5.0])
    for f in (trimmed_mean_smooth_sensitivity, trimmed_mean_smooth_sensitivity_exact):
        cols = [f(U[:, j], 2, 0.3, a[j], b[j]) for j in range(4)]
        np.testing.assert_allclose(f(U, 2, 0.3, a, b), cols, rtol=1e-14)


def test_smooth_bound_formula_and_the_one_over_n_scaling():
    for n in (100, 1000, 10000):
        # more than m values at each end after clamping: the k = 0 term is already b - a
        x = np.linspace(-10.0, 10.0, n)
        assert trimmed_mean_smooth_sensitivity(x, 2, 0.01, -1.0, 1.0) == pytest.approx(2.0 / (n - 4), rel=1e-12)
        # data well inside [a, b]: the padding term e^{-mt}(b - a)/(n - 2m) -- both shrink like 1/n
        x = np.zeros(n)
        assert trimmed_mean_smooth_sensitivity(x, 2, 0.01, -1.0, 1.0) == pytest.approx(
            math.exp(-0.02) * 2.0 / (n - 4), rel=1e-12)
    # m = 0: the global sensitivity of the clamped mean, (b - a)/n
    assert trimmed_mean_smooth_sensitivity(np.zeros(50), 0, 0.1, -1.0, 3.0) == pytest.approx(4.0 / 50)


def test_printed_scale_is_not_smooth_on_unclamped_heavy_tailed_data():
    # defect 1 of the printed scale: 1000 zeros vs. the same with one value 1e6
    n, m, a, b = 1000, 5, -1.0, 1.0
    eps_c = 0.4
    _, t = bun_steinke_params(eps_c)
    x = np.zeros(n)
    y = x.copy()
    y[0] = 1e6
    px, py = printed_scale(x, m, t, a, b), printed_scale(y, m, t, a, b)
    assert px == pytest.approx(math.exp(-m * t) * (b - a))  # ~1.9, no 1/(n-2m) (defect 2)
    assert py == pytest.approx(1e6 / (n - 2 * m))  # ~1010
    assert py / px > 500 > math.exp(t)
    # the corrected bound obeys smoothness on the same pair (and is n-2m times smaller)
    sx, sy = trimmed_mean_smooth_sensitivity(x, m, t, a, b), trimmed_mean_smooth_sensitivity(y, m, t, a, b)
    assert sy <= math.exp(t) * sx and sx <= math.exp(t) * sy
    assert sx == pytest.approx(px / (n - 2 * m))


def test_input_validation_is_one_line():
    with pytest.raises(ValueError, match="n > 2m"):
        trimmed_mean(np.zeros(4), 2, -1, 1)
    with pytest.raises(ValueError, match="a < b"):
        trimmed_mean_smooth_sensitivity(np.zeros(5), 1, 0.1, 1.0, 1.0)
    with pytest.raises(ValueError, match="t must be > 0"):
        trimmed_mean_smooth_sensitivity(np.zeros(5), 1, 0.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="integer >= 0"):
        trimmed_mean(np.zeros(5), -1, -1, 1)


# ---- arsinh-normal noise and the CDP condition -------------------------------------------------
@pytest.mark.parametrize("sigma", [1.0, 0.5])
def test_arsinh_normal_law(sigma):
    z = arsinh_normal(np.random.default_rng(4), 200_000, sigma=sigma)
    # P[Z <= z] = Phi(arsinh(sigma z)/sigma)
    assert stats.kstest(z, lambda v: stats.norm.cdf(np.arcsinh(sigma * v) / sigma)).pvalue > 1e-3
    q = np.array([0.01, 0.1, 0.5, 0.9, 0.99])
    np.testing.assert_allclose(np.quantile(z, q), np.sinh(sigma * stats.norm.ppf(q)) / sigma, rtol=0.05, atol=0.01)


def test_cdp_condition_numbers():
    # [S4]'s s = eps_c/4, t = eps_c^2/16 need eps_c >= (7/6)s + sqrt(t(t + 3)) ~ 0.725 eps_c
    for eps_c in (1e-4, 0.01, 0.2, 1.0):
        ratio = arsinh_normal_min_eps(eps_c / 4, eps_c**2 / 16) / eps_c
        assert ratio == pytest.approx(7 / 24 + 0.25 * math.sqrt(eps_c**2 / 16 + 3), rel=1e-12)
        assert 0.7246 < ratio < 0.75
    assert EPS_C_MAX == pytest.approx(8.969, abs=1e-3)
    assert arsinh_normal_min_eps(EPS_C_MAX / 4, EPS_C_MAX**2 / 16) == pytest.approx(EPS_C_MAX, rel=1e-12)
    assert bun_steinke_params(1.0) == (0.25, 1.0 / 16)
    bun_steinke_params(8.9)
    for bad in (9.0, 20.0, 0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="eps_c"):
            bun_steinke_params(bad)


def _renyi_sinh(alpha, shift, log_scale, y):
    """D_alpha(law of Z || law of e^{log_scale} Z + shift), Z = sinh(Y), by quadrature in y."""
    def log_density(z):
        return stats.norm.logpdf(np.arcsinh(z)) - 0.5 * np.log1p(z * z)

    z = np.sinh(y)
    log_ratio = (log_density((z - shift) * math.exp(-log_scale)) - log_scale) - log_density(z)
    return math.log(np.trapezoid(stats.norm.pdf(y) * np.exp((1 - alpha) * log_ratio), y)) / (alpha - 1)


@pytest.mark.parametrize("eps_c,bound", [(0.2, 9.4e-4), (0.5, 6.1e-3), (1.0, 2.7e-2)])
def test_arsinh_normal_shift_and_scale_renyi_divergence_within_half_eps_squared(eps_c, bound):
    # neighbours move f by <= S and S by a factor e^{+-t}: in units of S/s a shift <= s, scale e^{+-t}
    s, t = bun_steinke_params(eps_c)
    y = np.linspace(-14.0, 14.0, 40001)
    worst = max(_renyi_sinh(alpha, sh, ls, y) / alpha
                for alpha in (1.01, 1.5, 2.0, 4.0, 8.0) for sh in (s, -s) for ls in (t, -t))
    assert worst <= bound  # 9e-4 / 6e-3 / 2.7e-2, far below eps_c^2 / 2
    assert worst < eps_c**2 / 2


def test_bun_steinke_mean_corrected_and_printed():
    rng = np.random.default_rng(5)
    U = rng.lognormal(0.0, 1.5, size=(500, 3)) - math.exp(1.125)
    eps_c, a, b, m = 0.5, -2.0, 2.0, 2
    s, t = bun_steinke_params(eps_c)
    out, S = bun_steinke_mean(U, eps_c, a, b, m, np.random.default_rng(6))
    np.testing.assert_allclose(S, trimmed_mean_smooth_sensitivity(U, m, t, a, b), rtol=1e-14)
    z = np.sinh(np.random.default_rng(6).standard_normal(3))
    np.testing.assert_allclose(out, trimmed_mean(U, m, a, b) + S / s * z, rtol=1e-12)
    out_p, S_p = bun_steinke_mean(U, eps_c, a, b, m, np.random.default_rng(6), variant="printed")
    np.testing.assert_allclose(S_p, printed_scale(U, m, t, a, b), rtol=1e-14)
    raw = np.clip(np.sort(U, axis=0)[m:500 - m].mean(axis=0), a, b)  # unclamped data, clipped mean
    np.testing.assert_allclose(out_p, raw + S_p / s * z, rtol=1e-12)
    assert np.all(S_p > 100 * S)  # no 1/(n - 2m) on the prior term
    one, one_s = bun_steinke_mean(U[:, 0], eps_c, a, b, m, np.random.default_rng(6))
    assert isinstance(one, float) and one_s == pytest.approx(S[0])
    with pytest.raises(ValueError, match="variant"):
        bun_steinke_mean(U, eps_c, a, b, m, rng, variant="paper")
    with pytest.raises(ValueError, match="eps_c"):
        bun_steinke_mean(U, 10.0, a, b, m, rng)


# ---- Algorithm 3 accounting ------------------------------------------------------------------
@pytest.mark.parametrize("eps,delta,d,T", [(1.0, 1e-5, 10, 50), (0.1, 1e-6, 10, 50), (0.5, 1e-5, 3, 7),
                                           (4.0, 1e-3, 100, 1)])
def test_alg3_corrected_accounting_closes_exactly(eps, delta, d, T):
    eps_c = alg3_eps_c(eps, delta, d, T)
    assert eps_c == pytest.approx(eps_tilde(eps, delta) / math.sqrt(d * T), rel=1e-14)
    L = 2 * math.log(1 / delta)
    assert eps_tilde(eps, delta) == pytest.approx(math.sqrt(L + 2 * eps) - math.sqrt(L), rel=1e-10)
    rho = alg3_zcdp(eps_c, d, T)
    assert rho == pytest.approx(d * T * eps_c**2 / 2, rel=1e-14)
    assert zcdp_to_dp(rho, delta) == pytest.approx(eps, rel=1e-12)
    assert alg3_epsilon(eps_c, d, T, delta) == zcdp_to_dp(rho, delta)
    # as printed: eps/sqrt(dT) -> rho = eps^2/2 -> eps^2/2 + eps sqrt(2 ln(1/delta)) > eps
    printed = alg3_eps_c(eps, delta, d, T, "printed")
    assert printed == pytest.approx(eps / math.sqrt(d * T))
    spent = zcdp_to_dp(alg3_zcdp(printed, d, T), delta)
    assert spent == pytest.approx(eps**2 / 2 + eps * math.sqrt(2 * math.log(1 / delta)), rel=1e-12)
    assert spent > eps


def test_alg3_validation():
    with pytest.raises(ValueError, match="variant"):
        alg3_eps_c(1.0, 1e-5, 10, 50, "typo")
    with pytest.raises(ValueError, match="steps"):
        alg3_eps_c(1.0, 1e-5, 10, 0)
    with pytest.raises(ValueError, match="delta"):
        alg3_eps_c(1.0, 1.5, 10, 5)


# ---- sample and aggregate --------------------------------------------------------------------
def brute_force_aggregate(P, eps, delta, lam):
    """Loop-by-loop transcription of [S4] Algorithm 1's aggregation (self excluded from r_i)."""
    m, d = P.shape
    s = math.sqrt(m)
    gamma = eps / (5 * math.sqrt(2 * math.log(2 / delta)))
    beta = eps / (4 * (d + math.log(2 / delta)))
    t0 = math.ceil((m + s) / 2 + 1)

    def r(i, t):
        dist = sorted(float(np.linalg.norm(P[i] - P[j])) for j in range(m) if j != i)
        return dist[t - 1]

    def rho(t):
        if t > m - 1:
            return lam
        values = sorted((r(i, t) for i in range(m)), reverse=True)
        top = values[:min(m, math.ceil(s / beta))]
        return sum(top) / len(top)

    center = min(range(m), key=lambda i: (r(i, t0), i))
    S, k = 0.0, 0
    while True:
        tk = math.ceil(t0 + (k + 1) * s)
        S = max(S, 2 * rho(tk) * math.exp(-beta * k))
        if tk > m - 1:
            return center, S, gamma, beta
        k += 1


@pytest.mark.parametrize("m,eps", [(9, 1.0), (30, 3.0), (50, 50.0)])
def test_center_of_attention_matches_the_formula(m, eps):
    rng = np.random.default_rng(m)
    P = rng.normal(size=(m, 3)) * 0.3
    P[: m // 5] += 1.0  # a second, smaller cluster
    res = center_of_attention(P, eps, 1e-5, 4.0)
    center, S, gamma, beta = brute_force_aggregate(P, eps, 1e-5, 4.0)
    # the centre is argmin_i r_i(t0); the two codes compute distances with different last bits, so
    # the index comparison needs a runner-up farther than float noise (measured: >= 4% here)
    r_t0 = sorted(sorted(float(np.linalg.norm(P[i] - P[j])) for j in range(m) if j != i)[res.t0 - 1]
                  for i in range(m))
    assert r_t0[1] - r_t0[0] > 1e-9 * r_t0[0]
    assert res.center_index == center
    np.testing.assert_array_equal(res.center, P[center])
    assert res.smooth_bound == pytest.approx(S, rel=1e-12)
    assert (res.gamma, res.beta) == (pytest.approx(gamma), pytest.approx(beta))
    assert res.noise_std == pytest.approx(S / gamma)


def test_sample_and_aggregate_on_well_clustered_points():
    rng = np.random.default_rng(7)
    m, d, eps, delta, lam = 1600, 2, 200.0, 1e-5, 10.0
    c = np.array([1.0, -2.0])
    P = c + 1e-3 * rng.standard_normal((m, d))
    release, res = sample_aggregate_release(P, eps, delta, lam, np.random.default_rng(8))
    assert np.linalg.norm(res.center - c) < 2e-3
    assert res.smooth_bound < 0.02  # ~ the cluster's spread, not Lambda
    assert np.linalg.norm(release - c) < 0.05
    # a few far points do not move the centre; at small eps the smoothing reaches Lambda
    Q = P.copy()
    Q[:40] = c + 3.0
    assert np.linalg.norm(center_of_attention(Q, eps, delta, lam).center - c) < 2e-3
    small = center_of_attention(P, 1.0, delta, lam)
    assert small.smooth_bound > lam  # 2 Lambda e^{-beta k_max}: the "poor practical performance" of [S4] §6


def test_sample_and_aggregate_validation():
    P = np.random.default_rng(9).normal(size=(20, 2))
    with pytest.raises(ValueError, match="diameter"):
        center_of_attention(P, 1.0, 1e-5, 0.1)  # points further apart than Lambda
    with pytest.raises(ValueError, match="at least 7 subsets"):
        center_of_attention(P[:6], 1.0, 1e-5, 100.0)
    with pytest.raises(ValueError, match="epsilon"):
        center_of_attention(P, 0.0, 1e-5, 100.0)
    with pytest.raises(ValueError, match="delta"):
        center_of_attention(P, 1.0, 0.0, 100.0)


@pytest.mark.parametrize("jit", ["1", "0"])
def test_compiled_clamped_extremes_equal_numpy(jit, monkeypatch):
    """Algorithm 3's one-pass clamped min / max / sum (m = 1) against clamping then `_extremes`."""
    from dpbench.privacy import smooth_sensitivity as ss

    monkeypatch.setenv("DPBENCH_JIT", jit)
    rng = np.random.default_rng(3)
    A = rng.standard_cauchy((5000, 7))
    lo, hi = np.full(7, -2.0), np.linspace(0.5, 3.0, 7)
    lo[2] = -50.0  # a column barely clamped
    want = ss._extremes(ss._clamped(A, lo, hi), 1)
    got = ss._clamped_extremes(A, 1, lo, hi)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=1e-9)
    for m in (0, 3):  # other trims: the numpy code
        for g, w in zip(ss._clamped_extremes(A, m, lo, hi), ss._extremes(ss._clamped(A, lo, hi), m)):
            np.testing.assert_array_equal(g, w)
