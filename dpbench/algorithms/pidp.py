"""PIDP-SGD ("Performance Improving DP-SGD"; Kang, Li, Liu, Wang, paper 000 = [S0], Algorithm 1).

What it does ([S0] Alg. 1, eq. (11), Theorems 4-5, Remarks 5-7; docs/methods/pidp.md, Algorithm)
-------------------------------------------------------------------------------------------------
T = R * T_local single-example SGD steps in R global rounds. At the start of round r, with
reference point theta_g (the current iterate):

  line 4   H = Hessian of L_ref at theta_g, damped by zeta (see "Hessian" and "Damping" below),
           factorised once for the round (Cholesky, or eigh for `damping: floor`).
  line 6   i_t ~ Uniform[n] for every step of the round (one index per step, with replacement).
  line 7   c_o = H^-1 grad l(theta_g; z_i) / n  (eq. (11); the gradient is taken at the round's
           theta_g, as in the proof of Thm 5), then c_o += E * sign(c_o) with the Theorem-4 bound
           E = (2 beta_s G + C_H G^2 / zeta) / (zeta^2 n^2).
  line 8-9 c_t = 2 c_o + N(0, sigma_c^2 I_m)  (factor 2: replace-one, Remark 6).
  line 9   noisy if any |c_t[i]| >= A/(kappa - 1), kappa = e^eps1, A = 2 r kappa delta1;
  line 10  else noise-free iff ln(A / (A - (kappa-1) sign(c_t[i]) c_t[i])) <= 2 eps1 for all i.
           `paper_noise_free` implements these two tests literally; they are equivalent to the
           closed form "noise-free <=> max_i |c_t[i]| <= tau" (`pidp_threshold` derives it),
           tau = 2 r delta1 (1 + e^-eps1) (`pidp_threshold`). The fit evaluates both on every
           c_t (for the MLP on the part of c_t that decides, see `_MlpGaussNewton`) and raises
           if they ever disagree away from floating-point ties at tau.
  line 11  noise-free: theta_l <- theta_l - lr (g + grad reg(theta_l))
  line 14  noisy:      theta_l <- theta_l - lr (g + N(0, sigma^2 I) + grad reg(theta_l))
           with g = clip(grad l(theta_l; z_i), C) (see "Clipping"); theta_g <- theta_l at the
           end of the round (line 17); the final iterate is returned (line 19).

All decisions of a round depend only on theta_g, so they are computed for the whole round
before its step loop: the round's gradients at theta_g are solved against the round's factor in
a few batched solves (never an m x m inverse, never one solve per step) and the round's sigma_c
noise is drawn in one call per chunk of rows. The step loop itself is batch-size-1 SGD with
per-model fast paths (logistic regression, the MLP) that never touch an (n, m) array.

Noise scales and budget split ([S0] Theorem 5, §7)
--------------------------------------------------
eps1 = `eps1_fraction` * eps (default 3/4, [S0] §7), eps2 = eps - eps1; delta1 =
`delta1_fraction` * delta (default 1/2; [S0] gives no split), delta2 = delta - delta1.
* sigma (noisy steps): Thm 5 says sigma >= c G sqrt(T log(1/delta1)) / (n eps1) with c unknown;
  like DP-SGD it is calibrated numerically for a Poisson-subsampled Gaussian with q = 1/n, T
  steps and budget (eps1, delta1) (`calibration: rdp | pld`), or set from the closed form with
  c = `paper_c` (`calibration: paper`) -- dpsgd.dpsgd_noise_multiplier, batch size 1; the step
  noise std is z * C. This pretends every step is noisy, so it over-counts.
* sigma_c (contributions): Thm 5 / its proof, `dpbench.privacy.pidp_contribution_sigma`:
  sigma_c = c' G R sqrt(log(1.25 R / delta2)) / (n zeta eps2), c' = 2 sqrt 2 (classical Gaussian
  mechanism with sensitivity 2G/(n zeta) at (eps2/R, delta2/R) per round).
G = `clip_norm` everywhere (the contribution gradients are clipped too, so the sensitivity
2G/(n zeta) that sigma_c assumes holds at least for the gradient part); beta_s = `smoothness`
(default 1/4) and C_H = `hessian_lipschitz` (default 0.1) are the logistic-regression bounds of
[S0] Remark 1 and only enter E (for the MLP they are not valid bounds; E
is then just a number the paper's recipe adds).

Hessian (`hessian`, `hessian_samples`)
--------------------------------------
* `auto` (default): the exact Hessian of L_ref (`model.hessian`, the l2 term included) on all n
  rows for models with a dense Hessian (logistic / ridge regression: m = d, O(n d^2) per round);
  the Gauss-Newton matrix on a random subsample for the MLP.
* `exact`: `model.hessian` on all rows (the MLP only while n_params <= max_hessian_params; its
  Hessian is indefinite, so use `damping: floor`).
* `ggn`: H ~ (1/s) sum_{i in S} q_i J_i^T J_i + l2 I on a uniform subsample S of s =
  `hessian_samples` rows (0: all), J_i = d u_i / d theta the Jacobian of the network output and
  q_i = d^2 l / d u^2 = sigmoid(y u) sigmoid(-y u) >= 0, so H is PSD. For the MLP (m = d^2 + 2d
  + 1, 11,236 on Adult) J_i = [g_i x_i^T, g_i, a_i, 1] with g_i = w2 * act'(z_i): the per-example
  gradient is s_i J_i (s_i = dl/du = -y sigmoid(-y u)), so J_i = grad_i / s_i, but the code
  never forms either -- it uses the Kronecker structure: with w_i = q_i / s, B = diag(sqrt(w)) J
  (s x m),
    (B B^T)_ij = sqrt(w_i w_j) [(g_i . g_j)(x_i . x_j + 1) + a_i . a_j + 1]    (s x s, O(s^2 (h+d)))
    (B grad_t)_i = sqrt(w_i) gamma_t [(g_i . delta_t)(x_i . x_t + 1) + s_t (a_i . a_t + 1)],
  and H^-1 v = v / c0 + B^T M B v (Woodbury: `damping: add` gives c0 = l2 + zeta,
  M = -(c0 I + B B^T)^-1 / c0, ONE s x s Cholesky per round; `floor` uses one s x s eigh).
  For a logistic/ridge model the GGN equals the exact Hessian, so `ggn` there means "exact
  Hessian on a subsample of s rows" (dense solve, m = d).
The ledger records which Hessian was used (`hessian`). The MLP path reads the network's
internals (`MLP._forward`, `_backward`, `_act`, `unpack` layout) instead of per_example_grads,
so it never holds a (rows, m) matrix; its lines 9-10 are evaluated lazily but exactly (cheap
coordinates first, see `_MlpGaussNewton`).

Damping (`damping`, `zeta`)
---------------------------
The proof of Thm 5 needs ||H^-1||_2 <= 1/zeta, i.e. lambda_min(H) >= zeta, but [S0] assumes
||H||_2 >= zeta (the *largest* eigenvalue; docs/methods/pidp.md, Privacy, item 4). Two readings:
* `add` (default; [S0] Remark 5 "add a small zeta to the diagonal"): H + zeta I, always (not only
  when the paper's ||H||_2 >= zeta test fails, because that test cannot certify the bound). For
  a PSD H (the logistic Hessian, any GGN) lambda_min >= zeta. One Cholesky per round. An
  indefinite H + zeta I (exact MLP Hessian) raises: use `floor` or `ggn`.
* `floor`: V diag(max(lambda_i, zeta)) V^T; changes H only where needed,
  works for indefinite H; one eigh per round (m x m dense, s x s for the GGN path).
zeta defaults to 0.1 ([S0] gives none; docs/methods/pidp.md works its examples at 1 and 0.1).

Clipping
--------
[S0] has no clipping: it assumes a G-Lipschitz loss. Here every per-example data-loss gradient (in
the steps and in the contributions) is clipped to `clip_norm` = G, which the MLP needs (its
gradients grow with the weights; docs/methods/conventions.md, The MLP). For logistic regression with
||x|| <= 1 and clip_norm >= 1 the data-loss gradient has norm <= 1, so clipping is a no-op; the
regulariser's gradient l2 theta is never clipped -- it is data independent and added after the
noise, as in DP-SGD.

Other choices where the paper is silent or ambiguous
----------------------------------------------------
* "+E" adds a scalar to a vector: E is added to the magnitudes, c_o + E sign(c_o) with
  sign(0) read as +1 (the conservative reading).
* Line 8 draws b^(c) inside the step loop: fresh noise for every step (as written), although
  the proof charges the contribution computation only once per round (docs/methods/pidp.md, Privacy, item 5).
* Line 4 takes H at the round's theta_g; the proof of Thm 5 writes H at theta~ and the gradient
  at theta_r^(g). We use theta_g for both (line 4).
* r (`radius`) is "the radius of the bounded parameter space" (footnote 5) but Algorithm 1 never
  projects onto it; neither do we. r only enters the threshold tau (linearly). Default r = 1, the
  "honest" order of magnitude; a truthful coordinate bound is larger (Adult, logreg: theta* has
  max|theta_i| = 7.0, ||theta*|| = 18.4; noisy PIDP iterates reach max|theta_i| ~ 18), but with
  r = 20 tau is still ~1e-3 << sigma_c ~ 0.15 and no step is noise-free. The ledger records the
  largest |theta_i| and ||theta||_2 seen at round boundaries so a run can be checked against r.
* R*T_local = T: T = round(epochs n) (or `steps`) and the R rounds get floor(T/R) or ceil(T/R)
  steps (the first T mod R rounds are one longer), so PIDP-SGD and DP-SGD compare at equal T.
* Default R = 10 rounds; lr = 0.05 (batch-1 SGD). [S0] gives neither (T "by cross-validation").
* Sampling: one uniform index per step, with replacement (line 6), whereas the accountant number
  in the ledger is for Poisson sampling at q = 1/n (the standard DP-SGD analysis).
* [S0]'s k/n (Thm 6: the probability that a step "meets the noise") is the *noisy* fraction;
  the ledger reports both `noise_free_fraction` and `noisy_fraction`.
* RNG: theta_0 = model.init(rng), then rng.spawn(4) -> (indices, Hessian subsamples,
  contribution noise, step noise); all T indices are drawn in one call, so the same seed gives
  the same index sequence whatever radius or epsilon is used (the audit and the radius->inf /
  radius->0 tests rely on this).

Privacy (docs/methods/pidp.md, Privacy)
---------------------------------------
The claim is always "paper-only": the noise-free steps are deterministic functions of the
record, so the paper's (eps, delta) is not a valid DP guarantee (for any model). The ledger's
`epsilon_spent` is what the accountant gives for the noisy part *as if every step were noisy*
(z, q = 1/n, T, delta1); it says nothing about the noise-free steps.

Checked against [S0] Alg. 1, Thms 4-5, Remarks 5-7, §7
----------------------------------------------------
The constants and noise scales (c' = 2.83 = 2 sqrt 2, E, the 3/4 split), the two tests (line 10's
bound 2 eps1 = eps1 + ln kappa with kappa = e^eps1), the gradient at the round's theta_g and the
factor 2 follow the paper. The proof puts H at theta~ while line 4 (followed here) puts it at
theta^(g); Remark 5 adds zeta, `damping: floor` floors the eigenvalues instead (both offered);
`noise_free_fraction` is 1 - k/n in the paper's notation (Thm 6).

Not on the privatiser path: the paper's mechanism (noise-free steps, a Hessian-based perturbation)
is reproduced as written, and its claim does not hold (`paper-only` always); its steps, the noise-free
ones included, are reported and held to the ledger by the release check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Callable

import numpy as np
from scipy import linalg
from scipy.special import expit

from dpbench.algorithms import kernels, releases
from dpbench.algorithms.base import MAX_EPOCHS, MAX_STEPS, Fit, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.dpsgd import CALIBRATIONS, dpsgd_noise_multiplier
from dpbench.algorithms.sgd import stretch_end, training_loss_trace
from dpbench.core.gaussian import standard_normal
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import Param
from dpbench.models.base import Model, clip_factors
from dpbench.models.linear import LogisticRegression
from dpbench.models.mlp import MLP
from dpbench.privacy import dpsgd_epsilon_report, pidp_contribution_sigma

DAMPINGS = ("add", "floor")
HESSIANS = ("auto", "exact", "ggn")
#: c' of Theorem 5 (proof: 2 sqrt(2 log(1.25 R / delta2)) G R / (n zeta eps2)); the paper rounds it to 2.83
PAPER_C_PRIME = 2.0 * math.sqrt(2.0)  # sigma_c's constant c' in Thm 5 (recorded in the ledger)
#: rows x columns of the largest temporary (gradient / noise / contribution block), in floats
_CHUNK_FLOATS = 1 << 21
#: a literal-vs-closed-form disagreement is tolerated only when max|c_t| is this close to tau (ties)
_TIE_REL_TOL = 1e-9


# =============================================================================================
# constants of Theorems 4 and 5 and the decision of lines 9-10
# =============================================================================================
def influence_error_bound(smoothness: float, hessian_lipschitz: float, lipschitz: float, zeta: float, n: int) -> float:
    """E of [S0] Theorem 4: (2 beta_s G + C_H G^2 / zeta) / (zeta^2 n^2)."""
    return (2.0 * smoothness * lipschitz + hessian_lipschitz * lipschitz**2 / zeta) / (zeta**2 * n**2)


def pidp_threshold(radius: float, epsilon1: float, delta1: float) -> float:
    """tau = 2 r delta1 (1 + e^-eps1): lines 9-10 of [S0] Alg. 1 say "noise-free" iff max|c_t| <= tau.

    Derivation: with kappa = e^eps1 and A = 2 r kappa delta1, line 10 holds
    for coordinate i iff A / (A - (kappa-1)|c_i|) <= kappa^2 iff |c_i| <= A (kappa+1)/kappa^2 = tau,
    and line 9's threshold A/(kappa-1) exceeds tau (kappa^2 > kappa^2 - 1), so line 10 binds.
    """
    return 2.0 * radius * delta1 * (1.0 + math.exp(-epsilon1))


def paper_noise_free(c_t: np.ndarray, radius: float, epsilon1: float, delta1: float) -> np.ndarray:
    """Lines 9-10 of [S0] Alg. 1 literally, per row of c_t (1-D: one step; 2-D: one row per step).

    Line 9: noisy ("jump to line 13") if some |[c_t]_i| >= 2 r e^eps1 delta1 / (e^eps1 - 1).
    Line 10: otherwise noise-free iff ln(2 r e^eps1 delta1 / (2 r e^eps1 delta1 - (e^eps1 - 1)
    sign([c_t]_i) [c_t]_i)) <= 2 eps1 for all i. Returns True where the step is noise-free.
    """
    c = np.asarray(c_t, dtype=float)
    kappa = math.exp(epsilon1)
    kappa_m1 = math.expm1(epsilon1)
    A = 2.0 * radius * kappa * delta1
    signed = np.sign(c) * c
    line9_noisy = np.any(signed >= A / kappa_m1, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        line10_ok = np.all(np.log(A / (A - kappa_m1 * signed)) <= 2.0 * epsilon1, axis=-1)
    return ~line9_noisy & line10_ok


def _decide(c_t: np.ndarray, radius: float, epsilon1: float, delta1: float, tau: float) -> np.ndarray:
    """Paper's tests on the rows of c_t, checked against the closed form max|c_t| <= tau."""
    literal = paper_noise_free(c_t, radius, epsilon1, delta1)
    top = np.max(np.abs(c_t), axis=-1)
    closed = top <= tau
    bad = literal != closed
    if bad.any() and np.any(np.abs(top[bad] - tau) > _TIE_REL_TOL * tau):
        raise AssertionError("PIDP lines 9-10 disagree with the closed form max|c_t| <= tau away from a tie: "
                             f"max|c_t| = {top[bad][:3]}, tau = {tau}")
    return literal


# =============================================================================================
# influence operators: H_zeta^-1 applied to clipped per-example gradients at theta_g
# =============================================================================================
def _clipped_rows(model: Model, theta: np.ndarray, X: np.ndarray, y: np.ndarray, clip_norm: float) -> np.ndarray:
    G = model.per_example_grads(theta, X, y)
    G *= clip_factors(np.linalg.norm(G, axis=1), clip_norm)[:, None]
    return G


def _rows_per_chunk(width: int) -> int:
    return max(1, _CHUNK_FLOATS // max(1, width))


class _DenseInfluence:
    """Dense m x m H (logistic/ridge: m = d; small MLPs), factorised once: Cholesky or eigh."""

    def __init__(self, model: Model, X: np.ndarray, y: np.ndarray, theta: np.ndarray, H: np.ndarray, *,
                 zeta: float, damping: str, clip_norm: float, kind: str):
        self.model, self.X, self.y, self.theta, self.clip_norm, self.kind = model, X, y, theta, clip_norm, kind
        H = 0.5 * (H + H.T)
        if damping == "add":
            try:
                self._chol = linalg.cho_factor(H + zeta * np.eye(H.shape[0]), lower=True, check_finite=False)
            except linalg.LinAlgError:
                raise ValueError("PIDP-SGD: H + zeta I is not positive definite (the Hessian is indefinite, e.g. "
                                 "the exact MLP Hessian); use damping: floor or hessian: ggn") from None
            self._eig = None
        elif damping == "floor":
            lam, V = np.linalg.eigh(H)
            self._eig = (V, 1.0 / np.maximum(lam, zeta))
            self._chol = None
        else:
            raise ValueError(f"unknown damping {damping!r}; choose one of {', '.join(DAMPINGS)}")

    def solve(self, G: np.ndarray) -> np.ndarray:
        """(k, m) rows -> (k, m) rows H_zeta^-1 g (one batched solve)."""
        if self._chol is not None:
            return linalg.cho_solve(self._chol, G.T, check_finite=False).T
        V, inv = self._eig
        return ((G @ V) * inv) @ V.T

    def full(self, idx: np.ndarray) -> np.ndarray:
        """H_zeta^-1 clip(grad l(theta_g; z_i)) for the rows idx, (k, m) (not divided by n)."""
        out = np.empty((len(idx), self.model.n_params))
        step = _rows_per_chunk(self.model.n_params)
        for a in range(0, len(idx), step):
            rows = idx[a:a + step]
            out[a:a + len(rows)] = self.solve(_clipped_rows(self.model, self.theta, self.X[rows], self.y[rows],
                                                            self.clip_norm))
        return out

    def decide(self, idx: np.ndarray, c_rng: np.random.Generator, ctx: "_DecisionContext") -> np.ndarray:
        out = np.empty(len(idx), dtype=bool)
        m = self.model.n_params
        step = _rows_per_chunk(m)
        for a in range(0, len(idx), step):
            rows = idx[a:a + step]
            c_o = self.full(rows)
            c_o /= ctx.n
            out[a:a + len(rows)] = ctx.decide(c_o, standard_normal(c_rng, np.empty((len(rows), m))))
        return out


class _MlpGaussNewton:
    """Gauss-Newton H = B^T B + l2 I (+ damping) of the MLP on s rows, solved by Woodbury.

    B = diag(sqrt(q_i / s)) J (s x m) is never formed (see the module docstring): B B^T and
    B grad_t come from the Kronecker structure of J_i = [g_i x_i^T, g_i, a_i, 1]. Then
    H_zeta^-1 v = v / c0 + B^T M (B v) with M = -(c0 I + B B^T)^-1 / c0 (`add`, c0 = l2 + zeta; one
    Cholesky) or M = U diag(psi) U^T from eigh(B B^T) (`floor`, c0 = max(l2, zeta)).

    The decision is evaluated lazily but exactly (it is the paper's test on the full m-vector):
    1. Cheap coordinates: the b1, w2, b2 blocks (2h + 1 of the m coordinates) of B^T M B g_t are
       P_t^T Z with Z = M sqrt(w) [G_S, A_S, 1] precomputed per round (one batched solve), O(s (2h+1))
       per step. A step with a cheap coordinate over tau is noisy whatever the W1 block is (with
       honest constants sigma_c >> tau, so this decides every step).
    2. For the other steps the W1 block's noise xi is drawn (h d normals) and Vt = sqrt(w) M P_t
       computed (O(s^2)); then (a) the exact c_t at the 8 W1 coordinates with the largest |xi|
       (O(8 s)) is tested: one failing coordinate makes the step noisy; (b) if
       2(||W1 block of c_o||_F + E) + sigma_c max|xi| <= tau the step is noise-free (the Frobenius
       norm costs O(s^2), see `_w1_frobenius`); (c) else the whole W1 block is computed
       (O(s h d)) and tested.
    Drawing the W1 block's noise only for steps that reach stage 2 does not change the
    distribution (the noise coordinates are i.i.d.). Measured on Adult (1 epoch, R = 10,
    s = 1024, one BLAS thread): whole fit 5.8 s at r = 1 (stage 1 decides every step; DP-SGD
    batch 1: 5.2 s), ~11-12 s when every step reaches stage 2 (r = 1e4: 1.4% or 100% noise-free).
    """

    #: W1 coordinates (largest |noise| first) tried as witnesses of a noisy step before the full block
    _WITNESSES = 8
    #: False: skip stages 2(a)-(b) and compute every W1 block (same random draws; tests use it)
    _shortcuts = True

    def __init__(self, model: MLP, X: np.ndarray, y: np.ndarray, theta: np.ndarray, rows: np.ndarray, *,
                 zeta: float, damping: str, clip_norm: float, kind: str):
        self.model, self.X, self.y, self.theta, self.clip_norm, self.kind = model, X, y, theta, clip_norm, kind
        h, d = model.hidden, model.n_features
        self.h, self.d, self.hd = h, d, h * d
        Xs, ys = np.asarray(X[rows], dtype=float), np.asarray(y[rows], dtype=float)
        s = Xs.shape[0]
        w2, A, D1, u = model._forward(theta, Xs)
        my = ys * u
        q = expit(my) * expit(-my)
        r = np.sqrt(q / s)
        Gs = D1 * w2  # g_i = w2 * act'(z_i), (s, h)
        GG = Gs @ Gs.T
        self.Kgx = GG * (Xs @ Xs.T)  # (g_i . g_j)(x_i . x_j): Gram matrix of the W1 blocks of J
        K0 = self.Kgx + GG
        K0 += A @ A.T
        K0 += 1.0
        K0 *= r[:, None]
        K0 *= r[None, :]
        K0 = 0.5 * (K0 + K0.T)
        l2 = model.l2
        if damping == "add":
            self.c0 = l2 + zeta
            self._chol = linalg.cho_factor(K0 + self.c0 * np.eye(s), lower=True, check_finite=False)
            self._eig = None
        elif damping == "floor":
            mu, U = np.linalg.eigh(K0)
            mu = np.maximum(mu, 0.0)
            self.c0 = max(l2, zeta)
            if l2 >= zeta:  # every eigenvalue mu + l2 >= zeta: psi = (1/(mu+l2) - 1/l2)/mu, stably
                psi = -1.0 / (l2 * (mu + l2))
            else:
                lam = np.maximum(mu + l2, zeta)
                psi = np.where(mu + l2 > zeta, (1.0 / lam - 1.0 / self.c0) / np.maximum(mu, 1e-300), 0.0)
            self._eig = (U, psi)
            self._chol = None
        else:
            raise ValueError(f"unknown damping {damping!r}; choose one of {', '.join(DAMPINGS)}")
        self.Xs, self.Gs, self.As, self.r = Xs, Gs, A, r
        self.GsT, self.XsT = np.ascontiguousarray(Gs.T), np.ascontiguousarray(Xs.T)
        self.Z = self.apply_M(r[:, None] * np.hstack([Gs, A, np.ones((s, 1))]))  # (s, 2h+1)

    def apply_M(self, P: np.ndarray) -> np.ndarray:
        if self._chol is not None:
            return linalg.cho_solve(self._chol, P, check_finite=False) * (-1.0 / self.c0)
        U, psi = self._eig
        return U @ (psi[:, None] * (U.T @ P))

    def _grad_parts(self, idx: np.ndarray):
        """Clipped per-example gradient pieces at theta_g: (X_t, A_t, gamma s_t, gamma delta_t)."""
        Xt = np.asarray(self.X[idx], dtype=float)
        yt = np.asarray(self.y[idx], dtype=float)
        A, s, delta = self.model._backward(self.theta, Xt, yt)
        xx = np.einsum("ij,ij->i", Xt, Xt)
        dd = np.einsum("ij,ij->i", delta, delta)
        aa = np.einsum("ij,ij->i", A, A)
        gamma = clip_factors(np.sqrt(dd * (xx + 1.0) + s * s * (aa + 1.0)), self.clip_norm)
        delta *= gamma[:, None]
        return Xt, A, s * gamma, delta

    def _P(self, Xt, At, st, dt) -> np.ndarray:
        """P = B G_t^T (s x k)."""
        P = (self.Gs @ dt.T) * (self.Xs @ Xt.T + 1.0)
        P += (self.As @ At.T + 1.0) * st[None, :]
        P *= self.r[:, None]
        return P

    def _cheap(self, P, At, st, dt) -> np.ndarray:
        """(k, 2h+1) b1, w2, b2 blocks of H^-1 g_t."""
        out = P.T @ self.Z
        h = self.h
        out[:, :h] += dt / self.c0
        out[:, h:2 * h] += At * (st / self.c0)[:, None]
        out[:, 2 * h] += st / self.c0
        return out

    def _vt(self, P: np.ndarray) -> np.ndarray:
        """Vt = sqrt(w) * M P (s x k): B^T Vt[:, t] is the low-rank part of H^-1 g_t."""
        return self.apply_M(P) * self.r[:, None]

    def _w1(self, Vt, Xt, dt) -> np.ndarray:
        """(k, h*d) W1 block of H^-1 g_t: delta_t x_t^T / c0 + sum_i Vt_it g_i x_i^T."""
        k = Vt.shape[1]
        out = ((Vt.T[:, None, :] * self.Gs.T[None, :, :]).reshape(k * self.h, -1) @ self.Xs).reshape(k, self.hd)
        out += (dt[:, :, None] * (Xt / self.c0)[:, None, :]).reshape(k, self.hd)
        return out

    def _w1_frobenius(self, Vt, Xt, dt) -> np.ndarray:
        """Upper bound on ||W1 block of H^-1 g_t||_F, in O(s^2) per row (no h*d work).

        ||D + S||^2 with D = delta x^T / c0, S = sum_i Vt_i g_i x_i^T: ||D||^2 = |delta|^2 |x|^2 / c0^2,
        <D, S> = sum_i Vt_i (delta . g_i)(x . x_i) / c0, ||S||^2 = Vt^T Kgx Vt. A relative 1e-10 of the
        summands' magnitude is added to cover round-off in the (possibly cancelling) sum.
        """
        dd = np.einsum("kh,kh->k", dt, dt) * np.einsum("kd,kd->k", Xt, Xt) / self.c0**2
        ds = np.einsum("sk,sk->k", Vt, (self.Gs @ dt.T) * (self.Xs @ Xt.T)) / self.c0
        ss = np.einsum("sk,sk->k", Vt, self.Kgx @ Vt)
        total = dd + 2.0 * ds + ss
        return np.sqrt(np.maximum(total, 0.0) + 1e-10 * (dd + ss + 2.0 * np.abs(ds)))

    def full(self, idx: np.ndarray) -> np.ndarray:
        """H_zeta^-1 clip(grad l(theta_g; z_i)) for the rows idx, (k, m) in theta's layout."""
        m, hd = self.model.n_params, self.hd
        out = np.empty((len(idx), m))
        step = max(1, _rows_per_chunk(len(self.r) * self.h) // 4)
        for a in range(0, len(idx), step):
            rows = idx[a:a + step]
            Xt, At, st, dt = self._grad_parts(rows)
            P = self._P(Xt, At, st, dt)
            out[a:a + len(rows), hd:] = self._cheap(P, At, st, dt)
            out[a:a + len(rows), :hd] = self._w1(self._vt(P), Xt, dt)
        return out

    def decide(self, idx: np.ndarray, c_rng: np.random.Generator, ctx: "_DecisionContext") -> np.ndarray:
        out = np.empty(len(idx), dtype=bool)
        ncheap = 2 * self.h + 1
        step = _rows_per_chunk(len(self.r) + ncheap)
        for a in range(0, len(idx), step):
            rows = idx[a:a + step]
            Xt, At, st, dt = self._grad_parts(rows)
            P = self._P(Xt, At, st, dt)
            c_o = self._cheap(P, At, st, dt)
            c_o /= ctx.n
            free = ctx.decide(c_o, standard_normal(c_rng, np.empty((len(rows), ncheap))))
            undecided = np.flatnonzero(free)  # all cheap coordinates within tau: the W1 block decides
            wstep = _rows_per_chunk(max(2 * self.hd, len(self.r) * self._WITNESSES))
            cheap_all = ctx.last_c_t
            for b in range(0, len(undecided), wstep):
                u = undecided[b:b + wstep]
                Vt = self._vt(P[:, u])
                xi = standard_normal(c_rng, np.empty((len(u), self.hd)))  # the W1 block's share of b^(c)
                if not self._shortcuts:
                    estep = _rows_per_chunk(len(self.r) * self.h + self.hd)
                    for e in range(0, len(u), estep):
                        ue = u[e:e + estep]
                        w1_t = ctx.contribution(self._w1(Vt[:, e:e + estep], Xt[ue], dt[ue]) / ctx.n,
                                                xi[e:e + estep])
                        free[ue] = ctx.decide_ct(np.hstack([w1_t, cheap_all[ue]]))
                    continue
                # (a) Noisy witnesses: one coordinate failing the tests makes the step noisy, so the
                # exact c_t at the K coordinates with the largest |xi| (O(K s) each) decides most noisy rows.
                K = min(self._WITNESSES, self.hd)
                absxi = np.abs(xi)
                cols = np.argpartition(absxi, self.hd - K, axis=1)[:, self.hd - K:]  # (k, K) largest |xi|
                xi_max = np.take_along_axis(absxi, cols, axis=1).max(axis=1)  # max|xi| is among them
                del absxi
                jj, kk = np.divmod(cols, self.d)
                W = self.GsT[jj]  # (k, K, s): contiguous rows, much faster than gathering columns
                W *= self.XsT[kk]
                val = np.matmul(W, Vt.T[:, :, None])[..., 0]
                val += dt[u[:, None], jj] * Xt[u[:, None], kk] / self.c0
                val /= ctx.n
                witness_ok = ctx.decide_ct(ctx.contribution(val, np.take_along_axis(xi, cols, axis=1)))
                free[u[~witness_ok]] = False
                rest = np.flatnonzero(witness_ok)
                if not len(rest):
                    continue
                # (b) Noise-free certificate: |c_t[i]| <= 2 (|c_o[i]| + E) + sigma_c |xi_i|
                # <= 2 (||W1 block of c_o||_F + E) + sigma_c max|xi|. Where this is <= tau, both tests of
                # lines 9-10 (monotone in |c_t[i]|) pass on every W1 coordinate: the step stays noise-free.
                ur = u[rest]
                bound = 2.0 * (self._w1_frobenius(Vt[:, rest], Xt[ur], dt[ur]) / ctx.n + ctx.E) \
                    + ctx.sigma_c * xi_max[rest]
                exact = rest[~(bound * (1.0 + 1e-12) <= ctx.tau)]
                estep = _rows_per_chunk(len(self.r) * self.h + self.hd)
                for e in range(0, len(exact), estep):  # (c) the whole W1 block, exactly
                    ex = exact[e:e + estep]
                    ue = u[ex]
                    w1_t = ctx.contribution(self._w1(Vt[:, ex], Xt[ue], dt[ue]) / ctx.n, xi[ex])
                    free[ue] = ctx.decide_ct(np.hstack([w1_t, cheap_all[ue]]))
            out[a:a + len(rows)] = free
        return out


@dataclass
class _DecisionContext:
    """Constants of lines 7-10: c_t = 2 (c_o + E sign c_o) + sigma_c xi, then the tests."""

    n: int
    E: float
    sigma_c: float
    radius: float
    epsilon1: float
    delta1: float
    tau: float
    last_c_t: np.ndarray | None = None

    def contribution(self, c_o: np.ndarray, xi: np.ndarray) -> np.ndarray:
        """c_t = 2 (c_o + E sign(c_o)) + sigma_c xi, in place in xi (sign(0) taken as +1)."""
        c = c_o + np.copysign(self.E, c_o)
        xi *= self.sigma_c
        xi += 2.0 * c
        return xi

    def decide_ct(self, c_t: np.ndarray) -> np.ndarray:
        return _decide(c_t, self.radius, self.epsilon1, self.delta1, self.tau)

    def decide(self, c_o: np.ndarray, xi: np.ndarray) -> np.ndarray:
        self.last_c_t = self.contribution(c_o, xi)
        return self.decide_ct(self.last_c_t)


def _influence_operator(problem: Problem, theta: np.ndarray, *, zeta: float, damping: str, hessian: str,
                        hessian_samples: int, clip_norm: float, rng: np.random.Generator | None):
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    if damping not in DAMPINGS:
        raise ValueError(f"unknown damping {damping!r}; choose one of {', '.join(DAMPINGS)}")
    if hessian not in HESSIANS:
        raise ValueError(f"unknown hessian {hessian!r}; choose one of {', '.join(HESSIANS)}")
    is_mlp = isinstance(model, MLP)
    mode = ("ggn" if is_mlp else "exact") if hessian == "auto" else hessian
    if mode == "exact":
        if is_mlp and model.n_params > model.max_hessian_params:
            raise ValueError(f"PIDP-SGD: hessian: exact needs a dense {model.n_params}^2 MLP Hessian "
                             f"(> max_hessian_params={model.max_hessian_params}); use hessian: ggn")
        return _DenseInfluence(model, X, y, theta, model.hessian(theta, X, y), zeta=zeta, damping=damping,
                               clip_norm=clip_norm, kind=f"exact Hessian of L_ref on all {n} rows (dense {damping})")
    s = n if hessian_samples in (0, None) or hessian_samples >= n else int(hessian_samples)
    if s < n:
        if rng is None:
            raise ValueError("a subsampled Hessian needs an rng")
        rows = np.sort(rng.choice(n, size=s, replace=False))
    else:
        rows = np.arange(n)
    if is_mlp:
        return _MlpGaussNewton(model, X, y, theta, rows, zeta=zeta, damping=damping, clip_norm=clip_norm,
                               kind=f"Gauss-Newton (1/s) sum q_i J_i^T J_i + l2 I on s={s} of {n} rows, "
                                    f"Woodbury ({'Cholesky' if damping == 'add' else 'eigh'} of s x s, {damping})")
    if not model.convex:
        raise ValueError(f"hessian: ggn is implemented for the MLP and convex GLMs, not {model.name}")
    return _DenseInfluence(model, X, y, theta, model.hessian(theta, X[rows], y[rows]), zeta=zeta, damping=damping,
                           clip_norm=clip_norm, kind=f"exact Hessian of L_ref (= its Gauss-Newton matrix) on s={s} "
                                                     f"of {n} rows (dense {damping})")


def influence_contributions(problem: Problem, theta: np.ndarray, indices, *, zeta: float, damping: str = "add",
                            hessian: str = "auto", hessian_samples: int = 1024, clip_norm: float = math.inf,
                            rng: np.random.Generator | None = None) -> np.ndarray:
    """c_o of [S0] eq. (11) at theta for the given rows, without E and noise: (k, m).

    c_o = H_zeta^-1 clip(grad l(theta; z_i)) / n ~ theta*_{-i} - theta*, where H is the Hessian of
    L_ref = (1/n) sum l + reg (the same operator the fit uses) and theta*_{-i} minimises
    (1/n) sum_{j != i} l_j + reg (the regulariser's weight is kept: the influence function
    perturbs one data weight w_i from 1 to 0, [S0] proof of Thm 4). clip_norm = inf: no clipping.
    """
    op = _influence_operator(problem, np.asarray(theta, dtype=float), zeta=zeta, damping=damping, hessian=hessian,
                             hessian_samples=hessian_samples, clip_norm=clip_norm, rng=rng)
    return op.full(np.asarray(indices, dtype=np.intp)) / problem.n


# =============================================================================================
# the step loop: batch-1 clipped SGD, noisy or not
# =============================================================================================
def _step_function(model: Model, X: np.ndarray, y: np.ndarray, theta: np.ndarray, lr: float,
                   clip_norm: float) -> Callable[[int, np.ndarray | None], None]:
    """step(i, noise): theta <- theta - lr (clip(grad l(theta; z_i)) + reg_grad(theta)) - noise, in place.

    `noise` is already scaled by lr * sigma (or None: noise-free step). Fast paths for logistic
    regression and the MLP (one row, O(m), no (n, m) array, preallocated buffers); any other
    model goes through `clipped_grad_sum` on a one-row slice.
    """
    plain_reg = type(model).reg_grad is Model.reg_grad
    shrink = 1.0 - lr * model.l2
    ylist = [float(v) for v in y]
    C = float(clip_norm)

    if isinstance(model, LogisticRegression) and plain_reg:
        xnorm = np.sqrt(np.einsum("ij,ij->i", X, X)).tolist()

        def step_lr(i: int, noise: np.ndarray | None) -> None:
            x = X[i]
            yi = ylist[i]
            marg = yi * float(x @ theta)
            coef = -yi / (1.0 + math.exp(marg)) if marg < 700.0 else -yi * math.exp(-marg)
            gn = abs(coef) * xnorm[i]
            if gn > C:
                coef *= C / gn
            np.multiply(theta, shrink, out=theta)
            np.subtract(theta, (lr * coef) * x, out=theta)
            if noise is not None:
                np.subtract(theta, noise, out=theta)

        return step_lr

    if isinstance(model, MLP) and plain_reg:
        h, d = model.hidden, model.n_features
        hd = h * d
        W1 = theta[:hd].reshape(h, d)
        b1 = theta[hd:hd + h]
        w2 = theta[hd + h:hd + 2 * h]
        g = np.empty(model.n_params)
        gW1 = g[:hd].reshape(h, d)
        gb1 = g[hd:hd + h]
        gw2 = g[hd + h:hd + 2 * h]
        zbuf = np.empty(h)
        xx = np.einsum("ij,ij->i", X, X).tolist()
        act = model._act

        def step_mlp(i: int, noise: np.ndarray | None) -> None:
            x = X[i]
            yi = ylist[i]
            np.dot(W1, x, out=zbuf)
            np.add(zbuf, b1, out=zbuf)
            a, d1 = act(zbuf)  # a is zbuf (overwritten), d1 = act'(z)
            marg = yi * (float(a @ w2) + float(theta[-1]))
            s = -yi / (1.0 + math.exp(marg)) if marg < 700.0 else -yi * math.exp(-marg)
            np.multiply(w2, d1, out=gb1)
            np.multiply(gb1, s, out=gb1)  # delta = s w2 act'(z)
            np.multiply(a, s, out=gw2)
            g[-1] = s
            norm = math.sqrt(float(gb1 @ gb1) * (xx[i] + 1.0) + s * s * (float(a @ a) + 1.0))
            scale = lr * (C / norm if norm > C else 1.0)
            np.multiply(gb1[:, None], x[None, :], out=gW1)
            np.multiply(g, scale, out=g)
            np.multiply(theta, shrink, out=theta)
            np.subtract(theta, g, out=theta)
            if noise is not None:
                np.subtract(theta, noise, out=theta)

        return step_mlp

    def step_generic(i: int, noise: np.ndarray | None) -> None:
        gsum, _ = model.clipped_grad_sum(theta, X[i:i + 1], y[i:i + 1], C)
        gsum += model.reg_grad(theta)
        gsum *= lr
        np.subtract(theta, gsum, out=theta)
        if noise is not None:
            np.subtract(theta, noise, out=theta)

    return step_generic


def _compiled_steps(model: Model, X: np.ndarray, y: np.ndarray, theta: np.ndarray, lr: float, clip_norm: float,
                    noise_scale: float) -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """run(rows, free, noise): the steps of `_step_function` for these rows in one compiled call
    (`kernels.pidp_glm_steps` / `pidp_mlp_steps`), theta updated in place; None when the model
    has no compiled loop. `noise` holds the noisy steps' standard normal rows in order; the kernel
    scales them by noise_scale (= lr * sigma) as it goes, the same product `_step_function` gets.
    """
    shrink = 1.0 - lr * model.l2
    C = float(clip_norm)
    if kernels.glm_loss_code(model) == kernels.LOGISTIC:
        xnorm = kernels.row_norms(X)
        return lambda rows, free, noise: kernels.pidp_glm_steps(theta, X, y, xnorm, rows, free, noise, noise_scale,
                                                                lr, shrink, C)
    act = kernels.mlp_activation_code(model)
    if act is not None:
        xx = np.einsum("ij,ij->i", X, X)
        hidden = int(model.hidden)
        return lambda rows, free, noise: kernels.pidp_mlp_steps(theta, X, y, xx, rows, free, noise, noise_scale,
                                                                lr, shrink, C, hidden, act)
    return None


@dataclass
class PidpRun:
    """Result of `run_pidp`: final iterate, per-step decisions and what the ledger needs."""

    theta: np.ndarray
    noise_free: np.ndarray  # (T,) bool, True where lines 9-10 chose the noise-free branch
    round_lengths: list[int]
    hessian_kind: str
    max_abs_theta: float  # max over round boundaries (theta_0 .. theta_R) of max_i |theta_i|
    max_norm_theta: float  # ... and of ||theta||_2
    indices: np.ndarray | None = None  # (T,) sampled rows, when record=True
    trace: list[dict] = field(default_factory=list)


def round_lengths(steps: int, rounds: int) -> list[int]:
    """R lengths summing to T, differing by at most one (the first T mod R rounds are longer)."""
    if rounds > steps:
        raise ValueError(f"rounds={rounds} > T={steps} steps: every round needs at least one step")
    base, extra = divmod(steps, rounds)
    return [base + (1 if r < extra else 0) for r in range(rounds)]


def run_pidp(problem: Problem, rng: np.random.Generator, *, steps: int, rounds: int, lr: float, clip_norm: float,
             sigma: float, sigma_c: float, radius: float, epsilon1: float, delta1: float, E: float, zeta: float,
             damping: str = "add", hessian: str = "auto", hessian_samples: int = 1024, trace_every: int = 0,
             on_trace: Callable[[int, np.ndarray], dict] | None = None, record: bool = False,
             compiled: bool | None = None) -> PidpRun:
    """Algorithm 1 of [S0] with given noise scales (the fit computes them from the budget).

    `compiled`: None runs lines 11-14 in the compiled loops of `kernels` where they exist
    (`kernels.jit_enabled()`), False forces the numpy `_step_function` (same draws, same result
    to ~1e-12). While somebody observes the releases (`releases._observed()`) the numpy path runs
    whatever `compiled` says: the compiled loops cannot report steps. Unobserved, no step is reported
    one by one and all are reported in bulk after the loop (`releases.released_steps`, for a tally).

    Every step t = 1..T is reported (`releases.release`, kind "gradient_sum") with the iterate
    theta_l it was taken at (a copy: theta is updated in place) and the noisy gradient before the
    step size, clip(grad l(theta_l; z_{i_t}), C) + N(0, sigma^2 I) on a noisy step (noise_std =
    sigma) and clip(grad l(theta_l; z_{i_t}), C) alone on a noise-free step (noise_std = 0); weight
    1, clip_norm C, rate 1/n (one index uniformly with replacement per step, reported as
    inclusion probability 1/n). The clipped gradient is recomputed with `model.clipped_grad_sum`
    on the one row and the noise is the step's own draw: observing draws nothing and changes
    nothing. The contributions c_t of lines 7-8 (sigma_c) are not reported: they are not released,
    only the step's noisy/noise-free decision they drive is (visible in noise_std).
    """
    observe = releases._observed()
    use_compiled = not observe and (kernels.jit_enabled() if compiled is None else compiled)
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    X = np.ascontiguousarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    problem = Problem(model=model, X=X, y=y)
    lengths = round_lengths(steps, rounds)
    theta = np.array(model.init(rng), dtype=float)  # line 2 (owned, updated in place)
    m = theta.shape[0]
    idx_rng, hess_rng, c_rng, step_rng = rng.spawn(4)
    indices = idx_rng.integers(0, n, size=steps)  # line 6 for all T steps, one call
    tau = pidp_threshold(radius, epsilon1, delta1)
    ctx = _DecisionContext(n=n, E=E, sigma_c=sigma_c, radius=radius, epsilon1=epsilon1, delta1=delta1, tau=tau)
    noise_scale = lr * sigma
    compiled = _compiled_steps(model, X, y, theta, lr, clip_norm, noise_scale) if use_compiled else None
    step = _step_function(model, X, y, theta, lr, clip_norm) if compiled is None else None
    no_noise = np.empty((0, m))
    noise_free = np.empty(steps, dtype=bool)
    trace: list[dict] = []
    max_abs = float(np.max(np.abs(theta))) if m else 0.0
    max_norm = float(np.linalg.norm(theta))
    kind = ""
    t0 = 0
    loop_chunk = _rows_per_chunk(m)
    noise_buffer = np.empty((min(loop_chunk, steps), m))  # reused: a fresh one page-faults every chunk
    for length in lengths:
        theta_g = theta.copy()  # the round's reference point (line 4)
        op = _influence_operator(problem, theta_g, zeta=zeta, damping=damping, hessian=hessian,
                                 hessian_samples=hessian_samples, clip_norm=clip_norm, rng=hess_rng)
        kind = op.kind
        round_idx = indices[t0:t0 + length]
        free = op.decide(round_idx, c_rng, ctx)  # lines 7-10 for the whole round
        noise_free[t0:t0 + length] = free
        for a in range(0, length, loop_chunk):  # lines 11-14
            rows = round_idx[a:a + loop_chunk]
            fr = free[a:a + loop_chunk]
            noisy = int(len(rows) - np.count_nonzero(fr))
            noise = standard_normal(step_rng, noise_buffer[:noisy]) if noisy else None
            if compiled is not None:  # the same steps in compiled stretches, cut at trace points
                p = j = 0
                while p < len(rows):
                    e = stretch_end(p, t0, len(rows), trace_every)
                    compiled(rows[p:e], fr[p:e], no_noise if noise is None else noise[j:])
                    j += int((e - p) - np.count_nonzero(fr[p:e]))
                    t0 += e - p
                    p = e
                    if trace_every and on_trace is not None and (t0 % trace_every == 0 or t0 == steps):
                        trace.append({"step": t0, **on_trace(t0, theta)})
                continue
            raw = noise.copy() if observe and noise is not None else None  # standard normals, for the releases
            if noise is not None:
                noise *= noise_scale
            j = 0
            for i, is_free in zip(rows.tolist(), fr.tolist()):
                if observe:
                    theta_t = theta.copy()
                    g, _ = model.clipped_grad_sum(theta_t, X[i:i + 1], y[i:i + 1], clip_norm)
                    if is_free:
                        releases.release(t0 + 1, theta_t, g, 0.0, rate=1.0 / n, clip_norm=clip_norm)
                    else:
                        releases.release(t0 + 1, theta_t, g + sigma * raw[j], sigma, rate=1.0 / n,
                                         clip_norm=clip_norm)
                if is_free:
                    step(i, None)
                else:
                    step(i, noise[j])
                    j += 1
                t0 += 1
                if trace_every and on_trace is not None and (t0 % trace_every == 0 or t0 == steps):
                    trace.append({"step": t0, **on_trace(t0, theta)})
        max_abs = max(max_abs, float(np.max(np.abs(theta))))
        max_norm = max(max_norm, float(np.linalg.norm(theta)))
    if not observe:  # no step was reported one by one: all of them in bulk, declared as each would be
        free_steps = int(np.count_nonzero(noise_free))
        releases.released_steps(steps - free_steps, sigma, rate=1.0 / n, clip_norm=clip_norm)
        releases.released_steps(free_steps, 0.0, rate=1.0 / n, clip_norm=clip_norm)
    return PidpRun(theta=theta, noise_free=noise_free, round_lengths=lengths, hessian_kind=kind,
                   max_abs_theta=max_abs, max_norm_theta=max_norm, indices=indices if record else None, trace=trace)


# =============================================================================================
# the registered fit
# =============================================================================================
@dataclass(frozen=True)
class PidpBudget:
    """Budget split and noise scales of one PIDP-SGD fit (what the ledger reports)."""

    epsilon1: float
    epsilon2: float
    delta1: float
    delta2: float
    noise_multiplier: float  # z: step noise std = z * clip_norm
    sigma: float
    sigma_c: float
    tau: float
    E: float


def pidp_budget(privacy: PrivacyTarget, *, n: int, steps: int, rounds: int, clip_norm: float, zeta: float,
                radius: float, eps1_fraction: float, delta1_fraction: float, smoothness: float,
                hessian_lipschitz: float, calibration: str, paper_c: float) -> PidpBudget:
    if privacy.epsilon is None or privacy.delta is None:
        raise ValueError("pidp_sgd is a private algorithm: it needs a target epsilon and delta")
    eps1, eps2 = eps1_fraction * privacy.epsilon, (1.0 - eps1_fraction) * privacy.epsilon
    delta1, delta2 = delta1_fraction * privacy.delta, (1.0 - delta1_fraction) * privacy.delta
    z = dpsgd_noise_multiplier(PrivacyTarget(eps1, delta1), sampling_rate=1.0 / n, steps=steps,
                               calibration=calibration, clip_norm=clip_norm, batch_size=1.0, n=n, paper_c=paper_c)
    return PidpBudget(epsilon1=eps1, epsilon2=eps2, delta1=delta1, delta2=delta2, noise_multiplier=z,
                      sigma=z * clip_norm, sigma_c=pidp_contribution_sigma(clip_norm, rounds, n, zeta, eps2, delta2),
                      tau=pidp_threshold(radius, eps1, delta1),
                      E=influence_error_bound(smoothness, hessian_lipschitz, clip_norm, zeta, n))


@algorithm("pidp_sgd", title="PIDP-SGD: DP-SGD that skips the noise for low-influence samples (claim unsound)",
           citation="Kang, Li, Liu, Wang, Data Heterogeneity Differential Privacy (paper 000, Alg. 1, Thms 4-5)",
           private=True, updates=True)
def fit_pidp_sgd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    epochs: Annotated[float, Param("passes over the data: T = round(epochs * n) batch-1 steps (ignored if "
                                   "steps is set)", minimum=0, exclusive_minimum=True, maximum=MAX_EPOCHS)] = 1.0,
    steps: Annotated[int | None, Param("T directly (overrides epochs)", minimum=1, maximum=MAX_STEPS)] = None,
    rounds: Annotated[int, Param("global rounds R (Hessian recomputed per round); R*T_local = T", minimum=1,
                                 paper="[S0] Alg. 1")] = 10,
    lr: Annotated[float, Param("step size alpha", minimum=0, exclusive_minimum=True,
                               paper="[S0] Alg. 1 lines 11, 14")] = 0.05,
    clip_norm: Annotated[float, Param("per-example clipping norm C = the Lipschitz constant G of Thms 4-5",
                                      minimum=0, exclusive_minimum=True, paper="[S0] Thms 4-5",
                                      role="clip_norm")] = 1.0,
    zeta: Annotated[float, Param("Hessian lower bound / damping zeta (Thm 4, Remark 5)",
                                 minimum=0, exclusive_minimum=True, paper="[S0] Thm 4, Remark 5")] = 0.1,
    radius: Annotated[float, Param("r of lines 9-10 (radius of the parameter space; tau = 2 r delta1 "
                                   "(1 + e^-eps1)); not a projection", minimum=0, exclusive_minimum=True,
                                   paper="[S0] Alg. 1 lines 9-10, footnote 5")] = 1.0,
    eps1_fraction: Annotated[float, Param("eps1 = this * eps for the noisy steps, eps2 = rest for c_t",
                                          minimum=0, exclusive_minimum=True, maximum=1 - 1e-12,
                                          paper="[S0] §7")] = 0.75,
    delta1_fraction: Annotated[float, Param("delta1 = this * delta, delta2 = rest",
                                            minimum=0, exclusive_minimum=True, maximum=1 - 1e-12)] = 0.5,
    smoothness: Annotated[float, Param("beta_s (the paper's L) in E of Thm 4 (LR: 1/4)", minimum=0,
                                       paper="[S0] Thm 4, Remark 1")] = 0.25,
    hessian_lipschitz: Annotated[float, Param("C_H (the paper's C) in E of Thm 4 (LR: 0.0962)", minimum=0,
                                              paper="[S0] Thm 4, Remark 1")] = 0.1,
    damping: Annotated[str, Param("add: H + zeta I (Remark 5, Cholesky); floor: eigenvalues floored at zeta "
                                  "(eigh)", choices=DAMPINGS, paper="[S0] Remark 5")] = "add",
    hessian: Annotated[str, Param("auto: exact for LR, Gauss-Newton on hessian_samples rows for the MLP; "
                                  "exact; ggn", choices=HESSIANS, paper="[S0] Alg. 1 line 4")] = "auto",
    hessian_samples: Annotated[int, Param("rows of the random subsample for hessian: ggn (0: all rows)",
                                          minimum=0)] = 1024,
    calibration: Annotated[str, Param("noise calibration of sigma at (eps1, delta1), q = 1/n, T steps: "
                                      "rdp or pld accountant, or paper 000's closed form", choices=CALIBRATIONS,
                                      paper="[S0] Thm 5")] = "rdp",
    paper_c: Annotated[float, Param("the unspecified constant c of Thm 5's sigma (calibration: paper)",
                                    minimum=0, exclusive_minimum=True, paper="[S0] Thm 5")] = 1.0,
    trace_every: Annotated[int, Param("record the training loss every this many steps (0: no trace)",
                                      minimum=0)] = 0,
) -> Fit:
    n = problem.n
    T = int(steps) if steps is not None else max(1, int(round(epochs * n)))
    if rounds > T:
        raise ValueError(f"rounds={rounds} > T={T} steps: every round needs at least one step")
    b = pidp_budget(privacy, n=n, steps=T, rounds=rounds, clip_norm=clip_norm, zeta=zeta, radius=radius,
                    eps1_fraction=eps1_fraction, delta1_fraction=delta1_fraction, smoothness=smoothness,
                    hessian_lipschitz=hessian_lipschitz, calibration=calibration, paper_c=paper_c)
    run = run_pidp(problem, rng, steps=T, rounds=rounds, lr=lr, clip_norm=clip_norm, sigma=b.sigma,
                   sigma_c=b.sigma_c, radius=radius, epsilon1=b.epsilon1, delta1=b.delta1, E=b.E, zeta=zeta,
                   damping=damping, hessian=hessian, hessian_samples=hessian_samples, trace_every=trace_every,
                   on_trace=training_loss_trace(problem))
    free = int(np.count_nonzero(run.noise_free))
    lengths = run.round_lengths
    return Fit(theta=run.theta, trace=run.trace, privacy=ledger(
        private=True,
        mechanism="PIDP-SGD [S0 Alg. 1]: batch-1 clipped SGD; a step is noise-free when its noisy influence "
                  "c_t = 2 H^-1 grad/n + N(0, sigma_c^2 I) has max|c_t| <= tau, otherwise N(0, sigma^2 I) is "
                  "added to its gradient",
        claim="paper-only",
        target_epsilon=privacy.epsilon,
        delta=privacy.delta,
        epsilon_spent=dpsgd_epsilon_report(b.noise_multiplier, 1.0 / n, T, b.delta1),
        epsilon_spent_note="accountant epsilon (at delta1) of the noisy part alone, as if every one of the T steps "
                           "were a Poisson(q=1/n)-subsampled Gaussian step; it says nothing about the noise-free "
                           "steps, which are deterministic in the record (docs/methods/pidp.md, Privacy), nor about the "
                           "contribution releases (sigma_c)",
        paper_claim={"epsilon": b.epsilon1 + b.epsilon2, "delta": b.delta1 + b.delta2,
                     "why_unsound": "docs/methods/pidp.md, Privacy: noise-free steps are not DP; data randomness "
                                    "used in the proof; per-coordinate DP; ||H||>=zeta; tau scales with r"},
        adjacency=Adjacency.REPLACE_ONE,
        spent_adjacency=Adjacency.ADD_REMOVE,
        sampling={"kind": "uniform, one index per step (with replacement)", "accountant_rate": 1.0 / n},
        steps=T,
        T=T,
        R=rounds,
        T_local=max(lengths),
        T_local_min=min(lengths),
        epsilon1=b.epsilon1,
        epsilon2=b.epsilon2,
        delta1=b.delta1,
        delta2=b.delta2,
        noise_multiplier=b.noise_multiplier,
        sigma=b.sigma,
        sigma_c=b.sigma_c,
        tau=b.tau,
        radius=radius,
        zeta=zeta,
        E=b.E,
        c_prime=PAPER_C_PRIME,
        lipschitz_G=clip_norm,
        smoothness=smoothness,
        hessian_lipschitz=hessian_lipschitz,
        calibration=calibration,
        damping=damping,
        hessian=run.hessian_kind,
        hessian_option=hessian,
        noise_free_steps=free,
        noise_free_fraction=free / T,
        noisy_steps=T - free,
        noisy_fraction=(T - free) / T,
        max_abs_theta_at_rounds=run.max_abs_theta,
        max_norm_theta_at_rounds=run.max_norm_theta,
    ))
