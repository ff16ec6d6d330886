"""Closed-form noise scales and sensitivities of the DP-ERM perturbation methods (pure maths).

One formula per function; each docstring cites the equation it implements. No I/O, no
randomness. Every function validates its arguments and raises ValueError with a one-line reason.

* [S3] = paper 003 (Kang et al., "Input Perturbation: a new paradigm between central and local
  DP"), Theorems 1 and 3 (docs/methods/input-perturbation.md);
* KST12 = Kifer, Smith, Thakurta, COLT 2012, Gaussian objective perturbation
  (docs/methods/objective-perturbation.md; constants also quoted in [S3] Table 1 row [29]);
* [S2] = paper 002 (CS325 lecture 17 notes), Theorem 17.4 quoting Zhang, Zheng, Mou, Wang 2017
  (ZZMW), and the contraction bound derived in `output_gd_sensitivity`
  (docs/methods/output-perturbation.md).
"""

from __future__ import annotations

import math

from dpbench.privacy.checks import integer, non_negative, positive, unit_interval

__all__ = [
    "input_perturbation_variance",
    "kst_internal_epsilon",
    "kst_objective_variance",
    "kst_regulariser",
    "kst_replace_one_epsilon",
    "output_gd_sensitivity",
    "zzmw_sensitivity",
]


# ---- [S3] input perturbation ---------------------------------------------------------------
def input_perturbation_variance(G: float, T: int, n: int, epsilon: float, delta: float, c: float = 1.0,
                                strong_convexity: float | None = None) -> float:
    """Variance sigma^2 of each feature-noise coordinate of [S3] Algorithm 1.

    strongly convex ([S3] Theorem 1, eq. (9)), Delta = strong_convexity:
        sigma^2 = c G^2 T log(1/delta) / (n (n - 1) sqrt(Delta) eps^2)
    Polyak-Lojasiewicz ([S3] Theorem 3, eq. (12)), strong_convexity=None:
        sigma^2 = c G^2 T log(1/delta) / (n (n - 1) eps^2)
    c is "some constant" that [S3] never gives (proof, eqs. (29)-(32): it also absorbs the factor
    sqrt(2 (l(theta_T) - l*)) that tends to 0 at convergence). log is natural. This reproduces the
    paper's number; it certifies nothing (docs/methods/input-perturbation.md, Privacy).
    """
    g = positive("G", G)
    t = integer("T", T, 1)
    n_int = integer("n", n, 2)  # n (n - 1) > 0
    eps = positive("epsilon", epsilon)
    d = unit_interval("delta", delta)
    cc = positive("c", c)
    variance = cc * g * g * t * math.log(1.0 / d) / (n_int * (n_int - 1) * eps * eps)
    if strong_convexity is None:
        return variance
    return variance / math.sqrt(positive("strong_convexity", strong_convexity))


# ---- KST12 Gaussian objective perturbation -------------------------------------------------
def kst_objective_variance(zeta: float, epsilon: float, delta: float) -> float:
    """Variance beta of b ~ N(0, beta I_p) in KST12 Algorithm 1 (line 5):

        beta = zeta^2 (8 log(2/delta) + 4 eps) / eps^2
             = 4 zeta^2 (log(4/delta^2) + eps) / eps^2   (the form of [S3] Table 1 row [29], up to O(.))

    zeta bounds the per-example gradient norm ||grad l|| (logistic loss, ||x|| <= 1: zeta = 1).
    """
    z = positive("zeta", zeta)
    eps = positive("epsilon", epsilon)
    d = unit_interval("delta", delta)
    return z * z * (8.0 * math.log(2.0 / d) + 4.0 * eps) / (eps * eps)


def kst_regulariser(lambda_H: float, epsilon: float) -> float:
    """KST12's regulariser Delta = 2 lambda_H / eps (KST12 Algorithm 1, taken with equality).

    lambda_H bounds the eigenvalues of every per-example Hessian (logistic loss: 1/4, so
    Delta = 1/(2 eps)). In the objective it appears as (Delta / (2n)) ||theta||^2.
    """
    return 2.0 * positive("lambda_H", lambda_H) / positive("epsilon", epsilon)


def kst_replace_one_epsilon(epsilon: float) -> float:
    """Epsilon that KST12's argument proves under replace-one adjacency for a mechanism run with
    regulariser Delta = 2 lambda_H / eps and variance beta = zeta^2 (8 log(2/delta) + 4 eps) / eps^2
    (`kst_regulariser`, `kst_objective_variance` at this eps):

        eps_total = eps + log(1 + eps/2)    (same delta)

    log(1 + eps/2) bounds the log Jacobian ratio (<= log(1 + lambda_H / Delta)), eps bounds the
    Gaussian part for a gradient shift of 2 zeta (one record replaced). Derivation in the docstring
    of `dpbench.algorithms.objective_perturbation`.
    """
    eps = positive("epsilon", epsilon)
    return eps + math.log1p(eps / 2.0)


def kst_internal_epsilon(target_epsilon: float) -> float:
    """The eps at which to calibrate KST12 (Delta, beta) so that the replace-one guarantee is the target:
    the largest eps with eps + log(1 + eps/2) <= target (`kst_replace_one_epsilon`).

    eps + log(1 + eps/2) is increasing and lies in [eps, 1.5 eps], so the root is in
    [target/1.5, target]; bisection to the last bit returns the lower end, so
    kst_replace_one_epsilon(result) <= target always holds exactly (in float64).
    (Closed form, not used: eps = W(2 e^(target + 2)) - 2, W the Lambert W function.)
    """
    t = positive("target_epsilon", target_epsilon)
    lo, hi = t / 1.5, t
    if kst_replace_one_epsilon(lo) > t:  # float round-off at the lower end only
        lo = math.nextafter(lo, 0.0)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if kst_replace_one_epsilon(mid) <= t:
            lo = mid
        else:
            hi = mid
    return lo


# ---- output perturbation of full-batch GD --------------------------------------------------
def output_gd_sensitivity(G: float, n: int, mu: float, lr: float, T: int) -> float:
    """L2 sensitivity (replace-one) of theta_T of T projected full-batch GD steps (derived below).

    mu > 0 (F mu-strongly convex, beta-smooth, lr <= 2/(beta + mu)):
        Delta_T = (2 lr G / n) sum_{s<T} (1 - lr mu)^s = (2 G / (n mu)) (1 - (1 - lr mu)^T) <= 2G/(n mu)
    mu = 0 (convex, lr <= 2/beta, GD non-expansive):
        Delta_T = 2 lr G T / n
    Each step injects at most (lr/n) ||grad l(theta; z) - grad l(theta; z')|| <= 2 lr G / n and
    the GD map contracts by 1 - lr mu (C^2 loss: its Jacobian I - lr H has norm
    max(|1 - lr mu|, |1 - lr beta|) = 1 - lr mu when lr <= 2/(beta + mu)); the projection is
    non-expansive. The step condition involves beta, which this function does not take: the
    caller checks it. Because beta >= mu, it implies lr mu <= 1, which is checked here.
    """
    g = positive("G", G)
    n_int = integer("n", n, 1)
    m = non_negative("mu", mu)
    eta = positive("lr", lr)
    t = integer("T", T, 1)
    if m == 0.0:
        return 2.0 * eta * g * t / n_int
    c = eta * m
    if c > 1.0 + 1e-12:
        raise ValueError(f"lr * mu must be <= 1 (implied by lr <= 2/(beta + mu)), got {c:g}")
    shrink = 1.0 if c >= 1.0 else -math.expm1(t * math.log1p(-c))  # 1 - (1 - lr mu)^T, no cancellation
    return 2.0 * g / (n_int * m) * shrink


def zzmw_sensitivity(G: float, n: int, alpha: float, beta: float) -> float:
    """[S2] Theorem 17.4 (quoting ZZMW 2017): Delta_T <= 5 L (alpha + beta) / (n alpha beta).

    For an L-Lipschitz, beta-smooth, alpha-strongly convex loss and GD with constant step
    eta <= 1/(alpha + beta), for any T. Looser than `output_gd_sensitivity` (which is <= 2L/(n alpha));
    recorded for comparison only.
    """
    return (5.0 * positive("G", G) * (positive("alpha", alpha) + positive("beta", beta))
            / (integer("n", n, 1) * alpha * beta))
