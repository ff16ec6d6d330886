"""Cells that differ only in epsilon and step size run as one batched fit (run.cells.run_cells),
with the records of the cells run one at a time (run_cell) up to float rounding; only where the
algorithm's batched twin pays (full-batch DP-GD on a GLM, not Poisson-batched DP-SGD)."""

import numpy as np
import pytest

from dpbench.run.cells import CellContext, batch_key, prepare_optimum, run_cell, run_cells
from dpbench.spec.experiment import load

SPEC = """
name: batched
seed: 0
seeds: 2
datasets: [breast_cancer]
models: [logreg]
algorithms:
  - name: nonprivate
  - name: dpsgd
    params: {epochs: 2, batch_size: 32, lr: [0.5, 1.0]}
  - name: dp_gd
    params: {epochs: 20, lr: [0.5, 2.0]}
epsilons: [0.5, 4.0]
delta: 1e-5
metrics: [accuracy, optimality_gap]
"""


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "batched.yaml"
    path.write_text(SPEC)
    return load(str(path)).cells()


def _groups(cells) -> dict:
    groups: dict = {}
    for cell in cells:
        groups.setdefault(batch_key(cell), []).append(cell)
    return groups


def test_a_batch_is_one_split_algorithm_and_shape_and_its_cells_differ_in_epsilon_and_step_size(cells):
    groups = _groups(cells)
    assert all(batch_key(c) is None for c in cells if c.algorithm in ("nonprivate", "dpsgd"))  # no twin / no gain
    batches = [g for k, g in groups.items() if k is not None]
    assert sorted((g[0].algorithm, g[0].rep, len(g)) for g in batches) == [("dp_gd", 0, 4), ("dp_gd", 1, 4)]
    for g in batches:
        assert len({c.problem_key for c in g}) == 1
        assert {(c.epsilon, dict(c.params)["lr"]) for c in g} == {(e, lr) for e in (0.5, 4.0)
                                                                   for lr in {dict(c.params)["lr"] for c in g}}


@pytest.mark.parametrize("algorithm", ["dp_gd"])
def test_a_batch_gives_the_records_of_its_cells_run_alone(cells, algorithm, data_dir, tmp_path):
    context = CellContext(data_dir=str(data_dir), cache_dir=str(tmp_path))
    batch = next(g for k, g in _groups(cells).items() if k is not None and g[0].algorithm == algorithm)
    prepare_optimum(batch[0], context)
    together = run_cells(batch, context)
    for cell, record in zip(batch, together):
        alone = run_cell(cell, context)
        assert record["key"] == alone["key"] == cell.key
        assert record["privacy"] == alone["privacy"]
        for name, value in alone["metrics"].items():
            assert np.isclose(record["metrics"][name], value, rtol=1e-9, atol=1e-12), (cell.key, name)
        same = {k: v for k, v in alone.items() if k not in ("metrics", "fit_seconds", "privacy")}
        assert {k: record[k] for k in same} == same


def test_cells_of_different_batches_are_refused(cells, data_dir, tmp_path):
    groups = [g for k, g in _groups(cells).items() if k is not None]
    with pytest.raises(ValueError, match="one batch"):
        run_cells([groups[0][0], groups[1][0]], CellContext(data_dir=str(data_dir), cache_dir=str(tmp_path)))


def test_replicas_per_fit_keeps_a_batch_within_its_share_of_memory():
    from dpbench.run.cells import BATCH_CELLS, BATCH_MEMORY_SHARE, replica_bytes, replicas_per_fit

    per_replica = replica_bytes(42_000, 13_924)
    assert per_replica == 8 * (5 * 13_924 + 2 * 42_000)
    assert replicas_per_fit(42_000, 13_924, memory=64 << 30, workers=2) == BATCH_CELLS  # plenty: the cap
    memory = 10 * per_replica * 2 / BATCH_MEMORY_SHARE  # room for 10 replicas a worker, 2 workers
    assert replicas_per_fit(42_000, 13_924, memory=int(memory) + 1, workers=2) == 10
    assert replicas_per_fit(10**9, 10**9, memory=1 << 30, workers=16) == 1  # never fewer than one


def test_a_batch_over_its_memory_runs_as_several_fits_with_the_same_records(cells, data_dir, tmp_path, monkeypatch):
    from dpbench.run import cells as cells_module

    context = CellContext(data_dir=str(data_dir), cache_dir=str(tmp_path))
    batch = next(g for k, g in _groups(cells).items() if k is not None)
    prepare_optimum(batch[0], context)
    whole = run_cells(batch, context)
    sizes = []
    real = cells_module.replicas_per_fit
    monkeypatch.setattr(cells_module, "replicas_per_fit", lambda *a, **k: sizes.append(real(*a, **k)) or 3)
    parts = run_cells(batch, context)
    assert len(batch) == 4 and sizes == [cells_module.BATCH_CELLS]  # the real bound: room for all
    assert [r["key"] for r in parts] == [c.key for c in batch]
    # forced to 3: two fits, each sharing its own time among its cells
    assert len({r["fit_seconds"] for r in parts[:3]}) == 1 and parts[3]["fit_seconds"] != parts[0]["fit_seconds"]
    for a, b in zip(whole, parts):
        assert a["privacy"] == b["privacy"]
        for name, value in a["metrics"].items():
            assert np.isclose(b["metrics"][name], value, rtol=1e-9, atol=1e-12)
