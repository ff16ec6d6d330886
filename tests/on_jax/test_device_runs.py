"""`--device` end to end: cells keyed by backend, a run and its tables on jax-cpu beside the CPU path's,
curves that refuse to mix the two paths, an audit on the JAX path, and the one-line errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

jax = pytest.importorskip("jax", reason="the JAX path needs the jax extra: pip install 'dpbench[jax]'")

from dpbench.analysis import curves as curves_mod  # noqa: E402
from dpbench.cli.main import main  # noqa: E402
from dpbench.spec import experiment as spec_mod  # noqa: E402


def test_cells_are_keyed_by_backend_and_the_cpu_keys_do_not_move(tiny_spec):
    exp = spec_mod.load(str(tiny_spec))
    cpu, on_jax = exp.cells(), exp.on_device("jax-cpu").cells()
    assert [c.backend for c in cpu] == ["numpy"] * len(cpu)
    assert all("backend" not in c.identity() for c in cpu)  # the numpy path's keys are those stored before
    for a, b in zip(cpu, on_jax):
        if a.algorithm == "dpsgd":
            assert b.backend == "jax" and b.key != a.key and b.identity()["backend"] == "jax"
        else:  # the non-private baseline has no JAX twin: the CPU path, the same cell
            assert b.backend == "numpy" and b.key == a.key
    assert [c.key for c in exp.on_device("gpu").cells()] == [c.key for c in on_jax]  # one JAX path, any platform


def test_a_run_on_jax_cpu_stores_its_own_cells_and_tables(tiny_spec, tmp_path, data_dir):
    results = tmp_path / "results"
    base = ["run", str(tiny_spec), "--results", str(results), "--data", str(data_dir), "--no-progress"]
    first = CliRunner().invoke(main, base + ["--device", "jax-cpu"])
    assert first.exit_code == 0, first.output
    runs = pd.read_csv(results / "tiny" / "runs.csv.gz")
    assert dict(runs.groupby("label")["backend"].agg(lambda s: set(s))) == {"dpsgd": {"jax"}, "nonprivate": {"numpy"}}
    dpsgd = runs[runs["label"] == "dpsgd"]
    assert set(dpsgd["dp_claim"]) == {"valid"}  # the ledger as the numpy path states it, checked as it is
    checks = {json.loads(p)["release_check"].split(":")[0] for p in dpsgd["privacy"]}
    assert checks == {"consistent"}
    curves = pd.read_csv(results / "tiny" / "curves.csv")
    assert set(curves.loc[curves["label"] == "dpsgd", "backend"]) == {"jax"}
    assert any((results / ".cache" / "jax").iterdir())  # the compiled loops, for the next run's workers
    manifest = json.loads((results / "tiny" / "manifest.json").read_text())
    assert manifest["device"]["device"] == "jax-cpu" and manifest["device"]["jax"]
    # the CPU path afterwards: its own cells (8 dpsgd cells run, the 2 baseline cells reused), no jax column
    second = CliRunner().invoke(main, base)
    assert second.exit_code == 0, second.output
    assert "8 run, 2 reused" in second.output
    runs_cpu = pd.read_csv(results / "tiny" / "runs.csv.gz")
    assert "backend" not in runs_cpu and not set(runs_cpu["key"]) & set(dpsgd["key"])


def test_a_curve_never_mixes_the_two_paths():
    runs = pd.DataFrame({"label": ["dpsgd"] * 2, "dataset_label": ["d"] * 2, "model_label": ["m"] * 2,
                         "epsilon": [1.0] * 2, "backend": ["numpy", "jax"], "accuracy": [0.8, 0.9]})
    with pytest.raises(ValueError, match="mixes cells of the jax and numpy paths"):
        curves_mod.curves_table({"accuracy": runs})


def test_an_audit_on_jax_cpu(tmp_path):
    """The final-model audit's fits on the JAX path: chunks of their own, a bound that does not refute
    calibrated DP-SGD; the all-updates threat stays on the numpy path."""
    from dpbench.audit import multi_run, trials
    from dpbench.audit.setup import AuditSetup

    setup = AuditSetup.create("dpsgd", canary="gradient_canary", dataset="synthetic_logistic", model="logreg",
                              epsilon=1.0, delta=1e-5, trials=200,
                              params={"epochs": 2, "batch_size": 20, "lr": 0.5}, seed=0)
    assert trials.audit_backend(setup, "jax-cpu") == "jax" and trials.audit_backend(setup, "cpu") == "numpy"
    updates = AuditSetup.create("dpsgd", canary="gradient_canary", dataset="synthetic_logistic", model="logreg",
                                epsilon=1.0, delta=1e-5,
                                trials=200, threat="all_updates", seed=0)
    assert trials.audit_backend(updates, "jax-cpu") == "numpy"
    result = multi_run.run_audit(setup, results=tmp_path, progress=False, device="jax-cpu")
    assert result.epsilon_lower_bound <= 1.0
    stored = [json.loads(p.read_text()) for p in (tmp_path / ".cache" / "audits" / "cells").glob("*.json")]
    assert {r["count"] for r in stored} == {200} and len(stored) == 2
    cpu = multi_run.run_audit(setup, results=tmp_path, progress=False)  # other chunks: trained, not reused
    assert len(list((tmp_path / ".cache" / "audits" / "cells").glob("*.json"))) > 2 and cpu.epsilon_lower_bound <= 1.0


@pytest.mark.skipif(bool([d for d in jax.devices() if d.platform == "gpu"]), reason="this machine has a GPU")
def test_device_gpu_without_a_gpu_is_one_line_and_exit_2(tiny_spec, tmp_path):
    result = CliRunner().invoke(main, ["run", str(tiny_spec), "--device", "gpu", "--results", str(tmp_path)])
    assert result.exit_code == 2
    assert "JAX sees no GPU" in result.output and "--device jax-cpu" in result.output
    assert not (tmp_path / "tiny").exists()
