"""`dpbench decide`: add seeds in rounds until each claim of an experiment is decided."""

from __future__ import annotations

import click

from dpbench.cli.claims import verdict_counts
from dpbench.cli.options import check_scheduler, device_option, load_spec, progress_option, results_option


@click.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False), metavar="SPEC...")
@click.option("--profile", default="full", show_default=True, help="profile of the spec")
@click.option("--budget", "budget", type=click.FloatRange(min=0, min_open=True), default=None, metavar="CPU-HOURS",
              help="stop before a round whose estimated CPU time (stored time per cell x cells to run) would "
                   "exceed this, over all rounds of a spec")
@click.option("--max-seeds", type=click.IntRange(min=2), default=None,
              help="never give a data set more seeds than this (times its `decide.scale`)")
@click.option("--write", is_flag=True, help="write the curves the rounds extended into each SPEC's `extra_seeds:` "
                                            "line (and, with --confirm, the plan's seed and first look into `seed:` "
                                            "and `seeds:`), so that `dpbench run SPEC` reproduces the decided "
                                            "results")
@click.option("--freeze", is_flag=True,
              help="only freeze each SPEC's analysis plan (claims, margins, design, test, grid) with its hash into "
                   "results/<experiment>/plan.json, keep the current verdicts as claims-exploratory.csv, and pick "
                   "the confirmatory seed stream; trains nothing")
@click.option("--confirm", is_flag=True,
              help="run the rounds on the frozen plan's confirmatory seed stream, from the design's first look; "
                   "refused when the spec's analysis changed after the plan was frozen")
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(min=1), help="parallel workers")
@click.option("--backend", default="loky", show_default=True,
              type=click.Choice(["loky", "threading", "sequential", "dask"]),
              help="joblib backend of the rounds (as for run); dask runs them on a dask.distributed cluster")
@click.option("--scheduler", default=None, metavar="ADDRESS", help="dask scheduler address (--backend dask)")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False),
              help="folder of the raw data files (default: $DPBENCH_DATA, else ./data)")
@results_option()
@progress_option
@device_option
def decide(specs, profile, budget, max_seeds, write, freeze, confirm, jobs, backend, scheduler, data_dir, results,
           no_progress, device) -> None:
    """Add seeds in rounds until every claim of each SPEC is decided.

    Each round tests the claims on what is stored, with the looks of the spec's `decide:` block
    (e.g. `decide: {looks: [5, 10, 20, 40]}`): every claim is tested at each look it reached and
    its p-values are sequential (Pocock-type alpha spending split over the looks, Holm across
    the claims of the spec), so stopping whenever a claim is decided keeps the family-wise error
    at 5 %. The curves an undecided claim reads (its curves, data sets, models and epsilons) get
    the next look's seeds: only their cells run, through the same runner as `dpbench run`
    (--backend dask --scheduler ADDRESS for a cluster), each stored as it finishes. A claim stops
    when reproduced, contradicted or shown to differ by no more than its equivalence margin ("no
    difference beyond m"); at the last look, --max-seeds or --budget it stays "undecided at N
    seeds". Prints each round and the verdicts; then run `dpbench run SPEC` (or `dpbench claims`)
    to redraw the curves and tables.

    Verdicts on seeds that were seen when the claims were written are exploratory. For
    confirmatory ones: `--freeze` (the plan, before any confirmatory seed), then `--confirm
    --write` (fresh seeds from the plan's own stream); `dpbench claims` then marks the verdicts
    "confirmatory (plan <hash>)" as long as the spec's analysis is the plan's.
    """
    from dpbench.experiment import decide as decide_mod
    from dpbench.experiment import plan as plan_mod

    check_scheduler(backend, scheduler)
    if freeze and confirm:
        raise click.UsageError("--freeze and --confirm are two steps: freeze the plan first, then confirm")
    for path in specs:
        exp = load_spec(path, profile).on_device(device)
        if freeze:
            plan = plan_mod.freeze(exp, results)
            click.echo(f"== {exp.name}: plan {plan.name} frozen in {plan_mod.plan_path(exp, results)} (confirmatory "
                       f"seed stream {plan.seed}; seeds seen: {', '.join(map(str, plan.seeds_seen))})")
            continue
        decision = decide_mod.decide(exp, results=results, data_dir=data_dir, budget_hours=budget,
                                     max_seeds=max_seeds, jobs=jobs, backend=backend, scheduler=scheduler,
                                     progress=not no_progress, notify=lambda m: click.echo(m, err=True),
                                     confirm=confirm)
        click.echo(f"== {exp.name} [{exp.profile}]: {len(decision.rounds)} rounds; stopped: {decision.stopped}"
                   + "".join(f"\n  {line}" for line in decision.failed))
        click.echo("seeds: " + ", ".join(f"{k} {v}" for k, v in sorted(decision.seeds.items()))
                   + "".join(f"\n  {e.to_yaml()}" for e in decision.extra))
        click.echo(f"{len(decision.verdicts)} claims: {verdict_counts(decision.verdicts)}")
        for v in decision.verdicts:
            if v.verdict == "undecided":
                seeds = v.deciding.n if v.deciding is not None else 0
                click.echo(f"  undecided at {seeds} seeds: {v.claim.id}")
        if decision.verdicts:
            click.echo(f"verdicts: {decision.verdicts[0].status}")
        if write:
            decide_mod.write_seeds(path, exp, decision.seeds, seed=decision.seed if confirm else None,
                                   extra=decision.extra)
            click.echo(f"written: the seeds{' and seed' if confirm else ''} of {path}")
