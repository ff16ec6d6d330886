"""The verbs that run and draw experiments: `run` (every missing cell, then curves, figures and
manifest), `check` (a profile against its stored reference curves) and `plot` (redraw from what is
stored)."""

from __future__ import annotations

import sys
import time

import click

from dpbench.cli.claims import verdict_counts
from dpbench.cli.options import (Checked, check_scheduler, device_option, load_spec, progress_option, results_option,
                                 run_options, writable_folder)
from dpbench.core.validation import NON_NEGATIVE


@click.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SPEC...")
@run_options
@device_option
@click.option("--force", is_flag=True, help="recompute cells that are already stored")
@click.option("--partial", is_flag=True,
              help="when cells fail, still draw what is stored (figures, curves.csv and the manifest then say "
                   "'partial: k of n cells'); without it a grid with failed cells draws nothing")
@results_option()
def run(specs, profile, jobs, backend, scheduler, data_dir, no_progress, allow_large, device, force, partial,
        results) -> None:
    """Run experiments: every cell not stored yet, then curves, figures and manifest.

    Several SPECs run under one progress bar (`make figures` runs experiments/*.yaml). The
    number of cells and L* problems is printed before work starts; a grid of more than 50,000
    cells needs --allow-large. Finished cells are stored one by one as they finish
    (results/<experiment>/cells/), as are the L* solutions (results/.cache/), so an interrupted
    run resumes where it stopped and every stored result is reused; --force recomputes. A damaged
    cell file is moved to cells/quarantine/ and recomputed. Exits 1 if any cell failed: the
    failed cells are listed (with the hyperparameters that tell them apart), the others kept, and
    nothing is drawn unless --partial (then the figures say what is missing). One run writes a
    results folder at a time: a second one into the same folder exits 2 naming the first (a killed
    run leaves nothing locked).
    """
    from dpbench.experiment import layout, pipeline, render
    from dpbench.spec.experiment import check_size, extreme_epsilons

    check_scheduler(backend, scheduler)
    exps = [load_spec(spec, profile).on_device(device) for spec in specs]
    check_size(exps, allow_large)
    for notice in extreme_epsilons(exps):
        click.echo(f"note: {notice}", err=True)
    writable_folder(results)
    started = time.perf_counter()
    summary = pipeline.run_experiments(exps, results=results, data_dir=data_dir, jobs=jobs, backend=backend,
                                       scheduler=scheduler, force=force, progress=not no_progress)
    if summary.failed and not partial:  # a figure drawn without the failed cells would not say they are missing
        click.echo(f"figures and tables not drawn: {len(summary.failed)} cell(s) failed (listed below); a rerun "
                   "retries them, --partial (or `dpbench plot --partial`) draws what is stored", err=True)
        exps = []
    for exp in exps:  # failed cells are listed below and exit 1; with --partial what is stored is drawn, marked so
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


def _claims_line(out) -> None:
    """One line of the verdicts render wrote to claims.csv / claims.md (nothing without claims)."""
    if out.claims:
        click.echo(f"claims: {len(out.claims)} ({verdict_counts(out.claims)}; claims.csv, claims.md)")


def _varying_params(records: list[dict]) -> dict[str, list[str]]:
    """Per algorithm, the hyperparameters whose values differ among these failed cells: what tells
    their lines apart."""
    seen: dict[str, dict[str, set]] = {}
    for record in records:
        cell = record.get("cell") or {}
        for name, value in dict(cell.get("params") or {}).items():
            seen.setdefault(cell.get("algorithm"), {}).setdefault(name, set()).add(repr(value))
    return {algo: sorted(k for k, values in params.items() if len(values) > 1) for algo, params in seen.items()}


def _exit_on_failures(summary) -> None:
    if summary.failed:
        click.echo(f"{len(summary.failed)} cell(s) failed (stored with their tracebacks in cells/<key>.json; "
                   f"a rerun retries them):", err=True)
        varying = _varying_params(summary.failed)
        for record in summary.failed:
            cell = record.get("cell") or {}
            what = " ".join(f"{k}={cell[k]}" for k in ("algorithm", "dataset", "model", "epsilon", "rep") if k in cell)
            params = dict(cell.get("params") or {})
            what += "".join(f" {k}={params[k]}" for k in varying.get(cell.get("algorithm"), ()) if k in params)
            click.echo(f"  {record['key']} {what}: {record['error']}", err=True)
        sys.exit(1)


@click.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SPEC...")
@run_options
@click.option("--update", is_flag=True, help="rewrite the stored reference from this run (deliberately)")
@click.option("--envelope/--no-envelope", default=True, show_default=True,
              help="with --update: rerun the profile under other CPU kernel settings "
                   "(dpbench.analysis.check.FLOAT_VARIANTS) and store each value's float envelope, so the check "
                   "passes on any CPU")
@click.option("--k", "k", default=3.0, show_default=True, type=Checked(NON_NEGATIVE),
              help="a moved curve point passes if its paired mean difference is within k standard errors")
@click.option("--reuse", is_flag=True,
              help="reuse cells stored under --results instead of recomputing in a temporary folder")
@results_option("the reference is RESULTS/<experiment>/reference-<profile>.csv")
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

    check_scheduler(backend, scheduler)
    chosen = click.get_current_context().get_parameter_source("profile") is click.core.ParameterSource.COMMANDLINE
    exps = [load_spec(spec, profile) if update else _with_reference(spec, profile, chosen, results)
            for spec in specs]
    check_size(exps, allow_large)
    if update or reuse:
        writable_folder(results)
    with tempfile.TemporaryDirectory(prefix="dpbench-check-") as scratch:
        where = results if reuse else scratch
        started = time.perf_counter()
        summary = pipeline.run_experiments(exps, results=where, data_dir=data_dir, jobs=jobs, backend=backend,
                                           scheduler=scheduler, progress=not no_progress)
        click.echo(f"cells: {summary.total} total, {summary.ran} run, {summary.reused} reused; "
                   f"{time.perf_counter() - started:.1f} s")
        _exit_on_failures(summary)
        variants = {}
        if update and envelope:  # the kernel variants rerun side by side, each in its own child process
            from concurrent.futures import ThreadPoolExecutor

            started = time.perf_counter()
            names = list(check_mod.FLOAT_VARIANTS)
            with ThreadPoolExecutor(max_workers=len(names)) as pool:
                running = {name: pool.submit(variants_mod.variant_points, exps, name, scratch, jobs=jobs,
                                             data_dir=data_dir) for name in names}
                variants = {name: future.result() for name, future in running.items()}
            click.echo(f"float envelope: reruns under the {' and '.join(names)} kernels, side by side, in "
                       f"{time.perf_counter() - started:.1f} s")
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


def _with_reference(spec: str, profile: str, chosen: bool, results: str):
    """The experiment of `spec` under the profile `check` compares: `profile` when its reference
    exists; without --profile given, the one profile that has a reference (ci where several do),
    said on stderr; otherwise a DpbenchError (exit 2) naming the profiles that have one and the
    command that creates the missing one -- before any cell runs."""
    from dpbench.core.errors import DpbenchError
    from dpbench.experiment import layout

    exp = load_spec(spec, profile)
    path = layout.reference_path(exp, results)
    if path.exists():
        return exp
    have = sorted(p.stem[len("reference-"):] for p in layout.experiment_root(exp, results).glob("reference-*.csv"))
    if have and not chosen:
        other = "ci" if "ci" in have else have[0]
        click.echo(f"{exp.name}: no reference for the {profile} profile; checking the {other} profile, which has one "
                   f"({layout.reference_path(load_spec(spec, other), results)})", err=True)
        return load_spec(spec, other)
    where = (f"references exist for the {', '.join(have)} profile{'s' if len(have) > 1 else ''} "
             f"(`dpbench check {spec} --profile {have[0]}`); " if have else "")
    raise DpbenchError(f"{exp.name}: no reference for the {profile} profile ({path}); {where}create it with "
                       f"`dpbench check {spec} --profile {profile} --update`")


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


@click.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="SPEC...")
@click.option("--profile", default="full", show_default=True, help="named profile of the experiments")
@results_option()
@click.option("--partial", is_flag=True,
              help="draw what is stored even if cells or audits are missing (figures, curves.csv and the "
                   "manifest then say 'partial: k of n cells')")
@click.option("--from-runs", "from_runs", is_flag=True,
              help="redraw from the committed runs table (results/<exp>/runs.csv.gz, and trace_curves.csv.gz for "
                   "figures over iterations) instead of the per-cell store: rewrites curves.csv and the figures, "
                   "leaves runs.csv.gz, trace_curves.csv.gz and manifest.json alone; audits are not redrawn")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False),
              help="data folder the majority-class rates (claims' screens, a figure's `baseline: majority`) read "
                   "the test labels from, else results/<exp>/majority.csv (default: $DPBENCH_DATA, else ./data)")
@click.option("--device", default="cpu", show_default=True, type=click.Choice(("cpu", "gpu", "jax-cpu")),
              help="draw the cells `dpbench run --device` stored: gpu and jax-cpu read the JAX path's cells of its "
                   "families (the same cells for both), cpu the numpy path's")
@progress_option
def plot(specs, profile, results, partial, from_runs, data_dir, device, no_progress) -> None:
    """Re-aggregate stored cells and audits and redraw the figures; trains nothing.

    If any cell of the grid has no usable stored result (not run, failed, damaged) or an audit is
    not fully stored, nothing is written and the missing cells are listed (exit 2), unless
    --partial. With --from-runs the committed tables stand in for the cells (a fresh clone has
    no cells/ folder); a spec cell without a row in runs.csv.gz counts as missing.
    """
    from dpbench.experiment import render

    exps = [load_spec(spec, profile).on_device(device) for spec in specs]  # every spec checked before anything is drawn
    writable_folder(results)
    for exp in exps:
        # raises, writing nothing, on a partial grid (or, --from-runs, a runs table that is absent or short)
        out = render.render(exp, results=results, partial=partial, from_runs=from_runs, data_dir=data_dir,
                            progress=not no_progress)
        _report(exp, out)
        click.echo(f"figures: {', '.join(str(p) for p in out.figures)}")
        _claims_line(out)
