"""Stored cells (or the committed runs table) -> runs.csv.gz, curves.csv, figures, audits.csv,
claims and manifest: the `dpbench plot` step, which trains nothing."""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dpbench.analysis import curves as curves_mod
from dpbench.core.errors import DpbenchError
from dpbench.core.store import atomic_write_bytes_via, atomic_write_text
from dpbench.experiment import verified
from dpbench.experiment.audits import stored_audits
from dpbench.experiment.baselines import majority_rates
from dpbench.experiment.inventory import inventory, lost_draws, runs_and_selection
from dpbench.experiment.layout import (
    AUDIT_TIMINGS,
    CURVES_FILE,
    FIGURES_FILE,
    GROUP_COLUMNS,
    RUNS_FILE,
    TRACE_CURVES_FILE,
    IncompleteError,
    Outputs,
    output_folder,
    run_command,
    titled,
)
from dpbench.experiment.manifest import manifest, write_manifest
from dpbench.experiment.stored import (StoredTableError, complete_traces, coverage, in_spec, load_runs, load_traces,
                                       same_up_to_float_noise)
from dpbench.experiment.verdicts import audits_for_claims, claims_from, significant_marks, with_marks, write_claims
from dpbench.figures.audit import audit_figure
from dpbench.figures.kinds import FIGURES, FigureKind
from dpbench.run import runner
from dpbench.spec.experiment import Experiment, FigureSpec


def render(exp: Experiment, *, results: str | Path = "results", summary: runner.RunSummary | None = None,
           partial: bool = False, from_runs: bool = False, data_dir: str | None = None,
           progress: bool = False) -> Outputs:
    """Write runs.csv.gz, curves.csv, the figures and manifest.json into the output folder.

    Nothing is trained here (audits are read from their stored chunks). A grid with cells that
    have no usable result (not stored, failed, damaged) raises IncompleteError naming them and
    writes nothing, unless `partial`: then the figures' titles, curves.csv (column `partial`) and
    the manifest say "partial: k of n cells". Files whose bytes would not change are left alone,
    and the manifest is rewritten only when a result changed, so it describes the run that made
    the results; a runs table that equals the committed one up to float noise is replaced by it
    before anything is drawn (`_committed_within_noise`), so such a rerun changes no file. The per-cell table is gzipped (a few MB of privacy-ledger JSON per paper
    experiment shrinks about 14x; pandas reads it as it is: `pd.read_csv("runs.csv.gz")`); fit
    times go to the local timings.csv.gz, since they differ on every run.

    `from_runs`: curves.csv and the figures from the committed runs table instead of the cells
    (`render_from_runs`; the runs table, traces and manifest are left alone).
    `data_dir`: where the claims' screens and a figure's `baseline: majority` read the data sets'
    test labels (else majority.csv, which is brought up to date from them: `verdicts.majority_for`).
    `progress`: a bar over the stored cells read.
    """
    if from_runs:
        return render_from_runs(exp, results=results, partial=partial, data_dir=data_dir)
    folder = output_folder(exp, results)
    inv = inventory(exp, results, progress)
    records = inv.records
    if not records and inv.expected:  # never overwrite stored tables and figures (e.g. committed ones) with empty ones
        committed = (folder / RUNS_FILE).is_file()
        raise DpbenchError(f"no stored cells for {exp.name} [{exp.profile}] under {results}/; "
                           + (f"redraw from its committed runs table with `{run_command(exp, results, 'plot')} --from-runs`, "
                              f"or run `{run_command(exp, results)}`" if committed else
                              f"run `{run_command(exp, results)}` first"))
    audit_list, audit_gaps = stored_audits(exp, results)
    if exp.audits and not audit_list and not records:
        raise DpbenchError(f"no stored audits for {exp.name} [{exp.profile}] under {results}/ ({audit_gaps[0]}); "
                           f"run `{run_command(exp, results)}` first")
    if (inv.missing or audit_gaps) and not partial:
        parts = ([inv.describe()] if inv.missing else []) + \
            ([f"{len(audit_gaps)} of {len(exp.audits)} audits are not fully stored ({audit_gaps[0]})"]
             if audit_gaps else [])
        raise IncompleteError(f"{exp.name} [{exp.profile}]: {'; '.join(parts)}. Nothing was written: run "
                              f"`{run_command(exp, results)}` to compute them, or pass --partial to draw what "
                              f"is stored")
    note = ""
    if inv.missing or audit_gaps:
        note = f"partial: {len(records)} of {inv.expected} cells" + \
            (f", {len(audit_list)} of {len(exp.audits)} audits" if exp.audits else "")
    runs, selected, data_files = runs_and_selection(exp, results, records, inv.missing)
    committed = _committed_within_noise(exp, results, runs) if records and not note else None
    if committed is not None:  # the committed results up to float noise: every table and figure drawn from them
        runs = committed
        selected = curves_mod.selected_by_metric(runs, exp.metrics, exp.selection, exp.select_per,
                                                 lost_draws(inv.missing))
    curves = curves_mod.curves_table(selected)
    if note and not curves.empty:
        curves = curves.assign(partial=note)
    long_traces = curves_mod.traces_table(records)
    traces = curves_mod.trace_curves(selected, long_traces)
    audits = pd.DataFrame([r.row() for r in audit_list])
    # before the tables are written: verdicts that cannot be computed (no majority-class rate) raise here
    verdicts = claims_from(exp, selected, audits if not audits.empty else None, data_dir, results=results)
    folder.mkdir(parents=True, exist_ok=True)
    changed = []
    if records:  # an audit-only experiment has no grid and writes no runs/curves tables
        timed = [c for c in ("fit_seconds",) if c in runs]
        changed.append(write_csv_gz(folder / RUNS_FILE, runs.drop(columns=timed)))
        if timed:
            write_csv_gz(folder / "timings.csv.gz", runs[["key", *GROUP_COLUMNS, "rep", *timed]])  # local
        changed.append(atomic_write_bytes_via(folder / CURVES_FILE,
                                              lambda tmp: curves.to_csv(tmp, index=False, float_format="%.10g")))
    if not traces.empty:  # per-iteration curves of the selected fits (algorithms with trace_every)
        changed.append(write_csv_gz(folder / TRACE_CURVES_FILE, traces, float_format="%.6g"))
    if not long_traces.empty:  # every traced cell, every step and metric (local, like cells/)
        named = long_traces.merge(runs[["key", "label", "dataset_label", "model_label", "epsilon", "rep", "params"]],
                                  on="key")
        write_csv_gz(folder / "traces.csv.gz", named, float_format="%.6g")
    write_claims(exp, verdicts, results)
    figures = draw_figures(exp, curves, traces, folder, note=note, skipped=inv.skipped, data_dir=data_dir,
                           marks=significant_marks(verdicts), results=results)
    if not audits.empty:  # table + claimed-vs-audited figure (the diagonal: above it, a broken claim)
        table = audits.drop(columns=[c for c in AUDIT_TIMINGS if c in audits])  # same audits, same bytes
        if note:
            table = table.assign(partial=note)
        changed.append(atomic_write_bytes_via(folder / "audits.csv",
                                              lambda tmp: table.to_csv(tmp, index=False, float_format="%.6g")))
        title = titled(exp.description, note)
        figures += _drawn_unless_recorded(folder, "audit", _digest_of(table, [title]),
                                          lambda: audit_figure(audits, folder / "audit", title=title))
    write_manifest(folder / "manifest.json", manifest(exp, runs, summary, data_files, note), any(changed))
    return Outputs(folder=folder, runs=runs, curves=curves, figures=figures, audits=audits, claims=verdicts)


def _committed_within_noise(exp: Experiment, results: str | Path, runs: pd.DataFrame) -> pd.DataFrame | None:
    """The committed runs table when the freshly built one differs from it only by float noise
    (`stored.same_up_to_float_noise`: another CPU's kernels change the last bits of a loss), else
    None. Drawing from it leaves runs.csv.gz, curves.csv, the figures and the manifest byte for byte
    as committed: a rerun of unchanged code on another machine leaves the checkout clean."""
    try:
        committed = load_runs(exp, results)
    except StoredTableError:
        return None
    return committed if same_up_to_float_noise(runs, committed) else None


def draw_figures(exp: Experiment, curves: pd.DataFrame, traces: pd.DataFrame, folder: Path, *, note: str = "",
                 skipped: tuple[str, ...] = (), data_dir: str | None = None,
                 marks: pd.DataFrame | None = None, results: str | Path | None = None) -> list[Path]:
    """Draw every figure of the spec (`figure_tables`) into `folder`; returns the figure files.

    A figure whose inputs (its rows at full precision, title, metric, options, the drawing code and
    matplotlib's version: `_digest_of`) are those recorded in FIGURES_FILE when its files were
    drawn is not drawn again: rasterising the same rows differs in a few pixels between machines, so
    a rerun that changes no number leaves the committed figures as they are."""
    figures: list[Path] = []
    order = [a.label for a in exp.algorithms]
    for shown in figure_tables(exp, curves, traces, note=note, skipped=skipped, data_dir=data_dir, marks=marks,
                               results=results):
        figures += _drawn_unless_recorded(
            folder, shown.figure.name,
            _digest_of(shown.table, [shown.title, shown.figure.metric, shown.figure.name, order,
                                     sorted(dict(shown.figure.options).items())]),
            lambda shown=shown: shown.kind.draw(shown.table, shown.figure.metric, folder / shown.figure.name,
                                                title=shown.title, algorithm_order=order,
                                                **dict(shown.figure.options)))
    return figures



def _recorded_figures(folder: Path) -> dict:
    try:
        recorded = json.loads((folder / FIGURES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


@functools.cache
def _drawing_code() -> str:
    """SHA-256 of the code that draws a figure (dpbench/figures/*.py; what this module passes it is in
    the rows and fields of `_digest_of`) and matplotlib's version."""
    import matplotlib

    from dpbench import figures as figures_pkg

    sha = hashlib.sha256(matplotlib.__version__.encode())
    for path in sorted(Path(figures_pkg.__file__).parent.glob("*.py")):
        sha.update(path.name.encode() + path.read_bytes())
    return sha.hexdigest()


def _digest_of(table: pd.DataFrame, fields: list) -> str:
    """What a figure is drawn from, as one SHA-256: its rows at full precision, the other `fields`
    (title, metric, options, ...) and the drawing code (`_drawing_code`)."""
    sha = hashlib.sha256(_drawing_code().encode())
    sha.update(table.to_csv(index=False).encode())
    sha.update(json.dumps(fields, default=str).encode())
    return sha.hexdigest()


def _drawn_unless_recorded(folder: Path, name: str, digest: str, draw) -> list[Path]:
    """The files of figure `name`: those recorded in FIGURES_FILE when its inputs' digest is the
    recorded one and they exist, else `draw()`'s (and the record updated)."""
    recorded = _recorded_figures(folder)
    known = recorded.get(name, {})
    files = [folder / f for f in known.get("files", [])]
    if known.get("inputs") == digest and files and all(f.is_file() for f in files):
        return files
    files = [Path(f) for f in draw()]
    recorded[name] = {"inputs": digest, "files": sorted(f.name for f in files)}
    atomic_write_text(folder / FIGURES_FILE, json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    return files


@dataclass(frozen=True)
class ShownFigure:
    """One figure of a spec with the rows it draws: the static figures (`draw_figures`) and the
    interactive report (dpbench.report.site) draw the same `table`."""

    figure: FigureSpec
    kind: FigureKind
    table: pd.DataFrame
    title: str


def figure_tables(exp: Experiment, curves: pd.DataFrame, traces: pd.DataFrame, *, note: str = "",
                  skipped: tuple[str, ...] = (), data_dir: str | None = None,
                  marks: pd.DataFrame | None = None, baseline: bool = True,
                  results: str | Path | None = None) -> list[ShownFigure]:
    """Each figure of the spec with the curves (or trace-curves) rows it shows and its title.

    A figure restricted to data sets some of which have no curve says so in its title (an optional
    data set skipped because its file was absent, or no results). A figure with `baseline:
    majority` gets the majority-class accuracy of each data set's test split as a column
    (`majority_accuracy`, from `majority_rates`: the data in `data_dir`, else majority.csv of the
    output folder under `results`; NaN, no line, where neither has it; `baseline=False` leaves it
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
        title = titled(fig.title, note)
        if fig.datasets is not None and not shown.empty:
            drawn = set(shown["dataset_label"]) | set(shown["dataset_panel"])
            absent = [d for d in fig.datasets if d not in drawn]
            if absent:
                why = ["optional data set, its file was absent when the experiment ran" if d in skipped
                       else "no results" for d in absent]
                title += " · no panel for " + "; ".join(f"{d} ({w})" for d, w in zip(absent, why))
        if marks is not None and not marks.empty and not shown.empty and kind.table != "traces":
            shown = with_marks(shown, marks)
        if baseline and dict(fig.options).get("baseline") == "majority" and not shown.empty:
            rates = majority_rates(exp, sorted(set(shown["dataset_label"])), data_dir, results)
            shown = shown.assign(majority_accuracy=shown["dataset_label"].map(rates))
        out.append(ShownFigure(figure=fig, kind=kind, table=shown, title=title))
    return out


def write_csv_gz(path: Path, table: pd.DataFrame, **to_csv) -> bool:
    """Gzipped CSV without a timestamp or file name in its header: the same table gives the same
    bytes, so a re-render leaves committed tables unchanged (atomic write; returns whether the
    file changed)."""
    data = gzip.compress(table.to_csv(index=False, **to_csv).encode(), mtime=0)
    return atomic_write_bytes_via(path, lambda tmp: Path(tmp).write_bytes(data))


def render_from_runs(exp, *, results: str | Path = "results", partial: bool = False, data_dir: str | None = None):
    """`dpbench plot SPEC --from-runs`: curves.csv and the figures from the committed runs table.

    The runs table (`load_runs`, restricted to the spec's cells) gives the curves exactly as the
    cells would (same selection, same aggregation); figures over iterations read the committed
    trace_curves.csv.gz (`complete_traces`). Writes curves.csv (left alone when its bytes would
    not change), the claims and the figures (and majority.csv where the data add to it:
    `verdicts.majority_for`); never runs.csv.gz, trace_curves.csv.gz or manifest.json (they
    describe the run that made the results). A spec cell without a row raises
    IncompleteError, writing nothing, unless `partial` (then titles and curves.csv say
    "partial: k of n cells", as `render` does); so does a claim without its majority-class rate
    (DataError). Audits are not redrawn. A declared run reads the verdict `dpbench verify SPEC` has
    kept for its settings since (`verified.annotate`), as `render` does.
    """
    folder = output_folder(exp, results)
    runs = load_runs(exp, results)
    cov = coverage(exp, runs)
    if cov.missing and not partial:
        raise IncompleteError(f"{exp.name} [{exp.profile}]: {cov.describe()}. Nothing was written: the "
                                       f"committed runs table does not cover this spec (run `dpbench run "
                                       f"{exp.source}`), or pass --partial to draw what it holds")
    note = f"partial: {cov.expected - len(cov.missing)} of {cov.expected} cells" if cov.missing else ""
    runs = verified.annotate(in_spec(exp, runs), exp, results)  # the verdicts of today's verify.csv
    selected = curves_mod.selected_by_metric(runs, exp.metrics, exp.selection, exp.select_per)
    curves = curves_mod.curves_table(selected)
    if note and not curves.empty:
        curves = curves.assign(partial=note)
    traces = load_traces(exp, results)
    traces = pd.DataFrame() if traces is None else complete_traces(traces, curves)
    audits = audits_for_claims(exp, results)
    verdicts = claims_from(exp, selected, audits, data_dir, results=results)  # may raise: before the tables
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes_via(folder / CURVES_FILE, lambda tmp: curves.to_csv(tmp, index=False, float_format="%.10g"))
    write_claims(exp, verdicts, results)
    figures = draw_figures(exp, curves, traces, folder, note=note, skipped=cov.skipped, data_dir=data_dir,
                           marks=significant_marks(verdicts), results=results)
    return Outputs(folder=folder, runs=runs, curves=curves, figures=figures, audits=None, claims=verdicts)
