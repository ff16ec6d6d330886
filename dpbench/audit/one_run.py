"""One-run audits (Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023).

One training instead of thousands: m canaries, each included independently with probability 1/2,
a score per canary from the training's output, guesses on the surest ones, and a lower bound on
epsilon from the number of correct guesses (`dpbench.privacy.one_run`: the paper's theorem,
valid at the stated confidence whatever the algorithm does).

The canaries come from a single-canary game (`dpbench.audit.canaries`) whose canary lies on one spare
coordinate k that no base row touches (spare_feature, gradient_canary, pidp_constant): the base
rows get m - 1 further all-zero columns, and canary j is the recipe's canary moved to spare
coordinate j (k for j = 0), so every canary has a coordinate of its own and the canaries do not
mask each other. The model is the setup's model on the widened rows (a public start point
`theta0` is padded with zeros).

Neighbours: add/remove-one (the paper's setting): the training set is the base rows plus the
included canaries. Replace-one: slot j holds canary j when included and otherwise the row the
canary replaces (the game's `replaced` row moved to coordinate j, e.g. gradient_canary's
(e_j, -1); else a copy of the base's last row), so switching one bit is one replace-one step and
the theorem applies with that adjacency.

Scores: final_model: canary j's margin y_j <theta, x_j> (for a linear model y_j theta_j times
the canary's value). all_updates: the privacy loss of canary j along its own coordinate over
every noisy step (`audit_whitebox.CanariesObserver`; linear models).

The inclusion bits and the fit's randomness come from seeds derived from the game's key, so an
audit is a pure function of its setup; its one training is stored under <results>/.cache/audits
like the chunks of the multi-run audits and reused.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from dpbench.audit.canaries import Game
from dpbench.audit.setup import AUDIT_SCHEMA, AuditError, AuditSetup, check_setup
from dpbench.core.keys import digest, seed_from
from dpbench.core.ledger import Adjacency, Ledger
from dpbench.privacy import claim_check, one_run
from dpbench.run import plugin_records


@dataclass(frozen=True)
class OneRunData:
    """The widened base rows, the m canaries and their replacements, and where each canary sits."""

    X: np.ndarray  # base rows, widened to D + m - 1 columns
    y: np.ndarray
    Xc: np.ndarray  # (m, D + m - 1): canary j on coordinate coords[j]
    yc: np.ndarray
    Xr: np.ndarray | None  # replace-one: the row slot j holds when canary j is out
    yr: np.ndarray | None
    coords: np.ndarray
    theta0: np.ndarray | None

    def training_set(self, included: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.Xr is None:  # add/remove-one
            return np.vstack([self.X, self.Xc[included]]), np.concatenate([self.y, self.yc[included]])
        rows = np.where(included[:, None], self.Xc, self.Xr)
        return np.vstack([self.X, rows]), np.concatenate([self.y, np.where(included, self.yc, self.yr)])


def widen(game: Game, canaries: int, adjacency: Adjacency | str) -> OneRunData:
    """The one-run data of a single-canary game (module docstring); AuditError when the game's
    canary does not sit on one spare coordinate of its own."""
    if game.direction is None:
        raise AuditError("canary: a one-run audit needs a canary on a spare coordinate of its own "
                         "(spare_feature, gradient_canary, pidp_constant)")
    u = np.asarray(game.direction, dtype=float)
    support = np.flatnonzero(u)
    x_c = np.asarray(game.canary_x, dtype=float)
    if support.size != 1 or np.flatnonzero(x_c).tolist() != support.tolist() or np.any(game.X[:, support[0]] != 0):
        raise AuditError("canary: a one-run audit needs a canary on one spare coordinate no base row touches")
    k, m = int(support[0]), int(canaries)
    n, d = game.X.shape
    width = d + m - 1
    coords = np.array([k] + list(range(d, width)))
    X = np.hstack([game.X, np.zeros((n, m - 1))])
    Xc = np.zeros((m, width))
    Xc[np.arange(m), coords] = x_c[k]
    yc = np.full(m, float(game.canary_y))
    Xr = yr = None
    if Adjacency.parse(adjacency) is Adjacency.REPLACE_ONE:
        if game.replaced is not None:
            xr, y_r = game.replaced_row()
            if np.flatnonzero(xr).tolist() != [k]:
                raise AuditError("canary: the replaced row of a one-run audit must sit on the canary's coordinate")
            Xr = np.zeros((m, width))
            Xr[np.arange(m), coords] = xr[k]
            yr = np.full(m, y_r)
        else:  # a copy of the base's last row: it contributes nothing on any canary coordinate
            Xr, yr = np.tile(X[-1], (m, 1)), np.full(m, float(game.y[-1]))
    theta0 = None if game.theta0 is None else np.concatenate([np.asarray(game.theta0, dtype=float), np.zeros(m - 1)])
    return OneRunData(X=X, y=np.asarray(game.y, dtype=float), Xc=Xc, yc=yc, Xr=Xr, yr=yr, coords=coords,
                      theta0=theta0)


@dataclass(frozen=True)
class OneRunChunk:
    """The one training of a one-run audit (what the runner runs and stores)."""

    setup: AuditSetup
    game_key: str
    adjacency: str

    def identity(self) -> dict:
        return {"kind": "audit-one-run", "game": self.game_key, "adjacency": self.adjacency,
                "algorithm": self.setup.algorithm, "canaries": self.setup.canaries, "epsilon": self.setup.epsilon}

    @cached_property
    def key(self) -> str:
        return "audit-one-run-" + digest({"schema": AUDIT_SCHEMA, "game": self.game_key, "adjacency": self.adjacency})


def membership(game_key: str, canaries: int) -> np.ndarray:
    """The inclusion bits: each canary in with probability 1/2, from a seed of the game's key."""
    rng = np.random.default_rng(np.random.SeedSequence(seed_from("audit-one-run", game_key, "membership")))
    return rng.random(int(canaries)) < 0.5


def run_one_run_chunk(chunk: OneRunChunk, context=None) -> dict:
    """Train once with the included canaries and score every canary (a pure function of the chunk)."""
    from dpbench import algorithms, models
    from dpbench.algorithms.releases import observing
    from dpbench.audit.trials import AuditContext, prepare_fits
    from dpbench.audit.whitebox import CanariesObserver
    from dpbench.run.cells import save_privacy_memo

    context = context or AuditContext()
    cell_context, resolved, game, info = prepare_fits(chunk.setup, chunk.game_key, context)
    setup = chunk.setup
    data = widen(game, int(setup.canaries), chunk.adjacency)
    included = membership(chunk.game_key, int(setup.canaries))
    X, y = data.training_set(included)
    model = models.make(setup.model, X.shape[1], **resolved.model_options)
    if data.theta0 is not None:
        model.init = lambda rng, _start=data.theta0: _start.copy()
    target = algorithms.PrivacyTarget(epsilon=float(setup.epsilon), delta=float(setup.delta)) if info.private \
        else algorithms.PrivacyTarget(epsilon=None, delta=None)
    rng = np.random.default_rng(np.random.SeedSequence(seed_from("audit-one-run", chunk.game_key, "fit")))
    problem = algorithms.Problem(model=model, X=X, y=y)
    started = time.perf_counter()
    if setup.threat == "all_updates":
        try:
            observer = CanariesObserver(model, data.Xc, data.yc, data.coords, data.Xr, data.yr)
        except ValueError as exc:
            raise AuditError(f"threat: {exc}") from None
        with observing(observer):
            fit = info.fit(problem, target, rng, **resolved.params)
        if observer.releases == 0:
            raise AuditError(f"{setup.algorithm} reported no noisy step: nothing for the all-updates adversary to see")
        scores = observer.scores
    else:
        fit = info.fit(problem, target, rng, **resolved.params)
        scores = data.yc * model.decision_function(np.asarray(fit.theta, dtype=float), data.Xc)
    fit_seconds = time.perf_counter() - started
    save_privacy_memo(cell_context)
    # dpbench's own check of a "valid" (the fit's word is not taken: its stated mechanism is recomputed)
    ledger = claim_check.checked(Ledger.from_dict(fit.privacy), setup.epsilon, setup.delta)
    ledger = plugin_records.owned_claim(ledger, info.mechanism_owner, info.library)  # as the runner stores it
    claim = ledger.get("claim")
    if info.convex_only and not model.convex and claim != "none":
        claim = "none"
    spent = ledger.get("epsilon_spent") or {}
    return {"key": chunk.key, "kind": "audit-one-run", "game": resolved.game_identity(), "game_key": chunk.game_key,
            "adjacency_used": chunk.adjacency, "scores": [float(v) for v in scores],
            "included": [bool(b) for b in included], "claim": claim, "adjacency": ledger.audited_adjacency.value,
            "target_epsilon": ledger.get("target_epsilon") if claim != "none" else None,
            "epsilon_spent": {k: float(v) for k, v in spent.items() if v is not None},
            "mechanism": ledger.get("mechanism"), "n_rows": int(X.shape[0]), "fit_seconds": fit_seconds}


@dataclass
class OneRunAuditResult:
    """Outcome of `run_one_run_audit`; `row()` is its row of the audits table."""

    setup: AuditSetup
    claimed_epsilon: float | None
    claim: str | None
    adjacency: str
    outcome: one_run.OneRunResult
    ceiling: float
    seconds: float
    reused: int
    fit_seconds: float
    rows: int  # training rows (base + canaries in)
    accounted_epsilon: float | None = None

    @property
    def epsilon_lower_bound(self) -> float:
        return self.outcome.epsilon_lower

    @property
    def confidence(self) -> float:
        return 1.0 - self.outcome.alpha

    @property
    def threat(self) -> str:
        return self.setup.threat

    @property
    def broken(self) -> bool | None:
        if self.claimed_epsilon is None:
            return None
        return bool(self.epsilon_lower_bound > self.claimed_epsilon)

    def row(self) -> dict:
        s, o = self.setup, self.outcome
        return {
            "label": s.display_label, "algorithm": s.algorithm, "dataset": s.dataset or "(recipe)", "model": s.model,
            "canary": s.canary, "epsilon": s.epsilon, "delta": s.delta, "claimed_epsilon": self.claimed_epsilon,
            "claim": self.claim, "adjacency": self.adjacency, "epsilon_lower_bound": self.epsilon_lower_bound,
            "confidence": self.confidence, "ceiling": self.ceiling, "broken": self.broken, "trials": 1,
            "rows": self.rows, "seconds": self.seconds, "seconds_per_fit": self.fit_seconds, "reused": self.reused,
            "key": s.key, "threat": s.threat, "method": "one-run", "canaries": o.m, "guesses": o.r,
            "correct": o.correct, "accounted_epsilon": self.accounted_epsilon,
        }


def run_one_run_audit(setup: AuditSetup, *, data_dir: str | None = None, results: str | Path = "results",
                      jobs: int = 1, backend: str = "loky", scheduler: str | None = None, progress: bool = True,
                      force: bool = False, train: bool = True) -> OneRunAuditResult:
    """The one-run audit of `setup` (module docstring): train once (or read the stored training)
    with `setup.canaries` canaries, guess the surest `setup.guesses` (default
    `one_run.default_k`), and bound epsilon from the correct guesses."""
    from dpbench.audit.trials import AuditContext, game_for, probe_adjacency, run_phase
    from dpbench.core.store import ResultStore

    if setup.canaries is None:
        raise AuditError("canaries: a one-run audit needs the number of canaries")
    started = time.perf_counter()
    resolved = check_setup(setup)
    root = Path(results) / ".cache"
    store = ResultStore(root / "audits", required={"scores": list, "included": list})
    context = AuditContext(data_dir=None if data_dir is None else str(data_dir), cache_dir=str(root))
    if train:
        game_for(setup, context.data_dir)
        adjacency = probe_adjacency(setup, context.data_dir)
    else:  # nothing may be trained: the adjacency whose training is stored
        stored = [a.value for a in Adjacency
                  if store.read(OneRunChunk(setup=setup, game_key=resolved.game_key, adjacency=a.value).key)[0]]
        adjacency = stored[0] if stored else Adjacency.ADD_REMOVE.value
    chunk = OneRunChunk(setup=setup, game_key=resolved.game_key, adjacency=adjacency)
    summary, (record,) = run_phase([chunk], store, context, jobs=1, backend=backend, scheduler=scheduler,
                                    progress=progress, force=force,
                                    description=f"one-run audit {setup.display_label}", train=train,
                                    function=functools.partial(run_one_run_chunk, context=context))
    if record["adjacency"] != adjacency:
        raise AuditError(f"the fits of one audit disagree on their adjacency: {adjacency} (probe) vs "
                         f"{record['adjacency']}")
    m = int(setup.canaries)
    if setup.guesses is None:
        k_pos, k_neg = one_run.default_k(m)
    else:
        k_pos, k_neg = (int(setup.guesses) + 1) // 2, int(setup.guesses) // 2
    outcome = one_run.one_run_audit(np.asarray(record["scores"]), np.asarray(record["included"], dtype=bool),
                                    float(setup.delta), float(setup.alpha), k_pos, k_neg)
    claimed = record.get("target_epsilon")
    spent = list((record.get("epsilon_spent") or {}).values())
    return OneRunAuditResult(
        setup=setup, claimed_epsilon=None if claimed is None else float(claimed), claim=record.get("claim"),
        adjacency=record["adjacency"], outcome=outcome,
        ceiling=one_run.one_run_ceiling(k_pos + k_neg, m, float(setup.delta), float(setup.alpha)),
        seconds=time.perf_counter() - started, reused=summary.reused, fit_seconds=float(record.get("fit_seconds", 0)),
        rows=int(record["n_rows"]),
        accounted_epsilon=float(min(spent)) if spent and record.get("claim") == "valid" else None)


__all__ = ["OneRunAuditResult", "OneRunChunk", "OneRunData", "membership", "run_one_run_audit",
           "run_one_run_chunk", "widen"]
