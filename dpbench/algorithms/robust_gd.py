"""Heavy-tailed DP-SCO by robust gradient descent: [S4] Algorithm 4 and its non-private RGD baseline.

[S4] = paper 004, Wang, Xiao, Devadas, Xu, "On differentially private stochastic convex
optimization with heavy-tailed data", ICML 2020: §5 eqs. (5)-(12), Algorithm 4, Theorems 6-8,
§6 Experiments (docs/methods/heavy-tailed.md, Algorithm 4 and Robust GD baseline). The maths
(estimator, scale, noise, zCDP) is in `dpbench.privacy.robust_mean`; this module only runs the loop
and writes the ledger.

``ht_robust_gd`` -- [S4] Algorithm 4 ("heavy-tailed DP-SCO with known variance")
------------------------------------------------------------------------------
    eps_tilde = (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2,
    s = sqrt(m v / (2 log(1/delta'))),  beta_m = log(1/delta')  (or 2 log(1/delta'), `beta_m`),
    sigma = sqrt(8 v p T / (9 log(1/delta') m eps_tilde)),       m = rows per step (n or B);
    for t = 1..T:
        U = model.per_example_grads(w, X_t, y_t)                 (m x p: p gradient coordinates)
        g = robust_mean(U, s, beta_m) + Z + model.reg_grad(w),    Z ~ N(0, sigma^2 I_p)
        w = P_W(w - lr g).
robust_mean is (1/m) sum_i s E phi(u_ij/s + |u_ij|/(s sqrt(beta_m)) xi) with every summand clipped
to [-(2sqrt2/3) s, (2sqrt2/3) s] ([S4] eq. (10)).

Privacy (replace-one; [S4] §5 after eq. (11), Bun & Steinke 2016): one step's data part has L2 sensitivity
Delta = (4sqrt2/3) s sqrt(p)/m, so it is Delta^2/(2 sigma^2)-zCDP; T adaptive steps are
rho = T Delta^2 / (2 sigma^2) = eps_tilde zCDP, i.e. (rho + 2 sqrt(rho log(1/delta)), delta) =
(eps, delta)-DP. The ledger recomputes rho and eps from the sigma actually used
(`epsilon_spent["zcdp"]`, via `zcdp_to_dp`) and, for comparison, the exact Gaussian-DP
composition of the same noise (`epsilon_spent["gdp"]`, smaller). The guarantee needs
(i) v, delta', s, beta_m to be data-independent constants -- they are hyperparameters; there is
no data-dependent standardisation (Holland's code standardises by the empirical mean/std: not
done here); (ii) each per-sample value bounded by (2sqrt2/3) s -- enforced by the clip in
`robust_mean`. It needs neither convexity nor a gradient bound, so it holds for any model,
including the MLP (the utility theorems 7-8 need convexity, smoothness and Assumption 4).

Choices (the paper leaves them open; all in the ledger):
* Regulariser: the robust mean is taken over the *data* gradients (`per_example_grads`, which
  exclude the model's L2 term, models/base.py) and model.reg_grad(w) = l2 w is added after the
  noise. The regulariser is known exactly, so estimating it robustly would only bias it (phi
  shrinks large values) and use up the second-moment budget v of Assumption 4; adding a
  data-independent term after the Gaussian is post-processing. The sensitivity concerns only
  the data part. ([S4] applies eq. (10) to grad l of whatever loss it trains; §6 says "ridge"
  without giving lambda; dpbench uses l2 = 1e-3, the ridge model's default.)
* lr: default 1/(model.smoothness + model.l2), [S4] Theorems 7-8 (eta = 1/beta_s) for the
  regularised objective: ridge 1/2.001 (smoothness 2 = 2 lambda_max(E x x^T) for E x x^T = I,
  e.g. the Gaussian features of `synthetic_linear`; heavier features, e.g. student_t with
  E x x^T = 3 I, need a smaller lr), logreg 1/(1/4 + l2). Models without a smoothness bound
  (MLP): 0.1 (`DEFAULT_LR_NO_SMOOTHNESS`, a documented constant; tune on validation data).
* v = 1.0 (default): [S4] never states its v. v scales s and sigma alike (both ~ sqrt(v)), so it
  is a bias/variance knob, not a privacy one: small v truncates more (bias), large v adds more
  noise. For reference, on `synthetic_linear` (Gaussian features) with ridge,
  E[(grad_j l)^2] = 4 E[(<w - w*, x> - e)^2 x_j^2] = 4 (||w - w*||^2 + 2 (w - w*)_j^2 + Var e),
  Var e = (e^{sigma_n^2} - 1) e^{sigma_n^2}: 18.7 at w = w* and 22.7 + 8 w*_j^2 at w = 0 for
  sigma_n = 1; 322 and 326 + 8 w*_j^2 for sigma_n = 1.5. Set v in the YAML to the bound of
  Assumption 4 you want to assume.
* delta' = 0.01 (default; [S4] does not state it).
* beta_m = "log" (default): log(1/delta'), [S4] Alg. 4 line 1; "2log": 2 log(1/delta'), [S4]
  Lemma 3 / Holland 2019 Lemma 5. Privacy does not depend on it.
* radius: projection P_W onto {||w|| <= radius}; default None = no projection (W = R^p). The
  privacy proof does not need W; Theorems 7-8 assume a bounded W containing the ball of
  Assumption 5 -- set radius >= ||w*|| + 2 ||w0 - w*|| to follow them.
* T = `steps` (default 50; [S4] §6 plots iterations, T = O((beta_s/mu) log n) in Thm 7).
* batch_size B (default None = full batch): the "stochastic version ... with minibatch size 1000"
  of [S4] §6. Each step draws a fresh uniform batch of B distinct rows (without replacement
  within the step, independently across steps), and s, sigma are computed with n -> B. No
  privacy amplification by subsampling is claimed, and none is needed for the bound: the batch
  indices are drawn independently of the data, and for *every* fixed sequence of batches the
  T steps are Gaussian mechanisms of sensitivity <= Delta_B = (4sqrt2/3) s_B sqrt(p)/B (0 at
  steps whose batch misses the differing row), hence T Delta_B^2/(2 sigma^2) = eps_tilde zCDP;
  releasing the index sequence alongside keeps that bound (Renyi divergence of a data-independent
  mixture is at most the worst case), and the output alone is post-processing. So the same
  (eps, delta) holds -- conservative, since subsampling would give more.
* Randomness: `model.init(rng)` first, then `rng.spawn(2)` gives independent streams for the
  batches and for the noise, so `rgd` and `ht_robust_gd` with the same seed see the same batches.
* Traces (`trace_every` = k > 0): {"step": 0, "theta"} before the first step, then after every
  k-th step and after the last; the cell layer evaluates the metrics on these snapshots.

``rgd`` -- non-private robust gradient descent (Holland, AISTATS 2019), [S4] §6's baseline
----------------------------------------------------------------------------------------------
The Alg. 4 estimator with the same s and beta_m (set by `v`, `delta_prime`, `beta_m`) and Z = 0 -- a
like-for-like baseline that isolates the cost of the noise. Holland's own code standardises each
coordinate by its empirical mean/std instead; that variant is not implemented. Stochastic RGD:
`batch_size`. Ledger: non-private (claim "none").

Checks and corrections: tests/privacy/test_robust_mean.py reproduces Algorithm 4's constants at n =
100,000, d = 10, T = 50, v = 1, delta' = 0.01, eps = 1, delta = 1e-5 (eps_tilde = 0.0208, s = 104,
sigma = 0.215) and the zCDP round trip. The direct closed form of E phi is not stable at large |u|/s
(error ~1e-16 b^2); `dpbench.privacy.robust_mean` switches to quadrature there. Paper defects noted
in that module (|phi| <= 2sqrt2/2 misprint, beta_m = log vs 2 log(1/delta') between Alg. 4 and Lemma
3, beta used for two things); [S4] does not describe the accounting of its minibatch variant (the
choice above: n -> B, no amplification).

Not on the privatiser path: each step releases a robust mean estimate of the gradients whose
sensitivity comes from the estimator's analysis (a `noisy_statistic`), not from per-record clipping;
the steps are reported and held to the ledger by the release check.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated

import numpy as np

from dpbench.algorithms import releases
from dpbench.algorithms.base import MAX_STEPS, NON_PRIVATE_LEDGER, Fit, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.sgd import project_to_ball
from dpbench.core.gaussian import normal
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import Param
from dpbench.models.base import Model
from dpbench.privacy import gaussian_epsilon, zcdp_to_dp
from dpbench.privacy.events import dpsgd_event_json
from dpbench.privacy.robust_mean import (
    BETA_RULES,
    BLOCK_ENTRIES,
    PHI_BOUND,
    alg4_eps_tilde,
    alg4_rho,
    alg4_sigma,
    robust_beta,
    robust_mean_sensitivity,
    robust_scale,
    robust_sum,
)

DEFAULT_LR_NO_SMOOTHNESS = 0.1
_EPS_SLACK = 1e-9  # relative: recomputed eps vs target (rounding only)

# the hyperparameters ht_robust_gd and rgd share (each fit declares them with these types and defaults)
Steps = Annotated[int, Param("number T of gradient steps", minimum=1, maximum=MAX_STEPS, paper="[S4] Thm 7")]
LearningRate = Annotated[float | None, Param(
    "step size; none: 1/(model.smoothness + l2) ([S4] Thms 7-8, eta = 1/beta_s), "
    f"or {DEFAULT_LR_NO_SMOOTHNESS} for a model without a smoothness bound",
    minimum=0, exclusive_minimum=True, paper="[S4] Thms 7-8")]
SecondMoment = Annotated[float, Param("known bound on E[(grad_j l)^2] ([S4] Assumption 4); "
                                      "sets s = sqrt(m v/(2 log(1/delta')))", minimum=0, exclusive_minimum=True,
                                      paper="[S4] Assumption 4")]
DeltaPrime = Annotated[float, Param("failure probability delta' of the robust mean ([S4] Lemma 3, Alg. 4)",
                                    minimum=0, exclusive_minimum=True, maximum=1.0, paper="[S4] Lemma 3, Alg. 4")]
BetaRule = Annotated[str, Param("precision of the multiplicative noise: log = log(1/delta') ([S4] Alg. 4), "
                                "2log = 2 log(1/delta') ([S4] Lemma 3, Holland)", choices=BETA_RULES,
                                paper="[S4] Alg. 4 line 1, Lemma 3")]
Radius = Annotated[float | None, Param("projection radius of W (none: no projection)",
                                       minimum=0, exclusive_minimum=True)]
BatchSize = Annotated[int | None, Param("rows per step (none: full batch); a fresh uniform batch each step, "
                                        "s (and sigma) computed with n -> batch_size", minimum=1, paper="[S4] §6")]
TraceEvery = Annotated[int, Param("snapshot the iterate at step 0, every this many steps and at the end "
                                  "(0: no trace)", minimum=0)]


@dataclass(frozen=True)
class RobustGDPlan:
    """Every constant of one run (what the ledger records)."""

    steps: int  # T
    lr: float
    lr_source: str
    v: float
    delta_prime: float
    beta_rule: str
    beta_m: float
    batch_size: int | None  # None: full batch
    rows_per_step: int  # m = n or B: the n of s and sigma
    scale: float  # s
    value_bound: float  # (2 sqrt2 / 3) s: every per-sample robust value is clipped to +-this
    radius: float | None
    trace_every: int


def plan_robust_gd(model: Model, n: int, *, algorithm: str, steps: int = 50, lr: float | None = None,
                   v: float = 1.0, delta_prime: float = 0.01, beta_m: str = "log", radius: float | None = None,
                   batch_size: int | None = None, trace_every: int = 0) -> RobustGDPlan:
    """Compute s, beta_m and lr; check what the fit's `Param`s cannot (one-line ValueErrors naming
    `algorithm`): delta' < 1 (Param's maximum is inclusive) and batch_size <= n."""
    if not delta_prime < 1:
        raise ValueError(f"{algorithm}: delta_prime must be in (0, 1), got {delta_prime!r}")
    if batch_size is not None and batch_size > n:
        raise ValueError(f"{algorithm}: batch_size must be <= the number of training rows {n}, got {batch_size}")
    if lr is None:
        if model.smoothness is not None and model.smoothness + model.l2 > 0:
            lr, lr_source = 1.0 / (model.smoothness + model.l2), "1/(model.smoothness + l2)"
        else:
            lr, lr_source = DEFAULT_LR_NO_SMOOTHNESS, "constant (model has no smoothness bound)"
    else:
        lr_source = "lr"
    rows = n if batch_size is None else batch_size
    scale = robust_scale(rows, v, delta_prime)
    return RobustGDPlan(steps=steps, lr=lr, lr_source=lr_source, v=v, delta_prime=float(delta_prime),
                        beta_rule=beta_m, beta_m=robust_beta(delta_prime, beta_m), batch_size=batch_size,
                        rows_per_step=rows, scale=scale, value_bound=PHI_BOUND * scale, radius=radius,
                        trace_every=trace_every)


def robust_gd_core(
    problem: Problem,
    rng: np.random.Generator,
    *,
    steps: int,
    lr: float,
    scale: float,
    beta: float,
    noise_std: float = 0.0,
    batch_size: int | None = None,
    radius: float | None = None,
    theta0: np.ndarray | None = None,
    trace_every: int = 0,
) -> tuple[np.ndarray, list[dict]]:
    """T steps w <- P_r(w - lr (robust_mean(U_t, s, beta) + Z_t + reg_grad(w))); no privacy logic.

    robust_mean is accumulated with `robust_sum` over row blocks of BLOCK_ENTRIES / p rows (same
    estimator, summation order aside).
    U_t = per-example data gradients at w on the full data (batch_size None) or on a fresh
    uniform batch of `batch_size` distinct rows; Z_t ~ N(0, noise_std^2 I) (skipped when 0).
    theta0 None: model.init(rng). Batches and noise come from two streams spawned from `rng`
    after the init, so the batch sequence does not depend on noise_std.
    Trace (trace_every = k > 0): {"step": 0, "theta"} first, then after every k-th and the last step.

    Every step is reported (`releases.release`) as kind "noisy_statistic": released =
    robust_mean(U_t, s, beta) + Z_t (before the regulariser's gradient), with noise_std = the std of
    Z_t actually added (`noise_std`, 0 when skipped), weight 1, rate 1 (full batch) or
    batch_size / n (a fresh uniform batch of distinct rows: each record's inclusion probability),
    clip_norm None: the robust mean bounds every per-sample *coordinate* by (2sqrt2/3) s, not a
    per-example L2 norm, so a record moves the statistic by at most the ledger's `sensitivity`
    ((4sqrt2/3) s sqrt(p)/m, replace-one) but not by a known function of its gradient.
    """
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    theta = model.init(rng) if theta0 is None else np.array(theta0, dtype=float)
    batch_rng, noise_rng = rng.spawn(2)
    p = theta.shape[0]
    rate = 1.0 if batch_size is None else batch_size / n
    block = max(1, BLOCK_ENTRIES // p)  # rows per block: per-example gradients stay in cache
    trace: list[dict] = []
    if trace_every:
        trace.append({"step": 0, "theta": theta.copy()})
    for t in range(1, steps + 1):
        if batch_size is None:
            Xb, yb = X, y
        else:
            idx = batch_rng.choice(n, size=batch_size, replace=False)
            Xb, yb = X[idx], y[idx]
        m = Xb.shape[0]
        g = np.zeros(p)
        for start in range(0, m, block):  # robust_mean of the per-example data gradients, block by block
            g += robust_sum(model.per_example_grads(theta, Xb[start:start + block], yb[start:start + block]),
                            scale, beta)
        g /= m
        if noise_std > 0.0:
            g = g + normal(noise_rng, noise_std, p)
        releases.release(t, theta, g, noise_std if noise_std > 0.0 else 0.0, rate=rate, kind="noisy_statistic")
        g = g + model.reg_grad(theta)
        theta = project_to_ball(theta - lr * g, radius)
        if trace_every and (t % trace_every == 0 or t == steps):
            trace.append({"step": t, "theta": theta.copy()})
    return theta, trace


def _sampling(plan: RobustGDPlan, n: int) -> dict:
    if plan.batch_size is None:
        return {"kind": "full batch", "rate": 1.0}
    return {"kind": "fresh uniform batch of distinct rows each step (no amplification claimed)",
            "rate": plan.batch_size / n}


@algorithm("ht_robust_gd",
           title="Heavy-tailed DP-SCO: robust (Catoni-Giulini/Holland) gradient mean + Gaussian noise ([S4] Alg. 4)",
           citation="Wang, Xiao, Devadas, Xu, On differentially private stochastic convex optimization with "
                    "heavy-tailed data, ICML 2020 (paper 004), Algorithm 4, Theorems 7-8",
           private=True, updates=True)
def fit_ht_robust_gd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    steps: Steps = 50,
    lr: LearningRate = None,
    v: SecondMoment = 1.0,
    delta_prime: DeltaPrime = 0.01,
    beta_m: BetaRule = "log",
    radius: Radius = None,
    batch_size: BatchSize = None,
    trace_every: TraceEvery = 0,
) -> Fit:
    """[S4] Algorithm 4 (robust gradient + Gaussian noise, zCDP accounting); see the module docstring."""
    if privacy.epsilon is None or privacy.delta is None:
        raise ValueError("ht_robust_gd is a private algorithm: it needs a target epsilon and delta")
    eps, delta = float(privacy.epsilon), float(privacy.delta)
    model, n = problem.model, problem.n
    plan = plan_robust_gd(model, n, algorithm="ht_robust_gd", steps=steps, lr=lr, v=v, delta_prime=delta_prime,
                          beta_m=beta_m, radius=radius, batch_size=batch_size, trace_every=trace_every)
    p = model.n_params
    m = plan.rows_per_step
    eps_tilde = alg4_eps_tilde(eps, delta)
    sigma = alg4_sigma(plan.v, p, plan.steps, m, plan.delta_prime, eps_tilde)
    sensitivity = robust_mean_sensitivity(plan.scale, m, p)
    theta, trace = robust_gd_core(problem, rng, steps=plan.steps, lr=plan.lr, scale=plan.scale, beta=plan.beta_m,
                                  noise_std=sigma, batch_size=plan.batch_size, radius=plan.radius,
                                  trace_every=plan.trace_every)
    rho = alg4_rho(sigma, sensitivity, plan.steps)  # from the sigma actually used
    spent = {"zcdp": zcdp_to_dp(rho, delta), "gdp": gaussian_epsilon(sigma, delta, sensitivity, plan.steps)}
    within = spent["zcdp"] <= eps * (1.0 + _EPS_SLACK)
    return Fit(theta=theta, trace=trace, privacy=ledger(
        private=True,
        mechanism="[S4] Alg. 4: per-coordinate Catoni-Giulini/Holland robust mean of the per-example data "
                  "gradients (each value clipped to (2sqrt2/3)s) + Gaussian noise, T adaptively composed steps, "
                  "zCDP accounting",
        claim="valid" if within else "paper-only",
        target_epsilon=eps,
        delta=delta,
        epsilon_spent=spent,
        adjacency=Adjacency.REPLACE_ONE,
        sensitivity=sensitivity,
        event=dpsgd_event_json(sigma / sensitivity, 1.0, plan.steps),
        guarantee="T Gaussian mechanisms at L2 sensitivity (4sqrt2/3) s sqrt(p)/m: rho = T Delta^2/(2 sigma^2) "
                  "zCDP => (rho + 2 sqrt(rho log(1/delta)), delta)-DP (Bun & Steinke 2016); "
                  "docs/methods/heavy-tailed.md, Algorithm 4",
        claim_reason="valid because v, delta', s and beta_m are data-independent constants (hyperparameters, no "
                     "empirical standardisation) and every per-sample robust value is clipped to +-(2sqrt2/3)s; "
                     "no convexity or gradient bound is needed for privacy"
                     + ("" if plan.batch_size is None else "; minibatch: s and sigma use n -> B, batches drawn "
                        "independently of the data, no subsampling amplification claimed"),
        accountant_note="epsilon_spent.zcdp: zcdp_to_dp(rho, delta) with rho recomputed from the sigma used "
                        "(the paper's accounting); epsilon_spent.gdp: exact Gaussian-DP composition of the same "
                        "noise (tighter, for comparison)",
        eps_tilde=eps_tilde,
        rho=rho,
        noise_std=sigma,
        noise_std_formula="sigma = sqrt(8 v p T / (9 log(1/delta') m eps_tilde)), m = rows per step",
        sensitivity_per_coordinate=2.0 * plan.value_bound / m,
        noise_multiplier=sigma / sensitivity,
        sampling=_sampling(plan, n),
        regulariser="model l2 * w added after the noise (data independent: post-processing)",
        n_params=p,
        **asdict(plan),
    ))


@algorithm("rgd",
           title="Robust gradient descent (Holland 2019), the non-private baseline of [S4] §6 (Alg. 4 estimator, "
                 "no noise)",
           citation="Holland, Robust descent using smoothed multiplicative noise, AISTATS 2019; paper 004 §6 "
                    "baseline",
           private=False)
def fit_rgd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    steps: Steps = 50,
    lr: LearningRate = None,
    v: SecondMoment = 1.0,
    delta_prime: DeltaPrime = 0.01,
    beta_m: BetaRule = "log",
    radius: Radius = None,
    batch_size: BatchSize = None,
    trace_every: TraceEvery = 0,
) -> Fit:
    """Holland's RGD with the Alg. 4 estimator and no noise; non-private (docs/methods/heavy-tailed.md,
    Robust GD baseline)."""
    plan = plan_robust_gd(problem.model, problem.n, algorithm="rgd", steps=steps, lr=lr, v=v,
                          delta_prime=delta_prime, beta_m=beta_m, radius=radius, batch_size=batch_size,
                          trace_every=trace_every)
    theta, trace = robust_gd_core(problem, rng, steps=plan.steps, lr=plan.lr, scale=plan.scale, beta=plan.beta_m,
                                  noise_std=0.0, batch_size=plan.batch_size, radius=plan.radius,
                                  trace_every=plan.trace_every)
    return Fit(theta=theta, trace=trace, privacy=ledger(
        **NON_PRIVATE_LEDGER,
        method="robust gradient descent (Holland 2019) with the [S4] Alg. 4 estimator (same s, beta_m), no noise",
        sampling=_sampling(plan, problem.n),
        **asdict(plan),
    ))
