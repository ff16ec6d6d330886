"""Runner and store: failures recorded, resume after interruption, force, jobs=1 vs jobs=2."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd
import pytest

from dpbench.core.store import ResultStore, atomic_write_text
from dpbench.experiment import inventory, pipeline
from dpbench.run import runner
from dpbench.spec import experiment as spec


@dataclass(frozen=True)
class FakeCell:
    key: str
    value: int


def square_or_fail(cell: FakeCell) -> dict:
    if cell.value < 0:
        raise ValueError(f"negative input {cell.value}")
    return {"key": cell.key, "value": cell.value ** 2}


class Interrupt(BaseException):
    """Stands in for Ctrl-C / a killed worker: not an Exception, so the runner does not catch it."""


def interrupt_at_three(cell: FakeCell) -> dict:
    if cell.value == 3:
        raise Interrupt
    return {"key": cell.key, "value": cell.value ** 2}


def test_failed_cell_is_recorded_and_others_finish(tmp_path):
    store = ResultStore(tmp_path)
    cells = [FakeCell(f"k{i}", i) for i in (1, -2, 3)]
    summary = runner.run(cells, square_or_fail, store, backend="sequential", progress=False)
    assert summary.ran == 3 and len(summary.failed) == 1
    assert store.get("k1")["value"] == 1 and store.get("k3")["value"] == 9
    failed = store.get("k-2")
    assert failed["status"] == "error" and "negative input -2" in failed["error"] and "Traceback" in failed["traceback"]
    # a rerun retries only the failed cell
    again = runner.run(cells, square_or_fail, store, backend="sequential", progress=False)
    assert again.reused == 2 and again.ran == 1


def test_resume_after_interruption_loses_nothing(tmp_path):
    store = ResultStore(tmp_path)
    cells = [FakeCell(f"k{i}", i) for i in range(6)]
    with pytest.raises(Interrupt):
        runner.run(cells, interrupt_at_three, store, backend="sequential", progress=False)
    done = {c.key for c in cells if store.is_finished(c.key)}
    assert done == {"k0", "k1", "k2"}  # everything finished before the interruption is on disk
    mtimes = {k: store.path(k).stat().st_mtime_ns for k in done}
    summary = runner.run(cells, square_or_fail, store, backend="sequential", progress=False)
    assert summary.reused == 3 and summary.ran == 3 and not summary.failed
    assert all(store.path(k).stat().st_mtime_ns == t for k, t in mtimes.items())  # not recomputed
    assert [store.get(c.key)["value"] for c in cells] == [i * i for i in range(6)]
    forced = runner.run(cells, square_or_fail, store, backend="sequential", progress=False, force=True)
    assert forced.ran == 6 and forced.reused == 0


def test_half_written_record_is_not_trusted(tmp_path):
    store = ResultStore(tmp_path)
    store.cells_dir.mkdir(parents=True)
    store.path("k1").write_text('{"key": "k1", "status": "ok", "val')  # a torn write from some other tool
    assert store.get("k1") is None and not store.is_finished("k1")
    atomic_write_text(store.path("k1"), json.dumps({"key": "k1", "status": "ok"}))
    assert store.is_finished("k1")
    assert not list(store.cells_dir.glob(".*.tmp"))  # no temporary files left behind


def test_jobs_1_and_jobs_2_give_identical_results(tiny_spec, tmp_path, data_dir):
    exp = spec.load(tiny_spec)
    tables = []
    for jobs in (1, 2):
        results = tmp_path / f"jobs{jobs}"
        summary = pipeline.run_experiment(exp, results=results, data_dir=str(data_dir), jobs=jobs, progress=False)
        assert not summary.failed and summary.ran == len(exp.cells())
        runs, curves, _ = inventory.collect(exp, results)
        tables.append((runs.drop(columns=["fit_seconds"]), curves))
    pd.testing.assert_frame_equal(tables[0][0], tables[1][0], check_exact=True)
    pd.testing.assert_frame_equal(tables[0][1], tables[1][1], check_exact=True)


def test_a_worker_reuses_its_last_data_split_read_only(tiny_spec, data_dir):
    """cells.load_dataset: the same split object for cells of one (dataset, rep); arrays read-only."""

    from dpbench.run import cells

    exp = spec.load(tiny_spec)
    context = cells.CellContext(data_dir=str(data_dir))
    by_rep = {}
    for cell in exp.cells():
        by_rep.setdefault(cell.rep, []).append(cell)
    first, second = by_rep[0][0], by_rep[0][-1]
    other = by_rep[1][0]
    a = cells.load_dataset(first, context)
    assert cells.load_dataset(second, context) is a  # same split: reused
    b = cells.load_dataset(other, context)
    assert b is not a
    assert cells.load_dataset(first, context) is a  # still kept (two splits per process)
    with pytest.raises(ValueError, match="read-only"):
        a.X_train[0, 0] = 1.0  # an algorithm writing into its data fails loudly
