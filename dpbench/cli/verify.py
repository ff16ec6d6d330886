"""`dpbench verify`: an algorithm's runs checked against what its ledger claims (dpbench.audit.verify)."""

from __future__ import annotations

import sys

import click

from dpbench.cli.options import DATA_HELP, Checked, progress_option, results_option, writable_folder
from dpbench.core.validation import DELTA, POSITIVE, Integral, Interval

#: the options that set what one verification runs at (a SPEC's own settings replace them)
SETTINGS = {"dataset": "--dataset", "model": "--model", "epsilon": "--eps", "delta": "--delta", "params": "--param",
            "seed": "--seed"}
#: the options of a SPEC alone
SPEC_ONLY = {"profile": "--profile", "max_settings": "--max-settings", "all_epsilons": "--all-epsilons"}
MARKS = {"ok": "ok", "mismatch": "MISMATCH", "suspect": "SUSPECT", "skipped": "--"}


@click.command()
@click.argument("algorithm")
@click.option("--dataset", default="breast_cancer", show_default=True,
              help="dataset of the base rows (its training split, plus an all-zero column, the feature space then "
                   "turned by a random rotation)")
@click.option("--model", default="logreg", show_default=True, help="model (see `dpbench list models`)")
@click.option("--eps", "epsilon", default=1.0, show_default=True, type=Checked(POSITIVE), help="target epsilon")
@click.option("--delta", default=1e-5, show_default=True, type=Checked(DELTA), help="target delta")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="algorithm hyperparameter (repeatable; overrides the recommended value of its role, e.g. the "
                   "clip norm 0.1 of the gradient canary)")
@click.option("--runs", default=8, show_default=True, type=Checked(Interval(Integral, 2)),
              help="fits on the base rows for the ledger, noise and iterate checks")
@click.option("--canary-steps", default=5000, show_default=True, type=Checked(Interval(Integral, 1)),
              help="noisy steps to observe with the canary added (fits until then, at most 400)")
@click.option("--trials", default=None, type=Checked(Interval(Integral, 0)),
              help="trainings a side of the audit (0: no audit); all updates with the gradient canary for an "
                   "algorithm that reports its steps, else the final model  [default: 400 for an ALGORITHM, "
                   "0 (no audit) for a SPEC]")
@click.option("--seed", default=0, show_default=True, type=Checked(Interval(Integral, 0)), help="seed of data and fits")
@click.option("--jobs", "-j", default=1, show_default=True, type=Checked(Interval(Integral, 1)),
              help="parallel workers of the audit")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
@results_option("the audit's fits are cached under RESULTS/.cache/audits; a SPEC's verdicts are kept in "
                "RESULTS/<experiment>/verify.csv, which the labels of the runs it verified read")
@progress_option
@click.option("--sensitivity/--no-sensitivity", default=True, show_default=True,
              help="the worst-case sensitivity game (a few seconds per verification)")
@click.option("--profile", default="full", show_default=True, help="SPEC only: the spec's profile (e.g. ci)")
@click.option("--max-settings", default=4, show_default=True, type=Checked(Interval(Integral, 1)),
              help="SPEC only: the most hyperparameter settings verified per algorithm entry (the first in the "
                   "grid's order)")
@click.option("--all-epsilons", is_flag=True,
              help="SPEC only: every epsilon of the spec (default: the largest and the smallest)")
def verify(algorithm, dataset, model, epsilon, delta, params, runs, canary_steps, trials, seed, jobs, data_dir,
           results, no_progress, sensitivity, profile, max_settings, all_epsilons) -> None:
    """Check what ALGORITHM does against what it claims: a built-in name or a plugin reference
    (path/to/file.py:fit or package.module:fit; its code runs).

    Runs it on the base rows of --dataset plus an all-zero column, the feature space turned by a
    random rotation (so no column is all-zero and the spare direction, which no record touches, is
    random), and checks: the ledger's own numbers (a "valid" needs a finite epsilon within the target, at the
    target's delta, recomputed by dpbench's accountants from the noise multiplier, sampling rate
    and steps where the ledger states them); for an algorithm that reports its noisy steps, the
    steps counted against the ledger, the declared noise and rate against the ledger, the noise
    measured along the untouched column against the declared one, the effect of one canary record
    against what the declared rate and clip norm allow, whether the iterates follow the reported
    releases, the epsilon of the steps as observed, gradients evaluated at iterates no reported
    step declares, the batch sizes and the canary's inclusions against Poisson sampling at the
    declared rate, the noise's independence between steps, and (--sensitivity) one record's effect
    in a game of its own rows built for the worst case (a canary far beyond the clip norm against
    rows whose batch sum is about the clip norm) against the declared clip norm; then an audit
    (--trials), whose lower bound above the claim refutes it and whose estimate above the claim is
    a warning.

    Prints one line per check and the verdict: `consistent`, `mismatch: ...` or `suspect: ...`.
    Exit code 0 consistent, 1 mismatch, 4 suspect (2: a usage error).

    ALGORITHM may instead be an experiment file (SPEC, a .yaml): then every algorithm entry is
    verified at the spec's own settings: each hyperparameter setting of its grid (at most
    --max-settings), on each of the spec's data sets and models where verify applies (a linear
    model; others, and settings where the algorithm itself refuses to run, are listed as skipped,
    with why), at the spec's largest and smallest epsilon (--all-epsilons: every one), its delta
    and seed, with the entry's parameters as written (the clip norm too: no recipe's
    recommendation replaces it). No audit unless --trials is given. Prints a table (algorithm,
    setting, dataset, model, epsilon, verdict) and exits with the code of the worst verdict (0,
    worst verdict "none", when every row is skipped). --dataset, --model, --eps, --delta, --param
    and --seed do not apply.
    """
    from dpbench.audit import setup as setup_mod
    from dpbench.audit import verify as verify_mod
    from dpbench.cli.audit import _key_values
    from dpbench.run import plugins

    if algorithm.endswith((".yaml", ".yml")):
        from dpbench.cli.verify_spec import run_spec

        given = _given(SETTINGS)
        if given:
            raise click.UsageError(f"{', '.join(given)}: a SPEC is verified at its own settings")
        trials = 0 if trials is None else trials
        writable_folder(results)  # the verdicts are kept in RESULTS/<experiment>/verify.csv
        sys.exit(run_spec(algorithm, profile=profile, max_settings=max_settings, all_epsilons=all_epsilons, runs=runs,
                          canary_steps=canary_steps, trials=trials, jobs=jobs, data_dir=data_dir, results=results,
                          progress=not no_progress, sensitivity=sensitivity))
    given = _given(SPEC_ONLY)
    if given:
        raise click.UsageError(f"{', '.join(given)}: only for a SPEC (an experiment .yaml)")
    trials = 400 if trials is None else trials
    plugin = plugin_digest = None
    if ":" in algorithm:
        plugin = plugins.resolve(algorithm)
        algorithm = plugins.load(plugin).name
        plugin_digest = plugins.fingerprint(plugin)
    setup = setup_mod.AuditSetup.create(
        algorithm, plugin=plugin, plugin_digest=plugin_digest, params=_key_values(params, "--param"), dataset=dataset,
        model=model, epsilon=epsilon, delta=delta, trials=max(trials, 4), canary="gradient_canary", seed=seed)
    if trials:
        writable_folder(results)
    result = verify_mod.verify(setup, runs=runs, trials=trials, data_dir=data_dir, results=results, jobs=jobs,
                               progress=not no_progress, canary_steps=canary_steps, sensitivity=sensitivity)
    shown = ", ".join(f"{k}={v}" for k, v in sorted(result.params.items()))
    click.echo(f"{algorithm} on {dataset} ({model}), epsilon {epsilon:g}, delta {delta:g}; parameters: {shown or '-'}")
    for finding in result.findings:
        click.echo(f"  [{MARKS[finding.status]:>8}] {finding.check}: {finding.detail}")
    click.echo(f"verdict: {result.verdict}")
    sys.exit(result.exit_code)


def _given(options: dict[str, str]) -> list[str]:
    """The options (parameter name -> option as typed) set on the command line of the current command."""
    context = click.get_current_context()
    return [option for name, option in options.items()
            if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
