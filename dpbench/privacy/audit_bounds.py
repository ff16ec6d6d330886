"""Statistics of the multi-run distinguishing game: epsilon lower bounds from two score samples.

Jagielski, Ullman, Oprea 2020; Nasr et al. 2021 (docs/audits.md, The multi-run distinguishing
game). A mechanism M is run N0 times on D0 and N1 times on a neighbour D1 and each output gets a
scalar score s. A test
"(threshold tau, direction)" says "D1" when s > tau (direction +1) or s < tau (direction -1):

  FPR = P[test says D1 | D0],   FNR = P[test says D0 | D1].

(eps, delta)-DP with respect to (D0, D1) implies, for every fixed test,
  1 - FNR <= e^eps FPR + delta   and   1 - FPR <= e^eps FNR + delta,
so with one-sided Clopper-Pearson upper bounds U_FPR, U_FNR at level alpha/2 each (joint
confidence 1 - alpha by the union bound)
  eps >= max{ ln((1 - delta - U_FNR) / U_FPR), ln((1 - delta - U_FPR) / U_FNR) }
(a term whose numerator is <= 0 refutes nothing and is dropped; the bound is >= 0).

The test must be fixed before the counts that enter the bound are seen: the
threshold is chosen on a *selection* half of the runs (`choose_threshold`) and the rates are
counted on the other, *evaluation*, half (`evaluate_threshold`); `audit_scores` does both with
a fixed split. Maximising the bound over thresholds on the same runs that estimate the rates
(what several public tools do) overstates it.

Ceiling: with zero errors on N evaluation runs a side, U = 1 - (alpha/2)^(1/N) ~ ln(2/alpha)/N,
so no audit can certify more than about ln(N/3.69) at alpha = 0.05 (N = 1000: 5.6); `audit_ceiling`.

Pure maths (numpy/scipy), no I/O; `dpbench.audit.multi_run` drives the trainings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: the fraction of each side's runs used to choose the threshold (the rest estimate the rates)
SELECTION_FRACTION = 0.5
#: at most this many candidate thresholds are scored on the selection half (quantile grid beyond)
MAX_CANDIDATES = 4096
#: the rules that choose the test on the selection runs (`audit_scores`)
THRESHOLD_RULES = ("empirical", "gaussian")
#: the fraction of each side's runs that fit the two normals of the "gaussian" rule
GAUSSIAN_SELECTION_FRACTION = 0.1


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not (0.0 < a < 1.0):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return a


def _check_delta(delta: float) -> float:
    d = float(delta)
    if not (0.0 <= d < 1.0):
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    return d


def clopper_pearson_upper(k, n, alpha: float):
    """One-sided Clopper-Pearson upper confidence bound on a binomial rate, at level `alpha`.

    U(k, n) = beta.ppf(1 - alpha, k + 1, n - k), and U = 1 when k = n: P[p <= U] >= 1 - alpha.
    The audit bound calls this with alpha/2 for each of FPR and FNR (union bound). Vectorised over
    k and n (numpy broadcasting); a float for scalar input.
    """
    a = _check_alpha(alpha)
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    if np.any(k_arr < 0) or np.any(k_arr > n_arr) or np.any(n_arr < 1):
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k!r}, n={n!r}")
    full = k_arr >= n_arr
    with np.errstate(invalid="ignore"):
        upper = stats.beta.ppf(1.0 - a, k_arr + 1.0, np.where(full, 1.0, n_arr - k_arr))
    upper = np.where(full, 1.0, upper)
    return float(upper) if upper.ndim == 0 else upper


def _log_ratio(numerator, denominator):
    """ln(numerator/denominator) where numerator > 0 (denominator > 0 always), else 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.where(numerator > 0, numerator, 1.0) / denominator)
    return np.where(numerator > 0, out, 0.0)


def epsilon_lower_bound(fp, n0, fn, n1, delta: float, alpha: float = 0.05):
    """Epsilon lower bound with confidence 1 - alpha from fp of n0 false positives, fn of n1 false negatives.

    max{ ln((1 - delta - U_FNR)/U_FPR), ln((1 - delta - U_FPR)/U_FNR), 0 } with Clopper-Pearson
    upper bounds at alpha/2 each. 0 when nothing is refuted.
    Vectorised; a float for scalar input.
    """
    d = _check_delta(delta)
    a = _check_alpha(alpha)
    u_fpr = np.asarray(clopper_pearson_upper(fp, n0, a / 2.0))
    u_fnr = np.asarray(clopper_pearson_upper(fn, n1, a / 2.0))
    one = _log_ratio(1.0 - d - u_fnr, u_fpr)  # power of "say D1" against its false-positive rate
    two = _log_ratio(1.0 - d - u_fpr, u_fnr)  # the same test read the other way round
    out = np.maximum(np.maximum(one, two), 0.0)
    return float(out) if out.ndim == 0 else out


def audit_ceiling(n, delta: float, alpha: float = 0.05, n1=None) -> float:
    """The largest bound n (and n1, default n) evaluation runs a side can give: zero errors.

    ~ ln(n / 3.69) at alpha = 0.05: U(0, n) ~ ln(2/alpha)/n, so an audit cannot refute claims above it.
    """
    return float(epsilon_lower_bound(0, n, 0, n if n1 is None else n1, delta, alpha))


def point_epsilon(fp, n0, fn, n1, delta: float, pseudo: float = 0.0):
    """The plug-in estimate max{ln((1-delta-FNR)/FPR), ln((1-delta-FPR)/FNR), 0}.

    Rates are (errors + pseudo) / (n + 2 pseudo); pseudo = 0 (default) is the raw estimate,
    infinite at zero errors; pseudo = 0.5 keeps it finite. Descriptive only: not a confidence bound.
    """
    d = _check_delta(delta)
    fpr = (np.asarray(fp, dtype=float) + pseudo) / (np.asarray(n0, dtype=float) + 2 * pseudo)
    fnr = (np.asarray(fn, dtype=float) + pseudo) / (np.asarray(n1, dtype=float) + 2 * pseudo)
    with np.errstate(divide="ignore", invalid="ignore"):
        one = np.where(1 - d - fnr > 0, np.log(np.maximum(1 - d - fnr, 1e-300) / fpr), 0.0)
        two = np.where(1 - d - fpr > 0, np.log(np.maximum(1 - d - fpr, 1e-300) / fnr), 0.0)
    out = np.maximum(np.nan_to_num(np.maximum(one, two), nan=0.0, posinf=np.inf), 0.0)
    return float(out) if out.ndim == 0 else out


# ---------------------------------------------------------------------------------------------
# tests (threshold, direction): choice on one half, counts on the other
# ---------------------------------------------------------------------------------------------
def _clean(scores) -> np.ndarray:
    """Scores as a float array; NaN (a diverged fit) becomes -inf on both sides alike.

    Any fixed function of the output is a valid statistic, so a fixed NaN rule keeps the test valid.
    """
    s = np.asarray(scores, dtype=float).ravel()
    return np.where(np.isnan(s), -np.inf, s)


def _counts_above(sorted_scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """#{s > t} for each t (sorted_scores ascending)."""
    return sorted_scores.size - np.searchsorted(sorted_scores, thresholds, side="right")


def _errors(sorted0: np.ndarray, sorted1: np.ndarray, thresholds: np.ndarray, direction: int):
    """(false positives, false negatives) of the test (threshold, direction) for each threshold."""
    above0 = _counts_above(sorted0, thresholds)
    above1 = _counts_above(sorted1, thresholds)
    if direction > 0:  # "D1" iff s > t
        return above0, sorted1.size - above1
    # "D1" iff s < t; #{s < t} = n - #{s >= t}; with t a midpoint no score equals t,
    # but ±inf candidates and ties at t are handled exactly:
    below0 = np.searchsorted(sorted0, thresholds, side="left")
    below1 = np.searchsorted(sorted1, thresholds, side="left")
    return below0, sorted1.size - below1


def candidate_thresholds(scores: np.ndarray, max_candidates: int = MAX_CANDIDATES) -> np.ndarray:
    """Midpoints between consecutive distinct pooled scores, plus -inf and +inf.

    Beyond `max_candidates` distinct values the midpoints are taken at evenly spaced ranks
    (a quantile grid), which keeps the choice O(max_candidates log n) for huge scalar audits.
    """
    values = np.unique(scores[np.isfinite(scores)])
    if values.size > max_candidates:
        ranks = np.unique(np.linspace(0, values.size - 2, max_candidates).round().astype(int))
        lo, hi = values[ranks], values[ranks + 1]
    else:
        lo, hi = values[:-1], values[1:]
    mids = lo + (hi - lo) / 2.0
    return np.concatenate([[-np.inf], mids, [np.inf]])


@dataclass(frozen=True)
class Threshold:
    """A test chosen on the selection half: say "D1" iff direction * (s - threshold) > 0."""

    threshold: float
    direction: int  # +1: high scores are D1-like; -1: low scores are
    selection_bound: float  # the criterion's value on the selection half
    selection_point: float  # the plug-in epsilon (pseudo-count 0.5) on the selection half (descriptive)


def choose_threshold(scores0, scores1, delta: float, alpha: float = 0.05, *,
                     max_candidates: int = MAX_CANDIDATES) -> Threshold:
    """The test (threshold, direction) that maximises the epsilon bound on these (selection) scores.

    Criterion: `epsilon_lower_bound` of the selection counts at the audit's alpha, i.e. the
    point estimate shrunk by Clopper-Pearson. (The raw plug-in estimate is infinite for every
    threshold with zero errors on one side and cannot rank them; the shrunk one prefers tests
    whose error counts are small *and* well estimated.) Ties (e.g. when nothing is refuted) go
    to the larger bound at alpha = 0.5 (a loosely shrunk estimate), then to the larger plug-in
    estimate with half a pseudo-count per rate, then to the smallest threshold, then to +1.
    Only these scores are looked at: call it on the selection half and `evaluate_threshold` on
    the evaluation half.
    """
    s0, s1 = np.sort(_clean(scores0)), np.sort(_clean(scores1))
    if s0.size == 0 or s1.size == 0:
        raise ValueError("choose_threshold needs at least one score on each side")
    thresholds = candidate_thresholds(np.concatenate([s0, s1]), max_candidates)
    best = None
    for direction in (+1, -1):
        fp, fn = _errors(s0, s1, thresholds, direction)
        bounds = np.asarray(epsilon_lower_bound(fp, s0.size, fn, s1.size, delta, alpha))
        loose = np.asarray(epsilon_lower_bound(fp, s0.size, fn, s1.size, delta, 0.5))
        points = np.asarray(point_epsilon(fp, s0.size, fn, s1.size, delta, pseudo=0.5))
        # max bound, then max loose bound, then max plug-in, then the first (smallest) threshold
        i = int(np.lexsort((-np.arange(bounds.size), points, loose, bounds))[-1])
        candidate = (float(bounds[i]), float(loose[i]), float(points[i]), float(thresholds[i]), direction)
        if best is None or candidate[:3] > best[:3]:
            best = candidate
    bound, _, point, threshold, direction = best
    return Threshold(threshold=threshold, direction=direction, selection_bound=bound, selection_point=point)


def choose_threshold_gaussian(scores0, scores1, n0: int, n1: int, delta: float, alpha: float = 0.05,
                              grid: int = 4001) -> Threshold:
    """The test that maximises the *expected* bound on n0, n1 evaluation runs when each side's
    score is normal with the mean and std of these (selection) scores.

    Expected counts are the normal tail probabilities times n0, n1, and the criterion is
    `epsilon_lower_bound` of those (fractional) counts, over `grid` thresholds within 8 stds of
    both means, both directions. The normals only *choose* the test: its error rates are then
    counted on the evaluation runs (`evaluate_threshold`), so the bound does not depend on the
    scores being normal; when they are (a white-box statistic of full-batch Gaussian steps,
    Nasr et al. 2023), a tenth of the runs fits the normals well enough and nine tenths count,
    instead of half and half with a threshold chosen among the few runs in a tail.
    """
    s0, s1 = _clean(scores0), _clean(scores1)
    if s0.size < 2 or s1.size < 2:
        raise ValueError("choose_threshold_gaussian needs at least two scores on each side")
    m0, m1 = float(np.mean(s0)), float(np.mean(s1))
    sd0, sd1 = max(float(np.std(s0, ddof=1)), 1e-300), max(float(np.std(s1, ddof=1)), 1e-300)
    spread = 8.0 * max(sd0, sd1)
    thresholds = np.linspace(min(m0, m1) - spread, max(m0, m1) + spread, int(grid))
    best = None
    for direction in (+1, -1):
        if direction == 1:
            fpr, fnr = stats.norm.sf(thresholds, m0, sd0), stats.norm.cdf(thresholds, m1, sd1)
        else:
            fpr, fnr = stats.norm.cdf(thresholds, m0, sd0), stats.norm.sf(thresholds, m1, sd1)
        bounds = np.asarray(epsilon_lower_bound(fpr * n0, n0, fnr * n1, n1, delta, alpha))
        i = int(np.argmax(bounds))
        if best is None or bounds[i] > best[0]:
            best = (float(bounds[i]), float(thresholds[i]), direction)
    bound, threshold, direction = best
    fp, fn = _errors(np.sort(s0), np.sort(s1), np.array([threshold]), direction)
    point = float(point_epsilon(fp[0], s0.size, fn[0], s1.size, delta, pseudo=0.5))
    return Threshold(threshold=threshold, direction=direction, selection_bound=bound, selection_point=point)


@dataclass(frozen=True)
class Evaluation:
    """Counts of one fixed test on the evaluation runs and the bound they give."""

    threshold: float
    direction: int
    n0: int
    n1: int
    false_positives: int
    false_negatives: int
    fpr: float
    fnr: float
    fpr_upper: float  # Clopper-Pearson upper bound at alpha/2
    fnr_upper: float
    epsilon_lower_bound: float
    ceiling: float  # the bound with zero errors on n0, n1 runs
    alpha: float
    delta: float

    @property
    def confidence(self) -> float:
        return 1.0 - self.alpha


def evaluate_threshold(scores0, scores1, threshold: float, direction: int, delta: float,
                       alpha: float = 0.05) -> Evaluation:
    """Count the errors of the fixed test on these (evaluation) scores; bound epsilon from them."""
    s0, s1 = np.sort(_clean(scores0)), np.sort(_clean(scores1))
    if s0.size == 0 or s1.size == 0:
        raise ValueError("evaluate_threshold needs at least one score on each side")
    if direction not in (1, -1):
        raise ValueError(f"direction must be +1 or -1, got {direction!r}")
    fp, fn = _errors(s0, s1, np.array([float(threshold)]), direction)
    fp, fn = int(fp[0]), int(fn[0])
    a = _check_alpha(alpha)
    return Evaluation(
        threshold=float(threshold), direction=int(direction), n0=int(s0.size), n1=int(s1.size),
        false_positives=fp, false_negatives=fn, fpr=fp / s0.size, fnr=fn / s1.size,
        fpr_upper=clopper_pearson_upper(fp, s0.size, a / 2.0), fnr_upper=clopper_pearson_upper(fn, s1.size, a / 2.0),
        epsilon_lower_bound=epsilon_lower_bound(fp, s0.size, fn, s1.size, delta, a),
        ceiling=audit_ceiling(s0.size, delta, a, n1=s1.size), alpha=a, delta=float(delta),
    )


def split_runs(scores, selection_fraction: float = SELECTION_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """(selection, evaluation): the first floor(fraction * N) runs choose, the rest evaluate (fixed split)."""
    s = np.asarray(scores, dtype=float).ravel()
    k = int(math.floor(selection_fraction * s.size))
    if k < 1 or k >= s.size:
        raise ValueError(f"need at least 2 runs a side to split into selection and evaluation halves, got {s.size}")
    return s[:k], s[k:]


@dataclass(frozen=True)
class ScoreAudit:
    """`audit_scores`: the test chosen on the selection half and its evaluation on the other half."""

    chosen: Threshold
    evaluation: Evaluation
    n_selection: tuple[int, int]


def audit_scores(scores0, scores1, delta: float, alpha: float = 0.05, *, rule: str = "empirical",
                 selection_fraction: float | None = None,
                 max_candidates: int = MAX_CANDIDATES) -> ScoreAudit:
    """Epsilon lower bound from per-run scores on D0 and D1 (in run order): fixed split, choose, count.

    The first `selection_fraction` of each side's runs choose the test, the rest estimate its
    error rates; the bound holds with confidence 1 - alpha whatever the scores' distribution.
    rule "empirical" (default fraction 1/2) takes the threshold with the best bound on the
    selection runs (`choose_threshold`); "gaussian" (default fraction 1/10) the one with the best
    expected bound under normals fitted to them (`choose_threshold_gaussian`).
    """
    if rule not in THRESHOLD_RULES:
        raise ValueError(f"unknown threshold rule {rule!r}; choose one of {', '.join(THRESHOLD_RULES)}")
    if selection_fraction is None:
        selection_fraction = SELECTION_FRACTION if rule == "empirical" else GAUSSIAN_SELECTION_FRACTION
    sel0, ev0 = split_runs(scores0, selection_fraction)
    sel1, ev1 = split_runs(scores1, selection_fraction)
    if rule == "gaussian":
        chosen = choose_threshold_gaussian(sel0, sel1, ev0.size, ev1.size, delta, alpha)
    else:
        chosen = choose_threshold(sel0, sel1, delta, alpha, max_candidates=max_candidates)
    evaluation = evaluate_threshold(ev0, ev1, chosen.threshold, chosen.direction, delta, alpha)
    return ScoreAudit(chosen=chosen, evaluation=evaluation, n_selection=(sel0.size, sel1.size))


def audit_scalar_gaussian(epsilon: float, delta: float, trials: int, rng: np.random.Generator,
                          alpha: float = 0.05) -> ScoreAudit:
    """Harness check (docs/audits.md, What a bound means): audit the 1-D Gaussian mechanism f(D) + N(0, s^2).

    f(D0) = 0, f(D1) = 1 (sensitivity 1), s = the analytic-Gaussian std for (epsilon, delta)
    (Balle & Wang 2018), so the mechanism is exactly (epsilon, delta)-DP and tight: a sound
    audit gives a bound <= epsilon (with probability >= 1 - alpha), and a good one comes close
    with enough runs. The score is the release itself; `trials` runs a side, vectorised.
    """
    from dpbench.privacy.accounting import analytic_gaussian_sigma

    sigma = analytic_gaussian_sigma(epsilon, delta, 1.0)
    scores0 = rng.normal(0.0, sigma, size=int(trials))
    scores1 = rng.normal(1.0, sigma, size=int(trials))
    return audit_scores(scores0, scores1, delta, alpha)


__all__ = [
    "Evaluation", "GAUSSIAN_SELECTION_FRACTION", "MAX_CANDIDATES", "SELECTION_FRACTION", "ScoreAudit",
    "THRESHOLD_RULES", "Threshold", "audit_ceiling", "audit_scalar_gaussian", "audit_scores",
    "candidate_thresholds", "choose_threshold", "choose_threshold_gaussian", "clopper_pearson_upper",
    "epsilon_lower_bound", "evaluate_threshold", "point_epsilon", "split_runs",
]
