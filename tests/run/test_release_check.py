"""The run-time release check (`dpbench.run.cells`, `dpbench.algorithms.release_check`): every fit the
runner runs is tallied and its declared steps compared with its ledger. The bugs of
examples/red_team/buggy_dpsgd.py whose stream tells the truth (`declare: actual`, or twice the steps) turn
"valid" into "paper-only"; the honest plugin, which owns its loop, is stored "declared" (the release
check consistent), and the built-ins stay as they claim, single and batched."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpbench.algorithms.base import REGISTRY
from dpbench.core.registry import BUILT_IN
from dpbench.run import plugins
from dpbench.run.cells import CellContext, batch_key, run_cell, run_cells
from dpbench.spec.experiment import load

PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "red_team" / "buggy_dpsgd.py"


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    """The plugin loaded here is forgotten after each test (as in tests/run/test_plugins.py)."""
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    monkeypatch.setattr(plugins, "_IMPORTED", dict(plugins._IMPORTED))


def _cells(tmp_path: Path, algorithms: str, epsilons: str = "[1.0]"):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
name: release_check
seed: 0
seeds: 1
datasets: [breast_cancer]
models: [logreg]
algorithms:
{algorithms}
epsilons: {epsilons}
delta: 1.0e-5
metrics: [accuracy]
""")
    return load(str(spec)).cells()


@pytest.fixture
def context(tmp_path, data_dir) -> CellContext:
    return CellContext(data_dir=str(data_dir), cache_dir=str(tmp_path / "cache"))


# bug, declare -> what the record's release check must say (None: the claim stays valid)
BUGGY = {
    ("honest", "claimed"): None,
    ("honest", "actual"): None,
    ("twice_steps", "claimed"): "mismatch: 26 noisy steps observed, the ledger says 13",
    ("half_noise", "actual"): "mismatch: steps declare noise multiplier 0.8823, the ledger 1.765",
    ("wrong_rate", "actual"): "mismatch: steps declare sampling rate 0.313, the ledger 0.07824",
    ("no_clip", "actual"): "mismatch: 13 steps not clipped (the ledger's sensitivity 1 rests on clipping)",
    ("mean_noise", "actual"): "mismatch: steps declare noise multiplier 0.05514, the ledger 1.765",
    # a stream that lies as the ledger does: nothing to see here (dpbench verify's measured checks)
    ("half_noise", "claimed"): None,
    ("wrong_rate", "claimed"): None,
    ("no_clip", "claimed"): None,
}


def test_the_buggy_plugins_whose_stream_tells_the_truth_lose_their_valid(tmp_path, context):
    bugs = sorted({bug for bug, _ in BUGGY})
    cells = _cells(tmp_path, f"  - {{plugin: {PLUGIN}:fit, params: {{epochs: 1, bug: [{', '.join(bugs)}], "
                             "declare: [claimed, actual]}}")
    seen = set()
    for cell in cells:
        params = dict(cell.params)
        key = (params["bug"], params["declare"])
        if key not in BUGGY:
            continue
        seen.add(key)
        ledger = run_cell(cell, context)["privacy"]
        expected = BUGGY[key]
        if expected is None:  # the plugin runs its own loop: its "valid" is stored as "declared"
            assert ledger["claim"] == "declared", (key, ledger.get("claim_reason"))
            assert ledger["claim_reason"].startswith("declared by the plugin: it runs its own mechanism"), key
            assert ledger["release_check"] == "consistent: 13 steps, z 1.765, q 0.07824, clip 1", key
        else:
            assert ledger["release_check"] == expected, key
            assert ledger["claim"] == "paper-only", key
            assert ledger["claim_reason"] == "dpbench's release check: " + expected.removeprefix("mismatch: "), key
    assert seen == set(BUGGY)


BUILT_INS = """\
  - name: nonprivate
  - {name: nonprivate, label: sgd, params: {method: sgd, epochs: 2}}
  - {name: dpsgd, params: {epochs: 2, batch_size: [1, 32]}}
  - {name: dp_lssgd, params: {epochs: 1, batch_size: 32}}
  - {name: noisy_sgd_bst14, params: {steps: 400}}
  - {name: pidp_sgd, params: {steps: 300, rounds: 2}}
  - {name: ht_robust_gd, params: {steps: 10, batch_size: [null, 100]}}
  - {name: rgd, params: {steps: 10}}
  - {name: ht_bun_steinke, params: {steps: 10, variant: [corrected, printed]}}
  - {name: output_perturbation_gd, params: {lr: [0.5, 1.0]}}
  - {name: bolt_on}
  - {name: objective_perturbation}
  - {name: input_perturbation, params: {epochs: 5}}
  - {name: ht_sample_aggregate, params: {subsets: 40}}
  - {name: dp_gd, params: {epochs: 15, lr: [0.5, 2.0]}}
"""

#: the built-ins that report their steps, and a record's release check for each
REPORTING = {"nonprivate", "dpsgd", "dp_lssgd", "noisy_sgd_bst14", "pidp_sgd", "ht_robust_gd", "rgd", "ht_bun_steinke",
             "dp_gd"}


def test_no_honest_built_in_gets_a_mismatch_alone_or_batched(tmp_path, context):
    cells = _cells(tmp_path, BUILT_INS, epsilons="[0.5, 2.0]")
    groups: dict = {}
    for cell in cells:
        groups.setdefault(batch_key(cell), []).append(cell)
    records = [run_cell(c, context) for c in groups.pop(None)]
    assert groups and {g[0].algorithm for g in groups.values()} == {"dp_gd", "output_perturbation_gd",
                                                                   "input_perturbation"}
    for group in groups.values():
        records += run_cells(group, context)
    # every built-in algorithm, once at least; the peers (optional extras) in their own tests (tests/algorithms/test_peer_*.py)
    built_ins = {name for name, info in REGISTRY.items() if info.source == BUILT_IN and info.library is None}
    assert {r["algorithm"] for r in records} == built_ins
    for record in records:
        ledger, name = record["privacy"], record["algorithm"]
        text = ledger["release_check"]
        assert not text.startswith("mismatch"), (name, record["params"], text)
        assert "release check" not in (ledger.get("claim_reason") or ""), (name, ledger["claim_reason"])
        if name in REPORTING and record["params"].get("method") != "lbfgs":
            assert text.startswith(f"consistent: {ledger['steps']} steps"), (name, text)
        else:
            assert text == "not checked: the algorithm reports no steps", (name, text)
    valid = {r["algorithm"] for r in records if r["privacy"]["claim"] == "valid"}
    assert {"dpsgd", "dp_lssgd", "noisy_sgd_bst14", "ht_robust_gd", "ht_bun_steinke", "dp_gd"} <= valid


def test_a_batched_fit_is_checked_per_replica(tmp_path, context, monkeypatch):
    """A batched twin that reports 5 extra steps for its second replica: that cell alone loses its valid."""
    from dpbench.algorithms import base, releases
    from dpbench.algorithms.gradient_perturbation import fit_dp_gd

    twin, varying, pays = base.BATCHED[fit_dp_gd]

    def one_too_many(problem, privacies, rngs, params):
        fits = twin(problem, privacies, rngs, params)
        with releases.replicas_from(1):
            releases.released_steps(5, 1.0, clip_norm=1.0)
        return fits

    monkeypatch.setitem(base.BATCHED, fit_dp_gd, (one_too_many, varying, pays))
    batch = _cells(tmp_path, "  - {name: dp_gd, params: {epochs: 15, lr: [0.5, 2.0]}}", epsilons="[0.5, 2.0]")
    assert len({batch_key(c) for c in batch}) == 1 and len(batch) == 4
    ledgers = [r["privacy"] for r in run_cells(batch, context)]
    assert [led["claim"] for led in ledgers] == ["valid", "paper-only", "valid", "valid"]
    assert ledgers[1]["release_check"].startswith("mismatch: 20 noisy steps observed, the ledger says 15")
    assert all(led["release_check"].startswith("consistent: 15 steps") for i, led in enumerate(ledgers) if i != 1)

    def unnamed(problem, privacies, rngs, params):  # steps reported without naming their replica
        releases.released_steps(15, 1.0)
        return twin(problem, privacies, rngs, params)

    monkeypatch.setitem(base.BATCHED, fit_dp_gd, (unnamed, varying, pays))
    ledgers = [r["privacy"] for r in run_cells(batch, context)]
    assert all(led["claim"] == "valid" for led in ledgers)
    assert {led["release_check"] for led in ledgers} == {
        "not checked: the batched fit reported steps without naming their replica"}
