"""`run_cell`: the pure function that runs one `Cell` (dpbench.core.keys) and returns its record.

Running a cell depends on nothing but the cell (its data split and its randomness come from
seeds of its key, dpbench.core.keys): same cell, same numbers, whatever the number of workers or the
order. Also here: the per-process dataset memo, the L* cache and the privacy-calibration memo.

This module is the only place that ties data, models, algorithms and metrics together; the
runner only sees `Cell.key` and calls `run_cell`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpbench.core.keys import Cell, canonical_json, digest, evaluate_delta, seed_from
from dpbench.core.ledger import Ledger
from dpbench.core.registry import resolve_paths

#: what a stored ok-record of `run_cell` must hold to be used (others are moved aside and rerun)
RECORD_FIELDS: dict[str, type] = {"algorithm": str, "params": dict, "dataset": str, "model": str, "rep": int,
                                  "metrics": dict, "privacy": dict, "trace": list}


@dataclass(frozen=True)
class CellContext:
    """What a worker needs besides the cell: where data and the L* cache live (picklable)."""

    data_dir: str | None = None
    cache_dir: str | None = None
    device: str = "cpu"  # where the cells keyed backend "jax" train (`dpbench.on_jax.device`: gpu or jax-cpu)


def _json_float(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return x


#: datasets this process loaded last, newest at the end: cells arrive sorted by (dataset, rep), so
#: a worker's next cell nearly always reuses one (KDDCup99's 494,021 rows take ~1-2 s to split)
_DATASETS: list[tuple[str, Any]] = []
DATASETS_KEPT = 2


def load_dataset(cell: Cell, context: CellContext):
    """`data.load` for the cell's split, memoised per process; the arrays are made read-only so an
    algorithm that wrote into its training data would fail loudly instead of corrupting the next cell."""
    from dpbench import data

    key = canonical_json([cell.dataset, cell.data_seed, context.data_dir, cell.dataset_options, cell.dataset_base])
    for i, (k, dataset) in enumerate(_DATASETS):
        if k == key:
            _DATASETS.append(_DATASETS.pop(i))
            return dataset
    options = resolve_paths(data.DATASETS.lookup(cell.dataset).params, dict(cell.dataset_options), cell.dataset_base)
    dataset = data.load(cell.dataset, seed=cell.data_seed, data_dir=context.data_dir, **options)
    for name in ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test", "w_star"):
        array = getattr(dataset, name)
        if isinstance(array, np.ndarray):
            array.flags.writeable = False
    _DATASETS.append((key, dataset))
    del _DATASETS[:-DATASETS_KEPT]
    return dataset


def optimum_path(cell: Cell, context: CellContext) -> Path | None:
    return Path(context.cache_dir) / f"optimum-{cell.problem_key}.json" if context.cache_dir else None


def prepare_optimum(cell: Cell, context: CellContext) -> float:
    """L* of the cell's problem, loading the data and model itself (a task of the L* phase)."""
    from dpbench import algorithms, models

    dataset = load_dataset(cell, context)
    model = models.make(cell.model, dataset.n_features, **dict(cell.model_options))
    return optimum(cell, algorithms.Problem(model=model, X=dataset.X_train, y=dataset.y_train), context)


def optimum(cell: Cell, problem, context: CellContext) -> float:
    """L* = min L_ref on the training split, cached on disk per problem (atomic write)."""
    from dpbench.algorithms.nonprivate import minimize_empirical_risk
    from dpbench.core.store import atomic_write_text

    path = optimum_path(cell, context)
    if path is not None and path.exists():
        try:
            return float(json.loads(path.read_text())["lstar"])
        except (ValueError, KeyError):
            pass  # unreadable: recompute and overwrite
    rng = np.random.default_rng(np.random.SeedSequence(seed_from("optimum", cell.problem_key)))
    _, lstar = minimize_empirical_risk(problem, rng, **dict(cell.optimum))
    if path is not None:
        atomic_write_text(path, json.dumps({"lstar": lstar, "problem": cell.problem_key}))
    return float(lstar)


def population_optimum(cell: Cell, dataset, model, context: CellContext) -> float | None:
    """min of L_ref over the population, for data whose test split IS the population, else None.

    `synthetic_population` draws training rows from a fixed finite pool and returns the whole pool
    as its test split (provenance `test_is_population`), so the excess population risk
    L_P(theta) - min L_P of the DP-SCO lecture notes (paper 002, eq. 17.1) is exact: L_P is the
    mean loss over the pool. The pool does not depend on the repetition or on n, so the optimum
    is cached per (dataset, options other than n and the split fractions, model).
    """
    from dpbench import algorithms
    from dpbench.algorithms.nonprivate import minimize_empirical_risk
    from dpbench.core.store import atomic_write_text

    if not dataset.provenance.get("test_is_population"):
        return None
    pool_options = {k: v for k, v in dict(cell.dataset_options).items() if k not in ("n", "val_fraction", "test_fraction")}
    key = digest({"population": cell.dataset, "options": pool_options, "model": cell.model,
                  "model_options": dict(cell.model_options), "optimum": dict(cell.optimum)})
    path = Path(context.cache_dir) / f"population-{key}.json" if context.cache_dir else None
    if path is not None and path.exists():
        try:
            return float(json.loads(path.read_text())["lstar"])
        except (ValueError, KeyError):
            pass
    problem = algorithms.Problem(model=model, X=dataset.X_test, y=dataset.y_test)
    rng = np.random.default_rng(np.random.SeedSequence(seed_from("optimum", key)))
    _, lstar = minimize_empirical_risk(problem, rng, **dict(cell.optimum))
    if path is not None:
        atomic_write_text(path, json.dumps({"lstar": lstar, "population": key}))
    return float(lstar)


_PRIVACY_MEMO_SEEN: dict[str, int] = {}  # memo file -> mtime_ns last loaded by this process


def _privacy_memo_path(context: CellContext) -> Path | None:
    return Path(context.cache_dir) / "privacy-memo.json" if context.cache_dir else None


def load_privacy_memo(context: CellContext) -> None:
    """Preload slow accounting results (PLD epsilons, calibrations) saved by earlier cells or runs.

    Reloaded whenever the file changed, so parallel workers share what the others computed.
    """
    from dpbench import privacy

    path = _privacy_memo_path(context)
    if path is None:
        return
    try:
        mtime = path.stat().st_mtime_ns
        if _PRIVACY_MEMO_SEEN.get(str(path)) == mtime:
            return
        privacy.memo_preload(json.loads(path.read_text()))
        _PRIVACY_MEMO_SEEN[str(path)] = mtime
    except (FileNotFoundError, ValueError):
        pass  # absent or unreadable: everything is recomputed


def save_privacy_memo(context: CellContext) -> None:
    """Merge this process's accounting memo into the file (atomic; a lost race only loses entries)."""
    from dpbench import privacy
    from dpbench.core.store import atomic_write_text

    path = _privacy_memo_path(context)
    if path is None:
        return
    entries = privacy.memo_entries()
    try:
        stored = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        stored = {}
    if set(entries) - set(stored):
        atomic_write_text(path, json.dumps({**stored, **entries}))


def trace_metrics(trace: list[dict], model, dataset, lstar: float | None = None) -> list[dict]:
    """A fit's trace as stored: each iterate snapshot {"step", "theta"} becomes {"step", <metrics>}.

    Algorithms never see the test split, so they record iterates (`trace_every`) and every metric
    of `metrics.evaluate` (estimation error, test loss, ...) is computed here, on each snapshot,
    plus the optimality gap train_loss - L* when L* is known (exact for convex models; the curves
    table's gap may lower a non-convex L* further; docs/methods/conventions.md, Optimality gap). Entries without "theta"
    (e.g. DP-SGD's training-loss trace) are kept as they are.
    """
    from dpbench.run import metrics

    out = []
    for entry in trace:
        if "theta" not in entry:
            out.append(entry)
            continue
        values = metrics.evaluate(model, np.asarray(entry["theta"], dtype=float), dataset)
        if lstar is not None:
            values["optimality_gap"] = values["train_loss"] - lstar
        out.append({"step": int(entry["step"]), **{k: _json_float(v) for k, v in values.items()}})
    return out


@dataclass
class _Prepared:
    """What every cell of one problem shares: the data split, the model and the training problem."""

    dataset: Any
    model: Any
    problem: Any
    info: Any


def _prepare(cell: Cell, context: CellContext) -> _Prepared:
    """Load the cell's data split (memoised) and build its model and training problem."""
    from dpbench import algorithms, models
    from dpbench.run import plugins

    if cell.plugin is not None:  # a plugin algorithm: import it in this process too (worker processes)
        plugins.load(cell.plugin)
    load_privacy_memo(context)
    dataset = load_dataset(cell, context)
    model = models.make(cell.model, dataset.n_features, **dict(cell.model_options))
    problem = algorithms.Problem(model=model, X=dataset.X_train, y=dataset.y_train)
    return _Prepared(dataset=dataset, model=model, problem=problem, info=algorithms.get(cell.algorithm))


def _target(cell: Cell, shared: _Prepared):
    """The cell's privacy target: its epsilon and its delta evaluated at the training size."""
    from dpbench import algorithms

    delta = evaluate_delta(cell.delta, shared.dataset.n_train) if shared.info.private else None
    return algorithms.PrivacyTarget(epsilon=cell.epsilon if shared.info.private else None, delta=delta)


def run_cell(cell: Cell, context: CellContext = CellContext()) -> dict:
    """Load data, build the model, fit, evaluate: the record stored for this cell. The fit's steps
    are tallied (`releases.tallying`) and checked against its ledger (`release_check`)."""
    from dpbench.algorithms import releases

    shared = _prepare(cell, context)
    target = _target(cell, shared)
    lstar = optimum(cell, shared.problem, context)
    started = time.perf_counter()
    with releases.tallying() as tally:
        if cell.backend == "jax":  # the JAX twin, one replica (its tally counts replica 0)
            fit = _jax_fits(shared, [target], [cell], context)[0]
            tally = replica_tallies(tally, 1)[0]
        else:
            fit = shared.info.fit(shared.problem, target, cell.algorithm_rng(), **dict(cell.params))
    fit_seconds = time.perf_counter() - started
    save_privacy_memo(context)
    return _record(cell, shared, target, fit, fit_seconds, lstar, context, released=tally)


#: most cells one batched fit takes (its parameters and per-replica draws grow with it)
BATCH_CELLS = 64
#: the share of the machine's physical memory that the replicas of the batched fits may hold, all
#: workers together (one batched fit per core at most): a batch larger than its part runs as several fits
BATCH_MEMORY_SHARE = 0.25
#: rows of the per-row working arrays a replica holds at once (margins, activations: the twins' row blocks)
_REPLICA_ROWS = 65_536


def replica_bytes(n_rows: int, n_params: int) -> int:
    """Bytes one replica of a batched fit holds beyond what the batch shares (the data, and the
    activations of a descent the twin runs for one start at a time): its parameters, gradient and
    two work vectors, its result (5 m floats), and two floats a row of a row block (its margins and
    their loss slopes). An upper bound for the twins of `dpbench.algorithms`."""
    return 8 * (5 * int(n_params) + 2 * min(int(n_rows), _REPLICA_ROWS))


def replicas_per_fit(n_rows: int, n_params: int, *, memory: int | None = None,
                     workers: int | None = None) -> int:
    """How many replicas one batched fit may hold: `BATCH_MEMORY_SHARE` of `memory` (default: the
    machine's physical memory) split among `workers` (default: the CPU count), divided by
    `replica_bytes`; at least 1, at most `BATCH_CELLS`."""
    if memory is None:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    workers = max(1, workers or os.cpu_count() or 1)
    allowed = BATCH_MEMORY_SHARE * memory / workers
    return int(max(1, min(BATCH_CELLS, allowed // replica_bytes(n_rows, n_params))))


def _jax_fits(shared: _Prepared, targets: list, cells: list[Cell], context: CellContext) -> list:
    """The fits of cells keyed backend "jax": their family's JAX twin on the context's device."""
    from dpbench.on_jax import device, twins

    if not device.uses_jax(context.device):
        raise RuntimeError(f"cells of the JAX path need a JAX device (--device gpu or jax-cpu), not {context.device!r}")
    device.activate(context.device)
    device.compilation_cache(None if context.cache_dir is None else str(Path(context.cache_dir) / "jax"))
    with device.on(context.device):
        return twins.twin(cells[0].algorithm).batch(shared.problem, targets, [c.algorithm_rng() for c in cells],
                                                    [dict(c.params) for c in cells])


def batch_key(cell: Cell) -> tuple | None:
    """Cells with equal keys can run as one batched fit (`run_cells`); None: this cell runs alone.

    A batch shares the data split (problem key), the model, the algorithm and every
    hyperparameter that shapes the computation; its cells differ only in epsilon and in the
    hyperparameters the algorithm's batched twin declares varying (`algorithms.base.batched`,
    e.g. the step size of a search). Cells whose algorithm has no batched twin, or whose twin
    would not be faster for their model and hyperparameters (`AlgorithmInfo.batch_pays`), run alone.
    """
    from dpbench import algorithms, models

    info = algorithms.get(cell.algorithm)
    if cell.backend == "jax":  # the JAX twin batches every grid (`dpbench.on_jax.twins`)
        from dpbench.on_jax.twins import twin

        varying = set(twin(cell.algorithm).varying)
        shape = canonical_json({k: v for k, v in dict(cell.params).items() if k not in varying})
        return (cell.problem_key, cell.algorithm, cell.model, canonical_json(cell.model_options), shape,
                canonical_json(cell.delta), "jax")
    if not info.batch_pays(models.MODELS.lookup(cell.model).factory, dict(cell.params)):
        return None
    varying = set(info.batch_varying)
    shape = canonical_json({k: v for k, v in dict(cell.params).items() if k not in varying})
    return (cell.problem_key, cell.algorithm, cell.plugin, cell.model, canonical_json(cell.model_options), shape,
            canonical_json(cell.delta))


def run_cells(cells: list[Cell], context: CellContext = CellContext()) -> list[dict]:
    """The records of cells that share a `batch_key`, from one batched fit.

    Each cell keeps its own randomness (`Cell.algorithm_rng`) and privacy target; the batched
    twin draws for replica r exactly what the single fit of cell r draws, so every record equals
    `run_cell`'s up to floating-point rounding (sums over replicas are taken in another order).
    The cells run as fits of at most `replicas_per_fit` replicas each (the memory bound); a fit's
    time is shared equally among its cells. Each batched fit is tallied and its tally split per
    replica (`replica_tallies`), so each cell's steps are checked against its own ledger.
    """
    from dpbench.algorithms import releases

    keys = {batch_key(c) for c in cells}
    if len(keys) != 1 or None in keys:
        raise ValueError("run_cells takes cells of one batch (equal, non-null batch_key)")
    shared = _prepare(cells[0], context)
    targets = [_target(c, shared) for c in cells]
    lstar = optimum(cells[0], shared.problem, context)
    problem = shared.problem
    jax = cells[0].backend == "jax"  # the JAX twin holds its replicas in blocks of its own (`on_jax.loops`)
    size = len(cells) if jax else replicas_per_fit(problem.n, problem.model.n_params)
    records = []
    for a in range(0, len(cells), size):
        part, part_targets = cells[a:a + size], targets[a:a + size]
        started = time.perf_counter()
        with releases.tallying() as tally:
            if jax:
                fits = _jax_fits(shared, part_targets, part, context)
            else:
                fits = shared.info.fit_batch(problem, part_targets, [c.algorithm_rng() for c in part],
                                             [dict(c.params) for c in part])
        fit_seconds = (time.perf_counter() - started) / len(part)
        records += [_record(c, shared, t, fit, fit_seconds, lstar, context, released=steps)
                    for c, t, fit, steps in zip(part, part_targets, fits, replica_tallies(tally, len(part)))]
    save_privacy_memo(context)
    return records


#: why a batched fit's cells are not release-checked when its tally cannot be split per replica
UNATTRIBUTED = "the batched fit reported steps without naming their replica"


def replica_tallies(tally, replicas: int) -> list:
    """The tally of each replica of a batched fit (`releases.Tally.split`); where the fit reported
    steps without naming their replica (a twin that runs its fits without `releases.replicas_from`),
    the reason `UNATTRIBUTED` for every replica instead of a guess."""
    return tally.split(replicas) if tally.per_replica else [UNATTRIBUTED] * replicas


def checked_releases(ledger: Ledger, released) -> Ledger:
    """The ledger after dpbench's release check of the fit's tallied steps (a `releases.Tally`;
    `algorithms.release_check.with_release_check`: the result in the detail `release_check`, a
    mismatch turning "valid" into "paper-only"); a string: "not checked" for that reason; None
    (nothing tallied): unchanged."""
    from dpbench.algorithms import release_check

    if isinstance(released, str):
        return ledger.with_details(**{release_check.DETAIL: f"not checked: {released}"})
    return release_check.with_release_check(ledger, released)


def with_public(ledger: Ledger, n: int, bounds: dict | None) -> Ledger:
    """A private claim's ledger with what it treats as public (`Ledger.public`): under add/remove-one
    accounting the number of records n (q, T and the noise are computed from it), and the feature
    bounds the data were scaled with (the data set's `provenance["feature_bounds"]`: declared public,
    taken from the data itself -- `claim_check.DATA_DEPENDENT`, a step no epsilon covers -- or no
    scaling at all)."""
    from dpbench.core.ledger import Adjacency
    from dpbench.privacy.claim_check import DATA_DEPENDENT

    if not ledger.private or ledger.claim == "none":
        return ledger
    public = {}
    if Adjacency.ADD_REMOVE in (ledger.adjacency, ledger.spent_adjacency):
        public["n"] = (f"n = {n} records is treated as public: the sampling rate, the steps and the noise are "
                       "computed from it (add/remove-one accounting)")
    if bounds:
        columns = ", ".join(bounds.get("columns") or [])
        public["feature_bounds"] = {
            "declared": f"declared public: {bounds.get('source')}",
            "data-dependent": f"{DATA_DEPENDENT}: {bounds.get('source')} ({columns}), not accounted",
        }.get(bounds.get("kind"), f"no data-dependent scaling: {bounds.get('source')}")
    return ledger.with_public(**public) if public else ledger


def _record(cell: Cell, shared: _Prepared, target, fit, fit_seconds: float, lstar: float,
            context: CellContext, released=None) -> dict:
    """The stored record of a fitted cell: its identity, the metrics of the released theta, the
    ledger as released (with the weak-delta and convexity notes), trace, private-selection score. A
    plugin that owns its mechanism has its ledger and trace reduced to dpbench's schema and its
    "valid" stored as "declared" (`plugin_records`)."""
    from dpbench.privacy import claim_check
    from dpbench.run import metrics, plugin_records, plugins

    dataset, model, info, delta = shared.dataset, shared.model, shared.info, target.delta
    population_lstar = population_optimum(cell, dataset, model, context)
    ledger, trace = Ledger.from_dict(fit.privacy), fit.trace
    if info.mechanism_owner == "plugin":  # only the declared schema of what a plugin writes is stored
        trace, dropped = plugin_records.schema_trace(trace)
        ledger = plugin_records.with_dropped(plugin_records.schema_ledger(ledger), dropped)
    ledger = claim_check.checked(ledger, target.epsilon, delta)
    ledger = checked_releases(ledger, released)
    ledger = plugin_records.owned_claim(ledger, info.mechanism_owner, info.library)
    if info.convex_only and not model.convex and ledger.claim != "none":
        ledger = ledger.with_claim("none", f"{cell.algorithm}'s proof needs a convex loss; {cell.model} is not convex")
    if delta is not None and ledger.claim != "none" and delta >= 1.0 / dataset.n_train:
        ledger = ledger.with_details(weak_delta=(f"delta = {delta:.3g} >= 1/n = {1.0 / dataset.n_train:.3g}: a mechanism that publishes "
                                 f"one random record whole with probability delta per record meets it, so the "
                                 f"guarantee means little; use delta <= 1/n**1.1 or a fixed 1e-5"))
    ledger = with_public(ledger, dataset.n_train, dataset.provenance.get("feature_bounds"))
    tuning = None
    if cell.tuning is not None:
        settings = dict(cell.tuning)
        multiplier = settings["score_noise"] / float(cell.epsilon)  # the score's share of the budget ~ const
        score, sensitivity = metrics.private_score(model, fit.theta, dataset, settings["score"], multiplier,
                                                   settings["loss_bound"], cell.score_rng())
        tuning = {**settings, "draw": cell.draw, "score_value": score, "score_sensitivity": sensitivity,
                  "score_noise_multiplier": multiplier}
    return {
        "key": cell.key, **cell.labels(),
        "algorithm": cell.algorithm, "params": dict(cell.params),
        "dataset": cell.dataset, "dataset_options": dict(cell.dataset_options),
        **({"dataset_revision": cell.dataset_revision} if cell.dataset_revision else {}),
        **({"backend": cell.backend, "device": context.device} if cell.backend != "numpy" else {}),
        "model": cell.model, "model_options": dict(cell.model_options),
        "epsilon": cell.epsilon, "delta_spec": cell.delta, "delta": delta, "rep": cell.rep, "seed": cell.seed,
        "problem": cell.problem_key, "n_train": dataset.n_train, "n_val": int(dataset.X_val.shape[0]),
        "n_test": int(dataset.X_test.shape[0]), "n_features": dataset.n_features, "n_params": model.n_params,
        "lstar": lstar,
        "population_lstar": population_lstar,
        "metrics": {k: _json_float(v) for k, v in metrics.evaluate(model, fit.theta, dataset).items()},
        "privacy": ledger.as_dict(), "trace": trace_metrics(trace, model, dataset, lstar), "fit_seconds": fit_seconds,
        **({"draw": cell.draw, "tuning": tuning} if tuning is not None else {}),
        "data_files": {f"{Path(f['path']).parent.name}/{Path(f['path']).name}": f["sha256"]
                       for f in dataset.provenance.get("files", [])},
        **({"plugin": plugins.provenance(cell.plugin)} if cell.plugin is not None else {}),
    }
