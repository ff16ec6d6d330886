"""dpbench.bench.jax_suites and `dpbench bench --device`: every JAX suite runs on jax-cpu at tiny shapes
and yields well-formed records (speed is measured by `dpbench bench --device gpu`, never asserted here)."""

from __future__ import annotations

import json
import math
import sys

import pytest

pytest.importorskip("jax", reason="the JAX path needs the jax extra: pip install 'dpbench[jax]'")

from click.testing import CliRunner  # noqa: E402

from dpbench.bench import jax_suites  # noqa: E402
from dpbench.bench import suites as bench  # noqa: E402
from dpbench.cli.main import main  # noqa: E402
from dpbench.on_jax import device  # noqa: E402
from tests.problems import tiny_rows  # noqa: E402

STEPS = dict(steps=20, batch_sizes=(1, 16))
MANY = dict(fits=64, steps=20, batch_size=50, numpy_fits=32)
AUDIT = dict(trials=64, rows=100, steps=10, batch_size=50, numpy_trials=32)


@pytest.fixture(scope="module")
def tiny_data():
    return tiny_rows(200, 5)


@pytest.fixture(scope="module")
def described():
    return device.describe("jax-cpu")


#: each suite's records at the tiny shapes, run once per module (the CLI test reuses them)
@pytest.fixture(scope="module")
def steps_records(tiny_data):
    return jax_suites.jax_steps_suite("jax-cpu", data=tiny_data, **STEPS)


@pytest.fixture(scope="module")
def many_records(tiny_data):
    return jax_suites.jax_many_suite("jax-cpu", data=tiny_data, **MANY)


@pytest.fixture(scope="module")
def audit_records(data_dir):
    return jax_suites.jax_audit_suite("jax-cpu", str(data_dir), **AUDIT)


def _positive(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


def _check(records: list[dict], suite: str, rate: str, described: str) -> None:
    assert records
    for rec in records:
        for key in ("suite", "algorithm", "model", "measure", "batch_size", "n", "n_params", "path", "device",
                    "seconds", rate):
            assert key in rec, (key, rec)
        assert rec["suite"] == suite and "error" not in rec
        assert _positive(rec["seconds"]) and _positive(rec[rate]), rec
        if rec["path"] == "jax":
            assert rec["device"] == described
            assert math.isfinite(rec["compile_seconds"]) and rec["compile_seconds"] >= 0.0, rec
        else:
            assert rec["device"] == "cpu: numpy/numba"


def test_jax_steps_suite(steps_records, described):
    records = steps_records
    _check(records, "steps", "examples_per_s", described)
    assert {(r["model"], r["batch_size"]) for r in records} == {(m, b) for m in ("logreg", "mlp") for b in (1, 16)}
    for rec in records:
        assert rec["path"] == "jax" and rec["steps"] == 20 and rec["measure"] == "step"
        assert rec["examples_per_s"] == pytest.approx(rec["batch_size"] * 20 / rec["seconds"])
        assert rec["steps_per_s"] == pytest.approx(20 / rec["seconds"])
    table = bench.format_table(records).splitlines()
    assert all(c in table[0] for c in ("device", "steps_per_s", "compile_seconds")) and described in table[1]


def test_jax_many_suite_beside_the_numpy_path(many_records, described):
    records = many_records
    _check(records, "many", "fits_per_s", described)
    jax_rec, numpy_rec = records
    assert (jax_rec["path"], jax_rec["measure"]) == ("jax", "64 fits, twin.many")
    assert (numpy_rec["path"], numpy_rec["measure"]) == ("numpy", "32 fits, fit_many")
    assert jax_rec["steps"] == numpy_rec["steps"] == 20 and jax_rec["n"] == 200
    assert jax_rec["fits_per_s"] == pytest.approx(64 / jax_rec["seconds"])


def test_jax_audit_suite_beside_the_numpy_path(audit_records, described):
    records = audit_records
    _check(records, "audit", "fits_per_s", described)
    jax_rec, numpy_rec = records
    assert (jax_rec["path"], jax_rec["trials"], numpy_rec["path"], numpy_rec["trials"]) == ("jax", 64, "numpy", 32)
    assert jax_rec["fits_per_s"] == pytest.approx(2 * 64 / jax_rec["seconds"])
    assert jax_rec["n"] == 100 and jax_rec["claimed_epsilon"] == 1.0
    assert "target_seconds" not in jax_rec  # the target is for 100,000 trials a side
    assert jax_suites.TARGET_SECONDS[("audit", "dpsgd", "logreg", 100_000)] == 30.0


def test_the_gpu_targets_belong_to_gpu_rows_only():
    """JAX rows carry the GPU targets on --device gpu, none on jax-cpu, never the numpy path's."""
    rec = bench._record("steps", "dpsgd", "mlp", "step", 256, 45_222, 11_236, seconds_per_call=1e-4, path="jax")
    assert "target_examples_per_s" in rec  # the numpy path's target for this shape, which the JAX row drops
    on_cpu = jax_suites._gpu_target(dict(rec), "jax-cpu", 3_500_000.0, "examples_per_s")
    assert "target_examples_per_s" not in on_cpu and "meets_target" not in on_cpu
    on_gpu = jax_suites._gpu_target(dict(rec), "gpu", jax_suites.GPU_STEP_TARGETS[("mlp", 256)], "examples_per_s")
    assert on_gpu["target_examples_per_s"] == 3_500_000.0 and on_gpu["meets_target"] is False  # 2.56M < 3.5M
    many = jax_suites._gpu_target({"fits_per_s": 400_000.0}, "gpu", jax_suites.GPU_MANY_TARGET, "fits_per_s")
    assert many["meets_target"] and ">= 300,000 trainings/s (met)" in bench._target_text(many)


def test_table_prints_a_target_in_seconds_and_keeps_the_old_columns():
    rec = bench._record("audit", "dpsgd", "logreg", "audit, 100,000 trials a side", 200, 400, 11, seconds=25.0,
                        path="jax", device="gpu: X", target_seconds=30.0, meets_target=True)
    assert "<= 30 s (met)" in bench.format_table([rec])
    old = bench._record("steps", "dpsgd", "logreg", "step", 1, 10, 5, seconds_per_call=1e-6, path="numpy")
    header = bench.format_table([old]).splitlines()[0].split()
    assert header == ["suite", "algorithm", "model", "measure", "path", "batch_size", "n_params", "examples_per_s",
                      "target"]


#: the numpy steps suite itself, before the CLI test replaces it with its tiny version
_REAL = {"numpy_steps": bench.steps_suite}


def test_cli_bench_device_runs_the_four_suites_in_order(tiny_data, data_dir, tmp_path, monkeypatch, described,
                                                        steps_records, many_records, audit_records):
    """The CLI's order, tables and JSON; the JAX suites stand in with their records above (run once)."""
    import copy

    calls: list[str] = []

    def jax_steps(dev, data_dir=None, repeats=1):
        calls.append("jax steps")
        return copy.deepcopy(steps_records)

    def numpy_steps(data_dir=None, repeats=1, *, models, batch_sizes, long_run):
        calls.append("steps")
        assert (tuple(models), tuple(batch_sizes), long_run) == (jax_suites.JAX_MODELS, jax_suites.JAX_BATCH_SIZES, 0)
        return _REAL["numpy_steps"](data=tiny_data, models=models, batch_sizes=(1, 16), long_run=0, min_time=0.002,
                                    best_of=1)

    def jax_many(dev, data_dir=None, repeats=1):
        calls.append("jax many")
        return copy.deepcopy(many_records)

    def jax_audit(dev, data_dir=None, repeats=1):
        calls.append("jax audit")
        return copy.deepcopy(audit_records)

    monkeypatch.setattr(jax_suites, "jax_steps_suite", jax_steps)
    monkeypatch.setattr(bench, "steps_suite", numpy_steps)
    monkeypatch.setattr(jax_suites, "jax_many_suite", jax_many)
    monkeypatch.setattr(jax_suites, "jax_audit_suite", jax_audit)
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(main, ["bench", "--device", "jax-cpu", "--output", str(out), "--data", str(data_dir)])
    assert result.exit_code == 0, result.output
    assert calls == ["jax steps", "steps", "jax many", "jax audit"]
    loaded = json.loads(out.read_text())
    assert loaded["machine"]["device"] == described and loaded["machine"]["cores"]
    records = loaded["records"]
    assert {r["suite"] for r in records} == {"steps", "many", "audit"}
    assert {r["path"] for r in records if r["suite"] == "steps"} >= {"jax", "numpy"}
    assert all(r["device"] for r in records)
    assert result.output.count("suite algorithm") == 3 and "twin.many" in result.output
    assert "audit, 64 trials a side" in result.output


@pytest.mark.parametrize("extra, named", [(["--suite", "steps"], "--suite"), (["--against", "opacus"], "--against")])
def test_cli_bench_device_refuses_suite_and_against(extra, named):
    result = CliRunner().invoke(main, ["bench", "--device", "gpu", *extra])
    assert result.exit_code == 2
    assert "--device gpu runs its own suites" in result.output and named in result.output


def test_cli_bench_device_gpu_without_a_gpu_is_one_line(tmp_path):
    import jax

    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("this machine has a GPU")
    result = CliRunner().invoke(main, ["bench", "--device", "gpu", "--output", str(tmp_path / "b.json")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "JAX sees no GPU" in result.output and "jax-cpu" in result.output
    assert not (tmp_path / "b.json").exists()


def test_cli_bench_device_without_jax_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` now raises ImportError
    result = CliRunner().invoke(main, ["bench", "--device", "jax-cpu", "--output", str(tmp_path / "b.json")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "needs JAX, which is not installed" in result.output
