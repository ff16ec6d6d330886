"""The label the runner stores for a plugin (dpbench/run/plugin_records.py, release_check.composed_steps):
the bugs of examples/red_team/buggy_owned.py that no black-box check sees in the run itself are `declared`,
never `valid`, and the rows they write are not stored; the example on the privatiser path is `valid`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpbench.algorithms.base import REGISTRY
from dpbench.run import plugins
from dpbench.run.cells import CellContext, run_cell
from dpbench.spec.experiment import load
from tests.conftest import REPO

OWNED = REPO / "examples" / "red_team" / "buggy_owned.py"
EXAMPLE = REPO / "examples" / "my_algorithm" / "my_method.py"


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    monkeypatch.setattr(plugins, "_IMPORTED", dict(plugins._IMPORTED))


def test_owned_loops_are_declared_and_the_privatised_example_valid(tmp_path, data_dir):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
name: owned
seed: 0
seeds: 1
datasets: [breast_cancer]
models: [logreg]
algorithms:
  - {{plugin: {OWNED}:quiet}}
  - {{plugin: {OWNED}:leak}}
  - {{plugin: {OWNED}:shifted}}
  - {{plugin: {EXAMPLE}:fit_dpadam}}
epsilons: [1.0]
delta: 1.0e-5
metrics: [accuracy]
""")
    context = CellContext(data_dir=str(data_dir), cache_dir=str(tmp_path / "cache"))
    records = {c.algorithm: run_cell(c, context) for c in load(str(spec)).cells()}
    quiet = records["quiet_dpsgd"]["privacy"]
    assert quiet["claim"] == "declared" and "composes 26 noisy steps and the algorithm reported none" in \
        quiet["claim_reason"]
    leak = records["leaky_dpsgd"]
    assert leak["privacy"]["claim"] == "declared" and leak["privacy"]["dropped"] == "rows, clean_gradient, trace rows"
    assert "rows" not in json.dumps(leak["trace"]) and len(json.dumps(leak)) < 20_000
    shifted = records["shifted_dpsgd"]["privacy"]
    assert shifted["claim"] == "declared" and shifted["claim_reason"].startswith("declared by the plugin")
    assert shifted["release_check"].startswith("consistent")  # its stream lies consistently: verify's part
    example = records["dpadam"]["privacy"]
    assert example["claim"] == "valid" and example["privatiser"] == "noisy_sgd"


def test_a_plugin_run_stored_valid_before_the_rule_reads_declared(tmp_path, data_dir):
    """A record a plugin that owns its loop stored as "valid" (before the runner stored "declared") is
    read as "declared" by the runs table; a privatised plugin's stays "valid"."""
    from dpbench.analysis.curves import runs_table

    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
name: old
seed: 0
seeds: 1
datasets: [breast_cancer]
models: [logreg]
algorithms: [{{plugin: {EXAMPLE}:fit_dpadam}}]
epsilons: [1.0]
delta: 1.0e-5
metrics: [accuracy]
""")
    context = CellContext(data_dir=str(data_dir), cache_dir=str(tmp_path / "cache"))
    record = {**run_cell(load(str(spec)).cells()[0], context), "status": "ok"}
    old = json.loads(json.dumps(record))
    del old["privacy"]["privatiser"]  # as a plugin that ran its own loop wrote it
    table = runs_table([record, {**old, "key": "old"}])
    assert list(table["dp_claim"]) == ["valid", "declared"]
