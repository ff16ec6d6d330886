"""Bolt-on output perturbation of permutation-based SGD (Wu, Li, Kumar, Chaudhuri, Jha, Naughton,
SIGMOD 2017; paper 000 ref. [44]; docs/methods/bolt-on.md).

Algorithm (noise-free core `bolt_on_core`, then one noise draw):
  tau = one random permutation of the n training rows (drawn once, reused by every pass);
  for pass j = 1..k, for b = 1..m (m = floor(n/B) consecutive batches of B rows in tau order):
      theta <- Proj_R(theta - eta_t * [(1/B) sum_{i in batch} grad l(theta; z_i) + lambda theta])
  release theta_T + kappa.
Only theta_T + kappa is released: no trace of intermediate iterates is recorded (releasing them
voids the guarantee: the proof covers theta_T alone).

Row norms. G = model.lipschitz and beta_s = model.smoothness (1 and 1/4 for logistic regression)
bound the gradient and its Lipschitz constant only for rows with ||x|| <= 1
(docs/methods/conventions.md, Preprocessing). When the claim rests on them (constants "model") the
core runs on `bounded_rows(problem)`: every row x becomes x min(1, 1/||x||). The map acts on each
record on its own, so data sets that differ in one record still differ in (at most) that record, the
sensitivity bounds below hold for the projected data, and the whole (projection + Bolt-on) keeps the
guarantee for arbitrary input rows. The ledger records `row_norm_bound` and `rows_projected`. Rows
already inside the ball are untouched (all UCI sets here: results bit-identical). Nominal-constant
models (no claim) run on their rows as given.

Sensitivity (replace-one adjacency, the same tau on D and D'): the differing record sits in one
batch per pass; that step injects at most eta_t ||grad l(z) - grad l(z')|| / B <= 2 L eta_t / B,
and every gradient step of the convex beta-smooth batch objective is non-expansive for
eta <= 2/beta (contracts by 1 - eta mu when it is mu-strongly convex and eta <= 1/beta).
Variants (`variant`), one sensitivity function each (the table of docs/methods/bolt-on.md, Privacy):
  convex                    constant eta <= 2/beta         Delta = 2 k L eta / B
  strongly_convex           eta_t = min(1/beta, 1/(mu t))  Delta = 2 L / (mu B m)
  strongly_convex_constant  constant eta <= 1/beta         Delta = (2 eta L / B)(1 - c^{km})/(1 - c^m), c = 1 - eta mu
(functions `convex_sensitivity`, `strongly_convex_sensitivity`, `strongly_convex_constant_sensitivity`;
B m = n when B divides n, giving the paper's 2L/(mu n).)

Choices (the paper is silent or we deviate on purpose; all recorded in the ledger):
* Batches: m = floor(n/B) full batches per pass; the last n - B m rows of tau are never used.
  A partial last batch would average over fewer rows and inject up to 2 L eta / (n mod B),
  breaking the bounds above (dpml-benchmark keeps it; we do not).
* Regulariser: the training objective is mean data loss + (lambda/2)||theta||^2 with lambda =
  `l2` if set, else the model's own l2. `l2` *replaces* the model's l2 during training (so it is
  exactly the strong-convexity mu of the strongly convex variants); optimality gaps are still
  measured on the model's reference objective L_ref.
* Constants: G = model.lipschitz (data loss), beta = model.smoothness + lambda, mu = lambda.
  L = G + lambda R (`lipschitz_bound: paper`, Wu et al.: L bounds the gradient of the
  *regularised* loss on the ball of radius R) or L = G (`lipschitz_bound: data`): the term
  lambda theta is the same for D and D' at the same theta and cancels in the injected
  difference, so the data-loss bound suffices; both are valid, `paper` is the default.
* Radius R (`radius`): default G/lambda when lambda > 0 (the regularised minimiser satisfies
  lambda ||theta*|| <= G, so the ball contains it; = 1/lambda for logistic regression, the
  paper's setting), no projection when lambda = 0 (convex variant only).
* Step size: default eta = 1/beta (the cap of the strongly convex schedule). A user `lr` is
  checked: above 2/beta (convex) or 1/beta (strongly convex variants) the non-expansiveness /
  contraction step of the proof fails, so `plan_bolt_on` raises ValueError (no silent clamp).
  In the `strongly_convex` variant `lr` is the cap: eta_t = min(lr, 1/(mu t)), same Delta.
* Noise (`noise`): `gaussian` (default) with the analytic Gaussian mechanism (Balle & Wang 2018,
  docs/accounting.md, Analytic Gaussian; valid for every epsilon, the classical formula is not for eps >= 1); or
  `laplace_norm` for pure epsilon-DP, kappa with density ~ exp(-eps ||kappa|| / Delta).
* Defaults: variant convex, k = 1 pass, B = 50 (dpml-benchmark: "suggested in section 4.3"),
  eta = 1/beta, R = G/lambda, L = G + lambda R, Gaussian noise. `convex` is the default because
  it is valid for any l2 >= 0; with the model's default l2 = 1e-4 the strongly convex bound
  2L/(mu n) is large (Adult logreg, n = 27,134: Delta = 1.48 against 0.32 for convex); the
  strongly convex variants pay off with a larger training `l2` (e.g. 1e-3: Delta = 0.15).
* theta_0 = model.init(rng) (data independent; zeros for logistic regression).
* Models without a Lipschitz/smoothness bound (the MLP, ridge) or non-convex ones: the method still
  runs with nominal constants G = 1, beta_s = 1/4 (those of the logistic loss) so it can be plotted
  as paper 000 does, but the ledger claim is "none" (its proof needs convexity:
  docs/methods/conventions.md, The MLP); the AlgorithmInfo also sets convex_only so the cell runner
  downgrades any claim on a non-convex model.

Not on the privatiser path: its noise is one draw on the final model, calibrated from a sensitivity
that holds by a theorem on the permutation-based SGD's contraction (convex, smooth, bounded rows), which
no privatiser mechanism states; the run keeps the ledger and release checks (`not checked`: no steps).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Annotated

import numpy as np

from dpbench.algorithms import kernels
from dpbench.algorithms.base import (
    MAX_EPOCHS,
    Fit,
    PrivacyTarget,
    Problem,
    algorithm,
    bounded_rows,
    ledger,
    output_sensitivity_claim,
)
from dpbench.algorithms.sgd import project_to_ball
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import Param
from dpbench.models.base import Model
from dpbench.privacy import analytic_gaussian_sigma, gaussian_epsilon, gaussian_noise, laplace_norm_noise
from dpbench.privacy.events import dpsgd_event_json

VARIANTS = ("convex", "strongly_convex", "strongly_convex_constant")
NOISES = ("gaussian", "laplace_norm")
LIPSCHITZ_BOUNDS = ("paper", "data")
#: the bound each variant uses (ledger field `sensitivity_formula`; m = floor(n/B) batches per pass)
SENSITIVITY_FORMULAS = {
    "convex": "2 k L eta / B",
    "strongly_convex": "2 L / (mu B m)",
    "strongly_convex_constant": "(2 eta L / B) (1 - (1 - eta mu)^(k m)) / (1 - (1 - eta mu)^m)",
}
#: Constants used for models that have no global bound (MLP: both; ridge: G). Claim is then "none".
NOMINAL_LIPSCHITZ = 1.0
NOMINAL_SMOOTHNESS = 0.25
_LR_TOL = 1e-12  # relative slack when comparing a user lr with 2/beta or 1/beta


# ---- sensitivities: one function per variant (docs/methods/bolt-on.md, Privacy) ---------------
def convex_sensitivity(lipschitz: float, lr: float, epochs: int, batch_size: int) -> float:
    """Delta_2 = 2 k L eta / B: convex, L-Lipschitz, beta-smooth loss, constant eta <= 2/beta.

    Variant `convex` (Wu et al. 2017; sunblaze-ucb/dpml-benchmark `algorithms/psgd.py`, lr_type 'constant').
    Each of the k passes uses the differing record once, injecting <= 2 L eta / B; the other
    steps are non-expansive.
    """
    return 2.0 * epochs * lipschitz * lr / batch_size


def strongly_convex_sensitivity(lipschitz: float, mu: float, batch_size: int, batches_per_pass: int) -> float:
    """Delta_2 = 2 L / (mu B m): mu-strongly convex, eta_t = min(1/beta, 1/(mu t)), t = 1..km.

    Variant `strongly_convex` (Wu et al. 2017 and dpml-benchmark `private_strongly_convex_psgd`: 2L/(mu n)),
    with n replaced by the B m rows actually used per pass (= n when B divides n). Proof sketch: by
    induction delta_t <= (2L/(B mu)) c_t / t, c_t = occurrences of the differing record up to step t
    (while eta_t = 1/beta, i.e. t <= beta/mu, simply delta_t <= 2L c_t/(B beta) <= 2L c_t/(B mu t);
    afterwards delta_t <= (1 - 1/t) delta_{t-1} + 2L o_t/(B mu t)); at T = k m, c_T = k. Independent
    of k and B (TF-Privacy's extra 1/B is not supported by this derivation).
    """
    return 2.0 * lipschitz / (mu * batch_size * batches_per_pass)


def strongly_convex_constant_sensitivity(lipschitz: float, mu: float, lr: float, epochs: int, batch_size: int,
                                         batches_per_pass: int) -> float:
    """Delta_2 = (2 eta L / B) sum_{j<k} c^{j m} = (2 eta L / B)(1 - c^{km})/(1 - c^m), c = 1 - eta mu.

    Variant `strongly_convex_constant`: the bound (2 eta L/B)/(1 - (1 - eta mu)^{n/B}) of
    docs/methods/bolt-on.md is this bound's k -> infinity limit; the finite-k sum is the exact worst
    case (differing record in the last batch of every pass, each injection of 2 eta L / B then
    contracted by c per later step), and is <= both that limit and the convex bound 2 k L eta / B.
    """
    if mu * lr >= 1.0:
        return 2.0 * lr * lipschitz / batch_size  # c = 0: only the last injection survives
    log_c = math.log1p(-mu * lr)
    ratio = math.expm1(epochs * batches_per_pass * log_c) / math.expm1(batches_per_pass * log_c)
    return 2.0 * lr * lipschitz / batch_size * ratio


# ---- the plan: every constant of one run, checked ---------------------------------------------
@dataclass(frozen=True)
class BoltOnPlan:
    """Constants of one Bolt-on run (what the ledger records) and the step-size schedule."""

    variant: str
    epochs: int  # k passes
    batch_size: int  # B
    batches_per_pass: int  # m = floor(n / B)
    steps: int  # T = k m
    l2: float  # lambda of the training objective (= mu of the strongly convex variants)
    smoothness: float  # beta = beta_s + lambda
    data_lipschitz: float  # G
    radius: float | None  # R (None: no projection)
    lipschitz: float  # L used in the sensitivity
    lipschitz_bound: str
    lr: float  # constant eta, or the cap of the strongly_convex schedule
    sensitivity: float  # Delta_2 of theta_T
    constants: str  # "model" (the model's proven bounds) or "nominal" (no bound: claim none)

    def step_size(self, t: int) -> float:
        """eta_t for step t = 1..T."""
        if self.variant == "strongly_convex":
            return min(self.lr, 1.0 / (self.l2 * t))
        return self.lr


def plan_bolt_on(model: Model, n: int, *, variant: str = "convex", epochs: int = 1, batch_size: int = 50,
                 lr: float | None = None, l2: float | None = None, radius: float | None = None,
                 lipschitz_bound: str = "paper") -> BoltOnPlan:
    """Check the hyperparameters against the sensitivity proof and compute Delta_2.

    Each value on its own is checked by the fit's `Param`s; this checks what they cannot express
    (lr against 2/beta or 1/beta, a strongly convex variant with l2 = 0).
    """
    epochs = int(epochs)
    batch_size = min(int(batch_size), int(n))
    m = n // batch_size
    lam = model.l2 if l2 is None else float(l2)
    constants = "model" if (model.lipschitz is not None and model.smoothness is not None) else "nominal"
    G = float(model.lipschitz) if model.lipschitz is not None else NOMINAL_LIPSCHITZ
    beta = (float(model.smoothness) if model.smoothness is not None else NOMINAL_SMOOTHNESS) + lam
    strongly = variant != "convex"
    if strongly and not lam > 0:
        raise ValueError(f"bolt_on variant {variant!r} needs a strongly convex objective: set l2 > 0 "
                         f"(the model's l2 is {model.l2:g})")
    if radius is None:
        radius = G / lam if lam > 0 else None
    L = G + lam * radius if (lipschitz_bound == "paper" and radius is not None) else G

    limit = 1.0 if strongly else 2.0
    max_lr, rule = (limit / beta if beta > 0 else math.inf), f"{limit:g}/beta"
    if lr is None:
        if not beta > 0:
            raise ValueError("bolt_on: the loss has smoothness 0, so the default lr = 1/beta is undefined; set lr")
        lr = 1.0 / beta
    elif lr > max_lr * (1 + _LR_TOL):
        raise ValueError(f"bolt_on {variant}: lr={lr:g} exceeds {rule}={max_lr:g} (beta = beta_s + l2 = {beta:g}); "
                         f"the sensitivity proof needs eta <= {rule}")

    if variant == "convex":
        sens = convex_sensitivity(L, lr, epochs, batch_size)
    elif variant == "strongly_convex":
        sens = strongly_convex_sensitivity(L, lam, batch_size, m)
    else:
        sens = strongly_convex_constant_sensitivity(L, lam, lr, epochs, batch_size, m)
    return BoltOnPlan(variant=variant, epochs=epochs, batch_size=batch_size, batches_per_pass=m, steps=epochs * m,
                      l2=lam, smoothness=beta, data_lipschitz=G, radius=radius, lipschitz=L,
                      lipschitz_bound=lipschitz_bound, lr=float(lr), sensitivity=float(sens), constants=constants)


def bolt_on_core(model: Model, X: np.ndarray, y: np.ndarray, perm: np.ndarray, plan: BoltOnPlan,
                 theta0: np.ndarray, compiled: bool | None = None) -> np.ndarray:
    """theta_T before noise: k passes of projected mini-batch SGD over `perm` (deterministic).

    Batch b of every pass is rows perm[bB:(b+1)B], b < m; its gradient is the model's mean data
    gradient on those rows plus lambda theta (no clipping: the bound is the Lipschitz one). For
    logistic/ridge regression the passes run in the compiled loop `kernels.glm_sgd_steps` (the
    batch-1 form is otherwise ~10 numpy calls per step); `compiled=False` forces the numpy path.
    """
    B, m = plan.batch_size, plan.batches_per_pass
    theta = np.array(theta0, dtype=float)
    steps = np.arange(1, plan.epochs * m + 1)
    lrs = np.array([plan.step_size(int(t)) for t in steps])
    loss = kernels.glm_loss_code(model)
    if (kernels.jit_enabled() if compiled is None else compiled) and loss is not None:
        X = np.ascontiguousarray(X, dtype=np.float64)
        y = np.ascontiguousarray(y, dtype=np.float64)
        rows = np.tile(np.asarray(perm, dtype=np.int64)[:B * m], plan.epochs)
        offsets = np.arange(plan.epochs * m + 1, dtype=np.int64) * B
        kernels.glm_sgd_steps(theta, X, y, kernels.row_norms(X), offsets, rows, np.empty((0, theta.size)), 0.0,
                              lrs, loss, 0.0, float(B), float(plan.l2), float(plan.radius or 0.0), 0, len(lrs))
        return theta
    order = np.asarray(perm)[:B * m].reshape(m, B)
    Xb, yb = np.asarray(X)[order], np.asarray(y)[order]  # (m, B, d), (m, B): gathered once
    for t, lr in enumerate(lrs):
        b = t % m
        g = model.data_grad(theta, Xb[b], yb[b]) + plan.l2 * theta
        theta = project_to_ball(theta - lr * g, plan.radius)
    return theta


@algorithm("bolt_on", title="Bolt-on: output perturbation of permutation-based projected SGD (convex losses only)",
           citation="Wu, Li, Kumar, Chaudhuri, Jha, Naughton, Bolt-on Differential Privacy for Scalable "
                    "Stochastic Gradient Descent-based Analytics, SIGMOD 2017; paper 000 ref. [44]",
           private=True, convex_only=True)
def fit_bolt_on(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    variant: Annotated[str, Param(
        "step-size rule and matching sensitivity: convex (constant eta, Delta = 2kL eta/B), "
        "strongly_convex (eta_t = min(lr, 1/(mu t)), Delta = 2L/(mu n)), strongly_convex_constant",
        choices=VARIANTS, paper="Wu et al. 2017")] = "convex",
    epochs: Annotated[int, Param("passes k over one fixed random permutation", minimum=1, maximum=MAX_EPOCHS)] = 1,
    batch_size: Annotated[int, Param("mini-batch size B (floor(n/B) batches per pass; the rest unused)",
                                     minimum=1)] = 50,
    lr: Annotated[float | None, Param(
        "step size eta (cap of the schedule for strongly_convex); none: 1/beta. "
        "Must be <= 2/beta (convex) or <= 1/beta (strongly convex), else an error",
        minimum=0, exclusive_minimum=True)] = None,
    l2: Annotated[float | None, Param("training L2 lambda (= mu), replaces the model's l2 during training; "
                                      "none: the model's l2", minimum=0)] = None,
    radius: Annotated[float | None, Param("projection radius R; none: G/lambda (1/lambda for logreg), "
                                          "no projection if lambda = 0", minimum=0, exclusive_minimum=True)] = None,
    lipschitz_bound: Annotated[str, Param(
        "L in Delta: paper (G + lambda R, Wu et al.) or data (G: the regulariser cancels)",
        choices=LIPSCHITZ_BOUNDS)] = "paper",
    noise: Annotated[str, Param("gaussian (analytic Gaussian, (eps, delta)-DP) or laplace_norm (pure eps-DP)",
                                choices=NOISES)] = "gaussian",
) -> Fit:
    model, n = problem.model, problem.n
    if privacy.epsilon is None:
        raise ValueError("bolt_on is a private algorithm: it needs a target epsilon")
    plan = plan_bolt_on(model, n, variant=variant, epochs=epochs, batch_size=batch_size, lr=lr, l2=l2,
                        radius=radius, lipschitz_bound=lipschitz_bound)
    eps = float(privacy.epsilon)
    rows: dict = {}
    if plan.constants == "model":  # G, beta_s hold for ||x|| <= 1 only: project (module docstring)
        problem, rows = bounded_rows(problem)
    theta0 = model.init(rng)
    perm = rng.permutation(n)
    theta = bolt_on_core(model, problem.X, problem.y, perm, plan, theta0)
    p = theta.shape[0]
    sens = plan.sensitivity
    if noise == "gaussian":
        delta = privacy.delta
        std = analytic_gaussian_sigma(eps, delta, sens)
        kappa = gaussian_noise(rng, p, std)
        spent = {"analytic_gaussian": gaussian_epsilon(std, delta, sens)}  # recomputed from the std used
        noise_details = {"noise_std": std}
        basis = {"event": dpsgd_event_json(std / sens, 1.0, 1)}
        mechanism = "Bolt-on: output perturbation of permutation SGD, analytic Gaussian (Balle & Wang 2018)"
    else:
        delta = 0.0
        scale = sens / eps
        kappa = laplace_norm_noise(rng, p, scale)
        spent = {"laplace_norm": sens / scale}  # density exp(-||k||/scale): eps = Delta / scale
        noise_details = {"noise_scale": scale, "noise_expected_norm": p * scale, "requested_delta": privacy.delta}
        basis = {"proof": "Chaudhuri, Monteleoni, Sarwate 2011, Theorem 6 (output perturbation, density "
                            "exp(-eps ||k||/Delta)); Wu et al. 2017, Theorem 1 (Bolt-on sensitivity)"}
        mechanism = "Bolt-on: output perturbation of permutation SGD, L2-Laplace (density ~ exp(-eps||k||/Delta))"

    claim, details = output_sensitivity_claim(model, plan, spent, eps, "Bolt-on's sensitivity proof")
    claim_reason = details.pop("claim_reason", None)
    plan_d = asdict(plan)
    return Fit(theta=theta + kappa, trace=[], privacy=ledger(
        private=True,
        mechanism=mechanism,
        claim=claim,
        target_epsilon=eps,
        delta=delta,
        epsilon_spent=spent,
        adjacency=Adjacency.REPLACE_ONE,
        sensitivity=plan.sensitivity,
        claim_reason=claim_reason,
        **basis,
        noise=noise,
        **noise_details,
        passes=plan_d.pop("epochs"),
        step_size=plan.lr if variant != "strongly_convex" else {"schedule": "min(lr, 1/(mu t))", "lr": plan.lr},
        strong_convexity=plan.l2 if variant != "convex" else 0.0,
        records_used=plan.batch_size * plan.batches_per_pass,
        sensitivity_formula=SENSITIVITY_FORMULAS[variant],
        **{k: v for k, v in plan_d.items() if k not in ("lr", "sensitivity")},
        **rows,
        **details,
    ))
