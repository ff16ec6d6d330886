"""`dpbench claims`: the verdicts of each experiment's `claims:` block, from what is stored."""

from __future__ import annotations

from pathlib import Path

import click

from dpbench.cli.options import load_spec, progress_option, results_option, writable_folder


def _counts(verdicts: list) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return counts


def verdict_counts(verdicts: list) -> str:
    """How many claims each verdict has: "2 reproduced, 0 contradicted, 0 no difference beyond m, 1 undecided, ..."."""
    from dpbench.analysis.claims import VERDICT_ORDER

    counts = _counts(verdicts)
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in VERDICT_ORDER)


@click.command()
@click.argument("spec", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--profile", default="full", show_default=True, help="profile of the spec (its results are read)")
@results_option("stored cells / tables are read from there, claims.csv and claims.md written there")
@click.option("--markdown", is_flag=True,
              help="print claims.md (the table of docs/papers/<experiment>.md) instead of the short table")
@click.option("--readme", default=None, type=click.Path(exists=True, dir_okay=False),
              help="also write each table into this Markdown file (e.g. docs/papers/<experiment>.md) between "
                   "<!-- claims:NAME --> and <!-- /claims:NAME -->")
@click.option("--summary", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="also write the verdict counts of every SPEC given, one row each with its status "
                   "(exploratory or confirmatory), into this Markdown file (e.g. README.md, "
                   "docs/reference/claims-inventory.md; repeat the option for several) between "
                   "<!-- claims:summary --> and <!-- /claims:summary -->")
@click.option("--selection", default=None, type=click.Path(exists=True, dir_okay=False),
              help="also evaluate every claim with the hyperparameters selected the other way (per seed vs "
                   "pooled over seeds, the spec's select_per), print the claims whose verdict changes and write "
                   "them, for every SPEC given, into this Markdown file (e.g. docs/claims.md) between "
                   "<!-- claims:selection --> and <!-- /claims:selection -->")
@click.option("--simulate", "simulate", type=click.IntRange(min=100), default=None, metavar="EXPERIMENTS",
              help="also run the claims' whole procedure (looks, spending, Holm) on this many experiments "
                   "resampled from each SPEC's own per-seed values (skew and runaway seeds as they are), for the "
                   "sign test the verdicts use and the t-test, and print the family-wise error and power "
                   "(dpbench/analysis/claims/shapes.py; about 10 s per 1,000 experiments and SPEC)")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False),
              help="folder of the raw data files, read only for majority-class rates the stored majority.csv "
                   "lacks (default: $DPBENCH_DATA, else ./data)")
@progress_option
def claims(spec, profile, results, markdown, readme, summary, selection, simulate, data_dir, no_progress) -> None:
    """Verdicts of each experiment's `claims:` block: reproduced, contradicted, no difference
    beyond m, undecided or vacuous.

    Every claim (a sentence of a paper or of the docs about a figure) is tested with paired
    statistics over seeds on what is stored: the cells, or, where they are absent, the committed
    runs.csv.gz and audits.csv (dpbench/analysis/claims/: the sign test of the median per-seed
    statistic, exact for any shape, with its 95% interval; Holm across the claims of one
    experiment; the seeds an undecided claim would need). Trains nothing; writes claims.csv and
    claims.md next to the experiment's curves. A verdict is marked exploratory unless the
    spec's analysis is a frozen plan's and its seeds that plan's own stream (`dpbench decide
    --freeze`, then `--confirm`): then "confirmatory (plan <hash>)".
    """
    import pandas as pd

    from dpbench.analysis import claims as claims_mod
    from dpbench.experiment import verdicts as verdicts_mod
    from dpbench.experiment.layout import output_folder

    counts: dict[str, dict[str, int]] = {}
    status: dict[str, str] = {}
    flips: list[dict] = []
    for path in spec:
        exp = load_spec(path, profile)
        if not exp.claims:
            click.echo(f"{exp.name} [{exp.profile}]: no claims")
            continue
        verdicts = verdicts_mod.claim_verdicts(exp, results, data_dir, progress=not no_progress)
        counts[exp.name] = _counts(verdicts)
        status[exp.name] = claims_mod.status_text([v.status for v in verdicts])
        click.echo(f"== {exp.name} [{exp.profile}]: {len(verdicts)} claims: {verdict_counts(verdicts)}")
        if markdown:
            click.echo(claims_mod.markdown(verdicts, verdicts_mod.exploratory_verdicts(exp, verdicts, results)))
        else:
            shown = claims_mod.table(verdicts)[["id", "verdict", "effect", "ci_low", "ci_high", "p_holm",
                                                "p_contra_holm", "seeds", "seeds_needed", "where"]]
            with pd.option_context("display.width", 200, "display.max_colwidth", 40, "display.max_rows", 500):
                click.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        # the verdicts are shown first: a folder that cannot take claims.csv is then one line (exit 2, as run says it)
        writable_folder(str(output_folder(exp, results)))
        written = verdicts_mod.write_claims(exp, verdicts, results)
        click.echo(f"written: {', '.join(str(p) for p in written)}")
        if readme:
            _fill_block(readme, "--readme", exp.name, claims_mod.markdown(verdicts, verdicts_mod.exploratory_verdicts(exp, verdicts, results)))
            click.echo(f"written: the {exp.name} table of {readme}")
        if simulate:
            _simulate(exp, verdicts, simulate, progress=not no_progress)
        if selection:
            changed = verdicts_mod.selection_flips(exp, verdicts, results)
            flips += changed
            click.echo(f"verdicts that change with the selection ({exp.select_per} -> the other): "
                       + ("; ".join(f"{f['claim']}: {f['seed']} per seed, {f['pooled']} pooled" for f in changed)
                          or "none"))
    for page in summary:
        _fill_block(page, "--summary", claims_mod.SUMMARY_BLOCK, claims_mod.summary_markdown(counts, status))
        click.echo(f"written: the verdict counts of {len(counts)} experiments in {page}")
    if selection:
        _fill_block(selection, "--selection", claims_mod.SELECTION_BLOCK,
                    claims_mod.selection_markdown(flips, list(counts)))
        click.echo(f"written: {len(flips)} verdicts that depend on the selection in {selection}")


def _simulate(exp, verdicts: list, experiments: int, progress: bool) -> None:
    """Print the family-wise error and power of the claims' procedure on the experiment's own shapes."""
    import pandas as pd

    from dpbench.analysis.claims import Design
    from dpbench.analysis.claims.shapes import claim_shapes, simulate_shapes

    shapes = claim_shapes(verdicts)
    if not shapes:
        click.echo(f"{exp.name}: no claim with per-seed values to resample")
        return
    design = Design(exp.decide_looks) if exp.decide_looks else Design.fixed(max(len(exp.seeds), 2))
    result = simulate_shapes(shapes, design, experiments, progress=progress)
    click.echo(f"{exp.name}: {experiments} experiments resampled from {result.subtests} sub-tests of "
               f"{result.claims} claims, looks {design.looks} ({result.seconds:.0f} s)")
    with pd.option_context("display.width", 200):
        click.echo(result.table().to_string(index=False, float_format=lambda v: f"{v:.3f}"))


def _fill_block(path: str, option: str, name: str, table_markdown: str) -> None:
    """Write `table_markdown` into the <!-- claims:NAME --> block of the Markdown file `path`."""
    from dpbench.analysis import claims as claims_mod
    from dpbench.core.store import atomic_write_text

    try:
        text = claims_mod.fill_readme(Path(path).read_text(encoding="utf-8"), name, table_markdown)
    except ValueError as exc:
        raise click.UsageError(f"{option} {path}: {exc}") from None
    atomic_write_text(path, text)
