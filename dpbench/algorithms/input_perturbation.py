"""Input perturbation ([S3] = paper 003, Kang et al., Algorithm 1; docs/methods/input-perturbation.md).

Algorithm ([S3] Alg. 1, lines 2-9):
  draw z ~ N(0, sigma^2 I_d) once; x_i <- x_i + z for every training row ("perturbed data");
  for t = 0..T-1: theta <- theta - lr * grad L_hat(theta), L_hat = mean loss on the perturbed data;
  return theta_T.
Line 7 writes alpha (1/n) sum_i grad L_hat -- a typo, L_hat is already an average;
we take one step along grad L_hat = `model.grad(theta, X + z, y)`, which includes the model's own
L2 term (l2/2)||theta||^2 (the objective of [S3] eq. (8) is the model's regularised loss).

Noise scale (`dpbench.privacy.erm.input_perturbation_variance`):
  theorem strongly_convex: [S3] Thm 1 eq. (9), sigma^2 = c G^2 T log(1/delta) / (n (n-1) sqrt(Delta) eps^2);
  theorem pl:              [S3] Thm 3 eq. (12), the same without sqrt(Delta).

Choices (the paper is silent or ambiguous; all recorded in the ledger):
* `noise`: "shared" (default) = ONE z in R^d added to every row. [S3] says "add noise z to it",
  "z ~ R^d, each element ~ N(0, sigma^2)", and every equation of the proof ((14)-(18)) uses the
  same z for all i, so this is the faithful reading. "per_example" = an independent z_i per row,
  the reading the paper's "local protection" narrative needs. Either way z is drawn once, never
  per iteration.
* `theorem`: "strongly_convex" (default) takes Delta = the model's l2, the only strong convexity a
  GLM loss has (its per-example Hessian is rank one). With the default l2 = 1e-4, sqrt(Delta) =
  0.01 makes sigma^2 100x (sigma 10x) larger than under "pl"; l2 = 0 is rejected for this theorem.
  "pl" uses eq. (12) (PL constant absorbed into c, as the paper does).
* `c` = 1 (the paper's unspecified constant; any value is arbitrary because the proof's premises
  fail, below).
* G = model.lipschitz (logistic regression: 1 for ||x|| <= 1). Models with no global bound (MLP,
  ridge) use the nominal G = 1 -- no clipping is applied, [S3] clips nothing (ledger: constants
  "nominal").
* T = `epochs` full-batch steps (one step is one pass), constant step `lr` (default 1.0; [S3] picks
  T and the step "by cross-validation"), theta_0 = model.init(rng) drawn after z (zeros for linear
  models), final iterate returned.
* `trace_every`: the reference objective L_ref on the CLEAN training data every k steps (as dpsgd
  does). Under this method's (claimed) guarantee only theta_T is released; the trace is diagnostic.

Privacy: claim is ALWAYS "paper-only" and epsilon_spent is empty -- no accountant covers this
mechanism and we do not invent a number ([S3] Theorems 1 and 3 do not hold;
docs/methods/input-perturbation.md, Privacy): the proof composes T Gaussian mechanisms with the
moments accountant although z is drawn once and reused by all T steps; it treats the full-batch
gradient as Gaussian in z with a scalar variance C sigma^2, where C is a signed data-dependent
scalar that -> 0 as training converges ("seen as a constant", eq. (28)), so the constant c silently
absorbs a diverging factor; and with shared noise an intercept absorbs z at the optimum, making the
weights a deterministic function of the data (epsilon = infinity at convergence). The per-example
reading has about sqrt(n) too little noise. On the MLP the premises (G-Lipschitz, strongly convex or
PL) do not hold either.

Not on the privatiser path: the noise is added to the data before a non-private descent, a design
whose claim does not hold (`paper-only` always); nothing is reported, nothing is claimed valid.
"""

from __future__ import annotations

import math
from typing import Annotated, Sequence

import numpy as np

from dpbench.algorithms.base import (MAX_EPOCHS, Fit, PrivacyTarget, Problem, algorithm, batched, hyperparameters,
                                    ledger)
from dpbench.core.gaussian import normal
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import Param
from dpbench.models.base import Model
from dpbench.models.linear import _GLM
from dpbench.privacy.erm import input_perturbation_variance

NOISES = ("shared", "per_example")
THEOREMS = ("strongly_convex", "pl")
#: nominal gradient bound for models without one (MLP, ridge); [S3] does not clip
NOMINAL_LIPSCHITZ = 1.0

CLAIM_REASON = (
    "Theorems 1/3 of paper 003 do not hold (docs/methods/input-perturbation.md, Privacy): one noise "
    "draw z is reused by all T "
    "'composed' steps; the gradient is treated as Gaussian in z with a variance C sigma^2 whose scalar "
    "C -> 0 as training converges ('seen as a constant'); with shared noise the intercept absorbs z, "
    "so the weights are a deterministic function of the data at convergence (epsilon = infinity). "
    "No accountant covers the mechanism: no epsilon is reported."
)


def perturb_features(X: np.ndarray, sigma: float, noise: str,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """[S3] Alg. 1 lines 2-4: (X + z, z), z drawn once.

    noise "shared": z has shape (d,), the same vector is added to every row;
    noise "per_example": z has shape (n, d), row i gets its own z_i. Entries i.i.d. N(0, sigma^2).
    """
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {', '.join(NOISES)}, got {noise!r}")
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}")
    X = np.asarray(X, dtype=np.float64)
    z = perturb_noise(X.shape[1] if noise == "shared" else X.shape, sigma, rng)
    return X + z, z  # (d,) broadcasts over rows


def perturb_noise(shape: int | tuple[int, ...], sigma: float, rng: np.random.Generator) -> np.ndarray:
    """z with i.i.d. N(0, sigma^2) entries: the one draw of [S3] Alg. 1 line 3."""
    return normal(rng, sigma, shape)


def input_perturbation_sigma(model: Model, n: int, privacy: PrivacyTarget, *, epochs: int, c: float,
                             theorem: str) -> tuple[float, float | None, float, str]:
    """(sigma, Delta or None, G, constants) for [S3] eq. (9) / (12) on this model."""
    constants = "model" if model.lipschitz is not None else "nominal"
    G = float(model.lipschitz) if model.lipschitz is not None else NOMINAL_LIPSCHITZ
    strong = None
    if theorem == "strongly_convex":
        if not model.l2 > 0:
            raise ValueError(f"input_perturbation theorem strongly_convex uses Delta = the model's l2 as strong "
                             f"convexity, which is {model.l2:g}; set l2 > 0 or theorem: pl")
        strong = float(model.l2)
    variance = input_perturbation_variance(G, epochs, n, privacy.epsilon, privacy.delta, c=c,
                                           strong_convexity=strong)
    return math.sqrt(variance), strong, G, constants


@algorithm("input_perturbation",
           title="Input perturbation: Gaussian noise on the features once, then full-batch GD ([S3] Alg. 1; "
                 "paper-only claim)",
           citation="Kang et al., Input Perturbation: A New Paradigm between Central and Local Differential Privacy "
                    "(paper 003, Algorithm 1, Theorems 1 and 3)",
           private=True)
def fit_input_perturbation(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    epochs: Annotated[int, Param("T full-batch GD steps (one step = one pass over the data)", minimum=1,
                                 maximum=MAX_EPOCHS, paper="[S3] Alg. 1")] = 100,
    lr: Annotated[float, Param("constant step size alpha", minimum=0, exclusive_minimum=True,
                               paper="[S3] Alg. 1 line 7")] = 1.0,
    noise: Annotated[str, Param(
        "shared: one z in R^d for all rows (the proof's reading); per_example: independent z_i per row",
        choices=NOISES, paper="[S3] Alg. 1 lines 2-4")] = "shared",
    c: Annotated[float, Param("the unspecified constant c of [S3] eqs. (9)/(12)",
                              minimum=0, exclusive_minimum=True, paper="[S3] eqs. (9), (12)")] = 1.0,
    theorem: Annotated[str, Param(
        "strongly_convex: [S3] eq. (9) with Delta = the model's l2 (sigma^2 / sqrt(Delta)); "
        "pl: eq. (12), no sqrt(Delta)", choices=THEOREMS, paper="[S3] Thm 1 eq. (9), Thm 3 eq. (12)")
    ] = "strongly_convex",
    trace_every: Annotated[int, Param("record the clean-data training loss every this many steps (0: no trace)",
                                      minimum=0)] = 0,
) -> Fit:
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    sigma, strong, G, constants = _calibration(model, n, privacy, epochs, c, theorem)
    X_tilde, z = perturb_features(X, sigma, noise, rng)
    theta = model.init(rng)
    trace: list[dict] = []
    for t in range(int(epochs)):
        theta = theta - lr * model.grad(theta, X_tilde, y)
        if trace_every and ((t + 1) % trace_every == 0 or t + 1 == epochs):
            trace.append({"step": t + 1, "train_loss": model.loss(theta, X, y)})  # clean data: L_ref
    return _fit(model, privacy, theta, trace, z, sigma=sigma, strong=strong, G=G, constants=constants,
                epochs=int(epochs), lr=lr, noise=noise, c=c, theorem=theorem)


def _calibration(model: Model, n: int, privacy: PrivacyTarget, epochs: int, c: float,
                 theorem: str) -> tuple[float, float | None, float, str]:
    if privacy.epsilon is None or privacy.delta is None:
        raise ValueError("input_perturbation is a private algorithm: it needs a target epsilon and delta")
    return input_perturbation_sigma(model, n, privacy, epochs=int(epochs), c=c, theorem=theorem)


def _fit(model: Model, privacy: PrivacyTarget, theta: np.ndarray, trace: list[dict], z: np.ndarray, *,
         sigma: float, strong: float | None, G: float, constants: str, epochs: int, lr: float, noise: str,
         c: float, theorem: str) -> Fit:
    """theta_T and its ledger (claim paper-only, no epsilon: module docstring)."""
    if noise == "shared":
        noise_details = {"feature_noise_norm": float(np.linalg.norm(z))}
    else:
        noise_details = {"feature_noise_mean_row_norm": float(np.mean(np.linalg.norm(z, axis=1)))}
    reason = CLAIM_REASON
    if constants != "model" or not model.convex:
        reason += (f" On {model.name} even the premises fail (nominal G = {G:g}: no global Lipschitz bound; "
                   f"strong convexity / PL not implied).")
    return Fit(theta=theta, trace=trace, privacy=ledger(
        private=True,
        mechanism="input perturbation ([S3] Alg. 1): Gaussian noise added once to the training features, "
                  "then T full-batch GD steps on the perturbed data",
        claim="paper-only",
        target_epsilon=float(privacy.epsilon),
        delta=float(privacy.delta),
        epsilon_spent={},
        claim_reason=reason,
        adjacency=Adjacency.REPLACE_ONE,
        noise=noise,
        theorem=theorem,
        variance_formula=("c G^2 T log(1/delta) / (n (n-1) sqrt(Delta) eps^2)  [S3] eq. (9)"
                          if theorem == "strongly_convex" else "c G^2 T log(1/delta) / (n (n-1) eps^2)  [S3] eq. (12)"),
        c=float(c),
        strong_convexity=strong,
        lipschitz=G,
        constants=constants,
        sigma=sigma,
        steps=epochs,
        lr=float(lr),
        **noise_details,
    ))


#: rows of X a batched step multiplies at once (bounds the (rows, R) margins)
_ROW_BLOCK = 65_536


def _batch_pays(model_class: type, params: dict) -> bool:
    """Replicas of a linear model with one noise vector each (noise shared) share every product with X;
    per-example noise gives each replica its own data, and a trace asks for one loss pass per replica."""
    return (issubclass(model_class, _GLM) and params.get("noise", "shared") == "shared"
            and not params.get("trace_every", 0))


@batched(fit_input_perturbation, varying=("epochs", "lr"), pays=_batch_pays)
def fit_input_perturbation_batch(problem: Problem, privacies: Sequence[PrivacyTarget],
                                 rngs: Sequence[np.random.Generator], params: Sequence[dict]) -> list[Fit]:
    """Replicas of `fit_input_perturbation` on a linear model with shared noise, all R descents at once.

    Replica r trains on X + 1 z_r^T. For a GLM its margins are X theta_r + (z_r . theta_r) and its
    data gradient (1/n)[X^T s_r + z_r (1^T s_r)], s_r = phi'(margins; y): one product of X with the
    (d x R) parameters and one of X^T with the (n x R) slopes per step serve every replica, and no
    replica copies X. Replica r stops after its own T_r steps of its own step size. Draws: z_r from
    rngs[r] as the single fit draws it (then `model.init`, zeros): each Fit equals the single fit's
    up to float rounding (X theta + z . theta sums in another order than (X + z) theta). Elsewhere
    (per-example noise, a trace, a non-linear model) the replicas run one after another."""
    privacies, rngs = list(privacies), list(rngs)
    hypers = [hyperparameters(fit_input_perturbation, p) for p in params]
    if not len(privacies) == len(rngs) == len(hypers):
        raise ValueError("a batched fit needs one privacy target, rng and hyperparameter set per replica")
    model = problem.model
    if not all(_batch_pays(type(model), h) for h in hypers):
        return [fit_input_perturbation(problem, p, r, **h) for p, r, h in zip(privacies, rngs, hypers)]
    X = np.asarray(problem.X, dtype=np.float64)
    y = np.asarray(problem.y, dtype=np.float64)
    n = problem.n
    calibrations = [_calibration(model, n, p, h["epochs"], h["c"], h["theorem"]) for p, h in zip(privacies, hypers)]
    Z = np.empty((len(rngs), X.shape[1]))
    Theta = np.empty((len(rngs), model.n_params))
    for r, (rng, (sigma, *_)) in enumerate(zip(rngs, calibrations)):
        Z[r] = perturb_noise(X.shape[1], sigma, rng)
        Theta[r] = model.init(rng)
    steps = np.array([int(h["epochs"]) for h in hypers])
    lrs = np.array([float(h["lr"]) for h in hypers])
    for t in range(int(steps.max())):
        active = np.flatnonzero(steps > t)
        Th, Zr = Theta[active], Z[active]
        offsets = np.einsum("rd,rd->r", Zr, Th)
        G = np.zeros_like(Th)
        slope_sums = np.zeros(len(active))
        for a in range(0, n, _ROW_BLOCK):
            Xb = X[a:a + _ROW_BLOCK]
            S = model._dphi(Xb @ Th.T + offsets, y[a:a + _ROW_BLOCK, None])
            G += S.T @ Xb
            slope_sums += S.sum(axis=0)
        G += Zr * slope_sums[:, None]
        G /= n
        G += model.reg_grad(Th)
        Theta[active] = Th - lrs[active, None] * G
    fits = []
    for r, (p, h, (sigma, strong, G_, constants)) in enumerate(zip(privacies, hypers, calibrations)):
        fits.append(_fit(model, p, Theta[r].copy(), [], Z[r], sigma=sigma, strong=strong, G=G_,
                         constants=constants, epochs=int(h["epochs"]), lr=h["lr"], noise=h["noise"], c=h["c"],
                         theorem=h["theorem"]))
    return fits
