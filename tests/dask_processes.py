"""A dask.distributed cluster of separate OS processes for tests: one scheduler, N workers.

Unlike `LocalCluster`, every process is started from the command line as on a real cluster
(`python -m distributed.cli.dask_scheduler` / `dask_worker`, which `dask scheduler` / `dask worker`
run, with this interpreter and so this environment's dpbench), each in its own session (process
group), with a free port on 127.0.0.1 and no dashboard. Workers run
without a nanny (`--no-nanny`), one thread each: the worker process is the one that runs tasks,
so `kill_worker` (SIGKILL to its process group) is a real loss that nothing restarts.

`dask_cluster(tmp_path, workers=2, env=...)` is a context manager that yields a `DaskProcesses`
once the scheduler reports every worker; on exit, even after an error, it stops every process it
started (SIGTERM to each process group, SIGKILL to whatever is still alive after a grace period)
and waits for them. The scheduler writes its address to a scheduler file in `tmp_path`; every
process's output goes to a log file there (quoted in the error when the cluster does not start).
As a safety net for a test process that is itself killed, workers give up after `--death-timeout`
without a scheduler and the scheduler after `--idle-timeout` without work.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

STARTUP_TIMEOUT = 60.0  # seconds for the scheduler file and for every worker to register
STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL on teardown
SAFETY_TIMEOUT = "600s"  # workers without a scheduler, the scheduler without work: they exit after this


def _log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _start(argv: list[str], log: Path, env: Mapping[str, str], cwd: Path) -> subprocess.Popen:
    """argv in a new session (its own process group), stdout and stderr to `log`."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=dict(env),
                                cwd=cwd, start_new_session=True)


def _stop(proc: subprocess.Popen, sig: int) -> None:
    """Send `sig` to proc's process group (proc leads it), if it still exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _stop_all(procs: list[subprocess.Popen], grace: float = STOP_GRACE) -> None:
    """SIGTERM every group, wait up to `grace` seconds in all, SIGKILL the rest; reap every process."""
    for proc in procs:
        if proc.poll() is None:
            _stop(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        _stop(proc, signal.SIGKILL)  # also any child left in a group whose leader has exited
        proc.wait()


@dataclass
class DaskProcesses:
    """A running cluster: the scheduler's `address`, its process, and one `Popen` per worker."""

    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen]
    directory: Path
    env: dict[str, str]
    _started: list[subprocess.Popen] = field(default_factory=list)

    def worker_pids(self) -> dict[str, int]:
        """{worker address: pid} of the workers the scheduler knows now."""
        from distributed import Client

        with Client(self.address, timeout=STARTUP_TIMEOUT, set_as_default=False) as client:
            return client.run(os.getpid)

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker i's process group and reap it: the worker dies mid-task, nothing restarts it."""
        proc = self.workers[i]
        _stop(proc, signal.SIGKILL)
        proc.wait()

    def start_worker(self, i: int | None = None) -> subprocess.Popen:
        """A fresh worker process, in slot i (replacing a dead one) or appended; returns it at once."""
        slot = len(self.workers) if i is None else i
        if i is not None and self.workers[i].poll() is None:
            raise RuntimeError(f"worker {i} (pid {self.workers[i].pid}) is still running")
        name = f"worker-{slot}.{len(self._started)}"  # never the name of a dead worker the scheduler may still list
        argv = [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--name", name, "--nthreads", "1",
                "--nworkers", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1", "--memory-limit", "0",
                "--local-directory", str(self.directory / name), "--death-timeout", SAFETY_TIMEOUT]
        proc = _start(argv, self.directory / f"worker-{slot}.log", self.env, self.directory)
        self._started.append(proc)
        if i is None:
            self.workers.append(proc)
        else:
            self.workers[i] = proc
        return proc

    def wait_for_workers(self, n: int | None = None, timeout: float = STARTUP_TIMEOUT) -> None:
        """Until the scheduler reports `n` workers (default: every slot); raises with the logs if not."""
        from distributed import Client

        n = len(self.workers) if n is None else n
        try:
            with Client(self.address, timeout=timeout, set_as_default=False) as client:
                client.wait_for_workers(n, timeout=timeout)
        except Exception as exc:
            logs = "\n".join(f"--- {log.name}\n{_log_tail(log)}" for log in sorted(self.directory.glob("*.log")))
            raise RuntimeError(f"the dask cluster at {self.address} did not reach {n} workers: {exc}\n{logs}") from exc

    def restore(self) -> None:
        """Replace every dead worker and wait until the scheduler reports all of them again."""
        for i, proc in enumerate(self.workers):
            if proc.poll() is not None:
                self.start_worker(i)
        self.wait_for_workers()


@contextlib.contextmanager
def dask_cluster(tmp_path: Path, workers: int = 2, env: Mapping[str, str] | None = None) -> Iterator[DaskProcesses]:
    """A scheduler on 127.0.0.1 (a free port) and `workers` worker processes, stopped on exit.

    The processes inherit this environment, updated with `env` and with one BLAS thread
    (OPENBLAS/OMP/MKL_NUM_THREADS=1, unless `env` says otherwise)."""
    directory = Path(tmp_path)
    directory.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ)
    environment.update({var: "1" for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    environment.update(env or {})
    scheduler_file = directory / "scheduler.json"
    started: list[subprocess.Popen] = []
    try:
        argv = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                "--no-dashboard", "--scheduler-file", str(scheduler_file), "--idle-timeout", SAFETY_TIMEOUT]
        scheduler = _start(argv, directory / "scheduler.log", environment, directory)
        started.append(scheduler)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        address = None
        while address is None:
            with contextlib.suppress(OSError, ValueError, KeyError):  # absent, or not fully written yet
                address = json.loads(scheduler_file.read_text())["address"]
            if address is None:
                if scheduler.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the dask scheduler did not start (exit status {scheduler.poll()}):\n"
                                       f"{_log_tail(directory / 'scheduler.log')}")
                time.sleep(0.05)
        cluster = DaskProcesses(address=address, scheduler=scheduler, workers=[], directory=directory,
                                env=environment, _started=started)
        for _ in range(workers):
            cluster.start_worker()
        cluster.wait_for_workers()
        yield cluster
    finally:
        # workers first (they would otherwise try to reconnect), then the scheduler
        _stop_all(started[1:])
        _stop_all(started[:1])
