"""Experiment YAML: grid expansion, profiles, delta expressions, and one-line errors (exit 2)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dpbench.cli.main import main
from dpbench.core.errors import SpecError
from dpbench.core.keys import evaluate_delta
from dpbench.spec import experiment as spec


def test_grid_expansion_and_profile(tiny_spec):
    exp = spec.load(tiny_spec)
    cells = exp.cells()
    # nonprivate: 1 dataset x 1 model x 2 seeds; dpsgd: 2 lrs x 2 eps x 2 seeds
    assert sum(c.algorithm == "nonprivate" for c in cells) == 2
    assert sum(c.algorithm == "dpsgd" for c in cells) == 8
    assert len({c.key for c in cells}) == len(cells)
    assert all(c.epsilon is None for c in cells if c.algorithm == "nonprivate")
    ci = spec.load(tiny_spec, profile="ci")
    assert ci.seeds == (0,) and ci.epsilons == (1.0,) and len(ci.cells()) == 1 + 2
    # defaults are filled into every cell's hyperparameters, so the key reflects what runs
    params = dict(next(c for c in cells if c.algorithm == "dpsgd").params)
    assert params["clip_norm"] == 1.0 and params["calibration"] == "rdp"


def test_cell_keys_ignore_labels_but_not_values(tiny_spec):
    a = spec.load(tiny_spec).cells()
    b = spec.load(tiny_spec).cells()
    assert [c.key for c in a] == [c.key for c in b]
    text = tiny_spec.read_text().replace("lr: [0.5, 1.0]", "lr: [0.5, 1.5]")
    tiny_spec.write_text(text)
    c = spec.load(tiny_spec).cells()
    assert len({x.key for x in a} & {x.key for x in c}) == len(a) - 4  # the lr=1.0 cells changed


def test_yaml11_exponent_floats_are_numbers(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text("datasets: [iris]\nmodels: [{name: logreg, options: {l2: 1e-3}}]\n"
                    "algorithms: [dpsgd]\nepsilons: [1e-2, 1]\ndelta: 1e-5\n")
    exp = spec.load(path)
    assert exp.epsilons == (0.01, 1.0) and exp.delta == 1e-5
    assert dict(exp.models[0].options) == {"l2": 1e-3}


@pytest.mark.parametrize("expr,n,expected", [("1/n", 1000, 1e-3), ("1/n**2", 100, 1e-4), (1e-5, 7, 1e-5),
                                             ("1/(n*log(n))", 100, 1 / (100 * 4.605170185988092))])
def test_delta_expressions(expr, n, expected):
    assert evaluate_delta(expr, n) == pytest.approx(expected)


@pytest.mark.parametrize("expr", ["__import__('os')", "n.real", "1/", "lambda: 1"])
def test_delta_rejects_anything_but_arithmetic(expr):
    with pytest.raises(ValueError):
        evaluate_delta(expr, 10)


BAD = {
    "unknown algorithm": ("algorithms:\n  - name: dpsgd\n  - name: magic\n", "algorithms[1].name: unknown algorithm 'magic'"),
    "negative epsilon": ("epsilons: [0.5, -1]\n", "epsilons[1]: must be > 0"),
    "negative lr": ("algorithms:\n  - name: dpsgd\n    params: {lr: -1}\n", "algorithms[0].params.lr: must be > 0, got -1"),
    "lr wrong type": ("algorithms:\n  - name: dpsgd\n    params: {lr: fast}\n", "algorithms[0].params.lr: must be a number"),
    "unknown hyperparameter": ("algorithms:\n  - name: dpsgd\n    params: {learning_rate: 1}\n",
                               "algorithms[0].params.learning_rate: unknown hyperparameter"),
    "seeds wrong type": ("seeds: three\n", "seeds: must be an integer"),
    "epsilons wrong type": ("epsilons: abc\n", "epsilons: must be a non-empty list"),
    "unknown dataset": ("datasets: [mnist]\n", "datasets[0].name: unknown dataset 'mnist'"),
    "unknown model": ("models: [cnn]\n", "models[0].name: unknown model 'cnn'"),
    "bad delta": ("delta: 2\n", "delta: must be < 1, got 2"),
    "unknown key": ("epsilon: [1]\n", "epsilon: unknown key"),
    "bad dataset option": ("datasets: [{name: adult, options: {n: -5}}]\n", "datasets[0].options.n: must be >= 1"),
}

BASE = {"datasets": "datasets: [breast_cancer]\n", "models": "models: [logreg]\n",
        "algorithms": "algorithms: [dpsgd]\n", "epsilons": "epsilons: [1.0]\n"}


def _spec_with(override: str) -> str:
    key = override.split(":")[0]
    parts = dict(BASE)
    parts[key] = override  # replaces a base key, or is appended (once: a repeated key is an error)
    return "".join(parts.values())


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_inputs_give_one_line_and_exit_2(case, tmp_path):
    override, message = BAD[case]
    path = tmp_path / "bad.yaml"
    path.write_text(_spec_with(override))
    result = CliRunner().invoke(main, ["run", str(path), "--results", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_missing_file_and_broken_yaml_and_unknown_profile(tmp_path, tiny_spec):
    runner = CliRunner()
    missing = runner.invoke(main, ["run", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "experiment file not found" in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("datasets: [adult\nmodels: x\n")
    out = runner.invoke(main, ["run", str(broken)])
    assert out.exit_code == 2 and "not valid YAML (line" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    prof = runner.invoke(main, ["run", str(tiny_spec), "--profile", "nightly"])
    assert prof.exit_code == 2 and "unknown profile 'nightly'" in prof.stderr


def test_spec_error_is_raised_for_non_mapping():
    with pytest.raises(SpecError, match="top level must be a mapping"):
        spec.from_dict([1, 2])


def test_profile_merge_replaces_lists_and_merges_dicts():
    raw = {"datasets": ["iris"], "models": [{"name": "logreg", "options": {"l2": 0.1}}], "epsilons": [1, 2],
           "algorithms": ["dpsgd"], "profiles": {"ci": {"epsilons": [3], "description": "small"}}}
    merged = spec.apply_profile(raw, "ci")
    assert merged["epsilons"] == [3] and merged["description"] == "small"
    assert raw["epsilons"] == [1, 2]  # the original is not modified
    assert spec._merge({"a": {"x": 1, "y": 2}}, {"a": {"y": 3}}) == {"a": {"x": 1, "y": 3}}


def test_algorithm_restricted_to_some_models_and_datasets(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("datasets: [iris, breast_cancer]\nmodels: [logreg, mlp]\nepsilons: [1]\n"
                    "algorithms:\n  - {name: nonprivate, models: [logreg]}\n"
                    "  - {name: dpsgd, datasets: [iris], models: mlp}\n")
    cells = spec.load(path).cells()
    assert {(c.algorithm, c.dataset, c.model) for c in cells} == {
        ("nonprivate", "iris", "logreg"), ("nonprivate", "breast_cancer", "logreg"), ("dpsgd", "iris", "mlp")}
    path.write_text("datasets: [iris]\nmodels: [logreg]\nepsilons: [1]\nalgorithms:\n  - {name: dpsgd, models: [cnn]}\n")
    with pytest.raises(SpecError, match=r"algorithms\[0\].models\[0\]: must be one of .* \(a label of this experiment\); got 'cnn'"):
        spec.load(path)


def test_shared_label_needs_disjoint_panels_and_optimum_budget(tmp_path):
    path = tmp_path / "l.yaml"
    path.write_text("datasets: [iris]\nmodels: [logreg, mlp]\nepsilons: [1]\noptimum: {maxiter: 50}\n"
                    "algorithms:\n  - {name: nonprivate, label: np, models: [logreg]}\n"
                    "  - {name: nonprivate, label: np, models: [mlp], params: {method: sgd}}\n")
    exp = spec.load(path)
    assert dict(exp.optimum) == {"maxiter": 50, "restarts": 2}
    assert {c.label for c in exp.cells()} == {"np"} and len(exp.cells()) == 2
    path.write_text("datasets: [iris]\nmodels: [logreg]\nepsilons: [1]\n"
                    "algorithms:\n  - {name: nonprivate, label: np}\n  - {name: dpsgd, label: np}\n")
    with pytest.raises(SpecError, match=r"algorithms\[1\].label: 'np' is also the label of algorithms\[0\]"):
        spec.load(path)
    path.write_text("datasets: [iris]\nmodels: [logreg]\nepsilons: [1]\nalgorithms: [dpsgd]\noptimum: {maxiter: 0}\n")
    with pytest.raises(SpecError, match="optimum.maxiter: must be >= 1"):
        spec.load(path)


def test_selection_per_metric(tmp_path):
    path = tmp_path / "s.yaml"
    base = "datasets: [iris]\nmodels: [logreg]\nepsilons: [1]\nalgorithms: [dpsgd]\nmetrics: [accuracy, optimality_gap]\n"
    path.write_text(base)
    assert spec.load(path).selection is None  # each metric by its own validation score
    path.write_text(base + "selection: {optimality_gap: val_accuracy}\n")
    assert spec.load(path).selection == {"optimality_gap": "val_accuracy"}
    path.write_text(base + "selection: {test_loss: val_loss}\n")
    with pytest.raises(SpecError, match="selection.test_loss: not among this experiment's metrics"):
        spec.load(path)
    path.write_text(base + "selection: val_f1\n")
    with pytest.raises(SpecError, match="selection: must be one of val_accuracy, val_loss"):
        spec.load(path)


def test_sweep_expands_one_dataset_into_a_panel(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("datasets:\n  - {name: iris, label: flowers, sweep: {n: [60, 120]}}\n  - breast_cancer\n"
                    "models: [logreg]\nepsilons: [1]\n"
                    "algorithms:\n  - {name: dpsgd, datasets: [flowers]}\n"
                    "figures:\n  - {name: over-n, kind: metric_over_n, metric: accuracy}\n")
    exp = spec.load(path)
    assert [(d.label, d.panel, dict(d.options)) for d in exp.datasets] == [
        ("flowers n=60", "flowers", {"n": 60}), ("flowers n=120", "flowers", {"n": 120}),
        ("breast_cancer", "breast_cancer", {})]
    cells = exp.cells()
    assert sorted(dict(c.dataset_options)["n"] for c in cells) == [60, 120]  # restriction by panel label
    assert {c.dataset_panel for c in cells} == {"flowers"}
    assert exp.figures[0].kind == "metric_over_n"


@pytest.mark.parametrize("entry, message", [
    ("{name: iris, sweep: {n: [60]}}", "datasets[0].sweep.n: must be a list of at least two values"),
    ("{name: iris, sweep: {l2: [1, 2]}}", "datasets[0].sweep.l2: only n, d can be swept"),
    ("{name: iris, options: {n: 50}, sweep: {n: [60, 70]}}", "datasets[0].sweep.n: also set in options"),
    ("{name: iris, sweep: {n: [60, -1]}}", "datasets[0].sweep.n[1].options.n: must be >= 1"),
    ("{name: iris, optional: maybe}", "datasets[0].optional: must be true or false"),
])
def test_bad_sweeps_are_one_line_errors(tmp_path, entry, message):
    path = tmp_path / "s.yaml"
    path.write_text(f"datasets:\n  - {entry}\nmodels: [logreg]\nepsilons: [1]\nalgorithms: [dpsgd]\n")
    with pytest.raises(SpecError) as err:
        spec.load(path)
    assert message in str(err.value)


def test_reference_line_only_on_figures_that_declare_it(tmp_path):
    path = tmp_path / "f.yaml"
    base = "datasets: [iris]\nmodels: [logreg]\nepsilons: [1]\nalgorithms: [dpsgd]\nmetrics: [accuracy]\n"
    path.write_text(base + "figures:\n  - {metric: accuracy, kind: metric_over_iterations, reference: dpsco_rate}\n")
    with pytest.raises(SpecError, match=r"figures\[0\]\.reference: unknown key; allowed: .* \(kind "
                                        r"metric_over_iterations has no options of its own\)"):
        spec.load(path)
    path.write_text(base + "figures:\n  - {metric: accuracy, kind: metric_over_n, reference: magic}\n")
    with pytest.raises(SpecError, match=r"figures\[0\]\.reference: must be one of dpsco_rate, dpsgd_rate, "
                                        r"heavy_tailed_rate; got 'magic'"):
        spec.load(path)
    path.write_text(base + "figures:\n  - {metric: accuracy, reference: dpsgd_rate, baseline: majority}\n")
    assert dict(spec.load(path).figures[0].options) == {"reference": "dpsgd_rate", "baseline": "majority"}


def test_optional_dataset_is_skipped_with_a_notice_when_absent(tmp_path, data_dir):
    from dpbench.core.errors import DataError
    from dpbench.experiment import pipeline

    path = tmp_path / "o.yaml"
    path.write_text("datasets:\n  - {name: iris}\n  - {name: adult, optional: true}\nmodels: [logreg]\n"
                    "epsilons: [1]\nalgorithms: [nonprivate]\n")
    exp = spec.load(path)
    empty = tmp_path / "nodata"
    (empty / "iris").mkdir(parents=True)
    (empty / "iris" / "iris.data").write_bytes((data_dir / "iris" / "iris.data").read_bytes())
    notes = []
    skipped = pipeline.preflight(exp, str(empty), notify=notes.append)
    assert skipped == {"adult"} and len(notes) == 1 and "skipping optional dataset adult" in notes[0]
    assert {c.dataset for c in exp.cells(skipped)} == {"iris"}
    path.write_text(path.read_text().replace("optional: true", "optional: false"))
    with pytest.raises(DataError):
        pipeline.preflight(spec.load(path), str(empty), notify=notes.append)
