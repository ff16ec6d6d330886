"""dpbench's own check of a "valid" (dpbench.privacy.claim_check): held at run time to every fit
(a plugin's too) and at read time to every stored record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dpbench.analysis import curves
from dpbench.core.ledger import Ledger
from dpbench.privacy import accounting, claim_check, events

PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "red_team" / "buggy_dpsgd.py"


def _ledger(**overrides) -> Ledger:
    fields = dict(private=True, mechanism="m", claim="valid", target_epsilon=1.0, delta=1e-5,
                  epsilon_spent={"rdp": 0.98, "pld": 0.9}, proof="a theorem")
    fields.update(overrides)
    return Ledger(**fields)


def _gaussian_ledger(z: float, q: float, steps: int, **overrides) -> Ledger:
    """The ledger of DP-SGD as the built-ins write it, its numbers and its event from (z, q, T)."""
    fields = dict(private=True, mechanism="DP-SGD", claim="valid", target_epsilon=1.0, delta=1e-5,
                  epsilon_spent=accounting.dpsgd_epsilon_report(z, q, steps, 1e-5),
                  event=events.dpsgd_event_json(z, q, steps),
                  details={"noise_multiplier": z, "sampling": {"rate": q}, "steps": steps})
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


def test_epsilon_is_recomputed_from_the_stated_event_not_taken_from_the_ledger():
    z = accounting.calibrate_dpsgd_noise(1.0, 1e-5, 0.02, 200)
    honest = claim_check.checked(_gaussian_ledger(z, 0.02, 200), 1.0, 1e-5)
    assert honest.claim == "valid" and claim_check.basis(honest) == "recomputed"
    assert honest.epsilon_recomputed == pytest.approx(accounting.dpsgd_epsilon_report(z, 0.02, 200, 1e-5))
    # the ledger states 200 steps and the epsilon of 200, its event says 800 were released
    lying = _gaussian_ledger(z, 0.02, 200, event=events.dpsgd_event_json(z, 0.02, 800))
    checked = claim_check.checked(lying, 1.0, 1e-5)
    assert checked.claim == "paper-only" and "its DpEvent has steps 800, its ledger 200" in checked.claim_reason
    assert "the epsilon recomputed from its DpEvent" in checked.claim_reason
    # event and numbers agree, half the noise: the recomputed epsilon exceeds the target
    half = _gaussian_ledger(z / 2, 0.02, 200, epsilon_spent={"rdp": 0.99})
    assert "exceeds the target 1" in claim_check.checked(half, 1.0, 1e-5).claim_reason
    # a fit cannot preset what dpbench recomputes
    preset = _gaussian_ledger(z / 2, 0.02, 200, epsilon_spent={"rdp": 0.99}, epsilon_recomputed={"pld": 0.5})
    assert claim_check.checked(preset, 1.0, 1e-5).epsilon_recomputed["pld"] > 1.0


def test_a_valid_states_its_mechanism_or_its_theorem():
    bare = _ledger(proof=None)
    checked = claim_check.checked(bare, 1.0, 1e-5)
    assert checked.claim == "paper-only" and "neither its mechanism (a DpEvent) nor the theorem" in checked.claim_reason
    theorem = claim_check.checked(_ledger(proof="Smith 2011, Theorem 1"), 1.0, 1e-5)
    assert theorem.claim == "valid" and claim_check.basis(theorem) == "by the theorem in Smith 2011, Theorem 1; not recomputed"
    broken = claim_check.checked(_ledger(proof=None, event={"type": "GaussianDpEvent"}), 1.0, 1e-5)
    assert broken.claim == "paper-only" and "its DpEvent cannot be read" in broken.claim_reason
    # a record stored before ledgers stated mechanisms keeps its claim, said not recomputed
    assert claim_check.checked_claim(bare.as_dict(), 1.0, 1e-5) == "valid"
    assert claim_check.stored_basis(bare.as_dict()) == "not recomputed"


def test_scaling_with_the_datas_own_ranges_is_said_on_the_claim():
    from dpbench.run.cells import with_public

    ledger = _ledger(adjacency="add/remove-one")
    scaled = with_public(ledger, 100, {"kind": "data-dependent", "source": "min/max of the training split",
                                       "columns": ["age"]})
    assert scaled.public["feature_bounds"].startswith(claim_check.DATA_DEPENDENT) and "age" in \
        scaled.public["feature_bounds"]
    assert scaled.public["n"].startswith("n = 100 records")
    assert with_public(_ledger(adjacency="replace-one"), 100, None).public == {}  # n public only under add/remove
    assert with_public(_ledger(claim="none"), 100, {"kind": "data-dependent"}).public == {}
    record = {"status": "ok", "key": "k", "label": "x", "algorithm": "x", "dataset": "adult", "dataset_label": "d",
              "model": "logreg", "model_label": "logreg", "epsilon": 1.0, "delta": 1e-5, "rep": 0, "problem": "p",
              "n_train": 10, "n_test": 5, "n_params": 3, "lstar": 0.1, "fit_seconds": 0.0, "params": {},
              "metrics": {"train_loss": 0.2, "test_loss": 0.2, "val_loss": 0.2, "accuracy": 0.9,
                          "val_accuracy": 0.9}, "privacy": scaled.as_dict()}
    declared = with_public(ledger, 100, {"kind": "declared", "source": "a schema", "columns": []})
    table = curves.runs_table([record, {**record, "key": "k2", "privacy": declared.as_dict()},
                               {**record, "key": "k3", "privacy": ledger.as_dict()}])  # k3: stored before; Adult
    assert table.set_index("key")["scaling_data_dependent"].to_dict() == {"k": True, "k2": False, "k3": True}


def test_the_runs_table_checks_every_stored_record():
    stored = _ledger(epsilon_spent={"rdp": 3.0}).as_dict()  # stored "valid" with 3x the target
    record = {"status": "ok", "key": "k", "label": "x", "algorithm": "x", "dataset": "d", "dataset_label": "d",
              "model": "logreg", "model_label": "logreg", "epsilon": 1.0, "delta": 1e-5, "rep": 0, "problem": "p",
              "n_train": 10, "n_test": 5, "n_params": 3, "lstar": 0.1, "fit_seconds": 0.0, "params": {},
              "metrics": {"train_loss": 0.2, "test_loss": 0.2, "val_loss": 0.2, "accuracy": 0.9,
                          "val_accuracy": 0.9}, "privacy": stored}
    table = curves.runs_table([record, {**record, "key": "k2", "privacy": _ledger().as_dict()}])
    assert table.set_index("key")["dp_claim"].to_dict() == {"k": "paper-only", "k2": "valid"}
    # the reason is named in the runs table and carried into the curve point (first reason, how many runs)
    assert table.set_index("key").loc["k", "dp_check"] == \
        "dpbench's ledger check: the epsilon spent 3 exceeds the target 1"
    table["selected_by"], table["candidates"], table["curve_claim"], table["eps_end_to_end"] = "x", 1, "c", np.nan
    point = curves.curves_table({"accuracy": table})
    assert point["dp_check"].iloc[0] == "dpbench's ledger check: the epsilon spent 3 exceeds the target 1 (1 of 2 runs)"
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
    assert claims["honest"][0] == "declared"  # passed every check; the plugin owns its loop (run.plugin_records)
    honest = next(c["privacy"] for c in cells if c["label"] == "honest")
    assert honest["epsilon_recomputed"]["rdp"] <= 1.0 and honest["event"]["type"] == "SelfComposedDpEvent"
    # what the claim treats as public: n (add/remove-one), and Breast Cancer's documented feature range
    assert honest["public"]["n"].startswith("n = 409 records is treated as public")
    assert honest["public"]["feature_bounds"].startswith("declared public: UCI documentation")
    assert claims["overstated"][0] == "paper-only" and "exceeds the target 1" in claims["overstated"][1]
