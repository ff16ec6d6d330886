"""Run cells in parallel with joblib and store each result the moment it arrives.

The runner knows nothing about algorithms: it takes objects with a `.key`, a picklable
`work(cell) -> dict` function and a ResultStore; optionally a `Batching` (a key that says which
cells may run together, and `work_many(cells) -> [dict]`), under which the cells of one key go
to a worker as one task of at most `size` cells and each record is still stored on its own.
Finished cells (status ok) are skipped unless `force`; a cell whose work raises is stored with status "error" and its traceback and does not
stop the others. Results arrive unordered (joblib `return_as="generator_unordered"`) and each
is written atomically in this process at once, so an interrupted run loses only cells that
were still running. Backends: any joblib backend (loky processes by default, threading,
sequential) or `dask` (a dask.distributed cluster through joblib's dask backend).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from joblib import Parallel, delayed, parallel_config
from tqdm.auto import tqdm

from dpbench.core.errors import DpbenchError
from dpbench.core.store import ResultStore

BACKENDS = ("loky", "threading", "sequential", "dask")


@dataclass(frozen=True)
class Batching:
    """Which cells may run as one task: `key(cell)` (None: alone) and `work(cells) -> [record]`,
    at most `size` cells a task. Records come back in the order of the cells."""

    key: Callable[[Any], Any]
    work: Callable[[list], list[dict]]
    size: int = 64


@dataclass
class RunSummary:
    total: int
    reused: int
    ran: int
    failed: list[dict] = field(default_factory=list)
    seconds: float = 0.0


_WORKER_READY = False  # this worker process has been set up by _worker_setup


def _worker_setup(parent_pid: int) -> None:
    """Once in each worker process that `parent_pid` started (loky): ignore SIGINT, so a Ctrl-C
    reaches only the parent, which stops the run in order (its workers would otherwise die
    mid-task and break the pool), and ask Linux to send SIGTERM when the parent dies (prctl
    PR_SET_PDEATHSIG), so a `kill -9` of `dpbench run` leaves no workers behind. Does nothing
    in the parent itself (threading, sequential) or in processes that run tasks outside their main
    thread (dask workers, which dask manages); the death signal only where prctl exists."""
    global _WORKER_READY
    if _WORKER_READY or os.getpid() == parent_pid:
        return
    _WORKER_READY = True
    if os.getppid() != parent_pid or threading.current_thread() is not threading.main_thread():
        return  # not a loky worker of ours (dask runs tasks in threads of workers it manages)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def _in_worker(fn: Callable[[Any], Any], item: Any, parent_pid: int) -> Any:
    """fn(item) in a worker set up by _worker_setup."""
    _worker_setup(parent_pid)
    return fn(item)


def _guarded(work: Callable[[Any], dict], cell: Any, parent_pid: int | None = None) -> dict:
    """Run one cell; turn an exception into an error record (never raises)."""
    if parent_pid is not None:
        _worker_setup(parent_pid)
    started = time.perf_counter()
    try:
        record = work(cell)
        record["status"] = "ok"
        record["error"] = None
    except Exception as exc:  # a failing cell must not stop the others
        record = {"key": cell.key, "status": "error", "error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc(), "cell": cell.identity() if hasattr(cell, "identity") else None}
    record["wall_seconds"] = time.perf_counter() - started
    return record


def _guarded_batch(work_many: Callable[[list], list[dict]], work: Callable[[Any], dict], cells: list,
                   parent_pid: int | None = None) -> list[dict]:
    """Run cells as one batch; if the batch raises, run each cell alone (so one bad cell is named
    and the others are kept). Never raises; the batch's wall time is shared among its records."""
    if parent_pid is not None:
        _worker_setup(parent_pid)
    started = time.perf_counter()
    try:
        records = work_many(cells)
        if len(records) != len(cells):
            raise RuntimeError(f"a batch of {len(cells)} cells gave {len(records)} records")
    except Exception:  # fall back to the cells one at a time: each gets its own record or error
        return [_guarded(work, cell) for cell in cells]
    seconds = (time.perf_counter() - started) / len(cells)
    for record in records:
        record["status"] = "ok"
        record["error"] = None
        record["wall_seconds"] = seconds
    return records


def _tasks(todo: list, batching: Batching | None) -> list[list]:
    """The cells to run, as tasks: one cell each, or the cells of one batch key (at most `size`),
    each task where its first cell stands, so the order of `todo` (e.g. by data set, which a
    worker's data memo relies on) is kept."""
    if batching is None:
        return [[cell] for cell in todo]
    open_tasks: dict[Any, list] = {}
    tasks: list[list] = []
    for cell in todo:
        key = batching.key(cell)
        if key is None:
            tasks.append([cell])
            continue
        task = open_tasks.get(key)
        if task is None or len(task) >= max(1, batching.size):
            task = open_tasks[key] = []
            tasks.append(task)
        task.append(cell)
    return tasks


def _delayed(task: list, work: Callable[[Any], dict], batching: Batching | None):
    if len(task) == 1 or batching is None:
        return delayed(_guarded)(work, task[0], os.getpid())
    return delayed(_guarded_batch)(batching.work, work, task, os.getpid())


_TRACKER_FILTER = "ignore:resource_tracker:UserWarning"


def _quiet_resource_tracker() -> None:
    """Silence the shutdown warnings of loky's resource tracker in the processes started from here.

    The tracker is a separate process (started with the first loky pool, inheriting this
    environment) that outlives the command. When a run is interrupted, joblib terminates the
    workers, and a worker killed while holding one of the pool's semaphores leaves it
    registered; at exit the tracker unlinks it itself and warns "resource_tracker: There appear
    to be 1 leaked semlock objects ...", after dpbench's one-line message and possibly after the
    shell prompt. The filter (added to PYTHONWARNINGS, which child processes read at start)
    matches only warnings whose message begins with "resource_tracker:"; nothing is left
    uncleaned, and this process's own warning filters are unchanged."""
    current = os.environ.get("PYTHONWARNINGS", "")
    if _TRACKER_FILTER not in current.split(","):
        os.environ["PYTHONWARNINGS"] = ",".join(part for part in (current, _TRACKER_FILTER) if part)


@contextlib.contextmanager
def _backend(backend: str, jobs: int, scheduler: str | None) -> Iterator[dict]:
    if backend not in BACKENDS:
        raise DpbenchError(f"--backend: unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "dask":
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise DpbenchError("--backend dask needs the dask extra: pip install 'dpbench[dask]'") from None
        if scheduler:
            client = Client(scheduler)
            cluster = None
        else:  # no address: a local cluster on loopback for this run
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, host="127.0.0.1",
                                   dashboard_address=None, processes=True)
            client = Client(cluster)
        try:
            with parallel_config(backend="dask"):
                yield {"n_jobs": -1}
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    else:
        if scheduler:
            raise DpbenchError("--scheduler only applies to --backend dask")
        if backend == "loky":
            _quiet_resource_tracker()
        with parallel_config(backend=backend):
            yield {"n_jobs": jobs}


def parallel_map(items: Sequence[Any], fn: Callable[[Any], Any], *, jobs: int = 1, backend: str = "loky",
                 scheduler: str | None = None, progress: bool = True, description: str = "tasks") -> list[Any]:
    """fn over items on the same backends as `run`, results in input order (for preparatory work)."""
    if not items:
        return []
    with _backend(backend, jobs, scheduler) as options:
        results = Parallel(return_as="generator", **options)(delayed(_in_worker)(fn, item, os.getpid())
                                                              for item in items)
        with tqdm(total=len(items), desc=description, unit="task", disable=not progress) as bar:
            out = []
            for result in results:
                out.append(result)
                bar.update(1)
    return out


def run(
    cells: Sequence[Any],
    work: Callable[[Any], dict],
    store: ResultStore,
    *,
    jobs: int = 1,
    backend: str = "loky",
    scheduler: str | None = None,
    force: bool = False,
    progress: bool = True,
    description: str = "cells",
    batching: Batching | None = None,
) -> RunSummary:
    """Run every cell not yet finished in `store`; return counts, failures and wall time.

    With `batching`, cells of one batch key run as one task (`Batching`); every record is stored
    the moment its task finishes, so an interrupted run loses only the tasks still running."""
    started = time.perf_counter()
    unique = list({cell.key: cell for cell in cells}.values())
    todo = unique if force else [c for c in unique if not store.is_finished(c.key)]
    summary = RunSummary(total=len(unique), reused=len(unique) - len(todo), ran=0)
    if todo:
        with _backend(backend, jobs, scheduler) as options, warnings.catch_warnings():
            # a failed store.put (disk full) ends the run with its own message; joblib's notes on
            # the results it then drops and the tasks it cancels would only repeat it
            warnings.filterwarnings("ignore", message=r".*tasks (have been successfully executed|which were still "
                                                      r"being processed)", category=UserWarning)
            parallel = Parallel(return_as="generator_unordered", **options)
            results = parallel(_delayed(task, work, batching) for task in _tasks(todo, batching))
            with tqdm(total=len(todo), desc=description, unit="cell", disable=not progress) as bar:
                try:
                    for result in results:
                        for record in result if isinstance(result, list) else [result]:
                            store.put(record)
                            summary.ran += 1
                            if record["status"] != "ok":
                                summary.failed.append(record)
                            bar.update(1)
                finally:
                    results.close()  # on an error, stop the workers here (inside the warnings filter)
    summary.seconds = time.perf_counter() - started
    return summary
