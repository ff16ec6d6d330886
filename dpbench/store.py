"""Results on disk: one JSON record per finished cell, written atomically, plus the tables.

Layout of results/<experiment>/:
  cells/<key>.json       one record per cell (status ok or error); local cache, not committed
  cells/optimum-*.json   L* per (data split, model)
  runs.csv.gz, curves.csv, manifest.json, <figure>.png/.pdf   for the full profile
  profiles/<profile>/... the same tables and figures for any other profile
Every file is written to a temporary file in the same folder and renamed over the target
(os.replace is atomic on POSIX), so a crash never leaves a half-written file that a later read
trusts; a record that still fails to parse is treated as missing and recomputed.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes_via(path: str | os.PathLike, writer) -> None:
    """Call writer(tmp_path) and rename the result over `path` (for matplotlib, pandas)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix)
    os.close(fd)
    try:
        writer(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class ResultStore:
    """Per-cell records of one experiment, keyed by the cell's hash."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.cells_dir = self.root / "cells"

    def path(self, key: str) -> Path:
        return self.cells_dir / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:
            return json.loads(self.path(key).read_text())
        except (FileNotFoundError, ValueError):
            return None

    def is_finished(self, key: str) -> bool:
        record = self.get(key)
        return record is not None and record.get("status") == "ok"

    def put(self, record: dict[str, Any]) -> None:
        atomic_write_text(self.path(record["key"]), json.dumps(record, default=_jsonable))

    def records(self, keys: Iterable[str]) -> list[dict]:
        out = []
        for key in keys:
            record = self.get(key)
            if record is not None:
                out.append(record)
        return out


def _jsonable(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


class RoutedStore:
    """Several experiments' stores behind one interface, so one runner call (one progress bar)
    serves them all: a cell key goes to the store of every experiment that contains it, and a
    cell finished in one of them is copied to the others instead of being recomputed."""

    def __init__(self, routes: dict[str, list[ResultStore]]):
        self.routes = routes

    def is_finished(self, key: str) -> bool:
        stores = self.routes[key]
        done = next((s for s in stores if s.is_finished(key)), None)
        if done is None:
            return False
        record = done.get(key)
        for store in stores:
            if store is not done and not store.is_finished(key):
                store.put(record)
        return True

    def put(self, record: dict[str, Any]) -> None:
        for store in self.routes[record["key"]]:
            store.put(record)
