"""`dpbench data verify` and `dpbench data fetch`: the raw UCI files, checked or downloaded."""

from __future__ import annotations

import sys
import time

import click

from dpbench.cli.exits import ErrorExitGroup
from dpbench.cli.options import DATA_HELP, progress_option


@click.group(cls=ErrorExitGroup)
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
                   f"layout, or put the original files there (addresses above). With network access, loading a "
                   f"data set (any `dpbench run` that uses it) fetches Adult, Breast Cancer and Iris through "
                   f"ucimlrepo; it does not serve Bank's bank-additional-full or the KDDCup99 10% file; "
                   f"`dpbench data fetch` downloads every missing UCI file and checks it",
                   err=True)
        sys.exit(1)


@data.command()
@click.argument("names", nargs=-1, metavar="[NAMES]...")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
@click.option("--base-url", default=None, metavar="URL",
              help="mirror holding the same paths as the originals under URL (replaces https://archive.ics.uci.edu "
                   "and http://kdd.ics.uci.edu; default: $DPBENCH_DATA_URL, else the originals)")
@progress_option
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
