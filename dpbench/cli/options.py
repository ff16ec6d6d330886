"""What several `dpbench` verbs share: option help texts, the run options, parameter types and the
checks of a results folder and a scheduler made before any work."""

from __future__ import annotations

import os
from pathlib import Path

import click

from dpbench.core.errors import DpbenchError
from dpbench.core.validation import Integral, Interval, InvalidValue

RESULTS_HELP = "results root: each experiment's cells, tables and figures are in RESULTS/<experiment>/"


def results_option(more: str = ""):
    """The --results option every verb shares (one wording, DIRECTORY); `more` says what this verb
    reads or writes there."""
    return click.option("--results", default="results", show_default=True, type=click.Path(), metavar="DIRECTORY",
                        help=RESULTS_HELP + (f"; {more}" if more else ""))  # a file there: writable_folder says so
DATA_HELP = "folder with the raw UCI files in their UCI layout (default: $DPBENCH_DATA, else ./data)"


def progress_option(f):
    """--no-progress: every verb that reads or computes at length (cells, trials, downloads, pages)
    draws a progress bar on stderr; this flag turns it off (logs, CI)."""
    return click.option("--no-progress", is_flag=True, help="no progress bars (stderr)")(f)


class Checked(click.FloatRange):
    """A number option checked by a declared constraint (`dpbench.core.validation.Interval`), the
    same vocabulary and message as a spec value: `Invalid value for '--delta': must be < 1, got 2.0`
    (a usage error, exit 2). nan and inf are refused (not finite); --help shows FLOAT or INTEGER
    (after the constraint's kind) and its bounds in brackets, e.g. `[in (0, 1)]`, `[>= 1]`."""

    def __init__(self, constraint: Interval):
        super().__init__()
        self.constraint = constraint
        self.integral = constraint.kind is Integral
        self.name = "integer" if self.integral else "float"

    def convert(self, value, param, ctx):
        number = (click.INT if self.integral else click.FLOAT).convert(value, param, ctx)
        try:
            return self.constraint.check("", number)
        except InvalidValue as exc:
            self.fail(str(exc), param, ctx)

    def _describe_range(self) -> str:
        return self.constraint.bounds()


def check_scheduler(backend: str, scheduler: str | None) -> None:
    """--scheduler addresses a dask cluster: with another backend it would be ignored, so refuse it."""
    if scheduler and backend != "dask":
        raise DpbenchError(f"--scheduler {scheduler} needs --backend dask (got --backend {backend})")


def writable_folder(path: str, option: str = "--results") -> None:
    """Refuse, before any work, a folder that cannot hold results: a file, a path through a file,
    or a place the file system will not let us write (read-only, permission)."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise DpbenchError(f"{option} {path}: is a file, not a folder")
    existing = folder
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise DpbenchError(f"{option} {path}: {existing} is a file, so no folder can be made under it")
    if not os.access(existing, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only(existing) else "no write permission"
        raise DpbenchError(f"{option} {path}: cannot write in {existing} ({why}); point {option} at a writable "
                           f"folder")


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def load_spec(spec: str, profile: str):
    """The validated Experiment of a spec file under a named profile."""
    from dpbench.spec import experiment as spec_mod

    return spec_mod.load(spec, profile=profile)


DEVICE_HELP = ("where the trainings run: cpu (the numpy/numba path; what the stored references use), gpu (the JAX "
               "path on the first GPU for DP-SGD, DP-LSSGD, DP-GD, output and input perturbation, every other "
               "algorithm on the CPU path in the same run), jax-cpu (the JAX path on JAX's CPU build). The JAX "
               "path draws its own random numbers: its cells are stored under their own keys and never share a curve with the CPU "
               "path's. Needs pip install 'dpbench[jax]' (and 'jax[cuda12]' for gpu)")


def device_option(f):
    """--device (`dpbench.on_jax.device.DEVICES`)."""
    from dpbench.on_jax.device import DEVICES

    return click.option("--device", default="cpu", show_default=True, type=click.Choice(DEVICES),
                        help=DEVICE_HELP)(f)


def run_options(f):
    """The options of the verbs that run cells (run, check): profile, workers, backend, data, progress."""
    for option in reversed([
        click.option("--profile", default="full", show_default=True, help="named profile of the experiments (e.g. ci)"),
        click.option("--jobs", "-j", default=1, show_default=True, type=Checked(Interval(Integral, 1)),
                     help="parallel workers"),
        click.option("--backend", default="loky", show_default=True,
                     type=click.Choice(["loky", "threading", "sequential", "dask"]),
                     help="joblib backend; dask runs cells on a dask.distributed cluster"),
        click.option("--scheduler", default=None, metavar="ADDRESS",
                     help="dask scheduler address (tcp://host:8786); without it --backend dask starts a local "
                          "cluster of --jobs workers"),
        click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP),
        progress_option,
        click.option("--allow-large", is_flag=True,
                     help="run a grid of more than dpbench.spec.experiment.MAX_CELLS (50,000) cells "
                          "(refused otherwise)"),
    ]):
        f = option(f)
    return f
