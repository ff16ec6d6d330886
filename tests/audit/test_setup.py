"""The `audits:` block of an experiment: validation, expansion, and what `dpbench run` / `check` do with it."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from dpbench.cli.main import main
from dpbench.core.errors import SpecError
from dpbench.spec import experiment as spec

AUDIT_SPEC = """
name: tinyaudit
audits:
  dataset: breast_cancer
  rows: 120
  trials: 40
  epsilons: [1, 2]
  algorithms:
    - {name: nonprivate, label: non-private}
    - {name: dpsgd, label: DP-SGD, params: {epochs: 1, batch_size: 32}}
    - {name: pidp_sgd, label: PIDP 4.4, canary: pidp_constant, epsilons: [1]}
"""


def _load(text: str, tmp_path, name: str = "tinyaudit.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return spec.load(path), path


def test_audits_expand_per_epsilon_and_keep_only_given_params(tmp_path):
    exp, _ = _load(AUDIT_SPEC, tmp_path)
    assert exp.cells() == []  # an audit-only experiment has no grid
    labels = [(a.label, a.epsilon) for a in exp.audits]
    assert labels == [("non-private", None), ("DP-SGD", 1.0), ("DP-SGD", 2.0), ("PIDP 4.4", 1.0)]
    dpsgd = exp.audits[1]
    assert dict(dpsgd.params) == {"epochs": 1.0, "batch_size": 32.0} and dpsgd.rows == 120
    pidp = exp.audits[3]
    assert pidp.dataset is None and pidp.rows is None and pidp.params == ()  # the recipe's own data and params


def test_threat_threshold_and_one_run_keys(tmp_path):
    text = AUDIT_SPEC.replace("  algorithms:", "  one_run: {canaries: 300}\n  algorithms:").replace(
        "{name: dpsgd, label: DP-SGD, params: {epochs: 1, batch_size: 32}}",
        "{name: dpsgd, label: DP-SGD, params: {epochs: 1, batch_size: 32}, threat: all_updates, "
        "canary: gradient_canary, threshold: empirical}").replace(
        "{name: nonprivate, label: non-private}", "{name: nonprivate, label: non-private, one_run: false}")
    exp, _ = _load(text, tmp_path)
    runs = [(a.label, a.epsilon, a.canaries) for a in exp.audits]
    assert runs == [("non-private", None, None), ("DP-SGD", 1.0, None), ("DP-SGD", 1.0, 300), ("DP-SGD", 2.0, None),
                    ("DP-SGD", 2.0, 300), ("PIDP 4.4", 1.0, None), ("PIDP 4.4", 1.0, 300)]
    dpsgd = exp.audits[1]
    assert dpsgd.threat == "all_updates" and dpsgd.threshold_rule == "empirical" and dpsgd.guesses is None
    assert exp.audits[5].threshold_rule == "empirical" and exp.audits[5].threat == "final_model"
    assert len({a.key for a in exp.audits}) == len(exp.audits)  # a one-run audit is keyed apart from its multi-run one
    for edit, message in ((("one_run: {canaries: 300}", "one_run: {canaries: 1}"), "audits.one_run.canaries: must be"),
                          (("one_run: {canaries: 300}", "one_run: {m: 3}"), "audits.one_run.m: unknown key"),
                          (("threat: all_updates", "threat: all_steps"), "audits.algorithms[1]: threat: must be one"),
                          (("canary: gradient_canary", "canary: input_shared_intercept"),
                           "audits.algorithms[1]: canary: the all-updates statistic")):
        with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
            _load(text.replace(*edit), tmp_path)


@pytest.mark.parametrize("edit, message", [
    (("canary: pidp_constant", "canary: nope"), "audits.algorithms[2].canary: unknown canary recipe 'nope'"),
    (("params: {epochs: 1, batch_size: 32}", "params: {epochs: [1, 2]}"), "audits.algorithms[1].params: an audit"),
    (("params: {epochs: 1, batch_size: 32}", "params: {epoch: 1}"), "audits.algorithms[1].params.epoch: unknown"),
    (("name: dpsgd", "name: dpsgdd"), "audits.algorithms[1].name: unknown algorithm 'dpsgdd'"),
    (("trials: 40", "trials: 5"), "audits.algorithms[0].trials: must be >= 20"),
    (("rows: 120", "rows: many"), "audits.rows: must be an integer"),
])
def test_bad_audit_blocks_are_one_line_errors_with_the_path(tmp_path, edit, message):
    with pytest.raises(SpecError) as err:
        _load(AUDIT_SPEC.replace(*edit), tmp_path)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_run_writes_the_audit_table_and_figure_and_check_compares_the_bounds(tmp_path, data_dir):
    _, path = _load(AUDIT_SPEC, tmp_path)
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", str(path), "--results", str(results), "--data", str(data_dir),
                                    "--backend", "sequential", "--no-progress"])
    assert out.exit_code == 0, out.output
    folder = results / "tinyaudit"
    table = pd.read_csv(folder / "audits.csv")
    assert len(table) == 4 and (folder / "audit.png").stat().st_size > 0 and (folder / "audit.pdf").is_file()
    assert not (folder / "curves.csv").exists()  # no grid, no curves table
    row = table.set_index("label")
    assert row.loc["non-private", "epsilon_lower_bound"] == pytest.approx(row.loc["non-private", "ceiling"])
    assert row.loc["PIDP 4.4", "broken"] and row.loc["PIDP 4.4", "claim"] == "paper-only"
    assert (row.loc["DP-SGD", "epsilon_lower_bound"] <= row.loc["DP-SGD", "claimed_epsilon"]).all()
    assert "audits (lower bounds" in out.output

    args = ["check", str(path), "--results", str(results), "--data", str(data_dir), "--backend", "sequential",
            "--no-progress"]
    assert CliRunner().invoke(main, [*args, "--update", "--no-envelope"]).exit_code == 0
    reference = pd.read_csv(results / "tinyaudit" / "reference-full.csv")
    bounds = reference[reference["metric"] == "epsilon_lower_bound"]
    assert len(bounds) == 4 and set(reference["metric"]) <= {"epsilon_lower_bound", "epsilon_estimate"}
    estimated = set(reference.loc[reference["metric"] == "epsilon_estimate", "label"])
    assert "DP-SGD" in estimated and "PIDP 4.4" not in estimated  # perfect separation has no finite estimate
    assert CliRunner().invoke(main, args).exit_code == 0
    reference.loc[reference["label"] == "DP-SGD", "value"] = 3.0  # as if DP-SGD had leaked before
    reference.to_csv(results / "tinyaudit" / "reference-full.csv", index=False)
    moved = CliRunner().invoke(main, args)
    assert moved.exit_code == 1 and "DRIFT" in moved.output and "epsilon_lower_bound" in moved.output
