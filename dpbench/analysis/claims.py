"""Paper claims as code: each claim a paper (or the README) makes about a reproduced figure, as a
relation over the curves tested with paired statistics across seeds, and its verdict.

An experiment's `claims:` block lists them (schema: `CLAIM_KEYS`, `parse_claims`). Kinds:

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
  the audits table.

Statistics (`evaluate`). Seeds are paired: the runner gives every method of a panel the same
split and random stream for seed r (`rep`), so the per-seed differences d_r = A_r - B_r remove
the seed-to-seed variation both share. For each sub-test (a panel, or a panel and epsilon) the
per-seed statistic D_r gives n = #seeds, its mean (the effect), a 95 % Student-t confidence
interval, and two one-sided p-values: p that the relation holds (null: it does not), and p_opp
that it fails (null: it holds). A claim over several sub-tests holds only if every one does
(intersection-union: p = the largest p); it is contradicted when some sub-test shows the opposite
(p_opp = the smallest p_opp times the number of sub-tests, Bonferroni). Across the claims of one
experiment (one paper) both p and p_opp are Holm-adjusted. Verdict: **reproduced** when the
adjusted p <= ALPHA, **contradicted** when the adjusted p_opp <= ALPHA, else **inconclusive**,
with the number of seeds a one-sided test at the Bonferroni level ALPHA / (claims) would need for
80 % power at the observed effect and spread (`seeds_needed`: for the sub-test furthest from
deciding). Audit claims have no p-value: they read the audits' own 95 % bounds and intervals and
take no part in the Holm adjustment.

Pure tables in, tables out: the per-seed points come from `per_seed_points` (selected runs) and
the audits table from `dpbench.audit.multi_run`; nothing here trains or reads files.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

ALPHA = 0.05
POWER = 0.8
KINDS = ("comparison", "trend", "rate", "audit")
RELATIONS = {"comparison": ("greater", "less", "equivalent"), "trend": ("increasing", "decreasing"),
             "rate": ("within",), "audit": ("refuted", "not_refuted", "loose")}
AXES = {"epsilon": "epsilon", "n": "n_train", "d": "n_features"}
CLAIM_KEYS = ("id", "source", "quote", "kind", "metric", "a", "b", "relation", "margin", "over", "interval",
              "epsilons", "datasets", "models", "per", "audit", "factor", "note")
VERDICTS = {"reproduced": 1, "inconclusive": 0, "contradicted": -1}
#: columns of the per-seed points table `evaluate` reads
POINT_COLUMNS = ["label", "dataset_label", "dataset_panel", "model_label", "epsilon", "n_train", "n_features",
                 "metric", "rep", "value"]


@dataclass(frozen=True)
class Claim:
    """One claim of a `claims:` block (module docstring)."""

    id: str
    source: str
    quote: str
    kind: str
    relation: str
    metric: str | None = None
    a: str | None = None
    b: str | None = None
    margin: float = 0.0
    over: str = "epsilon"
    interval: tuple[float, float] | None = None
    epsilons: tuple[float, float] | None = None
    datasets: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    per: str = "panel"
    audit: str | None = None
    factor: float = 1.0
    note: str = ""

    @property
    def statement(self) -> str:
        """The relation in one line, e.g. "accuracy: PIDP-SGD > DP-SGD + 0.01 (per panel)"."""
        scope = []
        if self.epsilons:
            scope.append(f"ε in [{self.epsilons[0]:g}, {self.epsilons[1]:g}]")
        if self.datasets:
            scope.append(", ".join(self.datasets))
        if self.models:
            scope.append(", ".join(self.models))
        where = f" ({'; '.join(scope)})" if scope else ""
        if self.kind == "comparison":
            sign = {"greater": ">", "less": "<", "equivalent": "≈"}[self.relation]
            margin = f" ± {self.margin:g}" if self.relation == "equivalent" else \
                (f" {'+' if self.relation == 'greater' else '-'} {self.margin:g}" if self.margin else "")
            each = ", at every ε" if self.per == "point" else ""
            return f"{self.metric}: {self.a} {sign} {self.b}{margin}{each}{where}"
        if self.kind == "trend":
            return f"{self.metric} of {self.a} {self.relation} with {self.over}{where}"
        if self.kind == "rate":
            return (f"{self.metric} of {self.a} ~ {self.over}^s, s in [{self.interval[0]:g}, "
                    f"{self.interval[1]:g}]{where}")
        text = {"refuted": "refuted", "not_refuted": "not refuted",
                "loose": f"loose by a factor {self.factor:g} (estimate < claimed / {self.factor:g})"}[self.relation]
        return f"audit {self.audit}: claimed ε {text}{where}"


def _fail(path: str, message: str) -> None:
    from dpbench.core.errors import SpecError

    raise SpecError(f"{path}: {message}")


def _text(entry: dict, key: str, path: str, required: bool = True) -> str | None:
    value = entry.get(key)
    if value is None:
        if required:
            _fail(f"{path}.{key}", "missing")
        return None
    if not isinstance(value, str) or not value.strip():
        _fail(f"{path}.{key}", f"must be a non-empty string, got {value!r}")
    return value.strip()


def _number(value: Any, path: str, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(path, f"must be a finite number, got {value!r}")
    if positive and value <= 0:
        _fail(path, f"must be > 0, got {value!r}")
    return float(value)


def _pair(value: Any, path: str) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        _fail(path, f"must be a [low, high] pair, got {value!r}")
    low, high = (_number(v, f"{path}[{i}]") for i, v in enumerate(value))
    if low > high:
        _fail(path, f"low {low:g} is above high {high:g}")
    return low, high


def _labels(value: Any, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        _fail(path, f"must be a non-empty list of labels, got {value!r}")
    return tuple(value)


def parse_claims(value: Any, path: str = "claims") -> tuple[Claim, ...]:
    """A `claims:` block -> Claims; one-line SpecError naming the YAML path for anything wrong."""
    if value is None:
        return ()
    if not isinstance(value, list):
        _fail(path, "must be a list of claims")
    out, seen = [], set()
    for i, entry in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict):
            _fail(where, f"must be a mapping with keys {', '.join(CLAIM_KEYS)}")
        for key in entry:
            if key not in CLAIM_KEYS:
                _fail(f"{where}.{key}", f"unknown key; allowed: {', '.join(CLAIM_KEYS)}")
        cid = _text(entry, "id", where)
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", cid):
            _fail(f"{where}.id", f"must be lower-case letters, digits and '-', got {cid!r}")
        if cid in seen:
            _fail(f"{where}.id", f"repeated id {cid!r}")
        seen.add(cid)
        where = f"{path}[{cid}]"
        kind = _text(entry, "kind", where)
        if kind not in KINDS:
            _fail(f"{where}.kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
        relation = _text(entry, "relation", where)
        if relation not in RELATIONS[kind]:
            _fail(f"{where}.relation", f"a {kind} claim is one of {', '.join(RELATIONS[kind])}, got {relation!r}")
        fields: dict[str, Any] = dict(id=cid, source=_text(entry, "source", where), quote=_text(entry, "quote", where),
                                      kind=kind, relation=relation, note=_text(entry, "note", where, False) or "")
        if kind == "audit":
            fields["audit"] = _text(entry, "audit", where)
            if relation == "loose":
                fields["factor"] = _number(entry.get("factor", 1.0), f"{where}.factor", positive=True)
        else:
            fields["metric"] = _text(entry, "metric", where)
            fields["a"] = _text(entry, "a", where)
        if kind == "comparison":
            fields["b"] = _text(entry, "b", where)
            if relation == "equivalent" and "margin" not in entry:
                _fail(f"{where}.margin", "an equivalence claim needs its margin (|A - B| < margin, metric units)")
            fields["margin"] = _number(entry.get("margin", 0.0), f"{where}.margin")
            if fields["margin"] < 0:
                _fail(f"{where}.margin", f"must be >= 0, got {fields['margin']:g}")
            per = entry.get("per", "panel")
            if per not in ("panel", "point"):
                _fail(f"{where}.per", f"must be panel or point, got {per!r}")
            fields["per"] = per
        if kind in ("trend", "rate"):
            over = entry.get("over", "epsilon")
            if over not in AXES:
                _fail(f"{where}.over", f"must be one of {', '.join(AXES)}, got {over!r}")
            fields["over"] = over
        if kind == "rate":
            if "interval" not in entry:
                _fail(f"{where}.interval", "missing: the [low, high] interval of the log-log slope")
            fields["interval"] = _pair(entry["interval"], f"{where}.interval")
        if "epsilons" in entry:
            fields["epsilons"] = _pair(entry["epsilons"], f"{where}.epsilons")
        fields["datasets"] = _labels(entry.get("datasets"), f"{where}.datasets")
        fields["models"] = _labels(entry.get("models"), f"{where}.models")
        for key in ("b", "margin", "per", "over", "interval", "audit", "factor"):
            if key in entry and key not in fields:
                _fail(f"{where}.{key}", f"does not apply to a {kind} claim")
        out.append(Claim(**fields))
    return tuple(out)


# =============================================================================================
# the per-seed points a claim is tested on
# =============================================================================================
def per_seed_points(selected: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Long table (`POINT_COLUMNS`) of the selected runs (curves.selected_by_metric): one row per
    curve point, metric and seed."""
    parts = []
    for metric, runs in selected.items():
        if runs.empty or metric not in runs:
            continue
        part = runs.assign(metric=metric, value=runs[metric])
        if "dataset_panel" not in part:
            part = part.assign(dataset_panel=part["dataset_label"])
        part = part.assign(dataset_panel=part["dataset_panel"].fillna(part["dataset_label"]))
        for column in ("n_train", "n_features"):
            if column not in part:
                part = part.assign(**{column: np.nan})
        parts.append(part[POINT_COLUMNS])
    if not parts:
        return pd.DataFrame(columns=POINT_COLUMNS)
    return pd.concat(parts, ignore_index=True).dropna(subset=["value"])


# =============================================================================================
# statistics
# =============================================================================================
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
    epsilon: float = float("nan")  # per-point comparisons: the epsilon point


def _t_summary(values: np.ndarray) -> tuple[int, float, float, float, float]:
    """(n, mean, sd, se, t quantile) of per-seed values."""
    n = int(values.size)
    mean = float(np.mean(values)) if n else float("nan")
    sd = float(np.std(values, ddof=1)) if n > 1 else float("nan")
    se = sd / math.sqrt(n) if n > 1 else float("nan")
    q = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) if n > 1 else float("nan")
    return n, mean, sd, se, q


def _upper_p(mean: float, threshold: float, se: float, n: int) -> float:
    """One-sided p of "mean > threshold" (null: mean <= threshold)."""
    if n < 2:
        return float("nan")
    if se == 0:
        return 0.0 if mean > threshold else 1.0
    return float(stats.t.sf((mean - threshold) / se, n - 1))


def _lower_p(mean: float, threshold: float, se: float, n: int) -> float:
    """One-sided p of "mean < threshold" (null: mean >= threshold)."""
    if n < 2:
        return float("nan")
    if se == 0:
        return 0.0 if mean < threshold else 1.0
    return float(stats.t.cdf((mean - threshold) / se, n - 1))


def _subtest(where: str, values: np.ndarray, relation: str, low: float, high: float | None = None,
             **at: Any) -> SubTest:
    """The summary of per-seed values for "mean > low" (greater / increasing: high None),
    "mean < low" (less / decreasing: relation given), or "low < mean < high" (equivalent / within)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    n, mean, sd, se, q = _t_summary(values)
    ci = (mean - q * se, mean + q * se) if n > 1 else (float("nan"), float("nan"))
    if relation in ("greater", "increasing"):
        p, p_opp, distance = _upper_p(mean, low, se, n), _lower_p(mean, low, se, n), mean - low
    elif relation in ("less", "decreasing"):
        p, p_opp, distance = _lower_p(mean, low, se, n), _upper_p(mean, low, se, n), low - mean
    else:  # within [low, high]: two one-sided tests; the opposite is outside on either side
        p = max(_upper_p(mean, low, se, n), _lower_p(mean, high, se, n))
        p_opp = min(1.0, 2 * min(_lower_p(mean, low, se, n), _upper_p(mean, high, se, n)))
        distance = min(mean - low, high - mean)
    return SubTest(where=where, n=n, effect=mean, ci_low=ci[0], ci_high=ci[1], p=p, p_opp=p_opp, sd=sd,
                   distance=distance, **at)


def _scope(claim: Claim, points: pd.DataFrame) -> pd.DataFrame:
    part = points[points["metric"] == claim.metric]
    if claim.epsilons is not None:
        lo, hi = claim.epsilons
        eps = part["epsilon"].astype(float)
        part = part[eps.isna() | ((eps >= lo * (1 - 1e-9)) & (eps <= hi * (1 + 1e-9)))]  # NaN: non-private
    if claim.datasets:
        part = part[part["dataset_panel"].isin(claim.datasets) | part["dataset_label"].isin(claim.datasets)]
    if claim.models:
        part = part[part["model_label"].isin(claim.models)]
    return part


def _panels(part: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted(set(zip(part["dataset_panel"].astype(str), part["model_label"].astype(str))))


def _at_every_epsilon(curve: pd.DataFrame, part: pd.DataFrame) -> pd.DataFrame:
    """A curve without epsilon (a non-private method, drawn as a level line) repeated at every
    epsilon point of its panel, so it pairs with the private curves there; others as they are."""
    if curve.empty or curve["epsilon"].notna().any():
        return curve[curve["epsilon"].notna()] if not curve.empty else curve
    grid = part.loc[part["epsilon"].notna(), ["dataset_panel", "dataset_label", "model_label", "epsilon"]] \
        .drop_duplicates()
    return curve.drop(columns="epsilon").merge(grid, on=["dataset_panel", "dataset_label", "model_label"])


def _comparison(claim: Claim, points: pd.DataFrame) -> list[SubTest]:
    part = _scope(claim, points)
    keys = ["dataset_panel", "dataset_label", "model_label", "epsilon", "rep"]
    sides = [_at_every_epsilon(part[part["label"] == label], part) for label in (claim.a, claim.b)]
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
                out.append(_subtest(where, at.groupby("rep")["d"].mean().to_numpy(), relation, low, high,
                                    panel=panel, model=model, epsilon=float(eps)))
        else:  # per seed, the mean difference over the panel's points (epsilons, and n or d in a sweep)
            per_seed = group.groupby("rep")["d"].mean()
            out.append(_subtest(f"{panel} {model}", per_seed.to_numpy(), relation, low, high, panel=panel,
                                model=model))
    return out


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


def _trend_or_rate(claim: Claim, points: pd.DataFrame) -> list[SubTest]:
    part = _scope(claim, points)
    part = part[part["label"] == claim.a]
    x_column = AXES[claim.over]
    out = []
    for (panel, model), group in part.groupby(["dataset_panel", "model_label"], sort=True):
        group = group[group[x_column].astype(float) > 0]
        slopes = _slopes(group, x_column, log_y=claim.kind == "rate")
        if claim.kind == "trend":
            out.append(_subtest(f"{panel} {model}", slopes, claim.relation, 0.0))
        else:
            out.append(_subtest(f"{panel} {model}", slopes, "within", *claim.interval))
    return out


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
    evidence: str = ""  # audit claims: what the audits table says

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


def _audit_verdict(claim: Claim, audits: pd.DataFrame | None) -> Verdict:
    if audits is None or audits.empty:
        return Verdict(claim, "no data", evidence="no audits")
    rows = audits[audits["label"] == claim.audit]
    if "method" in rows:
        rows = rows[rows["method"].fillna("multi-run") == "multi-run"]
    rows = rows.dropna(subset=["claimed_epsilon"])
    if claim.epsilons is not None:
        lo, hi = claim.epsilons
        rows = rows[(rows["claimed_epsilon"] >= lo * (1 - 1e-9)) & (rows["claimed_epsilon"] <= hi * (1 + 1e-9))]
    if rows.empty:
        return Verdict(claim, "no data", evidence=f"no audit labelled {claim.audit!r}")
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
    return Verdict(claim, verdict, evidence=evidence)


def _holm(p: list[float]) -> list[float]:
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


#: seed counts beyond this are reported as inf (no experiment here would run them)
MAX_SEEDS = 100_000


def _seeds_needed(test: SubTest, level: float) -> float:
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


def _seeds_to_decide(tests: list[SubTest], level: float) -> float:
    """Seeds at which the claim would be decided if every sub-test kept its observed effect and
    spread: contradicted by its most contrary sub-test (at level / #sub-tests, the Bonferroni
    share), or reproduced once every sub-test is (at `level`): the smaller of the two."""
    against = [_seeds_needed(t, level / len(tests)) for t in tests if t.distance < 0]
    support = [_seeds_needed(t, level) for t in tests] if all(t.distance > 0 for t in tests) else [float("inf")]
    options = [n for n in [min(against) if against else float("inf"), max(support)] if np.isfinite(n)]
    return float(min(options)) if options else float("inf")


def evaluate(claims: tuple[Claim, ...], points: pd.DataFrame, audits: pd.DataFrame | None = None) -> list[Verdict]:
    """Verdicts of an experiment's claims (module docstring) from its per-seed points
    (`POINT_COLUMNS`) and, for audit claims, its audits table."""
    verdicts = []
    for claim in claims:
        if claim.kind == "audit":
            verdicts.append(_audit_verdict(claim, audits))
            continue
        tests = _comparison(claim, points) if claim.kind == "comparison" else _trend_or_rate(claim, points)
        tests = [t for t in tests if t.n > 0]
        if not tests:
            verdicts.append(Verdict(claim, "no data", evidence="no curve points in the claim's scope"))
            continue
        p = max(np.nan_to_num(t.p, nan=1.0) for t in tests)
        p_opp = min(1.0, len(tests) * min(np.nan_to_num(t.p_opp, nan=1.0) for t in tests))
        verdicts.append(Verdict(claim, "inconclusive", tests=tests, p=float(p), p_opp=float(p_opp)))
    tested = [v for v in verdicts if v.tests]
    for v, ph, po in zip(tested, _holm([v.p for v in tested]), _holm([v.p_opp for v in tested])):
        v.p_holm, v.p_opp_holm = ph, po
        if ph <= ALPHA:
            v.verdict = "reproduced"
        elif po <= ALPHA:
            v.verdict = "contradicted"
        else:
            v.seeds_needed = _seeds_to_decide(v.tests, ALPHA / max(len(tested), 1))
    return verdicts


def table(verdicts: list[Verdict]) -> pd.DataFrame:
    """claims.csv: one row per claim (`Verdict.row`)."""
    return pd.DataFrame([v.row() for v in verdicts])


def _fmt(value: float, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "∞" if isinstance(value, float) and value == float("inf") else "–"
    return f"{value:.{digits}g}"


def markdown(verdicts: list[Verdict]) -> str:
    """claims.md: the verdict table a README section leads with."""
    lines = ["| claim | source | relation tested | effect [95 % CI] (deciding panel) | p (Holm) | verdict | seeds |",
             "|---|---|---|---|---|---|---|"]
    for v in verdicts:
        r = v.row()
        quote = r["quote"] if len(r["quote"]) <= 90 else r["quote"][:87] + "…"
        if v.tests:
            effect = f"{_fmt(r['effect'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] ({r['where']})"
            p = _fmt(v.p_opp_holm if v.verdict == "contradicted" else v.p_holm, 2)
            seeds = f"{r['seeds']}" + (f" (needs ~{_fmt(v.seeds_needed, 3)})" if v.verdict == "inconclusive" else "")
        else:
            effect, p, seeds = r["where"], "–", "–"
        lines.append(f"| `{v.claim.id}`: “{quote}” | {r['source']} | {r['claim']} | {effect} | {p} | "
                     f"**{v.verdict}** | {seeds} |")
    return "\n".join(lines) + "\n"


def significant_points(verdicts: list[Verdict]) -> pd.DataFrame:
    """The epsilon points of per-point comparison claims where the relation holds, or fails,
    significantly at the Bonferroni level ALPHA / (claims tested x the claim's points): one row
    per (label a, panel, model, epsilon, metric) with the claim id and `holds` (True / False), for
    the figures to mark."""
    tested = [v for v in verdicts if v.tests]
    rows = []
    for v in tested:
        c = v.claim
        if c.kind != "comparison" or c.per != "point":
            continue
        level = ALPHA / (len(tested) * len(v.tests))
        for t in v.tests:
            for holds, p in ((True, t.p), (False, t.p_opp)):
                if np.isfinite(p) and p <= level:
                    rows.append({"label": c.a, "dataset_panel": t.panel, "model_label": t.model, "epsilon": t.epsilon,
                                 "metric": c.metric, "claim": c.id, "holds": holds})
    return pd.DataFrame(rows, columns=["label", "dataset_panel", "model_label", "epsilon", "metric", "claim",
                                       "holds"])


def readme_block(name: str) -> tuple[str, str]:
    """The markers between which a README carries experiment `name`'s generated claims table."""
    return f"<!-- claims:{name} -->", f"<!-- /claims:{name} -->"


def fill_readme(text: str, name: str, table_markdown: str) -> str:
    """`text` with the block of experiment `name` (`readme_block`) holding `table_markdown`;
    ValueError when the README has no such block."""
    start, end = readme_block(name)
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        raise ValueError(f"no {start} ... {end} block in the README")
    return text[:i + len(start)] + "\n" + table_markdown.rstrip("\n") + "\n" + text[j:]


def check_points(verdicts: list[Verdict]) -> pd.DataFrame:
    """The verdicts as regression-check points (metric "claim:<id>", value +1 reproduced, 0
    inconclusive, -1 contradicted; claims without data are left out): `dpbench check` fails
    when one changes, like a moved audit bound."""
    rows = [{"label": "(claims)", "dataset_label": "(all panels)", "model_label": "(all models)", "epsilon": np.nan,
             "metric": f"claim:{v.claim.id}", "rep": 0, "value": float(VERDICTS[v.verdict])}
            for v in verdicts if v.verdict in VERDICTS]
    return pd.DataFrame(rows, columns=["label", "dataset_label", "model_label", "epsilon", "metric", "rep", "value"])


__all__ = ["ALPHA", "AXES", "CLAIM_KEYS", "Claim", "KINDS", "POINT_COLUMNS", "RELATIONS", "SubTest", "VERDICTS",
           "Verdict", "check_points", "evaluate", "fill_readme", "markdown", "parse_claims", "per_seed_points",
           "readme_block", "significant_points", "table"]
