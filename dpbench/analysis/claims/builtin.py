"""The built-in claim kinds, one `claim_kind` declaration each:

* comparison: curve A against curve B on a metric over a range of epsilons and panels,
  relation greater (A - B > margin), less (A - B < -margin) or equivalent (|A - B| < margin).
  per: panel (default) tests, in each (dataset, model) panel, the mean over the epsilon points
  of the per-seed difference; per: point tests every epsilon point on its own ("at every
  epsilon").
* trend: curve A's metric increases / decreases with epsilon, n (n_train) or d (n_features):
  per seed, the least-squares slope of the metric against log x; the test is on its mean.
* rate: the log-log slope of curve A's metric against x lies in an interval [lo, hi]: per seed
  the slope of log(metric) against log(x); an equivalence test (two one-sided tests).
* audit: a claimed epsilon is refuted / not refuted (the audits' rigorous bounds at their
  confidence) or loose by a factor (the estimate's interval below claimed / factor), read from
  the audits table (dpbench.audit.multi_run).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpbench.analysis.claims.kinds import Field, Reading, claim_kind
from dpbench.analysis.claims.points import at_every_epsilon, scope
from dpbench.analysis.claims.stats import SubTest, subtest
from dpbench.core.validation import Interval, Pair, Real, StrOptions, Text

#: the x axes of trend and rate claims: the spec's name -> the points' column
AXES = {"epsilon": "epsilon", "n": "n_train", "d": "n_features"}

_TEXT = Text(strip=True)
_CURVE = (Field("metric", _TEXT), Field("a", _TEXT))
_OVER = Field("over", StrOptions(AXES), default="epsilon")


# ---- comparison --------------------------------------------------------------------------------
def _comparison_statement(c) -> str:
    sign = {"greater": ">", "less": "<", "equivalent": "≈"}[c.relation]
    margin = f" ± {c.margin:g}" if c.relation == "equivalent" else \
        (f" {'+' if c.relation == 'greater' else '-'} {c.margin:g}" if c.margin else "")
    each = ", at every ε" if c.per == "point" else ""
    return f"{c.metric}: {c.a} {sign} {c.b}{margin}{each}"


@claim_kind("comparison", relations=("greater", "less", "equivalent"), statement=_comparison_statement,
            description="curve A against curve B on a metric, per panel or at every epsilon point",
            fields=_CURVE + (
                Field("b", _TEXT),
                Field("margin", Interval(Real, 0, None, closed="left"), default=0.0, needed_by=("equivalent",),
                      hint="an equivalence claim needs its margin (|A - B| < margin, metric units)"),
                Field("per", StrOptions(("panel", "point")), default="panel")))
def comparison(claim, points: pd.DataFrame, audits: pd.DataFrame | None = None) -> list[SubTest]:
    part = scope(claim, points)
    keys = ["dataset_panel", "dataset_label", "model_label", "epsilon", "rep"]
    sides = [at_every_epsilon(part[part["label"] == label], part) for label in (claim.a, claim.b)]
    a, b = (side.set_index(keys)["value"] for side in sides)
    diff = (a - b).dropna().rename("d").reset_index()
    out = []
    m = claim.margin
    low, high, relation = {"greater": (m, None, "greater"), "less": (-m, None, "less"),
                           "equivalent": (-m, m, "within")}[claim.relation]
    for (panel, model), group in diff.groupby(["dataset_panel", "model_label"], sort=True):
        if claim.per == "point":  # a point: one data set of the panel (one n or d of a sweep) at one epsilon
            for (label, eps), at in group.groupby(["dataset_label", "epsilon"], sort=True):
                where = f"{panel} {model}" + (f" ({label})" if label != panel else "") + f", ε = {eps:g}"
                out.append(subtest(where, at.groupby("rep")["d"].mean().to_numpy(), relation, low, high,
                                   panel=panel, model=model, epsilon=float(eps)))
        else:  # per seed, the mean difference over the panel's points (epsilons, and n or d in a sweep)
            per_seed = group.groupby("rep")["d"].mean()
            out.append(subtest(f"{panel} {model}", per_seed.to_numpy(), relation, low, high, panel=panel,
                               model=model))
    return out


# ---- trend and rate: slopes against log x ------------------------------------------------------
def _slope(x: np.ndarray, y: np.ndarray, log_y: bool) -> float:
    x = np.log(x)
    if log_y:
        keep = y > 0
        x, y = x[keep], np.log(y[keep])
    return float(np.polyfit(x, y, 1)[0]) if np.unique(x).size >= 2 else float("nan")


def _slopes(group: pd.DataFrame, x_column: str, log_y: bool) -> np.ndarray:
    """Per seed, the least-squares slope of the value (or its log) against log x, taken along x
    with the other coordinates fixed (over epsilon: per data set of the panel; over n or d: per
    epsilon) and averaged over them."""
    along = "dataset_label" if x_column == "epsilon" else "epsilon"
    slopes = []
    for _, seed in group.groupby("rep"):
        per_line = [_slope(line[x_column].astype(float).to_numpy(), line["value"].astype(float).to_numpy(), log_y)
                    for _, line in seed.groupby(along, dropna=False)]
        per_line = [v for v in per_line if np.isfinite(v)]
        if per_line:
            slopes.append(float(np.mean(per_line)))
    return np.asarray(slopes)


def _slope_tests(claim, points: pd.DataFrame, log_y: bool, relation: str, low: float,
                 high: float | None = None) -> list[SubTest]:
    """Per (panel, model), the sub-test of curve A's per-seed slopes against log x."""
    part = scope(claim, points)
    part = part[part["label"] == claim.a]
    x_column = AXES[claim.over]
    out = []
    for (panel, model), group in part.groupby(["dataset_panel", "model_label"], sort=True):
        group = group[group[x_column].astype(float) > 0]
        out.append(subtest(f"{panel} {model}", _slopes(group, x_column, log_y), relation, low, high))
    return out


@claim_kind("trend", relations=("increasing", "decreasing"), fields=_CURVE + (_OVER,),
            statement=lambda c: f"{c.metric} of {c.a} {c.relation} with {c.over}",
            description="curve A's metric increases or decreases with epsilon, n or d")
def trend(claim, points: pd.DataFrame, audits: pd.DataFrame | None = None) -> list[SubTest]:
    return _slope_tests(claim, points, False, claim.relation, 0.0)


@claim_kind("rate", relations=("within",),
            fields=_CURVE + (_OVER, Field("interval", Pair(Interval(Real)),
                                          hint="the [low, high] interval of the log-log slope")),
            statement=lambda c: (f"{c.metric} of {c.a} ~ {c.over}^s, s in [{c.interval[0]:g}, "
                                 f"{c.interval[1]:g}]"),
            description="the log-log slope of curve A's metric against epsilon, n or d lies in an interval")
def rate(claim, points: pd.DataFrame, audits: pd.DataFrame | None = None) -> list[SubTest]:
    return _slope_tests(claim, points, True, "within", *claim.interval)


# ---- audit -------------------------------------------------------------------------------------
def _audit_statement(c) -> str:
    text = {"refuted": "refuted", "not_refuted": "not refuted",
            "loose": f"loose by a factor {c.factor:g} (estimate < claimed / {c.factor:g})"}[c.relation]
    return f"audit {c.audit}: claimed ε {text}"


@claim_kind("audit", relations=("refuted", "not_refuted", "loose"), statement=_audit_statement,
            description="a claimed epsilon refuted, not refuted or loose by a factor, read from the audits",
            fields=(Field("audit", _TEXT),
                    Field("factor", Interval(Real, 0, None, closed="neither"), default=1.0, relations=("loose",))))
def audit(claim, points: pd.DataFrame | None, audits: pd.DataFrame | None) -> Reading:
    if audits is None or audits.empty:
        return Reading("no data", "no audits")
    rows = audits[audits["label"] == claim.audit]
    if "method" in rows:
        rows = rows[rows["method"].fillna("multi-run") == "multi-run"]
    rows = rows.dropna(subset=["claimed_epsilon"])
    if claim.epsilons is not None:
        lo, hi = claim.epsilons
        rows = rows[(rows["claimed_epsilon"] >= lo * (1 - 1e-9)) & (rows["claimed_epsilon"] <= hi * (1 + 1e-9))]
    if rows.empty:
        return Reading("no data", f"no audit labelled {claim.audit!r}")
    broken = rows["epsilon_lower_bound"] > rows["claimed_epsilon"]
    eps = ", ".join(f"{e:g}" for e in rows["claimed_epsilon"])
    if claim.relation == "refuted":
        verdict = "reproduced" if broken.all() else "inconclusive"
        evidence = f"bound above the claim at {int(broken.sum())} of {len(rows)} claimed ε ({eps})"
    elif claim.relation == "not_refuted":
        verdict = "contradicted" if broken.any() else "reproduced"
        evidence = f"bound above the claim at {int(broken.sum())} of {len(rows)} claimed ε ({eps})"
    else:
        target = rows["claimed_epsilon"] / claim.factor
        high = rows.get("epsilon_estimate_high", pd.Series(np.nan, index=rows.index))
        low = rows.get("epsilon_estimate_low", pd.Series(np.nan, index=rows.index))
        if (high < target).all():
            verdict = "reproduced"
        elif (low > target).any():
            verdict = "contradicted"
        else:
            verdict = "inconclusive"
        evidence = (f"estimate interval below claimed/{claim.factor:g} at {int((high < target).sum())} of "
                    f"{len(rows)} claimed ε ({eps})")
    return Reading(verdict, evidence)


__all__ = ["AXES", "audit", "comparison", "rate", "trend"]
