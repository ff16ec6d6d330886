"""Catoni-Giulini / Holland robust mean and the noise calibration of [S4] Algorithm 4 (pure maths).

[S4] = paper 004, Wang, Xiao, Devadas, Xu, "On differentially private stochastic convex
optimization with heavy-tailed data", ICML 2020, §5 eqs. (5)-(12), Algorithm 4, Theorems 6-8;
the zCDP conversion is Bun & Steinke 2016 (docs/methods/heavy-tailed.md, Algorithm 4 and
Catoni-Giulini correction). No I/O, no randomness; numpy-vectorised; arguments are validated with
one-line ValueErrors.

The estimator (one coordinate, samples x_1..x_n; [S4] eqs. (5)-(8)):
    x_hat = (s/n) sum_i E_eta phi(x_i (1 + eta_i) / s),  eta_i ~ N(0, 1/beta_m),
with phi the Catoni-Giulini influence function ([S4] eq. (6))
    phi(y) = y - y^3/6 on [-sqrt2, sqrt2],  +2sqrt2/3 for y > sqrt2,  -2sqrt2/3 for y < -sqrt2.
x_i (1 + eta_i)/s = a_i + b_i xi with a_i = x_i/s, b_i = |x_i|/(s sqrt(beta_m)), xi ~ N(0, 1), so
x_hat = (s/n) sum_i E phi(a_i + b_i xi) ([S4] eq. (9); the multiplicative noise is
integrated out analytically, never sampled). Because |phi| <= 2sqrt2/3, each summand is at most
(2sqrt2/3) s in absolute value, whatever the data: that bound is the whole privacy argument.

Numerics of E phi(a + b xi) (`catoni_expectation`). The direct form (truncated normal moments on [l,
u] = [(-sqrt2 - a)/b, (sqrt2 - a)/b] plus the two tails; docs/methods/heavy-tailed.md,
Catoni-Giulini correction) is accurate to ~1e-16 for b < 1 but cancels catastrophically for large b:
its terms a^3 M0, 3a^2 b M1, ... are of order b^2 while the sum is O(1), so the absolute error grows
like 1e-16 b^2 (measured against 50-digit quadrature: 2e-14 at b = 10, 3e-8 at b = 1e3, 3e-5 at b =
1e4, 37 at b = 1e6). Here b is proportional to |a| (b = |a|/sqrt(beta_m)), so one outlying gradient
coordinate hits that regime. We therefore evaluate the *same integral*
    E phi(a + b xi) = int_{-sqrt2}^{sqrt2} (y - y^3/6) N(y; a, b^2) dy + (2sqrt2/3)(Phi(-u) - Phi(l))
as follows (all branches agree to < 1e-14 where they overlap; measured max error against
50-digit mpmath quadrature on a grid of b in {0, 1e-13, ..., 1e9}, |a| up to 1e9: 2.2e-16):
* b < 1e-12: phi(a) (the b -> 0 limit);
* |a| - sqrt2 > 40 b: sign(a) 2sqrt2/3 (no mass inside the interval to double precision);
* |a| <= sqrt2 - 10 b (the interval holds the Gaussian up to 10 standard deviations): the
  polynomial a (1 - b^2/2) - a^3/6 ([S4] eq. (9) with C = 0; the omitted tail terms are
  < 1e-21);
* b < 1: the direct moment form;
* b >= 1: the interval integral by 16-node Gauss-Legendre quadrature in y on [-sqrt2, sqrt2]
  (the normal density of std b >= 1 is smooth there: exact to rounding), tails in closed form.
Oddness in a is enforced (computed for |a|, then signed), which also keeps every normal CDF in its
accurate lower tail. The result is clipped to [-2sqrt2/3, 2sqrt2/3] (a rounding excess must never
break the sensitivity bound of [S4] §5 after eq. (11)).

Where the paper, or the usual closed forms, need a correction:
0. The direct form is stable only for moderate b. In the estimator b grows with |u|/s, and at |u|/s
   = 1e4 the direct form is off by 3e-5, at 1e6 by 37 (the clip then keeps privacy but returns a
   wrong value). Hence the quadrature branch above for b >= 1; the closed form C(a, b) has the same
   cancellation (2.4e-5 off at a = 1e4).
1. [S4] §5 below eq. (6) prints |phi(x)| <= 2sqrt2/2; the bound (used in the sensitivity
   (4sqrt2/3) s/n right after eq. (11)) is 2sqrt2/3.
2. beta_m: [S4] Alg. 4 line 1 sets beta = log(1/delta'), while Lemma 3 (quoting Holland 2019,
   Lemma 5), the utility guarantee Alg. 4 relies on, is stated for beta = 2 log(1/delta'); both
   are offered (`robust_beta`; Alg. 4's is the default in the algorithms), privacy does not
   depend on it. [S4] also uses beta for the smoothness (eta = 1/beta): called beta_m here.
3. [S4] Alg. 4 / eq. (10) calls it "the robust gradient by (7)-(9)" and uses C(a, b) from an
   appendix that is not available; we use the closed form C = [F(a - sqrt2, b) - F(-a - sqrt2, b)]/6
   (`catoni_correction`, checked against Monte Carlo and the direct form in
   tests/privacy/test_robust_mean.py).
4. sigma of [S4] Alg. 4, sigma^2 = 8 v d T / (9 log(1/delta') n eps_tilde), and eps_tilde =
   (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 are correct as printed: with the per-step
   L2 sensitivity Delta = (4sqrt2/3) s sqrt(d)/n, T steps are rho = T Delta^2/(2 sigma^2) =
   eps_tilde zCDP, and rho-zCDP => (rho + 2 sqrt(rho log(1/delta)), delta) = (eps, delta)-DP
   exactly (Bun & Steinke 2016). [S4] eq. (12) only states sigma^2 = O(s^2 log(1/delta)/(eps^2 n^2))
   for the one-shot estimator.
5. eps_tilde is computed as eps^2 / (sqrt(log(1/delta) + eps) + sqrt(log(1/delta)))^2, the same
   number without the cancellation of the printed difference at small eps.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from dpbench.privacy.checks import integer, positive, unit_interval

__all__ = [
    "PHI_BOUND",
    "BETA_RULES",
    "catoni_phi",
    "catoni_expectation",
    "catoni_correction",
    "robust_mean",
    "robust_sum",
    "robust_scale",
    "robust_beta",
    "robust_mean_sensitivity",
    "alg4_eps_tilde",
    "alg4_sigma",
    "alg4_rho",
]

SQRT2 = math.sqrt(2.0)
PHI_BOUND = 2.0 * SQRT2 / 3.0
"""sup |phi| = 2 sqrt(2)/3 ([S4] eq. (6); the paper's text misprints it as 2 sqrt(2)/2)."""

BETA_RULES = ("log", "2log")
"""beta_m = log(1/delta') ([S4] Alg. 4 line 1) or 2 log(1/delta') ([S4] Lemma 3 / Holland 2019)."""

_B_ZERO = 1e-12  # below: E phi(a + b xi) = phi(a) to O(b^2)
_POLY_SIGMAS = 10.0  # |a| <= sqrt2 - 10 b: no mass outside [-sqrt2, sqrt2] to double precision
_FAR_SIGMAS = 40.0  # |a| - sqrt2 > 40 b: E phi = 2sqrt2/3 to double precision (also avoids inf * 0)
_B_QUAD = 1.0  # b >= 1: Gauss-Legendre instead of the moment form (which cancels like b^2)
BLOCK_ENTRIES = 1 << 17  # robust_mean works on row blocks of about this many entries
_GL_T, _GL_W = np.polynomial.legendre.leggauss(16)
_GL_Y = SQRT2 * _GL_T  # nodes in y on [-sqrt2, sqrt2]
_GL_KERNEL = SQRT2 * _GL_W * (_GL_Y - _GL_Y**3 / 6.0)  # dy/dt * weight * polynomial part of phi
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# ---- validation (one-line reasons) ---------------------------------------------------------
def _finite_array(name: str, value) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (got NaN or inf)")
    return arr


# ---- the influence function and its Gaussian smoothing -------------------------------------
def catoni_phi(y) -> np.ndarray:
    """phi(y) of Catoni & Giulini ([S4] eq. (6)): y - y^3/6 on [-sqrt2, sqrt2], else +-2sqrt2/3."""
    y = np.clip(np.asarray(y, dtype=np.float64), -SQRT2, SQRT2)  # phi(+-sqrt2) = +-2sqrt2/3: continuous
    return y - y**3 / 6.0


def _pdf(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _direct_form(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The direct form of E phi(x + b xi) for x >= 0, 1e-12 <= b < 1 (truncated-normal moments + tails)."""
    l = (-SQRT2 - x) / b
    u = (SQRT2 - x) / b
    pl, pu = _pdf(l), _pdf(u)
    cl, cu = ndtr(l), ndtr(u)  # l < 0; 1 - cu below is exact to 1e-16 absolute, all that is needed
    m0 = cu - cl
    m1 = pl - pu
    m2 = m0 + l * pl - u * pu
    m3 = (l * l + 2.0) * pl - (u * u + 2.0) * pu
    cubic = x * x * x * m0 + 3.0 * x * x * b * m1 + 3.0 * x * b * b * m2 + b * b * b * m3
    return x * m0 + b * m1 - cubic / 6.0 + PHI_BOUND * ((1.0 - cu) - cl)


def _quadrature_form(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Same integral for b >= 1: 16-node Gauss-Legendre on the interval part, closed-form tails."""
    z = (_GL_Y[None, :] - x[:, None]) / b[:, None]
    inner = (np.exp(-0.5 * z * z) @ _GL_KERNEL) * (_INV_SQRT_2PI / b)
    l = (-SQRT2 - x) / b
    u = (SQRT2 - x) / b
    return inner + PHI_BOUND * (ndtr(-u) - ndtr(l))


def _poly_branch(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mask of the polynomial branch: |a| <= sqrt2 - 10 b (no mass outside [-sqrt2, sqrt2])."""
    return x <= SQRT2 - _POLY_SIGMAS * b


def _expectation_abs(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """E phi(x + b xi) for 1-D finite arrays x >= 0, b >= 0 (see the module docstring), clipped to [0, 2sqrt2/3]."""
    with np.errstate(over="ignore", invalid="ignore"):  # b up to 1e308: inf thresholds are harmless
        return _expectation_abs_branches(x, b)


def _expectation_abs_branches(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    val = np.empty_like(x)
    poly = _poly_branch(x, b)
    tiny = ~poly & (b < _B_ZERO)
    far = ~(poly | tiny) & (x - SQRT2 > _FAR_SIGMAS * b)  # all mass beyond +sqrt2: phi = 2sqrt2/3
    quad = ~(poly | tiny | far) & (b >= _B_QUAD)
    mid = ~(poly | tiny | far | quad)
    xp, bp = x[poly], b[poly]
    val[poly] = xp * (1.0 - 0.5 * bp * bp - xp * xp / 6.0)  # [S4] eq. (9) with C = 0
    val[tiny] = catoni_phi(x[tiny])
    val[far] = PHI_BOUND
    if np.any(mid):
        val[mid] = _direct_form(x[mid], b[mid])
    if np.any(quad):
        val[quad] = _quadrature_form(x[quad], b[quad])
    return np.clip(val, 0.0, PHI_BOUND, out=val)  # E phi(x + b xi) >= 0 for x >= 0 (phi odd, increasing)


def catoni_expectation(a, b) -> np.ndarray:
    """E phi(a + b xi), xi ~ N(0, 1): [S4] eq. (9) (with eta ~ N(0, 1/beta) absorbed into b).

    Equal to a(1 - b^2/2) - a^3/6 + C(a, b) (`catoni_correction`). Vectorised over broadcastable
    arrays a (any real) and b >= 0; b -> 0 gives phi(a); odd in a; clipped to [-2sqrt2/3, 2sqrt2/3].
    Evaluation: the direct form (truncated-normal moments) for b < 1, the same integral by
    Gauss-Legendre quadrature for b >= 1 (the moment form cancels like b^2 there); see the module
    docstring. Returns a float array (0-d for scalar inputs).
    """
    a = _finite_array("a", a)
    b = _finite_array("b", b)
    if np.any(b < 0):
        raise ValueError("b must be >= 0 (it is the standard deviation of the Gaussian perturbation)")
    a, b = np.broadcast_arrays(a, b)
    flat_a = a.ravel()
    out = np.copysign(_expectation_abs(np.abs(flat_a), b.ravel().copy()), flat_a)
    return out.reshape(a.shape)


def _closed_form_F(m: np.ndarray, b: np.ndarray) -> np.ndarray:
    """F(m, b) = E[(W^3 + 3sqrt2 W^2) 1{W > 0}], W ~ N(m, b^2), b > 0 (a Gaussian moment in closed form)."""
    r = m / b
    return ((m**3 + 3.0 * m * b * b + 3.0 * SQRT2 * (m * m + b * b)) * ndtr(r)
            + b * (m * m + 2.0 * b * b + 3.0 * SQRT2 * m) * _pdf(r))


def catoni_correction(a, b) -> np.ndarray:
    """C(a, b) of [S4] eq. (9) in closed form: C = [F(a - sqrt2, b) - F(-a - sqrt2, b)] / 6.

    E phi(a + b xi) = a (1 - b^2/2) - a^3/6 + C(a, b). For b = 0, C(a, 0) = phi(a) - a + a^3/6.
    Not clipped and, like every polynomial form, subject to cancellation at large |a| or b: use
    `catoni_expectation` for the estimator; this is the reference form the tests compare against.
    """
    a = _finite_array("a", a)
    b = _finite_array("b", b)
    if np.any(b < 0):
        raise ValueError("b must be >= 0 (it is the standard deviation of the Gaussian perturbation)")
    a, b = np.broadcast_arrays(a, b)
    zero = b == 0
    bb = np.where(zero, 1.0, b)
    with np.errstate(over="ignore"):  # m/b -> inf for tiny b: the density term is 0 there
        closed = (_closed_form_F(a - SQRT2, bb) - _closed_form_F(-a - SQRT2, bb)) / 6.0
    return np.where(zero, catoni_phi(a) - a + a**3 / 6.0, closed)


# ---- the estimator -------------------------------------------------------------------------
def robust_mean(U, scale: float, beta: float) -> np.ndarray:
    """Column-wise robust mean (1/n) sum_i s E phi(u_ij/s + (|u_ij|/(s sqrt(beta))) xi) ([S4] eqs. (7)-(10)).

    [S4] Alg. 4 step 3 / eq. (10) without the noise Z, which is also Holland's (2019)
    RGD estimator with the Alg. 4 constants (docs/methods/heavy-tailed.md, Robust GD baseline). U: (n, d) array of
    per-example gradient coordinates (or (n,) for one coordinate); scale s > 0; beta = beta_m > 0,
    the precision of the multiplicative noise eta ~ N(0, 1/beta_m). Returns shape U.shape[1:].
    Each summand is clipped to [-(2sqrt2/3) s, (2sqrt2/3) s], so replacing one row moves every
    coordinate by at most (4sqrt2/3) s / n (`robust_mean_sensitivity`).
    """
    U = np.asarray(U, dtype=np.float64)
    return robust_sum(U, scale, beta) / U.shape[0]


def robust_sum(U, scale: float, beta: float) -> np.ndarray:
    """sum_i s E phi(u_ij/s + (|u_ij|/(s sqrt(beta))) xi), clipped per summand: n times `robust_mean`.

    For callers that accumulate the estimator over row blocks (the algorithm loop does, so the
    per-example gradients of a block stay in cache); same validation and numerics as `robust_mean`.
    """
    s = positive("scale", scale)
    beta_m = positive("beta", beta)
    U = np.asarray(U, dtype=np.float64)
    if U.ndim not in (1, 2) or U.shape[0] < 1:
        raise ValueError(f"U must be an (n, d) or (n,) array with n >= 1, got shape {U.shape}")
    # Fast path (b = c |a|, c = 1/sqrt(beta_m)): on the polynomial branch |a| <= sqrt2/(1 + 10 c),
    # E phi = a (1 - k a^2) with k = c^2/2 + 1/6 (odd, and within the bound there); only the
    # remaining entries go through the full evaluation. Rows are processed in blocks of about
    # 2^17 entries so the temporaries stay in cache (measured 2-3x faster at n = 60,000, d = 10).
    c = 1.0 / math.sqrt(beta_m)
    k = 0.5 * c * c + 1.0 / 6.0
    thr2 = (SQRT2 / (1.0 + _POLY_SIGMAS * c)) ** 2
    U2 = U.reshape(U.shape[0], -1)
    rows = max(1, BLOCK_ENTRIES // max(1, U2.shape[1]))
    total = np.zeros(U2.shape[1])
    with np.errstate(over="ignore", invalid="ignore"):  # overflow only where `rest` recomputes
        for start in range(0, U2.shape[0], rows):
            a = U2[start:start + rows] * (1.0 / s)
            values = a * a
            rest = ~(values <= thr2)  # NaN or inf entries land here and come out NaN (checked below)
            values *= -k
            values += 1.0
            values *= a
            if np.any(rest):
                ar = a[rest]
                xr = np.abs(ar)
                values[rest] = np.copysign(_expectation_abs(xr, c * xr), ar)
            total += values.sum(axis=0)
    if not np.all(np.isfinite(total)):
        raise ValueError("U must be finite (got NaN or inf)")
    return (s * total).reshape(U.shape[1:])


def robust_scale(n: int, v: float, delta_prime: float) -> float:
    """s = sqrt(n v / (2 log(1/delta'))) ([S4] Alg. 4 line 1 and Lemma 3).

    n: number of rows averaged (the batch size B in the minibatch variant); v: the known bound on
    E[(grad_j l(w, x))^2] ([S4] Assumption 4); delta': the failure probability of Lemma 3.
    """
    n_int = integer("n", n, 1)
    vv = positive("v", v)
    dp = unit_interval("delta_prime", delta_prime)
    return math.sqrt(n_int * vv / (2.0 * math.log(1.0 / dp)))


def robust_beta(delta_prime: float, rule: str = "log") -> float:
    """beta_m: "log" = log(1/delta') ([S4] Alg. 4 line 1), "2log" = 2 log(1/delta') ([S4] Lemma 3, Holland)."""
    dp = unit_interval("delta_prime", delta_prime)
    if rule not in BETA_RULES:
        raise ValueError(f"beta rule must be one of {', '.join(BETA_RULES)}, got {rule!r}")
    return (1.0 if rule == "log" else 2.0) * math.log(1.0 / dp)


def robust_mean_sensitivity(scale: float, n: int, d: int) -> float:
    """Replace-one L2 sensitivity of the d-vector `robust_mean`: (4sqrt2/3) s sqrt(d) / n ([S4] §5 after eq. (11)).

    Each summand lies in [-(2sqrt2/3) s, (2sqrt2/3) s] (the clip), so one coordinate of the average
    moves by at most (4sqrt2/3) s / n, and the d-vector by sqrt(d) times that.
    Only the data part: a data-independent term added afterwards (the model's l2 * w) does not count.
    """
    s = positive("scale", scale)
    n_int = integer("n", n, 1)
    d_int = integer("d", d, 1)
    return 4.0 * SQRT2 / 3.0 * s * math.sqrt(d_int) / n_int


# ---- Algorithm 4 calibration ---------------------------------------------------------------
def alg4_eps_tilde(epsilon: float, delta: float) -> float:
    """eps_tilde = (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 ([S4] Alg. 4 line 1).

    The zCDP budget rho with rho + 2 sqrt(rho log(1/delta)) = eps (Bun & Steinke 2016), evaluated as
    eps^2 / (sqrt(L + eps) + sqrt(L))^2, L = log(1/delta) (same value, no cancellation).
    """
    eps = positive("epsilon", epsilon)
    dl = unit_interval("delta", delta)
    L = math.log(1.0 / dl)
    return eps**2 / (math.sqrt(L + eps) + math.sqrt(L)) ** 2


def alg4_sigma(v: float, d: int, steps: int, n: int, delta_prime: float, eps_tilde: float) -> float:
    """sigma = sqrt(8 v d T / (9 log(1/delta') n eps_tilde)) ([S4] Alg. 4 step 3).

    The std of Z_j, the Gaussian noise on each coordinate of the averaged robust gradient, so that
    T steps at sensitivity `robust_mean_sensitivity(robust_scale(n, v, delta'), n, d)` are
    eps_tilde-zCDP. n is the batch size B in the minibatch variant.
    """
    vv = positive("v", v)
    d_int = integer("d", d, 1)
    t = integer("steps", steps, 1)
    n_int = integer("n", n, 1)
    dp = unit_interval("delta_prime", delta_prime)
    et = positive("eps_tilde", eps_tilde)
    return math.sqrt(8.0 * vv * d_int * t / (9.0 * math.log(1.0 / dp) * n_int * et))


def alg4_rho(sigma: float, sensitivity: float, steps: int) -> float:
    """zCDP of `steps` Gaussian releases of std sigma at L2 sensitivity Delta: rho = T Delta^2 / (2 sigma^2).

    Bun & Steinke 2016: a Gaussian is Delta^2/(2 sigma^2)-zCDP and zCDP adds under composition; convert
    with `dpbench.privacy.zcdp_to_dp(rho, delta)`.
    """
    sg = positive("sigma", sigma)
    sens = positive("sensitivity", sensitivity)
    t = integer("steps", steps, 1)
    return t * sens * sens / (2.0 * sg * sg)
