"""The paired statistics a claim is tested with: per-seed summaries, one-sided Student-t p-values,
Holm's step-down adjustment and the number of seeds a claim would need.

Seeds are paired: the runner gives every method of a panel the same split and random stream for
seed r, so the per-seed differences d_r = A_r - B_r remove the seed-to-seed variation both
share. For each sub-test (a panel, or a panel and epsilon) the per-seed statistic D_r gives n =
#seeds, its mean (the effect), a 95 % Student-t confidence interval, and two one-sided p-values:
p that the relation holds (null: it does not), and p_opp that it fails (null: it holds). An
interval relation (equivalence, a rate within [lo, hi]) is two one-sided tests (Schuirmann 1987).
Holm (1979) adjusts p-values across the claims of one experiment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.8
#: seed counts beyond this are reported as inf (no experiment here would run them)
MAX_SEEDS = 100_000


@dataclass(frozen=True)
class SubTest:
    """One panel (or panel and epsilon) of a claim: the per-seed statistic's summary and p-values."""

    where: str
    n: int
    effect: float
    ci_low: float
    ci_high: float
    p: float  # the relation holds (one-sided; equivalence: two one-sided tests)
    p_opp: float  # the relation fails
    sd: float
    distance: float  # how far the effect is from deciding (the margin it must clear), for the seed count
    panel: str = ""
    model: str = ""
    epsilon: float = float("nan")  # a sub-test of one epsilon point (per-point comparisons); NaN otherwise
    p_eq: float = float("nan")  # no difference beyond the claim's equivalence margin (NaN: none declared)
    vacuous: str = ""  # why this sub-test cannot inform the claim (a screen: `dpbench.analysis.claims.screens`)


def t_summary(values: np.ndarray) -> tuple[int, float, float, float, float]:
    """(n, mean, sd, se, t quantile) of per-seed values."""
    n = int(values.size)
    mean = float(np.mean(values)) if n else float("nan")
    sd = float(np.std(values, ddof=1)) if n > 1 else float("nan")
    se = sd / math.sqrt(n) if n > 1 else float("nan")
    q = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) if n > 1 else float("nan")
    return n, mean, sd, se, q


def upper_p(mean: float | np.ndarray, threshold: float, se: float | np.ndarray,
            n: int | np.ndarray) -> float | np.ndarray:
    """One-sided p of "mean > threshold" (null: mean <= threshold): NaN for fewer than 2 seeds, 0 or
    1 when the spread is 0. Scalars give a float; arrays (broadcast together) give an array."""
    mean, se, n = np.asarray(mean, dtype=float), np.asarray(se, dtype=float), np.asarray(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n < 2, np.nan, np.where(se == 0, np.where(mean > threshold, 0.0, 1.0),
                                             stats.t.sf((mean - threshold) / se, np.maximum(n - 1, 1))))
    return float(p) if p.ndim == 0 else p


def lower_p(mean: float | np.ndarray, threshold: float, se: float | np.ndarray,
            n: int | np.ndarray) -> float | np.ndarray:
    """One-sided p of "mean < threshold" (null: mean >= threshold): NaN for fewer than 2 seeds, 0 or
    1 when the spread is 0. Scalars give a float; arrays (broadcast together) give an array."""
    mean, se, n = np.asarray(mean, dtype=float), np.asarray(se, dtype=float), np.asarray(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n < 2, np.nan, np.where(se == 0, np.where(mean < threshold, 0.0, 1.0),
                                             stats.t.cdf((mean - threshold) / se, np.maximum(n - 1, 1))))
    return float(p) if p.ndim == 0 else p


#: relation -> where the statistic must lie for the relation to hold: above `low`, below `low`, inside
#: (low, high) or outside it
SIDES = {"greater": "above", "increasing": "above", "at_least": "above", "less": "below", "decreasing": "below",
         "at_most": "below", "within": "inside", "equivalent": "inside", "outside": "outside", "differs": "outside"}


def within_p(mean: float, low: float, high: float, se: float, n: int) -> tuple[float, float]:
    """(p that low < mean < high, p that the mean lies outside): two one-sided tests (Schuirmann
    1987) for the first, and for the second the smaller one-sided p of lying beyond either end,
    doubled (Bonferroni over the two ends)."""
    inside = max(upper_p(mean, low, se, n), lower_p(mean, high, se, n))
    outside = min(1.0, 2 * min(lower_p(mean, low, se, n), upper_p(mean, high, se, n)))
    return inside, outside


def subtest(where: str, values: np.ndarray, relation: str, low: float, high: float | None = None, *,
            equivalence: float | None = None, vacuous: str = "", **at: Any) -> SubTest:
    """The summary of per-seed values and the p-values of the relation (`SIDES`): "mean > low"
    (greater, increasing, at_least), "mean < low" (less, decreasing, at_most), "low < mean < high"
    (within, equivalent) or "mean outside [low, high]" (outside, differs). `p` is that it holds,
    `p_opp` that it fails, `p_eq` (with `equivalence` m > 0) that |mean| < m: the "no difference
    beyond m" a claim may declare besides its relation."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    n, mean, sd, se, q = t_summary(values)
    ci = (mean - q * se, mean + q * se) if n > 1 else (float("nan"), float("nan"))
    side = SIDES[relation]
    if side == "above":
        p, p_opp, distance = upper_p(mean, low, se, n), lower_p(mean, low, se, n), mean - low
    elif side == "below":
        p, p_opp, distance = lower_p(mean, low, se, n), upper_p(mean, low, se, n), low - mean
    elif side == "inside":
        p, p_opp = within_p(mean, low, high, se, n)
        distance = min(mean - low, high - mean)
    else:
        p_opp, p = within_p(mean, low, high, se, n)
        distance = max(low - mean, mean - high)
    p_eq = within_p(mean, -equivalence, equivalence, se, n)[0] if equivalence else float("nan")
    return SubTest(where=where, n=n, effect=mean, ci_low=ci[0], ci_high=ci[1], p=p, p_opp=p_opp, sd=sd,
                   distance=distance, p_eq=p_eq, vacuous=vacuous, **at)


def partial_conjunction(p: list[float], r: int) -> float:
    """p-value that at least r of the hypotheses hold, from their p-values: (m - r + 1) times the
    r-th smallest (Benjamini and Heller 2008, Bonferroni combination; valid under any dependence).
    r = m is the intersection-union test (the largest p), r = 1 Bonferroni (m times the smallest)."""
    values = np.sort(np.nan_to_num(np.asarray(p, dtype=float), nan=1.0))
    m = values.size
    if m == 0 or not 1 <= r <= m:
        return float("nan")
    return float(min(1.0, (m - r + 1) * values[r - 1]))


def needed(quantifier: str, m: int) -> int:
    """How many of m panels must hold for a claim with this quantifier: all, most (more than
    half) or some (one)."""
    return {"all": m, "most": m // 2 + 1, "some": 1}[quantifier]


def holm(p: list[float], cap: int | None = None) -> list[float]:
    """Holm (1979) step-down adjusted p-values (NaN stays NaN and is not counted): the m finite
    p-values in increasing order, the one at rank r (0-based) times the multiplier m - r, capped at
    1, and each adjusted value at least the one before it. A hypothesis is rejected at level a when
    its adjusted p <= a.

    `cap` (an int >= 1) lowers the multiplier at rank r to min(m - r, cap). That keeps the
    family-wise error at most a whenever no more than `cap` of the family's null hypotheses can be
    true at once: Holm's proof needs only that the multiplier at the first true null rejected is at
    least the number m0 of true nulls (that null is then rejected only if some true null has
    p <= a / m0, which happens with probability <= a by the union bound). Without a cap that holds
    because at most m - r hypotheses remain at rank r and they include every true null; with one it
    holds too when m0 <= cap. An example: a claim's two complementary one-sided hypotheses, "the
    relation holds" and "the relation fails", of which exactly one null is true, so a family of c
    such claims has at most c true nulls among its 2c hypotheses. cap=None is plain Holm."""
    if cap is not None and (int(cap) != cap or cap < 1):
        raise ValueError(f"holm: cap must be an integer >= 1, got {cap!r}")
    values = np.asarray(p, dtype=float)
    out = np.full(values.size, np.nan)
    finite = np.flatnonzero(np.isfinite(values))
    order = finite[np.argsort(values[finite], kind="stable")]
    multiplier = order.size - np.arange(order.size)
    if cap is not None:
        multiplier = np.minimum(multiplier, int(cap))
    out[order] = np.maximum.accumulate(np.minimum(1.0, multiplier * values[order])) if order.size else []
    return out.tolist()


def seeds_needed(test: SubTest, level: float) -> float:
    """Seeds a one-sided t-test at `level` needs for POWER at the observed effect and spread: the
    smallest n with n >= ((t_{1-level, n-1} + t_{POWER, n-1}) sd / |distance|)^2 (Student t
    quantiles, so small counts are not understated); inf when the effect sits on the margin."""
    if not np.isfinite(test.sd) or test.sd == 0 or not np.isfinite(test.distance):
        return float("nan")
    if test.distance == 0:
        return float("inf")
    ratio = test.sd / abs(test.distance)

    def enough(n: int) -> bool:
        return n >= ((stats.t.isf(level, n - 1) + stats.t.ppf(POWER, n - 1)) * ratio) ** 2

    low, high = 1, 2  # enough() is monotone in n: double, then bisect
    while not enough(high):
        if high > MAX_SEEDS:
            return float("inf")
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return float(high)


def seeds_to_decide(tests: list[SubTest], level: float, r: int | None = None) -> float:
    """Seeds at which the claim would be decided if every sub-test kept its observed effect and
    spread, jointly over its panels: reproduced once r of them (default: all) are, each at level /
    (m - r + 1) (the partial conjunction's share), or contradicted once m - r + 1 of them show
    the opposite, each at level / r: the smaller of the two seed counts."""
    m = len(tests)
    if not m:
        return float("nan")
    r = m if r is None else r

    def kth(counts: list[float], k: int) -> float:
        counts = sorted(counts)
        return counts[k - 1] if len(counts) >= k else float("inf")

    support = [seeds_needed(t, level / (m - r + 1)) if t.distance > 0 else float("inf") for t in tests]
    against = [seeds_needed(t, level / r) if t.distance < 0 else float("inf") for t in tests]
    options = [n for n in (kth(support, r), kth(against, m - r + 1)) if np.isfinite(n)]
    return float(min(options)) if options else float("inf")


__all__ = ["ALPHA", "MAX_SEEDS", "POWER", "SIDES", "SubTest", "holm", "lower_p", "needed", "partial_conjunction",
           "within_p", "seeds_needed", "seeds_to_decide", "subtest",
           "t_summary", "upper_p"]
