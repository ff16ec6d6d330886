"""A claim's verdict from its kind's evaluation, and what is read off the verdicts: the points the
figures mark and the points `dpbench check` compares.

A claim over several sub-tests holds only if every one does (intersection-union: p = the
largest p); it is contradicted when some sub-test shows the opposite (p_opp = the smallest p_opp
times the number of sub-tests, Bonferroni). Across the claims of one experiment (one paper) both
p and p_opp are Holm-adjusted. Verdict: **reproduced** when the adjusted p <= ALPHA,
**contradicted** when the adjusted p_opp <= ALPHA, else **inconclusive**, with the number of
seeds a one-sided test at the Bonferroni level ALPHA / (claims) would need for 80 % power at the
observed effect and spread (`seeds_needed`: for the sub-test furthest from deciding). A kind that
reads its verdict (a `Reading`, the audit kind) has no p-value and takes no part in the Holm
adjustment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpbench.analysis.claims.claim import Claim
from dpbench.analysis.claims.kinds import CLAIM_KINDS, Reading
from dpbench.analysis.claims.stats import ALPHA, SubTest, holm, seeds_to_decide

VERDICTS = {"reproduced": 1, "inconclusive": 0, "contradicted": -1}


@dataclass
class Verdict:
    """A claim's verdict and the statistics it rests on (`row()` is its table row)."""

    claim: Claim
    verdict: str  # reproduced | contradicted | inconclusive | no data
    tests: list[SubTest] = field(default_factory=list)
    p: float = float("nan")  # intersection-union p (largest over sub-tests)
    p_opp: float = float("nan")  # Bonferroni over sub-tests
    p_holm: float = float("nan")
    p_opp_holm: float = float("nan")
    seeds_needed: float = float("nan")
    evidence: str = ""  # a kind that reads its verdict: what the table it read says

    @property
    def deciding(self) -> SubTest | None:
        """The sub-test the verdict turns on: the one with the strongest contrary evidence when
        contradicted, else the weakest support (largest p)."""
        if not self.tests:
            return None
        if self.verdict == "contradicted":
            return min(self.tests, key=lambda t: (np.nan_to_num(t.p_opp, nan=1.0)))
        return max(self.tests, key=lambda t: (np.nan_to_num(t.p, nan=1.0)))

    def row(self) -> dict:
        c, t = self.claim, self.deciding
        return {
            "id": c.id, "source": c.source, "quote": c.quote, "kind": c.kind, "claim": c.statement,
            "verdict": self.verdict, "where": t.where if t else self.evidence,
            "effect": t.effect if t else np.nan, "ci_low": t.ci_low if t else np.nan,
            "ci_high": t.ci_high if t else np.nan, "seeds": t.n if t else np.nan, "p": self.p,
            "p_holm": self.p_holm, "p_contra": self.p_opp, "p_contra_holm": self.p_opp_holm,
            "subtests": len(self.tests), "seeds_needed": self.seeds_needed, "note": c.note,
        }


def evaluate(claims: tuple[Claim, ...], points: pd.DataFrame, audits: pd.DataFrame | None = None) -> list[Verdict]:
    """Verdicts of an experiment's claims (module docstring) from its per-seed points
    (`POINT_COLUMNS`) and its audits table, each claim evaluated by its kind."""
    verdicts = []
    for claim in claims:
        result = CLAIM_KINDS.lookup(claim.kind).evaluate(claim, points, audits)
        if isinstance(result, Reading):
            verdicts.append(Verdict(claim, result.verdict, evidence=result.evidence))
            continue
        tests = [t for t in result if t.n > 0]
        if not tests:
            verdicts.append(Verdict(claim, "no data", evidence="no curve points in the claim's scope"))
            continue
        p = max(np.nan_to_num(t.p, nan=1.0) for t in tests)
        p_opp = min(1.0, len(tests) * min(np.nan_to_num(t.p_opp, nan=1.0) for t in tests))
        verdicts.append(Verdict(claim, "inconclusive", tests=tests, p=float(p), p_opp=float(p_opp)))
    tested = [v for v in verdicts if v.tests]
    for v, ph, po in zip(tested, holm([v.p for v in tested]), holm([v.p_opp for v in tested])):
        v.p_holm, v.p_opp_holm = ph, po
        if ph <= ALPHA:
            v.verdict = "reproduced"
        elif po <= ALPHA:
            v.verdict = "contradicted"
        else:
            v.seeds_needed = seeds_to_decide(v.tests, ALPHA / max(len(tested), 1))
    return verdicts


def significant_points(verdicts: list[Verdict]) -> pd.DataFrame:
    """The epsilon points of claims tested point by point (sub-tests of one epsilon: per-point
    comparisons) where the relation holds, or fails, significantly at the Bonferroni level
    ALPHA / (claims tested x the claim's points): one row per (label a, panel, model, epsilon,
    metric) with the claim id and `holds` (True / False), for the figures to mark."""
    tested = [v for v in verdicts if v.tests]
    rows = []
    for v in tested:
        c = v.claim
        if not all(np.isfinite(t.epsilon) for t in v.tests):
            continue
        level = ALPHA / (len(tested) * len(v.tests))
        for t in v.tests:
            for holds, p in ((True, t.p), (False, t.p_opp)):
                if np.isfinite(p) and p <= level:
                    rows.append({"label": c.a, "dataset_panel": t.panel, "model_label": t.model, "epsilon": t.epsilon,
                                 "metric": c.metric, "claim": c.id, "holds": holds})
    return pd.DataFrame(rows, columns=["label", "dataset_panel", "model_label", "epsilon", "metric", "claim",
                                       "holds"])


def check_points(verdicts: list[Verdict]) -> pd.DataFrame:
    """The verdicts as regression-check points (metric "claim:<id>", value +1 reproduced, 0
    inconclusive, -1 contradicted; claims without data are left out): `dpbench check` fails
    when one changes, like a moved audit bound."""
    rows = [{"label": "(claims)", "dataset_label": "(all panels)", "model_label": "(all models)", "epsilon": np.nan,
             "metric": f"claim:{v.claim.id}", "rep": 0, "value": float(VERDICTS[v.verdict])}
            for v in verdicts if v.verdict in VERDICTS]
    return pd.DataFrame(rows, columns=["label", "dataset_label", "model_label", "epsilon", "metric", "rep", "value"])


__all__ = ["VERDICTS", "Verdict", "check_points", "evaluate", "significant_points"]
