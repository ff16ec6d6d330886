"""dpbench.core.store: atomic writes, damaged records moved aside, and one store routed to several."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

from dpbench.core.store import ResultStore, RoutedStore, atomic_write_bytes_via, atomic_write_text, record_problem


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# ---- atomic writes ----------------------------------------------------------------------------------
def test_a_write_creates_folders_and_gives_the_umask_mode(tmp_path, umask_022):
    path = tmp_path / "a" / "b" / "table.csv"
    assert atomic_write_text(path, "x,y\n1,2\n") is True
    assert path.read_text() == "x,y\n1,2\n"
    assert path.stat().st_mode & 0o777 == 0o644  # mkstemp's 0600 widened to what open() would give
    assert _leftovers(path.parent) == []


def test_the_same_bytes_leave_the_file_untouched(tmp_path):
    path = tmp_path / "manifest.json"
    atomic_write_text(path, "{}")
    before = path.stat()
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns - 10**9))  # an older mtime, to see any rewrite
    old = path.stat()
    assert atomic_write_text(path, "{}") is False
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (old.st_ino, old.st_mtime_ns)
    assert atomic_write_text(path, "{ }") is True and path.read_text() == "{ }"
    assert path.stat().st_ino != old.st_ino  # replaced by a rename, not rewritten in place
    assert _leftovers(tmp_path) == []


def test_a_failed_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "figure.png"
    atomic_write_text(path, "old")

    def half_written(tmp: str) -> None:
        Path(tmp).write_text("half")
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError, match="crash mid-write"):
        atomic_write_bytes_via(path, half_written)
    assert path.read_text() == "old" and _leftovers(tmp_path) == []


def test_an_os_error_without_a_file_name_is_given_the_target_path(tmp_path):
    path = tmp_path / "runs.csv.gz"

    def disk_full(tmp: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as info:
        atomic_write_bytes_via(path, disk_full)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    assert not path.exists() and _leftovers(tmp_path) == []


# ---- records --------------------------------------------------------------------------------------
REQUIRED = {"metrics": dict, "fit_seconds": float}


def _ok(key: str, **extra) -> dict:
    return {"key": key, "status": "ok", "metrics": {"accuracy": 0.9}, "fit_seconds": 0.5, **extra}


@pytest.mark.parametrize("record, reason", [
    ([1, 2], "not a record (a JSON list)"),
    ({"key": "other", "status": "ok"}, "its key 'other' is not the file's"),
    ({"key": "k", "status": "running"}, "status 'running' (expected ok or error)"),
    ({"key": "k", "status": "ok", "metrics": {}}, "an ok record without fit_seconds"),
    ({"key": "k", "status": "ok", "metrics": [], "fit_seconds": "0.5"},
     "metrics is list, expected dict, fit_seconds is str, expected float"),
])
def test_record_problem_names_what_is_wrong(record, reason):
    assert record_problem(record, "k", REQUIRED) == reason


def test_an_error_record_needs_no_required_field():
    assert record_problem({"key": "k", "status": "error", "error": "boom"}, "k", REQUIRED) is None
    assert record_problem(_ok("k"), "k", REQUIRED) is None


def test_read_tells_absent_usable_and_damaged_apart(tmp_path):
    store = ResultStore(tmp_path, REQUIRED)
    assert store.read("k") == (None, None)
    store.put(_ok("k"))
    assert store.read("k") == (_ok("k"), None) and store.get("k") == _ok("k")
    store.path("k").write_text("")
    assert store.read("k") == (None, "empty file")
    store.path("k").write_text('{"key": "k", "status": "o')
    record, reason = store.read("k")
    assert record is None and reason.startswith("not valid JSON (")
    store.path("k").write_bytes(b"\xff\xfe")
    assert store.read("k")[1].startswith("unreadable (UnicodeDecodeError")


def test_put_writes_numpy_values_as_json_and_refuses_other_objects(tmp_path):
    store = ResultStore(tmp_path)
    store.put({"key": "k", "status": "ok", "theta": np.array([0.5, 1.0]), "n": np.int64(3),
               "gap": np.float32(0.25), "flag": np.bool_(True)})
    assert json.loads(store.path("k").read_text()) == {"key": "k", "status": "ok", "theta": [0.5, 1.0], "n": 3,
                                                       "gap": 0.25, "flag": True}
    with pytest.raises(TypeError, match="not JSON serialisable: object"):
        store.put({"key": "j", "status": "ok", "x": object()})


def test_a_damaged_record_is_moved_to_quarantine_never_deleted(tmp_path):
    store = ResultStore(tmp_path, REQUIRED)
    store.path("k").parent.mkdir(parents=True)
    store.path("k").write_text('{"key": "k", "status": "ok"}')
    assert store.is_finished("k") is False
    first = tmp_path / "cells" / "quarantine" / "k.json.0"
    assert first.read_text() == '{"key": "k", "status": "ok"}' and not store.path("k").exists()
    store.path("k").write_text("[]")
    assert store.sweep("k") == "not a record (a JSON list)"
    assert (tmp_path / "cells" / "quarantine" / "k.json.1").read_text() == "[]" and first.is_file()
    assert [(k, reason) for k, reason, _ in store.quarantined] == [
        ("k", "an ok record without metrics, fit_seconds"), ("k", "not a record (a JSON list)")]
    assert store.sweep("k") is None  # absent now: nothing to move


def test_usable_records_stay_and_only_ok_ones_count_as_finished(tmp_path):
    store = ResultStore(tmp_path, REQUIRED)
    store.put(_ok("a"))
    store.put({"key": "b", "status": "error", "error": "diverged"})
    assert store.sweep("a") is None and store.is_finished("a") is True
    assert store.is_finished("b") is False and store.path("b").is_file()  # an error is kept, and rerun
    assert store.quarantined == []
    store.path("c").write_text("{")
    assert store.records(["a", "b", "c", "d"]) == [_ok("a"), {"key": "b", "status": "error", "error": "diverged"}]


def test_a_routed_store_copies_a_finished_cell_to_every_experiment_that_has_it(tmp_path):
    one, two, three = (ResultStore(tmp_path / name, REQUIRED) for name in ("one", "two", "three"))
    routed = RoutedStore({"shared": [one, two, three], "own": [two]})
    assert routed.is_finished("shared") is False
    two.put(_ok("shared"))
    three.path("shared").parent.mkdir(parents=True)
    three.path("shared").write_text("{")  # a damaged copy is swept and replaced
    assert routed.is_finished("shared") is True
    assert one.get("shared") == two.get("shared") == three.get("shared") == _ok("shared")
    assert [(k, where.parent.name) for k, _, where in three.quarantined] == [("shared", "quarantine")]
    routed.put(_ok("own", fit_seconds=1.5))
    assert two.get("own")["fit_seconds"] == 1.5 and one.get("own") is None and three.get("own") is None
