"""Results on disk: one JSON record per finished cell, written atomically, plus the tables.

Layout of results/<experiment>/:
  cells/<key>.json       one record per cell (status ok or error); local cache, not committed
  cells/quarantine/      damaged records moved aside (never deleted)
  runs.csv.gz, curves.csv, manifest.json, <figure>.png/.pdf   for the full profile
  profiles/<profile>/... the same tables and figures for any other profile
Every file is written to a temporary file in the same folder and renamed over the target
(os.replace is atomic on POSIX), so a crash never leaves a half-written file that a later read
trusts. The file gets the mode the umask gives a new file (mkstemp's 0600 is widened), and a
write whose bytes equal the file's leaves it untouched, so a rerun that changes nothing
changes no file. A record that fails to parse or lacks the fields its kind needs is reported
as damaged; `ResultStore.sweep` moves it aside so the cell is recomputed.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, Mapping

from dpbench.core.errors import DpbenchError


def _new_file_mode() -> int:
    """The mode `open(..., "w")` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _same_bytes(path: Path, tmp: str) -> bool:
    try:
        if path.stat().st_size != os.stat(tmp).st_size:
            return False
        return path.read_bytes() == Path(tmp).read_bytes()
    except OSError:
        return False


def atomic_write_bytes_via(path: str | os.PathLike, writer: Callable[[str], Any]) -> bool:
    """Call writer(tmp_path) and rename the result over `path` (for matplotlib, pandas).

    Returns whether `path` changed: identical bytes leave the existing file (and its mtime) alone.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix + ".tmp")
    os.close(fd)
    try:
        writer(tmp)
        if _same_bytes(path, tmp):
            os.unlink(tmp)
            return False
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, _new_file_mode())
        os.replace(tmp, path)
        return True
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # a failed write() names no file: name it
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> bool:
    """Write `text` to `path` atomically (see atomic_write_bytes_via); returns whether it changed."""
    data = text.encode()
    return atomic_write_bytes_via(path, lambda tmp: Path(tmp).write_bytes(data))


@contextlib.contextmanager
def exclusive(lock: str | os.PathLike, what: str, folder: str | os.PathLike) -> Iterator[None]:
    """Hold the file `lock` exclusively for the block, on behalf of `folder` (what it protects): a
    second process that asks while it is held gets a DpbenchError saying who holds it, instead of
    computing the same cells side by side. The lock is the OS's (flock), released when its holder
    exits, a killed one included, so it is never left stuck; the file itself stays (its content
    names the last holder). No locking where the OS has no flock (the block runs unlocked)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise DpbenchError(f"{folder} is being written by {holder}; wait for it to finish (every cell it stores "
                               f"is reused), or point --results at another folder") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{what} (pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')})")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def record_problem(record: Any, key: str, required: Mapping[str, type] = MappingProxyType({})) -> str | None:
    """Why a parsed record cannot be used for cell `key` (None when it can): it must be a mapping
    with this key and status ok or error, and an ok record must hold each `required` field with a
    value of its type."""
    if not isinstance(record, dict):
        return f"not a record (a JSON {type(record).__name__})"
    if record.get("key") != key:
        return f"its key {record.get('key')!r} is not the file's"
    status = record.get("status")
    if status not in ("ok", "error"):
        return f"status {status!r} (expected ok or error)"
    if status == "ok":
        missing = [f for f in required if f not in record]
        if missing:
            return f"an ok record without {', '.join(missing)}"
        wrong = [f"{f} is {type(record[f]).__name__}, expected {t.__name__}" for f, t in required.items()
                 if not isinstance(record[f], t)]
        if wrong:
            return ", ".join(wrong)
    return None


class ResultStore:
    """Per-cell records of one experiment, keyed by the cell's hash."""

    def __init__(self, root: str | os.PathLike, required: Mapping[str, type] = MappingProxyType({})):
        """`required`: fields (and their types) an ok record must hold to be usable."""
        self.root = Path(root)
        self.required = required
        self.cells_dir = self.root / "cells"
        self.quarantined: list[tuple[str, str, Path]] = []  # (key, reason, where it went) by `sweep`

    def path(self, key: str) -> Path:
        return self.cells_dir / f"{key}.json"

    def read(self, key: str) -> tuple[dict | None, str | None]:
        """(record, None) for a usable record; (None, None) when absent; (None, reason) when damaged."""
        try:
            text = self.path(key).read_text()
        except FileNotFoundError:
            return None, None
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"unreadable ({exc.__class__.__name__}: {exc})"
        try:
            record = json.loads(text)
        except ValueError as exc:
            return None, f"not valid JSON ({exc})" if text.strip() else "empty file"
        problem = record_problem(record, key, self.required)
        return (None, problem) if problem else (record, None)

    def get(self, key: str) -> dict | None:
        return self.read(key)[0]

    def sweep(self, key: str) -> str | None:
        """Move a damaged record of `key` aside (cells/quarantine/<key>.json.<n>) and return why it
        was damaged; None when the record is absent or usable. Nothing is deleted."""
        return self._sweep(key, self.read(key)[1])

    def _sweep(self, key: str, problem: str | None) -> str | None:
        if problem is None:
            return None
        folder = self.cells_dir / "quarantine"
        folder.mkdir(parents=True, exist_ok=True)
        n = 0
        while (target := folder / f"{key}.json.{n}").exists():
            n += 1
        os.replace(self.path(key), target)
        self.quarantined.append((key, problem, target))
        return problem

    def is_finished(self, key: str) -> bool:
        """A usable ok-record is stored for `key` (a damaged one is swept aside; one read)."""
        record, problem = self.read(key)
        self._sweep(key, problem)
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
