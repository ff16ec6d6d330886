"""One experiment end to end: spec -> cells -> runner -> store -> runs/curves -> figures + manifest.

This is the orchestration the CLI verbs share (`run`, `plot`, and later `check`); it holds no
algorithm logic and no formulas.
"""

from __future__ import annotations

import functools
import gzip
import json
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from dpbench import curves as curves_mod
from dpbench import plots, runner
from dpbench.cells import RECORD_FIELDS, Cell, CellContext, optimum_path, prepare_optimum, run_cell
from dpbench.errors import DataError, DpbenchError, SpecError
from dpbench.figures import FIGURES, FigureKind
from dpbench.registry import resolve_paths
from dpbench.spec import DEFAULT_PROFILE, Experiment, FigureSpec
from dpbench.store import ResultStore, RoutedStore, atomic_write_bytes_via, atomic_write_text

RUNS_FILE = "runs.csv.gz"  # the per-cell table of an output folder
CURVES_FILE = "curves.csv"  # its curves (what the figures draw)
PACKAGES = ("numpy", "scipy", "pandas", "matplotlib", "joblib", "dp-accounting", "dpbench", "click", "pyyaml")


@dataclass
class Outputs:
    folder: Path
    runs: pd.DataFrame
    curves: pd.DataFrame
    figures: list[Path]
    audits: pd.DataFrame | None = None  # one row per audit (AuditResult.row())
    claims: list = field(default_factory=list)  # dpbench.claims.Verdict per claim of the spec


def experiment_root(exp: Experiment, results: str | Path) -> Path:
    return Path(results) / exp.name


def output_folder(exp: Experiment, results: str | Path) -> Path:
    root = experiment_root(exp, results)
    return root if exp.profile == DEFAULT_PROFILE else root / "profiles" / exp.profile


def preflight(exp: Experiment, data_dir: str | None, notify=None) -> frozenset[str]:
    """Load every dataset once so a missing or corrupt file, or a delta expression that fails at
    a dataset's training size, stops the run before any cell runs; likewise build every audit's
    game (its data and canary), so that e.g. `audits.rows` beyond the data is refused up front.

    An `optional: true` dataset whose file is absent is skipped instead: its label is returned
    and `notify` (default: print to stderr) is told why, so no result is silently missing.
    """
    from dpbench import data
    from dpbench.keys import evaluate_delta

    notify = notify or _stderr
    private = any(a.private for a in exp.algorithms)
    skipped = set()
    for ds in exp.datasets:
        try:
            options = resolve_paths(data.DATASETS.lookup(ds.name).params, dict(ds.options), ds.base)
            loaded = data.load(ds.name, seed=0, data_dir=data_dir, **options)
        except DataError as exc:
            if not ds.optional:
                raise
            skipped.add(ds.label)
            notify(f"{exp.name}: skipping optional dataset {ds.label}: {exc}")
            continue
        except ValueError as exc:
            raise DataError(f"datasets: {ds.label}: {exc}") from None
        if private:  # every cell of this dataset evaluates delta at its training size
            try:
                delta = evaluate_delta(exp.delta, loaded.n_train)
            except ValueError as exc:
                raise SpecError(f"delta: {exc} (dataset {ds.label} has n = {loaded.n_train} training rows)") from None
            if not 0 < delta < 1:
                raise SpecError(f"delta: {exp.delta!r} gives {delta:g} for dataset {ds.label} (n = {loaded.n_train} "
                                f"training rows); it must lie in (0, 1)")
    if exp.audits:
        from dpbench.audit import AuditError, build_game

        for setup in exp.audits:  # ms each: 0.6 s for the 68 audits of experiments/audit.yaml
            try:
                build_game(setup, data_dir=data_dir)
            except AuditError as exc:  # its message starts with the field: dataset, rows, params.<name>
                raise SpecError(f"audits.{exc}") from None
    return frozenset(skipped)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _report_quarantined(stores, notify, limit: int = 10) -> None:
    """One line per damaged record moved aside, the first `limit` of each store, then a count."""
    for store in stores:
        for key, reason, target in store.quarantined[:limit]:
            notify(f"damaged cell record {key}.json ({reason}): moved to {target}, recomputing it")
        if len(store.quarantined) > limit:
            notify(f"... and {len(store.quarantined) - limit} more damaged cell records moved to "
                   f"{store.cells_dir / 'quarantine'}, recomputing them")
        store.quarantined.clear()


def cache_dir(results: str | Path) -> Path:
    """L* per (data split, model) is shared by every experiment under the same results folder."""
    return Path(results) / ".cache"


def run_experiments(exps: list[Experiment], *, results: str | Path = "results", data_dir: str | None = None,
                    jobs: int = 1, backend: str = "loky", scheduler: str | None = None, force: bool = False,
                    progress: bool = True, notify=None) -> runner.RunSummary:
    """Run every cell of these experiments not stored yet (all with force), under one progress bar.

    A damaged stored record (unreadable, or missing what its kind needs) is moved aside to
    cells/quarantine/ and its cell recomputed; `notify` (default: stderr) is told which.
    """
    notify = notify or _stderr
    skipped = {exp.name: preflight(exp, data_dir) for exp in exps}
    routes: dict[str, list[ResultStore]] = {}
    cells = {}
    for exp in exps:
        store = ResultStore(experiment_root(exp, results), required=RECORD_FIELDS)
        for cell in exp.cells(skipped[exp.name]):
            routes.setdefault(cell.key, []).append(store)
            cells.setdefault(cell.key, cell)
    context = CellContext(data_dir=data_dir, cache_dir=str(cache_dir(results)))
    ordered = sorted(cells.values(), key=lambda c: (c.dataset, c.rep, c.model, c.algorithm))
    store = RoutedStore(routes)
    todo = ordered if force else [c for c in ordered if not store.is_finished(c.key)]
    _report_quarantined({s.root: s for stores in routes.values() for s in stores}.values(), notify)
    # L* phase: each (data split, model) once, in parallel over problems, before the cells that
    # need it (otherwise parallel workers compute the same non-convex L* estimate side by side)
    problems = {c.problem_key: c for c in todo if not optimum_path(c, context).exists()}
    names = ", ".join(f"{e.name}[{e.profile}]" for e in exps)
    notify(f"{names}: {len(ordered):,} cells ({len(ordered) - len(todo):,} stored, {len(todo):,} to run), "
           f"{len(problems):,} L* problems to solve")
    runner.parallel_map(list(problems.values()), functools.partial(prepare_optimum, context=context), jobs=jobs,
                        backend=backend, scheduler=scheduler, progress=progress, description="L* per problem")
    work = functools.partial(run_cell, context=context)
    summary = runner.run(ordered, work, store, jobs=jobs, backend=backend, scheduler=scheduler,
                         force=force, progress=progress, description=names if len(names) < 40 else "cells")
    for exp in exps:  # the experiments' distinguishing games (their trials are cached like cells)
        audit_results(exp, results=results, data_dir=data_dir, jobs=jobs, backend=backend, scheduler=scheduler,
                      progress=progress, force=force)
    return summary


def audit_results(exp: Experiment, *, results: str | Path = "results", data_dir: str | None = None, jobs: int = 1,
                  backend: str = "loky", scheduler: str | None = None, progress: bool = False,
                  force: bool = False) -> list:
    """dpbench.audit.AuditResult of every audit of the experiment (stored trials are reused)."""
    if not exp.audits:
        return []
    from dpbench.audit import run_audit

    return [run_audit(setup, data_dir=data_dir, results=results, jobs=jobs, backend=backend, scheduler=scheduler,
                      progress=progress, force=force) for setup in exp.audits]


def audit_points(exp: Experiment, results: str | Path, data_dir: str | None = None,
                 found: list | None = None) -> pd.DataFrame:
    """The audits' lower bounds as check points (metric epsilon_lower_bound, or
    one_run_epsilon_lower_bound for a one-run audit), and the multi-run audits' finite estimates
    (epsilon_estimate), one 'seed' each: an audit is a pure function of its setup, so its numbers
    are compared exactly like curve points. `found`: the audit results if already at hand."""
    from dpbench.check import POINT

    rows = []
    for r in found if found is not None else audit_results(exp, results=results, data_dir=data_dir):
        where = {"label": r.setup.label, "dataset_label": r.setup.dataset or r.setup.canary,
                 "model_label": r.setup.model, "epsilon": r.setup.epsilon, "rep": 0}
        one_run = r.setup.canaries is not None
        rows.append({**where, "metric": "one_run_epsilon_lower_bound" if one_run else "epsilon_lower_bound",
                     "value": r.epsilon_lower_bound})
        estimate = None if one_run else r.estimate
        if estimate is not None and np.isfinite(estimate[1]):  # a moved estimate shows e.g. a noise edit early
            rows.append({**where, "metric": "epsilon_estimate", "value": float(estimate[1])})
    return pd.DataFrame(rows, columns=[*POINT, "rep", "value"])


def run_experiment(exp: Experiment, **options) -> runner.RunSummary:
    return run_experiments([exp], **options)


def collect(exp: Experiment, results: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Runs table, curves table and the data files' hashes from this experiment's stored cells."""
    runs, selected, data_files = _runs_and_selection(exp, results)
    return runs, curves_mod.curves_table(selected), data_files


def seed_points(exp: Experiment, results: str | Path, data_dir: str | None = None) -> pd.DataFrame:
    """Per-seed values of every curve point (what `check` compares with the reference), the
    audits' bounds and estimates, and the claims' verdicts (metric "claim:<id>")."""
    from dpbench.check import seed_points as points

    _, selected, _ = _runs_and_selection(exp, results)
    parts = [points(selected)]
    found = audit_results(exp, results=results, data_dir=data_dir) if exp.audits else []
    if exp.audits:
        parts.append(audit_points(exp, results, data_dir, found=found))
    if exp.claims:  # a verdict that changes fails the check like a moved point
        from dpbench import claims as claims_mod

        audits = pd.DataFrame([r.row() for r in found]) if found else None
        parts.append(claims_mod.check_points(claims_from(exp, selected, audits)))
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0] if parts else points(selected)


def _runs_and_selection(exp: Experiment, results: str | Path,
                        records: list[dict] | None = None) -> tuple[pd.DataFrame, dict, dict]:
    records = inventory(exp, results).records if records is None else records
    data_files: dict = {}
    for record in records:
        data_files.update(record.get("data_files") or {})
    runs = curves_mod.runs_table(records)
    return runs, curves_mod.selected_by_metric(runs, exp.metrics, exp.selection), data_files


def reference_path(exp: Experiment, results: str | Path = "results") -> Path:
    return experiment_root(exp, results) / f"reference-{exp.profile}.csv"


@dataclass
class Inventory:
    """What the store holds of an experiment's grid: the usable records, and every expected cell
    that has none (with why: not stored, failed, damaged)."""

    records: list[dict]
    expected: int
    missing: list[tuple[Cell, str]]
    skipped: tuple[str, ...] = ()  # optional datasets without a single stored cell

    def describe(self, limit: int = 5) -> str:
        shown = "; ".join(f"{c.key} {c.algorithm} {c.dataset_label or c.dataset} {c.model_label or c.model} "
                          f"eps={c.epsilon} rep={c.rep} ({why})" for c, why in self.missing[:limit])
        more = f"; and {len(self.missing) - limit} more" if len(self.missing) > limit else ""
        return f"{len(self.missing)} of {self.expected} cells have no usable result: {shown}{more}"


def inventory(exp: Experiment, results: str | Path) -> Inventory:
    """Usable records of the experiment's cells, and the cells without one.

    An `optional: true` dataset none of whose cells is stored counts as skipped (its file was
    absent when the experiment ran), not as missing. Labels are not part of a cell's identity, so
    two entries of a spec (e.g. a figure's dataset and the matching point of a sweep) can share a
    stored cell; each gets its own record, named as the experiment names it.
    """
    store = ResultStore(experiment_root(exp, results), required=RECORD_FIELDS)
    cells = exp.cells()
    found: dict[str, tuple[dict | None, str | None]] = {c.key: store.read(c.key) for c in cells}
    optional = {d.label for d in exp.datasets if d.optional}
    present = {c.dataset_label for c in cells if found[c.key][0] is not None or found[c.key][1] is not None}
    skipped = tuple(sorted(optional - present))
    records, missing = [], []
    for cell in cells:
        if cell.dataset_label in skipped:
            continue
        record, problem = found[cell.key]
        if record is not None and record.get("status") == "ok":
            records.append({**record, **cell.labels()})
        elif record is not None:
            missing.append((cell, f"failed: {record.get('error')}"))
        else:
            missing.append((cell, f"damaged: {problem}" if problem else "not stored"))
    expected = sum(c.dataset_label not in skipped for c in cells)
    return Inventory(records=records, expected=expected, missing=missing, skipped=skipped)


def render(exp: Experiment, *, results: str | Path = "results", summary: runner.RunSummary | None = None,
           partial: bool = False, from_runs: bool = False, data_dir: str | None = None) -> Outputs:
    """Write runs.csv.gz, curves.csv, the figures and manifest.json into the output folder.

    Nothing is trained here (audits are read from their stored chunks). A grid with cells that
    have no usable result (not stored, failed, damaged) raises IncompleteError naming them and
    writes nothing, unless `partial`: then the figures' titles, curves.csv (column `partial`) and
    the manifest say "partial: k of n cells". Files whose bytes would not change are left alone,
    and the manifest is rewritten only when a result changed, so it describes the run that made
    the results. The per-cell table is gzipped (a few MB of privacy-ledger JSON per paper
    experiment shrinks about 14x; pandas reads it as it is: `pd.read_csv("runs.csv.gz")`); fit
    times go to the local timings.csv.gz, since they differ on every run.

    `from_runs`: curves.csv and the figures from the committed runs table instead of the cells
    (`dpbench.stored_tables.render_from_runs`; the runs table, traces and manifest are left alone).
    `data_dir`: where a figure's `baseline: majority` reads the data sets' test labels.
    """
    if from_runs:
        from dpbench.stored_tables import render_from_runs

        return render_from_runs(exp, results=results, partial=partial, data_dir=data_dir)
    folder = output_folder(exp, results)
    inv = inventory(exp, results)
    records = inv.records
    if not records and inv.expected:  # never overwrite stored tables and figures (e.g. committed ones) with empty ones
        raise DpbenchError(f"no stored cells for {exp.name} [{exp.profile}] under {results}/; "
                           f"run `{_run_command(exp, results)}` first")
    audit_list, audit_gaps = _stored_audits(exp, results)
    if exp.audits and not audit_list and not records:
        raise DpbenchError(f"no stored audits for {exp.name} [{exp.profile}] under {results}/ ({audit_gaps[0]}); "
                           f"run `{_run_command(exp, results)}` first")
    if (inv.missing or audit_gaps) and not partial:
        parts = ([inv.describe()] if inv.missing else []) + \
            ([f"{len(audit_gaps)} of {len(exp.audits)} audits are not fully stored ({audit_gaps[0]})"]
             if audit_gaps else [])
        raise IncompleteError(f"{exp.name} [{exp.profile}]: {'; '.join(parts)}. Nothing was written: run "
                              f"`{_run_command(exp, results)}` to compute them, or pass --partial to draw what "
                              f"is stored")
    note = ""
    if inv.missing or audit_gaps:
        note = f"partial: {len(records)} of {inv.expected} cells" + \
            (f", {len(audit_list)} of {len(exp.audits)} audits" if exp.audits else "")
    runs, selected, data_files = _runs_and_selection(exp, results, records)
    curves = curves_mod.curves_table(selected)
    if note and not curves.empty:
        curves = curves.assign(partial=note)
    long_traces = curves_mod.traces_table(records)
    traces = curves_mod.trace_curves(selected, long_traces)
    folder.mkdir(parents=True, exist_ok=True)
    changed = []
    if records:  # an audit-only experiment has no grid and writes no runs/curves tables
        timed = [c for c in ("fit_seconds",) if c in runs]
        changed.append(_write_csv_gz(folder / RUNS_FILE, runs.drop(columns=timed)))
        _write_csv_gz(folder / "timings.csv.gz", runs[["key", *GROUP_COLUMNS, "rep", *timed]])  # local
        changed.append(atomic_write_bytes_via(folder / CURVES_FILE,
                                              lambda tmp: curves.to_csv(tmp, index=False, float_format="%.10g")))
    if not traces.empty:  # per-iteration curves of the selected fits (algorithms with trace_every)
        changed.append(_write_csv_gz(folder / "trace_curves.csv.gz", traces, float_format="%.6g"))
    if not long_traces.empty:  # every traced cell, every step and metric (local, like cells/)
        named = long_traces.merge(runs[["key", "label", "dataset_label", "model_label", "epsilon", "rep", "params"]],
                                  on="key")
        _write_csv_gz(folder / "traces.csv.gz", named, float_format="%.6g")
    audits = pd.DataFrame([r.row() for r in audit_list])
    verdicts = claims_from(exp, selected, audits if not audits.empty else None)
    write_claims(exp, verdicts, results)
    figures = draw_figures(exp, curves, traces, folder, note=note, skipped=inv.skipped, data_dir=data_dir,
                           marks=significant_marks(verdicts))
    if not audits.empty:  # table + claimed-vs-audited figure (the diagonal: above it, a broken claim)
        table = audits.drop(columns=[c for c in AUDIT_TIMINGS if c in audits])  # same audits, same bytes
        if note:
            table = table.assign(partial=note)
        changed.append(atomic_write_bytes_via(folder / "audits.csv",
                                              lambda tmp: table.to_csv(tmp, index=False, float_format="%.6g")))
        figures += plots.audit_figure(audits, folder / "audit", title=_titled(exp.description, note))
    _write_manifest(folder / "manifest.json", manifest(exp, runs, summary, data_files, note), any(changed))
    return Outputs(folder=folder, runs=runs, curves=curves, figures=figures, audits=audits, claims=verdicts)


def draw_figures(exp: Experiment, curves: pd.DataFrame, traces: pd.DataFrame, folder: Path, *, note: str = "",
                 skipped: tuple[str, ...] = (), data_dir: str | None = None,
                 marks: pd.DataFrame | None = None) -> list[Path]:
    """Draw every figure of the spec (`figure_tables`) into `folder`; returns the written files."""
    figures: list[Path] = []
    order = [a.label for a in exp.algorithms]
    for shown in figure_tables(exp, curves, traces, note=note, skipped=skipped, data_dir=data_dir, marks=marks):
        figures += shown.kind.draw(shown.table, shown.figure.metric, folder / shown.figure.name, title=shown.title,
                                   algorithm_order=order, **dict(shown.figure.options))
    return figures


@dataclass(frozen=True)
class ShownFigure:
    """One figure of a spec with the rows it draws: the static figures (`draw_figures`) and the
    interactive report (dpbench.report) draw the same `table`."""

    figure: FigureSpec
    kind: FigureKind
    table: pd.DataFrame
    title: str


def figure_tables(exp: Experiment, curves: pd.DataFrame, traces: pd.DataFrame, *, note: str = "",
                  skipped: tuple[str, ...] = (), data_dir: str | None = None,
                  marks: pd.DataFrame | None = None, baseline: bool = True) -> list[ShownFigure]:
    """Each figure of the spec with the curves (or trace-curves) rows it shows and its title.

    A figure restricted to data sets some of which have no curve says so in its title (an optional
    data set skipped because its file was absent, or no results). A figure with `baseline:
    majority` gets the majority-class accuracy of each data set's test split as a column
    (`majority_accuracy`, from `majority_rates`, which reads the data; `baseline=False` leaves it
    out), since the tables do not carry the label balance.
    """
    out = []
    for fig in exp.figures:
        kind = FIGURES.lookup(fig.kind)
        table = traces if kind.table == "traces" else curves
        shown = table if fig.datasets is None or table.empty else \
            table[table["dataset_label"].isin(fig.datasets) | table["dataset_panel"].isin(fig.datasets)]
        shown = shown if fig.algorithms is None or shown.empty else shown[shown["label"].isin(fig.algorithms)]
        shown = shown if fig.models is None or shown.empty else shown[shown["model_label"].isin(fig.models)]
        title = _titled(fig.title, note)
        if fig.datasets is not None and not shown.empty:
            drawn = set(shown["dataset_label"]) | set(shown["dataset_panel"])
            absent = [d for d in fig.datasets if d not in drawn]
            if absent:
                why = ["optional data set, its file was absent when the experiment ran" if d in skipped
                       else "no results" for d in absent]
                title += " · no panel for " + "; ".join(f"{d} ({w})" for d, w in zip(absent, why))
        if marks is not None and not marks.empty and not shown.empty and kind.table != "traces":
            shown = _with_marks(shown, marks)
        if baseline and dict(fig.options).get("baseline") == "majority" and not shown.empty:
            rates = majority_rates(exp, sorted(set(shown["dataset_label"])), data_dir)
            shown = shown.assign(majority_accuracy=shown["dataset_label"].map(rates))
        out.append(ShownFigure(figure=fig, kind=kind, table=shown, title=title))
    return out


def majority_rates(exp: Experiment, dataset_labels: list[str], data_dir: str | None = None) -> dict[str, float]:
    """Per data set label, the accuracy of always predicting the majority class of the test split
    (its largest class share), averaged over the experiment's repetitions (each has its own split).

    The cell records keep n_test but not the label balance, so this reads the data (the cells'
    own splits, `cells.load_dataset`); a data set that cannot be loaded (file absent) or is not a
    +-1 classification set is left out, and its panels draw no line.
    """
    from dpbench.cells import load_dataset

    context = CellContext(data_dir=data_dir)
    first: dict[tuple[str, int], Cell] = {}
    for cell in exp.cells():
        if cell.dataset_label in dataset_labels:
            first.setdefault((cell.dataset_label, cell.rep), cell)
    shares: dict[str, list[float]] = {}
    for (label, _), cell in sorted(first.items()):
        try:
            y = np.asarray(load_dataset(cell, context).y_test)
        except (DpbenchError, OSError, ValueError):
            continue
        values, counts = np.unique(y, return_counts=True)
        if y.size and set(values.tolist()) <= {-1.0, 1.0}:
            shares.setdefault(label, []).append(float(counts.max() / y.size))
    return {label: float(np.mean(v)) for label, v in shares.items()}


GROUP_COLUMNS = ["label", "dataset_label", "model_label", "epsilon", "params"]
#: manifest fields that differ between two runs giving the same results
VOLATILE = ("created", "git", "last_run", "fit_seconds")
#: columns of an audit's row that differ between two runs of the same audit: shown by `run`, not
#: written to audits.csv
AUDIT_TIMINGS = ("seconds", "seconds_per_fit", "reused")


class IncompleteError(DpbenchError):
    """The stored results do not cover the experiment's grid (render without `partial`)."""


def _run_command(exp: Experiment, results: str | Path) -> str:
    """The `dpbench run` command line that computes this experiment's missing cells."""
    words = ["dpbench run", exp.source if not exp.source.startswith("<") else "SPEC"]
    if exp.profile != DEFAULT_PROFILE:
        words.append(f"--profile {exp.profile}")
    if Path(results) != Path("results"):
        words.append(f"--results {results}")
    return " ".join(words)


def _titled(title: str, note: str) -> str:
    return f"{title} [{note.upper()}]" if note else title


def _stored_audits(exp: Experiment, results: str | Path) -> tuple[list, list[str]]:
    """The experiment's audits from their stored trial chunks (nothing is trained), and a line for
    each audit that is not fully stored."""
    from dpbench.audit import AuditError, run_audit

    found, gaps = [], []
    for setup in exp.audits:
        try:
            found.append(run_audit(setup, results=results, progress=False, train=False))
        except AuditError as exc:
            gaps.append(str(exc))
    return found, gaps


def _write_manifest(path: Path, fresh: dict, results_changed: bool) -> None:
    """Write the manifest unless the results and its stable fields are those already on disk."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = None
    stable = {k: v for k, v in fresh.items() if k not in VOLATILE}
    if not results_changed and isinstance(old, dict) and \
            {k: v for k, v in old.items() if k not in VOLATILE} == json.loads(json.dumps(stable, default=str)):
        return
    atomic_write_text(path, json.dumps(fresh, indent=2, default=str))


def _write_csv_gz(path: Path, table: pd.DataFrame, **to_csv) -> bool:
    """Gzipped CSV without a timestamp or file name in its header: the same table gives the same
    bytes, so a re-render leaves committed tables unchanged (atomic write; returns whether the
    file changed)."""
    data = gzip.compress(table.to_csv(index=False, **to_csv).encode(), mtime=0)
    return atomic_write_bytes_via(path, lambda tmp: Path(tmp).write_bytes(data))


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5)
        if commit.returncode == 0:
            return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {"commit": None, "dirty": None}


def manifest(exp: Experiment, runs: pd.DataFrame, summary: runner.RunSummary | None, data_files: dict,
             partial: str = "") -> dict:
    """Provenance of a results folder: versions, git commit, spec hash, data file hashes, and
    whether the results cover the whole grid (`partial`)."""
    return {
        "experiment": exp.name,
        "profile": exp.profile,
        "source": exp.source,
        "spec_hash": exp.spec_hash,
        "spec": exp.resolved,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git": _git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {p: _version(p) for p in PACKAGES},
        "cells": {"total": len(exp.cells()), "finished": int(len(runs))},
        "partial": partial or None,
        "fit_seconds": round(float(runs["fit_seconds"].sum()), 1) if "fit_seconds" in runs else None,
        "last_run": None if summary is None else {"ran": summary.ran, "reused": summary.reused,
                                                   "failed": len(summary.failed),
                                                   "seconds": round(summary.seconds, 2)},
        "data": data_files,
    }


# =============================================================================================
# claims (dpbench.claims): verdicts of the experiment's `claims:` block
# =============================================================================================
def _selected_for_claims(exp: Experiment, results: str | Path) -> dict[str, pd.DataFrame]:
    """The selected runs per metric: from the stored cells, or, in a checkout without them, from
    the committed runs table (results/<exp>/runs.csv.gz, what a fresh clone has)."""
    records = inventory(exp, results).records
    if records:
        return _runs_and_selection(exp, results, records)[1]
    if not (output_folder(exp, results) / RUNS_FILE).is_file():
        return {}
    from dpbench.stored_tables import load_runs

    return curves_mod.selected_by_metric(load_runs(exp, results), exp.metrics, exp.selection)


def _audits_for_claims(exp: Experiment, results: str | Path) -> pd.DataFrame | None:
    """The audits table: from the stored audit chunks, else the committed audits.csv."""
    if not exp.audits:
        return None
    found, _ = _stored_audits(exp, results)
    if found:
        return pd.DataFrame([r.row() for r in found])
    path = output_folder(exp, results) / "audits.csv"
    return pd.read_csv(path) if path.is_file() else None


def claims_from(exp: Experiment, selected: dict[str, pd.DataFrame], audits: pd.DataFrame | None) -> list:
    """dpbench.claims.Verdict of the experiment's claims on these selected runs and audits table."""
    from dpbench import claims as claims_mod

    if not exp.claims:
        return []
    return claims_mod.evaluate(exp.claims, claims_mod.per_seed_points(selected), audits)


def significant_marks(verdicts: list) -> pd.DataFrame | None:
    """The points the figures mark (`dpbench.claims.significant_points`), or None without claims."""
    from dpbench import claims as claims_mod

    return claims_mod.significant_points(verdicts) if verdicts else None


def _with_marks(shown: pd.DataFrame, marks: pd.DataFrame) -> pd.DataFrame:
    """`shown` with column claim_mark: "+id" / "-id" (several joined by ", ") where a claim marks the point."""
    text = marks.assign(claim_mark=np.where(marks["holds"], "+", "-") + marks["claim"].astype(str))
    text = text.groupby(["label", "dataset_panel", "model_label", "epsilon", "metric"], as_index=False)[
        "claim_mark"].agg(", ".join)
    keyed = shown.assign(_eps=shown["epsilon"].astype(float).round(12))
    text = text.assign(_eps=text["epsilon"].astype(float).round(12)).drop(columns="epsilon")
    out = keyed.merge(text, on=["label", "dataset_panel", "model_label", "_eps", "metric"], how="left")
    return out.drop(columns="_eps")


def claim_verdicts(exp: Experiment, results: str | Path = "results") -> list:
    """dpbench.claims.Verdict of every claim of the experiment, from what is stored (nothing is trained)."""
    if not exp.claims:
        return []
    return claims_from(exp, _selected_for_claims(exp, results), _audits_for_claims(exp, results))


def write_claims(exp: Experiment, verdicts: list, results: str | Path = "results") -> list[Path]:
    """claims.csv and claims.md into the experiment's output folder (left alone when unchanged)."""
    from dpbench import claims as claims_mod

    if not verdicts:
        return []
    folder = output_folder(exp, results)
    folder.mkdir(parents=True, exist_ok=True)
    table = claims_mod.table(verdicts)
    atomic_write_bytes_via(folder / "claims.csv", lambda tmp: table.to_csv(tmp, index=False, float_format="%.6g"))
    text = f"# Claims of {exp.name} ({exp.paper or exp.description})\n\n" + claims_mod.markdown(verdicts)
    atomic_write_bytes_via(folder / "claims.md", lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return [folder / "claims.csv", folder / "claims.md"]
