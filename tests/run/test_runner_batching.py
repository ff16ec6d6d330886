"""The runner's batching: cells of one batch key run as one task, each record stored on its own;
a batch that raises falls back to its cells one at a time (dpbench.run.runner.Batching)."""

from dataclasses import dataclass

import pytest

from dpbench.core.store import ResultStore
from dpbench.run import runner
from dpbench.run.runner import Batching


@dataclass(frozen=True)
class Item:
    key: str
    group: str | None
    value: int


def square(item: Item) -> dict:
    return {"key": item.key, "value": item.value ** 2, "how": "alone"}


def squares(items: list) -> list[dict]:
    if any(i.value < 0 for i in items):
        raise ValueError("a negative value spoils the batch")
    return [{"key": i.key, "value": i.value ** 2, "how": f"batch of {len(items)}"} for i in items]


def _items(groups: dict[str | None, list[int]]) -> list[Item]:
    return [Item(key=f"{g}-{v}", group=g, value=v) for g, values in groups.items() for v in values]


@pytest.mark.parametrize("backend", ["sequential", "loky"])
def test_cells_of_one_key_run_together_in_tasks_of_at_most_size_and_are_stored_one_by_one(tmp_path, backend):
    items = _items({"a": [1, 2, 3, 4, 5], "b": [6, 7], None: [8]})
    store = ResultStore(tmp_path)
    batching = Batching(key=lambda i: i.group, work=squares, size=2)
    summary = runner.run(items, square, store, jobs=2, backend=backend, progress=False, batching=batching)
    assert (summary.total, summary.ran, summary.failed) == (8, 8, [])
    records = {i.key: store.get(i.key) for i in items}
    assert all(records[i.key]["value"] == i.value ** 2 and records[i.key]["status"] == "ok" for i in items)
    hows = sorted(records[i.key]["how"] for i in items)
    assert hows == ["alone", "alone"] + ["batch of 2"] * 6  # a: 2 + 2 + 1 (a task of one runs alone), b: 2, None


def test_a_batch_that_raises_runs_its_cells_alone_and_names_the_bad_one(tmp_path):
    items = _items({"a": [1, -2, 3]})
    store = ResultStore(tmp_path)

    def alone(item: Item) -> dict:
        if item.value < 0:
            raise ValueError(f"bad value {item.value}")
        return square(item)

    summary = runner.run(items, alone, store, backend="sequential", progress=False,
                         batching=Batching(key=lambda i: i.group, work=squares, size=8))
    assert summary.ran == 3 and [r["key"] for r in summary.failed] == ["a--2"]
    assert "bad value -2" in summary.failed[0]["error"]
    assert store.get("a-1")["how"] == "alone" and store.get("a-3")["value"] == 9


def test_stored_cells_are_not_batched_again(tmp_path):
    items = _items({"a": [1, 2, 3]})
    store = ResultStore(tmp_path)
    batching = Batching(key=lambda i: i.group, work=squares, size=8)
    runner.run(items[:1], square, store, backend="sequential", progress=False, batching=batching)
    summary = runner.run(items, square, store, backend="sequential", progress=False, batching=batching)
    assert (summary.reused, summary.ran) == (1, 2)
    assert store.get("a-2")["how"] == "batch of 2"


def test_a_batch_runs_where_its_first_cell_stands():
    items = [Item("x1", None, 1), Item("a1", "a", 2), Item("y1", None, 3), Item("a2", "a", 4), Item("a3", "a", 5)]
    tasks = runner._tasks(items, Batching(key=lambda i: i.group, work=squares, size=2))
    assert [[i.key for i in task] for task in tasks] == [["x1"], ["a1", "a2"], ["y1"], ["a3"]]
