"""What a new user hits: partial grids, damaged cell files, file system refusals, idempotent
reruns, file modes and orphaned workers. Each ordinary failure is one line and a known exit
code, and nothing already stored is lost."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpbench.cli.exits import EXIT_FILESYSTEM
from dpbench.cli.main import main
from dpbench.core import store
from dpbench.experiment import inventory, pipeline
from dpbench.spec import experiment as spec
from tests.conftest import TINY_SPEC

CI = ["--profile", "ci"]


def _run(args: list[str]):
    return CliRunner().invoke(main, args)


@pytest.fixture
def stored(tmp_path, tiny_spec, data_dir):
    """The tiny spec's full grid run once into tmp_path/results: (spec path, results, cells folder)."""
    results = tmp_path / "results"
    out = _run(["run", str(tiny_spec), "--results", str(results), "--data", str(data_dir), "--backend", "sequential",
                "--no-progress"])
    assert out.exit_code == 0, out.output
    return tiny_spec, results, results / "tiny" / "cells"


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()}


def _cell_files(cells: Path) -> list[Path]:
    return sorted(cells.glob("*.json"))


def test_plot_refuses_a_partial_grid_and_writes_nothing(stored, data_dir):
    path, results, cells = stored
    files = _cell_files(cells)
    files[0].write_text(files[0].read_text()[:80])  # truncated
    files[1].write_text("")  # emptied
    folder = results / "tiny"
    before = _snapshot(folder)
    out = _run(["plot", str(path), "--results", str(results), "--no-progress"])
    assert out.exit_code == 2
    assert out.stderr.startswith(f"error: tiny [full]: 2 of {len(files)} cells have no usable result")
    assert "damaged: empty file" in out.stderr and "not valid JSON" in out.stderr and "--partial" in out.stderr
    assert _snapshot(folder) == before  # not a byte, not an mtime

    partial = _run(["plot", str(path), "--results", str(results), "--no-progress", "--partial"])
    assert partial.exit_code == 0, partial.output
    note = f"partial: {len(files) - 2} of {len(files)} cells"
    curves = (folder / "curves.csv").read_text()
    assert note in curves
    assert json.loads((folder / "manifest.json").read_text())["partial"] == note


def test_damaged_cell_files_are_moved_aside_and_recomputed(stored, data_dir):
    path, results, cells = stored
    files = _cell_files(cells)
    good = json.loads(files[2].read_text())
    files[0].write_text("[]")
    files[1].write_text('{"status": "ok"}')
    files[2].write_text(json.dumps({**good, "metrics": None}))
    out = _run(["run", str(path), "--results", str(results), "--data", str(data_dir), "--backend", "sequential",
                "--no-progress"])
    assert out.exit_code == 0, out.output
    assert out.stderr.count("damaged cell record") == 3 and "recomputing it" in out.stderr
    assert f"{len(files)} total, 3 run" in out.stdout
    moved = sorted(p.name for p in (cells / "quarantine").iterdir())
    assert moved == sorted(f"{p.name}.0" for p in files[:3])  # moved, never deleted
    assert json.loads(files[2].read_text())["metrics"] == good["metrics"]  # recomputed: the same numbers


def test_record_problems_name_what_is_wrong():
    assert store.record_problem([], "k") == "not a record (a JSON list)"
    assert "key" in store.record_problem({"status": "ok"}, "k")
    assert "status" in store.record_problem({"key": "k", "status": "done"}, "k")
    assert store.record_problem({"key": "k", "status": "error"}, "k") is None
    needs = {"metrics": dict}
    assert "without metrics" in store.record_problem({"key": "k", "status": "ok"}, "k", needs)
    wrong = store.record_problem({"key": "k", "status": "ok", "metrics": 1}, "k", needs)
    assert wrong == "metrics is int, expected dict"


def test_a_rerun_that_changes_nothing_touches_no_file(stored, data_dir):
    path, results, _ = stored
    folder = results / "tiny"
    before = _snapshot(folder)
    out = _run(["run", str(path), "--results", str(results), "--data", str(data_dir), "--backend", "sequential",
                "--no-progress"])
    assert out.exit_code == 0, out.output
    assert _snapshot(folder) == before
    assert "fit_seconds" not in (folder / "runs.csv.gz").read_bytes().decode("latin-1")  # times: timings.csv.gz


def test_result_files_honour_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        store.atomic_write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert store.atomic_write_text(tmp_path / "a.txt", "x") is False  # same bytes: untouched
    assert store.atomic_write_text(tmp_path / "a.txt", "y") is True


def test_plot_trains_no_audit(tmp_path, data_dir):
    path = tmp_path / "aud.yaml"
    path.write_text(AUDIT_SPEC)
    results = tmp_path / "results"
    out = _run(["plot", str(path), "--results", str(results), "--no-progress"])
    assert out.exit_code == 2 and "no stored audits for aud [full]" in out.stderr, out.output
    assert not (results / ".cache" / "audits").exists()  # nothing trained, nothing written


def _read_only_mount(folder: Path) -> contextlib.AbstractContextManager:
    @contextlib.contextmanager
    def mounted():
        folder.mkdir(parents=True, exist_ok=True)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(folder)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a tmpfs here (needs root): the read-only case is not exercised")
        try:
            yield lambda: subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        finally:
            subprocess.run(["umount", str(folder)], capture_output=True)
    return mounted()


def test_a_read_only_results_folder_is_one_line_and_loses_nothing(tmp_path, tiny_spec, data_dir):
    with _read_only_mount(tmp_path / "ro") as make_read_only:
        results = tmp_path / "ro" / "results"
        args = ["--results", str(results)]
        assert _run(["run", str(tiny_spec), *args, "--data", str(data_dir), "--backend", "sequential",
                     "--no-progress"]).exit_code == 0
        cells = results / "tiny" / "cells"
        kept = {p.name: p.read_bytes() for p in cells.iterdir()}
        make_read_only()
        for verb in (["run"], ["run", "--force"], ["plot"]):
            extra = ["--data", str(data_dir), "--no-progress"] if verb[0] == "run" else []
            out = _run([*verb, str(tiny_spec), *args, *extra])
            assert out.exit_code == 2, (verb, out.output)
            assert out.stderr.count("\n") == 1 and "read-only file system" in out.stderr, (verb, out.stderr)
        assert {p.name: p.read_bytes() for p in cells.iterdir()} == kept


def test_a_full_disk_mid_run_is_one_line_and_keeps_what_was_stored(tmp_path, tiny_spec, data_dir, monkeypatch):
    real_put = store.ResultStore.put
    calls = []

    def put(self, record):
        calls.append(record["key"])
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path(record["key"])))
        real_put(self, record)

    monkeypatch.setattr(store.ResultStore, "put", put)
    results = tmp_path / "results"
    out = _run(["run", str(tiny_spec), "--results", str(results), "--data", str(data_dir), "--backend", "sequential",
                "--no-progress"])
    assert out.exit_code == EXIT_FILESYSTEM, out.output
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: cannot write or read ") and "No space left" in errors[0]
    assert "Traceback" not in out.stderr
    assert len(list((results / "tiny" / "cells").glob("*.json"))) == 3
    assert not list((results / "tiny" / "cells").glob(".*.tmp"))


def test_results_inside_a_regular_file_is_a_usage_error(tmp_path, tiny_spec):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    for target in (blocker, blocker / "sub"):
        out = _run(["run", str(tiny_spec), "--results", str(target), "--no-progress"])
        assert out.exit_code == 2 and out.stderr.startswith("error: --results") and "file" in out.stderr


def _children(pid: int) -> set[int]:
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_workers_exit_when_the_run_is_killed(tmp_path, data_dir):
    path = tmp_path / "long.yaml"
    path.write_text(TINY_SPEC.replace("epochs: 2", "epochs: 400").replace("seeds: 2", "seeds: 8")
                    .replace("name: tiny", "name: long"))
    cmd = [sys.executable, "-m", "dpbench.cli.main", "run", str(path), "--results", str(tmp_path / "r"), "--data",
           str(data_dir), "--jobs", "2", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        cells = tmp_path / "r" / "long" / "cells"
        deadline = time.time() + 120
        while time.time() < deadline and not list(cells.glob("*.json")):
            time.sleep(0.05)
        workers = _children(proc.pid)
        assert workers, "the run started no worker process"
        os.kill(proc.pid, signal.SIGKILL)  # the parent only, as `kill -9 PID` does
        proc.wait()
        deadline = time.time() + 20
        while time.time() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        assert not [w for w in workers if _alive(w)], "workers outlived the killed run"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def test_run_prints_the_size_of_the_work_before_it_starts(stored, data_dir):
    path, results, _ = stored
    out = _run(["run", str(path), "--results", str(results), "--data", str(data_dir), "--backend", "sequential",
                "--no-progress"])
    n = len(spec.load(path).cells())
    assert f"tiny[full]: {n} cells ({n} stored, 0 to run), 0 L* problems to solve" in out.stderr
    assert inventory.inventory(spec.load(path), results).missing == []


#: a non-private plugin whose every fit takes 0.3 s: a grid of it cannot finish before an interrupt
SLOW_PLUGIN = """
import time

import numpy as np

from dpbench.algorithms import Fit, algorithm, ledger
from dpbench.algorithms.base import NON_PRIVATE_LEDGER


@algorithm("slow_zeros", title="zeros after a pause", citation="a test of interrupts", private=False)
def fit_slow_zeros(problem, privacy, rng):
    time.sleep(0.3)
    return Fit(theta=np.zeros(problem.model.n_params), privacy=ledger(**NON_PRIVATE_LEDGER, method="pause"))
"""


def test_ctrl_c_is_one_line_keeps_what_was_stored_and_leaves_no_temporary_file(tmp_path, data_dir):
    (tmp_path / "slow.py").write_text(SLOW_PLUGIN)
    path = tmp_path / "long.yaml"  # 60 cells of 0.3 s on 2 workers: 9 s of work, interrupted after 3 cells
    path.write_text(TINY_SPEC.replace("  - name: dpsgd\n    params: {epochs: 2, batch_size: 32, lr: [0.5, 1.0]}",
                                      "  - {plugin: slow.py:fit_slow_zeros, label: slow, params: {}}")
                    .replace("seeds: 2", "seeds: 60").replace("  - name: nonprivate\n", "")
                    .replace("name: tiny", "name: long").replace("metrics: [accuracy, optimality_gap]",
                                                                 "metrics: [accuracy]"))
    results = tmp_path / "r"
    cmd = [sys.executable, "-m", "dpbench.cli.main", "run", str(path), "--results", str(results), "--data",
           str(data_dir), "--jobs", "2", "--no-progress"]
    # a terminal's Ctrl-C reaches a process that handles SIGINT; a test started in the background
    # (`make test &`) would hand down SIGINT ignored, so the child gets the default handling back
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        cells = results / "long" / "cells"
        deadline = time.time() + 120
        while time.time() < deadline and len(list(cells.glob("*.json"))) < 3:
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)  # what a Ctrl-C in the terminal sends
        _, err = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    # the last line, even when loky's resource tracker (a process that outlives the command and
    # holds stderr open, so communicate() waits for it) cleaned up a semaphore of a killed worker
    assert err.strip().splitlines()[-1].startswith("interrupted: every result finished before is stored"), err
    assert "resource_tracker" not in err, err
    assert "Traceback" not in err
    stored = list(cells.glob("*.json"))
    assert len(stored) >= 3 and all(json.loads(p.read_text())["status"] == "ok" for p in stored)
    assert not list(results.rglob(".*.tmp"))


def test_run_with_failed_cells_draws_only_with_partial_and_marks_it(tmp_path, tiny_spec, data_dir, monkeypatch):
    real = pipeline.run_cell

    def flaky(cell, context):
        if cell.algorithm == "dpsgd" and cell.rep == 1 and cell.epsilon == 0.5:
            raise RuntimeError("injected failure")
        return real(cell, context=context)

    monkeypatch.setattr(pipeline, "run_cell", flaky)
    results = tmp_path / "results"
    out = _run(["run", str(tiny_spec), "--results", str(results), "--data", str(data_dir), "--backend", "sequential",
                "--no-progress"])
    assert out.exit_code == 1, out.output
    assert "2 cell(s) failed" in out.stderr and "RuntimeError: injected failure" in out.stderr
    lines = [line for line in out.stderr.splitlines() if "injected failure" in line]
    assert len(lines) == 2 and any(" lr=0.5" in line for line in lines) and any(" lr=1.0" in line for line in lines)
    assert "figures and tables not drawn: 2 cell(s) failed" in out.stderr and "--partial" in out.stderr
    assert not (results / "tiny" / "curves.csv").exists()  # nothing drawn without the failed cells unsaid
    out = _run(["run", str(tiny_spec), "--results", str(results), "--data", str(data_dir), "--backend", "sequential",
                "--no-progress", "--partial"])
    assert out.exit_code == 1, out.output
    n = len(spec.load(tiny_spec).cells())
    note = f"partial: {n - 2} of {n} cells"
    folder = results / "tiny"
    assert (folder / "curves.csv").read_text().splitlines()[1].endswith(note)
    assert json.loads((folder / "manifest.json").read_text())["partial"] == note


AUDIT_SPEC = """
name: aud
audits:
  dataset: breast_cancer
  rows: 100
  trials: 20
  epsilons: [1]
  algorithms: [{name: dpsgd, label: DP-SGD, params: {epochs: 1}}]
"""


def test_audit_tables_are_the_same_bytes_from_two_fresh_runs(tmp_path, data_dir):
    path = tmp_path / "aud.yaml"
    path.write_text(AUDIT_SPEC)
    tables = []
    for name in ("a", "b"):
        out = _run(["run", str(path), "--results", str(tmp_path / name), "--data", str(data_dir), "--backend",
                    "sequential", "--no-progress"])
        assert out.exit_code == 0, out.output
        tables.append((tmp_path / name / "aud" / "audits.csv").read_bytes())
    assert tables[0] == tables[1]
    assert b"seconds" not in tables[0].splitlines()[0]  # times differ on every run: shown, not stored


def test_a_damaged_audit_chunk_is_left_alone_by_plot_and_retrained_by_run(tmp_path, data_dir):
    path = tmp_path / "aud.yaml"
    path.write_text(AUDIT_SPEC)
    results = tmp_path / "results"
    args = ["--results", str(results)]
    run = ["run", str(path), *args, "--data", str(data_dir), "--backend", "sequential", "--no-progress"]
    assert _run(run).exit_code == 0
    chunks = results / ".cache" / "audits" / "cells"
    damaged = sorted(chunks.glob("*.json"))[0]
    damaged.write_text('{"status": "ok"}')
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    plot = _run(["plot", str(path), *args])
    assert plot.exit_code == 2 and "1 damaged" in plot.stderr, plot.output
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == before  # nothing moved or written

    again = _run(run)
    assert again.exit_code == 0, again.output
    assert f"damaged audit chunk {damaged.name}" in again.stderr
    assert (chunks / "quarantine" / f"{damaged.name}.0").read_text() == '{"status": "ok"}'
    assert json.loads(damaged.read_text())["status"] == "ok"


def test_the_cli_gives_numpy_one_blas_thread(tmp_path):
    """OpenBLAS fixes its thread count when numpy is imported, and importing dpbench.cli.main imports
    numpy: with more than one thread, cells run in the parent (--jobs 1) got other last digits."""
    probe = """
import ctypes, glob, os, sys
import dpbench.cli.main, numpy
libs = glob.glob(os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs", "*openblas*"))
for lib in libs:
    for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads"):
        get = getattr(ctypes.CDLL(lib), name, None)
        if get is not None:
            print(get()); sys.exit(0)
print("unknown")
"""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    if out.stdout.strip() == "unknown":
        pytest.skip("numpy here is not linked against a bundled OpenBLAS whose thread count we can ask")
    assert out.stdout.strip() == "1"


def test_many_damaged_records_are_summed_up_after_the_first_ones(tmp_path):
    cells = store.ResultStore(tmp_path)
    cells.cells_dir.mkdir()
    keys = [f"k{i:02d}" for i in range(13)]
    for key in keys:
        cells.path(key).write_text("")
    assert all(cells.sweep(key) == "empty file" for key in keys)
    lines: list[str] = []
    pipeline._report_quarantined([cells], lines.append)
    assert len(lines) == 11 and lines[-1].startswith("... and 3 more damaged cell records moved to")
    assert sorted(p.name for p in (cells.cells_dir / "quarantine").iterdir()) == [f"{k}.json.0" for k in keys]
    assert cells.quarantined == []


_LEAK_ONE_SEMAPHORE = """
import sys
from joblib.externals.loky.backend import resource_tracker
from dpbench.run import runner
if sys.argv[1] == "quiet":
    runner._quiet_resource_tracker()
resource_tracker.ensure_running()
resource_tracker.register("/dpbench-test-never-created", "semlock")  # what a killed worker leaves
"""


@pytest.mark.parametrize("mode", ["loud", "quiet"])
def test_the_resource_trackers_cleanup_warnings_are_silenced_only_by_the_runners_filter(mode):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONWARNINGS"}
    # the tracker inherits stderr and outlives the script: run() returns once it has exited too
    err = subprocess.run([sys.executable, "-c", _LEAK_ONE_SEMAPHORE, mode], env=env, capture_output=True,
                         text=True, timeout=60).stderr
    if mode == "loud":  # the control: loky does warn about (and unlink) the leaked semaphore
        assert "resource_tracker: There appear to be 1 leaked semlock" in err, err
    else:
        assert err == "", err


def test_one_run_per_results_folder_and_a_killed_run_leaves_no_stuck_lock(tmp_path, tiny_spec, data_dir):
    """A second run into a folder another run is writing is refused with one line (exit 2) before
    any work; the lock is the OS's, so a holder killed with SIGKILL leaves the folder free."""
    from dpbench.core.store import exclusive

    results = tmp_path / "r"
    args = ["run", str(tiny_spec), "--results", str(results), "--data", str(data_dir), "--no-progress",
            "--profile", "ci"]
    lock = results / ".cache" / "tiny.lock"
    with exclusive(lock, "a dpbench run", results / "tiny"):
        busy = CliRunner().invoke(main, args)
    assert busy.exit_code == 2, busy.output
    assert "is being written by a dpbench run (pid" in busy.output and "Traceback" not in busy.output
    assert not list((results / "tiny").glob("cells/*.json"))  # refused before any cell ran
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom dpbench.core.store import exclusive\n"
                               f"with exclusive({str(lock)!r}, 'a holder', {str(results / 'tiny')!r}):\n"
                               "    print('held', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert CliRunner().invoke(main, args).exit_code == 2
        holder.kill()  # SIGKILL: no cleanup runs
        holder.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            holder.kill()
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
