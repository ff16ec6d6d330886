"""Linear models: L2-regularised logistic regression and ridge (squared-loss) regression.

theta in R^d is the weight vector; there is no separate bias because the preprocessed data carry
an intercept feature (docs/methods/conventions.md, Preprocessing). Everything is O(n d) per call: the (n, d) matrix of
per-example gradients is only formed by `per_example_grads`, never by the gradient, the
Hessian-vector product or the clipped gradient sum.

Both models are generalised linear: the data loss of row i is phi(z_i; y_i) with z_i = <theta, x_i>,
so the per-example gradient is phi'(z_i) x_i (norm |phi'(z_i)| ||x_i||) and the per-example
Hessian phi''(z_i) x_i x_i^T. `_GLM` implements every method from (phi, phi', phi'').
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from scipy.special import expit

from dpbench.core.registry import Param

from .base import Model, clip_factors, model

L2 = Param("L2 regularisation weight of (l2/2)||theta||^2 in the reference objective", minimum=0)


def _as_f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


class _GLM(Model):
    """Shared machinery for losses of the form phi(<theta, x>; y)."""

    # ---- the scalar link: to implement ------------------------------------------------------
    def _phi(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _dphi(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _d2phi(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # ---- Model API -------------------------------------------------------------------------
    @property
    def n_params(self) -> int:
        return self.n_features

    def init(self, rng: np.random.Generator) -> np.ndarray:
        """theta = 0 (the loss is convex, any start works; 0 is the usual choice). `rng` is unused."""
        return np.zeros(self.n_features)

    def decision_function(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """z = X theta: the margin (logistic) or the prediction (ridge)."""
        return _as_f64(X) @ _as_f64(theta)

    def per_example_losses(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self._phi(self.decision_function(theta, X), _as_f64(y))

    def per_example_grads(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(n, d) matrix with rows phi'(z_i) x_i."""
        X = _as_f64(X)
        s = self._dphi(X @ _as_f64(theta), _as_f64(y))
        return s[:, None] * X

    def data_grad(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(1/n) X^T s with s_i = phi'(z_i)."""
        X = _as_f64(X)
        s = self._dphi(X @ _as_f64(theta), _as_f64(y))
        return X.T @ s / X.shape[0]

    def data_hvp(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Exact (1/n) X^T (w * (X v)) with w_i = phi''(z_i)."""
        X = _as_f64(X)
        w = self._d2phi(X @ _as_f64(theta), _as_f64(y))
        return X.T @ (w * (X @ _as_f64(v))) / X.shape[0]

    def data_hessian(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Exact (1/n) X^T diag(w) X with w_i = phi''(z_i); (d, d), O(n d^2)."""
        X = _as_f64(X)
        w = self._d2phi(X @ _as_f64(theta), _as_f64(y))
        H = X.T @ (w[:, None] * X) / X.shape[0]
        return 0.5 * (H + H.T)

    def clipped_grad_sum(
        self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, clip_norm: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """sum_i c_i phi'(z_i) x_i with c_i = min(1, C / (|phi'(z_i)| ||x_i||)), in O(n d).

        Per-example norm ||phi'(z_i) x_i|| = |phi'(z_i)| ||x_i||, so the clipped sum is the single
        product X^T (c * s); the (n, d) matrix is never formed. Returns (sum, pre-clip norms).
        """
        X = _as_f64(X)
        s = self._dphi(X @ _as_f64(theta), _as_f64(y))
        norms = np.abs(s) * np.sqrt(np.einsum("ij,ij->i", X, X))
        return X.T @ (clip_factors(norms, clip_norm) * s), norms


@model(description="L2-regularised logistic regression, log(1+exp(-y theta.x)) + (l2/2)||theta||^2; "
                   "no separate bias (data carry an intercept feature)",
       citation="paper 000 (Kang et al., PIDP-SGD) §7; paper 003 (Kang et al., input "
                "perturbation) §6; paper 004 (Wang et al., ICML 2020) §6",
       linear=True)
class LogisticRegression(_GLM):
    """L2-regularised logistic regression (docs/methods/conventions.md).

    Data loss l(theta; x, y) = log(1 + exp(-y <theta, x>)), y in {-1, +1}, computed as
    np.logaddexp(0, -m) with margin m = y <theta, x> (no overflow). With phi(z) = l:
    phi'(z) = -y expit(-m), phi''(z) = y^2 expit(m) expit(-m) <= 1/4.

    Constants for rows with ||x|| <= 1 (docs/methods/conventions.md, Preprocessing): the per-example
    data gradient has norm expit(-m) ||x|| <= 1 (`lipschitz` G = 1) and its Hessian is
    expit(m) expit(-m) x x^T <= (1/4) x x^T (`smoothness` beta_s = 1/4). With the L2 term and ||theta|| <= r:
    G = 1 + l2 r, beta_s = 1/4 + l2, strong convexity mu = l2.

    Default l2 = 1e-4: the reference objective L_ref (docs/methods/conventions.md, Optimality gap)
    must be strictly convex with an attained minimum, which fails for l2 = 0 on (nearly) separable data (L* -> 0 only as
    ||theta|| -> infinity). Set l2 = 0 only on data known to be non-separable.
    """

    name = "logreg"
    task = "classification"
    convex = True
    lipschitz = 1.0
    smoothness = 0.25

    def __init__(self, n_features: int, l2: Annotated[float, L2] = 1e-4):
        super().__init__(n_features, l2=l2)

    def _phi(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.logaddexp(0.0, -y * z)

    def _dphi(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return -y * expit(-y * z)

    def _d2phi(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        m = y * z
        return y * y * expit(m) * expit(-m)


@model(description="ridge regression, (theta.x - y)^2 (no 1/2, as in [S4]) + (l2/2)||theta||^2",
       citation="[S4] Wang, Xiao, Devadas, Xu, DP-SCO with heavy-tailed data, ICML 2020, §1 and §6",
       linear=True)
class RidgeRegression(_GLM):
    """Ridge regression with the squared loss of [S4] (Wang, Xiao, Devadas, Xu, ICML 2020).

    Data loss l(theta; x, y) = (<theta, x> - y)^2 -- *without* a factor 1/2, exactly as [S4] §1
    writes it ("the linear squared loss l(w, x, y) = (w^T x - y)^2"). Keeping the paper's scaling
    matters because [S4]'s algorithms act on the gradient coordinates themselves (Alg. 3 needs the
    range [a, b] of E grad_j l, Alg. 4 the second-moment bound v of grad_j l): per-example gradient
    2 (<theta, x> - y) x, Hessian 2 x x^T. Model L2 term (l2/2)||theta||^2 with default l2 = 1e-3
    ([S4] §6 says "ridge" and does not give lambda).

    The gradient is not globally bounded (`lipschitz` = None; that is the point of the
    heavy-tailed setting); `smoothness` = 2 holds for rows with ||x|| <= 1 (beta_s = 2 max ||x||^2
    in general).
    """

    name = "ridge"
    task = "regression"
    convex = True
    lipschitz = None
    smoothness = 2.0

    def __init__(self, n_features: int, l2: Annotated[float, L2] = 1e-3):
        super().__init__(n_features, l2=l2)

    def _phi(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        r = z - y
        return r * r

    def _dphi(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return 2.0 * (z - y)

    def _d2phi(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.full(np.shape(z), 2.0)
