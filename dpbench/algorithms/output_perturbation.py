"""Output perturbation of full-batch gradient descent ([S2] = paper 002, lecture 17, Algorithm 1;
Zhang, Zheng, Mou, Wang, IJCAI 2017 (ZZMW); docs/methods/output-perturbation.md).

Algorithm (noise-free core `output_gd_core`, then one Gaussian draw):
  theta_0 = model.init(rng) (zeros for linear models; data independent);
  for t = 1..T: theta_t = Proj_R(theta_{t-1} - lr * grad F(theta_{t-1})),
      F(theta) = (1/n) sum_i l(theta; z_i) + (lambda/2) ||theta||^2;
  release theta_T + N(0, s^2 I_p), s from the analytic Gaussian mechanism at sensitivity Delta_T.
([S2] Alg. 1 line 3 indexes theta_t from theta_{t-1} inside a loop over t = 0..T-1 -- an
off-by-one; we run exactly T steps. Only theta_T + noise is released: no trace.)

Row norms. G = model.lipschitz and beta_s = model.smoothness (1 and 1/4 for logistic regression)
hold only for rows with ||x|| <= 1 (docs/methods/conventions.md, Preprocessing); a replaced row with
||x|| = 500 can inject up to lr (500 + 1) / n per step instead of 2 lr G / n, far beyond Delta_T.
When the claim rests on these constants (constants "model") the GD core runs on
`bounded_rows(problem)`: every row x becomes x min(1, 1/||x||). The map acts on each record on its
own, so data sets that differ in one record still differ in (at most) that record, Delta_T below
bounds ||theta_T(D) - theta_T(D')|| for the projected data, and the whole (projection + GD +
Gaussian) keeps the guarantee for arbitrary input rows. The ledger records `row_norm_bound` and
`rows_projected`. Rows already inside the ball are untouched (all UCI sets here: results
bit-identical). Nominal-constant models (no claim) run on their rows as given.

Sensitivity (replace-one; `dpbench.privacy.erm.output_gd_sensitivity`; derived below):
  lambda > 0: Delta_T = (2 L / (n lambda)) (1 - (1 - lr lambda)^T) <= 2L/(n lambda)  (mu = lambda),
  lambda = 0: Delta_T = 2 lr L T / n.
One GD step on D and on D' from the same point differs by (lr/n)(grad l(theta; z) - grad l(theta; z')),
norm <= 2 lr L / n; the GD map of the mu-strongly convex, beta-smooth C^2 objective F contracts by
1 - lr mu when lr <= 2/(beta + mu); the projection is non-expansive. For comparison the ledger also
records ZZMW's bound 5 L (alpha + beta)/(n alpha beta) ([S2] Thm 17.4, proven for lr <= 1/(alpha + beta)).

Choices (the sources leave them open; all recorded in the ledger):
* Regulariser: lambda = `l2` if set, else the model's l2. It *replaces* the model's l2 during
  training (so it is exactly the strong convexity mu); optimality gaps are still measured on the
  model's L_ref. For a merely convex loss this is the "regularisation trick" of [S2] eq. (17.3):
  lambda > 0 makes F lambda-strongly convex. (In [S2] eq. (17.3) is introduced for the
  population-risk reduction of §17.1, not for Algorithm 1; it is applied here to make the
  contraction bound hold.)
* Constants: G = model.lipschitz (data loss), beta = model.smoothness + lambda, mu = lambda.
  L = G + lambda R (`lipschitz_bound: paper`: L bounds the gradient of the *regularised* loss on the
  ball of radius R, as ZZMW's L-Lipschitz assumption on the loss needs) or L = G
  (`lipschitz_bound: data`): the lambda theta term is the same on D and D' at the same theta and
  cancels in the injected difference, so the data-loss bound suffices. Both are valid; `paper` is
  the default, as in `bolt_on`.
* Radius R (`radius`): default G/lambda when lambda > 0 (lambda ||theta*|| <= G, so the ball holds
  the regularised minimiser and projection does not change the limit); no projection when lambda = 0.
* Step size: default lr = 1/beta. A user lr above 2/(beta + mu) voids the contraction step of the
  proof and raises ValueError (no silent clamp).
* T = `epochs` full-batch steps (default 100; [S2] Thm 17.5 suggests T = O((beta/alpha) log n)).
* Noise: analytic Gaussian (Balle & Wang 2018; docs/accounting.md, Analytic Gaussian): valid for
  every epsilon; the classical sqrt(2 ln(1.25/delta)) Delta/eps is not for eps >= 1 ([S2] only
  writes O(Delta^2 log(1/delta)/eps^2)).
* Models without a Lipschitz/smoothness bound or non-convex ones (MLP, ridge): nominal G = 1,
  beta_s = 1/4 (the logistic loss's) so the method can be plotted as paper 003 does; claim "none"
  (non-convex GD is not contractive; docs/methods/conventions.md, The MLP), and `convex_only` in
  AlgorithmInfo.

Not on the privatiser path: one Gaussian draw on the final iterate, whose sensitivity holds by the
contraction of full-batch GD on a convex, smooth loss (ZZMW17), a theorem no privatiser mechanism states;
the run keeps the ledger and release checks (`not checked`: no steps).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Annotated, Sequence

import numpy as np

from dpbench.algorithms.base import (
    MAX_EPOCHS,
    Fit,
    PrivacyTarget,
    Problem,
    algorithm,
    batched,
    bounded_rows,
    hyperparameters,
    ledger,
    output_sensitivity_claim,
)
from dpbench.algorithms.sgd import project_to_ball
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import Param
from dpbench.models.base import Model
from dpbench.privacy import analytic_gaussian_sigma, gaussian_epsilon
from dpbench.privacy.erm import output_gd_sensitivity, zzmw_sensitivity
from dpbench.privacy.events import dpsgd_event_json

LIPSCHITZ_BOUNDS = ("paper", "data")
NOMINAL_LIPSCHITZ = 1.0
NOMINAL_SMOOTHNESS = 0.25
_LR_TOL = 1e-12  # relative slack when comparing a user lr with 2/(beta + mu)


@dataclass(frozen=True)
class OutputGDPlan:
    """Every constant of one run (what the ledger records)."""

    steps: int  # T
    lr: float
    l2: float  # lambda = mu
    smoothness: float  # beta = beta_s + lambda
    data_lipschitz: float  # G
    radius: float | None  # R (None: no projection)
    lipschitz: float  # L used in the sensitivity
    lipschitz_bound: str
    max_lr: float | None  # 2 / (beta + mu); None when beta + mu = 0 (no limit)
    sensitivity: float  # Delta_T
    sensitivity_formula: str
    zzmw_sensitivity: float | None  # 5 L (alpha + beta) / (n alpha beta), lambda > 0 only
    zzmw_step_condition: bool  # lr <= 1/(alpha + beta), the premise of [S2] Thm 17.4
    constants: str  # "model" or "nominal"


def plan_output_gd(model: Model, n: int, *, epochs: int = 100, lr: float | None = None, l2: float | None = None,
                   radius: float | None = None, lipschitz_bound: str = "paper") -> OutputGDPlan:
    """Check the hyperparameters against the sensitivity proof and compute Delta_T.

    Each value on its own is checked by the fit's `Param`s; this checks what they cannot express
    (lr against 2/(beta + mu), which depends on the model and l2).
    """
    epochs = int(epochs)
    lam = model.l2 if l2 is None else float(l2)
    constants = "model" if (model.lipschitz is not None and model.smoothness is not None) else "nominal"
    G = float(model.lipschitz) if model.lipschitz is not None else NOMINAL_LIPSCHITZ
    beta = (float(model.smoothness) if model.smoothness is not None else NOMINAL_SMOOTHNESS) + lam
    if radius is None:
        radius = G / lam if lam > 0 else None
    L = G + lam * radius if (lipschitz_bound == "paper" and radius is not None) else G
    max_lr = 2.0 / (beta + lam) if beta + lam > 0 else math.inf
    if lr is None:
        if not beta > 0:
            raise ValueError("output_perturbation_gd: smoothness beta = 0, so the default lr = 1/beta is undefined; "
                             "set lr")
        lr = 1.0 / beta
    elif lr > max_lr * (1 + _LR_TOL):
        raise ValueError(f"output_perturbation_gd: lr={lr:g} exceeds 2/(beta+mu)={max_lr:g} (beta = beta_s + l2 = "
                         f"{beta:g}, mu = l2 = {lam:g}); the contraction step of the sensitivity proof needs it")
    lr = float(min(lr, max_lr))  # only trims round-off within the 1e-12 slack
    sens = output_gd_sensitivity(L, n, lam, lr, epochs)
    formula = "(2 L / (n mu)) (1 - (1 - lr mu)^T)" if lam > 0 else "2 lr L T / n"
    zzmw = zzmw_sensitivity(L, n, lam, beta) if lam > 0 else None
    return OutputGDPlan(steps=epochs, lr=lr, l2=lam, smoothness=beta, data_lipschitz=G, radius=radius,
                        lipschitz=L, lipschitz_bound=lipschitz_bound,
                        max_lr=max_lr if math.isfinite(max_lr) else None, sensitivity=float(sens),
                        sensitivity_formula=formula, zzmw_sensitivity=zzmw,
                        zzmw_step_condition=bool(lam > 0 and lr <= 1.0 / (lam + beta) * (1 + _LR_TOL)),
                        constants=constants)


def output_gd_core(model: Model, X: np.ndarray, y: np.ndarray, theta0: np.ndarray, *, steps: int, lr: float,
                   l2: float, radius: float | None) -> np.ndarray:
    """theta_T before noise: T projected full-batch GD steps on mean data loss + (l2/2)||theta||^2.

    Deterministic given theta0; uses the model's vectorised `data_grad` plus l2 * theta (the model's
    own l2 is replaced by `l2`).
    """
    return output_gd_path(model, X, y, theta0, steps=(steps,), lr=lr, l2=l2, radius=radius)[int(steps)]


def output_gd_path(model: Model, X: np.ndarray, y: np.ndarray, theta0: np.ndarray, *, steps: Sequence[int],
                   lr: float, l2: float, radius: float | None) -> dict[int, np.ndarray]:
    """theta_T of `output_gd_core` for every T in `steps`, from one descent of max(steps) steps: the
    first T iterates of a longer run are the run of T steps (the same operations in the same order)."""
    wanted = {int(s) for s in steps}
    theta = np.array(theta0, dtype=float)
    X, y = np.asarray(X), np.asarray(y)
    out = {0: theta.copy()} if 0 in wanted else {}
    for t in range(1, max(wanted) + 1):
        g = model.data_grad(theta, X, y) + l2 * theta
        theta = project_to_ball(theta - lr * g, radius)
        if t in wanted:
            out[t] = theta.copy()
    return out


@algorithm("output_perturbation_gd",
           title="Output perturbation of projected full-batch GD (ZZMW 2017 / [S2] Alg. 1), analytic Gaussian",
           citation="Zhang, Zheng, Mou, Wang, Efficient Private ERM for Smooth Objectives, IJCAI 2017 (baseline [49] "
                    "of paper 003); paper 002 (CS325 lecture 17) Algorithm 1, Thm 17.4",
           private=True, convex_only=True)
def fit_output_perturbation_gd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    epochs: Annotated[int, Param("T full-batch GD steps", minimum=1, maximum=MAX_EPOCHS,
                                 paper="[S2] Alg. 1, Thm 17.5")] = 100,
    lr: Annotated[float | None, Param("step size; none: 1/beta (beta = beta_s + l2). Must be <= 2/(beta + l2), "
                                      "else an error", minimum=0, exclusive_minimum=True)] = None,
    l2: Annotated[float | None, Param("training L2 lambda (= strong convexity mu), replaces the model's l2 during "
                                      "training; none: the model's l2", minimum=0, paper="[S2] eq. (17.3)")] = None,
    radius: Annotated[float | None, Param("projection radius R; none: G/lambda (no projection if lambda = 0)",
                                          minimum=0, exclusive_minimum=True)] = None,
    lipschitz_bound: Annotated[str, Param(
        "L in Delta: paper (G + lambda R, the regularised loss) or data (G: the regulariser cancels)",
        choices=LIPSCHITZ_BOUNDS)] = "paper",
) -> Fit:
    eps, delta = _target(privacy)
    plan = plan_output_gd(problem.model, problem.n, epochs=epochs, lr=lr, l2=l2, radius=radius,
                          lipschitz_bound=lipschitz_bound)
    problem, rows = _training_rows(problem, plan)
    theta0 = problem.model.init(rng)
    theta = output_gd_core(problem.model, problem.X, problem.y, theta0, steps=plan.steps, lr=plan.lr, l2=plan.l2,
                           radius=plan.radius)
    return _release(problem.model, plan, theta, rng, eps, delta, rows)


def _target(privacy: PrivacyTarget) -> tuple[float, float]:
    if privacy.epsilon is None or privacy.delta is None:
        raise ValueError("output_perturbation_gd is a private algorithm: it needs a target epsilon and delta")
    return float(privacy.epsilon), float(privacy.delta)


def _training_rows(problem: Problem, plan: OutputGDPlan) -> tuple[Problem, dict]:
    """The rows GD runs on: projected into the unit ball where the claim rests on the model's
    constants (module docstring), as given otherwise; and what the ledger says of it."""
    if plan.constants == "model":  # G, beta_s hold for ||x|| <= 1 only: project (module docstring)
        return bounded_rows(problem)
    return problem, {}


def _release(model: Model, plan: OutputGDPlan, theta: np.ndarray, rng: np.random.Generator, eps: float,
             delta: float, rows: dict) -> Fit:
    """theta_T + N(0, s^2 I), s from the analytic Gaussian mechanism at Delta_T, and its ledger."""
    sens = plan.sensitivity
    std = analytic_gaussian_sigma(eps, delta, sens)
    kappa = rng.normal(0.0, std, size=theta.shape[0])
    spent = {"analytic_gaussian": gaussian_epsilon(std, delta, sens)}  # recomputed from the std used

    claim, details = output_sensitivity_claim(model, plan, spent, eps, "the sensitivity proof")
    claim_reason = details.pop("claim_reason", None)
    plan_d = asdict(plan)
    del plan_d["sensitivity"]
    return Fit(theta=theta + kappa, trace=[], privacy=ledger(
        private=True,
        mechanism="output perturbation of projected full-batch GD ([S2] Alg. 1, ZZMW 2017), analytic Gaussian "
                  "(Balle & Wang 2018)",
        claim=claim,
        target_epsilon=eps,
        delta=delta,
        epsilon_spent=spent,
        adjacency=Adjacency.REPLACE_ONE,
        sensitivity=plan.sensitivity,
        claim_reason=claim_reason,
        event=dpsgd_event_json(std / plan.sensitivity, 1.0, 1),
        noise_std=std,
        strong_convexity=plan.l2,
        **plan_d,
        **rows,
        **details,
    ))


def _batch_pays(model_class: type, params: dict) -> bool:
    """A linear model starts every replica at theta = 0, so replicas with the same step size, l2 and
    radius share one descent whatever their epsilon. An MLP's start comes from the cell's random
    stream, which a grid's hyperparameters share (`Cell.algorithm_rng`): the cells of one epsilon and
    repetition share one descent across their epoch counts (10 and 30 epochs: 30 steps instead of 40)."""
    return True


@batched(fit_output_perturbation_gd, varying=("epochs", "lr", "l2", "radius", "lipschitz_bound"), pays=_batch_pays)
def fit_output_perturbation_gd_batch(problem: Problem, privacies: Sequence[PrivacyTarget],
                                     rngs: Sequence[np.random.Generator], params: Sequence[dict]) -> list[Fit]:
    """Replicas of `fit_output_perturbation_gd` whose targets and hyperparameters may differ, with
    one descent per distinct (start, step size, l2, radius, rows): the noise-free GD of [S2] Alg. 1
    does not depend on epsilon, and its first T iterates are the run of T steps
    (`output_gd_path`), so a grid's epsilons and epoch counts share it. Each replica then draws
    its own noise from its own rng, after its own `model.init`, as the single fit does: every
    Fit equals the single fit's, bit for bit."""
    privacies, rngs = list(privacies), list(rngs)
    hypers = [hyperparameters(fit_output_perturbation_gd, p) for p in params]
    if not len(privacies) == len(rngs) == len(hypers):
        raise ValueError("a batched fit needs one privacy target, rng and hyperparameter set per replica")
    targets = [_target(p) for p in privacies]
    plans = [plan_output_gd(problem.model, problem.n, **h) for h in hypers]
    by_constants = {c: _training_rows(problem, next(p for p in plans if p.constants == c))
                    for c in {p.constants for p in plans}}  # the rows as trained on: projected once
    trained = [by_constants[plan.constants] for plan in plans]
    starts = [problem.model.init(rng) for rng in rngs]
    descents: dict[tuple, list[int]] = {}
    for r, (plan, start) in enumerate(zip(plans, starts)):
        key = (plan.lr, plan.l2, plan.radius, plan.constants, start.tobytes())
        descents.setdefault(key, []).append(r)
    thetas: dict[int, np.ndarray] = {}
    for members in descents.values():
        first = members[0]
        rows_problem = trained[first][0]
        path = output_gd_path(rows_problem.model, rows_problem.X, rows_problem.y, starts[first],
                              steps=[plans[r].steps for r in members], lr=plans[first].lr, l2=plans[first].l2,
                              radius=plans[first].radius)
        for r in members:
            thetas[r] = path[plans[r].steps]
    return [_release(problem.model, plans[r], thetas[r], rngs[r], *targets[r], trained[r][1])
            for r in range(len(rngs))]
