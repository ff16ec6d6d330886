"""The dask backend on a real cluster of separate OS processes, and the loss of a worker mid-run.

The module-scoped fixture `dask_cluster` starts a dask scheduler on 127.0.0.1 (a free port, read
back from its scheduler file) and two dask workers of one thread each, without a nanny, as separate
processes (`python -m distributed.cli.dask_scheduler` / `dask_worker`, what `dask scheduler` / `dask
worker` run) in their own process groups, with one BLAS thread and DPBENCH_DATA set (tests/dask_processes.py);
it stops them all (SIGTERM, then SIGKILL, to each process group) when the module ends, pass or fail.
dpbench connects to it as a user would, with `--backend dask --scheduler ADDRESS`.

Tested: the records of a run on the cluster equal those of a local sequential run; and SIGKILL of a
worker process while it runs a cell costs nothing: dask reruns the lost tasks on the survivor, the
run ends with every cell stored once and none failed, the cells stored before the kill are left
byte for byte as they were, and the records again equal a local sequential run's. That test
starts a replacement worker afterwards, so the fixture has two workers for whatever runs next.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("dask.distributed")

from dpbench.experiment import inventory, pipeline
from dpbench.spec import experiment as spec
from tests.dask_processes import DaskProcesses
from tests.dask_processes import dask_cluster as start_dask_cluster

TIMING_COLUMNS = ("fit_seconds", "wall_seconds")  # differ between any two runs

# 48 single-cell tasks (DP-SGD is never batched: cells.batch_key is None) of about 0.25 s each on
# breast_cancer: about 6 s on two workers, 12 s on one
SLOW_SPEC = """
name: killme
seeds: 4
datasets: [breast_cancer]
models: [logreg]
algorithms:
  - name: dpsgd
    params: {epochs: [6000, 8000], batch_size: 4, lr: [0.1, 0.5]}
epsilons: [0.5, 1.0, 2.0]
delta: 1/n
"""
KILL_AFTER = 8  # cells stored before a worker is killed
RUN_TIMEOUT = 180.0  # seconds: a run on the cluster that takes longer counts as hung


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[DaskProcesses]:
    """A scheduler and two single-thread worker processes on loopback, stopped after the module."""
    env = {"DPBENCH_DATA": str(data_dir), "OPENBLAS_NUM_THREADS": "1"}
    with start_dask_cluster(tmp_path_factory.mktemp("dask-cluster"), workers=2, env=env) as cluster:
        yield cluster


def _records(exp: spec.Experiment, results: Path) -> pd.DataFrame:
    """The stored records as `inventory.collect` reads them, less the timing columns."""
    frame, _, _ = inventory.collect(exp, results)
    return frame.drop(columns=[c for c in TIMING_COLUMNS if c in frame.columns])


def _run_locally(exp: spec.Experiment, results: Path, data_dir: Path) -> pd.DataFrame:
    summary = pipeline.run_experiment(exp, results=results, data_dir=str(data_dir), jobs=1, backend="sequential",
                                      progress=False, notify=lambda message: None)
    assert not summary.failed and summary.ran == len(exp.cells())
    return _records(exp, results)


def test_cluster_run_matches_a_local_run(dask_cluster, tiny_spec, tmp_path, data_dir):
    exp = spec.load(tiny_spec)
    summary = pipeline.run_experiment(exp, results=tmp_path / "cluster", data_dir=str(data_dir), jobs=2,
                                      backend="dask", scheduler=dask_cluster.address, progress=False,
                                      notify=lambda message: None)
    assert not summary.failed and summary.ran == len(exp.cells()) and summary.reused == 0
    local = _run_locally(exp, tmp_path / "local", data_dir)
    pd.testing.assert_frame_equal(local, _records(exp, tmp_path / "cluster"), check_exact=True)


# 23 s: `make test-slow` (CI keeps tests/run/test_runner_dask.py's kill of a run midway, 8 s, under 5 minutes)
@pytest.mark.slow
def test_killing_a_worker_mid_run_loses_no_stored_cell(dask_cluster, tmp_path, data_dir):
    from distributed import Client

    path = tmp_path / "killme.yaml"
    path.write_text(SLOW_SPEC)
    exp = spec.load(path)
    total = len(exp.cells())
    results = tmp_path / "cluster"
    cells_dir = results / "killme" / "cells"
    outcome: dict = {}

    def run() -> None:  # the run, as `dpbench run --backend dask --scheduler ADDRESS` makes it
        try:
            outcome["summary"] = pipeline.run_experiment(exp, results=results, data_dir=str(data_dir), jobs=2,
                                                         backend="dask", scheduler=dask_cluster.address,
                                                         progress=False, notify=lambda message: None)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            outcome["error"] = exc

    pids = dask_cluster.worker_pids()  # {worker address: pid}
    assert sorted(pids.values()) == sorted(p.pid for p in dask_cluster.workers), "the workers are our processes"
    runner = threading.Thread(target=run, name="dpbench-run", daemon=True)
    try:
        # not the default client: joblib's dask backend must keep using the one dpbench opened
        with Client(dask_cluster.address, set_as_default=False) as client:
            runner.start()
            deadline = time.monotonic() + RUN_TIMEOUT
            while len(list(cells_dir.glob("*.json"))) < KILL_AFTER:
                assert runner.is_alive(), f"the run ended before {KILL_AFTER} cells were stored: {outcome}"
                assert time.monotonic() < deadline, f"fewer than {KILL_AFTER} cells stored after {RUN_TIMEOUT} s"
                time.sleep(0.02)
            while True:  # a worker in the middle of a task: that one is killed
                executing = client.run(lambda dask_worker: sorted(str(ts.key) for ts in dask_worker.state.executing))
                busy = [address for address, keys in executing.items() if keys]
                if busy:
                    break
                assert runner.is_alive() and time.monotonic() < deadline, f"no worker is running a task: {outcome}"
                time.sleep(0.01)
            victim = [p.pid for p in dask_cluster.workers].index(pids[busy[0]])
            dask_cluster.kill_worker(victim)
            at_kill = {p.name: p.read_bytes() for p in cells_dir.glob("*.json")}
            assert KILL_AFTER <= len(at_kill) < total, "the worker should have been killed midway through the run"
            runner.join(timeout=max(1.0, deadline - time.monotonic()))
            assert not runner.is_alive(), f"the run did not finish within {RUN_TIMEOUT} s of its start after the kill"
            survivors = client.run(lambda: True)
    finally:
        if not runner.is_alive():
            dask_cluster.restore()  # two workers again for the tests that follow
    assert set(survivors) == set(pids) - {busy[0]}, "the killed worker stayed dead, and no other worker died"
    assert "error" not in outcome, f"the run raised after a worker was killed: {outcome.get('error')!r}"
    summary = outcome["summary"]
    assert not summary.failed, [record["error"] for record in summary.failed]
    assert summary.ran == total and summary.reused == 0  # every cell stored once, none delivered twice
    after = {p.name: p.read_bytes() for p in cells_dir.glob("*.json")}
    assert len(after) == total and all(json.loads(text)["status"] == "ok" for text in after.values())
    assert {name: after[name] for name in at_kill} == at_kill, "a cell stored before the kill was rewritten"
    remote = _records(exp, results)
    assert (remote["key"].nunique(), len(remote)) == (total, total)
    local = _run_locally(exp, tmp_path / "local", data_dir)
    pd.testing.assert_frame_equal(local, remote, check_exact=True)
