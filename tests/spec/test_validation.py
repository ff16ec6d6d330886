"""Input that cannot be what the user meant is refused when the spec is loaded (or, for what needs
the data, before any cell runs), with one line that names the YAML path."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dpbench.cli.main import main
from dpbench.core.errors import SpecError
from dpbench.core.keys import evaluate_delta
from dpbench.experiment import pipeline
from dpbench.spec import experiment as spec

BASE = """
datasets: [breast_cancer]
models: [logreg]
algorithms: [{name: nonprivate}]
"""


def _load(tmp_path, text: str):
    path = tmp_path / "x.yaml"
    path.write_text(text)
    return spec.load(path)


@pytest.mark.parametrize("text, message", [
    ("datasets: [iris]\nmodels: [logreg]\nalgorithms: [{name: nonprivate}]\nepsilons: [1]\nepsilons: [2]\n",
     "key 'epsilons' appears twice in one mapping (lines 4 and 5)"),
    (BASE.replace("{name: nonprivate}", "{name: dpsgd, params: {lr: 1, lr: 2}}") + "epsilons: [1]\n",
     "key 'lr' appears twice in one mapping (line 4)"),
])
def test_duplicate_keys_are_refused_with_their_lines(tmp_path, text, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _load(tmp_path, text)


def test_merge_keys_still_load(tmp_path):
    exp = _load(tmp_path, BASE.replace("algorithms: [{name: nonprivate}]",
                                       "algorithms: [{<<: {name: dpsgd}, name: nonprivate}]"))
    assert [a.name for a in exp.algorithms] == ["nonprivate"]


@pytest.mark.parametrize("text, message", [
    (BASE + "metrics: [accuracy, estimation_error]\n",
     r"metrics\[1\]: estimation_error needs data with a known true parameter w\* \(synthetic\); breast_cancer"),
    (BASE.replace("breast_cancer", "synthetic_linear").replace("logreg", "ridge") + "metrics: [accuracy]\n",
     r"metrics\[0\]: accuracy needs a classification model; ridge is not"),
    (BASE.replace("breast_cancer", "synthetic_logistic").replace("logreg", "mlp") + "metrics: [estimation_error]\n",
     r"estimation_error needs a linear model"),
    (BASE + "metrics: [excess_population_risk]\n", r"needs data whose test split is the population"),
    (BASE + "figures: [{name: it, kind: metric_over_iterations, metric: accuracy}]\n",
     r"figures\[0\]\.kind: metric_over_iterations draws iterate traces, but no algorithm sets trace_every"),
    (BASE + "figures: [{name: n, kind: metric_over_n, metric: accuracy}]\n",
     r"figures\[0\]\.kind: metric_over_n draws a dataset swept over n"),
    (BASE.replace("algorithms: [{name: nonprivate}]", "algorithms: [{name: dpsgd, params: {epochs: 1e9}}]")
     + "epsilons: [1]\n", r"algorithms\[0\]\.params\.epochs: must be <= 10000"),
])
def test_what_the_grid_cannot_produce_is_refused_at_load(tmp_path, text, message):
    with pytest.raises(SpecError, match=message):
        _load(tmp_path, text)


def test_a_metric_is_kept_when_some_pair_can_give_it(tmp_path):
    text = """
datasets: [breast_cancer, synthetic_logistic]
models: [logreg, mlp]
algorithms: [{name: nonprivate}]
metrics: [accuracy, estimation_error]
figures: [{name: e, metric: estimation_error, datasets: [synthetic_logistic]}]
"""
    assert _load(tmp_path, text).metrics == ("accuracy", "estimation_error")
    with pytest.raises(SpecError, match=r"figures\[0\]\.metric: estimation_error"):
        _load(tmp_path, text.replace("datasets: [synthetic_logistic]}", "datasets: [breast_cancer]}"))


def test_every_shipped_experiment_still_loads():
    from tests.conftest import REPO

    for path in sorted((REPO / "experiments").glob("*.yaml")):
        for profile in ("full", "ci"):
            spec.load(path, profile=profile)


def test_delta_expressions_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"unknown name 'nn' \(only n is allowed\)"):
        evaluate_delta("1/nn", 100)
    with pytest.raises(ValueError, match="divides by zero at n = 409"):
        evaluate_delta("1/(n-409)**2", 409)
    with pytest.raises(ValueError, match=r"foo\(\.\.\.\) is not allowed"):
        evaluate_delta("foo(n)", 10)
    assert evaluate_delta("1/n**1.1", 100) == pytest.approx(100 ** -1.1)


def test_delta_failing_at_a_datasets_size_stops_before_any_cell(tmp_path, data_dir):
    exp = _load(tmp_path, BASE.replace("{name: nonprivate}", "{name: dpsgd}") + "epsilons: [1]\n"
                "delta: 1/(n-409)**2\n")
    with pytest.raises(SpecError, match=r"delta: .*divides by zero at n = 409 \(dataset breast_cancer has n = 409"):
        pipeline.preflight(exp, str(data_dir))


def test_delta_is_judged_at_the_real_training_size_not_a_probe(tmp_path, data_dir):
    private = BASE.replace("{name: nonprivate}", "{name: dpsgd}") + "epsilons: [1]\n"
    fine = _load(tmp_path, private + "delta: 1/(n-400)\n")  # negative at n = 100, 1/9 at breast cancer's 409
    assert pipeline.preflight(fine, str(data_dir)) == frozenset()
    for expression, message in [("1/(n-500)", r"delta: must be > 0 \('1/\(n-500\)' for dataset breast_cancer, n = 409 "
                                               r"training rows\), got -0.010989"),
                                ("n", r"delta: must be < 1 \('n' for dataset breast_cancer, n = 409 training rows\), "
                                      r"got 409")]:
        with pytest.raises(SpecError, match=message):
            pipeline.preflight(_load(tmp_path, private + f"delta: {expression}\n"), str(data_dir))


@pytest.mark.parametrize("delta, message", [
    ("4/2", r"^delta: must be < 1, got 2\.0$"),
    ("1/nn", r"^delta: delta expression '1/nn': unknown name 'nn' \(only n is allowed\)$"),
    ("1/0", r"^delta: delta expression '1/0' divides by zero$"),
    ("n.real", r"^delta: delta expression 'n.real': attribute is not allowed"),
])
def test_delta_mistakes_that_need_no_data_are_refused_at_load(tmp_path, delta, message):
    with pytest.raises(SpecError, match=message):
        _load(tmp_path, BASE + f"delta: {delta}\n")


def test_delta_with_no_real_value_says_so():
    with pytest.raises(ValueError, match=r"'\(n-500\)\*\*0.5' is not a real number at n = 409"):
        evaluate_delta("(n-500)**0.5", 409)
    with pytest.raises(ValueError, match=r"cannot evaluate delta expression 'log\(n-500\)' at n = 409: math domain"):
        evaluate_delta("log(n-500)", 409)


def test_audit_rows_beyond_the_data_stop_the_run_before_any_work(tmp_path, data_dir):
    path = tmp_path / "a.yaml"
    path.write_text("audits: {dataset: breast_cancer, rows: 100000, trials: 20, epsilons: [1], "
                    "algorithms: [{name: dpsgd}]}\n")
    with pytest.raises(SpecError, match=r"^audits\.rows: 100000 base rows asked for, but the training split of "
                                        r"breast_cancer has 409"):
        pipeline.preflight(spec.load(path), str(data_dir))
    out = CliRunner().invoke(main, ["run", str(path), "--data", str(data_dir), "--results", str(tmp_path / "r"),
                                    "--no-progress"])
    assert out.exit_code == 2 and out.stderr.startswith("error: audits.rows: 100000 base rows")
    assert not (tmp_path / "r" / ".cache" / "audits").exists()


def test_grids_above_the_limit_need_allow_large(tmp_path, monkeypatch):
    exp = _load(tmp_path, BASE + "seeds: 7\n")
    assert exp.n_cells() == len(exp.cells()) == 7
    monkeypatch.setattr(spec, "MAX_CELLS", 5)
    with pytest.raises(SpecError, match=r"7 cells \(x\[full\] 7\) is more than 5; .*--allow-large"):
        spec.check_size([exp], allow_large=False)
    assert spec.check_size([exp], allow_large=True) == 7


def test_n_cells_counts_restrictions_and_grids(tmp_path):
    exp = _load(tmp_path, """
datasets: [breast_cancer, iris]
models: [logreg, mlp]
algorithms:
  - {name: nonprivate}
  - {name: dpsgd, params: {lr: [0.1, 1.0]}, models: [logreg]}
epsilons: [0.5, 1, 2]
seeds: 3
""")
    assert exp.n_cells() == len(exp.cells()) == (2 * 2 + 2 * 2 * 3) * 3


def test_a_huge_grid_is_refused_at_once_from_the_cli(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(BASE + "seeds: 60000\n")
    out = CliRunner().invoke(main, ["run", str(path), "--results", str(tmp_path / "r")])
    assert out.exit_code == 2 and "60,000 cells" in out.stderr and "--allow-large" in out.stderr
    assert not (tmp_path / "r").exists()
