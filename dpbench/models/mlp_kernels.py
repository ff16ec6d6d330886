"""Compiled row loop of the MLP's backward pass (`MLP.clipped_grad_sum`, `data_grad`, `loss_and_grad`).

After the two BLAS calls that carry the FLOPs (Z = X W1^T, and later delta^T X), the rest of a
backward pass is a dozen elementwise numpy passes over (n, h) arrays -- act'(z), u = a.w2 + b2,
s = dl/du, delta = s w2 act'(z), three row norms, the clip factors, c delta, the column sums --
each a full trip through memory (2.4 ms per pass at n = 27,000, h = 105). `mlp_rows` does them
in one pass per row while the row is in cache. It computes exactly the quantities of the numpy
code in `models.mlp` (its twin; the model docstring has the notation), in another order of
additions, so the two agree to rounding (tests: 1e-12 relative).

Activation codes: 0 = tanh (A holds tanh z, act' = 1 - a^2 is computed here), 1 = softplus (D
holds expit z = act' on entry). The loss is the logistic loss l = log(1 + exp(-y u)).
"""

from __future__ import annotations

import math

import numpy as np

from dpbench.core.jit import njit

TANH, SOFTPLUS = 0, 1


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract", "nsz"})
def mlp_rows(A, D, act, w2, b2, y, xx, clip_norm, u, s, norms, gb1, gw2):  # pragma: no cover - compiled
    """One pass over the rows of A (n, h); D (n, h) is overwritten with delta (times c_i when clipping).

    Per row i: u_i = a_i.w2 + b2, s_i = -y_i expit(-y_i u_i), delta_i = s_i w2 * act'(z_i). With
    clip_norm > 0 (xx = ||x_i||^2): norms_i = sqrt(||delta_i||^2 (xx_i + 1) + s_i^2 (||a_i||^2 + 1))
    (the per-example gradient norm of `MLP.clipped_grad_sum`), c_i = min(1, C / max(norm, 1e-300))
    (`models.base.clip_factors`), delta_i and s_i scaled by c_i. Writes u (unscaled outputs) and
    s (scaled when clipping); accumulates gb1 += delta_i and gw2 += s_i a_i (gb1, gw2 zeroed here);
    returns sum_i s_i. The caller adds delta^T X (one GEMM) for the W1 block.
    """
    n, h = A.shape
    for j in range(h):
        gb1[j] = 0.0
        gw2[j] = 0.0
    ssum = 0.0
    for i in range(n):
        ui = b2
        aa = 0.0
        for j in range(h):
            a = A[i, j]
            ui += a * w2[j]
            aa += a * a
        u[i] = ui
        yi = y[i]
        marg = yi * ui
        si = -yi / (1.0 + math.exp(marg)) if marg < 700.0 else -yi * math.exp(-marg)
        dd = 0.0
        for j in range(h):
            dj = (1.0 - A[i, j] * A[i, j]) if act == TANH else D[i, j]
            dj = dj * w2[j] * si
            D[i, j] = dj
            dd += dj * dj
        if clip_norm > 0.0:
            norm = math.sqrt(dd * (xx[i] + 1.0) + si * si * (aa + 1.0))
            norms[i] = norm
            c = min(1.0, clip_norm / max(norm, 1e-300))
            if c < 1.0:
                for j in range(h):
                    D[i, j] *= c
                si *= c
        s[i] = si
        ssum += si
        for j in range(h):
            gb1[j] += D[i, j]
            gw2[j] += si * A[i, j]
    return ssum


def row_sq_norms(X: np.ndarray) -> np.ndarray:
    """||x_i||^2 per row (as `MLP.clipped_grad_sum`'s numpy twin computes it)."""
    return np.einsum("ij,ij->i", X, X)
