"""The `dpbench` command line: run, plot, check, audit, list, data verify/fetch, privacy epsilon/calibrate.

Exit codes:
  0  done;
  1  cells failed (`run` lists them; the others are stored), or `check` found moved curves, or
     `data verify` / `data fetch` found a file missing or corrupt (fetch: also a network failure),
     or `bench --against opacus` found torch or opacus not installed (one line: how to install);
  2  a usage error: bad YAML, option or argument, missing data, a results folder that cannot be
     one (one line `error: ...`);
  3  the file system refused a write or read of results: read-only, full (ENOSPC), no
     permission (one line `error: ...` naming the file; what was stored before stays stored);
  130 interrupted (Ctrl-C): one line; finished results stay stored and a rerun resumes.
Anything else is a bug and shows a traceback.
"""

from __future__ import annotations

import errno
import math
import os
import sys
import time
from pathlib import Path

import click

#: the thread settings the user gave (before the defaults below): `bench --against opacus` gives torch
#: its own default thread count unless the user set one
_USER_THREAD_ENV = {v: os.environ[v] for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if v in os.environ}

# One BLAS thread per process: cells are small and run in parallel, so threads inside a cell only
# contend (measured 5-20x slowdowns), and the last bits of a BLAS sum depend on how many threads
# split it, so with --jobs 1 (cells in this process) a multi-threaded BLAS gave other digits than
# the workers. OpenBLAS reads this when numpy is first imported, which the import of
# dpbench.bench.suites below does: it must be set before. An explicit environment setting wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from dpbench.bench.suites import SUITES as BENCH_SUITES  # noqa: E402  (after the BLAS setting above)
from dpbench.core.errors import DpbenchError
from dpbench.spec.catalog import KINDS as CATALOG_KINDS  # noqa: E402

RESULTS_HELP = "folder that holds results/<experiment>/"
DATA_HELP = "folder with the raw UCI files in their UCI layout (default: $DPBENCH_DATA, else ./data)"


EXIT_USAGE = 2
EXIT_FILESYSTEM = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
#: what the file system says when it cannot hold results: these end in one line, not a traceback
_FILESYSTEM_ERRORS = {
    errno.ENOSPC: "the disk is full; free space and rerun: every cell stored before is reused",
    errno.EDQUOT: "the disk quota is exhausted; free space and rerun: every cell stored before is reused",
    errno.EROFS: "read-only file system; point --results at a writable folder",
    errno.EACCES: "permission denied; point --results at a folder you may write",
    errno.EPERM: "operation not permitted; point --results at a folder you may write",
    errno.ENOTDIR: "a part of this path is a file, not a folder",
    errno.EEXIST: "a file is in the way of a folder",
    errno.EISDIR: "a folder is in the way of a file",
}


def filesystem_error_line(exc: OSError) -> str:
    """One line for an OSError of _FILESYSTEM_ERRORS: what failed, where, and what to do."""
    where = exc.filename if exc.filename is not None else "(unknown file)"
    return f"cannot write or read {where}: {exc.strerror or exc} -- {_FILESYSTEM_ERRORS[exc.errno]}"


class _Group(click.Group):
    """A click group that turns DpbenchError into one line on stderr and exit code 2, and a file
    system refusal (read-only, full, not a folder, permission) into one line and exit code 3."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except DpbenchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        except OSError as exc:
            if exc.errno not in _FILESYSTEM_ERRORS:
                raise
            click.echo(f"error: {filesystem_error_line(exc)}", err=True)
            sys.exit(EXIT_FILESYSTEM)
        except KeyboardInterrupt:
            click.echo("interrupted: every result finished before is stored (cells, L* solutions, audit "
                       "chunks); rerun the same command to resume", err=True)
            sys.exit(EXIT_INTERRUPTED)


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses nan and inf (a usage error, exit 2, like other range errors).

    Shown as FLOAT in --help (its range in brackets), and `'abc' is not a valid float.`"""

    name = "float"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def _check_scheduler(backend: str, scheduler: str | None) -> None:
    """--scheduler addresses a dask cluster: with another backend it would be ignored, so refuse it."""
    if scheduler and backend != "dask":
        raise DpbenchError(f"--scheduler {scheduler} needs --backend dask (got --backend {backend})")


def _writable_folder(path: str, option: str = "--results") -> None:
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


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="dpbench")
def main() -> None:
    """dpbench: reproduce, compare and audit differentially private learning algorithms.

    \b
    Typical use:
      dpbench run experiments/quickstart.yaml          # run, aggregate, plot
      dpbench run experiments/quickstart.yaml --profile ci --jobs 2
      dpbench list                                     # algorithms, datasets, models
      dpbench privacy calibrate --epsilon 1 --delta 1e-5 --sampling-rate 0.01 --steps 1000
    """


def _load_spec(spec: str, profile: str):
    from dpbench.spec import experiment as spec_mod

    return spec_mod.load(spec, profile=profile)


def _run_options(f):
    for option in reversed([
        click.option("--profile", default="full", show_default=True, help="named profile of the experiments (e.g. ci)"),
        click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(min=1), help="parallel workers"),
        click.option("--backend", default="loky", show_default=True,
                     type=click.Choice(["loky", "threading", "sequential", "dask"]),
                     help="joblib backend; dask runs cells on a dask.distributed cluster"),
        click.option("--scheduler", default=None, metavar="ADDRESS",
                     help="dask scheduler address (tcp://host:8786); without it --backend dask starts a local "
                          "cluster of --jobs workers"),
        click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP),
        click.option("--no-progress", is_flag=True, help="no progress bar"),
        click.option("--allow-large", is_flag=True,
                     help="run a grid of more than dpbench.spec.experiment.MAX_CELLS (50,000) cells (refused otherwise)"),
    ]):
        f = option(f)
    return f


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SPEC...")
@_run_options
@click.option("--force", is_flag=True, help="recompute cells that are already stored")
@click.option("--results", default="results", show_default=True, type=click.Path(), help=RESULTS_HELP)
def run(specs, profile, jobs, backend, scheduler, data_dir, no_progress, allow_large, force, results) -> None:
    """Run experiments: every cell not stored yet, then curves, figures and manifest.

    Several SPECs run under one progress bar (`make figures` runs experiments/*.yaml). The
    number of cells and L* problems is printed before work starts; a grid of more than 50,000
    cells needs --allow-large. Finished cells are stored one by one as they finish
    (results/<experiment>/cells/), as are the L* solutions (results/.cache/), so an interrupted
    run resumes where it stopped and every stored result is reused; --force recomputes. A damaged
    cell file is moved to cells/quarantine/ and recomputed. Exits 1 if any cell failed (the
    failed cells are listed, the others kept, and the figures marked partial).
    """
    from dpbench.experiment import layout, pipeline, render
    from dpbench.spec.experiment import check_size

    _check_scheduler(backend, scheduler)
    exps = [_load_spec(spec, profile) for spec in specs]
    check_size(exps, allow_large)
    _writable_folder(results)
    started = time.perf_counter()
    summary = pipeline.run_experiments(exps, results=results, data_dir=data_dir, jobs=jobs, backend=backend,
                                       scheduler=scheduler, force=force, progress=not no_progress)
    for exp in exps:  # failed cells are listed below and exit 1; what is stored is drawn, marked partial
        out = render.render(exp, results=results, summary=summary, partial=bool(summary.failed), data_dir=data_dir)
        click.echo(f"== {exp.name} [{exp.profile}] (seeds: {exp.seeds_summary()})")
        _report(exp, out)
        tables = [name for name in (layout.RUNS_FILE, layout.CURVES_FILE, "audits.csv")
                  if (out.folder / name).is_file()]
        click.echo(f"results: {out.folder}/ ({', '.join(tables + ['manifest.json'])}, "
                   f"{', '.join(p.name for p in out.figures if p.suffix == '.png') or 'no figures'})")
        _claims_line(out)
    click.echo(f"cells: {summary.total} total, {summary.ran} run, {summary.reused} reused, "
               f"{len(summary.failed)} failed; wall time {time.perf_counter() - started:.1f} s")
    _exit_on_failures(summary)


def _verdict_counts(verdicts: list) -> str:
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in ("reproduced", "contradicted", "inconclusive", "no data"))


def _claims_line(out) -> None:
    """One line of the verdicts render wrote to claims.csv / claims.md (nothing without claims)."""
    if out.claims:
        click.echo(f"claims: {len(out.claims)} ({_verdict_counts(out.claims)}; claims.csv, claims.md)")


def _exit_on_failures(summary) -> None:
    if summary.failed:
        click.echo(f"{len(summary.failed)} cell(s) failed (stored with their tracebacks in cells/<key>.json; "
                   f"a rerun retries them):", err=True)
        for record in summary.failed:
            cell = record.get("cell") or {}
            what = " ".join(f"{k}={cell[k]}" for k in ("algorithm", "dataset", "model", "epsilon", "rep") if k in cell)
            click.echo(f"  {record['key']} {what}: {record['error']}", err=True)
        sys.exit(1)


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SPEC...")
@_run_options
@click.option("--update", is_flag=True, help="rewrite the stored reference from this run (deliberately)")
@click.option("--envelope/--no-envelope", default=True, show_default=True,
              help="with --update: rerun the profile under other CPU kernel settings (dpbench.analysis.check.FLOAT_VARIANTS) "
                   "and store each value's float envelope, so the check passes on any CPU")
@click.option("--k", "k", default=3.0, show_default=True, type=FiniteFloatRange(0),
              help="a moved curve point passes if its paired mean difference is within k standard errors")
@click.option("--reuse", is_flag=True,
              help="reuse cells stored under --results instead of recomputing in a temporary folder")
@click.option("--results", default="results", show_default=True, type=click.Path(),
              help="folder holding results/<experiment>/reference-<profile>.csv")
def check(specs, profile, jobs, backend, scheduler, data_dir, no_progress, allow_large, update, envelope, k, reuse,
          results) -> None:
    """Run a profile and compare its curves with the stored reference, seed by seed.

    The reference is results/<experiment>/reference-<profile>.csv (committed). Cells are
    recomputed in a temporary folder (a stored cell could predate the code under test) unless
    --reuse. A curve point passes if it is identical up to float noise, or if the per-seed
    differences from the reference average out within --k standard errors; a systematic move,
    a missing or a new point fails (exit 1) with a table of what moved.
    """
    import tempfile

    from dpbench.analysis import check as check_mod
    from dpbench.experiment import layout, pipeline
    from dpbench.experiment import variants as variants_mod
    from dpbench.experiment import verdicts as verdicts_mod
    from dpbench.spec.experiment import check_size

    _check_scheduler(backend, scheduler)
    exps = [_load_spec(spec, profile) for spec in specs]
    check_size(exps, allow_large)
    if update or reuse:
        _writable_folder(results)
    with tempfile.TemporaryDirectory(prefix="dpbench-check-") as scratch:
        where = results if reuse else scratch
        started = time.perf_counter()
        summary = pipeline.run_experiments(exps, results=where, data_dir=data_dir, jobs=jobs, backend=backend,
                                           scheduler=scheduler, progress=not no_progress)
        click.echo(f"cells: {summary.total} total, {summary.ran} run, {summary.reused} reused; "
                   f"{time.perf_counter() - started:.1f} s")
        _exit_on_failures(summary)
        variants = {}
        if update and envelope:
            for name in check_mod.FLOAT_VARIANTS:
                started = time.perf_counter()
                variants[name] = variants_mod.variant_points(exps, name, scratch, jobs=jobs, data_dir=data_dir)
                click.echo(f"float envelope: rerun under the {name} kernels in {time.perf_counter() - started:.1f} s")
        bad = 0
        for exp in exps:
            points = verdicts_mod.seed_points(exp, where, data_dir=data_dir)
            ref_path = layout.reference_path(exp, results)
            if update:
                points, sensitive = check_mod.write_reference(points, [found[exp.name] for found in variants.values()],
                                                              ref_path)
                click.echo(f"{exp.name} [{exp.profile}]: reference written to {ref_path} ({len(points)} values, "
                           f"{sensitive} float-sensitive)")
                continue
            table = check_mod.against_reference(
                points, ref_path, k=k, create_with=f"dpbench check {exp.source} --profile {exp.profile} --update")
            failures = check_mod.failed(table)
            bad += len(failures)
            verdict = "ok" if failures.empty else f"FAILED ({len(failures)} point(s) drifted, missing or new)"
            click.echo(f"== {exp.name} [{exp.profile}] vs {ref_path}: {verdict}")
            click.echo(check_mod.report(table, k))
    if bad:
        click.echo("the curves moved: if the change is deliberate, rerun with --update and commit the reference",
                   err=True)
        sys.exit(1)


def _report(exp, out) -> None:
    import pandas as pd

    from dpbench.analysis.curves import summary_table

    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_colwidth", 20):
        for metric in exp.metrics:
            table = summary_table(out.curves, metric)
            if not table.empty:
                click.echo(f"\n{metric} (mean ± std over seeds; columns: epsilon)")
                click.echo(table.to_string())
        if out.audits is not None and not out.audits.empty:
            click.echo("\naudits (lower bounds at the stated confidence; broken = lower bound above the claim; "
                       "estimate: GDP or measured mechanism, not a bound)")
            shown = [c for c in ("label", "method", "threat", "claimed_epsilon", "claim", "adjacency",
                                 "epsilon_lower_bound", "ceiling", "epsilon_estimate", "broken", "trials", "seconds")
                     if c in out.audits]
            click.echo(out.audits[shown].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    click.echo("")


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--profile", default="full", show_default=True, help="named profile of the experiment")
@click.option("--results", default="results", show_default=True, type=click.Path(), help=RESULTS_HELP)
@click.option("--partial", is_flag=True,
              help="draw what is stored even if cells or audits are missing (figures, curves.csv and the "
                   "manifest then say 'partial: k of n cells')")
@click.option("--from-runs", "from_runs", is_flag=True,
              help="redraw from the committed runs table (results/<exp>/runs.csv.gz, and trace_curves.csv.gz for "
                   "figures over iterations) instead of the per-cell store: rewrites curves.csv and the figures, "
                   "leaves runs.csv.gz, trace_curves.csv.gz and manifest.json alone; audits are not redrawn")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False),
              help="data folder a figure's `baseline: majority` reads the test labels from (default: "
                   "$DPBENCH_DATA, else ./data)")
def plot(spec, profile, results, partial, from_runs, data_dir) -> None:
    """Re-aggregate stored cells and audits and redraw the figures; trains nothing.

    If any cell of the grid has no usable stored result (not run, failed, damaged) or an audit is
    not fully stored, nothing is written and the missing cells are listed (exit 2), unless
    --partial. With --from-runs the committed tables stand in for the cells (a fresh clone has
    no cells/ folder); a spec cell without a row in runs.csv.gz counts as missing.
    """
    from dpbench.experiment import render

    exp = _load_spec(spec, profile)
    _writable_folder(results)
    # raises, writing nothing, on a partial grid (or, --from-runs, a runs table that is absent or short)
    out = render.render(exp, results=results, partial=partial, from_runs=from_runs, data_dir=data_dir)
    _report(exp, out)
    click.echo(f"figures: {', '.join(str(p) for p in out.figures)}")
    _claims_line(out)


@main.command()
@click.argument("spec", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--profile", default="full", show_default=True, help="profile of the spec (its results are read)")
@click.option("--results", default="results", show_default=True, type=click.Path(file_okay=False),
              help="results root the stored cells / tables are read from and claims.csv, claims.md written to")
@click.option("--markdown", is_flag=True, help="print claims.md (the README's table) instead of the short table")
@click.option("--readme", default=None, type=click.Path(exists=True, dir_okay=False),
              help="also write each table into this README between <!-- claims:NAME --> and <!-- /claims:NAME -->")
def claims(spec, profile, results, markdown, readme) -> None:
    """Verdicts of each experiment's `claims:` block: reproduced, contradicted or inconclusive.

    Every claim (a paper's or the README's sentence about a figure) is tested with paired
    statistics over seeds on what is stored: the cells, or, where they are absent, the committed
    runs.csv.gz and audits.csv (dpbench/claims.py: effect with a 95% CI, one-sided p-values, Holm
    across the claims of one experiment, the seeds an inconclusive claim would need). Trains
    nothing; writes claims.csv and claims.md next to the experiment's curves.
    """
    import pandas as pd

    from dpbench.analysis import claims as claims_mod
    from dpbench.core.store import atomic_write_text
    from dpbench.experiment import verdicts as verdicts_mod

    for path in spec:
        exp = _load_spec(path, profile)
        if not exp.claims:
            click.echo(f"{exp.name} [{exp.profile}]: no claims")
            continue
        verdicts = verdicts_mod.claim_verdicts(exp, results)
        written = verdicts_mod.write_claims(exp, verdicts, results)
        click.echo(f"== {exp.name} [{exp.profile}]: {len(verdicts)} claims: {_verdict_counts(verdicts)}")
        if markdown:
            click.echo(claims_mod.markdown(verdicts))
        else:
            shown = claims_mod.table(verdicts)[["id", "verdict", "effect", "ci_low", "ci_high", "p_holm",
                                                "p_contra_holm", "seeds", "seeds_needed", "where"]]
            with pd.option_context("display.width", 200, "display.max_colwidth", 40, "display.max_rows", 500):
                click.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        click.echo(f"written: {', '.join(str(p) for p in written)}")
        if readme:
            text = Path(readme).read_text(encoding="utf-8")
            try:
                text = claims_mod.fill_readme(text, exp.name, claims_mod.markdown(verdicts))
            except ValueError as exc:
                raise click.UsageError(f"--readme {readme}: {exc}") from None
            atomic_write_text(readme, text)
            click.echo(f"written: the {exp.name} table of {readme}")


@main.command(name="report")
@click.argument("spec", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--profile", default="full", show_default=True, help="profile of the specs (its stored tables are read)")
@click.option("--results", default="results", show_default=True, type=click.Path(file_okay=False),
              help="results root the stored tables are read from (results/<experiment>/curves.csv, runs.csv.gz, "
                   "audits.csv, claims.csv, manifest.json)")
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="folder the site is written to: index.html, <experiment>.html, assets/ (default: --results)")
@click.option("--baseline/--no-baseline", default=True, show_default=True,
              help="draw a figure's `baseline: majority` line (reads the data sets' test labels, as the PNG does)")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
def report_(spec, profile, results, out, baseline, data_dir) -> None:
    """Write a static HTML site: an index and one page per experiment; trains nothing.

    Each page shows the experiment's figures as interactive plots (hover a point for its value,
    interval, seeds, selected hyperparameters and guarantee; click it for the privacy ledger of
    its runs and the candidate hyperparameters; click a legend entry to hide a method; switch
    either axis between linear and log), the audits and claims tables and the provenance of the
    results. Everything comes from the stored tables the PNG figures come from. The site works
    offline from the file system: plotly.js is copied from the installed plotly package into
    <out>/assets/. An experiment with nothing stored is an error, and then nothing is written.
    """
    from dpbench.report import site as report

    experiments = [_load_spec(s, profile) for s in spec]
    target = out if out is not None else results
    _writable_folder(target, "--out" if out is not None else "--results")
    start = time.perf_counter()
    pages = report.build(experiments, results=results, out=target, notify=click.echo, baseline=baseline,
                         data_dir=data_dir)
    total = sum(p.bytes for p in pages)
    assets = sum(f.stat().st_size for f in (Path(target) / "assets").iterdir() if f.is_file())
    click.echo(f"{Path(target) / 'index.html'}: {len(pages)} pages ({total / 1e6:.1f} MB) and assets/ "
               f"({assets / 1e6:.1f} MB, plotly.js included) in {time.perf_counter() - start:.1f} s; open it in a browser")


@main.command(name="list")
@click.argument("what", required=False, type=click.Choice(CATALOG_KINDS))
@click.option("--plugin", "plugins_", multiple=True, metavar="REF",
              help="load a plugin first (path/to/file.py:object or package.module:object) so it is listed too; "
                   "repeatable")
@click.option("--markdown", is_flag=True, help="Markdown (docs/reference/components.md is this output)")
def list_(what, plugins_, markdown) -> None:
    """List the components dpbench knows, with their papers and declared parameters.

    Algorithms, data sets, models, canary recipes (audits) and figure kinds, each with every
    parameter's type, default, range and meaning. Components of installed packages (entry points)
    are named but not loaded until a spec or a command names them; --plugin loads a plugin file.
    """
    from dpbench.run import plugins
    from dpbench.spec import catalog

    for reference in plugins_:
        plugins.load(reference)
    click.echo("\n".join(catalog.lines(what, markdown=markdown)))


@main.group(cls=_Group)
def data() -> None:
    """The raw data files."""


@data.command()
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
def verify(data_dir) -> None:
    """Check the raw files against their known SHA-256 sums and print row counts.

    Exits 1 if a file is missing or does not match.
    """
    from dpbench import data as data_mod

    records = data_mod.verify(data_dir, include_absent_optional=True)
    click.echo(f"data folder: {data_mod.data_dir(data_dir)}")
    bad = 0
    for r in records:
        rows = "" if r.get("rows") is None else f"{r['rows']:>9,} rows"
        if r["actual_sha256"] is None and not r.get("required", True):
            status, rows = "absent", "(user-supplied; experiments skip it when absent)"
        elif r["actual_sha256"] is None:
            status = "MISSING"
        else:
            status = "ok" if r["ok"] or not r.get("required", True) else "MISMATCH"
        bad += status not in ("ok", "absent")
        click.echo(f"  {status:<9} {r['dataset']:<15} {r['file']:<52} {rows}")
        if status in ("MISSING", "MISMATCH") and r.get("source"):
            click.echo(f"  {'':<9} {'':<15} from {r['source']}")
    if not bad:
        click.echo("after cleaning (rows with missing values dropped; the papers' counts):")
        usable = {r["dataset"] for r in records} - {r["dataset"] for r in records if r["actual_sha256"] is None}
        for name in sorted(usable):
            ds = data_mod.load(name, seed=0, data_dir=data_dir)
            click.echo(f"  {name:<15} {ds.provenance['rows_clean']:>9,} rows, {ds.n_features} features "
                       f"(with intercept); labels: {ds.provenance.get('label_rule', '')}")
    if bad:
        click.echo(f"{bad} file(s) missing or corrupt; point --data or DPBENCH_DATA at a folder with the UCI "
                   f"layout (e.g. ../shared/data), or put the original files there (addresses above). With network "
                   f"access, loading a data set (any `dpbench run` that uses it) fetches Adult, Breast Cancer and "
                   f"Iris through ucimlrepo; it does not serve Bank's bank-additional-full or the KDDCup99 10% file; "
                   f"`dpbench data fetch` downloads every missing UCI file and checks it",
                   err=True)
        sys.exit(1)


@data.command()
@click.argument("names", nargs=-1, metavar="[NAMES]...")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
@click.option("--base-url", default=None, metavar="URL",
              help="mirror holding the same paths as the originals under URL (replaces https://archive.ics.uci.edu "
                   "and http://kdd.ics.uci.edu; default: $DPBENCH_DATA_URL, else the originals)")
@click.option("--no-progress", is_flag=True, help="no progress bars")
def fetch(names, data_dir, base_url, no_progress) -> None:
    """Download the original UCI files the papers used and verify their SHA-256.

    NAMES: adult, bank, kddcup99, breast_cancer, iris (default: all five) or credit_card (Kaggle,
    needs a login: only checked, never downloaded). A file already present with the right sum is
    not downloaded again; a download whose sum differs leaves nothing behind. Exits 1 on a
    network failure, a mismatch or a credit_card file that is absent (one line `error: ...`).
    """
    from dpbench.core.errors import DataError
    from dpbench.data import fetch as fetch_mod

    started = time.perf_counter()
    click.echo(f"data folder: {fetch_mod.uci.data_dir(data_dir)}")

    def line(rec) -> None:
        took = f"{rec.seconds:6.1f} s" if rec.status == "fetched" else ""
        click.echo(f"  {rec.status:<8} {rec.dataset:<14} {rec.file:<52} {rec.bytes:>11,} bytes {took}".rstrip())

    try:
        done = fetch_mod.fetch(names, data_dir, base_url=base_url, progress=not no_progress, report=line)
    except DataError as exc:  # network, mismatch, absent credit card: the data is not there
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    fetched = [r for r in done if r.status == "fetched"]
    click.echo(f"{len(fetched)} fetched ({sum(r.downloaded for r in fetched):,} bytes downloaded), "
               f"{len(done) - len(fetched)} present; {time.perf_counter() - started:.1f} s")


@main.group(cls=_Group)
def privacy() -> None:
    """The accountant on its own: epsilon of DP-SGD settings, or the noise for a target."""


def _privacy_inputs(sampling_rate, batch_size, n, steps, epochs):
    if sampling_rate is None:
        if batch_size is None or n is None:
            raise DpbenchError("give --sampling-rate, or --batch-size together with --n")
        if batch_size > n:
            raise DpbenchError(f"--batch-size {batch_size:g} is larger than --n {n}: the sampling rate B/n must be "
                               f"at most 1")
        sampling_rate = batch_size / n
    if steps is None:
        if epochs is None:
            raise DpbenchError("give --steps, or --epochs (with --sampling-rate or --batch-size/--n)")
        steps = max(1, round(epochs / sampling_rate))
    return sampling_rate, steps


_common = [
    click.option("--delta", required=True, type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
                 help="target delta of the (epsilon, delta) guarantee, in (0, 1)"),
    click.option("--sampling-rate", "-q", type=FiniteFloatRange(0, 1, min_open=True),
                 help="Poisson sampling rate q = B/n"),
    click.option("--batch-size", type=FiniteFloatRange(1), help="expected batch size B (with --n)"),
    click.option("--n", type=click.IntRange(1), help="training set size (with --batch-size)"),
    click.option("--steps", "-T", type=click.IntRange(1), help="number of noisy steps T"),
    click.option("--epochs", type=FiniteFloatRange(0, min_open=True), help="instead of --steps: T = epochs / q"),
]


def _with_common(f):
    for option in reversed(_common):
        f = option(f)
    return f


@privacy.command()
@click.option("--noise-multiplier", "-z", required=True, type=FiniteFloatRange(0, min_open=True),
              help="noise std / clipping norm")
@_with_common
def epsilon(noise_multiplier, delta, sampling_rate, batch_size, n, steps, epochs) -> None:
    """Epsilon spent by T steps of the Poisson-subsampled Gaussian (DP-SGD), by RDP and by PLD."""
    from dpbench.privacy import dpsgd_epsilon_report

    q, T = _privacy_inputs(sampling_rate, batch_size, n, steps, epochs)
    report = dpsgd_epsilon_report(noise_multiplier, q, T, delta)
    click.echo(f"q = {q:.6g}, T = {T}, z = {noise_multiplier:g}, delta = {delta:g} (add/remove-one adjacency)")
    for name, value in report.items():
        click.echo(f"  epsilon ({name.upper()}): {value:.6g}")


@privacy.command()
@click.option("--epsilon", "target", required=True, type=FiniteFloatRange(0, min_open=True), help="target epsilon")
@click.option("--accountant", default="rdp", show_default=True, type=click.Choice(["rdp", "pld"]))
@_with_common
def calibrate(target, accountant, delta, sampling_rate, batch_size, n, steps, epochs) -> None:
    """Smallest noise multiplier whose epsilon (by the chosen accountant) is within the target."""
    from dpbench.privacy import calibrate_dpsgd_noise, dpsgd_epsilon_report

    q, T = _privacy_inputs(sampling_rate, batch_size, n, steps, epochs)
    try:
        z = _with_elapsed(lambda: calibrate_dpsgd_noise(target, delta, q, T, accountant=accountant),
                          f"calibrating z by {accountant.upper()} (a small epsilon needs high RDP orders: minutes)")
    except ValueError as exc:
        raise DpbenchError(str(exc)) from None
    report = _with_elapsed(lambda: dpsgd_epsilon_report(z, q, T, delta), "epsilon of z by RDP and PLD")
    click.echo(f"q = {q:.6g}, T = {T}, target epsilon = {target:g}, delta = {delta:g}, calibrated by {accountant.upper()}")
    click.echo(f"  noise multiplier z = {z:.6g}")
    for name, value in report.items():
        click.echo(f"  epsilon spent ({name.upper()}): {value:.6g}")


def _with_elapsed(work, what: str, quiet_seconds: float = 2.0):
    """Run `work()`; if it takes longer than `quiet_seconds`, show `what` and the elapsed seconds on
    stderr until it returns (the accountant's bisection has no step count to show)."""
    import threading

    from tqdm.auto import tqdm

    done = threading.Event()
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in this thread
            outcome["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    if not done.wait(quiet_seconds):
        with tqdm(desc=what, unit="s", bar_format="{desc}: {elapsed}", file=sys.stderr) as bar:
            while not done.wait(1.0):
                bar.update(1)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _key_values(pairs, option: str) -> dict:
    """`k=v` strings -> dict; values parsed as int, float, true/false/null, else kept as strings."""
    out = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise DpbenchError(f"{option}: expected NAME=VALUE, got {pair!r}")
        text = text.strip()
        lowered = text.lower()
        value: object
        if lowered in ("true", "false"):
            value = lowered == "true"
        elif lowered in ("null", "none", "~"):
            value = None
        else:
            try:
                value = int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    value = text
        out[name.strip()] = value
    return out


@main.command()
@click.option("--algorithm", required=True,
              help="algorithm to audit: a registered name (see `dpbench list algorithms`) or a plugin reference "
                   "path/to/file.py:fit or package.module:fit (its code runs)")
@click.option("--dataset", default=None, help="dataset of the base rows (not for self-contained canaries such as "
                                              "pidp_constant)")
@click.option("--model", default="logreg", show_default=True, help="model (see `dpbench list models`)")
@click.option("--eps", "epsilon", default=None, type=FiniteFloatRange(0, min_open=True),
              help="target epsilon (required for a private algorithm)")
@click.option("--delta", default=1e-5, show_default=True, type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
              help="target delta (also the delta of the bound)")
@click.option("--trials", default=None, type=click.IntRange(min=4),
              help="trainings per side (some choose the test, the others estimate its error rates); required "
                   "unless --one-run")
@click.option("--one-run", is_flag=True,
              help="one training with --canaries canaries, each in with probability 1/2, and a lower bound from the "
                   "correct membership guesses (Steinke, Nasr, Jagielski 2023) instead of --trials trainings a side")
@click.option("--canaries", default=1000, show_default=True, type=click.IntRange(min=2),
              help="canaries of a --one-run audit")
@click.option("--guesses", default=None, type=click.IntRange(min=1),
              help="membership guesses of a --one-run audit, on the canaries with the highest and lowest scores "
                   "(default: a tenth of the canaries)")
@click.option("--canary", default="spare_feature", show_default=True,
              help="canary recipe (see `dpbench list canaries`)")
@click.option("--threat", default="final_model", show_default=True, type=click.Choice(["final_model", "all_updates"]),
              help="what the adversary sees: the trained model, or every noisy step (iterative algorithms; the "
                   "score is then the privacy loss of the whole transcript along the canary direction)")
@click.option("--threshold", default=None, type=click.Choice(["empirical", "gaussian"]),
              help="how the test is chosen on the selection runs: best count on half of them (empirical, default "
                   "for final_model) or best expected bound under normals fitted to a tenth (gaussian, default for "
                   "all_updates); either way the counted runs are others")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="algorithm hyperparameter (repeatable; "
              "overrides the canary recipe's recommended value)")
@click.option("--model-option", "model_options", multiple=True, metavar="NAME=VALUE", help="model option (repeatable)")
@click.option("--dataset-option", "dataset_options", multiple=True, metavar="NAME=VALUE",
              help="dataset option (repeatable)")
@click.option("--rows", default=None, type=click.IntRange(min=2), help="base rows (default: the recipe's, e.g. 1000)")
@click.option("--alpha", default=0.05, show_default=True, type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
              help="1 - confidence of the bound")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="seed of data and fits")
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(min=1), help="parallel workers")
@click.option("--backend", default="loky", show_default=True,
              type=click.Choice(["loky", "threading", "sequential", "dask"]), help="joblib backend (as for run)")
@click.option("--scheduler", default=None, metavar="ADDRESS", help="dask scheduler address (--backend dask)")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
@click.option("--results", default="results", show_default=True, type=click.Path(),
              help="fits are cached under RESULTS/.cache/audits")
@click.option("--force", is_flag=True, help="recompute cached fits")
@click.option("--no-progress", is_flag=True, help="no progress bar")
def audit(algorithm, dataset, model, epsilon, delta, trials, one_run, canaries, guesses, canary, threat, threshold,
          params, model_options, dataset_options, rows, alpha, seed, jobs, backend, scheduler, data_dir, results, force,
          no_progress) -> None:
    """Empirical lower bound on an algorithm's epsilon (ALGORITHMS.md §11), with estimates beside it.

    Trains the algorithm --trials times on data D0 and as often on D1 = D0 with one crafted
    canary record added (or swapped in, following the adjacency the algorithm claims), and
    scores each training: by what the model learnt about the canary (--threat final_model) or by
    the privacy loss of every noisy step (--threat all_updates). A threshold test chosen on some
    runs and counted on the others bounds epsilon from below with Clopper-Pearson confidence: a
    bound above the claimed epsilon refutes the claim. Beside it, two estimates that are not
    bounds: the Gaussian-DP estimate of the two score samples and, for all_updates, the epsilon
    of the per-step mechanism measured from the observed steps. --one-run trains once with
    --canaries canaries instead and bounds epsilon from the correct membership guesses.
    """
    from dpbench.audit import multi_run
    from dpbench.audit import setup as setup_mod
    from dpbench.run import plugins

    _check_scheduler(backend, scheduler)
    if one_run == (trials is not None):
        raise click.UsageError("give --trials (trainings a side) or --one-run (one training with --canaries), "
                               "exactly one of them")
    if guesses is not None and not one_run:
        raise click.UsageError("--guesses belongs to a --one-run audit")
    plugin = plugin_digest = None
    if ":" in algorithm:  # a plugin reference, relative to the current folder
        plugin = plugins.resolve(algorithm)
        algorithm = plugins.load(plugin).name
        plugin_digest = plugins.fingerprint(plugin)
    setup = setup_mod.AuditSetup.create(
        algorithm, plugin=plugin, plugin_digest=plugin_digest, params=_key_values(params, "--param"), dataset=dataset,
        dataset_options=_key_values(dataset_options, "--dataset-option"), model=model,
        model_options=_key_values(model_options, "--model-option"), epsilon=epsilon, delta=delta,
        trials=1 if one_run else trials, canary=canary, rows=rows, alpha=alpha, seed=seed, threat=threat,
        threshold=threshold, canaries=canaries if one_run else None, guesses=guesses)
    _writable_folder(results)
    result = multi_run.run_audit(setup, data_dir=data_dir, results=results, jobs=jobs, backend=backend,
                                 scheduler=scheduler, progress=not no_progress, force=force)
    click.echo(format_audit(result))


def format_audit(result) -> str:
    """The `dpbench audit` report of one AuditResult or OneRunAuditResult (a few lines)."""
    s = result.setup
    if s.canaries is not None:
        return _format_one_run(result)
    where = f"{s.dataset} ({result.rows} base rows)" if s.dataset else f"the recipe's own data ({result.rows} rows)"
    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.params.items()) \
        or "defaults"
    confidence = f"{100 * result.confidence:g}%"
    test = "above" if result.direction > 0 else "below"
    score = "the privacy loss of every noisy step along the canary direction" if result.threat == "all_updates" \
        else "a function of the trained model"
    lines = [
        f"audit: {s.algorithm} [{params}] on {where}, model {s.model}, canary {s.canary}, "
        f"adjacency {result.adjacency}, threat {result.threat} (score: {score})",
        f"claimed epsilon: {_claimed(result)}",
        f"audited lower bound: epsilon >= {result.epsilon_lower_bound:.3f} at {confidence} confidence "
        f"(ceiling {result.ceiling:.3f} for {result.n_evaluation} evaluation runs a side)",
        f"test: 'D1' when the score is {test} {result.threshold:.6g} (rule {result.threshold_rule}, chosen on "
        f"{result.n_selection} runs a side); on the other runs FPR = {result.fpr:.4g} (<= {result.fpr_upper:.4g}), "
        f"FNR = {result.fnr:.4g} (<= {result.fnr_upper:.4g})",
        *_estimate_lines(result),
        f"trials: {result.trials} per side ({2 * result.trials} fits, {result.chunks} chunks, {result.reused} reused; "
        f"{1000 * result.seconds_per_fit:.2f} ms per fit when run)",
        f"wall time: {result.seconds:.1f} s",
    ]
    return "\n".join(lines + _verdict(result))


def _verdict(result) -> list[str]:
    """The verdict line of an audit report (none when nothing is claimed)."""
    if result.broken:
        return [f"verdict: REFUTED -- the claimed epsilon {result.claimed_epsilon:g} is below the lower bound"]
    if result.claimed_epsilon is not None:
        return ["verdict: not refuted (the bound does not exceed the claimed epsilon)"]
    return []


def _claimed(result) -> str:
    s = result.setup
    if result.claimed_epsilon is None:
        return f"none ({s.algorithm} claims no epsilon; claim: {result.claim})"
    accounted = "" if result.accounted_epsilon is None else f"; the ledger's accountant: {result.accounted_epsilon:.3g}"
    return f"{result.claimed_epsilon:g} at delta = {s.delta:g} (claim: {result.claim}){accounted}"


def _format_one_run(result) -> str:
    """The `dpbench audit --one-run` report."""
    s, o = result.setup, result.outcome
    where = f"{s.dataset}" if s.dataset else "the recipe's own data"
    lines = [
        f"one-run audit: {s.algorithm} on {where}, model {s.model}, canary {s.canary} x {o.m} (each in with "
        f"probability 1/2; {result.rows} training rows), adjacency {result.adjacency}, threat {s.threat}",
        f"claimed epsilon: {_claimed(result)}",
        f"guesses: {o.k_pos} 'in' (highest scores), {o.k_neg} 'out' (lowest); correct {o.correct} of {o.r}",
        f"audited lower bound: epsilon >= {result.epsilon_lower_bound:.3f} at {100 * result.confidence:g}% "
        f"confidence (ceiling {result.ceiling:.3f} for {o.r} guesses among {o.m} canaries)",
        f"wall time: {result.seconds:.1f} s (training {result.fit_seconds:.1f} s, {result.reused} reused)",
    ]
    return "\n".join(lines + _verdict(result))


def _estimate_lines(result) -> list[str]:
    """The estimates of `format_audit` (not bounds: each says what it assumes)."""
    lines = []
    g, m = result.gdp, result.measured
    level = f"{100 * result.confidence:g}%"
    if g is not None:
        lines.append(f"GDP estimate (assumes a Gaussian trade-off curve; not a bound): mu = {g.mu:.3f}, "
                     f"epsilon ~ {g.epsilon:.3f} [{g.epsilon_low:.3f}, {g.epsilon_high:.3f}] ({level} bootstrap)")
    if m is not None:
        lines.append(f"measured mechanism (assumes the declared per-step form; not a bound): noise std x "
                     f"{m.noise_ratio:.3f} of declared, record in a step with rate {m.rate:.3f}, {m.steps:g} steps: "
                     f"epsilon ~ {m.epsilon:.3f} [{m.epsilon_low:.3f}, {m.epsilon_high:.3f}]")
    return lines


@main.command()
@click.option("--suite", "suites", multiple=True, type=click.Choice(tuple(BENCH_SUITES)),
              help="suite to run (repeatable; default: all); what each measures: dpbench/bench.py")
@click.option("--against", type=click.Choice(["opacus"]), default=None,
              help="instead of the suites: dpbench's DP-SGD steps (the steps suite) side by side with Opacus "
                   "(hooks and ghost clipping) per model and batch size, and their ratio; needs the optional "
                   "extra: pip install torch==2.13.0 'dpbench[opacus]' (dpbench/bench_opacus.py)")
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(1), help="best of this many runs")
@click.option("--output", default="results/bench.json", show_default=True, type=click.Path(dir_okay=False),
              help="where the JSON records go")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
def bench(suites, against, repeats, output, data_dir) -> None:
    """Speed benchmarks: print a table and write results/bench.json (machine info + records).

    With --against opacus: the steps suite (logreg and mlp, B in 1, 64, 256, 1024; dpbench in
    float64 on one BLAS thread) and the same DP-SGD steps through Opacus (float32, torch's default
    thread count unless OMP_NUM_THREADS is set), both tables and the comparison (dpbench / the
    faster Opacus mode, target 20x); the JSON holds "records" and "comparison". Exit 1 with the
    install line when torch or opacus is missing.
    """
    import json

    from dpbench.bench import suites as bench_mod
    from dpbench.core.store import atomic_write_text

    if against is not None and suites:
        raise DpbenchError(f"--against {against} runs its own suites (steps, {against}); leave out --suite")
    if against == "opacus":
        from dpbench.bench import opacus as bench_opacus

        try:
            framework = bench_opacus.framework()
        except ImportError:
            click.echo(f"error: {bench_opacus.INSTALL_HINT}", err=True)
            sys.exit(1)
    chosen = suites or tuple(bench_mod.SUITES)
    info = bench_mod.machine_info()
    click.echo(f"machine: {info['cores']} cores, numpy {info['numpy']}, BLAS {info['blas']}, "
               f"BLAS threads {info['blas_threads']}")
    if against == "opacus":
        # torch's own default unless the user set a thread count (dpbench's OMP_NUM_THREADS=1 is for its cells)
        threads = None if _USER_THREAD_ENV else bench_opacus.torch_default_threads()
        started = time.perf_counter()
        records = bench_mod.steps_suite(data_dir=data_dir, repeats=repeats, models=bench_opacus.MODELS,
                                        batch_sizes=bench_opacus.BATCH_SIZES, long_run=0)
        click.echo(f"suite steps: {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        opacus_records = bench_opacus.opacus_suite(data_dir=data_dir, repeats=repeats, threads=threads)
        click.echo(f"suite opacus ({framework}, torch threads "
                   f"{opacus_records[0].get('torch_threads') if opacus_records else threads}): "
                   f"{time.perf_counter() - started:.1f} s")
        comparison = bench_opacus.compare(records, opacus_records)
        info["against"] = framework
        click.echo(bench_mod.format_table(records))
        click.echo("")
        click.echo(bench_mod.format_table(opacus_records))
        click.echo("")
        click.echo(bench_opacus.format_comparison(comparison))
        records += opacus_records
        atomic_write_text(output, json.dumps({"machine": info, "records": records, "comparison": comparison},
                                             indent=2, default=str))
        click.echo(f"written: {output}")
        return
    records = []
    for name in chosen:
        started = time.perf_counter()
        records += bench_mod.SUITES[name](data_dir=data_dir, repeats=repeats)
        click.echo(f"suite {name}: {time.perf_counter() - started:.1f} s")
    click.echo(bench_mod.format_table(records))
    atomic_write_text(output, json.dumps({"machine": info, "records": records}, indent=2, default=str))
    click.echo(f"written: {output}")


if __name__ == "__main__":  # pragma: no cover
    main()
