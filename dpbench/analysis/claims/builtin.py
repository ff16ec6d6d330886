"""The built-in claim kinds, one `claim_kind` declaration each. Every kind but audit yields one
sub-test per (data set panel, model), or per epsilon point with `per: point`; the claim's
`quantifier` (all | most | some, dpbench.analysis.claims.verdicts) says how many panels must hold.

* comparison: curve A against curve B on a metric, per seed the mean of A - B over the panel's
  points (epsilons, and n or d in a sweep). Relations, with margin m >= 0:
  greater (A - B > m), less (A - B < -m), at_least (A - B > -m: non-inferiority, m required),
  at_most (A - B < m), equivalent (|A - B| < m, only where a paper says "the same"), differs
  (A - B outside [-m, m], two-sided; with m > 0 it is contradicted by equivalence within m).
  `equivalence: e` adds the verdict "no difference beyond e" (two one-sided tests of |A - B| < e)
  for a claim that is neither shown nor refuted. Screens (dpbench.analysis.claims.screens) leave
  out comparator points at or below the majority-class line or without a guarantee, and mark a
  panel vacuous where every other private curve passes a `specific` claim against the
  non-private line; what they leave out cannot support the claim, but its evidence that the
  relation fails (the panel's every point) still counts.
* trend: curve A's metric (or, with b, the difference A - B) increases / decreases with epsilon,
  n (n_train) or d (n_features): per seed, the least-squares slope against log x; with
  `low_range` and `high_range`, the change from its mean over x in the one to its mean over x in
  the other ("more and more as x grows": larger at high x than at low x, whatever the shape).
* spread: curve A fluctuates more (greater) or less (less) along epsilon than curve B: per seed,
  the root-mean-square residual of each curve about its own least-squares line against log
  epsilon, A's minus B's; or, with `across: seeds`, varies more or less between seeds: per seed,
  A's absolute deviation from its median seed minus B's (means over the panel's points).
* rate: the log-log slope s of curve A's metric against x: relation upper (s < slope +
  tolerance: an upper-bound rate, Õ(x^slope), the metric grows no faster, or falls no slower,
  than the rate), exact (|s - slope| < tolerance, where a paper states the order exactly), or a
  bend: flattens / steepens (per seed, the slope over x in `high_range` minus that over x in
  `low_range`, above / below 0).
* audit: a claimed epsilon is refuted / not refuted (the audits' rigorous bounds at their
  confidence) or loose by a factor (the estimate's interval below claimed / factor), read from
  the audits table (dpbench.audit.multi_run).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from dpbench.analysis.claims import screens
from dpbench.analysis.claims.kinds import Field, Reading, claim_kind
from dpbench.analysis.claims.points import at_every_epsilon, scope
from dpbench.analysis.claims.stats import SubTest, subtest
from dpbench.core.validation import Boolean, Interval, Pair, Real, StrOptions, Text

#: the x axes of trend and rate claims: the spec's name -> the points' column
AXES = {"epsilon": "epsilon", "n": "n_train", "d": "n_features"}

_TEXT = Text(strip=True)
_CURVE = (Field("metric", _TEXT), Field("a", _TEXT))
_OVER = Field("over", StrOptions(AXES), default="epsilon")
_MARGIN = Interval(Real, 0, None, closed="left")
_RANGE = Pair(Interval(Real, 0, None, closed="neither"))
_PANEL = ["dataset_panel", "model_label"]
#: the comparison relations that carry the margin rule's "no difference beyond e" (equivalent has its own margin)
_DIRECTIONAL = ("greater", "less", "at_least", "at_most", "differs")
_REASON = Field("equivalence_reason", _TEXT, default="",
                hint="why this claim's equivalence margin is not the margin rule's (the spec's margins:)")
_POINT = ["dataset_panel", "dataset_label", "model_label", "epsilon"]


def _paired(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per (panel, data set, model, epsilon, seed), value = A - B (seeds paired)."""
    keys = _POINT + ["rep"]
    sides = [side.set_index(keys)["value"] for side in (a, b)]
    return (sides[0] - sides[1]).dropna().rename("value").reset_index()


def _curves(claim, points: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The scoped points, and curves A and B (a non-private B repeated at every epsilon)."""
    part = scope(claim, points)
    return part, at_every_epsilon(part[part["label"] == claim.a], part), \
        at_every_epsilon(part[part["label"] == claim.b], part)


# ---- comparison --------------------------------------------------------------------------------
_SIGN = {"greater": ">", "less": "<", "at_least": "≥", "at_most": "≤", "equivalent": "≈", "differs": "≠"}


def _comparison_statement(c) -> str:
    m = c.margin
    margin = {"greater": f" + {m:g}" if m else "", "less": f" - {m:g}" if m else "", "at_least": f" - {m:g}",
              "at_most": f" + {m:g}", "equivalent": f" ± {m:g}", "differs": f" beyond ± {m:g}" if m else ""}
    each = ", at every ε" if c.per == "point" else ""
    extra = f"; else no difference beyond {c.equivalence:g}" if c.equivalence else ""
    return f"{c.metric}: {c.a} {_SIGN[c.relation]} {c.b}{margin[c.relation]}{each}{extra}"


def _thresholds(relation: str, m: float) -> tuple[float, float | None]:
    return {"greater": (m, None), "less": (-m, None), "at_least": (-m, None), "at_most": (m, None),
            "equivalent": (-m, m), "differs": (-m, m)}[relation]


def _where(panel: str, model: str, label: str | None = None, eps: float | None = None, dropped: str = "") -> str:
    text = f"{panel} {model}" + (f" ({label})" if label and label != panel else "")
    return text + (f", ε = {eps:g}" if eps is not None else "") + (f" [{dropped}]" if dropped else "")


@claim_kind("comparison", relations=tuple(_SIGN), statement=_comparison_statement,
            description="curve A against curve B on a metric, per panel or at every epsilon point",
            fields=_CURVE + (
                Field("b", _TEXT),
                Field("margin", _MARGIN, default=0.0, needed_by=("equivalent", "at_least", "at_most"),
                      hint="this relation needs its margin m (metric units): at_least A - B > -m, at_most "
                           "A - B < m, equivalent |A - B| < m"),
                Field("equivalence", [_MARGIN, None], default=None, relations=_DIRECTIONAL,
                      hint="the margin e of the verdict 'no difference beyond e'"),
                _REASON,
                Field("per", StrOptions(("panel", "point")), default="panel"),
                Field("specific", Boolean(), default=False,
                      hint="true: the claim credits A, so it is vacuous where every other private curve passes")))
def comparison(claim, points: pd.DataFrame, audits: pd.DataFrame | None = None) -> list[SubTest]:
    part, a, b = _curves(claim, points)
    diff = _paired(a, b)
    low, high = _thresholds(claim.relation, claim.margin)
    screened = pd.DataFrame(columns=_POINT + ["reason"])
    if screens.losing_side(claim.relation, claim.metric) == "b":
        screened = screens.screened_points(claim, b, private=bool(part.loc[part["label"] == claim.b,
                                                                            "epsilon"].notna().any()))
    if not screened.empty:
        diff = diff.merge(screened, on=_POINT, how="left")
    else:
        diff = diff.assign(reason=np.nan)

    def test(where: str, rows: pd.DataFrame, vacuous: str = "", against: pd.DataFrame | None = None,
             **at) -> SubTest:
        """The sub-test of these rows; with `against` (the panel's every point, screened ones
        included), its evidence that the relation fails is taken from those."""
        result = subtest(where, rows.groupby("rep")["value"].mean().to_numpy(), claim.relation, low, high,
                         equivalence=claim.equivalence or None, vacuous=vacuous, **at)
        if against is None or against is rows:
            return result
        every = subtest(where, against.groupby("rep")["value"].mean().to_numpy(), claim.relation, low, high)
        return dataclasses.replace(result, p_opp=every.p_opp)

    out = []
    for (panel, model), group in diff.groupby(_PANEL, sort=True):
        declared = screens.declared(claim, panel, model)
        kept = group[group["reason"].isna()]
        reasons = sorted(set(group["reason"].dropna()))
        if claim.per == "point":
            for (label, eps), at in group.groupby(["dataset_label", "epsilon"], sort=True):
                why = declared or "; ".join(sorted(set(at["reason"].dropna())))
                out.append(test(_where(panel, model, label, eps), at, why, panel=panel, model=model,
                                epsilon=float(eps)))
            continue
        dropped = ""
        if reasons and not kept.empty:
            left_out = sorted(group.loc[group["reason"].notna(), "epsilon"].unique())
            dropped = f"ε {', '.join(f'{e:g}' for e in left_out)} left out: {'; '.join(reasons)}"
        why = declared or ("; ".join(reasons) if kept.empty else "")
        result = test(_where(panel, model, dropped=dropped), kept if not kept.empty else group, why, against=group,
                      panel=panel, model=model)
        if not why and claim.specific:
            def passes(label: str, panel=panel, model=model, kept=kept) -> bool:
                other = _paired(at_every_epsilon(part[part["label"] == label], part), b)
                other = other[(other["dataset_panel"] == panel) & (other["model_label"] == model)]
                other = other.merge(kept[_POINT].drop_duplicates(), on=_POINT)
                return not other.empty and screens.passes_at(test("", other).p)

            everyone = screens.others_pass(claim, part, panel, model, passes)
            if everyone:
                why = f"every method passes ({', '.join(everyone)})"
                result = test(_where(panel, model, dropped=dropped), kept, why, against=group, panel=panel,
                              model=model)
        out.append(result)
    return out


# ---- trend, spread and rate: slopes against log x ----------------------------------------------
def _slope(x: np.ndarray, y: np.ndarray, log_y: bool) -> float:
    x = np.log(x)
    if log_y:
        keep = y > 0
        x, y = x[keep], np.log(y[keep])
    return float(np.polyfit(x, y, 1)[0]) if np.unique(x).size >= 2 else float("nan")


def _residual(x: np.ndarray, y: np.ndarray) -> float:
    """Root-mean-square residual of y about its least-squares line against log x."""
    x = np.log(x)
    if np.unique(x).size < 3:
        return float("nan")
    fit = np.polyval(np.polyfit(x, y, 1), x)
    return float(np.sqrt(np.mean((y - fit) ** 2)))


def _per_seed(group: pd.DataFrame, x_column: str, statistic) -> pd.Series:
    """Per seed, `statistic(x, value)` taken along x with the other coordinates fixed (over
    epsilon: per data set of the panel; over n or d: per epsilon) and averaged over them."""
    along = "dataset_label" if x_column == "epsilon" else "epsilon"
    out = {}
    for rep, seed in group.groupby("rep"):
        per_line = [statistic(line[x_column].astype(float).to_numpy(), line["value"].astype(float).to_numpy())
                    for _, line in seed.groupby(along, dropna=False)]
        per_line = [v for v in per_line if np.isfinite(v)]
        if per_line:
            out[rep] = float(np.mean(per_line))
    return pd.Series(out, dtype=float)


def _panel_tests(claim, curve: pd.DataFrame, x_column: str, statistic, relation: str, low: float,
                 high: float | None = None, equivalence: float | None = None) -> list[SubTest]:
    """Per (panel, model), the sub-test of the curve's per-seed statistic. `equivalence` e (metric
    units, for a slope against log x) is a change of e over the panel's x range: the slope margin
    e / (log max x - log min x)."""
    out = []
    for (panel, model), group in curve.groupby(_PANEL, sort=True):
        group = group[group[x_column].astype(float) > 0]
        values = _per_seed(group, x_column, statistic).to_numpy()
        x = np.log(group[x_column].astype(float).to_numpy())
        span = float(x.max() - x.min()) if x.size else 0.0
        slope_margin = equivalence / span if equivalence and span > 0 else None
        out.append(subtest(_where(panel, model), values, relation, low, high, equivalence=slope_margin,
                           vacuous=screens.declared(claim, panel, model), panel=panel, model=model))
    return out


def _trend_statement(c) -> str:
    subject = f"{c.a} - {c.b}" if c.b else c.a
    if c.low_range is not None:
        (a, b), (lo, hi) = c.low_range, c.high_range
        word = "higher" if c.relation == "increasing" else "lower"
        extra = f"; else no change beyond {c.equivalence:g}" if c.equivalence else ""
        return f"{c.metric} of {subject} {word} over {c.over} in [{lo:g}, {hi:g}] than in [{a:g}, {b:g}]{extra}"
    extra = f"; else no change beyond {c.equivalence:g} over the {c.over} range" if c.equivalence else ""
    return f"{c.metric} of {subject} {c.relation} with {c.over}{extra}"


def _contrast(claim, curve: pd.DataFrame, x_column: str) -> list[SubTest]:
    """Per (panel, model), per seed: the mean of the curve's values with x in the claim's
    `high_range` minus their mean with x in its `low_range` (a change between two ranges, not a
    line through all of them); the relation holds above 0 (increasing) or below it (decreasing),
    and `equivalence` e is a change of at most e."""
    (a, b), (lo, hi) = claim.low_range, claim.high_range
    x = curve[x_column].astype(float)
    low = curve[(x >= a * (1 - 1e-9)) & (x <= b * (1 + 1e-9))].groupby(_PANEL + ["rep"])["value"].mean()
    high = curve[(x >= lo * (1 - 1e-9)) & (x <= hi * (1 + 1e-9))].groupby(_PANEL + ["rep"])["value"].mean()
    change = (high - low).dropna().rename("value").reset_index()
    out = []
    for (panel, model), group in change.groupby(_PANEL, sort=True):
        out.append(subtest(_where(panel, model), group["value"].to_numpy(), claim.relation, 0.0,
                           equivalence=claim.equivalence or None, vacuous=screens.declared(claim, panel, model),
                           panel=panel, model=model))
    return out


@claim_kind("trend", relations=("increasing", "decreasing"), statement=_trend_statement,
            fields=_CURVE + (Field("b", [_TEXT, None], default=None,
                                   hint="a second curve: the trend is then that of the difference A - B"), _OVER,
                             Field("equivalence", [_MARGIN, None], default=None,
                                   hint="the margin e (metric units over the x range) of 'no difference beyond e'"),
                             _REASON,
                             Field("low_range", [_RANGE, None], default=None,
                                   hint="with high_range: the change from the mean over x in low_range to the "
                                        "mean over x in high_range, instead of a slope"),
                             Field("high_range", [_RANGE, None], default=None, hint="see low_range")),
            description="curve A's metric, or the difference A - B, increases or decreases with epsilon, n or d")
def trend(claim, points: pd.DataFrame, audits: pd.DataFrame | None = None) -> list[SubTest]:
    if (claim.low_range is None) != (claim.high_range is None):
        raise ValueError(f"claim {claim.id}: low_range and high_range go together")
    _, a, b = _curves(claim, points)
    curve = _paired(a, b) if claim.b else a
    if claim.b:  # the paired difference keeps n and d from A's points
        extra = [c for c in ("n_train", "n_features") if c in a]
        curve = curve.merge(a[_POINT + ["rep"] + extra].drop_duplicates(_POINT + ["rep"]), on=_POINT + ["rep"])
    if claim.low_range is not None:
        return _contrast(claim, curve, AXES[claim.over])
    return _panel_tests(claim, curve, AXES[claim.over], lambda x, y: _slope(x, y, False), claim.relation, 0.0,
                        equivalence=claim.equivalence)


def _spread_statement(c) -> str:
    along = "along ε" if c.across == "epsilon" else "across seeds"
    extra = f"; else no difference beyond {c.equivalence:g}" if c.equivalence else ""
    return f"{c.metric}: {c.a} {'varies' if c.across == 'seeds' else 'fluctuates'} " \
           f"{'more' if c.relation == 'greater' else 'less'} than {c.b} {along}{extra}"


@claim_kind("spread", relations=("greater", "less"), statement=_spread_statement,
            fields=_CURVE + (Field("b", _TEXT), Field("across", StrOptions(("epsilon", "seeds")), default="epsilon",
                                                      hint="epsilon: fluctuation along the ε axis; seeds: variation "
                                                           "between seeds at the same point"),
                             Field("equivalence", [_MARGIN, None], default=None,
                                   hint="the margin e (metric units) of 'no difference beyond e'"), _REASON),
            description="curve A fluctuates more or less than curve B along epsilon (RMS residual about a line), "
                        "or varies more or less between seeds (absolute deviation from the median seed)")
def spread(claim, points: pd.DataFrame, audits: pd.DataFrame | None = None) -> list[SubTest]:
    part = scope(claim, points)
    if claim.across == "seeds":
        both = _deviations(part, claim.a).add_suffix("_a").join(_deviations(part, claim.b).add_suffix("_b"),
                                                                 how="inner")
    else:
        part = part[part["epsilon"].notna()]
        rough = {label: _per_curve(part[part["label"] == label]) for label in (claim.a, claim.b)}
        both = rough[claim.a].add_suffix("_a").join(rough[claim.b].add_suffix("_b"), how="inner")
    out = []
    for (panel, model), group in both.groupby(level=[0, 1], sort=True):
        values = (group["value_a"] - group["value_b"]).to_numpy()
        out.append(subtest(_where(panel, model), values, claim.relation, 0.0, equivalence=claim.equivalence or None,
                           vacuous=screens.declared(claim, panel, model), panel=panel, model=model))
    return out


def _deviations(part: pd.DataFrame, label: str) -> pd.DataFrame:
    """Per (panel, model, seed), the mean over the panel's points of the curve's absolute deviation
    from its median over seeds at that point: how far a seed lands from the typical seed."""
    curve = part[part["label"] == label]
    if curve.empty:
        return pd.DataFrame(columns=["value"], index=pd.MultiIndex.from_arrays([[]] * 3, names=_PANEL + ["rep"]))
    median = curve.groupby(_POINT, dropna=False)["value"].transform("median")
    dev = curve.assign(value=(curve["value"] - median).abs())
    return dev.groupby(_PANEL + ["rep"])["value"].mean().to_frame()


def _per_curve(curve: pd.DataFrame) -> pd.DataFrame:
    """Per (panel, model, seed), the curve's RMS residual about its line against log epsilon."""
    rows = []
    for (panel, model), group in curve.groupby(_PANEL, sort=True):
        for rep, value in _per_seed(group, "epsilon", _residual).items():
            rows.append((panel, model, rep, value))
    return pd.DataFrame(rows, columns=_PANEL + ["rep", "value"]).set_index(_PANEL + ["rep"])


def _rate_statement(c) -> str:
    if c.relation == "upper":
        return f"{c.metric} of {c.a} ~ {c.over}^s, s < {c.slope:g}" + (f" + {c.tolerance:g}" if c.tolerance else "")
    if c.relation == "exact":
        return f"{c.metric} of {c.a} ~ {c.over}^s, s = {c.slope:g} ± {c.tolerance:g}"
    (a, b), (lo, hi) = c.low_range, c.high_range
    return (f"{c.metric} of {c.a}: log-log slope in {c.over} over [{lo:g}, {hi:g}] "
            f"{'above' if c.relation == 'flattens' else 'below'} that over [{a:g}, {b:g}] (it {c.relation})")


_BEND = ("flattens", "steepens")


@claim_kind("rate", relations=("upper", "exact") + _BEND,
            fields=_CURVE + (_OVER, Field("slope", Interval(Real), relations=("upper", "exact"),
                                          hint="the rate's exponent: the metric ~ x^slope"),
                             Field("tolerance", _MARGIN, default=0.0, relations=("upper", "exact"),
                                   hint="how far the fitted slope may exceed (upper) or miss (exact) the exponent"),
                             Field("low_range", [_RANGE, None], default=None, relations=_BEND, needed_by=_BEND,
                                   hint="the x range of the first slope of a bend"),
                             Field("high_range", [_RANGE, None], default=None, relations=_BEND, needed_by=_BEND,
                                   hint="the x range of the second slope of a bend")),
            statement=_rate_statement,
            description="the log-log slope of curve A's metric against epsilon, n or d: an upper-bound rate "
                        "(not exceeded), an exact order, or a bend (the slope over one x range above or below "
                        "that over another)")
def rate(claim, points: pd.DataFrame, audits: pd.DataFrame | None = None) -> list[SubTest]:
    part = scope(claim, points)
    curve = part[part["label"] == claim.a]

    if claim.relation in _BEND:
        (a, b), (lo, hi) = claim.low_range, claim.high_range

        def bend(x: np.ndarray, y: np.ndarray) -> float:
            low = (x >= a * (1 - 1e-9)) & (x <= b * (1 + 1e-9))
            high = (x >= lo * (1 - 1e-9)) & (x <= hi * (1 + 1e-9))
            return _slope(x[high], y[high], True) - _slope(x[low], y[low], True)

        return _panel_tests(claim, curve, AXES[claim.over], bend,
                            "greater" if claim.relation == "flattens" else "less", 0.0)

    def statistic(x: np.ndarray, y: np.ndarray) -> float:
        return _slope(x, y, True)

    if claim.relation == "upper":
        return _panel_tests(claim, curve, AXES[claim.over], statistic, "at_most", claim.slope + claim.tolerance)
    return _panel_tests(claim, curve, AXES[claim.over], statistic, "within", claim.slope - claim.tolerance,
                        claim.slope + claim.tolerance)


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


__all__ = ["AXES", "audit", "comparison", "rate", "spread", "trend"]
