"""Compiled (numba) step loops for small-batch SGD on linear models, and when to use them.

Batch-1 SGD is bound by per-call overhead in numpy: each step is about ten numpy calls of
0.5-1 us on 105-vectors (`dpbench bench`: 69,000 steps/s for DP-SGD batch 1 on Adult), while
the arithmetic is two passes over d numbers. The kernels here run whole stretches of steps in
one compiled call, on random draws made beforehand by the caller with numpy, so each has a
numpy twin that consumes the *same* draws:

  kernel                  numpy twin (the reference)             used by
  glm_sgd_steps           `sgd._numpy_steps` (Model methods)     SGD, DP-SGD (any batch), Bolt-on
  pidp_glm_steps          `pidp._step_function` (logreg path)    PIDP-SGD, logistic regression
  pidp_mlp_steps          `pidp._step_function` (MLP path)       PIDP-SGD, the MLP

The two paths agree to ~1e-15 per step: the step kernels are compiled with
fastmath={"reassoc", "contract"} (no other fast-math flag: NaN, inf and signed zeros keep their
IEEE meaning), so LLVM may reorder the additions of a dot product and contract a*b + c into an FMA.
Without it each dot product over d = 105 features is one chain of dependent additions (~4 cycles
each); with it the reductions are vectorised. Measured on Adult, one thread: DP-SGD logreg batch
256 3.3M -> 5.8M examples/s, batch 1 614k -> 739k steps/s; PIDP-SGD MLP batch-1 steps 64k -> 131k
steps/s noise-free, 35k -> 54k noisy. Tests check 1e-12 on whole runs.

Models: logistic regression and ridge (the GLMs of `models.linear`, loss codes below) with the
plain L2 regulariser; the tanh/softplus MLP for PIDP. Anything else -- another model, a
subclass overriding `reg_grad`, DP-LSSGD's gradient transform -- takes the numpy path.

`DPBENCH_JIT=0` in the environment forces the numpy path everywhere (same results, slower);
without numba installed the numpy path is taken too. Compiled code is cached on disk next to
this module (numba `cache=True`), so a process pays the ~1-2 s compile only once per machine.
"""

from __future__ import annotations

import math

import numpy as np

from dpbench.core import jit
from dpbench.core.jit import HAVE_NUMBA, njit  # noqa: F401  (HAVE_NUMBA: re-exported for callers)
from dpbench.models.base import Model
from dpbench.models.linear import LogisticRegression, RidgeRegression
from dpbench.models.mlp import MLP

#: loss codes of the GLM kernels: phi'(z; y) for logistic regression and ridge (models.linear)
LOGISTIC, SQUARED = 0, 1
#: activation codes of the MLP kernel (models.mlp.ACTIVATIONS)
ACTIVATION_CODES = {"tanh": 0, "softplus": 1}
#: pre-drawn random numbers per chunk of steps (floats): bounds the memory of noise draws
CHUNK_FLOATS = 1 << 17


def jit_enabled() -> bool:
    """`dpbench.core.jit.jit_enabled` (looked up at call time, so tests can set DPBENCH_JIT)."""
    return jit.jit_enabled()


def _plain_reg(model: Model) -> bool:
    return type(model).reg_grad is Model.reg_grad


def glm_loss_code(model: Model) -> int | None:
    """The kernel's loss code for a linear model with the plain L2 term, else None (numpy path)."""
    if not _plain_reg(model):
        return None
    if type(model) is LogisticRegression:
        return LOGISTIC
    if type(model) is RidgeRegression:
        return SQUARED
    return None


def mlp_activation_code(model: Model) -> int | None:
    """The MLP kernel's activation code, else None (numpy path)."""
    if type(model) is MLP and _plain_reg(model):
        return ACTIVATION_CODES.get(model.activation)
    return None


def steps_per_chunk(n_params: int, cap: int = 1024) -> int:
    """Steps whose Gaussian draws (steps x n_params) fit in CHUNK_FLOATS: 1..cap, from m only."""
    return max(1, min(cap, CHUNK_FLOATS // max(1, n_params)))


def row_norms(X: np.ndarray) -> np.ndarray:
    """||x_i||_2 per row, computed as `Model.clipped_grad_sum` computes it."""
    return np.sqrt(np.einsum("ij,ij->i", X, X))


# ---------------------------------------------------------------------------------------------
# kernels (numba nopython; plain Python without numba, used only by tests then)
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _dphi(loss: int, z: float, y: float) -> float:
    """phi'(z; y): logistic -y expit(-y z) (as `pidp._step_function` computes it), squared 2 (z - y)."""
    if loss == LOGISTIC:
        marg = y * z
        if marg < 700.0:
            return -y / (1.0 + math.exp(marg))
        return -y * math.exp(-marg)
    return 2.0 * (z - y)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def glm_sgd_steps(theta, X, y, xnorm, offsets, rows, noise, noise_std, lrs, loss, clip_norm, expected_batch,
                  l2, radius, t0, t1):  # pragma: no cover - compiled
    """Steps t0..t1-1 of `sgd.run_sgd` for a GLM, theta updated in place.

    Step t uses rows[offsets[t]:offsets[t+1]]; g = (sum_i c_i phi'(z_i) x_i + noise_std * noise[t])
    / expected_batch + l2 theta with c_i = min(1, C / max(|phi'(z_i)| ||x_i||, 1e-300)) (c_i = 1
    when clip_norm <= 0: no clipping); theta <- Proj_radius(theta - lrs[t] g) (radius <= 0: none).
    noise has shape (steps, m) or (0, m) for no noise.
    """
    m = theta.shape[0]
    gsum = np.empty(m)
    has_noise = noise.shape[0] > 0 and noise_std > 0.0
    for t in range(t0, t1):
        for j in range(m):
            gsum[j] = 0.0
        for p in range(offsets[t], offsets[t + 1]):
            i = rows[p]
            z = 0.0
            for j in range(m):
                z += X[i, j] * theta[j]
            s = _dphi(loss, z, y[i])
            if clip_norm > 0.0:
                norm = abs(s) * xnorm[i]
                c = clip_norm / max(norm, 1e-300)
                if c < 1.0:
                    s = c * s
            for j in range(m):
                gsum[j] += s * X[i, j]
        lr = lrs[t]
        sq = 0.0
        for j in range(m):
            g = gsum[j]
            if has_noise:
                g = g + noise_std * noise[t, j]
            v = theta[j] - lr * (g / expected_batch + l2 * theta[j])
            theta[j] = v
            sq += v * v
        if radius > 0.0:
            norm = math.sqrt(sq)
            if norm > radius:
                f = radius / norm
                for j in range(m):
                    theta[j] = theta[j] * f


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def pidp_glm_steps(theta, X, y, xnorm, rows, free, noise, noise_scale, lr, shrink, clip_norm):  # pragma: no cover
    """Batch-1 steps of PIDP-SGD for logistic regression (lines 11-14 of [S0] Alg. 1), in place.

    theta <- theta * (1 - lr l2) - lr c phi'(z_i) x_i, minus noise_scale (= lr sigma) times the
    next row of standard normal `noise` when the step is noisy (free[k] False); c clips to clip_norm.
    """
    m = theta.shape[0]
    j = 0
    for k in range(rows.shape[0]):
        i = rows[k]
        z = 0.0
        for p in range(m):
            z += X[i, p] * theta[p]
        coef = _dphi(LOGISTIC, z, y[i])
        gn = abs(coef) * xnorm[i]
        if gn > clip_norm:
            coef *= clip_norm / gn
        a = lr * coef
        if free[k]:
            for p in range(m):
                theta[p] = theta[p] * shrink - a * X[i, p]
        else:
            for p in range(m):
                theta[p] = (theta[p] * shrink - a * X[i, p]) - noise_scale * noise[j, p]
            j += 1


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def pidp_mlp_steps(theta, X, y, xx, rows, free, noise, noise_scale, lr, shrink, clip_norm, hidden,
                   act):  # pragma: no cover
    """Batch-1 steps of PIDP-SGD for the one-hidden-layer MLP (theta = [W1 (h x d), b1, w2, b2]).

    Mirrors the MLP path of `pidp._step_function`: z = W1 x + b1, a = act(z), u = a.w2 + b2,
    s = dl/du, delta = s w2 act'(z); gradient norm^2 = ||delta||^2 (||x||^2 + 1) + s^2 (||a||^2 + 1);
    clipped, scaled by lr, subtracted after the shrink, then noise_scale times the noise row if the
    step is noisy.
    """
    h = hidden
    d = X.shape[1]
    hd = h * d
    m = theta.shape[0]
    a = np.empty(h)
    dl = np.empty(h)
    delta = np.empty(h)
    j = 0
    for k in range(rows.shape[0]):
        i = rows[k]
        u = 0.0
        for r in range(h):
            z = 0.0
            base = r * d
            for c in range(d):
                z += theta[base + c] * X[i, c]
            z += theta[hd + r]
            if act == 0:
                t = math.tanh(z)
                a[r] = t
                dl[r] = 1.0 - t * t
            else:
                a[r] = max(z, 0.0) + math.log1p(math.exp(-abs(z)))
                dl[r] = 1.0 / (1.0 + math.exp(-z)) if z >= 0.0 else math.exp(z) / (1.0 + math.exp(z))
            u += a[r] * theta[hd + h + r]
        yi = y[i]
        marg = yi * (u + theta[m - 1])
        s = -yi / (1.0 + math.exp(marg)) if marg < 700.0 else -yi * math.exp(-marg)
        dd = 0.0
        aa = 0.0
        for r in range(h):
            delta[r] = theta[hd + h + r] * dl[r] * s
            dd += delta[r] * delta[r]
            aa += a[r] * a[r]
        norm = math.sqrt(dd * (xx[i] + 1.0) + s * s * (aa + 1.0))
        scale = lr * (clip_norm / norm if norm > clip_norm else 1.0)
        for r in range(h):
            base = r * d
            dr = delta[r]
            for c in range(d):
                theta[base + c] = theta[base + c] * shrink - (dr * X[i, c]) * scale
            theta[hd + r] = theta[hd + r] * shrink - delta[r] * scale
            theta[hd + h + r] = theta[hd + h + r] * shrink - (a[r] * s) * scale
        theta[m - 1] = theta[m - 1] * shrink - s * scale
        if not free[k]:
            for p in range(m):
                theta[p] -= noise_scale * noise[j, p]
            j += 1
