"""The paired statistics a claim is tested with: per-seed summaries, one-sided p-values of a
stated location parameter, Holm's step-down adjustment and the number of seeds a claim would need.

Seeds are paired: the runner gives every method of a panel the same split and random stream for
seed r, so the per-seed statistic D_r (a difference A_r - B_r, a slope, a spread) removes the
seed-to-seed variation both curves share. For each sub-test (a panel, or a panel and epsilon) it
gives n = #seeds, an effect with a 95 % interval, and two one-sided p-values: p that the relation
holds (null: it does not), and p_opp that it fails (null: it holds). An interval relation
(equivalence, a rate within [lo, hi]) is two one-sided tests (Schuirmann 1987). Holm (1979)
adjusts p-values across the claims of one experiment.

**Which parameter a relation is about.** The per-seed statistics of this benchmark are skewed and
heavy-tailed: a failed or runaway seed gives one D_r far from the rest. No test of the mean can
hold its level for every such shape at a handful of seeds (Bahadur and Savage 1956), and the
one-sample t-test, built for normal data, exceeds it (docs: Claims and verdicts). So every
relation is about the **median** of the per-seed statistic (`TEST` "sign"): "A - B > m" reads
"in a typical seed A beats B by more than m", precisely P(D > m) > P(D < m), and it is tested
with the **sign test**: of the seeds not tied with the threshold, the count on the relation's
side is Binomial(k, 1/2) at the null's boundary, so the p-value is exact (conservative with
ties) for any shape of D whatsoever. Its interval is the distribution-free interval of the
median between two order statistics (coverage >= 95 % from 6 seeds on; below that, the range).
A value within `TIE_RTOL` of the threshold (relative to the sample's largest |value|) is a tie:
a mathematically tied difference must not become a win or a loss by the last bits of one CPU's
arithmetic. `TEST` "t" (the mean, one-sample Student t) is kept for the comparison the docs'
simulation makes; no verdict uses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.8
#: seed counts beyond this are reported as inf (no experiment here would run them)
MAX_SEEDS = 100_000
#: the tests of a sub-test: the sign test of the median (every verdict) and the Student t of the mean
TESTS = ("sign", "t")
TEST = "sign"
#: the location parameter each test is about
PARAMETER = {"sign": "median", "t": "mean"}
#: |value - threshold| <= TIE_RTOL x max(|threshold|, max |value|) is a tie of the sign test
TIE_RTOL = 1e-9


@dataclass(frozen=True)
class SubTest:
    """One panel (or panel and epsilon) of a claim: the per-seed statistic's summary and p-values."""

    where: str
    n: int
    effect: float  # the parameter's estimate: the median (sign test) or the mean (t)
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
    vacuous: str = ""  # why this sub-test cannot support the claim (a screen: `dpbench.analysis.claims.screens`)
    skew: float = float("nan")  # sample skewness of the per-seed values (adjusted Fisher-Pearson; NaN below 3)
    share: float = float("nan")  # sign test: of the seeds not tied, the share on the relation's side
    ties: float = 0.0  # sign test: the share of seeds tied with the threshold
    test: str = TEST
    values: np.ndarray | None = field(default=None, repr=False, compare=False)  # the per-seed values


def _finite(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return values[np.isfinite(values)]


def t_summary(values: np.ndarray) -> tuple[int, float, float, float, float]:
    """(n, mean, sd, se, t quantile) of per-seed values."""
    n = int(values.size)
    mean = float(np.mean(values)) if n else float("nan")
    sd = float(np.std(values, ddof=1)) if n > 1 else float("nan")
    se = sd / math.sqrt(n) if n > 1 else float("nan")
    q = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) if n > 1 else float("nan")
    return n, mean, sd, se, q


def skewness(values: np.ndarray) -> float:
    """The adjusted Fisher-Pearson sample skewness G1 of the finite values (NaN for fewer than 3,
    0 when they are all equal)."""
    x = _finite(values)
    n = x.size
    if n < 3:
        return float("nan")
    d = x - x.mean()
    m2 = float(np.mean(d ** 2))
    if m2 <= (1e-12 * max(float(np.max(np.abs(x))), 1e-300)) ** 2:
        return 0.0
    g1 = float(np.mean(d ** 3)) / m2 ** 1.5
    return g1 * math.sqrt(n * (n - 1)) / (n - 2)


def median_interval(values: np.ndarray, level: float = 1 - ALPHA) -> tuple[float, float]:
    """The distribution-free interval of the median: [x_(j), x_(n+1-j)] with the largest j whose
    coverage 1 - 2 P(Binomial(n, 1/2) <= j - 1) is at least `level` (valid for any continuous
    shape); the range [min, max] when no j reaches it (n <= 5 at 95 %). NaN for fewer than 2."""
    x = np.sort(_finite(values))
    n = x.size
    if n < 2:
        return float("nan"), float("nan")
    j = int(stats.binom.ppf((1 - level) / 2, n, 0.5))  # P(B <= j) >= tail; the largest j with P(B <= j-1) <= tail
    if stats.binom.cdf(j, n, 0.5) <= (1 - level) / 2:
        j += 1
    j = max(j, 1)
    return float(x[j - 1]), float(x[n - j])


def _tie_tolerance(values: np.ndarray, threshold: Any, finite: np.ndarray) -> np.ndarray:
    """`TIE_RTOL` x max(|threshold|, the largest finite |value|) per sample (values on the last
    axis; the threshold broadcast against the samples)."""
    largest = np.max(np.where(finite, np.abs(values), 0.0), axis=-1, initial=0.0)
    return TIE_RTOL * np.maximum(np.abs(np.asarray(threshold, dtype=float)), largest)


def _counts(values: np.ndarray, threshold: float | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(above, below, finite) counts of values [..., seeds] against a threshold, ties within
    `TIE_RTOL` counted in neither."""
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values)
    tol = _tie_tolerance(values, threshold, finite)[..., None]
    threshold = np.asarray(threshold, dtype=float)[..., None] if np.ndim(threshold) else float(threshold)
    above = (finite & (values > threshold + tol)).sum(axis=-1)
    below = (finite & (values < threshold - tol)).sum(axis=-1)
    return above, below, finite.sum(axis=-1)


def _sign_tail(values: np.ndarray, threshold: float | np.ndarray, side: str) -> np.ndarray:
    """Sign test p of "median > threshold" (side "above") or "< threshold" ("below"): the binomial
    tail P(Binomial(k, 1/2) >= count on that side), k the seeds not tied; 1 when every seed ties,
    NaN for fewer than 2 finite values."""
    above, below, n = _counts(values, threshold)
    hits = above if side == "above" else below
    k = above + below
    p = np.where(k > 0, stats.binom.sf(hits - 1, np.maximum(k, 1), 0.5), 1.0)
    return np.where(n < 2, np.nan, p)


def _t_tail(values: np.ndarray, threshold: float | np.ndarray, side: str) -> np.ndarray:
    """Student t p of "mean > threshold" (side "above") or "< threshold" ("below") over the finite
    values [..., seeds]; a mean within `TIE_RTOL` of the threshold is a tie and a spread within it
    is none (`upper_p`'s zero-spread case), as for the sign test."""
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values)
    n = finite.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(finite, values, 0.0).sum(axis=-1) / n
        dev = np.where(finite, values - mean[..., None], 0.0)
        se = np.sqrt((dev ** 2).sum(axis=-1) / np.maximum(n - 1, 1)) / np.sqrt(n)
    threshold = np.asarray(threshold, dtype=float)
    tol = _tie_tolerance(values, threshold, finite)
    mean = np.where(np.abs(mean - threshold) <= tol, threshold, mean)
    se = np.where(se <= tol, 0.0, se)
    return np.asarray((upper_p if side == "above" else lower_p)(mean, threshold, se, n))


_TAILS = {"sign": _sign_tail, "t": _t_tail}


def tail_p(values: np.ndarray, threshold: float | np.ndarray, side: str, test: str = TEST) -> np.ndarray:
    """One-sided p of "the parameter (`PARAMETER[test]`) > threshold" (side "above") or "<"
    ("below") from per-seed values on the last axis (NaN ignored): any leading axes give an array."""
    if test not in _TAILS:
        raise ValueError(f"tail_p: test must be one of {', '.join(TESTS)}, got {test!r}")
    if side not in ("above", "below"):
        raise ValueError(f"tail_p: side must be above or below, got {side!r}")
    return _TAILS[test](values, threshold, side)


def upper_p(mean: float | np.ndarray, threshold: float, se: float | np.ndarray,
            n: int | np.ndarray) -> float | np.ndarray:
    """One-sided Student t p of "mean > threshold" (null: mean <= threshold): NaN for fewer than 2
    seeds, 0 or 1 when the spread is 0. Scalars give a float; arrays (broadcast together) give an array."""
    mean, se, n = np.asarray(mean, dtype=float), np.asarray(se, dtype=float), np.asarray(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n < 2, np.nan, np.where(se == 0, np.where(mean > threshold, 0.0, 1.0),
                                             stats.t.sf((mean - threshold) / se, np.maximum(n - 1, 1))))
    return float(p) if p.ndim == 0 else p


def lower_p(mean: float | np.ndarray, threshold: float, se: float | np.ndarray,
            n: int | np.ndarray) -> float | np.ndarray:
    """One-sided Student t p of "mean < threshold" (null: mean >= threshold): NaN for fewer than 2
    seeds, 0 or 1 when the spread is 0. Scalars give a float; arrays (broadcast together) give an array."""
    mean, se, n = np.asarray(mean, dtype=float), np.asarray(se, dtype=float), np.asarray(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n < 2, np.nan, np.where(se == 0, np.where(mean < threshold, 0.0, 1.0),
                                             stats.t.cdf((mean - threshold) / se, np.maximum(n - 1, 1))))
    return float(p) if p.ndim == 0 else p


#: relation -> where the statistic must lie for the relation to hold: above `low`, below `low`, inside
#: (low, high) or outside it
SIDES = {"greater": "above", "increasing": "above", "at_least": "above", "less": "below", "decreasing": "below",
         "at_most": "below", "within": "inside", "equivalent": "inside", "outside": "outside", "differs": "outside"}


def relation_p(values: np.ndarray, relation: str, low: float, high: float | None = None,
               test: str = TEST) -> tuple[np.ndarray, np.ndarray]:
    """(p that the relation holds, p that it fails) of per-seed values on the last axis (`SIDES`):
    one-sided tests against `low` for a directional relation; for "inside (low, high)" two one-sided
    tests (the larger p) and, for lying outside, the smaller one-sided p of lying beyond either end,
    doubled (Bonferroni over the two ends); "outside" swaps the two."""
    side = SIDES[relation]
    if side == "above":
        return tail_p(values, low, "above", test), tail_p(values, low, "below", test)
    if side == "below":
        return tail_p(values, low, "below", test), tail_p(values, low, "above", test)
    inside = np.fmax(tail_p(values, low, "above", test), tail_p(values, high, "below", test))
    outside = np.minimum(1.0, 2 * np.fmin(tail_p(values, low, "below", test), tail_p(values, high, "above", test)))
    return (inside, outside) if side == "inside" else (outside, inside)


def _share(values: np.ndarray, relation: str, low: float, high: float | None) -> tuple[float, float]:
    """(share of the untied seeds on the relation's side at its binding threshold, share of ties)."""
    def at(threshold: float, side: str) -> tuple[float, float]:
        above, below, n = (int(c) for c in _counts(values, threshold))
        k = above + below
        return ((above if side == "above" else below) / k if k else 0.5), (1 - k / n if n else 0.0)

    side = SIDES[relation]
    if side in ("above", "below"):
        return at(low, side)
    ends = [at(low, "above"), at(high, "below")] if side == "inside" else [at(low, "below"), at(high, "above")]
    return min(ends) if side == "inside" else max(ends)


def subtest(where: str, values: np.ndarray, relation: str, low: float, high: float | None = None, *,
            equivalence: float | None = None, vacuous: str = "", test: str = TEST, **at: Any) -> SubTest:
    """The summary of per-seed values and the p-values of the relation (`relation_p`): "parameter >
    low" (greater, increasing, at_least), "< low" (less, decreasing, at_most), "low < parameter <
    high" (within, equivalent) or "parameter outside [low, high]" (outside, differs). `p` is that it
    holds, `p_opp` that it fails, `p_eq` (with `equivalence` m > 0) that |parameter| < m: the "no
    difference beyond m" a claim may declare besides its relation."""
    values = _finite(values)
    n, mean, sd, se, q = t_summary(values)
    if test == "sign":
        effect = float(np.median(values)) if n else float("nan")
        ci = median_interval(values)
    else:
        effect = mean
        ci = (mean - q * se, mean + q * se) if n > 1 else (float("nan"), float("nan"))
    p, p_opp = (float(x) for x in relation_p(values, relation, low, high, test))
    side = SIDES[relation]
    distance = {"above": effect - low, "below": low - effect}.get(side)
    if distance is None:
        distance = min(effect - low, high - effect) if side == "inside" else max(low - effect, effect - high)
    p_eq = float(relation_p(values, "within", -equivalence, equivalence, test)[0]) if equivalence else float("nan")
    share, ties = _share(values, relation, low, high) if n else (float("nan"), 0.0)
    return SubTest(where=where, n=n, effect=effect, ci_low=ci[0], ci_high=ci[1], p=p, p_opp=p_opp, sd=sd,
                   distance=distance, p_eq=p_eq, vacuous=vacuous, skew=skewness(values), share=share, ties=ties,
                   test=test, values=values, **at)


def partial_conjunction(p: Any, r: int) -> Any:
    """p-value that at least r of the hypotheses hold, from their p-values (on the last axis of an
    array: one result per leading index): (m - r + 1) times the r-th smallest (Benjamini and Heller
    2008, Bonferroni combination; valid under any dependence). r = m is the intersection-union test
    (the largest p), r = 1 Bonferroni (m times the smallest). A NaN p-value counts as 1 (nothing
    shown); all NaN, or no hypothesis, gives NaN (nothing was tested)."""
    values = np.asarray(p, dtype=float)
    scalar = values.ndim <= 1
    values = np.atleast_1d(values)
    m = values.shape[-1]
    if m == 0 or not 1 <= r <= m:
        out = np.full(values.shape[:-1], np.nan)
    else:
        tested = np.isfinite(values).any(axis=-1)
        ranked = np.sort(np.nan_to_num(values, nan=1.0), axis=-1)[..., r - 1]
        out = np.where(tested, np.minimum(1.0, (m - r + 1) * ranked), np.nan)
    return float(out) if scalar else out


def needed(quantifier: str, m: int) -> int:
    """How many of m panels must hold for a claim with this quantifier: all, most (more than
    half) or some (one)."""
    return {"all": m, "most": m // 2 + 1, "some": 1}[quantifier]


def combine_p(p_hold: Any, p_fail: Any, p_equiv: Any, quantifier: str) -> tuple[Any, Any, Any]:
    """(p holds, p fails, p no difference beyond e) of one claim at one look, by its quantifier,
    from its sub-tests' p-values on the last axis of each array (leading axes: one claim each, as
    `sequential.simulate` passes them). `p_hold` and `p_equiv` are those of the m sub-tests that
    can support the claim, r = `needed(quantifier, m)` of them required; `p_fail` those of every
    sub-test, the screened ones too. "Holds" is the partial conjunction "at least r hold", "no
    difference beyond e" "at least r within e" (under `all`: every panel), and "fails" "at least
    m - r + 1 of all the sub-tests fail" (`stats.partial_conjunction`). Counting failures over more
    sub-tests with the same threshold keeps "holds" and "fails" from both being false, so at most
    one of their nulls is true (the Holm cap of `sequential.family_verdicts`). A claim with no
    sub-test left to support it has only "fails", with r from the quantifier over all sub-tests."""
    p_hold, p_fail, p_equiv = (np.asarray(x, dtype=float) for x in (p_hold, p_fail, p_equiv))
    m, m_all = p_hold.shape[-1], p_fail.shape[-1]
    if m:
        r = needed(quantifier, m)
        hold, equiv, against = partial_conjunction(p_hold, r), partial_conjunction(p_equiv, r), m - r + 1
    else:
        hold, equiv = np.full(p_hold.shape[:-1], np.nan), np.full(p_equiv.shape[:-1], np.nan)
        against = m_all - needed(quantifier, m_all) + 1 if m_all else 0
    fail = partial_conjunction(p_fail, against) if m_all else np.full(p_fail.shape[:-1], np.nan)
    return hold, fail, equiv


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


def _sign_seeds(share: float, ties: float, level: float) -> float:
    """Seeds the sign test at `level` needs for POWER when a share `share` > 1/2 of the untied seeds
    lies on the relation's side and a share `ties` ties: the smallest untied count k with P(Binomial(k,
    share) > c_k) >= POWER, c_k the test's critical count (exact binomial), over 1 - ties."""
    if not np.isfinite(share) or share <= 0.5 or ties >= 1:
        return float("inf")
    high = 8
    while True:
        k = np.arange(1, high + 1)
        critical = stats.binom.isf(level, k, 0.5)  # reject when the count exceeds it: P(B > c) <= level
        power = stats.binom.sf(critical, k, share)
        enough = np.flatnonzero(power >= POWER)
        if enough.size:
            return float(math.ceil(int(k[enough[0]]) / (1 - ties)))
        if high > MAX_SEEDS:
            return float("inf")
        high *= 4


def _t_seeds(sd: float, distance: float, level: float) -> float:
    """Seeds a one-sided t-test at `level` needs for POWER at this effect and spread: the smallest n
    with n >= ((t_{1-level, n-1} + t_{POWER, n-1}) sd / |distance|)^2 (Student t quantiles)."""
    if not np.isfinite(sd) or sd == 0 or not np.isfinite(distance):
        return float("nan")
    if distance == 0:
        return float("inf")
    ratio = sd / abs(distance)

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


def seeds_needed(test: SubTest, level: float, against: bool = False) -> float:
    """Seeds the sub-test's one-sided test at `level` needs for POWER (0.8) if the per-seed values
    kept their observed shape: for the sign test, from the observed share of untied seeds on the
    relation's side (the opposite side with `against`) and the share of ties (`_sign_seeds`); for
    the t-test from the observed effect and spread (`_t_seeds`). inf when the observed shape would
    never decide it (an effect on the margin), beyond `MAX_SEEDS`."""
    if test.test == "sign":
        share = 1 - test.share if against else test.share
        return _sign_seeds(share, test.ties, level)
    return _t_seeds(test.sd, test.distance, level)


def seeds_to_decide(tests: list[SubTest], level: float, r: int | None = None) -> float:
    """Seeds at which the claim would be decided if every sub-test kept its observed shape,
    jointly over its panels: reproduced once r of them (default: all) are, each at level /
    (m - r + 1) (the partial conjunction's share), or contradicted once m - r + 1 of them show
    the opposite, each at level / r: the smaller of the two seed counts."""
    m = len(tests)
    if not m:
        return float("nan")
    r = m if r is None else r

    def kth(counts: list[float], k: int) -> float:
        counts = sorted(c for c in counts if np.isfinite(c))
        return counts[k - 1] if len(counts) >= k else float("inf")

    support = [seeds_needed(t, level / (m - r + 1)) if t.distance > 0 else float("inf") for t in tests]
    against = [seeds_needed(t, level / r, against=True) if t.distance < 0 else float("inf") for t in tests]
    options = [n for n in (kth(support, r), kth(against, m - r + 1)) if np.isfinite(n)]
    return float(min(options)) if options else float("inf")


__all__ = ["ALPHA", "MAX_SEEDS", "PARAMETER", "POWER", "SIDES", "SubTest", "TEST", "TESTS", "TIE_RTOL", "holm",
           "combine_p", "lower_p", "median_interval", "needed", "partial_conjunction", "relation_p", "seeds_needed",
           "seeds_to_decide", "skewness", "subtest", "t_summary", "tail_p", "upper_p"]
