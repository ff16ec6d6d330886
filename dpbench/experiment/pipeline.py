"""One experiment end to end: spec -> cells -> runner -> store -> runs/curves -> figures + manifest.

This is the orchestration the CLI verbs share (`run`, `plot`, and later `check`); it holds no
algorithm logic and no formulas.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from pathlib import Path

from dpbench.core.errors import DataError, SpecError
from dpbench.core.registry import resolve_paths
from dpbench.core.store import ResultStore, RoutedStore, exclusive
from dpbench.core.validation import DELTA, validate
from dpbench.experiment.audits import audit_results
from dpbench.experiment.layout import cache_dir, experiment_root
from dpbench.run import runner
from dpbench.run.cells import (
    BATCH_CELLS,
    RECORD_FIELDS,
    CellContext,
    batch_key,
    optimum_path,
    prepare_optimum,
    run_cell,
    run_cells,
)
from dpbench.spec.experiment import Experiment


def preflight(exp: Experiment, data_dir: str | None, notify=None) -> frozenset[str]:
    """Load every dataset once so a missing or corrupt file, or a delta expression that fails at
    a dataset's training size, stops the run before any cell runs; likewise build every audit's
    game (its data and canary), so that e.g. `audits.rows` beyond the data is refused up front.

    An `optional: true` dataset whose file is absent is skipped instead: its label is returned
    and `notify` (default: print to stderr) is told why, so no result is silently missing.
    """
    from dpbench import data
    from dpbench.core.keys import evaluate_delta

    notify = notify or _stderr
    private = any(a.private for a in exp.algorithms)
    skipped = set()
    for ds in exp.datasets:
        try:
            options = resolve_paths(data.DATASETS.lookup(ds.name).params, dict(ds.options), ds.base)
            loaded = data.load(ds.name, seed=0, data_dir=data_dir, **options)
        except DataError as exc:
            if not ds.optional:
                raise
            skipped.add(ds.label)
            notify(f"{exp.name}: skipping optional dataset {ds.label}: {exc}")
            continue
        except ValueError as exc:
            raise DataError(f"datasets: {ds.label}: {exc}") from None
        if private:  # every cell of this dataset evaluates delta at its training size
            try:
                delta = evaluate_delta(exp.delta, loaded.n_train)
            except ValueError as exc:
                raise SpecError(f"delta: {exc} (dataset {ds.label} has n = {loaded.n_train} training rows)") from None
            validate("delta", delta, DELTA,
                     note=f"{exp.delta!r} for dataset {ds.label}, n = {loaded.n_train} training rows")
    if exp.audits:
        from dpbench.audit.setup import AuditError
        from dpbench.audit.trials import build_game

        for setup in exp.audits:  # ms each: 0.6 s for the 68 audits of experiments/audit.yaml
            try:
                build_game(setup, data_dir=data_dir)
            except AuditError as exc:  # its message starts with the field: dataset, rows, params.<name>
                raise SpecError(f"audits.{exc}") from None
    return frozenset(skipped)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _report_quarantined(stores, notify, limit: int = 10) -> None:
    """One line per damaged record moved aside, the first `limit` of each store, then a count."""
    for store in stores:
        for key, reason, target in store.quarantined[:limit]:
            notify(f"damaged cell record {key}.json ({reason}): moved to {target}, recomputing it")
        if len(store.quarantined) > limit:
            notify(f"... and {len(store.quarantined) - limit} more damaged cell records moved to "
                   f"{store.cells_dir / 'quarantine'}, recomputing them")
        store.quarantined.clear()


def run_experiments(exps: list[Experiment], *, results: str | Path = "results", data_dir: str | None = None,
                    jobs: int = 1, backend: str = "loky", scheduler: str | None = None, force: bool = False,
                    progress: bool = True, notify=None) -> runner.RunSummary:
    """Run every cell of these experiments not stored yet (all with force), under one progress bar.

    A damaged stored record (unreadable, or missing what its kind needs) is moved aside to
    cells/quarantine/ and its cell recomputed; `notify` (default: stderr) is told which.
    """
    notify = notify or _stderr
    with contextlib.ExitStack() as held:  # one run per results folder at a time (store.exclusive)
        for name in sorted({exp.name for exp in exps}):
            held.enter_context(exclusive(cache_dir(results) / f"{name}.lock", "a dpbench run",
                                         Path(results) / name))
        return _run_experiments(exps, results, data_dir, jobs, backend, scheduler, force, progress, notify)


def _run_experiments(exps, results, data_dir, jobs, backend, scheduler, force, progress, notify) -> runner.RunSummary:
    device = _device_of(exps)
    skipped = {exp.name: preflight(exp, data_dir) for exp in exps}
    routes: dict[str, list[ResultStore]] = {}
    cells = {}
    for exp in exps:
        store = ResultStore(experiment_root(exp, results), required=RECORD_FIELDS)
        for cell in exp.cells(skipped[exp.name]):
            routes.setdefault(cell.key, []).append(store)
            cells.setdefault(cell.key, cell)
    context = CellContext(data_dir=data_dir, cache_dir=str(cache_dir(results)), device=device)
    ordered = sorted(cells.values(), key=lambda c: (c.dataset, c.rep, c.model, c.algorithm))
    store = RoutedStore(routes)
    todo = ordered if force else [c for c in ordered if not store.is_finished(c.key)]
    require_libraries(todo)
    _report_quarantined({s.root: s for stores in routes.values() for s in stores}.values(), notify)
    # L* phase: each (data split, model) once, in parallel over problems, before the cells that
    # need it (otherwise parallel workers compute the same non-convex L* estimate side by side)
    problems = {c.problem_key: c for c in todo if not optimum_path(c, context).exists()}
    names = ", ".join(f"{e.name}[{e.profile}]" for e in exps)
    notify(f"{names}: {len(ordered):,} cells ({len(ordered) - len(todo):,} stored, {len(todo):,} to run), "
           f"{len(problems):,} L* problems to solve")
    runner.parallel_map(list(problems.values()), functools.partial(prepare_optimum, context=context), jobs=jobs,
                        backend=backend, scheduler=scheduler, progress=progress, description="L* per problem")
    work = functools.partial(run_cell, context=context)
    batching = runner.Batching(key=batch_key, work=functools.partial(run_cells, context=context), size=BATCH_CELLS)
    summary = runner.run(ordered, work, store, jobs=jobs, backend=backend, scheduler=scheduler, force=force,
                         progress=progress, description=names if len(names) < 40 else "cells", batching=batching)
    for exp in exps:  # the experiments' distinguishing games (their trials are cached like cells)
        audit_results(exp, results=results, data_dir=data_dir, jobs=jobs, backend=backend, scheduler=scheduler,
                      progress=progress, force=force)
    return summary


def require_libraries(cells) -> None:
    """Before any cell runs: the library of every peer among `cells` (`dpbench.algorithms.peers`, an
    optional extra) is installed, else one DpbenchError naming the `pip install` that brings it. A spec
    that names a peer still loads without it, so its committed results can be redrawn, tested and
    reported anywhere."""
    from dpbench import algorithms
    from dpbench.algorithms import peers

    for name in sorted({c.algorithm for c in cells}):
        try:
            library = algorithms.REGISTRY[name].library
        except KeyError:  # a plugin's algorithm: loaded by its reference, never a peer
            continue
        if library is not None:
            peers.require(library)


def _device_of(exps: list[Experiment]) -> str:
    """The one device these experiments train on (`Experiment.device`); on the JAX path, JAX checked
    here (installed, float64, the GPU present) before any worker starts."""
    from dpbench.on_jax import device

    devices = {exp.device for exp in exps}
    if len(devices) > 1:
        raise SpecError(f"experiments of one run train on one device, not {sorted(devices)}")
    (chosen,) = devices or {"cpu"}
    if device.uses_jax(chosen):
        device.activate(chosen)
    return chosen


def run_experiment(exp: Experiment, **options) -> runner.RunSummary:
    return run_experiments([exp], **options)
