"""What an audit reports beside its rigorous bound: the white-box statistic and two estimates of epsilon.

Nasr, Hayes, Steinke, Balle, Tramer, Jagielski, Carlini, Terzis, "Tight Auditing of Differentially
Private Machine Learning", USENIX Security 2023; Dong, Roth, Su, "Gaussian Differential Privacy",
2019 (docs/audits.md, Threat models and Estimates beside the bound). Pure maths, no I/O.

* `step_log_likelihood_ratio`: the Neyman-Pearson statistic of one noisy step seen along the
  canary direction. Under side h the adversary observes z = b * a_h + N(0, s^2) with
  b ~ Bernoulli(q) (q = 1: full batch), a_h the known contribution of the record that differs
  (the canary on D1; on D0 nothing, a_0 = 0, under add/remove, or the row the canary replaces),
  so ln p1(z)/p0(z) = ln(1 - q + q e^{(a1 z - a1^2/2)/s^2}) - ln(1 - q + q e^{(a0 z - a0^2/2)/s^2}),
  which for q = 1 is ((a1 - a0) z - (a1^2 - a0^2)/2) / s^2. The sum over steps is the privacy
  loss of the whole transcript, the optimal statistic for the all-updates adversary.
* `gdp_estimate`: the mu of the Gaussian trade-off curve T(x) = Phi(Phi^-1(1 - x) - mu) through
  the test's equal-error point, mu = 2 Phi^-1(1 - EER), converted to epsilon at the audit's
  delta (`accounting.gdp_epsilon`), with a bootstrap interval over the runs. An estimate under
  the assumption that the trade-off curve is Gaussian (exact for full-batch Gaussian steps,
  approximate under subsampling), never a bound.
* `mechanism_estimate`: the per-step mechanism measured from the observed steps: the noise's std
  relative to the declared one (from D0's steps), the probability that the differing record is
  in a step (from D1's steps), and the accountant's epsilon for that measured mechanism (a
  subsampled Gaussian composed over the steps). It shows an implementation that adds more or
  less noise than it declares, or samples the record more often; it assumes the per-step form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: |per-step log-likelihood ratio| of a step without noise whose observation tells the sides apart
NOISELESS_LLR = 1e6
#: bootstrap resamples of the estimates' intervals
BOOTSTRAP = 200


def step_log_likelihood_ratio(z, a0, a1, noise_std: float, rate: float) -> np.ndarray:
    """ln p1(z)/p0(z) of one step (module docstring); vectorised over z, a0, a1.

    A step without noise (noise_std 0) is decided outright: +-NOISELESS_LLR when z matches one
    side's contribution and not the other's, 0 when it matches both (e.g. z = 0: the record was
    not in the batch).
    """
    z, a0, a1 = (np.asarray(v, dtype=float) for v in np.broadcast_arrays(z, a0, a1))
    q = float(rate)
    if noise_std <= 0.0:
        scale = np.maximum(np.maximum(np.abs(a0), np.abs(a1)), 1e-300)
        near1 = np.abs(z - a1) <= 1e-9 * scale
        near0 = np.abs(z - a0) <= 1e-9 * scale
        if q < 1.0:  # a record left out contributes 0 on either side
            near1 |= np.abs(z) <= 1e-9 * scale
            near0 |= np.abs(z) <= 1e-9 * scale
        return NOISELESS_LLR * (near1.astype(float) - near0.astype(float))
    s2 = float(noise_std) ** 2
    x1 = (a1 * z - 0.5 * a1 * a1) / s2
    x0 = (a0 * z - 0.5 * a0 * a0) / s2
    if q >= 1.0:
        return x1 - x0
    lq, l1q = math.log(q), math.log1p(-q)
    return np.logaddexp(l1q, lq + x1) - np.logaddexp(l1q, lq + x0)


# =============================================================================================
# Gaussian-DP estimate from two samples of a statistic
# =============================================================================================
def _mu_from_eer(s0: np.ndarray, s1: np.ndarray) -> float:
    """mu = 2 Phi^-1(1 - EER) of the test "s > tau" (D1 above), EER where FPR and FNR cross.

    Rates are counted at every pooled score as threshold; an EER of 0 (the samples separate
    perfectly) gives mu = inf, one above 1/2 gives mu = 0 (the test does no better than chance)."""
    s0, s1 = np.sort(s0), np.sort(s1)
    taus = np.concatenate([s0, s1])
    fpr = 1.0 - np.searchsorted(s0, taus, side="right") / s0.size  # P0[s > tau]
    fnr = np.searchsorted(s1, taus, side="right") / s1.size  # P1[s <= tau]
    i = int(np.argmin(np.abs(fpr - fnr)))
    eer = 0.5 * (fpr[i] + fnr[i])
    return math.inf if eer == 0.0 else max(0.0, 2.0 * float(stats.norm.isf(eer)))


@dataclass(frozen=True)
class GdpEstimate:
    """`gdp_estimate`: mu and epsilon with bootstrap percentile intervals."""

    mu: float
    mu_low: float
    mu_high: float
    epsilon: float
    epsilon_low: float
    epsilon_high: float
    direction: int  # +1: D1 scores higher; -1: lower (the estimate reads the statistic this way)
    confidence: float


def gdp_estimate(scores0, scores1, delta: float, alpha: float = 0.05, *, bootstrap: int = BOOTSTRAP,
                 seed: int = 0) -> GdpEstimate:
    """Gaussian-DP estimate of the mechanism behind two score samples (module docstring).

    The direction is the one in which D1's median is larger; samples that separate perfectly give
    mu = epsilon = inf (the Gaussian fit has no finite answer). The interval is the bootstrap
    percentile interval at 1 - alpha (each side resampled with replacement, `bootstrap` times,
    from a generator seeded by `seed`, so the estimate is a pure function of the scores).
    """
    from dpbench.privacy.accounting import gdp_epsilon

    s0 = np.asarray(scores0, dtype=float)
    s1 = np.asarray(scores1, dtype=float)
    s0, s1 = s0[np.isfinite(s0)], s1[np.isfinite(s1)]
    if s0.size < 2 or s1.size < 2:
        raise ValueError("gdp_estimate needs at least two finite scores on each side")
    direction = 1 if np.median(s1) >= np.median(s0) else -1
    s0, s1 = direction * s0, direction * s1
    mu = _mu_from_eer(s0, s1)
    rng = np.random.default_rng(seed)
    boot = np.array([_mu_from_eer(rng.choice(s0, s0.size), rng.choice(s1, s1.size)) for _ in range(int(bootstrap))])
    lo, hi = (float(np.sort(boot)[min(len(boot) - 1, max(0, int(round(p * (len(boot) - 1)))))])
              for p in (alpha / 2.0, 1.0 - alpha / 2.0))  # order statistics: defined when some are inf

    def epsilon(m: float) -> float:
        return math.inf if math.isinf(m) else gdp_epsilon(m, delta)

    return GdpEstimate(mu=mu, mu_low=lo, mu_high=hi, epsilon=epsilon(mu), epsilon_low=epsilon(lo),
                       epsilon_high=epsilon(hi), direction=direction, confidence=1.0 - alpha)


# =============================================================================================
# the per-step mechanism measured from the observed steps
# =============================================================================================
#: per-trial sums an observer keeps for `mechanism_estimate` (each over the trial's noisy steps,
#: every term divided by that step's declared noise variance s_t^2)
STEP_SUMS = ("steps", "z2", "za0", "a0a0", "za1", "a1a1", "d2")


@dataclass(frozen=True)
class MechanismEstimate:
    """`mechanism_estimate`: the measured per-step mechanism and its epsilon, with intervals."""

    noise_ratio: float  # measured / declared noise std
    noise_ratio_low: float
    noise_ratio_high: float
    rate: float  # measured probability that the differing record is in a step
    rate_low: float
    rate_high: float
    steps: float  # noisy steps per training (mean over runs)
    epsilon: float
    epsilon_low: float
    epsilon_high: float
    confidence: float


def _ratio_and_rate(side0: dict, side1: dict, idx0: np.ndarray, idx1: np.ndarray) -> tuple[float, float]:
    """(noise ratio, rate) from the runs idx0 of D0 and idx1 of D1.

    D0: E[z^2/s^2] = rho^2 + q a0^2/s^2 and E[z a0/s^2] = q a0^2/s^2, so rho^2 = (sum z2 - sum za0)/steps.
    D1: E[z a1/s^2] = q a1^2/s^2 (the step's noise is independent of a1, a function of earlier steps).
    """
    z2, za0, n = (float(np.sum(side0[k][idx0])) for k in ("z2", "za0", "steps"))
    za1, a1a1 = (float(np.sum(side1[k][idx1])) for k in ("za1", "a1a1"))
    rho = math.sqrt(max(z2 - za0, 0.0) / max(n, 1.0))
    return rho, (za1 / a1a1 if a1a1 > 0 else float("nan"))


def mechanism_estimate(side0: dict, side1: dict, delta: float, *, add_remove: bool, full_batch: bool,
                       alpha: float = 0.05, bootstrap: int = BOOTSTRAP, seed: int = 0) -> MechanismEstimate | None:
    """The per-step mechanism measured from per-trial `STEP_SUMS` of both sides (module docstring).

    Epsilon of the measured mechanism: full batch (every step declares rate 1): mu-GDP with
    mu = sqrt(mean d2) / rho (T Gaussian steps of sensitivity |a1 - a0| and std rho s);
    add/remove with subsampling: the PLD accountant (`accounting.dpsgd_epsilon`) of T steps at
    the measured rate with noise multiplier rho / sqrt(mean a1^2/s^2 per step). Intervals: the
    bootstrap percentiles of rho and of the rate, epsilon at the ends (it falls with rho and
    grows with the rate). None when there is no noisy step or a replace-one subsampled mechanism
    (no accountant here covers it).
    """
    from dpbench.privacy.accounting import dpsgd_epsilon, gdp_epsilon

    side0 = {k: np.asarray(side0[k], dtype=float) for k in STEP_SUMS}
    side1 = {k: np.asarray(side1[k], dtype=float) for k in STEP_SUMS}
    n0, n1 = side0["steps"].size, side1["steps"].size
    if n0 == 0 or n1 == 0 or side0["steps"].sum() == 0 or side1["a1a1"].sum() <= 0:
        return None
    rho, rate = _ratio_and_rate(side0, side1, np.arange(n0), np.arange(n1))
    rng = np.random.default_rng(seed)
    boot = np.array([_ratio_and_rate(side0, side1, rng.integers(0, n0, n0), rng.integers(0, n1, n1))
                     for _ in range(int(bootstrap))])
    (rho_lo, rate_lo), (rho_hi, rate_hi) = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0], axis=0)
    steps = float(np.mean(side1["steps"]))
    if steps < 1:
        return None

    def epsilon(r: float, q: float) -> float:
        if r <= 0.0:
            return float("inf")
        if full_batch:
            return gdp_epsilon(math.sqrt(float(np.mean(side1["d2"]))) / r, delta)
        if not add_remove:
            return float("nan")
        per_step = math.sqrt(float(np.sum(side1["a1a1"]) / np.sum(side1["steps"])))
        return dpsgd_epsilon(r / per_step, min(max(q, 1e-9), 1.0), int(round(steps)), delta, accountant="pld")

    if not full_batch and not add_remove:
        return None
    return MechanismEstimate(noise_ratio=rho, noise_ratio_low=float(rho_lo), noise_ratio_high=float(rho_hi),
                             rate=rate, rate_low=float(rate_lo), rate_high=float(rate_hi), steps=steps,
                             epsilon=epsilon(rho, rate), epsilon_low=epsilon(float(rho_hi), float(rate_lo)),
                             epsilon_high=epsilon(float(rho_lo), float(rate_hi)), confidence=1.0 - alpha)


__all__ = ["BOOTSTRAP", "GdpEstimate", "MechanismEstimate", "NOISELESS_LLR", "STEP_SUMS", "gdp_estimate",
           "mechanism_estimate", "step_log_likelihood_ratio"]
