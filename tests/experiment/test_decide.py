"""`dpbench decide`: rounds add seeds only to the data sets undecided claims read, the seeds reached are
written into the spec, and rounds dispatched to a real dask cluster (scheduler and workers as separate
processes, tests/dask_processes.py) give the records of a local run even when a worker is killed mid-round."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from dpbench.cli.main import main
from dpbench.experiment import decide as decide_mod
from dpbench.experiment import inventory
from dpbench.spec import experiment as spec

SPEC = """
name: decideme
seed: 0
seeds: 2
datasets: [breast_cancer, iris]
models: [logreg]
algorithms:
  - name: nonprivate
  - name: dpsgd
    params: {{epochs: {epochs}, batch_size: {batch}, lr: [0.5, 1.0]}}
epsilons: [0.1, 0.5, 4.0]
delta: 1/n
metrics: [accuracy, optimality_gap]
decide: {{looks: [2, 4, 8]}}
claims:
  - {{id: gap-falls, source: test, quote: the gap falls, kind: trend, metric: optimality_gap, a: dpsgd,
     relation: decreasing, datasets: [breast_cancer]}}
  - {{id: near-exact, source: test, quote: close to the exact model, kind: comparison, metric: accuracy, a: dpsgd,
     b: nonprivate, relation: at_least, margin: 0.05, epsilons: [4, 4], datasets: [breast_cancer]}}
"""


def _records(exp: spec.Experiment, results: Path) -> pd.DataFrame:
    frame, _, _ = inventory.collect(exp, results)
    return frame.drop(columns=[c for c in ("fit_seconds", "wall_seconds") if c in frame.columns])


def test_rounds_extend_only_the_curves_undecided_claims_read(tmp_path, data_dir):
    """Each round gives more seeds to the cells an undecided claim reads (its curves, data sets,
    models and epsilon range: `extra_seeds:`), never to a whole data set; the written spec
    reproduces every cell the rounds ran."""
    path = tmp_path / "decideme.yaml"
    path.write_text(SPEC.format(epochs=2, batch=32))
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["decide", str(path), "--results", str(results), "--data", str(data_dir),
                                    "--backend", "sequential", "--no-progress", "--write"])
    assert out.exit_code == 0, out.output
    written = spec.load(path)
    assert written.seeds_for("iris") == 2 and written.seeds_for("breast_cancer") == 2  # no data set grew
    assert written.extra_seeds, out.output
    for entry in written.extra_seeds:
        assert entry.datasets == ("breast_cancer",) and entry.seeds in (4, 8)
    cells = written.cells()
    by_curve: dict[tuple, set] = {}
    for c in cells:
        by_curve.setdefault((c.label, c.dataset_label, c.epsilon), set()).add(c.rep)
    assert all(len(r) == 2 for (label, ds, eps), r in by_curve.items() if ds == "iris")
    gap = next(e for e in written.extra_seeds if e.epsilons is None)  # gap-falls: dpsgd at every epsilon
    assert gap.algorithms == ("dpsgd",) and all(len(by_curve[("dpsgd", "breast_cancer", eps)]) == gap.seeds
                                                for eps in written.epsilons)
    near = [e for e in written.extra_seeds if e.epsilons == (4.0, 4.0)]  # near-exact: epsilon 4 only
    if near and near[0].seeds > gap.seeds:
        assert len(by_curve[("dpsgd", "breast_cancer", 0.1)]) < near[0].seeds
    verdicts = decide_mod.claim_verdicts(written, results, str(data_dir))
    for v in verdicts:  # decided, or undecided only at the last look
        assert v.verdict != "undecided" or any(e.seeds == 8 for e in written.extra_seeds), (v.claim.id, v.verdict)
    rerun = CliRunner().invoke(main, ["run", str(path), "--results", str(results), "--data", str(data_dir),
                                      "--backend", "sequential", "--no-progress"])
    assert rerun.exit_code == 0 and "0 run" in rerun.output.replace(",", ""), rerun.output


def test_extra_seeds_are_checked_and_cover_only_their_curves():
    from dpbench.core.errors import SpecError

    import yaml

    raw = yaml.safe_load(SPEC.format(epochs=2, batch=32))
    exp = spec.from_dict({**raw, "extra_seeds": [{"datasets": ["iris"], "algorithms": ["dpsgd"],
                                                   "epsilons": [0.5, 4], "seeds": 5}]})
    reps = {(c.label, c.dataset_label, c.epsilon): set() for c in exp.cells()}
    for c in exp.cells():
        reps[(c.label, c.dataset_label, c.epsilon)].add(c.rep)
    assert reps[("dpsgd", "iris", 0.5)] == set(range(5)) and reps[("dpsgd", "iris", 0.1)] == {0, 1}
    assert reps[("nonprivate", "iris", None)] == {0, 1} and reps[("dpsgd", "breast_cancer", 4.0)] == {0, 1}
    assert exp.n_cells() == len(exp.cells())
    for entry, message in [({"datasets": ["nope"], "algorithms": ["dpsgd"], "seeds": 4}, "unknown 'nope'"),
                           ({"datasets": ["iris"], "seeds": 4}, "extra_seeds[0].algorithms: missing"),
                           ({"datasets": ["iris"], "algorithms": ["dpsgd"]}, "extra_seeds[0].seeds: missing"),
                           ({"datasets": ["iris"], "algorithms": ["dpsgd"], "seeds": 4, "colour": 1}, "unknown key")]:
        with pytest.raises(SpecError, match=re.escape(message)):
            spec.from_dict({**raw, "extra_seeds": [entry]})


def test_written_seeds_are_one_number_when_every_data_set_has_the_same(tmp_path):
    path = tmp_path / "decideme.yaml"
    path.write_text(SPEC.format(epochs=2, batch=32))
    exp = spec.load(path)
    keys = decide_mod.current_seeds(exp)
    assert set(keys) == {"breast_cancer", "iris"} and set(keys.values()) == {2}
    decide_mod.write_seeds(path, exp, {"breast_cancer": 8})
    assert "\nseeds: {default: 2, breast_cancer: 8}\n" in path.read_text()
    assert spec.load(path).seeds_for("breast_cancer") == 8 and spec.load(path).seeds_for("iris") == 2
    decide_mod.write_seeds(path, spec.load(path), {"iris": 8})
    assert "\nseeds: 8\n" in path.read_text()
    assert spec.load(path).seeds_for("breast_cancer") == spec.load(path).seeds_for("iris") == 8


def test_decide_needs_a_design(tmp_path):
    path = tmp_path / "nodesign.yaml"
    path.write_text(SPEC.format(epochs=2, batch=32).replace("decide: {looks: [2, 4, 8]}\n", ""))
    out = CliRunner().invoke(main, ["decide", str(path), "--results", str(tmp_path / "r")])
    assert out.exit_code != 0 and "no `decide:` block" in out.output


@pytest.mark.slow  # 16 s; `make test` keeps the kill of a run midway on dask (tests/run/test_runner_dask.py)
def test_rounds_on_a_dask_cluster_survive_a_killed_worker(tmp_path, data_dir):
    pytest.importorskip("dask.distributed")
    from tests.dask_processes import dask_cluster

    text = SPEC.format(epochs=3000, batch=4)  # cells of ~0.1-0.3 s, so a round is long enough to kill into
    path = tmp_path / "decideme.yaml"
    path.write_text(text)
    local = tmp_path / "local"
    decide_mod.decide(spec.load(path), results=local, data_dir=str(data_dir), backend="sequential", progress=False)
    env = {"DPBENCH_DATA": str(data_dir), "OPENBLAS_NUM_THREADS": "1"}
    remote = tmp_path / "remote"
    with dask_cluster(tmp_path / "cluster", workers=2, env=env) as cluster:
        outcome: dict = {}

        def run() -> None:
            try:
                outcome["decision"] = decide_mod.decide(spec.load(path), results=remote, data_dir=str(data_dir),
                                                        jobs=2, backend="dask", scheduler=cluster.address,
                                                        progress=False)
            except BaseException as exc:  # noqa: BLE001 - reported below
                outcome["error"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        cells = remote / "decideme" / "cells"
        first_look = len(spec.load(path).cells())
        deadline = time.time() + 180
        while time.time() < deadline and len(list(cells.glob("*.json"))) < first_look + 4 and thread.is_alive():
            time.sleep(0.05)
        stored = {p.name: p.read_bytes() for p in cells.glob("*.json")}
        killed = thread.is_alive()
        if killed:  # mid-round: some cells of the round stored, others running
            cluster.kill_worker(0)
        thread.join(240)
        assert not thread.is_alive() and "error" not in outcome, outcome.get("error")
    assert killed and len(stored) > first_look, "the worker should have been killed during a round"
    for name, content in stored.items():  # no stored cell was lost or rewritten
        assert (cells / name).read_bytes() == content
    decision = outcome["decision"]
    final = decide_mod.with_seeds(spec.load(path), decision.seeds, extra=decision.extra)
    pd.testing.assert_frame_equal(_records(final, local), _records(final, remote), check_exact=True)
    assert [v.verdict for v in decision.verdicts] == [v.verdict for v in decide_mod.claim_verdicts(final, local)]


def test_a_frozen_plan_then_fresh_seeds_give_confirmatory_verdicts(tmp_path, data_dir):
    """--freeze writes the analysis with its hash and picks a seed stream no run used; --confirm
    draws the design's looks from it and --write puts the seed into the spec, whose verdicts are then
    "confirmatory (plan <hash>)"; a claim edited after freezing makes them exploratory again and
    --confirm refuses to run."""
    import json

    from dpbench.experiment import plan as plan_mod

    path = tmp_path / "decideme.yaml"
    path.write_text(SPEC.format(epochs=2, batch=32).replace("looks: [2, 4, 8]", "looks: [2, 3]"))
    results = tmp_path / "results"
    common = ["--results", str(results), "--data", str(data_dir), "--backend", "sequential", "--no-progress"]
    assert CliRunner().invoke(main, ["run", str(path), *common]).exit_code == 0
    assert CliRunner().invoke(main, ["claims", str(path), "--results", str(results), "--data",
                                     str(data_dir)]).exit_code == 0
    before = pd.read_csv(results / "decideme" / "claims.csv")
    assert set(before["status"]) == {"exploratory"}
    out = CliRunner().invoke(main, ["decide", str(path), "--freeze", "--results", str(results)])
    assert out.exit_code == 0, out.output
    raw = json.loads((results / "decideme" / "plan.json").read_text())
    exp = spec.load(path)
    plan = plan_mod.load(exp, results)
    assert plan.hash == raw["hash"] and plan.seed != exp.seed and plan.seeds_seen == (0,)
    assert (results / "decideme" / "claims-exploratory.csv").read_text() == \
        (results / "decideme" / "claims.csv").read_text()
    out = CliRunner().invoke(main, ["decide", str(path), "--confirm", "--write", *common])
    assert out.exit_code == 0, out.output
    confirmed = spec.load(path)
    assert confirmed.seed == plan.seed and confirmed.seeds_for("breast_cancer") in (2, 3)
    assert f"confirmatory (plan {plan.name})" in out.output
    records = inventory.inventory(confirmed, results).records
    assert records and {r["seed"] for r in records} == {plan.seed}  # only the plan's stream
    verdicts = decide_mod.claim_verdicts(confirmed, results, str(data_dir))
    assert {v.status for v in verdicts} == {f"confirmatory (plan {plan.name})"}
    # a claim changed after the plan was frozen: exploratory, and --confirm refuses
    path.write_text(path.read_text().replace("quote: the gap falls", "quote: the gap falls fast"))
    edited = spec.load(path)
    assert {v.status for v in decide_mod.claim_verdicts(edited, results, str(data_dir))} == {"exploratory"}
    out = CliRunner().invoke(main, ["decide", str(path), "--confirm", *common])
    assert out.exit_code == 2 and "changed after plan" in out.output and "claims" in out.output
    # a plan file edited by hand is refused
    (results / "decideme" / "plan.json").write_text(json.dumps({**raw, "seed": raw["seed"] + 1}))
    with pytest.raises(Exception, match="edited after it was frozen"):
        plan_mod.load(exp, results)


def test_confirmatory_tables_show_the_exploratory_verdicts_beside_them():
    from dpbench.analysis import claims

    parsed = claims.parse_claims([{"id": "x", "source": "s", "quote": "q", "kind": "comparison", "metric": "accuracy",
                                   "a": "A", "b": "B", "relation": "greater"}])
    v = claims.Verdict(parsed[0], "undecided", status="confirmatory (plan abc)")
    frame = claims.table([v], {"x": "reproduced"})
    assert list(frame.columns[frame.columns.get_loc("verdict"):][:2]) == ["verdict", "exploratory_verdict"]
    assert frame.loc[0, "exploratory_verdict"] == "reproduced"
    text = claims.markdown([v], {"x": "reproduced"})
    assert "Verdicts: **confirmatory (plan abc)**" in text and "| reproduced (differs) |" in text
    assert "exploratory" not in claims.markdown([v]).split("\n", 2)[2]


def test_confirming_needs_the_plan_committed_in_a_git_work_tree(tmp_path):
    import subprocess

    from dpbench.experiment import plan as plan_mod

    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    assert plan_mod.committed(plan) is None  # not a git work tree: nothing to check
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], cwd=tmp_path, check=True)
    assert plan_mod.committed(plan) is False  # untracked
    subprocess.run(git + ["add", "plan.json"], cwd=tmp_path, check=True)
    subprocess.run(git + ["commit", "-qm", "plan"], cwd=tmp_path, check=True)
    assert plan_mod.committed(plan) is True
    plan.write_text('{"edited": 1}')
    assert plan_mod.committed(plan) is False  # changed since


def test_a_profile_with_its_own_seeds_drops_the_extended_curves():
    import yaml

    raw = yaml.safe_load(SPEC.format(epochs=2, batch=32))
    raw["extra_seeds"] = [{"datasets": ["iris"], "algorithms": ["dpsgd"], "seeds": 5}]
    raw["profiles"] = {"ci": {"seeds": 2}, "wide": {"epsilons": [0.5]}}
    assert spec.from_dict(raw).extra_seeds and spec.from_dict(raw, profile="wide").extra_seeds
    assert spec.from_dict(raw, profile="ci").extra_seeds == ()


def test_failed_cells_are_said_in_one_line_and_the_looks_go_on():
    """A look whose run had failed cells (a library that cannot calibrate the target ε) is recorded
    and said, not raised: the claims are tested on the cells that ran."""
    from types import SimpleNamespace

    from dpbench.experiment import decide as decide_mod

    decision, said = decide_mod.Decision(), []
    failed = [{"status": "error", "error": "ValueError: The privacy budget is too low.",
               "cell": {"algorithm": "opacus_dpsgd", "epsilon": 0.1}}] * 3
    decide_mod._failures(decision, SimpleNamespace(failed=failed), "round 1", said.append)
    decide_mod._failures(decision, SimpleNamespace(failed=[]), "round 2", said.append)
    assert said == decision.failed and len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith("3 cells failed in round 1 (e.g. opacus_dpsgd at ε = 0.1: ValueError: The privacy "
                              "budget is too low.)")
