"""A claim's verdict from its kind's evaluation, and what is read off the verdicts: the points the
figures mark and the points `dpbench check` compares.

Per claim, three hypotheses: the relation holds (p), it fails (p_opp), and, where the claim
declares an equivalence margin e, there is no difference beyond e (p_eq). Its sub-tests (one per
panel, or per epsilon point) combine by the claim's quantifier (`combine_p`): with r of its m
non-vacuous panels required to hold (all: m, most: more than half, some: 1), "holds" is the
partial conjunction "at least r panels hold" ((m - r + 1) times the r-th smallest p; r = m: the
largest p, the intersection-union test), "no difference beyond e" likewise "at least r panels
within e", and "fails" the partial conjunction "at least m - r + 1 panels fail" of the p_opp of
every panel, the vacuous ones included: a screen removes trivial support, never evidence against.

Seeds may be added in rounds (`dpbench decide`, a `decide:` block in the spec): the claim is then
tested at each look of the design (the first n_k seeds of every panel) and its p-values are
sequential (`sequential.sequential_p`: the smallest p_k / w_k over the looks reached, w the
spending weights), valid under the optional stopping of the rounds. Without a design there is one
look with every seed. Across the claims of one experiment all three hypotheses of every claim are
one Holm family (`sequential.family_verdicts`). Verdict: **reproduced** when "holds" is rejected,
**contradicted** when "fails" is, **no difference beyond e** when the equivalence is, else
**undecided** (with the seeds the panels had, and `seeds_needed`: the seeds at which the observed
effects would decide it). A claim whose every sub-test a screen marks (dpbench.analysis.claims.
screens) is **vacuous** unless its evidence against contradicts it; a kind that reads its verdict (a `Reading`, the audit kind) has no
p-value and takes no part in the Holm adjustment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpbench.analysis.claims.claim import Claim
from dpbench.analysis.claims.kinds import CLAIM_KINDS, Reading
from dpbench.analysis.claims.points import scope
from dpbench.analysis.claims.sequential import Design, family_verdicts, sequential_p
from dpbench.analysis.claims.stats import ALPHA, PARAMETER, SubTest, combine_p, needed, seeds_to_decide

#: the status of a verdict tested on seeds that were seen when its claim was written
EXPLORATORY = "exploratory"
#: verdict -> its value as a regression-check point (`check_points`)
VERDICTS = {"reproduced": 1, "undecided": 0, "contradicted": -1, "no difference beyond m": 2, "vacuous": 3}


@dataclass
class Verdict:
    """A claim's verdict and the statistics it rests on (`row()` is its table row)."""

    claim: Claim
    verdict: str  # reproduced | contradicted | no difference beyond m | undecided | vacuous | no data
    tests: list[SubTest] = field(default_factory=list)  # at the last look reached, vacuous ones included
    p: float = float("nan")  # sequential p of "holds" (the quantifier's partial conjunction at each look)
    p_opp: float = float("nan")  # ... of "fails"
    p_eq: float = float("nan")  # ... of "no difference beyond e" (NaN: no margin declared)
    p_holm: float = float("nan")
    p_opp_holm: float = float("nan")
    p_eq_holm: float = float("nan")
    seeds_needed: float = float("nan")
    looks: int = 0  # looks of the design reached (1 without a design)
    evidence: str = ""  # a kind that reads its verdict: what the table it read says
    #: "exploratory" (the claims were written with the data in view), or "confirmatory (plan <hash>)"
    status: str = EXPLORATORY

    @property
    def live(self) -> list[SubTest]:
        """The sub-tests no screen marked vacuous."""
        return [t for t in self.tests if not t.vacuous]

    @property
    def deciding(self) -> SubTest | None:
        """The sub-test the verdict turns on: the one with the strongest contrary evidence when
        contradicted, the r-th strongest support when reproduced (r panels must hold: under `all`
        the weakest), else the weakest support (largest p); for a vacuous claim, its first."""
        tests = self.live or self.tests
        if not tests:
            return None
        if self.verdict == "contradicted":  # a screened sub-test's evidence against counts too
            return min(self.tests, key=lambda t: (np.nan_to_num(t.p_opp, nan=1.0)))
        if self.verdict == "no difference beyond m":
            return max(tests, key=lambda t: (np.nan_to_num(t.p_eq, nan=1.0)))
        if self.verdict == "reproduced":  # the r-th strongest of the panels that must hold
            ranked = sorted(tests, key=lambda t: (np.nan_to_num(t.p, nan=1.0)))
            return ranked[needed(self.claim.quantifier, len(ranked)) - 1]
        return max(tests, key=lambda t: (np.nan_to_num(t.p, nan=1.0)))

    @property
    def vacuous_reasons(self) -> str:
        """The screened sub-tests, "where: reason; ..." (empty when none)."""
        return "; ".join(f"{t.where}: {t.vacuous}" for t in self.tests if t.vacuous)

    def row(self) -> dict:
        c, t = self.claim, self.deciding
        return {
            "id": c.id, "source": c.source, "quote": c.quote, "kind": c.kind, "claim": c.statement,
            "quantifier": c.quantifier, "verdict": self.verdict, "where": t.where if t else self.evidence,
            "effect": t.effect if t else np.nan, "ci_low": t.ci_low if t else np.nan,
            "ci_high": t.ci_high if t else np.nan, "seeds": t.n if t else np.nan, "looks": self.looks,
            "p": self.p, "p_holm": self.p_holm, "p_contra": self.p_opp, "p_contra_holm": self.p_opp_holm,
            "p_equiv": self.p_eq, "p_equiv_holm": self.p_eq_holm, "subtests": len(self.live),
            "vacuous": self.vacuous_reasons, "seeds_needed": self.seeds_needed,
            "test": f"{t.test} ({PARAMETER[t.test]})" if t else "", "skew": t.skew if t else np.nan,
            "max_abs_skew": max((abs(x.skew) for x in self.tests if np.isfinite(x.skew)), default=np.nan),
            "status": self.status, "note": c.note,
        }


def combine(tests: list[SubTest], quantifier: str) -> tuple[float, float, float]:
    """(p holds, p fails, p no difference beyond e) of a claim's sub-tests at one look
    (`combine_p`): the sub-tests a screen marked vacuous cannot make it hold (nor show it within e),
    but their evidence against it counts toward "fails"."""
    live = [t for t in tests if not t.vacuous]
    out = combine_p([t.p for t in live], [t.p_opp for t in tests], [t.p_eq for t in live], quantifier)
    return tuple(float(x) for x in out)  # type: ignore[return-value]


def look_points(points: pd.DataFrame, count: dict[str, int]) -> pd.DataFrame:
    """The points of each data set's first `count[label]` seeds (in seed order)."""
    if points.empty:
        return points
    rank = points.groupby("dataset_label")["rep"].rank(method="dense").astype(int)
    limit = points["dataset_label"].map(count).astype(float)
    return points[rank <= limit]


def seed_counts(points: pd.DataFrame) -> dict[str, int]:
    """The number of seeds each data set label has in the points."""
    if points.empty:
        return {}
    return points.groupby("dataset_label")["rep"].nunique().astype(int).to_dict()


def evaluate(claims: tuple[Claim, ...], points: pd.DataFrame, audits: pd.DataFrame | None = None,
             design: Design | None = None, scale: dict[str, int] | None = None) -> list[Verdict]:
    """Verdicts of an experiment's claims (module docstring) from its per-seed points
    (`POINT_COLUMNS`) and its audits table, each claim evaluated by its kind. With a `design`,
    look k tests the first looks[k] x scale[data set] seeds of every data set (scale 1 unless
    given), and only looks that the claim's own curves (A and B in its scope) have reached on every
    data set count: curves given more seeds than others (`extra_seeds:`) decide their own looks."""
    available = seed_counts(points)
    verdicts = []
    for claim in claims:
        kind = CLAIM_KINDS.lookup(claim.kind)
        result = kind.evaluate(claim, points, audits)
        if isinstance(result, Reading):
            verdict = "undecided" if result.verdict == "inconclusive" else result.verdict
            verdicts.append(Verdict(claim, verdict, evidence=result.evidence))
            continue
        tests = [t for t in result if t.n > 0 or t.vacuous]
        if not tests:
            verdicts.append(Verdict(claim, "no data", evidence="no curve points in the claim's scope"))
            continue
        by_look = [combine(tests, claim.quantifier)]
        weights = [1.0]
        if design is not None:
            own = scope(claim, points)
            mine = seed_counts(own[own["label"].isin([claim.a, getattr(claim, "b", None)])])
            reached = [n for n in design.looks
                       if all(count >= n * (scale or {}).get(label, 1) for label, count in mine.items())]
            by_look, weights = [], list(design.weights[:len(reached)])
            for n in reached:
                at = look_points(points, {label: n * (scale or {}).get(label, 1) for label in available})
                tests = [t for t in kind.evaluate(claim, at, audits) if t.n > 0 or t.vacuous]
                by_look.append(combine(tests, claim.quantifier) if tests else (np.nan,) * 3)
            if not reached:
                verdicts.append(Verdict(claim, "undecided", tests=tests, evidence="no look of the design reached"))
                continue
        p, p_opp, p_eq = (sequential_p([look[i] for look in by_look], weights) for i in range(3))
        verdicts.append(Verdict(claim, "undecided", tests=tests, p=p, p_opp=p_opp, p_eq=p_eq, looks=len(by_look)))
    tested = [v for v in verdicts if v.verdict == "undecided" and np.isfinite([v.p, v.p_opp]).any()]
    family = family_verdicts([v.p for v in tested], [v.p_opp for v in tested], [v.p_eq for v in tested])
    for v, verdict, ph, po, pe in zip(tested, family.verdicts, family.hold, family.fail, family.equiv):
        v.verdict, v.p_holm, v.p_opp_holm, v.p_eq_holm = verdict, ph, po, pe
        if v.verdict == "undecided" and v.live:
            v.seeds_needed = seeds_to_decide(v.live, ALPHA / max(2 * len(tested), 1),
                                             needed(v.claim.quantifier, len(v.live)))
    for v in verdicts:  # nothing could support it, and the evidence against it decided nothing
        if v.verdict == "undecided" and v.tests and not v.live:
            v.verdict = "vacuous"
    return verdicts


def significant_points(verdicts: list[Verdict]) -> pd.DataFrame:
    """The epsilon points of claims tested point by point (sub-tests of one epsilon: per-point
    comparisons) where the relation holds, or fails, significantly at the Bonferroni level
    ALPHA / (claims tested x the claim's points): one row per (label a, panel, model, epsilon,
    metric) with the claim id and `holds` (True / False), for the figures to mark."""
    tested = [v for v in verdicts if v.live]
    rows = []
    for v in tested:
        c = v.claim
        if not all(np.isfinite(t.epsilon) for t in v.live):
            continue
        level = ALPHA / (len(tested) * len(v.live))
        for t in v.live:
            for holds, p in ((True, t.p), (False, t.p_opp)):
                if np.isfinite(p) and p <= level:
                    rows.append({"label": c.a, "dataset_panel": t.panel, "model_label": t.model, "epsilon": t.epsilon,
                                 "metric": c.metric, "claim": c.id, "holds": holds})
    return pd.DataFrame(rows, columns=["label", "dataset_panel", "model_label", "epsilon", "metric", "claim",
                                       "holds"])


def check_points(verdicts: list[Verdict]) -> pd.DataFrame:
    """The verdicts as regression-check points (metric "claim:<id>", value `VERDICTS`: +1
    reproduced, 0 undecided, -1 contradicted, 2 no difference beyond m, 3 vacuous; claims without
    data are left out): `dpbench check` fails when one changes, like a moved audit bound."""
    rows = [{"label": "(claims)", "dataset_label": "(all panels)", "model_label": "(all models)", "epsilon": np.nan,
             "metric": f"claim:{v.claim.id}", "rep": 0, "value": float(VERDICTS[v.verdict])}
            for v in verdicts if v.verdict in VERDICTS]
    return pd.DataFrame(rows, columns=["label", "dataset_label", "model_label", "epsilon", "metric", "rep", "value"])


__all__ = ["EXPLORATORY", "VERDICTS", "Verdict", "check_points", "combine", "evaluate", "look_points", "seed_counts",
           "significant_points"]
