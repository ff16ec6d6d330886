"""The group-sequential design: adding seeds in rounds (`dpbench decide`) and testing a claim after
each round, with the error guarantee of a test run once at a fixed number of seeds.

A `Design` fixes the looks: the seed counts n_1 < n_2 < ... < n_K at which the claims of an
experiment are tested; n_K is the most seeds any panel may get. Testing again after every round at
the full level ALPHA would let chance fluctuations accumulate: a null claim that is tested four
times is wrongly reproduced far more often than one in twenty times. The design splits the level
over the looks instead. The spending function f(t) = ln(1 + (e - 1) t) (the Pocock-type shape of
Lan & DeMets 1983, after Pocock 1977) gives the share of the level spent by the information
fraction t = n / n_K: look k gets the weight w_k = f(n_k / n_K) - f(n_{k-1} / n_K) (n_0 = 0), the
weights sum to 1, and the early looks, which can only decide large effects, get a fair but not a
large share.

Each of a claim's hypotheses is tested at look k with the ordinary one-sided p-value p_k of its
per-seed statistics (`stats`) on the seeds it has then, and the look-by-look p-values combine into
one sequential p-value, min_k p_k / w_k (`sequential_p`): the Bonferroni split of the level over
the looks, in the form of a p-value. It is valid whatever the dependence between looks (they share
seeds) and whatever rule decides to stop: P(some k has p_k <= a w_k) <= sum_k a w_k = a for every
level a, and stopping early only removes terms from the minimum, which can only raise it.

The claims of one experiment form one family (`family_verdicts`). Each claim contributes the
sequential p-values of three hypotheses: that its relation holds (the null: it fails), that it
fails (the null: it holds), and, where it declares an equivalence margin m, that there is no
difference beyond m (the null: some panel differs by m or more). Holm's step-down procedure over
all of them controls the chance of any false verdict in the experiment, and since exactly one of a
claim's two complementary nulls "holds" / "fails" is true, and its equivalence null may be true as
well, Holm's multiplier is capped at the number of nulls that can be true at once (`stats.holm`).
The verdict: reproduced when "holds" is rejected, else contradicted when "fails" is, else "no
difference beyond m" when equivalence is, else inconclusive.

Rounds: after each look the claims still inconclusive get seeds up to the next look; a decided
claim stops, and its p-values stay those of its last look. The sequential p-values only fall as
looks are added and Holm rejects more when any p-value falls, so every rejection made at any round
is one that Holm would make on the sequential p-values every claim would have had had it run to
n_K, which are valid p-values: the family-wise error stays at most ALPHA under this optional
stopping. `simulate` checks that by Monte Carlo, for the procedure as `decide` runs it, against the
naive one that re-tests at the full level at every look.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import pandas as pd
from scipy import stats as sps

from dpbench.analysis.claims.stats import ALPHA, TEST, combine_p, holm, relation_p

#: the default looks: seed counts at which the claims are tested, each round doubling the seeds
DEFAULT_LOOKS = (5, 10, 20, 40)

REPRODUCED, CONTRADICTED, EQUIVALENT = "reproduced", "contradicted", "no difference beyond m"
INCONCLUSIVE, NO_DATA = "undecided", "no data"


def spending(t: float | np.ndarray) -> float | np.ndarray:
    """The Pocock-type spending shape (Lan & DeMets 1983): f(t) = ln(1 + (e - 1) t), the share of
    the level spent by information fraction t in [0, 1]; f(0) = 0, f(1) = 1, increasing, concave."""
    t = np.asarray(t, dtype=float)
    if np.any((t < 0) | (t > 1)):
        raise ValueError(f"spending: the information fraction must lie in [0, 1], got {t}")
    f = np.log1p((math.e - 1) * t)
    return float(f) if f.ndim == 0 else f


@dataclass(frozen=True)
class Design:
    """The looks of a group-sequential design: the seed counts at which claims are tested, strictly
    increasing, the first at least 2 (a paired t-test needs two seeds); the last is the most seeds
    any panel may get."""

    looks: tuple[int, ...] = DEFAULT_LOOKS

    def __post_init__(self) -> None:
        looks = tuple(self.looks)
        if not looks:
            raise ValueError("Design: at least one look is needed")
        if any(isinstance(n, bool) or int(n) != n for n in looks):
            raise ValueError(f"Design: looks must be whole seed counts, got {looks}")
        looks = tuple(int(n) for n in looks)
        if looks[0] < 2:
            raise ValueError(f"Design: the first look must have at least 2 seeds (a paired t-test needs two), "
                             f"got {looks[0]}")
        if any(b <= a for a, b in pairwise(looks)):
            raise ValueError(f"Design: looks must be strictly increasing, got {looks}")
        object.__setattr__(self, "looks", looks)

    @classmethod
    def fixed(cls, n: int) -> Design:
        """One look at n seeds, with weight 1: the fixed-sample test."""
        return cls((n,))

    @property
    def max_seeds(self) -> int:
        """The last look: the most seeds any panel may get."""
        return self.looks[-1]

    @property
    def weights(self) -> np.ndarray:
        """The share of the level each look spends: w_k = f(n_k / n_K) - f(n_{k-1} / n_K), n_0 = 0
        (`spending`); positive, summing to 1."""
        fractions = np.asarray((0,) + self.looks, dtype=float) / self.max_seeds
        return np.diff(spending(fractions))

    def looks_upto(self, n: int) -> tuple[int, ...]:
        """The looks a panel with n seeds has reached (those <= n)."""
        return tuple(k for k in self.looks if k <= n)


def sequential_p(p_by_look: Sequence[float] | np.ndarray, weights: Sequence[float] | np.ndarray) -> float | np.ndarray:
    """The p-value of a test run at several looks with the level split over them by `weights`:
    min_k p_k / w_k, capped at 1. Looks not yet reached are absent (a sequence shorter than the
    weights uses the first len(p) of them); NaN p-values are skipped, and all NaN (or none) gives
    NaN. An array with looks on its last axis gives an array of sequential p-values.

    It is a p-value at every level a, whatever the dependence between the looks and whatever rule
    decides when to stop: the test rejects at level a when some p_k <= a w_k, and by the union
    bound P(some k has p_k <= a w_k) <= sum_k a w_k <= a under the null. Stopping early only
    removes terms from the minimum. Being a p-value at every level, it can enter Holm's procedure
    across the claims of an experiment like any other."""
    p = np.atleast_1d(np.asarray(p_by_look, dtype=float))
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or np.any(~(w > 0)) or w.sum() > 1 + 1e-9:
        raise ValueError(f"sequential_p: weights must be positive and sum to at most 1, got {w}")
    if p.shape[-1] > w.size:
        raise ValueError(f"sequential_p: {p.shape[-1]} looks but only {w.size} weights")
    if p.shape[-1] == 0:
        out = np.full(p.shape[:-1], np.nan)
    else:
        out = np.minimum(1.0, np.fmin.reduce(p / w[:p.shape[-1]], axis=-1))
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class FamilyDecision:
    """The decision on one family (the claims of one experiment), claim by claim: the verdict and
    the Holm-adjusted p-values of "the relation holds", "it fails" and "no difference beyond the
    margin" (NaN where that p-value was NaN); `cap` is the Holm multiplier cap used (None: plain)."""

    verdicts: list[str]
    hold: list[float]
    fail: list[float]
    equiv: list[float]
    cap: int | None


def family_verdicts(p_hold: Sequence[float], p_fail: Sequence[float], p_equiv: Sequence[float],
                    alpha: float = ALPHA, *, capped: bool = True) -> FamilyDecision:
    """Verdicts of one family from each claim's sequential p-values that its relation holds
    (`p_hold`), that it fails (`p_fail`) and that it differs by no more than its equivalence margin
    (`p_equiv`; NaN where the claim declares none).

    All finite p-values of the family are one Holm family, the multiplier capped (`stats.holm`) at
    the number of nulls that can be true at once: one per claim with a finite p_hold or p_fail
    (the two nulls are complementary, so exactly one is true) plus one per claim with a finite
    p_equiv. Each claim's verdict: reproduced when "holds" is rejected (adjusted p <= alpha), else
    contradicted when "fails" is, else "no difference beyond m" when equivalence is, else
    inconclusive; "no data" where all three p-values are NaN. capped=False is plain Holm (the
    naive comparison of `simulate`)."""
    hold, fail, equiv = (np.asarray(x, dtype=float).ravel() for x in (p_hold, p_fail, p_equiv))
    if not hold.size == fail.size == equiv.size:
        raise ValueError(f"family_verdicts: p_hold, p_fail and p_equiv differ in length "
                         f"({hold.size}, {fail.size}, {equiv.size})")
    c = hold.size
    directional = np.isfinite(hold) | np.isfinite(fail)
    cap = int(directional.sum() + np.isfinite(equiv).sum()) if capped else None
    adjusted = np.asarray(holm(np.concatenate([hold, fail, equiv]).tolist(), cap=cap or None))
    a_hold, a_fail, a_equiv = adjusted[:c], adjusted[c:2 * c], adjusted[2 * c:]
    verdicts = []
    for i in range(c):
        if a_hold[i] <= alpha:
            verdicts.append(REPRODUCED)
        elif a_fail[i] <= alpha:
            verdicts.append(CONTRADICTED)
        elif a_equiv[i] <= alpha:
            verdicts.append(EQUIVALENT)
        elif directional[i] or np.isfinite(equiv[i]):
            verdicts.append(INCONCLUSIVE)
        else:
            verdicts.append(NO_DATA)
    return FamilyDecision(verdicts, a_hold.tolist(), a_fail.tolist(), a_equiv.tolist(), cap or None)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided confidence interval of a binomial proportion k / n."""
    tail = (1 - level) / 2
    low = float(sps.beta.ppf(tail, k, n - k + 1)) if k > 0 else 0.0
    high = float(sps.beta.ppf(1 - tail, k + 1, n - k)) if k < n else 1.0
    return low, high


def default_effects(claims: int = 12, panels: int = 3, sd: float = 1.0,
                    margin: float | None = 0.5) -> dict[str, np.ndarray]:
    """The scenarios of `simulate`, scenario name -> the true effects, a (claims, panels) array (a
    claim with fewer panels uses the first ones):

    - null: every effect 0, the boundary of "A - B > 0" (a reproduced verdict is an error);
    - at the margin: every effect m (a "no difference beyond m" verdict is an error);
    - split: the first panel 0, the others m (two true nulls per claim with more than one panel:
      "holds" and "no difference", the case the Holm cap must allow for);
    - mix: the first half of the claims 0, the others 0.5 sd (power, and the error on the null half);
    - mix, 1 sd: the same with 1 sd;
    - small: every effect 0.3 sd;
    - failing: every effect -0.5 sd (power to contradict).

    The scenarios that need a margin are left out without one."""
    half = claims // 2
    every = np.ones((claims, panels))
    scenarios = {"null: every effect 0": 0 * every}
    if margin is not None:
        scenarios["at the margin: every effect m"] = margin * every
        scenarios["split: panel 1 at 0, the others at m"] = np.where(np.arange(panels) == 0, 0.0, margin) * every
    for size in (0.5, 1.0):
        per_claim = np.r_[np.zeros(half), np.full(claims - half, size * sd)]
        scenarios[f"mix: half 0, half {size:g} sd"] = per_claim[:, None] * every
    scenarios["small: every effect 0.3 sd"] = 0.3 * sd * every
    scenarios["failing: every effect -0.5 sd"] = -0.5 * sd * every
    return scenarios


@dataclass(frozen=True)
class SimulationResult:
    """`simulate`'s result: one row per scenario (`table()` has the columns) and the settings."""

    rows: tuple[dict, ...]
    design: Design
    n_experiments: int
    claims: int
    panels: tuple[int, ...]
    sd: float
    margin: float | None
    alpha: float
    naive: bool
    seconds: float = field(default=float("nan"), compare=False)

    def table(self) -> pd.DataFrame:
        """One row per scenario: `fwer` (the fraction of experiments with a true null rejected:
        a false reproduced, contradicted or "no difference" verdict, or one hidden behind another
        verdict of the same claim) with its 95 % Clopper-Pearson interval `fwer_low`, `fwer_high`;
        `fwer_verdicts` (experiments with a false verdict); `power_reproduced` (truly holding claims
        reproduced) and `power_contradicted` (claims with an effect <= -0.5 sd contradicted), NaN
        without such claims; `mean_seeds` (seeds a claim used) and `decided` (claims not
        inconclusive)."""
        return pd.DataFrame(list(self.rows))

    def row(self, scenario: str) -> dict:
        """The row of the scenario whose name starts with `scenario`."""
        found = [r for r in self.rows if r["scenario"].startswith(scenario)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} scenarios start with {scenario!r}")
        return found[0]

    def markdown(self) -> str:
        """The table as Markdown, with the settings on a line above it."""
        procedure = "naive (full level at every look, plain Holm)" if self.naive else "spending + capped Holm"
        head = (f"{self.n_experiments} experiments of {self.claims} claims (panels {self.panels}), looks "
                f"{self.design.looks}, sd {self.sd}, margin {self.margin}, alpha {self.alpha}: {procedure}\n\n")
        frame = self.table()
        cells = [[_cell(v) for v in row] for row in frame.itertuples(index=False)]
        lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
        return head + "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells]) + "\n"


def _cell(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _claim_pvalues(diffs: np.ndarray, mask: np.ndarray, looks: tuple[int, ...], margin: float | None,
                   test: str = TEST, quantifier: str = "all",
                   threshold: float | np.ndarray = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each claim's p-values at each look, (experiments, claims, looks) arrays, from per-seed
    values (experiments, claims, panels, seeds); `mask` (claims, panels) marks real panels. The
    claim "the parameter of every panel exceeds its threshold" (`threshold`: a number, or one per
    (claims, panels)), the sub-tests' p-values on the first n_k seeds from `stats.relation_p` with
    `test` and combined by `stats.combine_p` with the quantifier: the verdicts' own path."""
    shape = diffs.shape[:2] + (len(looks),)
    out = [np.empty(shape), np.empty(shape), np.full(shape, np.nan)]
    threshold = np.broadcast_to(np.asarray(threshold, dtype=float), mask.shape)
    count = mask.sum(axis=1)
    for width in np.unique(count):  # claims with the same number of panels combine as one array
        rows = np.flatnonzero(count == width)
        for k, n in enumerate(looks):
            seeds = diffs[:, rows, :width, :n]
            low = threshold[rows, :width][None]
            hold, fail = relation_p(seeds, "greater", low, test=test)
            equiv = relation_p(seeds, "within", -margin, margin, test=test)[0] if margin is not None else \
                np.full(hold.shape, np.nan)
            combined = combine_p(hold, fail, equiv, quantifier)
            for target, value in zip(out, combined):
                target[:, rows, k] = value
    return out[0], out[1], out[2]


def run_rounds(p_hold: np.ndarray, p_fail: np.ndarray, p_equiv: np.ndarray, weights: np.ndarray | None,
         alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rounds of one scenario, as `decide` runs them: at each look every claim still undecided
    takes that look's p-values, the family is decided on the sequential p-values, and decided
    claims stop. weights None is the naive procedure: the smallest p-value over the looks reached
    (each look at the full level) and plain Holm. Returns the verdicts, the rejections
    (experiments, claims, 3: holds, fails, equivalence) and each claim's last look (its index)."""
    experiments, claims, looks = p_hold.shape
    last = np.zeros((experiments, claims), dtype=int)
    active = np.ones((experiments, claims), dtype=bool)
    verdicts = np.full((experiments, claims), INCONCLUSIVE, dtype=object)
    rejected = np.zeros((experiments, claims, 3), dtype=bool)
    for k in range(looks):
        last[active] = k
        reached = np.arange(looks) <= last[..., None]
        seen = [np.where(reached, p, np.nan) for p in (p_hold, p_fail, p_equiv)]
        seq = [np.fmin.reduce(p, axis=-1) if weights is None else sequential_p(p, weights) for p in seen]
        for e in np.flatnonzero(active.any(axis=1)):
            decision = family_verdicts(seq[0][e], seq[1][e], seq[2][e], alpha, capped=weights is not None)
            verdicts[e] = decision.verdicts
            rejected[e] = np.column_stack([decision.hold, decision.fail, decision.equiv]) <= alpha
        active = verdicts == INCONCLUSIVE
    return verdicts, rejected, last


def simulate(n_experiments: int = 2000, claims: int = 12, panels: Sequence[int] = (1, 3),
             design: Design = Design(DEFAULT_LOOKS), effects: Mapping[str, object] | None = None, sd: float = 1.0,
             margin: float | None = 0.5, rng_seed: int = 0, naive: bool = False,
             alpha: float = ALPHA, test: str = TEST) -> SimulationResult:
    """A Monte-Carlo check of the sequential procedure as `decide` runs it.

    Each simulated experiment has `claims` claims "A - B > 0 on every panel", the i-th with
    panels[i % len(panels)] panels, each declaring the equivalence margin `margin` (None: none);
    the per-seed differences of a panel are normal(effect, sd). `effects` maps a scenario name to
    the true effects: a number, one per claim (the same on all its panels) or a (claims, panels)
    array; None: `default_effects`. Every scenario draws its noise from np.random.default_rng
    (rng_seed), so the scenarios (and a naive run) share their random numbers.

    The procedure: at the first look every claim is tested (`_claim_pvalues`), the sequential
    p-values (`sequential_p` with the design's weights) go through `family_verdicts`, claims still
    inconclusive go on to the next look and decided ones stop, until none is undecided or the last
    look is done. The final rejections are scored: rejecting "holds" when some panel's effect is
    <= 0, "fails" when every panel's effect is > 0, or "no difference beyond m" when some panel's
    |effect| >= m, is an error (`SimulationResult.table`).

    naive=True is the procedure without error control under optional stopping: every look tested
    at the full level (weights 1, so a claim is decided once some look alone rejects) with plain
    Holm; it is the negative control the checks compare against."""
    start = time.perf_counter()
    panel_counts = np.asarray([panels[i % len(panels)] for i in range(claims)])
    if claims < 1 or panel_counts.min() < 1:
        raise ValueError(f"simulate: need at least one claim and one panel per claim, got {claims}, {panels}")
    width = int(panel_counts.max())
    mask = np.arange(width) < panel_counts[:, None]
    scenarios = default_effects(claims, width, sd, margin) if effects is None else dict(effects)
    rows = []
    for name, spec in scenarios.items():
        effect = np.asarray(spec, dtype=float)
        try:
            effect = np.broadcast_to(effect[:, None] if effect.ndim == 1 else effect, (claims, width))
        except ValueError:
            raise ValueError(f"simulate: the effects of scenario {name!r} have shape {effect.shape}: give a number, "
                             f"one per claim ({claims}) or a ({claims}, {width}) array") from None
        rng = np.random.default_rng(rng_seed)
        diffs = rng.normal(effect[None, :, :, None], sd, size=(n_experiments, claims, width, design.max_seeds))
        p = _claim_pvalues(diffs, mask, design.looks, margin, test)
        verdicts, rejected, last = run_rounds(*p, None if naive else design.weights, alpha)
        holds = np.where(mask, effect > 0, True).all(axis=1)
        beyond = np.where(mask, np.abs(effect) >= margin, False).any(axis=1) if margin is not None else \
            np.zeros(claims, dtype=bool)
        wrong = rejected & np.stack([~holds, holds, beyond], axis=-1)[None]
        wrong_verdict = (((verdicts == REPRODUCED) & ~holds) | ((verdicts == CONTRADICTED) & holds)
                         | ((verdicts == EQUIVALENT) & beyond))
        errors = int(wrong.any(axis=(1, 2)).sum())
        failing = np.where(mask, effect <= -0.5 * sd, False).any(axis=1)
        low, high = clopper_pearson(errors, n_experiments)
        rows.append({
            "scenario": name, "fwer": errors / n_experiments, "fwer_low": low, "fwer_high": high,
            "fwer_verdicts": float(wrong_verdict.any(axis=1).mean()),
            "power_reproduced": float((verdicts[:, holds] == REPRODUCED).mean()) if holds.any() else float("nan"),
            "power_contradicted": float((verdicts[:, failing] == CONTRADICTED).mean()) if failing.any()
            else float("nan"),
            "mean_seeds": float(np.asarray(design.looks)[last].mean()),
            "decided": float((verdicts != INCONCLUSIVE).mean()),
        })
    return SimulationResult(tuple(rows), design, n_experiments, claims, tuple(panels), sd, margin, alpha, naive,
                            time.perf_counter() - start)


__all__ = ["CONTRADICTED", "DEFAULT_LOOKS", "EQUIVALENT", "INCONCLUSIVE", "NO_DATA", "REPRODUCED", "Design",
           "FamilyDecision", "SimulationResult", "clopper_pearson", "default_effects", "family_verdicts", "run_rounds",
           "sequential_p", "simulate", "spending"]
