"""dpbench.bench.suites: every suite runs on a tiny synthetic problem and yields well-formed records.

Speed is measured by `dpbench bench`, never asserted here.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpbench.bench import suites as bench
from dpbench.privacy import accounting
from tests.problems import tiny_rows

TINY = dict(min_time=0.002, best_of=1, batch_sizes=(1, 8))


@pytest.fixture(scope="module")
def tiny_data():
    return tiny_rows(60, 6)


def _check(records: list[dict], suite: str, value_key: str | None = None) -> None:
    assert records
    for rec in records:
        for key in ("suite", "algorithm", "model", "batch_size", "n", "n_params"):
            assert key in rec, (key, rec)
        assert rec["suite"] == suite
        assert rec["n"] > 0 and rec["n_params"] > 0
        assert "error" not in rec, rec
        values = [rec[k] for k in ("examples_per_s", "seconds") if k in rec]
        assert values, rec
        for v in values:
            assert isinstance(v, float) and math.isfinite(v) and v > 0, rec
        if value_key is not None:
            assert value_key in rec, rec


def test_steps_suite(tiny_data):
    records = bench.steps_suite(data=tiny_data, long_run=500, **TINY)
    steps = [r for r in records if r["measure"] == "step"]
    _check(steps, "steps", "examples_per_s")
    # logreg on both paths (the compiled loop and the numpy twin), the MLP on the numpy path
    assert {(r["model"], r["batch_size"], r["path"]) for r in steps} == {
        *(("logreg", b, p) for b in (1, 8) for p in ("compiled", "numpy")), ("mlp", 1, "numpy"), ("mlp", 8, "numpy")}
    long = [r for r in records if r["measure"] == "500 steps"]
    _check(long, "steps", "seconds")
    assert {r["path"] for r in long} == {"compiled", "numpy"}
    # each point also timed with the runner's release check (tally + comparison), its overhead beside it
    for r in steps + long:
        assert r.get("examples_per_s_checked", r.get("seconds_checked")) > 0, r
        assert math.isfinite(r["release_check_overhead"]) and r["release_check_overhead"] > -1.0, r
    # the targets are attached (printed for the reader), but never asserted
    assert any("target_examples_per_s" in r for r in steps if r["model"] == "logreg" and r["batch_size"] == 1)


def test_grads_suite(tiny_data):
    records = bench.grads_suite(data=tiny_data, **TINY)
    _check(records, "grads", "examples_per_s")
    assert {r["measure"] for r in records} == {"per_example_grads", "clipped_grad_sum"}


def test_pidp_suite(tiny_data):
    records = bench.pidp_suite(data=tiny_data, hessian_samples=32, **TINY)
    _check(records, "pidp")
    measures = {(r["model"], r["measure"]) for r in records}
    for model in ("logreg", "mlp"):
        assert (model, "hessian+factorise") in measures
        assert (model, "influence solve") in measures
        assert (model, "batch-1 step (noisy)") in measures
    assert all("seconds" in r for r in records if r["measure"] == "hessian+factorise")


def test_fits_suite(tiny_data):
    records = bench.fits_suite(data=tiny_data, algorithms_=("dpsgd", "output_perturbation_gd"))
    _check(records, "fits", "seconds")
    assert [r["measure"] for r in records].count("fit (defaults)") == 2
    assert {(r["algorithm"], r["model"]) for r in records if r["measure"].startswith("fit (equal T")} == {
        (a, m) for a in ("dpsgd", "pidp_sgd") for m in ("logreg", "mlp")}


def test_fits_suite_caps_slow_fits(tiny_data, monkeypatch):
    from dpbench import algorithms

    info = algorithms.get("dpsgd")

    def slow_fit(*args, **kwargs):
        time.sleep(5.0)

    import dataclasses
    import time

    with algorithms.REGISTRY.substituted(dataclasses.replace(info, fit=slow_fit)):
        records = bench.fits_suite(data=tiny_data, models=(), algorithms_=("dpsgd",), cap_seconds=0.05)
    assert len(records) == 1 and records[0].get("capped") is True
    assert 0.05 <= records[0]["seconds"] < 5.0


def test_every_registered_private_algorithm_is_in_fits_by_default():
    from dpbench import algorithms

    private = {k for k, v in algorithms.REGISTRY.items() if v.private}
    assert private  # the default list is built from the registry; nothing to time here
    assert "fits" in bench.SUITES and {"steps", "grads", "pidp"} <= set(bench.SUITES)


def test_table_and_json(tiny_data, tmp_path):
    records = bench.steps_suite(data=tiny_data, models=("logreg",), long_run=500, **TINY)
    records += bench.pidp_suite(data=tiny_data, models=("logreg",), **TINY)
    table = bench.format_table(records)
    target = bench.TARGETS[('steps', 'dpsgd', 'logreg', 'step', 1)]
    assert "target" in table.splitlines()[0] and f">= {target:,.0f}" in table
    out = tmp_path / "bench.json"
    out.write_text(json.dumps({"machine": bench.machine_info(), "records": records}, indent=2, default=str))
    loaded = json.loads(out.read_text())
    assert loaded["machine"]["cores"] and loaded["machine"]["numpy"] == np.__version__
    assert len(loaded["records"]) == len(records)
    assert all(("examples_per_s" in r) or ("seconds" in r) for r in loaded["records"])


def test_cli_bench_writes_json(tiny_data, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from dpbench.cli.main import main

    def tiny_suite(data_dir=None, repeats=1):
        return bench.grads_suite(data=tiny_data, models=("logreg",), **TINY)

    monkeypatch.setitem(bench.SUITES, "grads", tiny_suite)
    out = tmp_path / "b.json"
    result = CliRunner().invoke(main, ["bench", "--suite", "grads", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "per_example_grads" in result.output
    loaded = json.loads(out.read_text())
    assert {"cores", "numpy", "blas"} <= set(loaded["machine"]) and loaded["records"]


def test_many_suite(tiny_data):
    records = bench.many_suite(data=tiny_data, fits=3,
                               cases=[("dpsgd", {"epochs": 1.0, "batch_size": 8.0}), ("dp_gd", {"epochs": 2})])
    _check(records, "many", "fits_per_s")
    assert {(r["algorithm"], r["measure"], r["path"]) for r in records} == {
        (a, f"3 fits, {m}", p) for a in ("dpsgd", "dp_gd") for m in ("one at a time", "fit_many")
        for p in ("observed", "unobserved")}
    assert "fits_per_s" in bench.format_table(records).splitlines()[0]


def test_accounting_suite_times_both_paths_and_they_agree():
    records = bench.accounting_suite(cases=[(1.0, 1e-5, 2000, 1)])
    assert [r["path"] for r in records] == ["library", "vectorised"]
    assert all(r["seconds"] > 0 for r in records)
    z_library, z_vectorised = (r["noise_multiplier"] for r in records)
    assert z_vectorised == pytest.approx(z_library, rel=1e-6)
    assert z_library == pytest.approx(accounting.calibrate_dpsgd_noise(1.0, 1e-5, 1 / 2000, 2000, "pld"), rel=1e-6)


def test_cells_suite_times_a_batch_both_ways_and_says_where_cells_run_alone(tmp_path, data_dir):
    from tests.run.test_cells_batched import SPEC

    spec = tmp_path / "batched.yaml"
    spec.write_text(SPEC)
    records = bench.cells_suite(str(data_dir), cases=[(str(spec), "dp_gd", "breast_cancer", "logreg"),
                                                      (str(spec), "dpsgd", "breast_cancer", "logreg")])
    alone, together, dpsgd = records
    assert alone["measure"].endswith("4 cells, one at a time") and together["measure"].endswith("4 cells, batched")
    assert alone["seconds"] > 0 and together["seconds"] > 0
    assert together["ratio"] == pytest.approx(alone["seconds"] / together["seconds"])
    assert together["cells_per_s"] == pytest.approx(4 / together["seconds"])
    assert dpsgd["error"] == "no batch" and "runs alone" in dpsgd["measure"]


def test_noise_suite_times_both_draws_of_the_same_values():
    records = bench.noise_suite(sizes=(4096,), min_time=0.001, best_of=1)
    assert [r["measure"] for r in records] == ["4,096 draws, numpy standard_normal", "4,096 draws, dpbench standard_normal"]
    assert all(r["ns_per_draw"] > 0 and r["seconds"] > 0 for r in records)
    assert records[0]["ratio"] == 1.0 and records[1]["ratio"] == records[0]["seconds"] / records[1]["seconds"]
    assert "ns_per_draw" in bench.format_table(records).splitlines()[0]


def test_replicas_suite_reports_gflops_against_one_replica():
    records = bench.replicas_suite(shape=(3000, 20), counts=(2,), best_of=1)
    assert [r["measure"] for r in records] == ["1 replica, loss_and_grad", "2 replicas stacked, products and tanh only"]
    flops = 4.0 * 3000 * 20 * 20
    for r in records:
        assert np.isclose(r["gflops"], flops / r["seconds"] / 1e9)
    assert np.isclose(records[1]["ratio"], records[0]["seconds"] / records[1]["seconds"])
    assert {"noise", "replicas", "cells"} <= set(bench.SUITES)
