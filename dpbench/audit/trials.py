"""The trials of an audit's distinguishing game: the game built once per process, the fits of one
chunk of trials (each with its own seed, so chunking, order and workers do not change a number),
the adjacency the algorithm's ledger claims, and one side's chunks run or read from the store.

Shared by the multi-run audit (`audit.multi_run`) and the one-run audit (`audit.one_run`)."""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dpbench.audit.canaries import Game, RecipeContext
from dpbench.audit.setup import AUDIT_SCHEMA, AuditError, AuditSetup, ResolvedAudit, check_setup
from dpbench.core.errors import DpbenchError
from dpbench.core.keys import digest, seed_from
from dpbench.core.ledger import Adjacency, Ledger
from dpbench.core.registry import resolve_paths
from dpbench.privacy import claim_check
from dpbench.run import plugin_records

if TYPE_CHECKING:
    pass


CHUNK_TRIALS = 50  # fits per stored chunk


VECTORISED_CHUNK_TRIALS = 1000  # fits per stored chunk of an algorithm with a vectorised twin (one call)


def claimed_adjacency(stored: str | None) -> str:
    """The relation a game uses for a ledger's stored `adjacency` (also the free-text adjacency
    some stored records carry); add/remove-one when unset."""
    return Ledger.from_dict({"adjacency": stored}).audited_adjacency.value


# =============================================================================================
# chunks of fits (what the runner runs and stores)
# =============================================================================================
@dataclass(frozen=True)
class AuditChunk:
    """`count` fits on side `side` (0: D0, 1: D1), trials start .. start+count-1."""

    setup: AuditSetup
    game_key: str
    side: int
    start: int
    count: int
    adjacency: str | None = None  # side 1: the game adjacency; side 0: None (D0 is the base either way)
    backend: str = "numpy"  # "jax": the fits run on the JAX path (`dpbench.on_jax`), which draws its own numbers

    def identity(self) -> dict:
        return {"kind": "audit-chunk", "game": self.game_key, "side": self.side, "start": self.start,
                "count": self.count, "adjacency": self.adjacency, "algorithm": self.setup.algorithm,
                "dataset": self.setup.dataset, "canary": self.setup.canary, "epsilon": self.setup.epsilon}

    @cached_property
    def key(self) -> str:
        return "audit-" + digest({"schema": AUDIT_SCHEMA, "game": self.game_key, "side": self.side,
                                  "start": self.start, "count": self.count, "adjacency": self.adjacency,
                                  **({"backend": self.backend} if self.backend != "numpy" else {})})


@dataclass(frozen=True)
class AuditContext:
    """Worker settings (picklable): where the raw data and the accounting memo live."""

    data_dir: str | None = None
    cache_dir: str | None = None
    device: str = "cpu"  # where chunks of backend "jax" train (`dpbench.on_jax.device`)


def trial_rng(game_key: str, side: int, trial: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed_from("audit", game_key, int(side), int(trial))))


def data_seed(setup: AuditSetup) -> int:
    return seed_from("audit-data", setup.seed, setup.dataset, setup.data_options) % (2**32)


@functools.lru_cache(maxsize=8)
def _cached_game(setup: AuditSetup, data_dir: str | None) -> tuple[ResolvedAudit, Game]:
    return build_game(setup, data_dir=data_dir)


def game_for(setup: AuditSetup, data_dir: str | None) -> tuple[ResolvedAudit, Game]:
    """build_game, memoised per process (chunks of one audit share the data and the recipe's work)."""
    try:
        hash(setup)
    except TypeError:  # an unhashable option value: build without the memo
        return build_game(setup, data_dir=data_dir)
    return _cached_game(setup, data_dir)


def build_game(setup: AuditSetup, *, data_dir: str | None = None) -> tuple[ResolvedAudit, Game]:
    """Validate the setup, load its base data and let the recipe build the game."""
    from dpbench import data

    resolved = check_setup(setup)
    dataset = None
    if setup.dataset is not None:
        try:
            options = resolve_paths(data.DATASETS.lookup(setup.dataset).params, dict(setup.dataset_options),
                                    setup.dataset_base)
            dataset = data.load(setup.dataset, seed=data_seed(setup), data_dir=data_dir, **options)
        except DpbenchError:
            raise
        except ValueError as exc:
            raise AuditError(f"dataset: {exc}") from None
        if setup.rows is not None and setup.rows > dataset.n_train:  # the recipe's default is capped, not this
            raise AuditError(f"rows: {setup.rows} base rows asked for, but the training split of {setup.dataset} "
                             f"has {dataset.n_train}; ask for at most {dataset.n_train} (or leave rows out for "
                             f"min({resolved.recipe.default_rows}, {dataset.n_train}))")
    context = RecipeContext(dataset=dataset, rows=resolved.rows, model=setup.model,
                            model_options=dict(resolved.model_options), seed=int(setup.seed), recipe=setup.canary)
    game = resolved.recipe.build(context)
    if setup.threat == "all_updates" and game.direction is None:
        raise AuditError(f"threat: canary {setup.canary!r} names no canary direction untouched by the base rows, "
                         f"which the all-updates statistic needs (spare_feature, gradient_canary and pidp_constant do)")
    if game.theta0 is not None:  # a public start point: every fit's model.init returns it
        start = np.array(game.theta0, dtype=float)
        game.model.init = lambda rng, _start=start: _start.copy()
    return resolved, game


def prepare_fits(setup: AuditSetup, game_key: str, context: AuditContext):
    """What a worker needs before an audit's fits: the accounting memo loaded (its CellContext is
    returned to save it afterwards), the game (checked to be the one planned) and the algorithm."""
    from dpbench import algorithms
    from dpbench.run.cells import CellContext, load_privacy_memo

    cell_context = CellContext(data_dir=context.data_dir, cache_dir=context.cache_dir)
    load_privacy_memo(cell_context)
    resolved, game = game_for(setup, context.data_dir)
    if resolved.game_key != game_key:
        raise RuntimeError("audit fits planned for another game (the code changed between planning and running)")
    return cell_context, resolved, game, algorithms.get(setup.algorithm)


def _fits(info, problem, target, rngs: list, params: dict, backend: str = "numpy", device: str = "cpu",
          cache_dir: str | None = None) -> list:
    """One fit per generator: the JAX twin for a chunk of backend "jax", else the vectorised twin in one
    call where the algorithm has one."""
    if backend == "jax":
        from dpbench.on_jax import device as jax_device
        from dpbench.on_jax.twins import twin

        jax_device.activate(device)
        jax_device.compilation_cache(None if cache_dir is None else str(Path(cache_dir) / "jax"))
        with jax_device.on(device):
            return twin(info.name).many(problem, target, rngs, **params)
    if info.fit_many is not None and len(rngs) > 1:
        return list(info.fit_many(problem, target, rngs, **params))
    return [info.fit(problem, target, rng, **params) for rng in rngs]


def run_chunk(chunk: AuditChunk, context: AuditContext = AuditContext()) -> dict:
    """Fit `count` times on the chunk's side and score every fit (a pure function of the chunk).

    final_model: the recipe's score of each trained theta. all_updates: the privacy loss of each
    training's noisy steps as the all-updates adversary sees them (`audit_whitebox`), plus the
    per-training step sums of the measured-mechanism estimate (`step_sums`)."""
    from dpbench import algorithms
    from dpbench.algorithms.releases import observing
    from dpbench.audit.whitebox import WhiteBoxObserver
    from dpbench.run.cells import save_privacy_memo

    cell_context, resolved, game, info = prepare_fits(chunk.setup, chunk.game_key, context)
    setup = chunk.setup
    X0, y0, X1, y1 = game.neighbours(chunk.adjacency or Adjacency.ADD_REMOVE)
    X, y = (X0, y0) if chunk.side == 0 else (X1, y1)
    problem = algorithms.Problem(model=game.model, X=X, y=y)
    target = algorithms.PrivacyTarget(epsilon=float(setup.epsilon), delta=float(setup.delta)) if info.private \
        else algorithms.PrivacyTarget(epsilon=None, delta=None)
    rngs = [trial_rng(chunk.game_key, chunk.side, trial) for trial in range(chunk.start, chunk.start + chunk.count)]
    started = time.perf_counter()
    step_sums = None
    if setup.threat == "all_updates":
        observer = WhiteBoxObserver(game, chunk.adjacency or Adjacency.ADD_REMOVE, replicas=len(rngs))
        if info.fit_many is not None and len(rngs) > 1:
            with observing(observer):
                fits = _fits(info, problem, target, rngs, resolved.params)
        else:  # one observer per fit, its single replica copied into the chunk's arrays
            fits = []
            for r, rng in enumerate(rngs):
                one = WhiteBoxObserver(game, chunk.adjacency or Adjacency.ADD_REMOVE, replicas=1)
                with observing(one):
                    fits.append(info.fit(problem, target, rng, **resolved.params))
                observer.scores[r] = one.scores[0]
                for key in observer.sums:
                    observer.sums[key][r] = one.sums[key][0]
                observer.releases += one.releases
                observer.kinds |= one.kinds
                observer.rates |= one.rates
        if observer.releases == 0:
            raise AuditError(f"{setup.algorithm} reported no noisy step: nothing for the all-updates adversary to see")
        scores = [float(v) for v in observer.scores]
        step_sums = {key: [float(v) for v in values] for key, values in observer.sums.items()}
        step_sums["rates"] = sorted(observer.rates)
    else:
        fits = _fits(info, problem, target, rngs, resolved.params, chunk.backend, context.device, context.cache_dir)
        scores = [float(game.score(fit.theta)) for fit in fits]
    fit_seconds = time.perf_counter() - started
    # dpbench's own check of a "valid" (the fit's word is not taken: its stated mechanism is recomputed)
    ledger = claim_check.checked(Ledger.from_dict(fits[0].privacy), setup.epsilon, setup.delta)
    ledger = plugin_records.owned_claim(ledger, info.mechanism_owner, info.library)  # as the runner stores it
    save_privacy_memo(cell_context)
    claim = ledger.get("claim")
    if info.convex_only and not game.model.convex and claim != "none":
        claim = "none"
    spent = ledger.get("epsilon_spent") or {}
    return {"key": chunk.key, "kind": "audit-chunk", "game": resolved.game_identity(), "game_key": chunk.game_key,
            "side": chunk.side, "start": chunk.start, "count": chunk.count, "adjacency_used": chunk.adjacency,
            "scores": scores, "claim": claim, "adjacency": ledger.audited_adjacency.value,
            "target_epsilon": ledger.get("target_epsilon") if claim != "none" else None,
            "epsilon_spent": {k: float(v) for k, v in spent.items() if v is not None},
            **({"step_sums": step_sums} if step_sums is not None else {}),
            "mechanism": ledger.get("mechanism"), "n_rows": int(X.shape[0]), "fit_seconds": fit_seconds}


#: what a stored ok-record of `run_chunk` must hold to be used (others are moved aside and rerun)
CHUNK_FIELDS: dict[str, type] = {"scores": list, "side": int, "start": int, "count": int}


def chunk_trials(algorithm: str) -> int:
    """Fits per stored chunk: one vectorised call of VECTORISED_CHUNK_TRIALS where the algorithm
    has a vectorised twin, else CHUNK_TRIALS (small chunks keep the workers busy and the progress bar moving)."""
    from dpbench import algorithms

    return VECTORISED_CHUNK_TRIALS if algorithms.get(algorithm).fit_many is not None else CHUNK_TRIALS


#: fits per stored chunk on the JAX path: one call of the twin, vmapped over the replicas
JAX_CHUNK_TRIALS = 10_000


def audit_backend(setup: AuditSetup, device: str) -> str:
    """"jax" where `device` runs the JAX path and the audit's fits have a JAX twin: the final-model
    threat (the JAX loops report no step's arrays) on a model with a JAX form; else "numpy"."""
    from dpbench import models
    from dpbench.on_jax.device import uses_jax
    from dpbench.on_jax.twins import on_jax

    if not uses_jax(device) or setup.threat != "final_model" or setup.model is None:
        return "numpy"
    return "jax" if on_jax(setup.algorithm, models.MODELS.lookup(setup.model).factory, dict(setup.params)) else "numpy"


def side_chunks(resolved: ResolvedAudit, side: int, adjacency: str | None, backend: str = "numpy") -> list[AuditChunk]:
    trials = int(resolved.setup.trials)
    size = JAX_CHUNK_TRIALS if backend == "jax" else chunk_trials(resolved.setup.algorithm)
    return [AuditChunk(setup=resolved.setup, game_key=resolved.game_key, side=side, start=start,
                       count=min(size, trials - start), adjacency=adjacency, backend=backend)
            for start in range(0, trials, size)]


def probe_adjacency(setup: AuditSetup, data_dir: str | None = None) -> str:
    """The adjacency the algorithm's ledger claims, from one fit on the base rows (a game whose D0
    depends on the adjacency, one with a `replaced` row, needs it before D0's chunks run)."""
    from dpbench import algorithms

    resolved, game = game_for(setup, data_dir)
    info = algorithms.get(setup.algorithm)
    target = algorithms.PrivacyTarget(epsilon=float(setup.epsilon), delta=float(setup.delta)) if info.private \
        else algorithms.PrivacyTarget(epsilon=None, delta=None)
    rng = np.random.default_rng(np.random.SeedSequence(seed_from("audit-probe", resolved.game_key)))
    fit = info.fit(algorithms.Problem(model=game.model, X=game.X, y=game.y), target, rng, **resolved.params)
    return Ledger.from_dict(fit.privacy).audited_adjacency.value


def run_phase(chunks, store, context, *, jobs, backend, scheduler, progress, force, description, train=True,
               function=None):
    """(run summary, stored records) of one side's chunks (`function`: run_chunk unless another
    chunk type's, e.g. the one-run audit's). Training runs the chunks not stored
    (damaged ones are moved aside by the store, named on stderr and trained again); with
    `train=False` only usable stored chunks are read, nothing is moved, and an AuditError counts
    the missing and damaged ones."""
    from dpbench.run import runner

    if not train:  # read what is stored, run nothing, move nothing (a damaged chunk counts as missing)
        found = [store.read(c.key) for c in chunks]
        records = [record for record, _ in found if record is not None and record.get("status") == "ok"]
        if len(records) < len(chunks):
            damaged = sum(problem is not None for _, problem in found)
            raise AuditError(f"{description}: {len(chunks) - len(records)} of {len(chunks)} trial chunks are not "
                             f"stored under {store.cells_dir}" + (f" ({damaged} damaged)" if damaged else "") +
                             " (`dpbench run` trains them)")
        return runner.RunSummary(total=len(chunks), reused=len(chunks), ran=0), records
    function = function or functools.partial(run_chunk, context=context)
    summary = runner.run(chunks, function, store, jobs=jobs, backend=backend,
                         scheduler=scheduler, force=force, progress=progress, description=description)
    for key, reason, target in store.quarantined:  # damaged chunks were moved aside and trained again
        print(f"damaged audit chunk {key}.json ({reason}): moved to {target}, recomputed it", file=sys.stderr)
    store.quarantined.clear()
    if summary.failed:
        first = summary.failed[0]
        raise AuditError(f"{len(summary.failed)} audit chunk(s) failed, first: {first['error']} "
                         f"(traceback in {store.path(first['key'])})")
    records = [store.get(chunk.key) for chunk in chunks]
    if any(r is None or r.get("status") != "ok" for r in records):
        raise AuditError(f"audit chunks missing from {store.root} after the run")
    return summary, records
