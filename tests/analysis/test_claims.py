"""Paper claims as code (dpbench.analysis.claims): parsing, the paired statistics against independent
computations, verdicts that flip when a curve moves by a known amount, and `dpbench check`
failing on a flipped verdict."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from dpbench.analysis import claims as C
from dpbench.cli.main import main
from dpbench.core.errors import SpecError

BASE = {"source": "test", "quote": "a sentence"}


def _claims(*entries):
    return C.parse_claims([{**BASE, **e} for e in entries])


def _points(values: dict[str, np.ndarray], epsilons=(0.1, 1.0), panels=(("P", "LR"),), x=None) -> pd.DataFrame:
    """Per-seed points: values[label] has shape (seeds, len(epsilons))."""
    rows = []
    for label, v in values.items():
        for panel, model in panels:
            for r in range(v.shape[0]):
                for j, eps in enumerate(epsilons):
                    rows.append({"label": label, "dataset_label": panel, "dataset_panel": panel, "model_label": model,
                                 "epsilon": eps, "n_train": np.nan if x is None else x[j], "n_features": np.nan,
                                 "metric": "accuracy", "rep": r, "value": float(v[r, j])})
    return pd.DataFrame(rows, columns=C.POINT_COLUMNS)


def test_parse_errors_name_the_yaml_path():
    cases = [
        ({"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "bigger"},
         "claims[x].relation: must be one of greater, less, at_least, at_most, equivalent, differs (the relations "
         "of a comparison claim); got 'bigger'"),
        ({"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "equivalent"},
         "claims[x].margin: missing; this relation needs its margin"),
        ({"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "at_least"},
         "claims[x].margin: missing; this relation needs its margin"),
        ({"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater",
          "quantifier": "few"}, "claims[x].quantifier: must be one of all, most, some"),
        ({"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater",
          "uninformative": [{"datasets": ["P"]}]}, "claims[x].uninformative[0].reason: missing"),
        ({"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "equivalent",
          "margin": 0.1, "equivalence": 0.1}, "claims[x].equivalence: does not apply"),
        ({"id": "X y", "kind": "trend"}, "claims[0].id: must be lower-case"),
        ({"id": "x", "kind": "trend", "metric": "accuracy", "a": "A", "relation": "increasing", "margin": 1},
         "claims[x].margin: does not apply to a trend claim"),
        ({"id": "x", "kind": "rate", "metric": "m", "a": "A", "relation": "upper"}, "claims[x].slope: missing"),
        ({"id": "x", "kind": "audit", "relation": "refuted", "colour": 1}, "claims[0].colour: unknown key"),
    ]
    for entry, message in cases:
        with pytest.raises(SpecError) as err:
            _claims(entry)
        assert str(err.value).startswith(message), str(err.value)
    with pytest.raises(SpecError, match="repeated id"):
        _claims({"id": "x", "kind": "audit", "relation": "refuted", "audit": "a"},
                {"id": "x", "kind": "audit", "relation": "refuted", "audit": "a"})


def test_a_claim_kind_is_one_declaration(monkeypatch):
    """A kind declared in one place is parsed (its own keys and constraints), tested and tabled;
    nothing else lists it."""
    from dpbench.analysis.claims import stats
    from dpbench.core.validation import Interval, Real, Text

    monkeypatch.setattr(C.CLAIM_KINDS, "_entries", dict(C.CLAIM_KINDS.items()))  # forgets the test's kind

    @C.claim_kind("level", relations=("above",), statement=lambda c: f"{c.metric} of {c.a} above {c.floor:g}",
                  fields=(C.Field("metric", Text()), C.Field("a", Text()), C.Field("floor", Interval(Real), default=0.0)))
    def level(claim, points, audits):
        part = points[(points["metric"] == claim.metric) & (points["label"] == claim.a)]
        return [stats.subtest("all", part.groupby("rep")["value"].mean().to_numpy(), "greater", claim.floor)]

    values = 0.7 + np.random.default_rng(0).normal(0, 0.01, (6, 2))
    claim, = _claims({"id": "lvl", "kind": "level", "metric": "accuracy", "a": "A", "relation": "above", "floor": 0.5})
    assert (claim.floor, claim.a) == (0.5, "A")
    verdict, = C.evaluate((claim,), _points({"A": values}))
    assert verdict.verdict == "reproduced" and C.table([verdict]).loc[0, "claim"] == "accuracy of A above 0.5"
    for extra, message in [({"floor": "x"}, "claims[lvl].floor: must be a number, got 'x'"),
                           ({"relation": "below"}, "claims[lvl].relation: must be one of above"),
                           ({"b": "B"}, "claims[lvl].b: does not apply to a level claim"),
                           ({"colour": 1}, "claims[0].colour: unknown key")]:
        entry = {"id": "lvl", "kind": "level", "metric": "accuracy", "a": "A", "relation": "above", **extra}
        with pytest.raises(SpecError) as err:
            _claims(entry)
        assert str(err.value).startswith(message), str(err.value)


def test_comparison_statistics_match_an_independent_paired_t_test():
    rng = np.random.default_rng(0)
    b = rng.normal(0.7, 0.05, (12, 2))
    a = b + 0.01 + rng.normal(0, 0.01, (12, 2))  # paired: the seed noise cancels
    claim, = _claims({"id": "c", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B",
                      "relation": "greater"})
    v, = C.evaluate((claim,), _points({"A": a, "B": b}))
    d = (a - b).mean(axis=1)  # per seed, the mean difference over the epsilon points
    t = stats.ttest_1samp(d, 0.0, alternative="greater")
    assert v.tests[0].effect == pytest.approx(d.mean()) and v.tests[0].n == 12
    assert v.p == pytest.approx(t.pvalue, rel=1e-9)
    half = stats.t.ppf(0.975, 11) * d.std(ddof=1) / math.sqrt(12)
    assert (v.tests[0].ci_low, v.tests[0].ci_high) == pytest.approx((d.mean() - half, d.mean() + half))
    assert v.verdict == "reproduced"


def test_holm_against_a_hand_computation():
    assert C._holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(C._holm([0.01, float("nan")])[1])


@pytest.mark.parametrize("shift, verdict", [(0.05, "reproduced"), (0.0, "undecided"), (-0.05, "contradicted")])
def test_moving_one_curve_flips_the_verdict(shift, verdict):
    rng = np.random.default_rng(1)
    b = rng.normal(0.7, 0.05, (20, 3))
    a = b + shift + rng.normal(0, 0.02, (20, 3))
    claims = _claims({"id": "above", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B",
                      "relation": "greater"},
                     {"id": "same", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B",
                      "relation": "equivalent", "margin": 0.02, "per": "point"})
    above, same = C.evaluate(claims, _points({"A": a, "B": b}, epsilons=(0.1, 1.0, 3.0)))
    assert above.verdict == verdict
    assert same.verdict == ("reproduced" if shift == 0 else "contradicted")
    assert len(same.tests) == 3  # one per epsilon point
    if verdict == "undecided":
        assert above.seeds_needed > 20 or math.isinf(above.seeds_needed)
    marks = C.significant_points([above, same])  # only per-point claims mark epsilon points
    assert set(marks["claim"]) == {"same"} and set(marks["epsilon"]) <= {0.1, 1.0, 3.0} and len(marks) >= 2
    assert (marks["holds"] == (shift == 0)).all()  # equal: holds at every point; shifted: fails at every point


def test_trend_and_rate_on_curves_with_known_slopes():
    rng = np.random.default_rng(2)
    eps = np.array([0.1, 0.3, 1.0, 3.0])
    gap = 0.5 * eps[None, :] ** -2.0 * np.exp(rng.normal(0, 0.05, (8, 4)))
    claims = _claims({"id": "r", "kind": "rate", "metric": "accuracy", "a": "A", "relation": "exact",
                      "slope": -2.0, "tolerance": 0.2},
                     {"id": "r-wrong", "kind": "rate", "metric": "accuracy", "a": "A", "relation": "exact",
                      "slope": -1.0, "tolerance": 0.2},
                     # an upper-bound rate: falling faster than n^-1 is within the bound, n^-3 is not
                     {"id": "r-upper", "kind": "rate", "metric": "accuracy", "a": "A", "relation": "upper",
                      "slope": -1.0},
                     {"id": "r-upper-wrong", "kind": "rate", "metric": "accuracy", "a": "A", "relation": "upper",
                      "slope": -3.0},
                     {"id": "t", "kind": "trend", "metric": "accuracy", "a": "A", "relation": "decreasing"},
                     {"id": "t-wrong", "kind": "trend", "metric": "accuracy", "a": "A", "relation": "increasing"})
    verdicts = {v.claim.id: v for v in C.evaluate(claims, _points({"A": gap}, epsilons=tuple(eps)))}
    per_seed = [np.polyfit(np.log(eps), np.log(g), 1)[0] for g in gap]
    assert verdicts["r"].tests[0].effect == pytest.approx(np.mean(per_seed))
    assert {k: v.verdict for k, v in verdicts.items()} == {"r": "reproduced", "r-wrong": "contradicted",
                                                           "r-upper": "reproduced", "r-upper-wrong": "contradicted",
                                                           "t": "reproduced", "t-wrong": "contradicted"}


def test_audit_claims_read_the_audits_table():
    audits = pd.DataFrame({"label": ["X"] * 2 + ["Y"] * 2, "method": "multi-run", "claimed_epsilon": [1.0, 2.0] * 2,
                           "epsilon_lower_bound": [1.5, 2.5, 0.0, 0.1], "epsilon_estimate_low": [3, 4, 0.1, 0.2],
                           "epsilon_estimate_high": [5, 6, 0.2, 0.4]})
    claims = _claims({"id": "x-refuted", "kind": "audit", "relation": "refuted", "audit": "X"},
                     {"id": "y-refuted", "kind": "audit", "relation": "refuted", "audit": "Y"},
                     {"id": "x-kept", "kind": "audit", "relation": "not_refuted", "audit": "X"},
                     {"id": "y-loose", "kind": "audit", "relation": "loose", "audit": "Y", "factor": 4},
                     {"id": "z", "kind": "audit", "relation": "refuted", "audit": "Z"})
    got = {v.claim.id: v.verdict for v in C.evaluate(claims, _points({}), audits)}
    assert got == {"x-refuted": "reproduced", "y-refuted": "undecided", "x-kept": "contradicted",
                   "y-loose": "reproduced", "z": "no data"}


TINY = """
name: tinyclaims
seeds: 6
datasets: [{name: breast_cancer, label: BC}]
models: [{name: logreg, label: LR}]
epsilons: [0.05, 1]
metrics: [accuracy]
algorithms:
  - {name: nonprivate, label: exact}
  - {name: output_perturbation_gd, label: ZZMW17, params: {epochs: 5}}
claims:
  - {id: exact-above, source: test, quote: "the private model is less accurate than the exact one", kind: comparison,
     metric: accuracy, a: ZZMW17, b: exact, relation: less, epsilons: [0.05, 0.05]}
"""


def test_check_fails_when_a_moved_curve_flips_a_verdict(tmp_path, data_dir):
    spec = tmp_path / "tinyclaims.yaml"
    spec.write_text(TINY)
    results = tmp_path / "results"
    common = ["--results", str(results), "--data", str(data_dir), "--backend", "sequential", "--no-progress"]
    assert CliRunner().invoke(main, ["run", str(spec), *common]).exit_code == 0
    out = CliRunner().invoke(main, ["claims", str(spec), "--results", str(results)])
    assert out.exit_code == 0, out.output
    table = pd.read_csv(results / "tinyclaims" / "claims.csv")
    assert table.loc[0, "verdict"] == "reproduced" and (results / "tinyclaims" / "claims.md").is_file()
    assert CliRunner().invoke(main, ["check", str(spec), "--update", "--no-envelope", *common]).exit_code == 0
    reference = pd.read_csv(results / "tinyclaims" / "reference-full.csv")
    assert reference.loc[reference["metric"] == "claim:exact-above", "value"].tolist() == [1.0]
    # move the exact model's curve: its fit now returns -theta, so its accuracy becomes 1 - accuracy
    # at every seed (0.96 -> 0.04 on Breast Cancer): the claim flips, and check fails on its verdict
    from dpbench import algorithms
    from dpbench.algorithms.base import Fit

    exact = algorithms.get("nonprivate")

    def flipped(problem, privacy, rng, **params):
        fit = exact.fit(problem, privacy, rng, **params)
        return Fit(theta=-fit.theta, privacy=fit.privacy, trace=fit.trace)

    with algorithms.REGISTRY.substituted(dataclasses.replace(exact, fit=flipped)):
        moved = CliRunner().invoke(main, ["check", str(spec), *common])
    assert moved.exit_code == 1 and "claim:exact-above" in moved.output and "DRIFT" in moved.output
    assert "accuracy" in moved.output  # the curve points moved too


def test_seeds_needed_reaches_the_power_by_an_independent_noncentral_t():
    test = C.SubTest(where="x", n=5, effect=0.01, ci_low=0, ci_high=0, p=0.5, p_opp=0.5, sd=0.02, distance=0.01)
    n = int(C._seeds_needed(test, 0.05))

    def power(k):
        return stats.nct.sf(stats.t.isf(0.05, k - 1), k - 1, 0.01 / 0.02 * math.sqrt(k))

    assert power(n) >= 0.79 and power(n - 1) < 0.81  # the t approximation is within a seed of the exact count


def test_each_papers_docs_page_carries_its_committed_claims_table():
    """A paper's docs page leads with its generated table (`dpbench claims --readme
    docs/papers/<experiment>.md`): each block equals the committed results/<experiment>/claims.md."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    tables = sorted((root / "results").glob("*/claims.md"))
    assert tables, "no committed claims.md"
    for path in tables:
        name = path.parent.name
        page = root / "docs" / "papers" / f"{name}.md"
        text = page.read_text(encoding="utf-8")
        table = path.read_text(encoding="utf-8").split("\n", 2)[2]  # without the title line and blank line
        start, end = C.readme_block(name)
        assert start in text, f"{page.name} has no {start} block"
        block = text[text.index(start) + len(start):text.index(end)].strip("\n")
        assert block == table.strip("\n"), \
            f"docs/papers/{name}.md's claims table is stale: run dpbench claims --readme docs/papers/{name}.md"
    assert C.fill_readme(f"a {start}\nold\n{end} b", name, "| t |\n") == f"a {start}\n| t |\n{end} b"


# ---- the vocabulary: relations, quantifiers, screens -------------------------------------------------------------
def _panels(values: dict[str, dict[str, np.ndarray]], epsilons=(0.1, 1.0), **extra) -> pd.DataFrame:
    """Per-seed points of several panels: values[panel][label] has shape (seeds, len(epsilons))."""
    parts = [_points(by_label, epsilons=epsilons, panels=((panel, "LR"),)) for panel, by_label in values.items()]
    return pd.concat(parts, ignore_index=True).assign(**extra)


def _noise(rng, shape, scale=0.01):
    return rng.normal(0.0, scale, shape)


def test_quantifiers_all_most_some_over_panels():
    rng = np.random.default_rng(0)
    base = 0.8 + _noise(rng, (10, 2))
    # A beats B by 0.05 on panels P1 and P2, loses by 0.05 on P3
    values = {p: {"A": base + d + _noise(rng, (10, 2)), "B": base} for p, d in (("P1", .05), ("P2", .05), ("P3", -.05))}
    points = _panels(values)
    claims = _claims(*({"id": q, "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater",
                        "quantifier": q} for q in ("all", "most", "some")))
    got = {v.claim.id: v.verdict for v in C.evaluate(claims, points)}
    assert got == {"all": "contradicted", "most": "reproduced", "some": "reproduced"}
    # "some" is contradicted only when every panel fails
    failing = _panels({p: {"A": base - 0.05 + _noise(rng, (10, 2)), "B": base} for p in ("P1", "P2")})
    assert [v.verdict for v in C.evaluate(claims[2:], failing)] == ["contradicted"]
    # the partial conjunction: at least r of m hold <=> (m - r + 1) x the r-th smallest p
    assert C.stats.partial_conjunction([0.01, 0.02, 0.5], 2) == pytest.approx(2 * 0.02)
    assert C.stats.partial_conjunction([0.01, 0.02, 0.5], 3) == pytest.approx(0.5)
    assert C.stats.partial_conjunction([0.01, 0.02, 0.5], 1) == pytest.approx(3 * 0.01)


def test_non_inferiority_differs_and_no_difference_beyond_m():
    rng = np.random.default_rng(1)
    b = 0.8 + _noise(rng, (12, 2))
    better = {"A": b + 0.03 + _noise(rng, (12, 2), 0.005), "B": b}
    same = {"A": b + _noise(rng, (12, 2), 0.002), "B": b}
    comparison = {"kind": "comparison", "metric": "accuracy", "a": "A", "b": "B"}
    claims = _claims({"id": "noninf", **comparison, "relation": "at_least", "margin": 0.02},
                     {"id": "equiv", **comparison, "relation": "equivalent", "margin": 0.02},
                     {"id": "differs", **comparison, "relation": "differs"})
    got = {v.claim.id: v.verdict for v in C.evaluate(claims, _points(better))}
    # being better satisfies "almost the same as (or better than)" but not "the same"
    assert got == {"noninf": "reproduced", "equiv": "contradicted", "differs": "reproduced"}
    tied = _claims({"id": "greater", **comparison, "relation": "greater", "equivalence": 0.01},
                   {"id": "differs-m", **comparison, "relation": "differs", "margin": 0.01})
    got = {v.claim.id: v for v in C.evaluate(tied, _points(same))}
    assert got["greater"].verdict == "no difference beyond m" and got["greater"].p_eq_holm <= C.ALPHA
    assert got["differs-m"].verdict == "contradicted"  # two-sided, refuted by equivalence within its margin
    assert C.tables.verdict_text(got["greater"]) == "no difference beyond 0.01"


def test_trend_of_a_difference_and_spread():
    rng = np.random.default_rng(2)
    eps = (0.1, 0.3, 1.0, 3.0)
    log_eps = np.log(eps)
    b = 0.8 + _noise(rng, (8, 4))
    # A - B grows by 0.02 per unit of log epsilon; C zigzags around B's line
    a = b + 0.02 * (log_eps - log_eps.mean()) + _noise(rng, (8, 4), 0.002)
    zigzag = b + 0.05 * np.array([1, -1, 1, -1]) + _noise(rng, (8, 4), 0.002)
    points = _points({"A": a, "B": b, "C": zigzag}, epsilons=eps)
    claims = _claims({"id": "gap-grows", "kind": "trend", "metric": "accuracy", "a": "A", "b": "B",
                      "relation": "increasing"},
                     {"id": "gap-shrinks", "kind": "trend", "metric": "accuracy", "a": "A", "b": "B",
                      "relation": "decreasing"},
                     {"id": "c-fluctuates", "kind": "spread", "metric": "accuracy", "a": "C", "b": "B",
                      "relation": "greater"})
    verdicts = {v.claim.id: v for v in C.evaluate(claims, points)}
    assert {k: v.verdict for k, v in verdicts.items()} == {"gap-grows": "reproduced", "gap-shrinks": "contradicted",
                                                           "c-fluctuates": "reproduced"}
    per_seed = [np.polyfit(log_eps, a[r] - b[r], 1)[0] for r in range(8)]
    assert verdicts["gap-grows"].tests[0].effect == pytest.approx(np.mean(per_seed))

    def rms(y):
        return np.sqrt(np.mean((y - np.polyval(np.polyfit(log_eps, y, 1), log_eps)) ** 2))

    spread = [rms(zigzag[r]) - rms(b[r]) for r in range(8)]
    assert verdicts["c-fluctuates"].tests[0].effect == pytest.approx(np.mean(spread))


def test_screens_make_vacuous_what_cannot_inform_a_claim():
    rng = np.random.default_rng(3)
    low = 0.5 + _noise(rng, (8, 2))  # B at the majority line of P1 (majority 0.5 there)
    values = {"P1": {"A": low + 0.1, "B": low}, "P2": {"A": low + 0.3, "B": low + 0.25}}
    points = _panels(values)
    points["majority"] = points["dataset_label"].map({"P1": 0.5, "P2": 0.5})
    greater = {"kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater"}
    v = C.evaluate(_claims({"id": "x", **greater}), points)[0]
    # P1 is left out (its comparator sits on the majority line); P2 decides the claim
    assert [t.where for t in v.live] == ["P2 LR"] and "majority-class line" in v.vacuous_reasons
    only_p1 = C.evaluate(_claims({"id": "x", **greater, "datasets": ["P1"]}), points)[0]
    assert only_p1.verdict == "vacuous"
    # a comparator without a guarantee at a point is left out too
    no_guarantee = points.assign(dp_claim=np.where(points["label"] == "B", "none", "valid"), majority=np.nan)
    assert C.evaluate(_claims({"id": "x", **greater}), no_guarantee)[0].verdict == "vacuous"
    # a claim that A is the worse one is about A: not screened
    less = C.evaluate(_claims({"id": "x", **greater, "a": "B", "b": "A", "relation": "less"}), points)[0]
    assert less.verdict == "reproduced" and not less.vacuous_reasons
    # declared uninformative: reported, with its reason
    declared = C.evaluate(_claims({"id": "x", **greater, "uninformative": [{"datasets": ["P2"], "reason": "why"}]}),
                          points.assign(majority=np.nan))[0]
    assert "declared uninformative: why" in declared.vacuous_reasons and [t.where for t in declared.live] == ["P1 LR"]


def test_a_specific_claim_every_method_passes_is_vacuous():
    rng = np.random.default_rng(4)
    ref = 0.8 + _noise(rng, (8, 1))
    points = _points({"A": ref + _noise(rng, (8, 2), 0.001), "O": ref + _noise(rng, (8, 2), 0.001),
                      "N": np.repeat(ref, 2, axis=1)}, epsilons=(0.1, 1.0))
    points.loc[points["label"] == "N", "epsilon"] = np.nan  # the non-private line
    points = points.drop_duplicates(subset=["label", "rep", "epsilon"])
    claim = {"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "N", "relation": "equivalent",
             "margin": 0.02}
    assert C.evaluate(_claims(claim), points)[0].verdict == "reproduced"
    specific = C.evaluate(_claims({**claim, "specific": True}), points)[0]
    assert specific.verdict == "vacuous" and "every method passes (O)" in specific.vacuous_reasons


def test_looks_of_a_design_give_sequential_p_values():
    rng = np.random.default_rng(5)
    a = 0.8 + 0.01 + _noise(rng, (20, 2))
    b = 0.8 + _noise(rng, (20, 2))
    points = _points({"A": a, "B": b})
    claim = _claims({"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B",
                     "relation": "greater"})
    design = C.Design((5, 10, 20))
    v = C.evaluate(claim, points, design=design)[0]
    per_look = []
    for n in (5, 10, 20):
        d = (a[:n] - b[:n]).mean(axis=1)
        per_look.append(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)
    assert v.looks == 3 and v.p == pytest.approx(min(1.0, min(np.array(per_look) / design.weights)))
    # a design whose looks the data have not reached uses only those reached
    assert C.evaluate(claim, points[points["rep"] < 12], design=design)[0].looks == 2
