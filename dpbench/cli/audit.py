"""`dpbench audit`: an empirical lower bound on an algorithm's epsilon from trainings with and
without a canary (the report's text: dpbench.cli.audit_text)."""

from __future__ import annotations

import click

from dpbench.cli.audit_text import format_audit
from dpbench.cli.options import (DATA_HELP, Checked, check_scheduler, device_option, progress_option, results_option,
                                  writable_folder)
from dpbench.core.errors import DpbenchError
from dpbench.core.validation import DELTA, OPEN_UNIT, POSITIVE, Integral, Interval


@click.command()
@click.option("--algorithm", required=True,
              help="algorithm to audit: a registered name (see `dpbench list algorithms`) or a plugin reference "
                   "path/to/file.py:fit or package.module:fit (its code runs)")
@click.option("--dataset", default=None, help="dataset of the base rows (not for self-contained canaries such as "
                                              "pidp_constant)")
@click.option("--model", default="logreg", show_default=True, help="model (see `dpbench list models`)")
@click.option("--eps", "epsilon", default=None, type=Checked(POSITIVE),
              help="target epsilon (required for a private algorithm)")
@click.option("--delta", default=1e-5, show_default=True, type=Checked(DELTA),
              help="target delta (also the delta of the bound)")
@click.option("--trials", default=None, type=Checked(Interval(Integral, 4)),
              help="trainings per side (some choose the test, the others estimate its error rates); required "
                   "unless --one-run")
@click.option("--one-run", is_flag=True,
              help="one training with --canaries canaries, each in with probability 1/2, and a lower bound from the "
                   "correct membership guesses (Steinke, Nasr, Jagielski 2023) instead of --trials trainings a side")
@click.option("--canaries", default=1000, show_default=True, type=Checked(Interval(Integral, 2)),
              help="canaries of a --one-run audit")
@click.option("--guesses", default=None, type=Checked(Interval(Integral, 1)),
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
@click.option("--rows", default=None, type=Checked(Interval(Integral, 2)),
              help="base rows (default: the recipe's, e.g. 1000)")
@click.option("--alpha", default=0.05, show_default=True, type=Checked(OPEN_UNIT),
              help="1 - confidence of the bound")
@click.option("--seed", default=0, show_default=True, type=Checked(Interval(Integral, 0)), help="seed of data and fits")
@click.option("--jobs", "-j", default=1, show_default=True, type=Checked(Interval(Integral, 1)),
              help="parallel workers")
@click.option("--backend", default="loky", show_default=True,
              type=click.Choice(["loky", "threading", "sequential", "dask"]), help="joblib backend (as for run)")
@click.option("--scheduler", default=None, metavar="ADDRESS", help="dask scheduler address (--backend dask)")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
@results_option("fits are cached under RESULTS/.cache/audits")
@click.option("--force", is_flag=True, help="recompute cached fits")
@progress_option
@device_option
def audit(algorithm, dataset, model, epsilon, delta, trials, one_run, canaries, guesses, canary, threat, threshold,
          params, model_options, dataset_options, rows, alpha, seed, jobs, backend, scheduler, data_dir, results, force,
          no_progress, device) -> None:
    """Empirical lower bound on an algorithm's epsilon (docs/audits.md), with estimates beside it.

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
    from dpbench.on_jax import device as jax_device
    from dpbench.run import plugins

    check_scheduler(backend, scheduler)
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
    writable_folder(results)
    if jax_device.uses_jax(device):
        jax_device.activate(device)  # JAX installed, float64, the GPU there: before any worker starts
    result = multi_run.run_audit(setup, data_dir=data_dir, results=results, jobs=jobs, backend=backend,
                                 scheduler=scheduler, progress=not no_progress, force=force, device=device)
    click.echo(format_audit(result))
    if jax_device.uses_jax(device):
        from dpbench.audit.trials import audit_backend

        click.echo(f"fits: the JAX path on {device}" if audit_backend(setup, device) == "jax" else
                   f"fits: the numpy path (--device {device} runs the final-model trainings of DP-SGD, DP-LSSGD, "
                   f"DP-GD and output / input perturbation on JAX; this audit's stay on the CPU)")


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
