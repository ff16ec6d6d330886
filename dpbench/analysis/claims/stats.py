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


def t_summary(values: np.ndarray) -> tuple[int, float, float, float, float]:
    """(n, mean, sd, se, t quantile) of per-seed values."""
    n = int(values.size)
    mean = float(np.mean(values)) if n else float("nan")
    sd = float(np.std(values, ddof=1)) if n > 1 else float("nan")
    se = sd / math.sqrt(n) if n > 1 else float("nan")
    q = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) if n > 1 else float("nan")
    return n, mean, sd, se, q


def upper_p(mean: float, threshold: float, se: float, n: int) -> float:
    """One-sided p of "mean > threshold" (null: mean <= threshold)."""
    if n < 2:
        return float("nan")
    if se == 0:
        return 0.0 if mean > threshold else 1.0
    return float(stats.t.sf((mean - threshold) / se, n - 1))


def lower_p(mean: float, threshold: float, se: float, n: int) -> float:
    """One-sided p of "mean < threshold" (null: mean >= threshold)."""
    if n < 2:
        return float("nan")
    if se == 0:
        return 0.0 if mean < threshold else 1.0
    return float(stats.t.cdf((mean - threshold) / se, n - 1))


def subtest(where: str, values: np.ndarray, relation: str, low: float, high: float | None = None,
            **at: Any) -> SubTest:
    """The summary of per-seed values for "mean > low" (greater / increasing: high None),
    "mean < low" (less / decreasing: relation given), or "low < mean < high" (equivalent / within)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    n, mean, sd, se, q = t_summary(values)
    ci = (mean - q * se, mean + q * se) if n > 1 else (float("nan"), float("nan"))
    if relation in ("greater", "increasing"):
        p, p_opp, distance = upper_p(mean, low, se, n), lower_p(mean, low, se, n), mean - low
    elif relation in ("less", "decreasing"):
        p, p_opp, distance = lower_p(mean, low, se, n), upper_p(mean, low, se, n), low - mean
    else:  # within [low, high]: two one-sided tests; the opposite is outside on either side
        p = max(upper_p(mean, low, se, n), lower_p(mean, high, se, n))
        p_opp = min(1.0, 2 * min(lower_p(mean, low, se, n), upper_p(mean, high, se, n)))
        distance = min(mean - low, high - mean)
    return SubTest(where=where, n=n, effect=mean, ci_low=ci[0], ci_high=ci[1], p=p, p_opp=p_opp, sd=sd,
                   distance=distance, **at)


def holm(p: list[float]) -> list[float]:
    """Holm step-down adjusted p-values (NaN stays NaN and is not counted)."""
    values = np.asarray(p, dtype=float)
    out = np.full(values.size, np.nan)
    finite = np.flatnonzero(np.isfinite(values))
    order = finite[np.argsort(values[finite], kind="stable")]
    m, running = order.size, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * values[i]))
        out[i] = running
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


def seeds_to_decide(tests: list[SubTest], level: float) -> float:
    """Seeds at which the claim would be decided if every sub-test kept its observed effect and
    spread: contradicted by its most contrary sub-test (at level / #sub-tests, the Bonferroni
    share), or reproduced once every sub-test is (at `level`): the smaller of the two."""
    against = [seeds_needed(t, level / len(tests)) for t in tests if t.distance < 0]
    support = [seeds_needed(t, level) for t in tests] if all(t.distance > 0 for t in tests) else [float("inf")]
    options = [n for n in [min(against) if against else float("inf"), max(support)] if np.isfinite(n)]
    return float(min(options)) if options else float("inf")


__all__ = ["ALPHA", "MAX_SEEDS", "POWER", "SubTest", "holm", "lower_p", "seeds_needed", "seeds_to_decide", "subtest",
           "t_summary", "upper_p"]
