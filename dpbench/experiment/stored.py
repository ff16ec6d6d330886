"""The committed tables read back: redraw figures and test claims without the per-cell store.

A results folder commits `runs.csv.gz` (every finished cell: `curves.runs_table` without the local
fit times), `curves.csv` and, where an algorithm records iterates, `trace_curves.csv.gz`; the
per-cell store `cells/` is local. `load_runs` reads the runs table back with the dtypes
`curves.runs_table` gives, so `curves.selected_by_metric` and `curves.curves_table` re-derive the
committed curves.csv from it (tests/experiment/test_render.py checks that, byte for byte as
`pipeline.render` writes it). `render_from_runs` is `dpbench plot SPEC --from-runs`: the
figures and curves.csv from those tables, nothing trained and no cell read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dpbench.analysis import curves as curves_mod
from dpbench.core.errors import DpbenchError
from dpbench.experiment.layout import CURVES_FILE, RUNS_FILE, TRACE_CURVES_FILE, output_folder

#: text columns of `curves.runs_table`; read as strings whatever they look like (a cell key such as
#: "1234e567..." would otherwise parse as a number, a label "NA" as missing)
RUNS_TEXT = ("key", "label", "algorithm", "dataset", "dataset_label", "model", "model_label", "problem",
             "dataset_panel", "params", "dp_claim", "privacy", "tuning", "selection", "plugin", "claim_basis",
             "dp_check")
#: text columns of `curves.curves_table`
CURVES_TEXT = ("label", "dataset_label", "model_label", "algorithm", "dataset_panel", "dataset", "model", "params",
               "selected_by", "dp_claim", "metric", "partial", "dp_check")
#: text columns of `curves.trace_curves`
TRACE_TEXT = ("label", "dataset_label", "model_label", "algorithm", "dataset_panel", "model", "metric", "dp_claim",
              "params")


class StoredTableError(DpbenchError):
    """A committed table the command needs is absent or unreadable."""


def _folder(exp, results: str | Path) -> Path:
    return output_folder(exp, results)


def _read(path: Path, text: tuple[str, ...]) -> pd.DataFrame:
    """A CSV with the `text` columns as strings ("" kept as "") and the others parsed by pandas."""
    header = pd.read_csv(path, nrows=0).columns
    strings = [c for c in header if c in text]
    return pd.read_csv(path, dtype={c: str for c in strings}, keep_default_na=False,
                       na_values={c: [""] for c in header if c not in strings})


def load_runs(exp, results: str | Path = "results") -> pd.DataFrame:
    """The runs table of experiment `exp` as committed: results/<exp>[/profiles/<p>]/runs.csv.gz read
    back with the dtypes `curves.runs_table` produces.

    One row per finished cell (and per spec entry naming it: two entries can share a cell), every
    column of `curves.runs_table` except `fit_seconds` (local, in timings.csv.gz), in the committed
    row order: cell key, labels, n_train/n_test/n_params, L*, metrics (train/val/test loss,
    accuracy, val_accuracy, estimation_error; optimality_gap and excess_population_risk as
    `runs_table` derives them), the privacy ledger summary (dp_claim, eps_rdp, eps_pld, ...,
    `privacy` as JSON), the hyperparameters as JSON (`params`), private-selection fields (draw,
    score, tuning) and `selection`. Floats are exact (the file is written with repr precision). It
    is the whole committed table: rows of cells the spec no longer has are kept (`coverage` tells
    them apart). `curves.selected_by_metric(runs, exp.metrics, exp.selection, exp.select_per)` and
    `curves.curves_table` give the committed curves.csv back. Raises StoredTableError when the file
    is absent.
    """
    path = _folder(exp, results) / RUNS_FILE
    if not path.is_file():
        raise StoredTableError(f"{path} not found: the committed runs table of {exp.name} [{exp.profile}] is what "
                               f"--from-runs and claims read; run `dpbench run {exp.source}` to compute the cells, "
                               f"or restore the file (git checkout -- {path})")
    try:
        runs = _read(path, RUNS_TEXT)
    except (OSError, ValueError, EOFError) as exc:
        raise StoredTableError(f"{path}: unreadable ({exc}); restore it (git checkout -- {path})") from None
    for column in ("tuning", "plugin", "claim_basis", "dp_check"):  # runs_table writes "" for a run without them
        if column in runs:
            runs[column] = runs[column].fillna("")
    for column in ("dp_claim",):  # None in runs_table (no claim in the ledger), "" on disk
        if column in runs:
            runs[column] = runs[column].replace("", np.nan)
    for column in ("weak_delta", "scaling_data_dependent"):
        if column in runs:
            runs[column] = runs[column].fillna(False).astype(bool)
    if "population_lstar" in runs and runs["population_lstar"].isna().all():
        runs["population_lstar"] = pd.Series([None] * len(runs), dtype=object)  # runs_table: None per row
    return runs


def load_traces(exp, results: str | Path = "results") -> pd.DataFrame | None:
    """The committed per-iteration curves (results/<exp>/trace_curves.csv.gz, `curves.trace_curves`),
    or None where the experiment has none. Tables written before `params`, `ci_low`, `ci_high`
    existed lack them (`complete_traces` adds them)."""
    path = _folder(exp, results) / TRACE_CURVES_FILE
    if not path.is_file():
        return None
    return _read(path, TRACE_TEXT).replace({"dp_claim": {"": np.nan}})


def load_curves(exp, results: str | Path = "results") -> pd.DataFrame | None:
    """The committed curves.csv of `exp` (what its PNG figures drew), text columns as strings; None
    when the experiment has none (an audit-only experiment, or nothing run yet)."""
    path = _folder(exp, results) / CURVES_FILE
    if not path.is_file():
        return None
    try:
        return _read(path, CURVES_TEXT)
    except (OSError, ValueError, EOFError) as exc:
        raise StoredTableError(f"{path}: unreadable ({exc}); restore it (git checkout -- {path}) or redraw it "
                               f"(dpbench plot {exp.source} --from-runs)") from None


def complete_traces(traces: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """A stored trace-curves table with the columns `curves.trace_curves` writes today: the 95%
    interval of each mean (`curves.with_ci`, from the stored mean, std and count) and the selected
    hyperparameters (`params`, from the curves table of the same metric: the same selection)."""
    out = traces.copy()
    if "params" not in out:
        keys = [*curves_mod.GROUP, "metric"]
        params = curves[[*keys, "params"]].drop_duplicates(keys)
        out = out.merge(params, on=keys, how="left")
    return curves_mod.with_ci(out)


@dataclass
class Coverage:
    """How a committed runs table covers the spec's grid: spec cells without a row (`missing`),
    rows of cells the spec no longer has (`stale`), optional data sets without a single row (skipped:
    their file was absent when the experiment ran)."""

    expected: int
    missing: list
    stale: int
    skipped: tuple[str, ...]

    def describe(self, limit: int = 5) -> str:
        shown = "; ".join(f"{c.key} {c.algorithm} {c.dataset_label or c.dataset} {c.model_label or c.model} "
                          f"eps={c.epsilon} rep={c.rep}" for c in self.missing[:limit])
        more = f"; and {len(self.missing) - limit} more" if len(self.missing) > limit else ""
        return f"{len(self.missing)} of {self.expected} cells have no row in the runs table: {shown}{more}"


def _identity(key, labels: dict) -> tuple:
    return key, labels["label"], labels["dataset_label"], labels["model_label"]


def coverage(exp, runs: pd.DataFrame) -> Coverage:
    """Compare a runs table with the spec's grid by (cell key, label, dataset label, model label)."""
    cells = exp.cells()
    have = set(zip(runs["key"], runs["label"], runs["dataset_label"], runs["model_label"])) if not runs.empty \
        else set()
    optional = {d.label for d in exp.datasets if d.optional}
    present = set(runs["dataset_label"]) if not runs.empty else set()
    skipped = tuple(sorted(optional - present))
    wanted = [c for c in cells if c.dataset_label not in skipped]
    spec = {_identity(c.key, c.labels()) for c in wanted}
    missing = [c for c in wanted if _identity(c.key, c.labels()) not in have]
    return Coverage(expected=len(wanted), missing=missing, stale=len(have - spec), skipped=skipped)


def in_spec(exp, runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of cells the spec still has (what a render from the cells would read)."""
    spec = {_identity(c.key, c.labels()) for c in exp.cells()}
    keep = [t in spec for t in zip(runs["key"], runs["label"], runs["dataset_label"], runs["model_label"])]
    return runs[keep].reset_index(drop=True)

#: relative and absolute tolerance under which two runs tables differ only by float noise (the last
#: bits that another CPU's BLAS or numba kernels change: 5e-10 relative on a loss, measured)
NOISE_RTOL, NOISE_ATOL = 1e-7, 1e-12


def _close_values(a, b) -> bool:
    """Two cell values equal up to float noise: numbers within the tolerance (NaN equal to NaN), JSON
    texts whose parsed numbers are, anything else equal."""
    if isinstance(a, str) and isinstance(b, str):
        if a == b:
            return True
        if a[:1] in "[{" and b[:1] in "[{":
            try:
                return _close_values(json.loads(a), json.loads(b))
            except ValueError:
                return False
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close_values(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close_values(x, y) for x, y in zip(a, b))
    if isinstance(a, (bool, np.bool_)) or isinstance(b, (bool, np.bool_)):
        return bool(a) == bool(b) and type(a) is type(b)
    if isinstance(a, (int, float, np.integer, np.floating)) and isinstance(b, (int, float, np.integer, np.floating)):
        return bool(np.isclose(float(a), float(b), rtol=NOISE_RTOL, atol=NOISE_ATOL, equal_nan=True))
    if a is None or b is None or (isinstance(a, float) and np.isnan(a)) or (isinstance(b, float) and np.isnan(b)):
        return (a is None or (isinstance(a, float) and np.isnan(a))) and (b is None or (isinstance(b, float) and np.isnan(b)))
    return a == b


def same_up_to_float_noise(new: pd.DataFrame, committed: pd.DataFrame) -> bool:
    """Whether a freshly built runs table holds the committed one's rows (same keys, columns and order)
    with every value equal up to float noise (`NOISE_RTOL`, `NOISE_ATOL`; JSON columns compared
    number by number)."""
    columns = [c for c in new.columns if c != "fit_seconds"]
    if list(committed.columns) != columns or len(new) != len(committed):
        return False
    if not (new["key"].to_numpy() == committed["key"].to_numpy()).all():
        return False
    for column in columns:
        a, b = new[column], committed[column]
        if a.dtype.kind in "fi" and b.dtype.kind in "fi":
            if not np.allclose(a.to_numpy(float), b.to_numpy(float), rtol=NOISE_RTOL, atol=NOISE_ATOL, equal_nan=True):
                return False
        elif not all(_close_values(x, y) for x, y in zip(a.tolist(), b.tolist())):
            return False
    return True


__all__ = ["load_runs", "load_curves", "load_traces", "complete_traces", "coverage", "in_spec",
           "same_up_to_float_noise", "StoredTableError", "Coverage"]
