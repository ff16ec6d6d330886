"""`dpbench report`: the static HTML site of stored experiments."""

from __future__ import annotations

import time
from pathlib import Path

import click

from dpbench.cli.options import DATA_HELP, load_spec, progress_option, results_option, writable_folder


@click.command(name="report")
@click.argument("spec", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--profile", default="full", show_default=True, help="profile of the specs (its stored tables are read)")
@results_option("the stored tables are read from there (curves.csv, runs.csv.gz, audits.csv, claims.csv, "
                "manifest.json)")
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="folder the site is written to: index.html, <experiment>.html, assets/ (default: --results)")
@click.option("--baseline/--no-baseline", default=True, show_default=True,
              help="draw a figure's `baseline: majority` line (from the data sets' test labels, else the stored "
                   "majority.csv, as the PNG does)")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
@click.option("--counts", "count_pages", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="only write the counts of every SPEC's committed results (cells, seeds per point, ε values, audits, "
                   "claims, figures, reference values) into this Markdown file (e.g. README.md, "
                   "docs/reproducibility.md; repeat for several) between <!-- results:counts --> and "
                   "<!-- /results:counts -->, and build no site")
@progress_option
def report_(spec, profile, results, out, baseline, data_dir, count_pages, no_progress) -> None:
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

    experiments = [load_spec(s, profile) for s in spec]
    if count_pages:
        _write_counts(experiments, results, count_pages)
        return
    target = out if out is not None else results
    writable_folder(target, "--out" if out is not None else "--results")
    start = time.perf_counter()
    pages = report.build(experiments, results=results, out=target, notify=click.echo, baseline=baseline,
                         data_dir=data_dir, progress=not no_progress)
    total = sum(p.bytes for p in pages)
    assets = sum(f.stat().st_size for f in (Path(target) / "assets").iterdir() if f.is_file())
    click.echo(f"{Path(target) / 'index.html'}: {len(pages)} pages ({total / 1e6:.1f} MB) and assets/ "
               f"({assets / 1e6:.1f} MB, plotly.js included) in {time.perf_counter() - start:.1f} s; "
               f"open it in a browser")


def _write_counts(experiments: list, results: str, pages: tuple[str, ...]) -> None:
    """Write the `results:counts` block (dpbench.experiment.counts) of every page."""
    from dpbench.core import blocks
    from dpbench.core.store import atomic_write_text
    from dpbench.experiment import counts

    table = counts.counts_markdown([counts.counts(exp, results) for exp in experiments])
    for page in pages:
        try:
            text = blocks.fill(Path(page).read_text(encoding="utf-8"), *counts.COUNTS_BLOCK, table)
        except ValueError as exc:
            raise click.UsageError(f"--counts {page}: {exc}") from None
        atomic_write_text(page, text)
        click.echo(f"written: the counts of {len(experiments)} experiments in {page}")
