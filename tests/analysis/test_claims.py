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
         "claims[x].relation: must be one of greater, less, equivalent (the relations of a comparison claim); "
         "got 'bigger'"),
        ({"id": "x", "kind": "comparison", "metric": "accuracy", "a": "A", "b": "B", "relation": "equivalent"},
         "claims[x].margin: missing; an equivalence claim needs its margin"),
        ({"id": "X y", "kind": "trend"}, "claims[0].id: must be lower-case"),
        ({"id": "x", "kind": "trend", "metric": "accuracy", "a": "A", "relation": "increasing", "b": "B"},
         "claims[x].b: does not apply to a trend claim"),
        ({"id": "x", "kind": "rate", "metric": "m", "a": "A", "relation": "within"}, "claims[x].interval: missing"),
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


@pytest.mark.parametrize("shift, verdict", [(0.05, "reproduced"), (0.0, "inconclusive"), (-0.05, "contradicted")])
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
    if verdict == "inconclusive":
        assert above.seeds_needed > 20 or math.isinf(above.seeds_needed)
    marks = C.significant_points([above, same])  # only per-point claims mark epsilon points
    assert set(marks["claim"]) == {"same"} and set(marks["epsilon"]) <= {0.1, 1.0, 3.0} and len(marks) >= 2
    assert (marks["holds"] == (shift == 0)).all()  # equal: holds at every point; shifted: fails at every point


def test_trend_and_rate_on_curves_with_known_slopes():
    rng = np.random.default_rng(2)
    eps = np.array([0.1, 0.3, 1.0, 3.0])
    gap = 0.5 * eps[None, :] ** -2.0 * np.exp(rng.normal(0, 0.05, (8, 4)))
    claims = _claims({"id": "r", "kind": "rate", "metric": "accuracy", "a": "A", "relation": "within",
                      "interval": [-2.2, -1.8]},
                     {"id": "r-wrong", "kind": "rate", "metric": "accuracy", "a": "A", "relation": "within",
                      "interval": [-1.2, -0.8]},
                     {"id": "t", "kind": "trend", "metric": "accuracy", "a": "A", "relation": "decreasing"},
                     {"id": "t-wrong", "kind": "trend", "metric": "accuracy", "a": "A", "relation": "increasing"})
    verdicts = {v.claim.id: v for v in C.evaluate(claims, _points({"A": gap}, epsilons=tuple(eps)))}
    per_seed = [np.polyfit(np.log(eps), np.log(g), 1)[0] for g in gap]
    assert verdicts["r"].tests[0].effect == pytest.approx(np.mean(per_seed))
    assert {k: v.verdict for k, v in verdicts.items()} == {"r": "reproduced", "r-wrong": "contradicted",
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
    assert got == {"x-refuted": "reproduced", "y-refuted": "inconclusive", "x-kept": "contradicted",
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
  - {id: exact-above, source: test, quote: "the exact model is the most accurate", kind: comparison,
     metric: accuracy, a: exact, b: ZZMW17, relation: greater, epsilons: [0.05, 0.05]}
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
