"""dpbench.bench.opacus: the comparison with Opacus (`dpbench bench --against opacus`).

`compare`, `format_comparison` and the missing-extra message run without torch; `opacus_suite`
runs on a tiny problem only when torch and opacus import. Speed is never asserted.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from dpbench.bench import opacus as bench_opacus
from dpbench.cli.main import main


def _steps(model, B, path, value):
    return {"suite": "steps", "algorithm": "dpsgd", "model": model, "measure": "step", "batch_size": B,
            "n": 1000, "n_params": 6, "examples_per_s": value, "path": path}


def _opacus(model, B, mode, value=None, error=None):
    rec = {"suite": "opacus", "algorithm": "dpsgd", "model": model, "measure": "step", "batch_size": B,
           "n": 1000, "n_params": 6, "mode": mode}
    if error is not None:
        rec["error"] = error
    else:
        rec["examples_per_s"] = value
    return rec


@pytest.fixture
def hand_made():
    dp = [_steps("logreg", 1, "compiled", 600_000.0), _steps("logreg", 1, "numpy", 50_000.0),
          _steps("logreg", 64, "numpy", 900_000.0), _steps("logreg", 64, "compiled", 2_000_000.0),
          _steps("mlp", 64, "numpy", 100_000.0),
          # other measures and suites are not step speeds: ignored
          {**_steps("logreg", 1, "compiled", 1e12), "measure": "50,000 steps"},
          {**_steps("logreg", 1, "compiled", 1e12), "suite": "grads"}]
    op = [_opacus("logreg", 1, "hooks", 1_000.0), _opacus("logreg", 1, "ghost", 800.0),
          _opacus("logreg", 64, "hooks", 50_000.0), _opacus("logreg", 64, "ghost", 200_000.0),
          _opacus("mlp", 64, "hooks", 10_000.0), _opacus("mlp", 64, "ghost", error="RuntimeError: boom")]
    return dp, op


def test_compare_ratio_best_path_and_target(hand_made):
    rows = bench_opacus.compare(*hand_made)
    by = {(r["model"], r["batch_size"]): r for r in rows}
    assert list(by) == [("logreg", 1), ("logreg", 64), ("mlp", 64)]

    r = by[("logreg", 1)]  # best path: compiled; faster Opacus mode: hooks
    assert r["dpbench_examples_per_s"] == 600_000.0 and r["dpbench_path"] == "compiled"
    assert r["opacus_hooks_examples_per_s"] == 1_000.0 and r["opacus_ghost_examples_per_s"] == 800.0
    assert r["opacus_best_mode"] == "hooks"
    assert math.isclose(r["ratio"], 600.0) and r["target"] == 20 and r["meets_target"] is True

    r = by[("logreg", 64)]  # ratio against the faster mode (ghost here): 2e6 / 2e5 = 10 < 20
    assert r["dpbench_path"] == "compiled" and r["opacus_best_mode"] == "ghost"
    assert math.isclose(r["ratio"], 10.0) and r["meets_target"] is False

    r = by[("mlp", 64)]  # the errored mode is left out, not counted as 0
    assert r["opacus_ghost_examples_per_s"] is None and r["opacus_hooks_examples_per_s"] == 10_000.0
    assert math.isclose(r["ratio"], 10.0) and r["meets_target"] is False
    json.dumps(rows)  # goes into the bench JSON as is


def test_compare_one_side_missing():
    rows = bench_opacus.compare([_steps("mlp", 256, "numpy", 1.0)], [_opacus("logreg", 1, "hooks", 5.0)])
    by = {(r["model"], r["batch_size"]): r for r in rows}
    assert by[("mlp", 256)]["ratio"] is None and by[("mlp", 256)]["meets_target"] is None
    assert by[("logreg", 1)]["dpbench_examples_per_s"] is None and by[("logreg", 1)]["ratio"] is None
    assert bench_opacus.compare([], []) == []


def test_format_comparison(hand_made):
    rows = bench_opacus.compare(*hand_made)
    text = bench_opacus.format_comparison(rows)
    lines = text.splitlines()
    assert len(lines) == 1 + len(rows)
    assert "dpbench / Opacus" in lines[0]
    assert "600.0x" in lines[1] and "600,000" in lines[1] and "compiled" in lines[1] and "met" in lines[1]
    assert "10.0x" in lines[2] and "NOT met" in lines[2]
    md = bench_opacus.format_comparison(rows, markdown=True).splitlines()
    assert md[0].startswith("| model |") and set(md[1]) <= set("|-:") and len(md) == 2 + len(rows)
    assert all(line.count("|") == md[0].count("|") for line in md)
    assert bench_opacus.format_comparison([]) == "(no comparison rows)"


def test_module_imports_without_torch():
    # torch and opacus are imported inside functions only: a fresh interpreter without them imports
    # the module and compares
    code = ("import sys; sys.modules['torch'] = None; sys.modules['opacus'] = None\n"
            "from dpbench import bench_opacus as b\n"
            "print(b.format_comparison(b.compare([], [])))\n"
            "try:\n    b.require()\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "(no comparison rows)" in out.stdout and "pip install torch==2.13.0" in out.stdout


@pytest.mark.parametrize("missing", ["opacus", "torch"])
def test_cli_without_extra_prints_install_line(monkeypatch, tmp_path, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # `import opacus` / `import torch` now raise ImportError
    out = CliRunner().invoke(main, ["bench", "--against", "opacus", "--output", str(tmp_path / "b.json")])
    assert out.exit_code == 1, out.output
    assert "pip install torch==2.13.0 'dpbench[opacus]'" in out.output
    assert "pip install -e '.[opacus]'" in out.output
    assert not (tmp_path / "b.json").exists()


def test_cli_against_refuses_suite(tmp_path):
    out = CliRunner().invoke(main, ["bench", "--against", "opacus", "--suite", "grads"])
    assert out.exit_code == 2 and "--suite" in out.output


def test_opacus_suite_tiny():
    pytest.importorskip("torch", reason="torch not installed (optional extra: pip install torch==2.13.0 "
                                        "'dpbench[opacus]')")
    pytest.importorskip("opacus", reason="opacus not installed (optional extra: pip install 'dpbench[opacus]')")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = np.where(X @ rng.standard_normal(5) >= 0, 1.0, -1.0)
    records = bench_opacus.opacus_suite(data=(X, y), batch_sizes=(1, 16), min_time=0.05)
    assert {(r["model"], r["batch_size"], r["mode"]) for r in records} == {
        (m, b, mode) for m in ("logreg", "mlp") for b in (1, 16) for mode in ("hooks", "ghost")}
    for rec in records:
        assert "error" not in rec, rec
        assert rec["suite"] == "opacus" and rec["algorithm"] == "dpsgd" and rec["measure"] == "step"
        assert rec["n"] == 200 and rec["n_params"] == {"logreg": 6, "mlp": 36}[rec["model"]]
        assert isinstance(rec["examples_per_s"], float) and math.isfinite(rec["examples_per_s"])
        assert rec["examples_per_s"] > 0 and rec["timed_seconds"] >= 0.05
        assert rec["framework"].startswith("opacus ") and ", torch " in rec["framework"]
        assert rec["torch_threads"] >= 1
    rows = bench_opacus.compare([], records)
    assert len(rows) == 4 and all(r["ratio"] is None for r in rows)
    # every timed stretch trained finite parameters: at B = 1 Opacus' own expected batch size, int(n (1/n)),
    # truncates to 0 (0.999... in floating point) and was corrected to 1
    assert all(rec["finite_parameters"] for rec in records)
    assert {rec.get("expected_batch_size_corrected_from") for rec in records if rec["batch_size"] == 1} <= {0, None}


def test_opacus_expected_batch_size_is_corrected_where_it_truncates_and_compare_skips_infinite_training():
    class Optimizer:  # what the correction reads and writes of Opacus' DPOptimizer
        expected_batch_size = int(45222 * (1.0 / 45222))  # Opacus 1.6's own rule at B = 1: 0

    opt = Optimizer()
    assert opt.expected_batch_size == 0
    assert bench_opacus._expected_batch_size(opt, 45222 / 45222) == 0 and opt.expected_batch_size == 1
    assert bench_opacus._expected_batch_size(opt, 1.0) is None  # right already: left alone
    dp = [{"suite": "steps", "measure": "step", "model": "logreg", "batch_size": 1, "examples_per_s": 5e5,
           "path": "compiled"}]
    op = [{"suite": "opacus", "measure": "step", "model": "logreg", "batch_size": 1, "mode": "hooks",
           "examples_per_s": 9e9, "finite_parameters": False},
          {"suite": "opacus", "measure": "step", "model": "logreg", "batch_size": 1, "mode": "ghost",
           "examples_per_s": 1e3, "finite_parameters": True}]
    (row,) = bench_opacus.compare(dp, op)
    assert row["opacus_hooks_examples_per_s"] is None and row["ratio"] == pytest.approx(500.0)
