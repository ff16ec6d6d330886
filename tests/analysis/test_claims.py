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


def test_comparison_statistics_match_an_independent_sign_test():
    """The sign test of the median paired difference: its p-values equal scipy's exact binomial test
    on the seeds above / below the threshold, its interval the order statistics whose coverage a
    direct sum over the binomial gives, and ties (seeds exactly at the threshold) count on neither side."""
    rng = np.random.default_rng(0)
    b = rng.normal(0.7, 0.05, (12, 2))
    a = b + 0.01 + rng.normal(0, 0.01, (12, 2))  # paired: the seed noise cancels
    claim, = _claims({"id": "c", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B",
                      "relation": "greater"})
    v, = C.evaluate((claim,), _points({"A": a, "B": b}))
    d = (a - b).mean(axis=1)  # per seed, the mean difference over the epsilon points
    above, below = int((d > 0).sum()), int((d < 0).sum())
    t = v.tests[0]
    assert t.effect == pytest.approx(np.median(d)) and t.n == 12 and t.test == "sign"
    assert v.p == pytest.approx(stats.binomtest(above, above + below, alternative="greater").pvalue, rel=1e-12)
    assert v.p_opp == pytest.approx(stats.binomtest(below, above + below, alternative="greater").pvalue, rel=1e-12)
    # 12 seeds: [x_(3), x_(10)] covers the median with probability 1 - 2 P(B(12, 1/2) <= 2) = 0.961 >= 0.95,
    # [x_(4), x_(9)] only 0.854
    coverage = [1 - 2 * sum(math.comb(12, i) for i in range(j)) / 2 ** 12 for j in (3, 4)]
    assert coverage[0] >= 0.95 > coverage[1]
    assert (t.ci_low, t.ci_high) == (np.sort(d)[2], np.sort(d)[9])
    assert t.skew == pytest.approx(stats.skew(d, bias=False))
    assert v.verdict == "reproduced"
    tied = C.stats.subtest("x", np.array([0.0, 0.0, 0.0, 1.0, 2.0, 3.0, -1.0]), "greater", 0.0)
    assert tied.p == pytest.approx(stats.binomtest(3, 4, alternative="greater").pvalue)
    assert tied.ties == pytest.approx(3 / 7)
    # a tie within the last bits of the threshold is a tie, not a win
    assert C.stats.subtest("x", np.array([1e-17, 0.0, 1.0, -1.0]), "greater", 0.0).ties == 0.5


def test_holm_against_a_hand_computation():
    assert C._holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert math.isnan(C._holm([0.01, float("nan")])[1])


@pytest.mark.parametrize("shift, verdict", [(0.05, "reproduced"), (0.0, "undecided"), (-0.05, "contradicted")])
def test_moving_one_curve_flips_the_verdict(shift, verdict):
    rng = np.random.default_rng(1)
    b = rng.normal(0.7, 0.05, (20, 3))
    a = b + shift + rng.normal(0, 0.01, (20, 3))
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
    assert verdicts["r"].tests[0].effect == pytest.approx(np.median(per_seed))
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


def test_seeds_needed_reaches_the_power_by_an_independent_binomial_sum():
    """Seeds the sign test needs: at the count given, the exact power (a direct sum of binomial
    terms over the rejection region) reaches 0.8 and one seed fewer does not; ties scale the count."""
    test = C.SubTest(where="x", n=5, effect=0.01, ci_low=0, ci_high=0, p=0.5, p_opp=0.5, sd=0.02, distance=0.01,
                     share=0.75)
    level = 0.01
    n = int(C._seeds_needed(test, level))

    def power(k):
        null = [math.comb(k, i) / 2 ** k for i in range(k + 1)]
        critical = min(c for c in range(k + 2) if sum(null[c:]) <= level)  # reject when >= critical seeds agree
        return sum(math.comb(k, i) * 0.75 ** i * 0.25 ** (k - i) for i in range(critical, k + 1))

    assert power(n) >= 0.8 and power(n - 1) < 0.8
    with_ties = dataclasses.replace(test, ties=0.5)
    assert C._seeds_needed(with_ties, level) == 2 * n
    assert math.isinf(C._seeds_needed(dataclasses.replace(test, share=0.5), level))
    t_test = dataclasses.replace(test, test="t")  # the t-test's count, against the noncentral t

    def t_power(k):
        return stats.nct.sf(stats.t.isf(0.05, k - 1), k - 1, 0.01 / 0.02 * math.sqrt(k))

    k = int(C._seeds_needed(t_test, 0.05))
    assert t_power(k) >= 0.79 and t_power(k - 1) < 0.81


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
    assert C.fill_readme(f"a\n{start}\nold\n{end}\nb", name, "| t |\n") == f"a\n{start}\n| t |\n{end}\nb"
    with pytest.raises(ValueError, match="line of its own"):  # a marker quoted in a sentence is not a block
        C.fill_readme(f"see `{start}` and `{end}`", name, "| t |\n")


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
    assert verdicts["gap-grows"].tests[0].effect == pytest.approx(np.median(per_seed))

    def rms(y):
        return np.sqrt(np.mean((y - np.polyval(np.polyfit(log_eps, y, 1), log_eps)) ** 2))

    spread = [rms(zigzag[r]) - rms(b[r]) for r in range(8)]
    assert verdicts["c-fluctuates"].tests[0].effect == pytest.approx(np.median(spread))


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
        per_look.append(stats.binomtest(int((d > 0).sum()), int((d != 0).sum()), alternative="greater").pvalue)
    assert v.looks == 3 and v.p == pytest.approx(min(1.0, min(np.array(per_look) / design.weights)))
    # a design whose looks the data have not reached uses only those reached
    assert C.evaluate(claim, points[points["rep"] < 12], design=design)[0].looks == 2


def test_a_screen_removes_support_but_never_evidence_against():
    """A comparator at the majority line cannot make A's win count, but A losing to it still
    contradicts the claim (the screened points' p_opp enters "fails")."""
    rng = np.random.default_rng(6)
    low = 0.5 + _noise(rng, (12, 2), 0.002)
    points = _panels({"P1": {"A": low - 0.1 + _noise(rng, (12, 2), 0.002), "B": low}})
    points["majority"] = 0.5
    greater = {"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater"}
    v = C.evaluate(_claims(greater), points)[0]
    assert not v.live and "majority-class line" in v.vacuous_reasons
    assert v.verdict == "contradicted" and v.deciding.effect < -0.05
    # A above the screened comparator: still no support, so vacuous
    up = _panels({"P1": {"A": low + 0.1 + _noise(rng, (12, 2), 0.002), "B": low}}).assign(majority=0.5)
    assert C.evaluate(_claims(greater), up)[0].verdict == "vacuous"
    # declared uninformative panels count against the claim too
    declared = C.evaluate(_claims({**greater, "uninformative": [{"datasets": ["P1"], "reason": "why"}]}),
                          points.assign(majority=np.nan))[0]
    assert declared.verdict == "contradicted"


def test_equivalence_under_all_needs_every_panel_and_no_margin_is_no_hypothesis():
    """`all`: "no difference beyond e" is the intersection over panels (the largest p), not any
    one panel; a claim without a margin has no equivalence p-value, so it adds nothing to Holm's cap."""
    hold, fail, equiv = C.stats.combine_p([0.5, 0.5], [0.5, 0.5], [0.001, 0.9], "all")
    assert equiv == pytest.approx(0.9) and hold == pytest.approx(0.5) and fail == pytest.approx(1.0)
    assert C.stats.combine_p([0.5, 0.5], [0.5, 0.5], [0.001, 0.9], "some")[2] == pytest.approx(0.002)
    assert math.isnan(C.stats.combine_p([0.01], [0.9], [np.nan], "all")[2])
    rng = np.random.default_rng(7)
    b = 0.8 + _noise(rng, (12, 2))
    values = {"P1": {"A": b + _noise(rng, (12, 2), 0.001), "B": b}, "P2": {"A": b + 0.05, "B": b}}
    claim = {"kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "less"}
    with_margin, without = C.evaluate(_claims({"id": "e", **claim, "equivalence": 0.01}, {"id": "n", **claim}),
                                      _panels(values))
    assert with_margin.verdict != "no difference beyond m" and with_margin.p_eq > 0.5  # P2 differs by 0.05
    assert math.isnan(without.p_eq) and math.isnan(without.p_eq_holm)
    from dpbench.analysis.claims.sequential import family_verdicts

    assert family_verdicts([0.01, 0.02], [0.9, 0.9], [np.nan, np.nan]).cap == 2
    assert family_verdicts([0.01, 0.02], [0.9, 0.9], [0.5, np.nan]).cap == 3


def test_the_level_holds_on_skewed_shapes_where_the_t_test_fails():
    """The shapes simulation: per-seed values with a rare runaway seed (skew ~4) make the t-test's
    family-wise error far exceed 5 % at the boundary, while the sign test stays below it; on normal
    shapes both stay below it."""
    from dpbench.analysis.claims.shapes import Shape, simulate_shapes

    rng = np.random.default_rng(8)
    runaway = np.r_[rng.normal(0, 0.01, 19), -1.0]  # one seed of 20 ran away, against the claim
    shapes = [Shape(f"c{i}", "all", (runaway + 0.001 * i,)) for i in range(6)]
    design = C.Design((10, 20))
    result = simulate_shapes(shapes, design, 400, scenarios=("boundary",), rng_seed=1)
    assert result.row("t", "boundary")["fwer_low"] > 0.05  # measured 0.99: a sample without the runaway seed
    assert result.row("sign", "boundary")["fwer"] <= 0.05
    normal = [Shape(f"n{i}", "all", (rng.normal(0, 1, 20),)) for i in range(6)]
    calm = simulate_shapes(normal, design, 400, scenarios=("boundary", "shift 1"), rng_seed=1)
    for test in ("sign", "t"):
        assert calm.row(test, "boundary")["fwer_low"] <= 0.05
        assert calm.row(test, "shift 1")["power"] > 0.1  # the tests can decide: the simulation is not vacuous


def test_the_margin_rule_gives_every_directional_claim_its_metrics_margin():
    """Every directional claim carries its metric's margin (the spec's `margins:` over dpbench's
    defaults) as its "no difference beyond e"; another margin needs a written reason, a metric
    without one a declaration; a trend's margin is a change of e over the x range."""
    rule = {"accuracy": 0.01, "optimality_gap": 0.02}
    comparison = {"kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater"}
    claim, = C.parse_claims([{**BASE, "id": "x", **comparison}], margins=rule)
    assert claim.equivalence == 0.01 and "else no difference beyond 0.01" in claim.statement
    same, = C.parse_claims([{**BASE, "id": "x", **comparison, "relation": "equivalent", "margin": 0.05}],
                           margins=rule)
    assert same.equivalence == 0.0  # "the same" has its own margin
    with pytest.raises(SpecError, match=r"claims\[x\].equivalence: 0.03 is not the margin rule's 0.01 for accuracy"):
        C.parse_claims([{**BASE, "id": "x", **comparison, "equivalence": 0.03}], margins=rule)
    given, = C.parse_claims([{**BASE, "id": "x", **comparison, "equivalence": 0.03,
                              "equivalence_reason": "the paper's axis resolves 0.03"}], margins=rule)
    assert given.equivalence == 0.03
    with pytest.raises(SpecError, match=r"claims\[x\]: no margin for metric 'estimation_error'"):
        C.parse_claims([{**BASE, "id": "x", **comparison, "metric": "estimation_error"}], margins=rule)
    from dpbench.spec.experiment import from_dict

    spec = {"datasets": [{"name": "iris"}], "models": [{"name": "logreg"}], "epsilons": [1.0],
            "algorithms": [{"name": "nonprivate"}], "margins": {"accuracy": 0.02},
            "claims": [{**BASE, "id": "x", **comparison, "a": "nonprivate", "b": "nonprivate"}]}
    exp = from_dict(spec)
    assert exp.claims[0].equivalence == 0.02 and dict(exp.margins)["optimality_gap"] == 0.02
    with pytest.raises(SpecError, match="margins.accuracy: must be"):
        from_dict({**spec, "margins": {"accuracy": -1}})
    # a trend: the slope against log x within e / (log x_max - log x_min)
    rng = np.random.default_rng(9)
    eps = (0.1, 1.0, 10.0)
    flat = 0.8 + _noise(rng, (12, 3), 0.0005)
    trend, = C.parse_claims([{**BASE, "id": "t", "kind": "trend", "metric": "accuracy", "a": "A",
                              "relation": "increasing"}], margins=rule)
    v, = C.evaluate((trend,), _points({"A": flat}, epsilons=eps))
    assert v.verdict == "no difference beyond m"
    span = math.log(10.0) - math.log(0.1)
    inside = C.stats.relation_p(v.tests[0].values, "within", -0.01 / span, 0.01 / span)[0]
    assert v.tests[0].p_eq == pytest.approx(float(inside))


def test_a_bend_compares_the_slopes_over_two_ranges():
    """rate flattens / steepens: per seed, the log-log slope over high_range minus that over
    low_range; a curve falling as x^-2 then x^-1 flattens by 1."""
    rng = np.random.default_rng(10)
    n = np.array([250, 500, 1000, 2000, 4000, 8000])
    rows = [{"label": "A", "dataset_label": f"P n={x}", "dataset_panel": "P", "model_label": "LR", "epsilon": 1.0,
             "n_train": x, "n_features": np.nan, "metric": "m", "rep": r,
             "value": (x ** -2.0 if x <= 2000 else 2000 ** -2.0 * (x / 2000) ** -1.0) * np.exp(rng.normal(0, 0.02))}
            for r in range(12) for x in n]
    bend = {"kind": "rate", "metric": "m", "a": "A", "over": "n", "low_range": [250, 2000],
            "high_range": [2000, 8000]}
    claims = _claims({"id": "flat", **bend, "relation": "flattens"}, {"id": "steep", **bend, "relation": "steepens"})
    flat, steep = C.evaluate(claims, pd.DataFrame(rows, columns=C.POINT_COLUMNS))
    assert (flat.verdict, steep.verdict) == ("reproduced", "contradicted")
    assert flat.tests[0].effect == pytest.approx(1.0, abs=0.05)
    with pytest.raises(SpecError, match=r"claims\[x\].low_range: missing"):
        _claims({"id": "x", "kind": "rate", "metric": "m", "a": "A", "over": "n", "relation": "flattens",
                 "high_range": [1, 2]})


def test_a_spread_across_seeds_compares_how_far_seeds_land_from_the_typical_one():
    rng = np.random.default_rng(11)
    b = 0.5 + _noise(rng, (16, 3), 0.01)
    a = 0.5 + _noise(rng, (16, 3), 0.05)  # five times B's seed-to-seed spread
    claims = _claims({"id": "more", "kind": "spread", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater",
                      "across": "seeds"},
                     {"id": "less", "kind": "spread", "metric": "accuracy", "a": "A", "b": "B", "relation": "less",
                      "across": "seeds"})
    more, less = C.evaluate(claims, _points({"A": a, "B": b}, epsilons=(0.1, 1.0, 3.0)))
    assert (more.verdict, less.verdict) == ("reproduced", "contradicted")
    per_seed = (np.abs(a - np.median(a, axis=0)) - np.abs(b - np.median(b, axis=0))).mean(axis=1)
    assert more.tests[0].effect == pytest.approx(np.median(per_seed))
    assert "varies more than B across seeds" in more.claim.statement


def test_the_verdict_page_says_why_each_claim_is_encoded_as_it_is():
    rng = np.random.default_rng(3)
    base = rng.normal(0.8, 0.01, (20, 2))
    cl = _claims({"id": "noted", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater",
                  "note": "'better' as a one-sided comparison on the mean over epsilon."},
                 {"id": "plain", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater",
                  "quantifier": "some"},
                 {"id": "every", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "greater"})
    verdicts = C.evaluate(cl, _points({"A": base + 0.05, "B": base}))
    text = C.markdown(verdicts)
    why = text.split("Why each claim is encoded as it is", 1)[1]
    assert "- `noted`: 'better' as a one-sided comparison on the mean over epsilon." in why
    plain = next(line for line in why.splitlines() if line.startswith("- `plain`"))
    assert plain == f"- `plain`: as stated: {cl[1].statement}." and "on some panel" in plain
    assert f"- `every`: as stated: {cl[2].statement}, on every panel in its scope." in why
