"""The Algorithm contract and the registry every algorithm joins (docs/contributing.md, Add an algorithm).

An algorithm is `fit(problem, privacy, rng, **hyper) -> Fit`. It knows nothing about files,
YAML or processes: it gets arrays and a model, a privacy target and a numpy Generator, and
returns parameters, an optional trace and a privacy ledger entry that says what it actually
spent (never more than the code computed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from dpbench.core.ledger import Adjacency, Ledger
from dpbench.core.registry import BUILT_IN, Declared, Param, Registry, current_source, params_of
from dpbench.models.base import Model


@dataclass(frozen=True)
class Problem:
    """Training data and the model whose reference objective L_ref is minimised."""

    model: Model
    X: np.ndarray
    y: np.ndarray

    @property
    def n(self) -> int:
        return int(self.X.shape[0])


@dataclass(frozen=True)
class PrivacyTarget:
    """Target (epsilon, delta); both None for a non-private run."""

    epsilon: float | None
    delta: float | None


@dataclass
class Fit:
    """What `fit` returns: parameters, the privacy ledger (`dpbench.core.ledger.Ledger`, stored with the cell)
    and an optional trace."""

    theta: np.ndarray
    privacy: Ledger
    trace: list[dict] = field(default_factory=list)


#: Upper bounds of the epochs and steps hyperparameters: far above any paper's setting (PIDP-SGD
#: runs 27,134 batch-1 steps, full-batch methods 100-2,000 steps), so a value above them is a typo
#: that would run for days without a word (a fit is one cell: it shows no progress of its own).
MAX_EPOCHS = 10_000
MAX_STEPS = 10_000_000


FitFunction = Callable[..., Fit]


@dataclass(frozen=True)
class AlgorithmInfo(Declared):
    """A registered algorithm: name, paper, whether it is private, its fit and the parameters
    that fit declares (`dpbench.core.registry.params_of`: its annotated keyword arguments)."""

    name: str
    title: str
    citation: str
    private: bool
    fit: FitFunction
    params: tuple[Param, ...] = ()
    convex_only: bool = False  # its privacy proof needs a convex loss
    source: str = BUILT_IN  # or the plugin reference it was loaded from (dpbench.run.plugins)
    updates: bool = False  # its fits report every noisy step (`dpbench.algorithms.releases`)
    privatised: bool = False  # its privacy is dpbench's own mechanism (`dpbench.algorithms.privatiser`)
    library: str | None = None  # a peer: the distribution whose mechanism it runs (`dpbench.algorithms.peers`)

    @property
    def mechanism_owner(self) -> str:
        """Whose code runs the mechanism: "dpbench" (a built-in, or a plugin on the privatiser path),
        "plugin" (a plugin that owns its loop) or "library" (a peer library's implementation,
        `library`); the claim of the last two is at most "declared"."""
        if self.library is not None:
            return "library"
        return "dpbench" if self.source == BUILT_IN or self.privatised else "plugin"

    @property
    def fit_many(self) -> "FitManyFunction | None":
        """The vectorised twin of `fit` (`vectorised`), or None: R trainings as one fit."""
        return VECTORISED.get(self.fit)

    @property
    def fit_batch(self) -> "FitBatchFunction | None":
        """The batched twin of `fit` (`batched`), or None: R trainings whose privacy targets and
        `batch_varying` hyperparameters may differ, as one fit."""
        twin = BATCHED.get(self.fit)
        return None if twin is None else twin[0]

    @property
    def batch_varying(self) -> tuple[str, ...]:
        """The hyperparameters in which the replicas of one `fit_batch` call may differ (() without a twin)."""
        twin = BATCHED.get(self.fit)
        return () if twin is None else twin[1]

    def batch_pays(self, model_class: type | None, params: dict) -> bool:
        """Whether `fit_batch` is faster than the single fits for this model class and these
        hyperparameters (False without a twin): a grid batches only the cells where it is."""
        twin = BATCHED.get(self.fit)
        return twin is not None and model_class is not None and bool(twin[2](model_class, params))


REGISTRY: Registry[AlgorithmInfo] = Registry("algorithm", builtins="dpbench.algorithms", group="dpbench.algorithms")


def algorithm(name: str, *, title: str, citation: str, private: bool, convex_only: bool = False,
              updates: bool = False, register: bool = True, library: str | None = None,
              runs: Callable[[FitFunction], FitFunction] | None = None) -> Callable[[FitFunction], FitFunction]:
    """Declare `fit(problem, privacy, rng, *, <annotated hyperparameters>) -> Fit` as algorithm `name`.

    The hyperparameters are the fit's keyword-only arguments, each `Annotated[type, Param(...)]`
    with its default (`dpbench.core.registry.params_of`). updates=True says that the fit reports every
    noisy step it takes (`dpbench.algorithms.releases.release`), so it can be audited with the
    adversary that sees all updates. `runs` (set by `dpbench.algorithms.privatiser.privatised_algorithm`,
    not by hand): the wrapper whose result the runner calls instead of `fit` itself, for a fit on the
    privatiser path (AlgorithmInfo.privatised). `library`: a peer's distribution name (the library whose
    mechanism the fit runs, `dpbench.algorithms.peers`): its claim is at most "declared". The fit gets `fit.dpbench_component` (its
    AlgorithmInfo) and is registered unless register=False.
    """
    def declare(fit: FitFunction) -> FitFunction:
        info = AlgorithmInfo(name=name, title=title, citation=citation, private=private,
                             fit=fit if runs is None else runs(fit), params=params_of(fit), convex_only=convex_only,
                             source=current_source(), updates=updates, privatised=runs is not None,
                             library=library)
        fit.dpbench_component = info  # type: ignore[attr-defined]
        if register:
            REGISTRY.register(info)
        return fit

    return declare


FitManyFunction = Callable[..., "list[Fit]"]
#: fit -> its vectorised twin `fit_many(problem, privacy, rngs, **hyper) -> [Fit]` (`vectorised`)
VECTORISED: dict[FitFunction, FitManyFunction] = {}


def vectorised(fit: FitFunction) -> Callable[[FitManyFunction], FitManyFunction]:
    """Declare `fit_many(problem, privacy, rngs, **hyper) -> list[Fit]` as the vectorised twin of
    `fit`: R = len(rngs) trainings on one problem at once, the r-th drawing from rngs[r] exactly
    what `fit(problem, privacy, rngs[r], **hyper)` draws, in the same order, and returning its
    Fit up to floating-point rounding (its releases carry a leading replica axis). It takes the
    hyperparameters `fit` declares."""
    def declare(fit_many: FitManyFunction) -> FitManyFunction:
        VECTORISED[fit] = fit_many
        return fit_many

    return declare


def hyperparameters(fit: FitFunction, given: dict[str, Any]) -> dict[str, Any]:
    """The keyword hyperparameters `fit` would run with: its declared defaults, overridden by `given`
    (TypeError for a name it does not declare, as calling it would)."""
    info = fit.dpbench_component  # type: ignore[attr-defined]
    unknown = sorted(set(given) - {p.name for p in info.params})
    if unknown:
        raise TypeError(f"{info.name}: unknown hyperparameter(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(p.name for p in info.params)}")
    return {**info.defaults(), **given}


FitBatchFunction = Callable[..., "list[Fit]"]
#: fit -> (its batched twin `fit_batch(problem, privacies, rngs, params) -> [Fit]`, the hyperparameter names
#: that may differ between the replicas, whether the twin pays for a model class and hyperparameters) (`batched`)
BATCHED: dict[FitFunction, tuple[FitBatchFunction, tuple[str, ...], Callable[[type, dict], bool]]] = {}


def batched(fit: FitFunction, *, varying: tuple[str, ...],
            pays: Callable[[type, dict], bool]) -> Callable[[FitBatchFunction], FitBatchFunction]:
    """Declare `fit_batch(problem, privacies, rngs, params) -> list[Fit]` as the batched twin of `fit`:
    R = len(rngs) trainings on one problem at once, replica r with its own privacy target and
    hyperparameters. A grid's cells that differ only in epsilon and in the `varying` hyperparameters
    (e.g. a step size) then run as one fit.

    Contract: privacies, rngs and params are sequences of length R; params[r] is replica r's keyword
    hyperparameters (missing names take `fit`'s defaults), equal across the replicas except in the
    names of `varying` (ValueError otherwise, and where the replicas' calibrations disagree on a
    shape such as the number of steps). The r-th Fit equals `fit(problem, privacies[r], rngs[r],
    **params[r])` up to floating-point rounding: it draws the same numbers from rngs[r] in the same
    order and carries the same ledger exactly. `varying` must name hyperparameters `fit` declares.
    `pays(model_class, params)` says whether the twin is faster than the single fits for that model
    and those hyperparameters (it may still run them, one after another, where it is not); a grid
    batches only cells where it pays (`dpbench.run.cells.batch_key`), so a batch that would be a
    plain loop does not take one worker's time from the others.
    """
    varying = tuple(varying)
    info = getattr(fit, "dpbench_component", None)
    if info is not None:
        unknown = sorted(set(varying) - {p.name for p in info.params})
        if unknown:
            raise ValueError(f"{info.name}: batched twin varies undeclared hyperparameter(s) {', '.join(unknown)}")

    def declare(fit_batch: FitBatchFunction) -> FitBatchFunction:
        BATCHED[fit] = (fit_batch, varying, pays)
        return fit_batch

    return declare


def ledger(
    *,
    private: bool,
    mechanism: str,
    claim: str,
    target_epsilon: float | None = None,
    delta: float | None = None,
    epsilon_spent: dict[str, float] | None = None,
    adjacency: Adjacency | str | None = None,
    spent_adjacency: Adjacency | str | None = None,
    sensitivity: float | None = None,
    claim_reason: str | None = None,
    event: dict | None = None,
    proof: str | None = None,
    **details: Any,
) -> Ledger:
    """The privacy ledger of a fit (`dpbench.core.ledger.Ledger`): the named fields, and the
    mechanism's own numbers as `details`. epsilon_spent maps accountant name -> epsilon that the
    code computed for the noise it actually used; claim is valid, declared, none or paper-only (Ledger).
    A "valid" claim states what was released as `event` (the stored form of a dp-accounting
    DpEvent, `dpbench.privacy.events`: dpbench recomputes epsilon from it) or, for a guarantee no
    accountant here evaluates, the theorem it rests on (`proof`, its reference); with neither it is not kept valid."""
    return Ledger(private=private, mechanism=mechanism, claim=claim, target_epsilon=target_epsilon, delta=delta,
                  epsilon_spent=dict(epsilon_spent or {}), adjacency=adjacency, spent_adjacency=spent_adjacency,
                  sensitivity=sensitivity, claim_reason=claim_reason, event=event, proof=proof, details=details)


def output_sensitivity_claim(model: Model, plan: Any, spent: dict[str, float], epsilon: float,
                             proof: str) -> tuple[str, dict]:
    """(claim, details) of an output-perturbation release whose sensitivity proof needs a convex
    model with global Lipschitz/smoothness bounds (Bolt-on, ZZMW17 / lecture notes Alg. 1).

    "none" with the reasons when the proof does not apply (non-convex model, or nominal constants
    in `plan.constants`), else "valid" when the epsilon recomputed for the noise used is within
    the target, else "paper-only". `plan` has constants, data_lipschitz, smoothness and l2.
    """
    reasons = []
    if not model.convex:
        reasons.append(f"{model.name} is not convex (a GD/SGD step is not contractive)")
    if plan.constants != "model":
        reasons.append(f"{model.name} has no global Lipschitz/smoothness bound (nominal G={plan.data_lipschitz:g}, "
                       f"beta_s={plan.smoothness - plan.l2:g} used)")
    if reasons:
        return "none", {"claim_reason": f"{proof} does not apply: " + "; ".join(reasons)}
    return ("valid" if min(spent.values()) <= epsilon * (1 + 1e-9) else "paper-only"), {}


def bounded_rows(problem: Problem, bound: float = Model.ROW_NORM_BOUND) -> tuple[Problem, dict]:
    """The problem with every row projected onto the ball ||x||_2 <= bound, x <- x min(1, bound/||x||),
    and the ledger details that say so.

    A mechanism whose sensitivity uses the model's G and beta_s (which hold for ||x|| <= 1 only) runs
    on these rows, so its guarantee holds for any input: the projection is applied to each record
    on its own, so neighbouring data sets stay neighbours and the mechanism's proof covers the
    composition. Rows already inside the ball are returned unchanged (the same array when all
    are). `rows_projected` is a count of the data, shown as a diagnostic for the researcher, not
    a released private statistic.
    """
    norms = np.sqrt(np.einsum("ij,ij->i", problem.X, problem.X))
    outside = norms > bound
    # rows of norm 1 + a few ulps (normalised as x/||x||) are projected but not counted
    details = {"row_norm_bound": float(bound), "rows_projected": int((norms > bound * (1 + 1e-9)).sum())}
    if not outside.any():
        return problem, details
    scale = np.where(outside, bound / np.maximum(norms, 1e-300), 1.0)
    return Problem(model=problem.model, X=problem.X * scale[:, None], y=problem.y), details


NON_PRIVATE_LEDGER = dict(private=False, mechanism="none (non-private baseline)", claim="none")  # ledger(**)
