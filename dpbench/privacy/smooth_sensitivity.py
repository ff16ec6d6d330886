"""Smooth-sensitivity mechanisms of [S4] (paper 004, Wang, Xiao, Devadas, Xu, ICML 2020): pure maths.

Two mechanisms, both calibrated to an instance-dependent *smooth* upper bound on the local
sensitivity instead of a global sensitivity (docs/methods/heavy-tailed.md, Sample and aggregate
and Bun-Steinke trimmed mean):

1. The Bun-Steinke trimmed mean of [S4] Algorithm 2 (one real coordinate; vectorised here across
   the columns of an (n, d) array, one independent mechanism per column), used per gradient
   coordinate by [S4] Algorithm 3 (`dpbench.algorithms.bun_steinke`).
2. The sample-and-aggregate "centre of attention" of Nissim, Raskhodnikova & Smith (STOC 2007),
   [S4] Algorithm 1 (`dpbench.algorithms.sample_aggregate`).

Trimmed mean, notation
----------------------
x_(1) <= ... <= x_(n) are the order statistics of one column *after clamping to [a, b]*, with the
padding x_(i) = a for i <= 0 and x_(i) = b for i > n; m = number trimmed per side (n > 2m).

* `trimmed_mean`: mean(x_(m+1), ..., x_(n-m)) of the clamped data, clipped to [a, b] (a no-op once
  the data are clamped; kept to mirror [S4] Alg. 2 step 2).
* `trimmed_mean_smooth_sensitivity_exact` (Bun & Steinke 2019, the t-smooth sensitivity S*, O(n^2)):
      S*(x) = (1/(n-2m)) max_{k=0..n} e^{-kt} max_{l=0..k+1} (x_(n-m+1+k-l) - x_(m+1-l)).
* `trimmed_mean_smooth_sensitivity` (dpbench's valid O(n) replacement of the printed scale):
      S^(x) = (1/(n-2m)) max_{k>=0} e^{-kt} (x_(n-m+1+k) - x_(m-k)).
  S^ >= S* (it takes the widest pair of every k) and S^ is t-smooth: order statistics of
  neighbours interlace (x_(i) <= x'_(i+1), x_(i) >= x'_(i-1)), so term_k(x) <= term_{k+1}(x') and
  e^{-kt} term_k(x) <= e^t e^{-(k+1)t} term_{k+1}(x'). For k >= m both indices fall in the padding,
  term_k = b - a, so only k = 0..m matter:
      S^(x) = (1/(n-2m)) max( max_{k<m} e^{-kt} (x_(n-m+1+k) - x_(m-k)),  e^{-mt} (b - a) ).
  It needs only the m smallest and m largest values of each column, so it is computed from a
  partial sort (`np.partition`, O(n) per column) -- the same pass gives the trimmed mean.
* `printed_scale`: [S4] Alg. 2 step 1 as printed, on *unclamped* data:
      S_printed(x) = max{ (x_(n) - x_(1))/(n-2m), e^{-mt} (b - a) }.

Arsinh-normal noise (Bun & Steinke 2019): Z_sigma = sinh(sigma Y)/sigma,
Y ~ N(0, 1). M(x) = f(x) + (S(x)/s) Z_sigma is (1/2) eps_c^2-CDP (= rho-zCDP, rho = eps_c^2/2,
Bun & Steinke 2016) when S is a t-smooth upper bound on the local sensitivity of f and
      eps_c >= ((4 + 3 sigma^2)/(6 sigma)) s + sqrt(t (t/sigma^2 + 1/sigma + 2))
(`arsinh_normal_min_eps`). [S4] takes sigma = 1, s = eps_c/4, t = eps_c^2/16; the right-hand side is
then eps_c (7/24 + (1/4) sqrt(eps_c^2/16 + 3)) ~ 0.725 eps_c for small eps_c, and the condition holds
iff eps_c <= (2/3) sqrt(181) = 8.969 (`EPS_C_MAX`); `bun_steinke_mean` refuses larger eps_c.

Algorithm 3 accounting ([S4] Alg. 3): d T calls of (1/2) eps_c^2-CDP compose to
rho = d T eps_c^2 / 2 zCDP (`alg3_zcdp`), reported as (zcdp_to_dp(rho, delta), delta)-DP
(`dpbench.privacy.accounting.zcdp_to_dp`, rho + 2 sqrt(rho ln(1/delta))). With
eps~ = sqrt(2 ln(1/delta) + 2 eps) - sqrt(2 ln(1/delta)) (Alg. 3 line 1) and eps_c = eps~/sqrt(dT),
rho = eps~^2/2 and rho + 2 sqrt(rho ln(1/delta)) = eps exactly.

Where [S4] is wrong or silent (and what is implemented)
-------------------------------------------------------
* [S4] Alg. 3 line 4 runs Alg. 2 with eps/sqrt(dT), not eps~/sqrt(dT); line 1 defines eps~ and
  never uses it. With eps/sqrt(dT) the composition gives rho = eps^2/2, i.e.
  eps^2/2 + eps sqrt(2 ln(1/delta)) > eps (at delta = 1e-5: ~4.8 eps for small eps, 5.3 at
  eps = 1). `alg3_eps_c(..., "corrected")`
  uses eps~, `"printed"` reproduces the paper.
* [S4] Alg. 2's scale is not t-smooth on unclamped data (defect 1) and its
  second term lacks 1/(n-2m) (defect 2). Both are fixed in the "corrected" variant (clamp, then S^).
  Note that on *clamped* data the printed expression is a valid (t-smooth, it is then the constant
  e^{-mt}(b-a) as soon as n - 2m > e^{mt}) but n-2m times too large bound.
* [S4] quotes Bun & Steinke's Theorem 7 for "0 < eps <= 1"; the sufficient CDP condition above holds
  up to eps_c = 8.969 for [S4]'s (s, t) -- no disagreement, just a wider range.
* Sample and aggregate: [S4] Theorem 1 bounds the l1 norm of f's output by Lambda, while the
  aggregation (its rho(t) := Lambda for t beyond the data) needs Lambda to bound the
  *diameter of f's range in the metric d_M* -- here l2 (Theorem 2: d_M(x, y) = ||x - y||_2). We use
  the latter; the caller must make it true (the algorithm projects every subset solution onto a
  ball of radius Lambda/2).
* [S4] Alg. 1 leaves s = sqrt(m) and t0 = (m + s)/2 + 1 fractional and does not say whether s_i is
  its own nearest neighbour. We use r_i(t) = t-th smallest of {||s_i - s_j|| : j != i} (self
  excluded: r_i(t) = r_i^incl(t+1), so this is the self-included rule with t0 + 1, and every rho(t)
  is at least as large -- the conservative reading), t0 = ceil((m + s)/2 + 1), the k-th smoothing
  index ceil(t0 + (k+1) s), rho(t) := Lambda when t > m - 1 (no t-th other neighbour), and the top
  ceil(s/beta) values capped at m (with [S4]'s constants ceil(s/beta) exceeds m unless
  m >= (4(d + ln(2/delta))/eps)^2, so rho(t) is then the mean of all r_i(t)).
* What the privacy theorem covers (the claim itself is decided in `dpbench.algorithms.sample_aggregate`,
  `claim_conditions`): NRS07 Thm 4.2 as quoted in [S4] Thm 1 (eps > 2d/sqrt(m), m = omega(log^2 n))
  with the Gaussian admissible-noise lemma behind gamma and beta (stated for eps, delta in (0, 1)).
  The cap of the averaged count at m is NOT covered: [S4] Alg. 1 step 5 averages the top ceil(s/beta)
  values, which exist only when ceil(s/beta) <= m; with fewer values, a neighbouring input can move
  rho(t) by s Lambda/m > beta Lambda and no smoothness proof applies. `center_of_attention` still
  computes the capped bound (it is well defined and tested), and reports `top_count`; the algorithm
  labels such runs "paper-only". rho(t) := Lambda past the data needs Lambda >= the l2 diameter of the
  solutions' range (checked here: a ValueError if two solutions are farther apart); it is the only cap
  that bounds every distance and keeps rho non-decreasing, and matches the Lambda e^{-Omega(eps
  sqrt(m)/d)} term of [S4] Thm 1's noise bound, but NRS07's own definition could not be checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist

from dpbench.core.jit import jit_enabled, njit
from dpbench.privacy import checks
from dpbench.privacy.accounting import zcdp_to_dp

__all__ = [
    "EPS_C_MAX",
    "VARIANTS",
    "SampleAggregateResult",
    "alg3_eps_c",
    "alg3_epsilon",
    "alg3_zcdp",
    "arsinh_normal",
    "arsinh_normal_min_eps",
    "bun_steinke_mean",
    "bun_steinke_params",
    "center_of_attention",
    "eps_tilde",
    "printed_scale",
    "sample_aggregate_release",
    "trimmed_mean",
    "trimmed_mean_smooth_sensitivity",
    "trimmed_mean_smooth_sensitivity_exact",
]

VARIANTS = ("corrected", "printed")

#: largest eps_c for which [S4]'s s = eps_c/4, t = eps_c^2/16 satisfy the arsinh-normal CDP condition
EPS_C_MAX = (2.0 / 3.0) * math.sqrt(181.0)


# ---- validation ------------------------------------------------------------------------------
def _as_columns(U) -> tuple[np.ndarray, bool]:
    """(n, d) float64 array and whether the input was 1-D."""
    A = np.asarray(U, dtype=np.float64)
    if A.ndim == 1:
        return A[:, None], True
    if A.ndim != 2:
        raise ValueError(f"data must be a 1-D or 2-D array, got shape {A.shape}")
    return A, False


def _trim(m, n: int) -> int:
    if isinstance(m, bool) or int(m) != m or m < 0:
        raise ValueError(f"trim m must be an integer >= 0, got {m!r}")
    m = int(m)
    if not n > 2 * m:
        raise ValueError(f"trim m={m} needs n > 2m rows, got n={n}")
    return m


def _interval(a, b, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-column bounds, broadcast to shape (d,); requires a < b everywhere."""
    lo = np.broadcast_to(np.asarray(a, dtype=np.float64), (d,))
    hi = np.broadcast_to(np.asarray(b, dtype=np.float64), (d,))
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
        raise ValueError(f"interval [a, b] must be finite with a < b, got a={a!r}, b={b!r}")
    return lo, hi


def _smoothness(t) -> float:
    t = float(t)
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"smoothness parameter t must be > 0, got {t!r}")
    return t


def _out(v: np.ndarray, one_d: bool):
    return float(v[0]) if one_d else v


# ---- order statistics ------------------------------------------------------------------------
def _extremes(A: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(low, high, middle_sum) per column: low = x_(1..m) sorted (m, d), high = x_(n-m+1..n)
    sorted (m, d), middle_sum = x_(m+1) + ... + x_(n-m). One O(n) partial sort per column."""
    n, d = A.shape
    if m == 0:
        return np.empty((0, d)), np.empty((0, d)), A.sum(axis=0)
    if m == 1:  # the default trim: min, max and sum along rows, no transposed copy (~2x faster)
        low, high = A.min(axis=0), A.max(axis=0)
        return low[None, :], high[None, :], A.sum(axis=0) - low - high
    # partition contiguous rows of the (d, n) transpose: ~1.4x faster than strided columns
    P = np.partition(np.ascontiguousarray(A.T), (m - 1, n - m), axis=1)  # [:m] smallest, [n-m:] largest
    low = np.sort(P[:, :m], axis=1).T
    high = np.sort(P[:, n - m:], axis=1).T
    middle = P[:, m:n - m].sum(axis=1)
    return low, high, middle


def _clamped(A: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.clip(A, lo[None, :], hi[None, :])


@njit(cache=True, nogil=True)
def _clamped_min_max_sum(A, lo, hi, low, high, total):  # pragma: no cover - compiled
    """Per column of A (n, d), clamped to [lo, hi]: min, max and sum, in one pass over the rows."""
    n, d = A.shape
    for j in range(d):
        low[j] = hi[j]
        high[j] = lo[j]
        total[j] = 0.0
    for i in range(n):
        for j in range(d):
            v = min(max(A[i, j], lo[j]), hi[j])
            low[j] = min(low[j], v)
            high[j] = max(high[j], v)
            total[j] += v


def _clamped_extremes(A: np.ndarray, m: int, lo: np.ndarray, hi: np.ndarray):
    """`_extremes(_clamped(A, lo, hi), m)`; for the default trim m = 1 (Algorithm 3's) one compiled pass
    (`_clamped_min_max_sum`: no clamped copy, one read of A instead of four; the same min and max, the
    sum in another order of additions), else the numpy code."""
    if m != 1 or not jit_enabled() or A.shape[0] == 0:
        return _extremes(_clamped(A, lo, hi), m)
    d = A.shape[1]
    low, high, total = np.empty(d), np.empty(d), np.empty(d)
    _clamped_min_max_sum(np.ascontiguousarray(A, dtype=np.float64), np.ascontiguousarray(lo),
                         np.ascontiguousarray(hi), low, high, total)
    return low[None, :], high[None, :], total - low - high


def _smooth_from_extremes(low: np.ndarray, high: np.ndarray, n: int, m: int, t: float, lo: np.ndarray,
                          hi: np.ndarray) -> np.ndarray:
    """S^ from the sorted extremes: max over k = 0..m of e^{-kt}(x_(n-m+1+k) - x_(m-k)) / (n-2m)."""
    best = math.exp(-m * t) * (hi - lo)  # k >= m: both indices in the padding, b - a
    if m > 0:
        k = np.arange(m)
        # x_(n-m+1+k) = high[k] for k < m; x_(m-k) = low[m-1-k]
        widths = np.exp(-k * t)[:, None] * (high - low[::-1])
        best = np.maximum(best, widths.max(axis=0))
    return best / (n - 2 * m)


def trimmed_mean(U, m: int, a, b):
    """Per column: clamp to [a, b], mean of x_(m+1..n-m), clip to [a, b] ([S4] Alg. 2 step 2,
    with the data clamped first as the corrected variant needs).

    U: (n,) or (n, d); a, b scalars or (d,). Returns a float for 1-D input, else (d,)."""
    A, one_d = _as_columns(U)
    n, d = A.shape
    m = _trim(m, n)
    lo, hi = _interval(a, b, d)
    _, _, middle = _extremes(_clamped(A, lo, hi), m)
    return _out(np.clip(middle / (n - 2 * m), lo, hi), one_d)


def trimmed_mean_smooth_sensitivity(U, m: int, t: float, a, b):
    """The O(n) t-smooth upper bound S^ on the local sensitivity of `trimmed_mean`
    (module docstring): S^(x) = (1/(n-2m)) max_{k>=0} e^{-kt}(x_(n-m+1+k) - x_(m-k)) on clamped, padded data."""
    A, one_d = _as_columns(U)
    n, d = A.shape
    m = _trim(m, n)
    t = _smoothness(t)
    lo, hi = _interval(a, b, d)
    low, high, _ = _extremes(_clamped(A, lo, hi), m)
    return _out(_smooth_from_extremes(low, high, n, m, t, lo, hi), one_d)


def trimmed_mean_smooth_sensitivity_exact(U, m: int, t: float, a, b):
    """Bun & Steinke's exact t-smooth sensitivity S* of `trimmed_mean`, O(n^2):
    S*(x) = (1/(n-2m)) max_{k=0..n} e^{-kt} max_{l=0..k+1} (x_(n-m+1+k-l) - x_(m+1-l)).
    For tests on small n."""
    A, one_d = _as_columns(U)
    n, d = A.shape
    m = _trim(m, n)
    t = _smoothness(t)
    lo, hi = _interval(a, b, d)
    X = np.sort(_clamped(A, lo, hi), axis=0)
    # padded[p] = x_(p - n) for order index i = p - n in -n..2n+1
    padded = np.concatenate([np.broadcast_to(lo, (n + 1, d)), X, np.broadcast_to(hi, (n + 1, d))], axis=0)
    best = np.zeros(d)
    for k in range(n + 1):
        ell = np.arange(k + 2)
        upper = padded[n - m + 1 + k - ell + n]
        lower = padded[m + 1 - ell + n]
        best = np.maximum(best, math.exp(-k * t) * (upper - lower).max(axis=0))
    return _out(best / (n - 2 * m), one_d)


def printed_scale(U, m: int, t: float, a, b):
    """[S4] Alg. 2 step 1 as printed, on UNCLAMPED data: max{(x_(n) - x_(1))/(n-2m), e^{-mt}(b-a)}.

    Not t-smooth when the data are unbounded (defect 1) and its second term lacks
    1/(n-2m) (defect 2). Reproduced only for the flagged "printed" variant."""
    A, one_d = _as_columns(U)
    n, d = A.shape
    m = _trim(m, n)
    t = _smoothness(t)
    lo, hi = _interval(a, b, d)
    spread = (A.max(axis=0) - A.min(axis=0)) / (n - 2 * m)
    return _out(np.maximum(spread, math.exp(-m * t) * (hi - lo)), one_d)


# ---- arsinh-normal noise and the Bun-Steinke mechanism ---------------------------------------
def arsinh_normal(rng: np.random.Generator, size=None, sigma: float = 1.0):
    """Z = sinh(sigma Y)/sigma, Y ~ N(0, 1) (Bun & Steinke 2019; [S4] Alg. 2 step 3 with sigma = 1)."""
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be > 0, got {sigma!r}")
    return np.sinh(sigma * rng.standard_normal(size)) / sigma


def arsinh_normal_min_eps(s: float, t: float, sigma: float = 1.0) -> float:
    """Smallest eps_c for which f(x) + (S(x)/s) Z_sigma is (1/2) eps_c^2-CDP, S a t-smooth bound
    (Bun & Steinke 2019): ((4 + 3 sigma^2)/(6 sigma)) s + sqrt(t (t/sigma^2 + 1/sigma + 2))."""
    s, t, sigma = float(s), float(t), float(sigma)
    if not (s > 0 and t >= 0 and sigma > 0):
        raise ValueError(f"need s > 0, t >= 0, sigma > 0; got s={s!r}, t={t!r}, sigma={sigma!r}")
    return (4.0 + 3.0 * sigma**2) / (6.0 * sigma) * s + math.sqrt(t * (t / sigma**2 + 1.0 / sigma + 2.0))


def bun_steinke_params(eps_c: float) -> tuple[float, float]:
    """[S4] Alg. 2 step 1: (s, t) = (eps_c/4, eps_c^2/16), after checking the CDP condition.

    Raises ValueError if eps_c <= 0 or eps_c > EPS_C_MAX (= 8.969: the arsinh-normal condition
    eps_c >= (7/6)s + sqrt(t(t + 3)) fails for these (s, t))."""
    eps_c = float(eps_c)
    if not (math.isfinite(eps_c) and eps_c > 0):
        raise ValueError(f"eps_c must be > 0, got {eps_c!r}")
    s, t = eps_c / 4.0, eps_c**2 / 16.0
    if arsinh_normal_min_eps(s, t) > eps_c * (1.0 + 1e-12):
        raise ValueError(f"eps_c={eps_c:g} is outside the valid range (0, {EPS_C_MAX:.4f}] of the arsinh-normal "
                         "CDP condition for s = eps_c/4, t = eps_c^2/16; use a smaller epsilon or more steps")
    return s, t


def bun_steinke_mean(U, eps_c: float, a, b, m: int, rng: np.random.Generator, variant: str = "corrected"):
    """Per column of U (n, d): Bun-Steinke trimmed mean with arsinh-normal noise ([S4] Alg. 2).

    corrected (default; (1/2) eps_c^2-CDP per column, replace-one):
        mu^ = trimmed_mean(U, m, a, b) (clamped data), S = S^ (`trimmed_mean_smooth_sensitivity`);
    printed ([S4] Alg. 2 as printed; NOT private on unbounded data, module docstring):
        mu^ = clip_[a,b](mean(x_(m+1..n-m))) on unclamped data, S = `printed_scale`.
    Both: s = eps_c/4, t = eps_c^2/16 (CDP condition checked, `bun_steinke_params`), output
    mu^ + (S/s) sinh(Y), Y ~ N(0, 1) independent per column.

    Returns (noisy means, S): floats for 1-D input, else two (d,) arrays. The noise multiplier on
    sinh(Y) is S/s.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    s, t = bun_steinke_params(eps_c)
    A, one_d = _as_columns(U)
    n, d = A.shape
    m = _trim(m, n)
    lo, hi = _interval(a, b, d)
    if variant == "corrected":
        low, high, middle = _clamped_extremes(A, m, lo, hi)
        S = _smooth_from_extremes(low, high, n, m, t, lo, hi)
    else:
        _, _, middle = _extremes(A, m)
        S = np.maximum((A.max(axis=0) - A.min(axis=0)) / (n - 2 * m), math.exp(-m * t) * (hi - lo))
    mu = np.clip(middle / (n - 2 * m), lo, hi)
    noisy = mu + (S / s) * arsinh_normal(rng, d)
    return _out(noisy, one_d), _out(S, one_d)


# ---- Algorithm 3 accounting ------------------------------------------------------------------
def eps_tilde(epsilon: float, delta: float) -> float:
    """[S4] Alg. 3 line 1: eps~ = sqrt(2 ln(1/delta) + 2 eps) - sqrt(2 ln(1/delta)) (natural log)."""
    eps, delta = checks.positive("epsilon", epsilon), checks.unit_interval("delta", delta)
    L = 2.0 * math.log(1.0 / delta)
    return 2.0 * eps / (math.sqrt(L + 2.0 * eps) + math.sqrt(L))  # the same, without cancellation


def alg3_eps_c(epsilon: float, delta: float, d: int, steps: int, variant: str = "corrected") -> float:
    """Per-call CDP parameter of [S4] Alg. 3: eps~/sqrt(dT) (corrected) or eps/sqrt(dT) (printed)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    for name, v in (("d", d), ("steps", steps)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    tilde = eps_tilde(epsilon, delta)  # also validates epsilon and delta
    budget = tilde if variant == "corrected" else float(epsilon)
    return budget / math.sqrt(int(d) * int(steps))


def alg3_zcdp(eps_c: float, d: int, steps: int) -> float:
    """zCDP of [S4] Alg. 3: d T calls, each (1/2) eps_c^2-CDP = eps_c^2/2-zCDP, compose to rho = d T eps_c^2/2."""
    return int(d) * int(steps) * float(eps_c) ** 2 / 2.0


def alg3_epsilon(eps_c: float, d: int, steps: int, delta: float) -> float:
    """(eps, delta)-DP of [S4] Alg. 3 run with eps_c: zcdp_to_dp(d T eps_c^2 / 2, delta) (Bun & Steinke 2016)."""
    return zcdp_to_dp(alg3_zcdp(eps_c, d, steps), delta)


# ---- sample and aggregate ([S4] Alg. 1, NRS07) -----------------------------------------------
@dataclass(frozen=True)
class SampleAggregateResult:
    """Everything the aggregation computed (the ledger records it)."""

    center: np.ndarray  # g = s_{i*}
    center_index: int  # i*
    smooth_bound: float  # S (beta-smooth upper bound on the sensitivity of g)
    gamma: float  # noise divisor: noise = (S/gamma) N(0, I)
    beta: float  # smoothness parameter beta_a
    s: float  # sqrt(m)
    t0: int
    top_count: int  # number of largest r_i(t) averaged in rho(t)
    k_max: int  # last k of the max (rho = Lambda from there on)
    rho_t0: float  # rho(t0), diagnostic
    diameter: float  # Lambda

    @property
    def noise_std(self) -> float:
        return self.smooth_bound / self.gamma


def center_of_attention(solutions, epsilon: float, delta: float, diameter: float) -> SampleAggregateResult:
    """[S4] Alg. 1 steps 1, 4, 5 (NRS07 centre of attention) on the m subset solutions (m, d).

    s = sqrt(m), gamma = eps/(5 sqrt(2 ln(2/delta))), beta = eps/(4(d + ln(2/delta)));
    r_i(t) = distance from s_i to its t-th nearest *other* solution (l2); t0 = ceil((m + s)/2 + 1);
    g = s_{i*}, i* = argmin_i r_i(t0); rho(t) = mean of the ceil(s/beta) (<= m) largest r_i(t),
    rho(t) = Lambda for t > m - 1; S = 2 max_{k>=0} rho(ceil(t0 + (k+1)s)) e^{-beta k}.
    `top_count` < ceil(s/beta) means the count was capped at m: outside [S4] Alg. 1 / NRS07 (module docstring).
    Pairwise distances: one `cdist` call (O(m^2 d) time, O(m^2) memory). Conventions: module docstring.
    """
    P = np.asarray(solutions, dtype=np.float64)
    if P.ndim != 2:
        raise ValueError(f"solutions must be an (m, d) array, got shape {P.shape}")
    m, d = P.shape
    eps, delta = checks.positive("epsilon", epsilon), checks.unit_interval("delta", delta)
    lam = float(diameter)
    if not (math.isfinite(lam) and lam > 0):
        raise ValueError(f"diameter Lambda must be > 0, got {diameter!r}")
    s = math.sqrt(m)
    t0 = math.ceil((m + s) / 2.0 + 1.0)
    if t0 > m - 1:
        raise ValueError(f"sample and aggregate needs at least 7 subsets (t0 = {t0} > m - 1 = {m - 1}), got m={m}")
    if not np.all(np.isfinite(P)):
        raise ValueError("subset solutions must be finite")
    log2d = math.log(2.0 / delta)
    gamma = eps / (5.0 * math.sqrt(2.0 * log2d))
    beta = eps / (4.0 * (d + log2d))

    D = cdist(P, P)
    np.fill_diagonal(D, -1.0)  # self sorts first, then is dropped
    R = np.sort(D, axis=1)[:, 1:]  # R[i, t-1] = r_i(t), t = 1..m-1
    if float(R[:, -1].max()) > lam * (1.0 + 1e-9):
        raise ValueError(f"subset solutions are {R.max():.4g} apart, more than the diameter Lambda={lam:g}: "
                         "Lambda must bound the diameter of f's range (project the solutions)")
    center_index = int(np.argmin(R[:, t0 - 1]))
    top = min(m, math.ceil(s / beta))
    rho = np.sort(R, axis=0)[m - top:].mean(axis=0)  # rho[t-1] = rho(t), t = 1..m-1

    best, k = 0.0, 0
    while True:
        tk = math.ceil(t0 + (k + 1) * s)
        value = lam if tk > m - 1 else float(rho[tk - 1])
        best = max(best, value * math.exp(-beta * k))
        if tk > m - 1:
            break
        k += 1
    return SampleAggregateResult(center=P[center_index].copy(), center_index=center_index, smooth_bound=2.0 * best,
                                 gamma=gamma, beta=beta, s=s, t0=t0, top_count=top, k_max=k,
                                 rho_t0=float(rho[t0 - 1]), diameter=lam)


def sample_aggregate_release(solutions, epsilon: float, delta: float, diameter: float,
                             rng: np.random.Generator) -> tuple[np.ndarray, SampleAggregateResult]:
    """[S4] Alg. 1 step 6: g + (S/gamma) u, u ~ N(0, I_d); returns (release, aggregation numbers)."""
    res = center_of_attention(solutions, epsilon, delta, diameter)
    noise = rng.standard_normal(res.center.shape[0]) * res.noise_std
    return res.center + noise, res
