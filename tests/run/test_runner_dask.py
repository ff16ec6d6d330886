"""Crash safety with a real process kill, and the dask backend on a loopback LocalCluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from dpbench.experiment import inventory, pipeline
from dpbench.spec import experiment as spec

SLOW_SPEC = """
name: killme
seeds: 6
datasets: [breast_cancer]
models: [logreg]
algorithms:
  - name: dpsgd
    params: {epochs: [20, 30], batch_size: 8, lr: [0.1, 0.5]}
epsilons: [0.5, 1.0, 2.0]
delta: 1/n
"""


def test_killing_a_run_midway_loses_no_finished_cell(tmp_path, data_dir):
    path = tmp_path / "killme.yaml"
    path.write_text(SLOW_SPEC)
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "dpbench.cli.main", "run", str(path), "--results", str(results), "--data", str(data_dir),
           "--jobs", "2", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    cells_dir = results / "killme" / "cells"
    deadline = time.time() + 120
    while time.time() < deadline and len([p for p in cells_dir.glob("*.json")]) < 10:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers, mid-flight
    proc.wait()
    survivors = {p.name: p.read_text() for p in cells_dir.glob("*.json")}
    total = len(spec.load(path).cells())
    assert 10 <= len(survivors) < total, "the run should have been killed midway"
    for text in survivors.values():  # nothing half-written: every file parses
        assert json.loads(text)["status"] == "ok"
    summary = pipeline.run_experiment(spec.load(path), results=results, data_dir=str(data_dir), jobs=2,
                                      progress=False)
    assert summary.reused == len(survivors) and summary.ran == total - len(survivors) and not summary.failed
    for name, text in survivors.items():  # finished cells were kept, not recomputed
        assert (cells_dir / name).read_text() == text


# 6 s: `make test-slow`; make test keeps tests/run/test_dask_cluster.py's run on a cluster of separate
# processes compared with a local run, bit for bit
@pytest.mark.slow
def test_dask_backend_matches_a_local_run(tiny_spec, tmp_path, data_dir):
    distributed = pytest.importorskip("dask.distributed")
    exp = spec.load(tiny_spec)
    pipeline.run_experiment(exp, results=tmp_path / "local", data_dir=str(data_dir), jobs=1, backend="sequential",
                            progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                                  processes=True) as cluster:
        summary = pipeline.run_experiment(exp, results=tmp_path / "dask", data_dir=str(data_dir), jobs=2,
                                          backend="dask", scheduler=cluster.scheduler_address, progress=False)
    assert not summary.failed and summary.ran == len(exp.cells())
    local, _, _ = inventory.collect(exp, tmp_path / "local")
    remote, _, _ = inventory.collect(exp, tmp_path / "dask")
    drop = ["fit_seconds"]
    pd.testing.assert_frame_equal(local.drop(columns=drop), remote.drop(columns=drop), check_exact=True)
