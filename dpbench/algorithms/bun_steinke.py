"""Heavy-tailed DP-SCO with known mean range: [S4] Algorithm 3, registered as ``ht_bun_steinke``.

[S4] = paper 004 (Wang, Xiao, Devadas, Xu, ICML 2020), Algorithms 2-3, Theorems 3-5, with the
trimmed-mean estimator of Bun & Steinke 2019 (docs/methods/heavy-tailed.md, Bun-Steinke trimmed mean
and Algorithm 3).

Algorithm (projected gradient descent with a private per-coordinate mean of the gradients):
    w^0 = model.init(rng) (zeros for the linear models: data independent);
    for t = 1..T:
        U = model.per_example_grads(w^{t-1}, X_B, y_B)          (B = all rows, or a minibatch)
        g~_j = Bun-Steinke trimmed mean of column j of U with CDP parameter eps_c, range [a, b]
        w^t = P_W(w^{t-1} - lr (g~ + reg_grad(w^{t-1})))
The mean estimator is `dpbench.privacy.smooth_sensitivity.bun_steinke_mean` ([S4] Alg. 2):
mu^ + (S/s) sinh(Y), s = eps_c/4, t = eps_c^2/16. The model's L2 term is data independent and is
added after the private estimate (post-processing; the Model convention of dpbench.models.base).

Two variants (`variant`):
* "corrected" (default; claim "valid"): data clamped to [a, b] before trimming; S = the O(n)
  t-smooth bound S^ of `smooth_sensitivity.trimmed_mean_smooth_sensitivity` (both terms divided
  by n - 2m); eps_c = eps~/sqrt(dT) with eps~ = sqrt(2 ln(1/delta) + 2 eps) - sqrt(2 ln(1/delta)).
  Each of the d T mean estimates is (1/2) eps_c^2-CDP (replace-one), they compose to
  rho = d T eps_c^2 / 2 = eps~^2/2 zCDP, and zcdp_to_dp(rho, delta) = eps exactly (the ledger
  recomputes it from the eps_c actually used).
* "printed" (claim "paper-only"): [S4] Alg. 2/3 exactly as printed -- unclamped data, the scale
  max{(x_(n) - x_(1))/(n-2m), e^{-mt}(b - a)}, eps_c = eps/sqrt(dT). Three defects, listed in the
  ledger's claim_reason: (1) the scale is not t-smooth on unbounded data (one record at 1e6
  multiplies it by ~500 >> e^t), so the noise scale itself leaks and no DP guarantee follows;
  (2) its second term lacks 1/(n-2m), so the noise does not shrink with n; (3) eps instead of
  eps~: even with a smooth scale the composition gives eps^2/2 + eps sqrt(2 ln(1/delta)) > eps.
  epsilon_spent is left empty (no accountant covers a non-smooth scale); the ledger records
  `zcdp_epsilon_if_smooth`, what the corrected accounting would say for the eps_c used.

Minibatches (`batch_size` = B): each step uses B rows drawn uniformly without replacement, and the
estimator runs on those B rows (n -> B in the smooth sensitivity). No amplification by sampling is
claimed: a record changes at most one row of any batch, so every step is still (1/2) eps_c^2-CDP per
coordinate and the accounting is the full-batch one ([S4] §6 runs a stochastic Alg. 4, not Alg. 3;
its accounting is not described).

Choices the paper leaves open (all in the ledger):
* Interval [a, b] (Assumption 3: a <= E grad_j l(w, x) <= b for all w in W, j in [d]; [S4] §6 only
  says "the strength of prior knowledge is modeled by kappa = b - a"): we centre it,
  [a, b] = [center - kappa/2, center + kappa/2] with `center` = 0 by default. Reasons: (i) by
  Assumption 1.4 the population gradient vanishes at w*, so every interval that lets the method
  settle at w* must contain 0, and without other prior knowledge the symmetric one favours no sign;
  (ii) for the ridge model with symmetric features (synthetic_linear: x ~ N(0, I), e independent of
  x) the per-example gradient at w*, -2 e x_j, is symmetric about 0, so clamping it to a symmetric
  interval leaves the mean at w* unbiased; clamping then only shrinks gradients far from w* (a
  Huber-like effect that slows, but does not move, the fixed point). Privacy holds for any [a, b];
  only utility needs Assumption 3.
* kappa default 4: on synthetic_linear with ridge, E grad_j l(w) = 2 (w_j - w*_j) (the data loss
  (<w, x> - y)^2 with E x x^T = I), so [-2, 2] contains every mean gradient coordinate while
  ||w - w*||_inf <= 1, which holds at w^0 = 0 since ||w*|| = 1 and along the path to w*; for
  logistic regression with x ~ N(0, I) every mean gradient coordinate is within E|x_j| = 0.80.
  The noise scale is proportional to kappa (S^ = kappa/(n - 2m) up to e^{-kt} ~ 1, as t ~ 5e-6),
  so a wider interval costs accuracy directly. Measured on synthetic_linear (seed 0, n = 1e5, i.e.
  60,000 training rows, d = 10, ridge, T = 50, delta = 1e-5), median ||w_T - w*|| over 5 seeds:
      kappa         1      2      4      10     20
      eps = 1     0.056  0.068  0.093  0.178  0.339
      eps = 0.5   0.087  0.113  0.175  0.353  0.687
      eps = 0.1   0.42   0.50   0.86   2.0    3.95
  (non-private ERM: 0.022; the printed variant at eps = 1, kappa = 4: ~1e4 without projection,
  2.3 with radius 2). Small kappa still converges here because the clamped mean field vanishes at
  w* (reason (ii)); sweep it ([S4] §6 varies it).
* trim m default 1 ([S4]: "m = O(1)"). With eps_c ~ 0.01, t = eps_c^2/16 ~ 5e-6, so e^{-mt} ~ 1
  for any practical m: trimming does not reduce the noise, which is (b - a)/((n - 2m) s) up to
  the e^{-kt} factors; m = 0 is also valid (then S^ = (b - a)/n, the global sensitivity).
  Measured as above at eps = 1, kappa = 4: median error 0.093 for m = 0, 1 and 100 alike.
* lr default 1/(beta_s + l2) with beta_s = model.smoothness ([S4] Thm 5: eta = 1/beta). For ridge
  model.smoothness = 2 is stated for rows with ||x|| <= 1, but it is also the exact smoothness of the
  *population* risk for x ~ N(0, I) (Hessian 2 E x x^T = 2 I), which is the beta of [S4]
  Assumption 1; logreg: 1/4 likewise. Models without a smoothness bound (MLP): lr = 0.1.
  The privacy guarantee does not depend on lr, convexity or the model (the mean estimator is
  private for any per-example values), so the claim is "valid" for the MLP too.
* steps T default 50 ([S4] Thm 5: T = O((beta/alpha) log n)).
* radius: projection P_W onto {||w|| <= radius}; default none (no projection; [S4] never gives W).
* trace_every = k > 0: {"step": 0, "theta": w^0} and {"step": t, "theta": w^t} after every k-th
  step and after the last one (the cell layer evaluates them; this module never sees test data).

Cost: per step one (B, d) per-example gradient matrix and an O(B) partial sort per column
(np.partition; only the m smallest and largest values are needed). Measured on 2 busy cores, d = 10,
T = 50, one BLAS thread: 0.27-0.29 s per fit with 60,000 training rows and 0.8-1.2 s with 100,000
(per_example_grads ~10%, the mean estimator ~70%; a full np.sort per step would cost 1.6 s / 2.5 s
for the sorts alone). With the default trim m = 1 the extremes are a column min, max and sum
instead (no transposed copy, no partition): ridge on Adult (27,134 x 105, T = 50) takes 0.57 s per
fit against 1.4 s with the partition, half of it in per_example_grads. Memory: the (B, p) matrix
is refused above MAX_U_FLOATS (2 GiB).

Not on the privatiser path: each step releases a trimmed-mean estimate whose sensitivity comes from
the estimator's analysis (a `noisy_statistic`), not from per-record clipping; the steps are reported
and held to the ledger by the release check.
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np

from dpbench.algorithms import releases
from dpbench.algorithms.base import MAX_STEPS, Fit, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.sgd import project_to_ball
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import Param
from dpbench.privacy.smooth_sensitivity import (
    EPS_C_MAX,
    VARIANTS,
    alg3_eps_c,
    alg3_epsilon,
    alg3_zcdp,
    bun_steinke_mean,
    bun_steinke_params,
    eps_tilde,
)

NAME = "ht_bun_steinke"
DEFAULT_STEPS = 50
DEFAULT_KAPPA = 4.0
DEFAULT_TRIM = 1
NOMINAL_LR = 0.1  # models without a smoothness bound
#: Alg. 3 needs every row's gradient coordinate by coordinate (the (rows x p) matrix U); past this
#: many floats (2 GB) a fit is refused with a message instead of exhausting memory (use batch_size)
MAX_U_FLOATS = 1 << 28
_EPS_SLACK = 1e-9
#: standard deviation of sinh(Y), Y ~ N(0, 1): E sinh(Y)^2 = (E cosh(2Y) - 1)/2 = (e^2 - 1)/2 (1.7873)
ARSINH_NORMAL_STD = math.sqrt(math.expm1(2.0) / 2.0)

PRINTED_DEFECTS = (
    "(1) the printed scale max{(x_(n)-x_(1))/(n-2m), e^(-mt)(b-a)} on unclamped data is not t-smooth "
    "(one record at 1e6 among zeros multiplies it by ~500 >> e^t), so the noise scale leaks and no DP "
    "guarantee follows on heavy-tailed gradients; (2) its second term lacks 1/(n-2m), so the noise does not "
    "shrink with n; (3) Alg. 3 uses eps/sqrt(dT) instead of eps~/sqrt(dT): even with a smooth scale the "
    "composition gives rho = eps^2/2 zCDP, i.e. eps^2/2 + eps sqrt(2 ln(1/delta)) > eps "
    "(docs/methods/heavy-tailed.md, Bun-Steinke trimmed mean and Algorithm 3)"
)


@algorithm(NAME, title="Heavy-tailed DP-SCO with known mean range: GD with Bun-Steinke smooth-sensitivity trimmed "
                      "means ([S4] Alg. 3)",
           citation="Wang, Xiao, Devadas, Xu, On Differentially Private Stochastic Convex Optimization with "
                    "Heavy-tailed Data, ICML 2020 (paper 004) Algorithms 2-3, Theorems 3-5; Bun & Steinke 2019",
           private=True, updates=True)
def fit_bun_steinke(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    steps: Annotated[int, Param("T gradient steps (each spends d mean estimates)", minimum=1, maximum=MAX_STEPS,
                                paper="[S4] Thm 5")] = DEFAULT_STEPS,
    lr: Annotated[float | None, Param("step size; none: 1/(model.smoothness + l2), or 0.1 without a smoothness "
                                      "bound", minimum=0, exclusive_minimum=True, paper="[S4] Thm 5")] = None,
    kappa: Annotated[float, Param("kappa = b - a, width of the known range of the mean gradient "
                                  "coordinates ([S4] §6 prior strength)", minimum=0, exclusive_minimum=True,
                                  paper="[S4] Assumption 3, §6")] = DEFAULT_KAPPA,
    center: Annotated[float, Param("centre of [a, b] = [center - kappa/2, center + kappa/2]")] = 0.0,
    trim: Annotated[int, Param("m, values trimmed per side in each trimmed mean ([S4]: O(1))", minimum=0,
                               paper="[S4] Alg. 2")] = DEFAULT_TRIM,
    variant: Annotated[str, Param("corrected: clamped data, t-smooth bound, eps~ (valid); printed: "
                                  "[S4] Alg. 2/3 as printed (paper-only)", choices=VARIANTS,
                                  paper="[S4] Alg. 2-3")] = "corrected",
    radius: Annotated[float | None, Param("projection radius of W = {||w|| <= radius}; none: no projection",
                                          minimum=0, exclusive_minimum=True)] = None,
    batch_size: Annotated[int | None, Param("rows per step drawn without replacement (no amplification claimed); "
                                            "none: full batch", minimum=1)] = None,
    trace_every: Annotated[int, Param("record the iterate every this many steps (0: no trace)", minimum=0)] = 0,
) -> Fit:
    """[S4] Algorithm 3 (see the module docstring).

    Every step t = 1..T is reported (`releases.release`, kind "noisy_statistic") with the iterate
    w^{t-1} it was taken at and released = g~, the vector of the p noisy trimmed means (before the
    regulariser's gradient); weight 1; rate 1 (full batch) or batch_size / n (B distinct rows per
    step: each record's inclusion probability); clip_norm None (the data are clamped coordinatewise
    to [a, b] in the corrected variant, not clipped in L2 norm).

    The noise is NOT Gaussian: coordinate j gets (S_j/s) sinh(Y_j), Y_j ~ N(0, 1) (arsinh-normal,
    Bun-Steinke), heavy tailed, with a finite standard deviation (S_j/s) sqrt((e^2 - 1)/2) =
    1.787 S_j/s, where the smooth sensitivity S_j is data dependent and differs between
    coordinates. A Release has one float noise_std and no field for the noise's law, so the release
    reports noise_std = sqrt(mean_j ((S_j/s) ARSINH_NORMAL_STD)^2), the root mean square over the p
    coordinates of the per-coordinate standard deviation (the noise's std per coordinate when all S_j
    agree). In the corrected variant they do, up to a factor e^{m t} ~ 1 + 1e-5: the data are
    clamped to [a, b], so S_j lies in [e^{-m t}, 1] (b - a)/(n - 2m). In the printed variant S_j is
    the unclamped range of column j and can differ a lot between coordinates. A consumer treating
    the step as Gaussian with this std gets the right second moment but not the tails.
    """
    if privacy.epsilon is None or privacy.delta is None:
        raise ValueError(f"{NAME} is a private algorithm: it needs a target epsilon and delta")
    eps, delta = float(privacy.epsilon), float(privacy.delta)
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    if batch_size is not None and batch_size > n:
        raise ValueError(f"{NAME}: batch_size={batch_size} exceeds the {n} training rows; use null for full batch")
    rows = n if batch_size is None else batch_size
    if rows * model.n_params > MAX_U_FLOATS:
        raise ValueError(f"{NAME}: each step forms the {rows} x {model.n_params} matrix of per-example gradients "
                         f"({rows * model.n_params * 8 / 2**30:.1f} GiB, limit {MAX_U_FLOATS * 8 / 2**30:.0f} GiB); "
                         f"set batch_size to at most {MAX_U_FLOATS // model.n_params} rows")
    if not rows > 2 * trim:
        raise ValueError(f"{NAME}: trim={trim} needs more than 2*trim rows per step, got {rows}")
    if lr is None:
        if model.smoothness is not None and model.smoothness + model.l2 > 0:
            lr, lr_source = 1.0 / (float(model.smoothness) + model.l2), "1/(model.smoothness + l2)"
        else:
            lr, lr_source = NOMINAL_LR, f"nominal {NOMINAL_LR:g} (the model has no smoothness bound)"
    else:
        lr_source = "lr"

    p = model.n_params
    eps_c = alg3_eps_c(eps, delta, p, steps, variant)
    if eps_c > EPS_C_MAX:
        raise ValueError(f"{NAME}: eps_c = {eps_c:.4g} exceeds {EPS_C_MAX:.4f}, where the arsinh-normal CDP "
                         f"condition fails; use more steps or a smaller epsilon")
    s, t = bun_steinke_params(eps_c)
    a, b = center - kappa / 2.0, center + kappa / 2.0

    w = np.array(model.init(rng), dtype=float)
    trace: list[dict] = [{"step": 0, "theta": w.copy()}] if trace_every else []
    scale_sum, scale_max = 0.0, 0.0
    rate = 1.0 if batch_size is None else batch_size / n
    for step in range(1, steps + 1):
        if batch_size is None:
            Xb, yb = X, y
        else:
            idx = rng.choice(n, size=batch_size, replace=False)
            Xb, yb = X[idx], y[idx]
        U = model.per_example_grads(w, Xb, yb)
        g, S = bun_steinke_mean(U, eps_c, a, b, trim, rng, variant=variant)
        scale_sum += float(np.sum(S))
        scale_max = max(scale_max, float(np.max(S)))
        # arsinh-normal noise: its per-coordinate std, RMS over coordinates (see the docstring); O(p), next to
        # the O(rows p) step, so reported whether or not anybody observes (a tally counts it)
        releases.release(step, w, g, ARSINH_NORMAL_STD * math.sqrt(float(np.mean((S / s) ** 2))), rate=rate,
                         kind="noisy_statistic")
        w = project_to_ball(w - lr * (g + model.reg_grad(w)), radius)
        if trace_every and (step % trace_every == 0 or step == steps):
            trace.append({"step": step, "theta": w.copy()})

    rho = alg3_zcdp(eps_c, p, steps)
    spent_eps = alg3_epsilon(eps_c, p, steps, delta)  # = zcdp_to_dp(rho, delta)
    details = dict(
        variant=variant,
        eps_c=eps_c,
        eps_tilde=eps_tilde(eps, delta),
        eps_c_formula="eps~/sqrt(dT)" if variant == "corrected" else "eps/sqrt(dT) (as printed in [S4] Alg. 3)",
        smooth_t=t,
        noise_s=s,
        cdp_condition="eps_c >= (7/6) s + sqrt(t (t + 3)) (arsinh-normal, sigma = 1); holds for eps_c <= "
                      f"{EPS_C_MAX:.4f}",
        rho=rho,
        trim=trim,
        interval=[a, b],
        kappa=kappa,
        center=center,
        steps=steps,
        lr=lr,
        lr_source=lr_source,
        radius=radius,
        batch_size=batch_size,
        rows_per_step=rows,
        n_params=p,
        smooth_sensitivity_mean=scale_sum / (steps * p),
        smooth_sensitivity_max=scale_max,
        noise_multiplier_mean=scale_sum / (steps * p) / s,  # mean S/s multiplying sinh(Y)
        data_clamped=variant == "corrected",
    )
    mechanism = ("[S4] Alg. 3: projected GD with a per-coordinate Bun-Steinke trimmed mean ([S4] Alg. 2), "
                 "smooth sensitivity + arsinh-normal noise, zCDP composition")
    if variant == "corrected":
        claim = "valid" if spent_eps <= eps * (1 + _EPS_SLACK) else "paper-only"
        reason = None if claim == "valid" else f"zCDP accounting gives {spent_eps:g} > target {eps:g}"
        entry = ledger(private=True, mechanism=mechanism + " (corrected: clamped data, t-smooth S^, eps~)",
                       claim=claim, target_epsilon=eps, delta=delta, epsilon_spent={"zcdp": spent_eps},
                       adjacency=Adjacency.REPLACE_ONE, claim_reason=reason,
                       proof="Bun & Steinke 2019, Theorem 3 (smooth sensitivity with arsinh-normal noise, zCDP; "
                               "[S4] Alg. 3 corrected)", **details)
    else:
        entry = ledger(private=True, mechanism=mechanism + " (as printed in [S4])", claim="paper-only",
                       target_epsilon=eps, delta=delta, epsilon_spent={}, adjacency=Adjacency.REPLACE_ONE,
                       claim_reason=PRINTED_DEFECTS, zcdp_epsilon_if_smooth=spent_eps, **details)
    return Fit(theta=w, trace=trace, privacy=entry)
