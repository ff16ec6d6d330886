"""`dpbench verify SPEC`: every algorithm of an experiment verified at the spec's own settings
(`dpbench.experiment.verify_plan`), one table line each, the exit code of the worst verdict."""

from __future__ import annotations

import click

#: verdicts from best to worst: the exit code is the worst one's (`dpbench.audit.verify.EXIT_CODES`)
ORDER = ("consistent", "suspect", "mismatch")


def _code(setup) -> str:
    """The verified code as verify.csv names it: a plugin's digest, a peer's library and version, or ""."""
    from dpbench import algorithms
    from dpbench.algorithms import peers
    from dpbench.experiment.verified import library_code

    if setup.plugin_digest:
        return setup.plugin_digest
    library = algorithms.get(setup.algorithm).library
    return library_code(library, peers.version(library)) if library else ""


def run_spec(spec: str, *, profile: str, max_settings: int, all_epsilons: bool, runs: int, canary_steps: int,
             trials: int, jobs: int, data_dir: str | None, results: str, progress: bool, sensitivity: bool) -> int:
    """Plan, verify and print each row (module docstring); returns the exit code."""
    from dpbench.audit import verify as verify_mod
    from dpbench.audit.setup import AuditError
    from dpbench.cli.options import load_spec
    from dpbench.experiment import verified
    from dpbench.experiment.verify_plan import plan

    exp = load_spec(spec, profile)
    rows, notes = plan(exp, max_settings=max_settings, all_epsilons=all_epsilons, data_dir=data_dir)
    for note in notes:
        click.echo(f"note: {note}")
    click.echo(f"{exp.name} [{exp.profile}]: {len(rows)} verifications at the spec's settings "
               f"(delta as the spec, seed {exp.seed}){'' if trials else '; no audit (--trials 0)'}")
    header = ("algorithm", "setting", "dataset", "model", "epsilon", "verdict")
    lines, details, worst, found = [], [], "consistent", []
    for row in rows:
        eps = "-" if row.epsilon is None else f"{row.epsilon:g}"
        if row.setup is None:
            verdict = f"skipped: {row.skipped}"
        else:
            try:
                result = verify_mod.verify(row.setup, runs=runs, trials=trials, data_dir=data_dir, results=results,
                                           jobs=jobs, progress=progress, canary_steps=canary_steps,
                                           sensitivity=sensitivity)
            except AuditError as exc:
                verdict = f"skipped: {exc}"
            else:
                failed = [f.check for f in result.findings if f.status == result.status]
                verdict = result.status + (f" ({', '.join(failed)})" if failed and result.status != "consistent"
                                           else "")
                if result.status != "consistent":
                    details.append(f"{row.algorithm} [{row.setting}] on {row.dataset} ({row.model}), epsilon {eps}: "
                                   f"{result.verdict}")
                worst = max(worst, result.status, key=ORDER.index)
                found.append({"label": row.algorithm, "params": dict(row.setup.params), "dataset_label": row.dataset,
                              "model_label": row.model, "epsilon": row.epsilon,
                              "plugin_digest": _code(row.setup), "status": result.status,
                              "checks": ", ".join(failed) if result.status != "consistent" else ""})
        lines.append((row.algorithm, row.setting, row.dataset, row.model, eps, verdict))
    widths = [max(len(str(x[i])) for x in [header, *lines]) for i in range(len(header) - 1)]
    for line in [header, *lines]:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(line, widths)) + "  " + line[-1])
    for detail in details:
        click.echo(detail)
    if found:  # the labels of the runs verified read the verdicts (dpbench.experiment.verified)
        click.echo(f"written: {verified.write(exp, results, found)}")
    if not found:  # every row skipped: nothing was verified, so no verdict is claimed
        click.echo("worst verdict: none (nothing verified: every row is skipped)")
        return 0
    click.echo(f"worst verdict: {worst}")
    return verify_mod.EXIT_CODES[worst]


__all__ = ["run_spec"]
