"""Statistics of one-run privacy auditing (Steinke, Nasr, Jagielski, NeurIPS 2023, arXiv 2305.08846).

The game (the paper's auditor, Algorithm 1). There are m canaries. Before the single run each is
included independently with probability 1/2 (S_i = +1 "in", S_i = -1 "out"; S uniform on
{-1, +1}^m). The mechanism runs once; from its output alone the auditor computes a score per
canary and guesses T_i = +1 ("in") for the k+ highest scores, T_i = -1 ("out") for the k- lowest,
and abstains (T_i = 0) on the rest, so it makes r = k+ + k- guesses. W = #{i : T_i = S_i} is the
number of correct guesses.

What is proven (the paper's main theorem; "Theorem 3.1" below, the number secondary sources give
for arXiv v1, with the (eps, delta) p-value also cited there as Corollary 5.4: the offline library
holds only the abstract, so the formula was checked against values the paper's code prints,
m = 1000, r = 100, v = 75, delta = 1e-4 -> 0.673, see tests/privacy/test_one_run.py). If the mechanism is (eps, delta)-DP with
respect to adding or removing any one canary, then for every integer v

    P[W >= v] <= f_eps(v) := P[B >= v] + 2 m delta * max_{1 <= i <= v} P[v - i <= B < v] / i,
    B ~ Binomial(r, q),  q = e^eps / (e^eps + 1).

For delta = 0 this says W is stochastically dominated by Binomial(r, q): the auditor does no
better than r independent eps-DP randomized responses. The delta term is the paper's (it is the
bound its p-value procedure computes, arXiv v1 Appendix D): it needs m, the number of *all*
randomized canaries (not only the r guessed ones). (The maximum over i >= 1 in the paper can
stop at i = v: beyond it the window [v - i, v) stops growing while i does.)

From a bound to an epsilon (`one_run_epsilon_lower_bound`). With v correct guesses observed,
"(eps, delta)-DP" is rejected at level alpha when f_eps(v) <= alpha; the reported lower bound is
the supremum of the rejected eps (0 when none is). Validity: for any true eps* (the smallest eps
for which the mechanism is (eps, delta)-DP) the report exceeds eps* with probability <= alpha,
because every f_eps with eps >= eps* bounds the tail of W and {f_eps(W) <= alpha} is contained in
{W >= v_eps}, v_eps the smallest v rejected, whose probability is <= f_eps(v_eps) <= alpha (the
union over eps is again one such set). This needs neither monotonicity of f in v nor in eps; those
only matter for *finding* the supremum:

* f_eps(v) is nondecreasing in eps and nonincreasing in v whenever 2 m delta <= 1 (in particular
  for delta = 0). [Each term P[B >= v] + c P[v-i <= B < v]/i has derivative in q equal to
  r (pmf'(v-1) (1 - c/i) + (c/i) pmf'(v-i-1)) >= 0 for c = 2 m delta <= 1 (pmf' that of
  Binomial(r-1, q)), and f(v+1) <= f(v) - (1 - c) P[B = v].] So the rejected eps form an
  interval [0, eps_hat] and a bracketing root find on [0, eps_0] gives eps_hat.
* When 2 m delta > 1 (e.g. m = 10^5, delta = 10^-5) monotonicity in eps is not guaranteed; we
  first scan a grid of `GRID_POINTS` eps values and root-find in the cell after the largest
  rejected grid point. (We found no non-monotone case in random trials, so in practice this
  equals the plain root find.)

The root find (brentq, xtol 1e-12, on a bracket with f(lo) <= alpha < f(hi)) is followed by a
check that the returned eps is itself rejected in floating point (stepping down by <= 1e-8 if
not, with a bisection as fallback): a numerical error can only make the report smaller.

The search interval is [0, eps_0(v)], where eps_0(v) = logit(Beta.ppf(alpha, v, r - v + 1)) is the
closed-form delta = 0 bound (P[B >= v] is the Beta(v, r - v + 1) cdf at q): f >= P[B >= v] > alpha
above it. It is clipped to `EPSILON_CAP` = 30 (q = 1 - 9e-14), reached only with r above ~10^13
guesses.

Choosing k (`one_run_audit`). k+ and k- must be fixed before the guesses are scored: taking the
best bound over many k after seeing the outcome overstates it. `one_run_audit_grid` allows a
fixed list of J choices and pays for them with a Bonferroni split (each at alpha / J; the maximum
is then valid at 1 - alpha by the union bound).

Pure maths (numpy/scipy), no I/O.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from dpbench.privacy.audit_bounds import _check_alpha, _check_delta

#: upper end of the eps search (q = expit(30) = 1 - 9.4e-14); only r > ~10^13 guesses reach it
EPSILON_CAP = 30.0
#: eps grid scanned before bisecting when 2 m delta > 1 (where monotonicity in eps is unproven)
GRID_POINTS = 257
#: bisection steps of the fallback in `_last_rejected` (bracket on [0, <= 30] then < 1e-14 wide)
BISECTION_STEPS = 64
#: default total number of guesses as a fraction of m (split evenly "in" / "out"); see one_run_audit
DEFAULT_GUESS_FRACTION = 0.1


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------
def _check_count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def _check_counts(correct, guesses, canaries) -> tuple[int, int, int]:
    v = _check_count("correct", correct)
    r = _check_count("guesses", guesses)
    m = _check_count("canaries", canaries)
    if m < 1:
        raise ValueError("canaries must be >= 1")
    if v > r:
        raise ValueError(f"correct ({v}) cannot exceed guesses ({r})")
    if r > m:
        raise ValueError(f"guesses ({r}) cannot exceed canaries ({m}): at most one guess per canary")
    return v, r, m


# ---------------------------------------------------------------------------------------------
# the bound on the number of correct guesses and its inversion
# ---------------------------------------------------------------------------------------------
def _tail_bound(eps: float, v: int, r: int, m: int, delta: float) -> float:
    """f_eps(v) of Theorem 3.1 (module docstring), capped at 1; inputs already checked."""
    if v == 0:
        return 1.0
    q = float(special.expit(eps))
    binom_tail = float(stats.binom.sf(v - 1, r, q))  # P[B >= v]
    if delta == 0.0:
        return min(binom_tail, 1.0)
    # windows P[v - i <= B <= v - 1] for i = 1..v, accumulated from the top
    pmf = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)
    window = float(np.max(np.cumsum(pmf) / np.arange(1, v + 1)))
    return min(binom_tail + 2.0 * m * delta * window, 1.0)


def one_run_p_value(correct: int, guesses: int, canaries: int, epsilon: float, delta: float) -> float:
    """The p-value of `correct` of `guesses` right under "(epsilon, delta)-DP": f_eps(v) of Theorem 3.1.

    Steinke, Nasr, Jagielski (NeurIPS 2023), Theorem 3.1: under (eps, delta)-DP with respect to
    each of the m = `canaries` independently randomized canaries,
    P[W >= v] <= P[B >= v] + 2 m delta max_{1<=i<=v} P[v - i <= B < v] / i, B ~ Binomial(r, e^eps/(e^eps+1)).
    Capped at 1. For delta = 0 it is exactly the Binomial tail P[B >= v].
    """
    v, r, m = _check_counts(correct, guesses, canaries)
    d = _check_delta(delta)
    e = float(epsilon)
    if not (e >= 0.0 and math.isfinite(e)):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    return _tail_bound(e, v, r, m, d)


def _delta_zero_bound(v: int, r: int, alpha: float) -> float:
    """Closed-form delta = 0 bound: logit of the one-sided Clopper-Pearson lower limit of v / r."""
    if v == 0:
        return 0.0
    q_low = float(stats.beta.ppf(alpha, v, r - v + 1))  # P[Bin(r, q) >= v] <= alpha  <=>  q <= q_low
    if not q_low > 0.5:
        return 0.0
    return min(float(special.logit(q_low)), EPSILON_CAP)


def one_run_epsilon_lower_bound(correct: int, guesses: int, canaries: int, delta: float,
                                alpha: float = 0.05) -> float:
    """The largest eps whose (eps, delta)-DP claim `correct` of `guesses` right rejects at level alpha.

    Returns sup{eps in [0, EPSILON_CAP] : f_eps(v) <= alpha} with f the bound of the paper's main
    theorem (Theorem 3.1; see the module docstring), and 0 when no eps is rejected. With
    probability >= 1 - alpha over the canaries' coin flips (and the mechanism), the true eps of an
    (eps, delta)-DP mechanism is at least the returned value.

    * delta = 0: the inversion of the Binomial tail, P[Binomial(r, e^eps/(e^eps+1)) >= v] = alpha,
      i.e. logit of the one-sided Clopper-Pearson lower limit on the per-guess accuracy.
    * delta > 0: the paper's delta term 2 m delta max_i P[v - i <= B < v] / i is added before
      inverting (needs m = `canaries`, the number of randomized canaries, guessed or not).

    Root find: brentq in eps on [0, eps_0], eps_0 the closed-form delta = 0 bound (never above
    EPSILON_CAP = 30), on a bracket with f(lo) <= alpha < f(hi); the returned eps is checked to
    be rejected itself (so rounding can only lower it). f is provably monotone in eps when
    2 m delta <= 1; otherwise a grid of GRID_POINTS values is scanned first and the root find
    runs in the cell after the largest rejected grid point.

    Raises ValueError for correct > guesses, guesses > canaries, alpha outside (0, 1) or delta
    outside [0, 1).
    """
    v, r, m = _check_counts(correct, guesses, canaries)
    d = _check_delta(delta)
    a = _check_alpha(alpha)
    if v == 0:
        return 0.0
    hi = _delta_zero_bound(v, r, a)
    if d == 0.0 and hi > 0.0:
        # the closed form is the answer; bracket it slightly wider and solve on the tail itself
        # so the returned value satisfies P[B >= v] <= alpha in floating point too
        hi = min(hi * (1 + 1e-9) + 1e-12, EPSILON_CAP)

    def rejected(eps: float) -> bool:
        return _tail_bound(eps, v, r, m, d) <= a

    # make sure the upper end is not rejected (the closed form is exact up to rounding)
    while hi < EPSILON_CAP and rejected(hi):
        hi = min(hi + 1.0, EPSILON_CAP)
    if hi <= 0.0 or (hi >= EPSILON_CAP and rejected(hi)):
        return 0.0 if hi <= 0.0 else EPSILON_CAP

    if 2.0 * m * d <= 1.0:
        lo = 0.0
        if not rejected(lo):
            return 0.0
    else:
        grid = np.linspace(0.0, hi, GRID_POINTS)
        flags = [rejected(float(e)) for e in grid[:-1]]
        if not any(flags):
            return 0.0
        last = max(i for i, flag in enumerate(flags) if flag)
        lo, hi = float(grid[last]), float(grid[last + 1])

    return _last_rejected(lambda e: _tail_bound(e, v, r, m, d) - a, lo, hi)


def _last_rejected(excess, lo: float, hi: float) -> float:
    """A rejected eps at the crossing in [lo, hi], given excess(lo) <= 0 < excess(hi).

    brentq (xtol 1e-12) locates the crossing; the returned point is then stepped down until it is
    rejected in floating point (excess <= 0), so it never lies on the unrejected side. If that
    fails (it should not), a plain bisection keeping excess(lo) <= 0 < excess(hi) takes over.
    """
    root = optimize.brentq(excess, lo, hi, xtol=1e-12, rtol=4 * np.finfo(float).eps)
    for step in (0.0, 2e-12, 1e-10, 1e-8):
        x = max(lo, root - step)
        if excess(x) <= 0:
            return float(x)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if excess(mid) <= 0:
            lo = mid
        else:
            hi = mid
    return float(lo)


def one_run_ceiling(guesses: int, canaries: int, delta: float, alpha: float = 0.05) -> float:
    """The largest bound `guesses` guesses on `canaries` canaries can give: all of them correct.

    For delta = 0 it is logit(alpha^(1/r)) ~ ln(r / ln(1/alpha)) (about ln(r / 3.0) at alpha = 0.05):
    no one-run audit with r guesses can certify more, however leaky the mechanism.
    """
    return one_run_epsilon_lower_bound(guesses, guesses, canaries, delta, alpha)


# ---------------------------------------------------------------------------------------------
# guesses from scores, and the audit
# ---------------------------------------------------------------------------------------------
def _check_scores(scores) -> np.ndarray:
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1:
        raise ValueError(f"scores must be a 1-D array (one score per canary), got shape {s.shape}")
    if s.size == 0:
        raise ValueError("scores is empty: need at least one canary")
    if np.any(np.isnan(s)):
        raise ValueError("scores contain NaN: map them to a value (e.g. -inf) by a rule fixed in advance")
    return s


def guesses(scores: np.ndarray, k_pos: int, k_neg: int) -> np.ndarray:
    """+1 ("in") for the k_pos highest scores, -1 ("out") for the k_neg lowest, 0 (abstain) otherwise.

    The auditor of Steinke, Nasr, Jagielski (Algorithm 1). Canaries are ranked by (score, index)
    ascending: among equal scores the one with the larger index ranks higher. The index must not
    depend on the inclusion bits (canaries numbered before the coin flips), which keeps the guesses
    a function of the output alone, as the theorem requires. Returns an int8 array.
    """
    s = _check_scores(scores)
    kp = _check_count("k_pos", k_pos)
    kn = _check_count("k_neg", k_neg)
    if kp + kn > s.size:
        raise ValueError(f"k_pos + k_neg = {kp + kn} exceeds the number of canaries ({s.size})")
    order = np.lexsort((np.arange(s.size), s))  # ascending by score, then by index
    out = np.zeros(s.size, dtype=np.int8)
    if kn:
        out[order[:kn]] = -1
    if kp:
        out[order[s.size - kp:]] = 1
    return out


@dataclass(frozen=True)
class OneRunResult:
    """One one-run audit: the epsilon lower bound (confidence 1 - alpha) and what it came from.

    `alpha` is the overall level; `alpha_per_test` = alpha / n_tests is what this (k_pos, k_neg)
    was evaluated at (n_tests > 1 only for `one_run_audit_grid`, a Bonferroni split).
    """

    epsilon_lower: float
    m: int  # canaries (all randomized, guessed or not)
    r: int  # guesses = k_pos + k_neg
    correct: int
    k_pos: int
    k_neg: int
    alpha: float
    delta: float
    n_tests: int = 1
    alpha_per_test: float | None = None

    @property
    def accuracy(self) -> float:
        """correct / r (nan without guesses): descriptive only."""
        return self.correct / self.r if self.r else float("nan")


def _check_included(included, m: int) -> np.ndarray:
    b = np.asarray(included)
    if b.ndim != 1 or b.size != m:
        raise ValueError(f"included must be a 1-D array with one bit per canary ({m}), got shape {b.shape}")
    if b.dtype != bool:
        if not np.all((b == 0) | (b == 1)):
            raise ValueError("included must be boolean (or 0/1)")
        b = b.astype(bool)
    return b


def default_k(m: int) -> tuple[int, int]:
    """(k_pos, k_neg) used when none is given: r = max(1, floor(m / 10)) guesses, ceil(r/2) "in".

    Our choice, fixed before any run (the paper gives no single default: its experiments vary the
    number of guesses). Abstaining on the middle 90 % keeps the guesses on the canaries the
    attack is surest about, while r = m/10 still allows a ceiling of about ln(m / 30) at
    alpha = 0.05 (m = 1000: 3.5).
    """
    r = max(1, int(math.floor(DEFAULT_GUESS_FRACTION * m)))
    return (r + 1) // 2, r // 2


def _count_correct(g: np.ndarray, included: np.ndarray) -> int:
    return int(np.sum((g == 1) & included) + np.sum((g == -1) & ~included))


def one_run_audit(scores, included, delta: float, alpha: float = 0.05,
                  k_pos: int | None = None, k_neg: int | None = None) -> OneRunResult:
    """Guess, count, bound: the one-run audit for one (k_pos, k_neg) fixed in advance.

    `scores`: one score per canary computed from the mechanism's output only (higher = more
    "in"-like); `included`: the true inclusion bits, which must have been drawn independently
    with probability 1/2 each (the paper's setting; not checked). The guesses are `guesses`
    (ties by index), correct = #{+1 on an included canary} + #{-1 on an excluded one}, and the
    bound is `one_run_epsilon_lower_bound(correct, k_pos + k_neg, m, delta, alpha)`.

    k_pos / k_neg default to `default_k(m)` (r = m/10, half "in", half "out"). They must be
    chosen without looking at the outcome; to try several, use `one_run_audit_grid`.
    """
    s = _check_scores(scores)
    inc = _check_included(included, s.size)
    d = _check_delta(delta)
    a = _check_alpha(alpha)
    kp_default, kn_default = default_k(s.size)
    kp = kp_default if k_pos is None else _check_count("k_pos", k_pos)
    kn = kn_default if k_neg is None else _check_count("k_neg", k_neg)
    g = guesses(s, kp, kn)
    v = _count_correct(g, inc)
    r = kp + kn
    eps = one_run_epsilon_lower_bound(v, r, s.size, d, a)
    return OneRunResult(epsilon_lower=eps, m=int(s.size), r=r, correct=v, k_pos=kp, k_neg=kn,
                        alpha=a, delta=d, n_tests=1, alpha_per_test=a)


def one_run_audit_grid(scores, included, delta: float, alpha: float = 0.05,
                       ks: Sequence[tuple[int, int]] = ()) -> OneRunResult:
    """The best of J = len(ks) audits (k_pos, k_neg), each at alpha / J (Bonferroni).

    Valid at confidence 1 - alpha: the maximum exceeds the true eps only if one of the J bounds
    does, each with probability <= alpha / J. The grid `ks` must be fixed in advance. Ties go to
    the first entry of `ks`. The result's `alpha` is the overall level, `alpha_per_test` = alpha / J.
    """
    a = _check_alpha(alpha)
    pairs = [(int(kp), int(kn)) for kp, kn in ks]
    if not pairs:
        raise ValueError("ks is empty: give at least one (k_pos, k_neg)")
    share = a / len(pairs)
    best = None
    for kp, kn in pairs:
        res = one_run_audit(scores, included, delta, share, kp, kn)
        if best is None or res.epsilon_lower > best.epsilon_lower:
            best = res
    return OneRunResult(epsilon_lower=best.epsilon_lower, m=best.m, r=best.r, correct=best.correct,
                        k_pos=best.k_pos, k_neg=best.k_neg, alpha=a, delta=best.delta,
                        n_tests=len(pairs), alpha_per_test=share)


__all__ = [
    "DEFAULT_GUESS_FRACTION",
    "EPSILON_CAP",
    "GRID_POINTS",
    "OneRunResult",
    "default_k",
    "guesses",
    "one_run_audit",
    "one_run_audit_grid",
    "one_run_ceiling",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
]
