"""dpbench's own check of a "valid" (dpbench.privacy.claim_check): held at run time to every fit
(a plugin's too) and at read time to every stored record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpbench.analysis import curves
from dpbench.core.ledger import Ledger
from dpbench.privacy import claim_check

PLUGIN = Path(__file__).resolve().parents[1] / "audit" / "buggy_dpsgd.py"


def _ledger(**overrides) -> Ledger:
    fields = dict(private=True, mechanism="m", claim="valid", target_epsilon=1.0, delta=1e-5,
                  epsilon_spent={"rdp": 0.98, "pld": 0.9})
    fields.update(overrides)
    return Ledger(**fields)


@pytest.mark.parametrize("overrides, says", [
    ({"epsilon_spent": {"rdp": 0.9, "pld": math.inf}}, "pld epsilon is infinite"),
    ({"epsilon_spent": {"rdp": 3.0, "pld": 2.9}}, "epsilon spent 2.9 exceeds the target 1"),
    ({"epsilon_spent": {}}, "no epsilon spent is stated"),
    ({"delta": 1e-3}, "its epsilon is of delta 0.001"),
    ({"target_epsilon": 2.0}, "the ledger's target 2 is not the run's 1"),
])
def test_a_valid_the_numbers_do_not_hold_becomes_paper_only_with_the_reason(overrides, says):
    checked = claim_check.checked(_ledger(**overrides), 1.0, 1e-5)
    assert checked.claim == "paper-only" and says in checked.claim_reason


def test_a_valid_the_numbers_hold_and_other_claims_are_left_alone():
    assert claim_check.checked(_ledger(), 1.0, 1e-5).claim == "valid"
    assert claim_check.checked(_ledger(epsilon_spent={"gdp": 1.0 + 1e-12}), 1.0, 1e-5).claim == "valid"
    none = _ledger(claim="none", epsilon_spent={"rdp": math.inf})
    assert claim_check.checked(none, 1.0, 1e-5) is none


def test_the_runs_table_checks_every_stored_record():
    stored = _ledger(epsilon_spent={"rdp": 3.0}).as_dict()  # stored "valid" with 3x the target
    record = {"status": "ok", "key": "k", "label": "x", "algorithm": "x", "dataset": "d", "dataset_label": "d",
              "model": "logreg", "model_label": "logreg", "epsilon": 1.0, "delta": 1e-5, "rep": 0, "problem": "p",
              "n_train": 10, "n_test": 5, "n_params": 3, "lstar": 0.1, "fit_seconds": 0.0, "params": {},
              "metrics": {"train_loss": 0.2, "test_loss": 0.2, "val_loss": 0.2, "accuracy": 0.9,
                          "val_accuracy": 0.9}, "privacy": stored}
    table = curves.runs_table([record, {**record, "key": "k2", "privacy": _ledger().as_dict()}])
    assert table.set_index("key")["dp_claim"].to_dict() == {"k": "paper-only", "k2": "valid"}
    assert json.loads(table.set_index("key").loc["k", "privacy"])["claim"] == "valid"  # the fit's word, kept


def test_the_runner_stores_a_plugin_that_overstates_as_paper_only(tmp_path, data_dir):
    from dpbench.cli.main import main

    spec = tmp_path / "overstated.yaml"
    spec.write_text(f"""
name: overstated
seed: 0
seeds: 1
datasets: [breast_cancer]
models: [logreg]
algorithms:
  - plugin: {PLUGIN}:fit
    label: honest
    params: {{bug: honest}}
  - plugin: {PLUGIN}:fit
    label: overstated
    params: {{bug: ledger_eps}}
epsilons: [1.0]
delta: 1.0e-5
metrics: [accuracy]
""")
    out = CliRunner().invoke(main, ["run", str(spec), "--results", str(tmp_path / "results"), "--data",
                                    str(data_dir), "--no-progress"])
    assert out.exit_code == 0, out.output
    cells = [json.loads(p.read_text()) for p in (tmp_path / "results" / "overstated" / "cells").glob("*.json")]
    claims = {c["label"]: (c["privacy"]["claim"], c["privacy"].get("claim_reason", "")) for c in cells}
    assert claims["honest"][0] == "valid"
    assert claims["overstated"][0] == "paper-only" and "exceeds the target 1" in claims["overstated"][1]
