"""One-hidden-layer perceptron with a logistic output: the MLP of papers 000 and 003
(docs/methods/conventions.md, The MLP).

Network (per row x in R^d, labels y in {-1, +1}):

    z = W1 x + b1            (h,)   pre-activation, W1 in R^{h x d}
    a = act(z)               (h,)   act = tanh by default
    u = w2 . a + b2                 output score (`decision_function`)
    l = log(1 + exp(-y u))          data loss, np.logaddexp(0, -y u)

Papers 000 (§7) and 003 (§6) say "one hidden layer whose size equals the input layer", so `hidden`
defaults to d; they do not name the activation. We use tanh (option `activation`, also "softplus"):
it is smooth, so the Hessian that PIDP-SGD and the Hessian tests need exists everywhere (ReLU would
make it undefined on the kinks). The loss is not convex (`convex = False`) and not globally
Lipschitz (`lipschitz = None`): gradient methods must clip per-example gradients
(docs/methods/conventions.md, The MLP).

Flat parameters theta = [W1 (h x d, row-major), b1 (h), w2 (h), b2 (1)], so
n_params = h d + 2 h + 1 (= d^2 + 2d + 1 at the default width; Adult d = 105 -> 11,236).

Notation used in the docstrings below, per example i (arrays carry a leading n axis):
s_i = dl/du = -y_i expit(-y_i u_i), q_i = d2l/du2 = y_i^2 expit(y_i u_i) expit(-y_i u_i),
delta_i = dl/dz_i = s_i (w2 * act'(z_i)) (backprop). The per-example gradient is
[delta_i x_i^T, delta_i, s_i a_i, s_i].
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from scipy.special import expit

from dpbench.core.jit import jit_enabled
from dpbench.core.registry import Param

from . import mlp_kernels
from .base import Model, clip_factors, model
from .linear import L2


def _as_f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _tanh(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tanh z, 1 - tanh^2 z); overwrites Z (hot path: avoids (n, h) temporaries)."""
    A = np.tanh(Z, out=Z)
    D1 = np.multiply(A, A)
    np.subtract(1.0, D1, out=D1)
    return A, D1


def _tanh_d2(A: np.ndarray, D1: np.ndarray) -> np.ndarray:
    """tanh'' = -2 tanh tanh'."""
    D2 = np.multiply(A, D1)
    D2 *= -2.0
    return D2


def _softplus(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log(1 + e^z), expit(z)); overwrites Z."""
    A = np.logaddexp(0.0, Z)
    return A, expit(Z, out=Z)


def _softplus_d2(A: np.ndarray, D1: np.ndarray) -> np.ndarray:
    """softplus'' = expit(z)(1 - expit(z))."""
    D2 = np.subtract(1.0, D1)
    D2 *= D1
    return D2


#: activation name -> (f: Z -> (act(z), act'(z)) overwriting Z, g: (act, act') -> act''); all smooth.
ACTIVATIONS = {"tanh": (_tanh, _tanh_d2), "softplus": (_softplus, _softplus_d2)}
#: activation name -> code of the compiled backward pass (`mlp_kernels.mlp_rows`)
_ACTIVATION_CODES = {"tanh": mlp_kernels.TANH, "softplus": mlp_kernels.SOFTPLUS}


@model(description="one hidden layer (width `hidden`, None = n_features), smooth activation "
                   f"({' | '.join(ACTIVATIONS)}), logistic output; non-convex",
       citation="paper 000 (Kang et al., PIDP-SGD) §7; paper 003 (Kang et al., input perturbation) §6")
class MLP(Model):
    """One hidden layer (width `hidden`, default n_features), smooth activation, logistic output.

    `init`: Glorot/Xavier-uniform weights (Glorot & Bengio 2010), W1 ~ U(+-sqrt(6/(d+h))),
    w2 ~ U(+-sqrt(6/(h+1))), zero biases -- the Keras default for Dense layers, which papers
    000 and 003 most likely used; they do not state it.

    Dense Hessian only when n_params <= `max_hessian_params` (6000 -> a 6000 x 6000 float64
    matrix is 288 MB, plus a bounded chunk buffer); above that `data_hessian` raises and callers
    must use `hvp`, which is exact and O(n (h d)) time, O(n h) memory.
    """

    name = "mlp"
    task = "classification"
    convex = False
    lipschitz = None
    smoothness = None
    #: largest n_params for which `data_hessian` builds the dense (m, m) matrix (288 MB at 6000).
    max_hessian_params: int = 6000
    #: rows of the (chunk, m) Jacobian buffer used by `data_hessian` are capped at this many floats.
    _hessian_chunk_floats: int = 1 << 22

    def __init__(self, n_features: int,
                 hidden: Annotated[int | None, Param("hidden width (None: n_features)", minimum=1)] = None,
                 activation: Annotated[str, Param("hidden activation (smooth, so Hessians exist)",
                                                  choices=tuple(ACTIVATIONS))] = "tanh",
                 l2: Annotated[float, L2] = 1e-4):
        super().__init__(n_features, l2=l2)
        self.hidden = self.n_features if hidden is None else int(hidden)  # range checked by `models.make`
        self.activation = activation
        self._act, self._act_d2 = ACTIVATIONS[activation]

    # ---- layout -----------------------------------------------------------------------------
    @property
    def n_params(self) -> int:
        h, d = self.hidden, self.n_features
        return h * d + 2 * h + 1

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """theta -> (W1 (h, d) view, b1 (h,), w2 (h,), b2 float)."""
        theta = _as_f64(theta)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must have shape ({self.n_params},), got {theta.shape}")
        h, d = self.hidden, self.n_features
        hd = h * d
        return theta[:hd].reshape(h, d), theta[hd:hd + h], theta[hd + h:hd + 2 * h], float(theta[-1])

    def pack(self, W1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: float) -> np.ndarray:
        """Inverse of `unpack`."""
        return np.concatenate([np.ravel(W1), np.ravel(b1), np.ravel(w2), [float(b2)]])

    def init(self, rng: np.random.Generator) -> np.ndarray:
        """Glorot-uniform W1 and w2, zero b1 and b2 (see class docstring)."""
        h, d = self.hidden, self.n_features
        lim1 = np.sqrt(6.0 / (d + h))
        lim2 = np.sqrt(6.0 / (h + 1))
        W1 = rng.uniform(-lim1, lim1, size=(h, d))
        w2 = rng.uniform(-lim2, lim2, size=h)
        return self.pack(W1, np.zeros(h), w2, 0.0)

    def describe(self) -> dict:
        return {**super().describe(), "hidden": self.hidden, "activation": self.activation}

    # ---- forward / backward -----------------------------------------------------------------
    def _forward(self, theta: np.ndarray, X: np.ndarray):
        """(w2, A, D1, u): activations act(z), act'(z) (n, h) and outputs u (n,)."""
        W1, b1, w2, b2 = self.unpack(theta)
        Z = X @ W1.T
        Z += b1
        A, D1 = self._act(Z)  # Z is overwritten
        u = A @ w2
        u += b2
        return w2, A, D1, u

    def _backward(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray):
        """(A, s, delta): hidden activations, s = dl/du = -y expit(-y u), delta = dl/dz (n, h)."""
        return self._backward_from(self._forward(theta, X), y)[:3]

    @staticmethod
    def _backward_from(forward, y: np.ndarray):
        """(A, s, delta, u) from `_forward`'s output (its D1 buffer becomes delta)."""
        w2, A, delta, u = forward
        s = -y * expit(-y * u)
        delta *= w2  # D1 buffer reused: delta = s * w2 * act'(z)
        delta *= s[:, None]
        return A, s, delta, u

    def _compiled(self) -> bool:
        """True when `_rows` (the compiled backward pass) replaces the numpy passes (DPBENCH_JIT, numba)."""
        return self.activation in _ACTIVATION_CODES and jit_enabled()

    #: rows per block of `_rows`: Z, A and delta of a block (1024 x h floats) stay in L2 between the passes
    #: (measured on Adult, n = 27,000, h = 105, one thread: 58 ms unblocked, 41 ms at 512-1024 rows, 45 at 4096)
    _row_block: int = 1024

    def _rows(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, clip_norm: float):
        """(gradient SUM over rows (m,), outputs u (n,), gradient norms (n,) or empty), block of rows by
        block: the forward GEMM and the activation in numpy, then `mlp_kernels.mlp_rows` (every elementwise
        step and the b1, w2, b2 blocks in one pass per row), then delta^T X for W1, accumulated. clip_norm
        > 0: each row's gradient clipped to that norm first (c_i delta_i, c_i s_i); 0: no clipping. The
        numpy twin is `_backward` + `_mean_grad` (unclipped) and the einsum code of `clipped_grad_sum`."""
        W1, b1, w2, b2 = self.unpack(theta)
        n, h, d = X.shape[0], self.hidden, self.n_features
        rows = min(n, self._row_block)
        clip = clip_norm > 0.0
        act = _ACTIVATION_CODES[self.activation]
        y = np.ascontiguousarray(y)
        u, s = np.empty(n), np.empty(n)
        norms = np.empty(n if clip else 0)
        gW1, gb1, gw2, gb2 = np.zeros((h, d)), np.zeros(h), np.zeros(h), 0.0
        block_b1, block_w2, block_W1 = np.empty(h), np.empty(h), np.empty((h, d))
        Z_buffer, D_buffer = np.empty((rows, h)), np.empty((rows, h))
        for a in range(0, n, rows):
            b = min(n, a + rows)
            Xb = X[a:b]
            Z = np.matmul(Xb, W1.T, out=Z_buffer[:b - a])
            Z += b1
            if act == mlp_kernels.TANH:
                A = np.tanh(Z, out=Z)
                D = D_buffer[:b - a]  # becomes delta
            else:
                A, D = self._act(Z)  # D: the Z buffer, now act'(z), becomes delta
            xx = mlp_kernels.row_sq_norms(Xb) if clip else norms  # unread without clipping (norms is empty then)
            gb2 += mlp_kernels.mlp_rows(A, D, act, w2, b2, y[a:b], xx, clip_norm,
                                        u[a:b], s[a:b], norms[a:b], block_b1, block_w2)
            gb1 += block_b1
            gw2 += block_w2
            gW1 += np.matmul(D.T, Xb, out=block_W1)
        return self.pack(gW1, gb1, gw2, gb2), u, norms

    def decision_function(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Output score u = w2 . act(W1 x + b1) + b2 (pre-sigmoid), one per row."""
        return self._forward(theta, _as_f64(X))[-1]

    def per_example_losses(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """log(1 + exp(-y u)) via np.logaddexp(0, -y u)."""
        return self._losses_from(self.decision_function(theta, X), _as_f64(y))

    @staticmethod
    def _losses_from(u: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.logaddexp(0.0, -y * u)

    def per_example_grads(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(n, m) rows [delta_i x_i^T (row-major), delta_i, s_i a_i, s_i]; vectorised, no loop."""
        X, y = _as_f64(X), _as_f64(y)
        A, s, delta = self._backward(theta, X, y)
        n = X.shape[0]
        G = np.empty((n, self.n_params))
        h, d = self.hidden, self.n_features
        hd = h * d
        np.multiply(delta[:, :, None], X[:, None, :], out=G[:, :hd].reshape(n, h, d))
        G[:, hd:hd + h] = delta
        G[:, hd + h:hd + 2 * h] = s[:, None] * A
        G[:, -1] = s
        return G

    def data_grad(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Backprop of the mean loss: (1/n)[delta^T X, sum delta, A^T s, sum s]; no (n, m) matrix."""
        X, y = _as_f64(X), _as_f64(y)
        if self._compiled():
            return self._rows(theta, X, y, 0.0)[0] / X.shape[0]
        A, s, delta = self._backward(theta, X, y)
        return self._mean_grad(X, A, s, delta)

    def _mean_grad(self, X: np.ndarray, A: np.ndarray, s: np.ndarray, delta: np.ndarray) -> np.ndarray:
        return self.pack(delta.T @ X, delta.sum(axis=0), A.T @ s, s.sum()) / X.shape[0]

    def loss_and_grad(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """`loss` and `grad` from one forward pass: the two calls' numbers, bit for bit on the numpy path
        (DPBENCH_JIT=0); on the compiled path (`_rows`) the loss comes from the kernel's outputs u, equal to
        `loss` up to rounding."""
        X, y = _as_f64(X), _as_f64(y)
        if self._compiled():
            gsum, u, _ = self._rows(theta, X, y, 0.0)
            return float(np.mean(self._losses_from(u, y))) + self.reg(theta), gsum / X.shape[0] + self.reg_grad(theta)
        A, s, delta, u = self._backward_from(self._forward(theta, X), y)
        value = float(np.mean(self._losses_from(u, y))) + self.reg(theta)
        return value, self._mean_grad(X, A, s, delta) + self.reg_grad(theta)

    def clipped_grad_sum(
        self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, clip_norm: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """sum_i c_i g_i, c_i = min(1, C/||g_i||), without forming the (n, m) matrix.

        ||g_i||^2 = ||delta_i||^2 ||x_i||^2 (outer product delta_i x_i^T) + ||delta_i||^2 (b1)
        + s_i^2 ||a_i||^2 (w2) + s_i^2 (b2); then the clipped sum is
        [(c delta)^T X, sum c delta, A^T (c s), sum c s] (Goodfellow 2015's per-example-norm trick).
        Returns (sum (m,), pre-clip norms (n,)); agrees with `Model.clipped_grad_sum`.
        """
        X, y = _as_f64(X), _as_f64(y)
        if self._compiled():
            clip_factors(np.ones(1), clip_norm)  # the same check of clip_norm
            gsum, _, norms = self._rows(theta, X, y, float(clip_norm))
            return gsum, norms
        A, s, delta = self._backward(theta, X, y)
        dd = np.einsum("ij,ij->i", delta, delta)
        xx = mlp_kernels.row_sq_norms(X)
        aa = np.einsum("ij,ij->i", A, A)
        norms = np.sqrt(dd * (xx + 1.0) + s * s * (aa + 1.0))
        c = clip_factors(norms, clip_norm)
        cdelta = delta
        cdelta *= c[:, None]  # in place: delta is not used again
        cs = c * s
        return self.pack(cdelta.T @ X, cdelta.sum(axis=0), A.T @ cs, cs.sum()), norms

    # ---- second order -----------------------------------------------------------------------
    def data_hvp(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Exact Hessian-vector product of the mean data loss by Pearlmutter's R-operator.

        With v = [V1, vb1, vw2, vb2] and R{.} the directional derivative along v
        (forward-over-reverse, Pearlmutter 1994):
          R{z} = V1 x + vb1,  R{a} = act'(z) R{z},  R{u} = w2 . R{a} + vw2 . a + vb2,
          R{s} = q R{u},      R{dl/da} = R{s} w2 + s vw2,
          R{delta} = R{dl/da} act'(z) + s w2 act''(z) R{z},
        and H v = (1/n)[R{delta}^T X, sum R{delta}, A^T R{s} + R{a}^T s, sum R{s}].
        Cost O(n h d) time, O(n h) memory.
        """
        X, y = _as_f64(X), _as_f64(y)
        w2, A, D1, u = self._forward(theta, X)
        D2 = self._act_d2(A, D1)
        V1, vb1, vw2, vb2 = self.unpack(v)
        my = y * u
        s = -y * expit(-my)
        q = y * y * expit(my) * expit(-my)
        Rz = X @ V1.T
        Rz += vb1
        Ra = D1 * Rz
        Ru = Ra @ w2 + A @ vw2 + vb2
        Rs = q * Ru
        # R{delta} = act' (Rs w2 + s vw2) + s w2 act'' Rz, in place (buffers are not reused after).
        D2 *= Rz
        D2 *= w2
        D2 *= s[:, None]
        Rdelta = np.multiply(D1, w2, out=Rz)
        Rdelta *= Rs[:, None]
        D1 *= vw2
        D1 *= s[:, None]
        Rdelta += D1
        Rdelta += D2
        n = X.shape[0]
        return self.pack(Rdelta.T @ X, Rdelta.sum(axis=0), A.T @ Rs + Ra.T @ s, Rs.sum()) / n

    def data_hessian(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Exact dense (m, m) Hessian of the mean data loss; m <= `max_hessian_params`.

        H = (1/n) sum_i [ q_i J_i^T J_i + s_i grad^2 u_i ], J_i = grad_theta u_i
          = [g_i x_i^T, g_i, a_i, 1] with g_i = w2 * act'(z_i).
        The Gauss-Newton part is accumulated as (sqrt(q) J)^T (sqrt(q) J) over row chunks (q >= 0);
        grad^2 u_i is sparse: per hidden unit j it couples only (W1[j,:], b1[j]) among themselves,
        with weight w2_j act''(z_ij) [x_i; 1][x_i; 1]^T, and with w2_j, with weight
        act'(z_ij) [x_i; 1]. Cost O(n m^2) for the first part, O(n h d^2) for the second.
        """
        m = self.n_params
        if m > self.max_hessian_params:
            raise ValueError(
                f"mlp has {m} parameters > max_hessian_params={self.max_hessian_params} "
                f"(a dense Hessian would need {m * m * 8 / 1e6:.0f} MB); use hvp instead")
        X, y = _as_f64(X), _as_f64(y)
        n = X.shape[0]
        h, d = self.hidden, self.n_features
        hd = h * d
        w2, A, D1, u = self._forward(theta, X)
        D2 = self._act_d2(A, D1)
        my = y * u
        s = -y * expit(-my)
        q = y * y * expit(my) * expit(-my)

        H = np.zeros((m, m))
        # Gauss-Newton part, chunked so the Jacobian buffer stays small.
        chunk = max(1, self._hessian_chunk_floats // m)
        J = np.empty((min(chunk, n), m))
        for start in range(0, n, chunk):
            sl = slice(start, min(start + chunk, n))
            k = sl.stop - sl.start
            Jc = J[:k]
            r = np.sqrt(q[sl])
            g = (w2 * D1[sl]) * r[:, None]
            np.multiply(g[:, :, None], X[sl, None, :], out=Jc[:, :hd].reshape(k, h, d))
            Jc[:, hd:hd + h] = g
            Jc[:, hd + h:hd + 2 * h] = A[sl] * r[:, None]
            Jc[:, -1] = r
            H += Jc.T @ Jc

        # Second-order part s_i grad^2 u_i (block-sparse, see docstring).
        C = s[:, None] * D2 * w2  # (n, h): weight of [x;1][x;1]^T for unit j
        E = s[:, None] * D1  # (n, h): weight of [x;1] in the (W1[j,:]/b1[j], w2[j]) block
        j = np.arange(h)
        # W1[j,:] x W1[j,:]: sum_i C_ij x_i x_i^T, built as (C ⊗ X)^T X in chunks.
        chunk2 = max(1, self._hessian_chunk_floats // max(hd, 1))
        B = np.zeros((hd, d))
        for start in range(0, n, chunk2):
            sl = slice(start, min(start + chunk2, n))
            k = sl.stop - sl.start
            B += (C[sl, :, None] * X[sl, None, :]).reshape(k, hd).T @ X[sl]
        B = B.reshape(h, d, d)
        for jj in range(h):  # loop over hidden units (not examples): h diagonal (d, d) blocks
            H[jj * d:(jj + 1) * d, jj * d:(jj + 1) * d] += B[jj]
        # W1[j,:] x b1[j] and its transpose; b1[j] x b1[j].
        CX = C.T @ X  # (h, d)
        w1_idx = j[:, None] * d + np.arange(d)[None, :]
        b1_idx = hd + j
        w2_idx = hd + h + j
        H[w1_idx, b1_idx[:, None]] += CX
        H[b1_idx[:, None], w1_idx] += CX
        H[b1_idx, b1_idx] += C.sum(axis=0)
        # (W1[j,:], b1[j]) x w2[j] cross terms.
        EX = E.T @ X
        H[w1_idx, w2_idx[:, None]] += EX
        H[w2_idx[:, None], w1_idx] += EX
        esum = E.sum(axis=0)
        H[b1_idx, w2_idx] += esum
        H[w2_idx, b1_idx] += esum
        H /= n
        return 0.5 * (H + H.T)
