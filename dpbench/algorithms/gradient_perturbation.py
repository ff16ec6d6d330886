"""The two gradient-perturbation baselines of [S3] (paper 003) §6: BST14 noisy SGD and WYX17 DP-GD.

[S3] §6 compares input perturbation with "the gradient perturbation methods proposed in [4] and
[43] (without DP-SVRG)", i.e. Bassily, Smith, Thakurta (FOCS 2014) and Wang, Ye, Xu (NeurIPS
2017); [S3] Table 1 gives their noise bounds. [S3] §6 reports that [4]'s accuracy and optimality
gap "fluctuate sharply" because of its large noise. Both algorithms are registered here:

``noisy_sgd_bst14`` -- BST14 Alg. 1 (docs/methods/gradient-perturbation.md, BST14)
--------------------------------------------------------------------------------
Averaged-gradient form, for t = 1..T:
    d_t ~ Uniform(D) (one example, *with* replacement)
    theta_{t+1} = Proj_C(theta_t - eta_t [clip(grad l(theta_t; d_t), G) + grad reg(theta_t) + b_t]),
    b_t ~ N(0, sigma^2 I_p),  sigma = bst14_sigma(G, n, eps, delta)
                                    = sqrt(32 G^2 log(n/delta) log(1/delta)) / eps,
returning theta_{T+1}. BST14's objective is the *sum* sum_i l(theta; d_i) with the step
theta - eta(t) [n grad l(theta; d) + b_t^sum], b^sum ~ N(0, sigma_sum^2 I),
sigma_sum^2 = 32 G^2 n^2 log(n/delta) log(1/delta)/eps^2 (BST14 Alg. 1 line 1); writing
n grad l + b^sum = n (grad l + b^sum/n) gives the averaged form with sigma = sigma_sum/n and
eta' = n eta (the two produce identical iterates).

Step sizes (`lr_schedule`), derived from the sum form:
* "bst14_convex" (BST14's convex step size eta(t) = ||C||_2 / sqrt(t (n^2 G^2 + p sigma_sum^2))):
      eta'(t) = n eta(t) = n ||C|| / sqrt(t (n^2 G^2 + p n^2 sigma^2)) = ||C|| / sqrt(t (G^2 + p sigma^2)).
  We take ||C|| = `radius` r. BST14 may define ||C||_2 as the L2 *diameter* (= 2r for a ball);
  that factor of 2 is not checked against the BST14 text (the ledger's `step_size_formula`
  records the formula used).
  G in the denominator bounds the per-example gradient of the *regularised* loss on C:
  G_step = G + l2 r (data part clipped to G, regulariser l2 ||theta|| <= l2 r).
* "bst14_strongly_convex" (BST14's eta(t) = 1/(Delta_sum t), Delta_sum = n mu the strong convexity
  of the sum): eta'(t) = n / (n mu t) = 1 / (mu t), mu = model.l2 (strong convexity of the
  averaged regularised objective; requires l2 > 0).
* "constant": eta_t = `lr` (tune on validation data).

Constants: G = `clip_norm` if set, else model.lipschitz (logreg: 1, for rows with ||x|| <= 1), else
1.0 (MLP, ridge: no global bound; docs/methods/conventions.md, The MLP). Per-example gradients are
always clipped to G: a no-op when G is a true bound, and what makes the sensitivity hold otherwise.
Projection radius r = `radius`, default G / l2 when l2 > 0 (the regularised minimiser satisfies
l2 theta* = -mean grad l, so ||theta*|| <= G / l2: the ball contains it); no projection when
l2 = 0 and no radius is given (then "bst14_convex" is refused: it needs ||C||).

Number of steps. BST14 runs T = n^2 steps (Adult: 2e9, infeasible on 2 cores). We run
T = `steps` (default 2000; null = n^2, feasible for Iris / Breast Cancer / Credit Card) with the
*same* per-step noise sigma: the first T steps of a mechanism that is (eps, delta)-DP after n^2
adaptively composed steps are a post-processing of it (drop the remaining outputs; or note that
advanced composition of fewer steps gives a smaller bound), so the truncated run is still
(eps, delta)-DP. This is the only feasible reading and the one under which
[S3]'s "fluctuates sharply" is reproducible. A `steps` above n^2 is clamped to n^2 (BST14's
theorem covers at most n^2 steps); ledger `steps_paper` = n^2, `steps_run`, `steps_requested`.

Privacy ledger: claim "valid" by BST14's privacy theorem (replace-one adjacency; each step a
Gaussian mechanism with sensitivity 2G on the one-example gradient, amplified by sampling rate
1/n, advanced composition over n^2 steps): epsilon_spent["bst14_theorem"] = eps. For comparison
the ledger also reports what a modern accountant says the *same noise* buys: noise multiplier
z = sigma / (2G) (replace-one sensitivity of one clipped gradient is 2G) at sampling rate 1/n over
steps_run steps, ``dpsgd_epsilon_report(z, 1/n, steps_run, delta)`` as "rdp_poisson_approx" /
"pld_poisson_approx". That treats with-replacement uniform sampling of one example as Poisson
sampling at rate 1/n with an add/remove-style accountant at sensitivity 2G: an approximation, not
a proof (ledger `accountant_note`).

Implementation: the step loop is sequential in theta, so each chunk of up to 4096 steps draws its
indices (``rng.integers``) and its noise (``rng.normal(size=(chunk, p))``) up front, scales the
noise by eta_t once, and the per-step Python work is a dot product, the clip factor and one fused
update (generalised linear models); other models call ``model.clipped_grad_sum`` on one row.
Chunks are shrunk so a noise block holds at most 2^22 floats (32 MB) for large p (the MLP).
With zero noise, chunking does not change the result (index draws are chunk invariant).

``dp_gd`` -- Wang, Ye, Xu 2017 full-batch DP-GD, without DP-SVRG (docs/methods/gradient-perturbation.md, WYX17)
----------------------------------------------------------------------------------------------------------
    theta_{t+1} = Proj_C(theta_t - eta [(1/n) sum_i clip(grad l(theta_t; z_i), C) + b_t] - eta grad reg(theta_t)),
    b_t ~ N(0, s^2 I_p), t = 1..T, output theta_{T+1}.
Calibration "gdp" (default; Dong, Roth, Su 2019; docs/accounting.md, Full-batch Gaussian
composition): replace-one sensitivity of the clipped mean gradient Delta = 2C/n; T adaptively
composed Gaussian steps are exactly mu-GDP with mu = sqrt(T) Delta / s;
s = ``gaussian_composition_sigma(eps, delta, T, 2C/n)``.
Calibration "paper": s^2 = c C^2 T log(1/delta) / (n^2 eps^2) ([S3] Table 1 row "[43]
(traditional)", constant c unspecified, default 1); the ledger then reports
``gaussian_epsilon(s, delta, 2C/n, T)`` and the claim is "valid" only if that is within the
target ("paper-only" otherwise; at c = 1 it is not: the exact calibration corresponds to c ~ 4.8
at T = 10, eps = 1, delta = 1e-5).
C = `clip_norm`, default model.lipschitz, else 1.0; clipping bounds the sensitivity for any
model, so the claim holds for the MLP too. `lr` default 1.0 (1/beta_s would be 4 for
logreg; tune it); `radius` default none (no projection). The clipped sum comes from
``model.clipped_grad_sum`` (no n x p matrix).

Not on the privatiser path: BST14 samples with replacement and rests on its own theorem (not
a dp-accounting event), and DP-GD's calibration and batched twins are its own; both clip per
example in every step and report every step, which the release check holds to the ledger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Callable

import numpy as np

from dpbench.algorithms import releases
from dpbench.algorithms.base import MAX_EPOCHS, MAX_STEPS, Fit, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.sgd import project_to_ball, training_loss_trace
from dpbench.core.gaussian import normal
from dpbench.core.ledger import Adjacency, Ledger
from dpbench.core.registry import Param
from dpbench.models.base import Model
from dpbench.models.linear import _GLM
from dpbench.privacy import dpsgd_epsilon_report, gaussian_composition_sigma, gaussian_epsilon
from dpbench.privacy.events import dpsgd_event_json
from dpbench.privacy.gradient_noise import bst14_sigma, wyx17_classical_sigma

BST14_SCHEDULES = ("bst14_convex", "bst14_strongly_convex", "constant")
DPGD_CALIBRATIONS = ("gdp", "paper")
CHUNK_STEPS = 4096  # steps whose indices and noise are drawn together
_CHUNK_FLOATS = 1 << 22  # at most this many noise floats per chunk (32 MB)
_EPS_SLACK = 1e-9  # relative slack when comparing a computed epsilon with the target

TraceFn = Callable[[int, np.ndarray], dict]


# =============================================================================================
# shared helpers
# =============================================================================================
def _require_target(privacy: PrivacyTarget, name: str) -> tuple[float, float]:
    if privacy.epsilon is None or privacy.delta is None:
        raise ValueError(f"{name} is a private algorithm: it needs a target epsilon and delta")
    return float(privacy.epsilon), float(privacy.delta)


def gradient_bound(model: Model, clip_norm: float | None) -> tuple[float, str]:
    """(G, where it came from): `clip_norm` if set, else model.lipschitz, else 1.0."""
    if clip_norm is not None:
        return float(clip_norm), "clip_norm"
    if model.lipschitz is not None:
        return float(model.lipschitz), "model.lipschitz"
    return 1.0, "default 1.0 (the model has no global gradient bound)"


def default_radius(model: Model, G: float, radius: float | None) -> tuple[float | None, str]:
    """(radius, where it came from): `radius` if set, else G / l2 when l2 > 0, else None."""
    if radius is not None:
        return float(radius), "radius"
    if model.l2 > 0:
        return G / model.l2, "G / l2 (contains the regularised minimiser)"
    return None, "none (l2 = 0 and no radius given: no projection)"


# =============================================================================================
# BST14 noisy SGD
# =============================================================================================
def bst14_step_sizes(schedule: str, *, lr: float | None, radius: float | None, G: float, p: int, sigma: float,
                     mu: float) -> Callable[[np.ndarray], np.ndarray]:
    """eta(t) for steps t = 1, 2, ... (vectorised over a numpy array of t), averaged-gradient form.

    "bst14_convex": radius / sqrt(t ((G + mu radius)^2 + p sigma^2))  (= n * BST14's sum-form eta);
    "bst14_strongly_convex": 1 / (mu t); "constant": lr. See the module docstring for the derivation.
    """
    if schedule == "constant":
        rate = float(lr)
        return lambda t: np.full(np.shape(t), rate)
    if schedule == "bst14_convex":
        if radius is None:
            raise ValueError("lr_schedule bst14_convex needs a projection radius ||C||: set `radius` "
                             "(or use a model with l2 > 0, whose default radius is G/l2)")
        g_step = G + mu * radius
        scale = radius / math.sqrt(g_step**2 + p * sigma**2)
        return lambda t: scale / np.sqrt(np.asarray(t, dtype=float))
    if schedule == "bst14_strongly_convex":
        if not mu > 0:
            raise ValueError("lr_schedule bst14_strongly_convex needs a strongly convex objective (model l2 > 0)")
        return lambda t: 1.0 / (mu * np.asarray(t, dtype=float))
    raise ValueError(f"unknown lr_schedule {schedule!r}; choose one of {', '.join(BST14_SCHEDULES)}")


def plain_glm(model: Model) -> bool:
    """A generalised linear model with the base class's L2 term: the fast per-step path applies."""
    return isinstance(model, _GLM) and type(model).reg_grad is Model.reg_grad


def bst14_chunk(p: int, chunk: int = CHUNK_STEPS) -> int:
    """Steps whose indices and then noise `bst14_core` draws together (at most _CHUNK_FLOATS noise floats)."""
    return max(1, min(int(chunk), _CHUNK_FLOATS // max(p, 1)))


def bst14_core(
    problem: Problem,
    rng: np.random.Generator,
    *,
    steps: int,
    step_size: Callable[[np.ndarray], np.ndarray],
    clip_norm: float,
    noise_std: float,
    radius: float | None = None,
    theta0: np.ndarray | None = None,
    chunk: int = CHUNK_STEPS,
    trace_every: int = 0,
    on_trace: TraceFn | None = None,
) -> tuple[np.ndarray, list[dict]]:
    """Run `steps` single-example noisy SGD steps (BST14 Alg. 1 loop, averaged form); no privacy logic.

    theta_{t+1} = Proj_r(theta_t - eta_t [clip(grad l(theta_t; x_{i_t}), C) + grad reg(theta_t) + b_t]),
    i_t ~ Uniform{0..n-1} (with replacement), b_t ~ N(0, noise_std^2 I), eta_t = step_size(t),
    t = 1..steps. Per chunk of steps: indices, then (if noise_std > 0) the (chunk, p) noise block.
    Returns the final iterate and the trace (one dict every `trace_every` steps and at the end).

    Every step is reported (`releases.release`, kind "gradient_sum") as the noisy gradient before
    the step size, clip(grad l(theta_t; x_{i_t}), C) + b_t: the "batch" is the one sampled example,
    so released = 1 * (sum of the batch's clipped gradients + N(0, noise_std^2 I)), weight 1,
    clip_norm C. Sampling one example uniformly *with replacement* is reported as inclusion
    probability rate = 1/n per step (a given record is the step's example with probability 1/n;
    the batch always has exactly one example, it is not Poisson). The released vector is only
    built while somebody observes (`releases._observed()`); it draws nothing. Unobserved, the steps
    are reported in bulk after the loop (`releases.released_steps`, for a tally).
    """
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    if isinstance(steps, bool) or int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    if not clip_norm > 0:
        raise ValueError(f"clip_norm must be > 0, got {clip_norm}")
    theta = model.init(rng) if theta0 is None else np.array(theta0, dtype=float)
    p = theta.shape[0]
    chunk = bst14_chunk(p, chunk)
    r2 = None if radius is None else float(radius) ** 2
    fast = plain_glm(model)
    l2 = model.l2
    C = float(clip_norm)
    observe = releases._observed()  # build the released vectors only for a listener
    rate = 1.0 / n  # with-replacement single-example sampling, reported as inclusion probability 1/n per step
    trace: list[dict] = []
    done = 0
    while done < steps:
        k = min(chunk, steps - done)
        idx = rng.integers(0, n, size=k)
        t = np.arange(done + 1, done + k + 1)
        eta = np.asarray(step_size(t), dtype=float)
        noise = None
        raw = None  # b_t before the step size (kept only for the releases)
        if noise_std > 0.0:
            noise = normal(rng, noise_std, (k, p))
            if observe:
                raw = noise.copy()
            noise *= eta[:, None]  # eta_t b_t, the noise actually added to theta
        Xc = np.asarray(X[idx], dtype=np.float64)
        yc = np.asarray(y[idx], dtype=np.float64)
        if fast:
            row_norms = np.sqrt(np.einsum("ij,ij->i", Xc, Xc))
            dphi = model._dphi
        for j in range(k):
            e = float(eta[j])
            theta_t = theta  # never modified in place below (each step builds a new array)
            if fast:
                xi = Xc[j]
                s = float(dphi(np.float64(xi @ theta), yc[j]))
                norm = abs(s) * row_norms[j]
                coef = s if norm <= C else s * (C / norm)  # clip factor min(1, C/||g||); 0 gradient -> 1
                theta = theta * (1.0 - e * l2) - (e * coef) * xi
                if observe:
                    g = coef * xi  # the sampled example's clipped data gradient
            else:
                g, _ = model.clipped_grad_sum(theta, Xc[j:j + 1], yc[j:j + 1], C)
                theta = theta - e * (g + model.reg_grad(theta))
            if observe:
                releases.release(done + j + 1, theta_t, g if raw is None else g + raw[j], noise_std, rate=rate,
                                 clip_norm=C)
            if noise is not None:
                theta -= noise[j]
            if r2 is not None:
                sq = float(theta @ theta)
                if sq > r2:
                    theta *= math.sqrt(r2 / sq)
            step = done + j + 1
            if trace_every and on_trace is not None and (step % trace_every == 0 or step == steps):
                trace.append({"step": step, **on_trace(step, theta)})
        done += k
    if not observe:  # no step was reported one by one: all of them in bulk, declared as each would be
        releases.released_steps(steps, noise_std, rate=rate, clip_norm=C)
    return theta, trace


@algorithm("noisy_sgd_bst14",
           title="BST14 noisy SGD: one example per step, Gaussian gradient noise, projection (truncated to T steps)",
           citation="Bassily, Smith, Thakurta, Private ERM: efficient algorithms and tight error bounds, FOCS 2014 "
                    "(Alg. 1); paper 003 ref. [4], Table 1",
           private=True, updates=True)
def fit_noisy_sgd_bst14(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    steps: Annotated[int | None, Param("steps run T (same per-step noise as the paper's n^2 steps; "
                                       "null = n^2; clamped to n^2)", minimum=1, maximum=MAX_STEPS,
                                       paper="BST14 Alg. 1 (T = n^2)")] = 2000,
    lr_schedule: Annotated[str, Param(
        "bst14_convex: radius/sqrt(t((G+l2 r)^2 + p sigma^2)); bst14_strongly_convex: 1/(l2 t); constant: lr",
        choices=BST14_SCHEDULES, paper="BST14 Alg. 1")] = "bst14_convex",
    lr: Annotated[float, Param("step size of lr_schedule constant (tune on validation data)",
                               minimum=0, exclusive_minimum=True)] = 0.01,
    radius: Annotated[float | None, Param("projection radius r (none: G/l2 if l2 > 0, else no projection)",
                                          minimum=0, exclusive_minimum=True)] = None,
    clip_norm: Annotated[float | None, Param("per-example clipping norm G (none: model.lipschitz, else 1.0)",
                                             minimum=0, exclusive_minimum=True, role="clip_norm")] = None,
    trace_every: Annotated[int, Param("record the training loss every this many steps (0: no trace)",
                                      minimum=0)] = 0,
) -> Fit:
    """BST14 noisy SGD (Alg. 1), truncated to `steps` <= n^2 steps; see the module docstring."""
    plan = bst14_plan(problem, privacy, steps=steps, lr_schedule=lr_schedule, lr=lr, radius=radius,
                      clip_norm=clip_norm)
    theta, trace = bst14_core(problem, rng, steps=plan.steps_run, step_size=plan.step_size, clip_norm=plan.G,
                              noise_std=plan.sigma, radius=plan.radius, trace_every=trace_every,
                              on_trace=training_loss_trace(problem))
    return bst14_fit(plan, theta, trace)


@dataclass(frozen=True)
class Bst14Plan:
    """What one BST14 fit runs with (`bst14_plan`) and its ledger reports (`bst14_fit`)."""

    epsilon: float
    delta: float
    n: int
    G: float
    g_source: str
    radius: float | None
    r_source: str
    steps_run: int
    steps_paper: int
    steps_requested: int | None
    sigma: float
    step_size: Callable[[np.ndarray], np.ndarray]
    lr_schedule: str
    lr: float


def bst14_plan(problem: Problem, privacy: PrivacyTarget, *, steps: int | None, lr_schedule: str, lr: float,
               radius: float | None, clip_norm: float | None) -> Bst14Plan:
    """BST14's clip G, radius, steps run (T <= n^2), noise sigma and step sizes for this problem and target."""
    eps, delta = _require_target(privacy, "noisy_sgd_bst14")
    model, n = problem.model, problem.n
    G, g_source = gradient_bound(model, clip_norm)
    r, r_source = default_radius(model, G, radius)
    steps_paper = n * n
    steps_run = steps_paper if steps is None else min(int(steps), steps_paper)
    sigma = bst14_sigma(G, n, eps, delta)
    step_size = bst14_step_sizes(lr_schedule, lr=lr, radius=r, G=G, p=model.n_params, sigma=sigma, mu=model.l2)
    return Bst14Plan(epsilon=eps, delta=delta, n=n, G=G, g_source=g_source, radius=r, r_source=r_source,
                     steps_run=steps_run, steps_paper=steps_paper, steps_requested=steps, sigma=sigma,
                     step_size=step_size, lr_schedule=lr_schedule, lr=lr)


def bst14_fit(plan: Bst14Plan, theta: np.ndarray, trace: list[dict]) -> Fit:
    """The released theta_T with its ledger: BST14's theorem, and the Poisson approximations for comparison."""
    eps, delta, n, G, sigma, steps_run = plan.epsilon, plan.delta, plan.n, plan.G, plan.sigma, plan.steps_run
    z = sigma / (2.0 * G)
    approx = dpsgd_epsilon_report(z, 1.0 / n, steps_run, delta)
    formulas = {
        "bst14_convex": "eta_t = radius / sqrt(t ((G + l2 radius)^2 + p sigma^2)) (BST14 ||C||_2 taken as the radius)",
        "bst14_strongly_convex": "eta_t = 1 / (l2 t)",
        "constant": "eta_t = lr",
    }
    return Fit(theta=theta, trace=trace, privacy=ledger(
        private=True,
        mechanism="noisy SGD, one example per step sampled uniformly with replacement, Gaussian noise on its "
                  "clipped gradient (Bassily-Smith-Thakurta 2014 Alg. 1), truncated to steps_run <= n^2 steps",
        claim="valid",
        target_epsilon=eps,
        delta=delta,
        epsilon_spent={"bst14_theorem": eps, "rdp_poisson_approx": approx["rdp"],
                       "pld_poisson_approx": approx["pld"]},
        adjacency=Adjacency.REPLACE_ONE,
        proof="Bassily, Smith, Thakurta 2014, Theorem 2.1 (Alg. 1: sampling with replacement, advanced composition)",
        guarantee="BST14 privacy theorem (replace-one, sampling amplification at rate 1/n, advanced composition "
                  "over n^2 steps); running steps_run < n^2 steps with the same noise is a prefix of that "
                  "composition, hence still (eps, delta)-DP",
        accountant_note="rdp/pld_poisson_approx: dpsgd_epsilon_report(z = sigma/(2G), q = 1/n, steps_run, delta), "
                        "i.e. with-replacement single-example sampling treated as Poisson sampling at rate 1/n "
                        "with sensitivity 2G: an approximation for comparison, not a proof",
        sensitivity=2.0 * G,
        sampling={"kind": "uniform with replacement, one example per step", "rate": 1.0 / n},
        steps=steps_run,
        steps_run=steps_run,
        steps_paper=plan.steps_paper,
        steps_requested=plan.steps_requested,
        noise_std_mean_gradient=sigma,
        noise_std_sum=n * sigma,
        noise_multiplier=z,
        clip_norm=G,
        clip_source=plan.g_source,
        radius=plan.radius,
        radius_source=plan.r_source,
        lr_schedule=plan.lr_schedule,
        lr=plan.lr if plan.lr_schedule == "constant" else None,
        step_size_formula=formulas[plan.lr_schedule],
        first_step_size=float(plan.step_size(np.array([1]))[0]) if steps_run else None,
    ))


# =============================================================================================
# WYX17 full-batch DP-GD
# =============================================================================================
def dp_gd_core(
    problem: Problem,
    rng: np.random.Generator,
    *,
    steps: int,
    lr: float,
    clip_norm: float,
    noise_std: float,
    radius: float | None = None,
    theta0: np.ndarray | None = None,
    trace_every: int = 0,
    on_trace: TraceFn | None = None,
) -> tuple[np.ndarray, list[dict]]:
    """`steps` full-batch steps theta <- Proj_r(theta - lr [clipped mean gradient + b_t + grad reg(theta)]).

    b_t ~ N(0, noise_std^2 I) (noise on the clipped *mean* gradient); noise_std = 0 is plain
    projected gradient descent on the clipped objective. No privacy logic here.
    """
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    theta = model.init(rng) if theta0 is None else np.array(theta0, dtype=float)
    p = theta.shape[0]
    trace: list[dict] = []
    for t in range(1, steps + 1):
        gsum, _ = model.clipped_grad_sum(theta, X, y, clip_norm)
        noisy = gsum / n
        if noise_std > 0.0:
            noisy = noisy + normal(rng, noise_std, p)
        releases.release(t, theta, noisy, noise_std * n, clip_norm=clip_norm, weight=1.0 / n)
        theta = project_to_ball(theta - lr * (noisy + model.reg_grad(theta)), radius)
        if trace_every and on_trace is not None and (t % trace_every == 0 or t == steps):
            trace.append({"step": t, **on_trace(t, theta)})
    return theta, trace


def dp_gd_noise(epsilon: float, delta: float, *, steps: int, clip_norm: float, n: int, calibration: str = "gdp",
                c: float = 1.0) -> float:
    """Std s of the Gaussian on the clipped mean gradient for T = `steps` DP-GD steps.

    "gdp": exact, ``gaussian_composition_sigma(eps, delta, T, sensitivity=2C/n)`` (replace-one);
    "paper": ``wyx17_classical_sigma(C, T, n, eps, delta, c)``.
    """
    if calibration == "gdp":
        return gaussian_composition_sigma(epsilon, delta, steps, sensitivity=2.0 * clip_norm / n)
    if calibration == "paper":
        return wyx17_classical_sigma(clip_norm, steps, n, epsilon, delta, c=c)
    raise ValueError(f"unknown calibration {calibration!r}; choose one of {', '.join(DPGD_CALIBRATIONS)}")


@algorithm("dp_gd",
           title="Full-batch DP-GD (Wang, Ye, Xu 2017, without DP-SVRG): clipped mean gradient + Gaussian noise",
           citation="Wang, Ye, Xu, Differentially private ERM revisited: faster and more general, NeurIPS 2017; "
                    "paper 003 ref. [43] (traditional), Table 1; Dong, Roth, Su 2019 (Gaussian DP)",
           private=True, updates=True)
def fit_dp_gd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    epochs: Annotated[int, Param("number T of full-batch steps", minimum=1, maximum=MAX_EPOCHS)] = 50,
    lr: Annotated[float, Param("step size eta", minimum=0, exclusive_minimum=True)] = 1.0,
    radius: Annotated[float | None, Param("projection radius (none: no projection)",
                                          minimum=0, exclusive_minimum=True)] = None,
    clip_norm: Annotated[float | None, Param("per-example clipping norm C (none: model.lipschitz, else 1.0)",
                                             minimum=0, exclusive_minimum=True, role="clip_norm")] = None,
    calibration: Annotated[str, Param(
        "gdp: exact Gaussian-DP composition (replace-one, Delta = 2C/n); paper: s^2 = c C^2 T "
        "log(1/delta)/(n^2 eps^2)", choices=DPGD_CALIBRATIONS, paper="[S3] Table 1 row [43]")] = "gdp",
    c: Annotated[float, Param("the unspecified constant of the paper calibration",
                              minimum=0, exclusive_minimum=True, paper="[S3] Table 1 row [43]")] = 1.0,
    trace_every: Annotated[int, Param("record the training loss every this many steps (0: no trace)",
                                      minimum=0)] = 0,
) -> Fit:
    """Wang-Ye-Xu 2017 full-batch DP-GD (without DP-SVRG); see the module docstring."""
    plan = dp_gd_plan(problem.model, problem.n, privacy, epochs=epochs, lr=lr, radius=radius, clip_norm=clip_norm,
                      calibration=calibration, c=c)
    theta, trace = dp_gd_core(problem, rng, steps=plan.steps, lr=lr, clip_norm=plan.clip_norm,
                              noise_std=plan.noise_std, radius=radius, trace_every=trace_every,
                              on_trace=training_loss_trace(problem))
    return Fit(theta=theta, trace=trace, privacy=plan.ledger)


@dataclass(frozen=True)
class DPGDPlan:
    """What DP-GD's calibration fixes before any step runs (`dp_gd_plan`; shared by `fit_dp_gd` and
    its vectorised twin)."""

    steps: int  # T
    clip_norm: float  # C
    noise_std: float  # s, the std of the Gaussian on the clipped mean gradient
    ledger: Ledger


def dp_gd_plan(model: Model, n: int, privacy: PrivacyTarget, *, epochs: int, lr: float, radius: float | None,
               clip_norm: float | None, calibration: str, c: float) -> DPGDPlan:
    """DP-GD's steps, clipping norm, noise calibration and ledger for n rows (no draws, no training)."""
    eps, delta = _require_target(privacy, "dp_gd")
    T = int(epochs)
    C, c_source = gradient_bound(model, clip_norm)
    sensitivity = 2.0 * C / n
    s = dp_gd_noise(eps, delta, steps=T, clip_norm=C, n=n, calibration=calibration, c=c)
    spent = gaussian_epsilon(s, delta, sensitivity, T)
    within = spent <= eps * (1.0 + _EPS_SLACK)
    record = ledger(
        private=True,
        mechanism="T adaptively composed Gaussian mechanisms on the clipped full-batch mean gradient "
                  "(Wang-Ye-Xu 2017 DP-GD without DP-SVRG), exact Gaussian-DP composition",
        claim="valid" if within else "paper-only",
        target_epsilon=eps,
        delta=delta,
        epsilon_spent={"gdp": spent},
        adjacency=Adjacency.REPLACE_ONE,
        sensitivity=sensitivity,
        event=dpsgd_event_json(s / sensitivity, 1.0, T),
        sampling={"kind": "full batch", "rate": 1.0},
        steps=T,
        noise_std_mean_gradient=s,
        noise_multiplier=s / sensitivity,
        gdp_mu=math.sqrt(T) * sensitivity / s,
        calibration=calibration,
        c=c if calibration == "paper" else None,
        clip_norm=C,
        clip_source=c_source,
        lr=lr,
        radius=radius,
    )
    return DPGDPlan(steps=T, clip_norm=C, noise_std=s, ledger=record)
