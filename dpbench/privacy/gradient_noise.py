"""Closed-form noise scales of the two gradient-perturbation baselines of [S3] (pure maths).

* :func:`bst14_sigma` -- Bassily, Smith, Thakurta (FOCS 2014), Algorithm 1 ("A_noise-GD", noisy
  SGD with one example per step); [S3] (paper 003) Table 1 row "[4] Gradient
  Perturbation", noise bound O(G^2 n^2 log(n/delta) log(1/delta) / eps^2).
* :func:`wyx17_classical_sigma` -- Wang, Ye, Xu (NeurIPS 2017), full-batch gradient descent
  "without DP-SVRG"; [S3] Table 1 row "[43] (traditional)", noise bound
  O(G^2 T log(1/delta) / (n^2 eps^2)).

DP-GD in dpbench is calibrated *exactly* instead (T adaptively composed Gaussian mechanisms are
mu-GDP with mu = sqrt(T) * Delta / s, Dong, Roth, Su 2019; docs/accounting.md, Full-batch Gaussian
composition):
``dpbench.privacy.gaussian_composition_sigma(eps, delta, T, sensitivity=2 C / n)``; that function
is not re-derived here. The closed form below is only the optional "paper" calibration, whose
actual epsilon is then reported by ``gaussian_epsilon``.
"""

from __future__ import annotations

import math

from dpbench.privacy.checks import integer, positive, unit_interval

__all__ = ["BST14_CONSTANT", "bst14_sigma", "bst14_sigma_sum", "wyx17_classical_sigma"]

#: the constant of BST14 Alg. 1 line 1, sigma^2 = 32 G^2 n^2 log(n/delta) log(1/delta)/eps^2 (not checked
#: against the BST14 text here; [S3] Table 1 confirms only the order G^2 n^2 log(n/delta) log(1/delta)/eps^2).
BST14_CONSTANT = 32.0


def _check(G: float, n: int, epsilon: float, delta: float) -> tuple[float, int, float, float]:
    return positive("G", G), integer("n", n, 1), positive("epsilon", epsilon), unit_interval("delta", delta)


def bst14_sigma_sum(G: float, n: int, epsilon: float, delta: float) -> float:
    """Std sigma of BST14 Alg. 1 in its *sum* form (objective sum_i l(theta; d_i)).

    BST14 Alg. 1 line 1 (the constant: `BST14_CONSTANT`):
    sigma^2 = 32 G^2 n^2 log(n/delta) log(1/delta) / eps^2, the noise b_t ~ N(0, sigma^2 I_p)
    added to n * grad l(theta_t; d) (L2 sensitivity 2 n G under replace-one).
    [S3] Table 1, row "[4]": noise bound O(G^2 n^2 log(n/delta) log(1/delta) / eps^2).
    """
    G, n, eps, delta = _check(G, n, epsilon, delta)
    return n * G * math.sqrt(BST14_CONSTANT * math.log(n / delta) * math.log(1.0 / delta)) / eps


def bst14_sigma(G: float, n: int, epsilon: float, delta: float) -> float:
    """Std of BST14's Gaussian on the *averaged* (one-example) gradient.

    sigma' = sqrt(32 G^2 log(n/delta) log(1/delta)) / eps = :func:`bst14_sigma_sum` / n.
    Derivation: the sum-form step n grad l(theta; d) + b_t equals n (grad l(theta; d) + b_t / n),
    and b_t / n ~ N(0, (sigma/n)^2 I); the factor n moves into the step size (eta' = n eta).
    Independent of n apart from log(n/delta): about 5.66 G sqrt(log(n/delta) log(1/delta)) / eps,
    i.e. 905 G at eps = 0.1, n = 45,222, delta = 1e-5.
    Bassily, Smith, Thakurta 2014, Alg. 1; [S3] Table 1 (noise bound of [4]).
    """
    G, n, eps, delta = _check(G, n, epsilon, delta)
    return G * math.sqrt(BST14_CONSTANT * math.log(n / delta) * math.log(1.0 / delta)) / eps


def wyx17_classical_sigma(G: float, T: int, n: int, epsilon: float, delta: float, c: float = 1.0) -> float:
    """Wang-Ye-Xu 2017 full-batch DP-GD noise std s with s^2 = c G^2 T log(1/delta) / (n^2 eps^2).

    [S3] Table 1, row "[43] (traditional)": O(G^2 T log(1/delta) / (n^2 eps^2)).
    The constant c is not given by [S3]; the exact GDP calibration
    at T = 10, eps = 1, delta = 1e-5 (replace-one, Delta = 2G/n) corresponds to c ~ 4.8, so c = 1
    (the default) is *under*-noised there: use it only as the "paper" calibration and report what
    ``gaussian_epsilon(s, delta, 2G/n, T)`` says it buys.
    """
    G, n, eps, delta = _check(G, n, epsilon, delta)
    T = integer("T", T, 1)
    cc = positive("c", c)
    return math.sqrt(cc * T * math.log(1.0 / delta)) * G / (n * eps)
