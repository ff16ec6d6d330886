"""Empirical privacy audits: a distinguishing game that lower-bounds the epsilon of any algorithm.

ALGORITHMS.md §11.1 and §11.3. Two neighbouring training sets D0 and D1 differ in one
*canary*, a crafted record chosen to be as distinguishable as possible. The algorithm is
trained `trials` times on each with fresh randomness, every trained model gets a scalar
score (e.g. the canary's margin), and a threshold test on the scores is turned into an
epsilon lower bound with Clopper-Pearson confidence (`dpbench.privacy.audit_bounds`): the
first half of each side's runs chooses the test, the second half estimates its error rates,
so the bound holds with the stated confidence (default 95%) whatever the algorithm does. A
bound above the claimed epsilon refutes the claim; no bound can exceed the ceiling, about
ln(N/3.69) for N evaluation runs a side.

Neighbours follow the adjacency the algorithm claims (read from one fit's ledger, the first
"; "-separated part of `adjacency`, so PIDP-SGD's "paper: replace-one; ..." is replace-one):
  add/remove-one: D0 = base rows, D1 = base + canary;
  replace-one:    D0 = base rows, D1 = base with its last row replaced by the canary.
Either way D0 is the base, so the D0 runs go first and their ledger gives the adjacency for D1.

Canary recipes (`CANARIES`, pluggable with `register_canary`), each building the base rows,
the canary, the model, the score and recommended algorithm parameters:
* spare_feature (§11.3): `rows` rows of a dataset's training split (uniform: the split is a
  random permutation) plus one all-zero column; canary x_c = e_new, y_c = +1; score
  y_c <theta, x_c> = theta_new (for a non-linear model: y_c times its decision function at x_c).
  Nothing else in the data touches that coordinate, so the canary's effect is not masked.
* pidp_constant (§4.4): self-contained; n = `rows` (default 200) copies of x0 = (0.5,0,0,0,0),
  y = +1, canary (e2, +1), logistic model with l2 = 0.01; score ||theta - theta~|| with theta~
  the minimiser of the (regularised) loss at x0. Training starts at theta~ (public: it depends
  on no record), where every base point's gradient is zero, so runs on D0 stay at theta~ and
  any canary step moves theta_2. Recommended pidp_sgd parameters: steps 2000, rounds 1,
  zeta = l2 = 0.01, lr 0.1, radius r = 1e8 (delta1 = delta2 = delta/2 by default): then
  tau ~ 1.5e3 >> |c_t| and no step is noisy.
* input_shared_intercept (§5 a): self-contained synthetic data where the shared-noise argument
  is exact: n = `rows` (default 1000) points u uniform in the disc of radius 0.6, an intercept
  feature 0.8 (||x|| <= 1), labels drawn from a logistic model (not separable); canary
  u_c = (0.6, 0) with the label the model finds unlikely, intercept 0.8. Logistic model with
  l2 = 0: the shared z shifts every row (canary included) alike, the intercept absorbs it, and
  the optimal weights w (all but the intercept) are a deterministic function of the data.
  Score y_c <w, u_c>. Recommended input_perturbation parameters: noise shared, theorem pl (the
  strongly convex theorem needs l2 > 0), epochs 300, lr 4 -- converged to ~1e-8 at eps >= 0.25,
  so D0 and D1 runs separate perfectly (at eps = 0.1 the paper's sigma is ~0.5 and some runs
  do not converge).
* input_per_example (§5 b): the spare_feature construction with input_perturbation's
  per-example noise (noise per_example, theorem pl, epochs 1). One GD step from 0 makes
  theta_new exactly Gaussian, shifted by the canary by lr/(2n) against a std ~ lr sigma/(2 sqrt n):
  the strongest exposure of the per-example reading (its noise-to-sensitivity ratio grows
  like sqrt(T)); more epochs or theorem strongly_convex (10x more noise at l2 = 1e-4) can be
  audited by overriding the parameters.

Each side's trials are run in chunks of CHUNK_TRIALS fits, through `runner.run` into
ResultStore(<results>/.cache/audits): a rerun (or a run with more trials) reuses every stored
chunk. Fit randomness comes from SeedSequence(seed_from("audit", game key, side, trial)), so
results do not depend on the chunking, the order or the number of workers. Fits are not
batched into vectorised multi-run fits: each chunk calls the registered `fit` once per trial.
Measured (2 shared cores, --jobs 2, 1000 trials a side = 2000 fits unless noted):

  dpsgd, adult 1000 rows, epochs 1, B 64           2.1 ms/fit    4.8 s
  pidp_sgd, pidp_constant (T = 2000 batch-1 steps)  8.5 ms/fit    8.8 s
  input_perturbation, input_shared_intercept        5.9 ms/fit    6.1 s
  input_perturbation, input_per_example (adult)     1.6 ms/fit    1.9 s
  output_perturbation_gd, adult 1000 rows (400/side) 15 ms/fit    6.7 s
  nonprivate (L-BFGS), adult 1000 rows (200/side)   12 ms/fit     2.8 s

Measured bounds (same runs, 95%; ceiling 4.91 at 1000 trials a side, 3.98 at 400):
dpsgd eps 1 -> 0.00; output_perturbation_gd eps 1 -> 0.00; pidp_constant eps 1 -> 4.91 (perfect
separation); input_shared_intercept eps 0.25 -> 4.90, eps 0.1 -> 1.21 (not every run converges);
input_per_example eps 0.1 -> 0.93; input_per_example with the algorithm's defaults (epochs 100,
theorem strongly_convex) eps 0.1 -> 0.00, and with epochs 100, theorem pl at eps 0.25 -> 0.00:
with 1000 base rows the per-example reading at T = 100 is not refuted by this canary (its
noise-to-sensitivity ratio ~ sqrt(T log(1/delta)) / (eps sqrt(n)) is O(1) there, ALGORITHMS.md §5).

The threshold is chosen on a held-out half (`audit_bounds.audit_scores`); the alternative of a
fixed grid with a Bonferroni correction is not implemented.
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from dpbench.errors import DpbenchError
from dpbench.privacy import audit_bounds, checks

AUDIT_SCHEMA = 1  # bump when the meaning of a stored chunk changes
CHUNK_TRIALS = 50  # fits per stored chunk
ADD_REMOVE = "add/remove-one"
REPLACE_ONE = "replace-one"


class AuditError(DpbenchError):
    """An audit is mis-specified (unknown algorithm, dataset, canary, parameter) or a chunk failed."""


# =============================================================================================
# canary recipes
# =============================================================================================
@dataclass
class Game:
    """What a recipe builds: base rows (= D0), the canary, the model and the score of a trained theta."""

    X: np.ndarray
    y: np.ndarray
    canary_x: np.ndarray
    canary_y: float
    model: Any  # a dpbench.models.Model (its init is replaced by theta0 when given)
    score: Callable[[np.ndarray], float]
    theta0: np.ndarray | None = None  # public starting point of every fit (None: the model's init)
    description: str = ""

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def neighbours(self, adjacency: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(X0, y0, X1, y1) for the claimed adjacency (module docstring)."""
        X0, y0 = self.X, self.y
        xc = np.asarray(self.canary_x, dtype=float)[None, :]
        yc = np.array([float(self.canary_y)])
        if adjacency == ADD_REMOVE:
            return X0, y0, np.vstack([X0, xc]), np.concatenate([y0, yc])
        if adjacency == REPLACE_ONE:
            return X0, y0, np.vstack([X0[:-1], xc]), np.concatenate([y0[:-1], yc])
        raise ValueError(f"unknown adjacency {adjacency!r}; expected {ADD_REMOVE!r} or {REPLACE_ONE!r}")


@dataclass(frozen=True)
class RecipeContext:
    """What a recipe gets: the loaded dataset (None for self-contained recipes) and the settings."""

    dataset: Any  # dpbench.data.Dataset | None
    rows: int
    model: str
    model_options: dict
    seed: int


@dataclass(frozen=True)
class Recipe:
    """A canary recipe: `build(context) -> Game`, plus what it recommends.

    needs_dataset: True takes base rows from `--dataset`; False builds its own data (then no
    dataset may be given). params: algorithm name -> recommended hyperparameters (the user's
    override them). model_options: recommended model options (the user's override them).
    """

    name: str
    description: str
    build: Callable[[RecipeContext], Game]
    needs_dataset: bool = True
    default_rows: int = 1000
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    model_options: Mapping[str, Any] = field(default_factory=dict)


CANARIES: dict[str, Recipe] = {}


def register_canary(name: str, recipe: Recipe, *, replace: bool = False) -> Recipe:
    """Add a canary recipe under `name` (replace=True to overwrite one).

    Worker processes (loky, dask) rebuild the game from the recipe name, so register recipes at
    import time of a module the workers import too (as this module does), not in a notebook cell.
    """
    if name in CANARIES and not replace:
        raise ValueError(f"canary recipe {name!r} registered twice")
    CANARIES[name] = recipe
    return recipe


def _margin_score(model, x_c: np.ndarray, y_c: float) -> Callable[[np.ndarray], float]:
    xc = np.asarray(x_c, dtype=float)[None, :]

    def score(theta: np.ndarray) -> float:
        return float(y_c * model.decision_function(theta, xc)[0])

    return score


def _spare_feature(context: RecipeContext) -> Game:
    from dpbench import models

    ds = context.dataset
    rows = min(int(context.rows), ds.n_train)
    X = np.hstack([np.asarray(ds.X_train[:rows], dtype=float), np.zeros((rows, 1))])
    y = np.asarray(ds.y_train[:rows], dtype=float)
    x_c = np.zeros(X.shape[1])
    x_c[-1] = 1.0
    model = models.make(context.model, X.shape[1], **context.model_options)
    return Game(X=X, y=y, canary_x=x_c, canary_y=1.0, model=model, score=_margin_score(model, x_c, 1.0),
                description=f"{rows} rows of {ds.name} + an all-zero column; canary e_new, +1; score theta_new")


PIDP_X0 = (0.5, 0.0, 0.0, 0.0, 0.0)


def _pidp_constant(context: RecipeContext) -> Game:
    from dpbench import algorithms, models
    from dpbench.algorithms.nonprivate import minimize_empirical_risk

    n = int(context.rows)
    d = len(PIDP_X0)
    X = np.tile(np.array(PIDP_X0), (n, 1))
    y = np.ones(n)
    model = models.make(context.model, d, **context.model_options)
    theta_tilde, _ = minimize_empirical_risk(algorithms.Problem(model=model, X=X[:1], y=y[:1]),
                                             np.random.default_rng(0))
    theta_tilde = np.asarray(theta_tilde, dtype=float)
    x_c = np.zeros(d)
    x_c[1] = 1.0

    def score(theta: np.ndarray) -> float:
        return float(np.linalg.norm(np.asarray(theta, dtype=float) - theta_tilde))

    return Game(X=X, y=y, canary_x=x_c, canary_y=1.0, model=model, score=score, theta0=theta_tilde,
                description=f"{n} copies of x0 = {PIDP_X0}, +1; canary e2, +1; start and score at theta~ = "
                            f"argmin loss(x0) = {np.round(theta_tilde, 6).tolist()}")


def shared_intercept_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(X, y, x_c, y_c) of the input_shared_intercept recipe (module docstring)."""
    from dpbench.cells import seed_from

    rng = np.random.default_rng(np.random.SeedSequence(seed_from("audit-recipe", "input_shared_intercept", seed)))
    angle = rng.uniform(0.0, 2.0 * np.pi, n)
    radius = 0.6 * np.sqrt(rng.uniform(0.0, 1.0, n))
    U = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    w_true, b_true, intercept = np.array([3.0, -2.0]), 0.3, 0.8
    p = 1.0 / (1.0 + np.exp(-(U @ w_true + b_true)))
    y = np.where(rng.uniform(size=n) < p, 1.0, -1.0)
    X = np.column_stack([U, np.full(n, intercept)])
    u_c = np.array([0.6, 0.0])
    y_c = -1.0 if float(u_c @ w_true + b_true) > 0 else 1.0
    return X, y, np.concatenate([u_c, [intercept]]), y_c


def _input_shared_intercept(context: RecipeContext) -> Game:
    from dpbench import models

    X, y, x_c, y_c = shared_intercept_data(int(context.rows), context.seed)
    model = models.make(context.model, X.shape[1], **context.model_options)
    u_c = x_c[:-1]

    def score(theta: np.ndarray) -> float:  # the weights only: the intercept absorbs the shared noise
        return float(y_c * (np.asarray(theta, dtype=float)[:-1] @ u_c))

    return Game(X=X, y=y, canary_x=x_c, canary_y=y_c, model=model, score=score,
                description=f"{len(y)} synthetic rows (disc r=0.6, intercept 0.8, logistic labels); canary "
                            f"u_c = (0.6, 0), label {y_c:+g}; score y_c <w, u_c> without the intercept")


register_canary("spare_feature", Recipe(
    name="spare_feature",
    description="rows of a dataset + an all-zero column; canary e_new with label +1; score theta_new "
                "(ALGORITHMS.md §11.3)",
    build=_spare_feature,
))
register_canary("pidp_constant", Recipe(
    name="pidp_constant",
    description="PIDP-SGD scenario of ALGORITHMS.md §4.4: n copies of x0=(0.5,0,0,0,0), canary e2; start at "
                "theta~ = argmin loss(x0); score ||theta - theta~||",
    build=_pidp_constant,
    needs_dataset=False,
    default_rows=200,
    params={"pidp_sgd": {"steps": 2000, "rounds": 1, "zeta": 0.01, "lr": 0.1, "radius": 1e8}},
    model_options={"l2": 0.01},
))
register_canary("input_shared_intercept", Recipe(
    name="input_shared_intercept",
    description="input perturbation, shared noise (ALGORITHMS.md §5 a): synthetic 2-D data with an intercept, "
                "l2 = 0, GD run to convergence; score y_c <w, u_c> (weights without the intercept)",
    build=_input_shared_intercept,
    needs_dataset=False,
    default_rows=1000,
    params={"input_perturbation": {"noise": "shared", "theorem": "pl", "epochs": 300, "lr": 4.0}},
    model_options={"l2": 0.0},
))
register_canary("input_per_example", Recipe(
    name="input_per_example",
    description="input perturbation, per-example noise (ALGORITHMS.md §5 b): the spare_feature canary with "
                "noise per_example, theorem pl, epochs 1",
    build=_spare_feature,
    params={"input_perturbation": {"noise": "per_example", "theorem": "pl", "epochs": 1}},
))


# =============================================================================================
# the setup and its validation
# =============================================================================================
def _pairs(mapping: Mapping[str, Any] | tuple | None) -> tuple:
    if mapping is None:
        return ()
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    return tuple(sorted((str(k), v) for k, v in items))


@dataclass(frozen=True)
class AuditSetup:
    """One audit: algorithm (+ params) x data (dataset or a self-contained canary recipe) x model x target.

    params, dataset_options and model_options are sorted tuples of (name, value) pairs (use
    `AuditSetup.create` to pass dicts). trials: runs per side (half choose the test, half
    count). rows: base size (None: the recipe's default). label is for display only.
    """

    algorithm: str
    params: tuple = ()
    dataset: str | None = None
    dataset_options: tuple = ()
    model: str = "logreg"
    model_options: tuple = ()
    epsilon: float | None = 1.0  # None only for a non-private algorithm
    delta: float = 1e-5
    trials: int = 1000
    canary: str = "spare_feature"
    rows: int | None = None
    alpha: float = 0.05
    seed: int = 0
    label: str = ""

    @classmethod
    def create(cls, algorithm: str, *, params: Mapping | None = None, dataset_options: Mapping | None = None,
               model_options: Mapping | None = None, **fields: Any) -> "AuditSetup":
        return cls(algorithm=algorithm, params=_pairs(params), dataset_options=_pairs(dataset_options),
                   model_options=_pairs(model_options), **fields)

    def identity(self) -> dict:
        return {"schema": AUDIT_SCHEMA, "algorithm": self.algorithm, "params": dict(self.params),
                "dataset": self.dataset, "dataset_options": dict(self.dataset_options), "model": self.model,
                "model_options": dict(self.model_options), "epsilon": self.epsilon, "delta": self.delta,
                "trials": self.trials, "canary": self.canary, "rows": self.rows, "alpha": self.alpha,
                "seed": self.seed}

    @cached_property
    def key(self) -> str:
        from dpbench.cells import digest

        return digest(self.identity())

    @property
    def display_label(self) -> str:
        return self.label or self.algorithm


@dataclass(frozen=True)
class ResolvedAudit:
    """A validated setup with the recipe's recommendations merged in (what the fits actually use)."""

    setup: AuditSetup
    recipe: Recipe
    params: dict  # recipe params for this algorithm, overridden by the setup's, each checked
    model_options: dict
    rows: int
    private: bool

    def game_identity(self) -> dict:
        """Everything the fits depend on (not trials, alpha or label: more trials reuse chunks;
        not epsilon or delta for a non-private algorithm, whose fits ignore them)."""
        s = self.setup
        return {"schema": AUDIT_SCHEMA, "algorithm": s.algorithm, "params": self.params, "dataset": s.dataset,
                "dataset_options": dict(s.dataset_options), "model": s.model, "model_options": self.model_options,
                "epsilon": s.epsilon if self.private else None, "delta": s.delta if self.private else None,
                "canary": s.canary, "rows": self.rows, "seed": s.seed}

    @cached_property
    def game_key(self) -> str:
        from dpbench.cells import digest

        return digest(self.game_identity())


def _checked(check: Callable[..., Any], name: str, value: Any, *args, **kwargs) -> Any:
    """A dpbench.privacy.checks function, its ValueError as a one-line AuditError `name: must be ...`."""
    try:
        return check(name, value, *args, **kwargs)
    except ValueError as exc:
        raise AuditError(str(exc).replace(f"{name} must", f"{name}: must", 1)) from None


def check_setup(setup: AuditSetup) -> ResolvedAudit:
    """Validate a setup without running anything; one-line AuditError naming the bad field."""
    from dpbench import algorithms, data, models

    try:
        info = algorithms.get(setup.algorithm)
    except ValueError as exc:
        raise AuditError(f"algorithm: {exc}") from None
    recipe = CANARIES.get(setup.canary)
    if recipe is None:
        raise AuditError(f"canary: unknown canary recipe {setup.canary!r}; choose one of {', '.join(sorted(CANARIES))}")
    if recipe.needs_dataset and setup.dataset is None:
        raise AuditError(f"dataset: canary {setup.canary!r} takes its base rows from a dataset; give one of "
                         f"{', '.join(sorted(data.DATASETS))}")
    if not recipe.needs_dataset and setup.dataset is not None:
        raise AuditError(f"dataset: canary {setup.canary!r} builds its own data; give no dataset "
                         f"(got {setup.dataset!r})")
    if setup.dataset is not None:
        if setup.dataset not in data.DATASETS:
            raise AuditError(f"dataset: unknown dataset {setup.dataset!r}; choose one of "
                             f"{', '.join(sorted(data.DATASETS))}")
        valid = data.option_names(setup.dataset) | {"n", "test_fraction", "val_fraction"}
        unknown = sorted(set(dict(setup.dataset_options)) - valid)
        if unknown:
            raise AuditError(f"dataset_options: unknown option(s) {', '.join(unknown)} for {setup.dataset!r}; valid: "
                             f"{', '.join(sorted(valid))}")
    elif setup.dataset_options:
        raise AuditError("dataset_options: given without a dataset")
    if setup.model not in models.MODELS:
        raise AuditError(f"model: unknown model {setup.model!r}; choose one of {', '.join(sorted(models.MODELS))}")
    model_options = {**dict(recipe.model_options), **dict(setup.model_options)}
    unknown = sorted(set(model_options) - set(models.MODELS[setup.model].options))
    if unknown:
        raise AuditError(f"model_options: unknown option(s) {', '.join(unknown)} for model {setup.model!r}; valid: "
                         f"{', '.join(sorted(models.MODELS[setup.model].options)) or 'none'}")
    params = {**dict(recipe.params.get(setup.algorithm, {})), **dict(setup.params)}
    names = [p.name for p in info.params]
    for name in list(params):
        if name not in names:
            raise AuditError(f"params.{name}: unknown parameter of {setup.algorithm}; valid: {', '.join(names)}")
        try:
            params[name] = info.param(name).check(params[name])
        except ValueError as exc:
            raise AuditError(f"params.{name}: {exc}") from None
    if setup.epsilon is None:
        if info.private:
            raise AuditError(f"epsilon: {setup.algorithm} is private: give the target epsilon to audit")
    else:
        _checked(checks.positive, "epsilon", setup.epsilon)
    _checked(checks.unit_interval, "delta", setup.delta)
    _checked(checks.unit_interval, "alpha", setup.alpha)
    _checked(checks.integer, "trials", setup.trials, 4)  # half choose the test, half count its errors
    rows = _checked(checks.integer, "rows", recipe.default_rows if setup.rows is None else setup.rows, 2)
    _checked(checks.integer, "seed", setup.seed, 0)
    return ResolvedAudit(setup=setup, recipe=recipe, params=dict(sorted(params.items())),
                         model_options=dict(sorted(model_options.items())), rows=int(rows), private=info.private)


def game_adjacency(adjacency: str | None) -> str:
    """The neighbour relation of the claim: the first '; '-part of a ledger's adjacency (None: add/remove)."""
    if not adjacency:
        return ADD_REMOVE
    head = str(adjacency).split(";")[0].strip()
    if ":" in head:  # "paper: replace-one"
        head = head.split(":", 1)[1].strip()
    if head in (ADD_REMOVE, REPLACE_ONE):
        return head
    raise AuditError(f"cannot audit adjacency {adjacency!r}: expected {ADD_REMOVE!r} or {REPLACE_ONE!r}")


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

    def identity(self) -> dict:
        return {"kind": "audit-chunk", "game": self.game_key, "side": self.side, "start": self.start,
                "count": self.count, "adjacency": self.adjacency, "algorithm": self.setup.algorithm,
                "dataset": self.setup.dataset, "canary": self.setup.canary, "epsilon": self.setup.epsilon}

    @cached_property
    def key(self) -> str:
        from dpbench.cells import digest

        return "audit-" + digest({"schema": AUDIT_SCHEMA, "game": self.game_key, "side": self.side,
                                  "start": self.start, "count": self.count, "adjacency": self.adjacency})


@dataclass(frozen=True)
class AuditContext:
    """Worker settings (picklable): where the raw data and the accounting memo live."""

    data_dir: str | None = None
    cache_dir: str | None = None


def trial_rng(game_key: str, side: int, trial: int) -> np.random.Generator:
    from dpbench.cells import seed_from

    return np.random.default_rng(np.random.SeedSequence(seed_from("audit", game_key, int(side), int(trial))))


def data_seed(setup: AuditSetup) -> int:
    from dpbench.cells import seed_from

    return seed_from("audit-data", setup.seed, setup.dataset, dict(setup.dataset_options)) % (2**32)


@functools.lru_cache(maxsize=8)
def _cached_game(setup: AuditSetup, data_dir: str | None) -> tuple[ResolvedAudit, Game]:
    return build_game(setup, data_dir=data_dir)


def _game_for(setup: AuditSetup, data_dir: str | None) -> tuple[ResolvedAudit, Game]:
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
            dataset = data.load(setup.dataset, seed=data_seed(setup), data_dir=data_dir, **dict(setup.dataset_options))
        except DpbenchError:
            raise
        except ValueError as exc:
            raise AuditError(f"dataset: {exc}") from None
        if setup.rows is not None and setup.rows > dataset.n_train:  # the recipe's default is capped, not this
            raise AuditError(f"rows: {setup.rows} base rows asked for, but the training split of {setup.dataset} "
                             f"has {dataset.n_train}; ask for at most {dataset.n_train} (or leave rows out for "
                             f"min({resolved.recipe.default_rows}, {dataset.n_train}))")
    context = RecipeContext(dataset=dataset, rows=resolved.rows, model=setup.model,
                            model_options=dict(resolved.model_options), seed=int(setup.seed))
    game = resolved.recipe.build(context)
    if game.theta0 is not None:  # a public start point: every fit's model.init returns it
        start = np.array(game.theta0, dtype=float)
        game.model.init = lambda rng, _start=start: _start.copy()
    return resolved, game


def run_chunk(chunk: AuditChunk, context: AuditContext = AuditContext()) -> dict:
    """Fit `count` times on the chunk's side and score every fit (a pure function of the chunk)."""
    from dpbench import algorithms
    from dpbench.cells import CellContext, load_privacy_memo, save_privacy_memo

    cell_context = CellContext(data_dir=context.data_dir, cache_dir=context.cache_dir)
    load_privacy_memo(cell_context)
    resolved, game = _game_for(chunk.setup, context.data_dir)
    if resolved.game_key != chunk.game_key:
        raise RuntimeError("audit chunk built for another game (the code changed between planning and running)")
    setup = chunk.setup
    info = algorithms.get(setup.algorithm)
    X0, y0, X1, y1 = game.neighbours(chunk.adjacency or ADD_REMOVE)
    X, y = (X0, y0) if chunk.side == 0 else (X1, y1)
    problem = algorithms.Problem(model=game.model, X=X, y=y)
    target = algorithms.PrivacyTarget(epsilon=float(setup.epsilon), delta=float(setup.delta)) if info.private \
        else algorithms.PrivacyTarget(epsilon=None, delta=None)
    scores, ledger = [], None
    started = time.perf_counter()
    for trial in range(chunk.start, chunk.start + chunk.count):
        fit = info.fit(problem, target, trial_rng(chunk.game_key, chunk.side, trial), **resolved.params)
        scores.append(float(game.score(fit.theta)))
        if ledger is None:
            ledger = dict(fit.privacy)
    fit_seconds = time.perf_counter() - started
    save_privacy_memo(cell_context)
    claim = ledger.get("claim")
    if info.convex_only and not game.model.convex and claim != "none":
        claim = "none"
    return {"key": chunk.key, "kind": "audit-chunk", "game": resolved.game_identity(), "game_key": chunk.game_key,
            "side": chunk.side, "start": chunk.start, "count": chunk.count, "adjacency_used": chunk.adjacency,
            "scores": scores, "claim": claim, "adjacency": ledger.get("adjacency"),
            "target_epsilon": ledger.get("target_epsilon") if claim != "none" else None,
            "mechanism": ledger.get("mechanism"), "n_rows": int(X.shape[0]), "fit_seconds": fit_seconds}


#: what a stored ok-record of `run_chunk` must hold to be used (others are moved aside and rerun)
CHUNK_FIELDS: dict[str, type] = {"scores": list, "side": int, "start": int, "count": int}


def _chunks(resolved: ResolvedAudit, side: int, adjacency: str | None) -> list[AuditChunk]:
    trials = int(resolved.setup.trials)
    return [AuditChunk(setup=resolved.setup, game_key=resolved.game_key, side=side, start=start,
                       count=min(CHUNK_TRIALS, trials - start), adjacency=adjacency)
            for start in range(0, trials, CHUNK_TRIALS)]


# =============================================================================================
# the audit
# =============================================================================================
@dataclass
class AuditResult:
    """Outcome of `run_audit`; `row()` is its flat table row."""

    setup: AuditSetup
    claimed_epsilon: float | None  # the ledger's target epsilon (None when the algorithm claims nothing)
    claim: str | None  # ledger claim: valid | paper-only | none
    adjacency: str  # the neighbour relation the game used
    epsilon_lower_bound: float
    confidence: float  # 1 - alpha
    trials: int  # per side
    threshold: float
    direction: int  # +1: scores above the threshold are called D1; -1: below
    fpr: float  # on the evaluation half
    fnr: float
    fpr_upper: float  # Clopper-Pearson upper bounds at alpha/2 each
    fnr_upper: float
    ceiling: float  # the largest bound these evaluation runs could give
    seconds: float  # wall time of run_audit
    reused: int  # chunks reused from the store
    chunks: int = 0  # chunks in total
    n_selection: int = 0  # runs a side that chose the test
    n_evaluation: int = 0  # runs a side that estimated its rates
    false_positives: int = 0
    false_negatives: int = 0
    fit_seconds: float = 0.0  # compute time of the fits that were run now or stored (sum over chunks)
    params: dict = field(default_factory=dict)  # the algorithm parameters the fits used (recipe + setup)
    model_options: dict = field(default_factory=dict)
    rows: int = 0  # base rows (D0)
    game_key: str = ""
    scores0: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)  # per trial, in trial order
    scores1: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)

    @property
    def broken(self) -> bool | None:
        """True when the bound refutes the claimed epsilon; None when nothing is claimed."""
        if self.claimed_epsilon is None:
            return None
        return bool(self.epsilon_lower_bound > self.claimed_epsilon)

    @property
    def seconds_per_fit(self) -> float:
        return self.fit_seconds / max(1, 2 * self.trials)

    def row(self) -> dict:
        s = self.setup
        return {
            "label": s.display_label, "algorithm": s.algorithm, "dataset": s.dataset or "(recipe)",
            "model": s.model, "canary": s.canary, "epsilon": s.epsilon, "delta": s.delta,
            "claimed_epsilon": self.claimed_epsilon, "claim": self.claim, "adjacency": self.adjacency,
            "epsilon_lower_bound": self.epsilon_lower_bound, "confidence": self.confidence,
            "ceiling": self.ceiling, "broken": self.broken, "trials": self.trials,
            "n_evaluation": self.n_evaluation, "fpr": self.fpr, "fnr": self.fnr,
            "fpr_upper": self.fpr_upper, "fnr_upper": self.fnr_upper, "threshold": self.threshold,
            "direction": self.direction, "rows": self.rows, "seconds": self.seconds,
            "seconds_per_fit": self.seconds_per_fit, "reused": self.reused, "chunks": self.chunks,
            "params": ", ".join(f"{k}={v}" for k, v in sorted(self.params.items())), "key": s.key,
        }


def _run_phase(chunks, store, context, *, jobs, backend, scheduler, progress, force, description, train=True):
    """(run summary, stored records) of one side's chunks. Training runs the chunks not stored
    (damaged ones are moved aside by the store, named on stderr and trained again); with
    `train=False` only usable stored chunks are read, nothing is moved, and an AuditError counts
    the missing and damaged ones."""
    from dpbench import runner

    if not train:  # read what is stored, run nothing, move nothing (a damaged chunk counts as missing)
        found = [store.read(c.key) for c in chunks]
        records = [record for record, _ in found if record is not None and record.get("status") == "ok"]
        if len(records) < len(chunks):
            damaged = sum(problem is not None for _, problem in found)
            raise AuditError(f"{description}: {len(chunks) - len(records)} of {len(chunks)} trial chunks are not "
                             f"stored under {store.cells_dir}" + (f" ({damaged} damaged)" if damaged else "") +
                             " (`dpbench run` trains them)")
        return runner.RunSummary(total=len(chunks), reused=len(chunks), ran=0), records
    summary = runner.run(chunks, functools.partial(run_chunk, context=context), store, jobs=jobs, backend=backend,
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


def _one(records: list[dict], field_name: str):
    values = {repr(r.get(field_name)) for r in records}
    if len(values) != 1:
        raise AuditError(f"the fits of one audit disagree on their ledger's {field_name}: {sorted(values)}")
    return records[0].get(field_name)


def run_audit(setup: AuditSetup, *, data_dir: str | None = None, results: str | Path = "results", jobs: int = 1,
              backend: str = "loky", scheduler: str | None = None, progress: bool = True,
              force: bool = False, train: bool = True) -> AuditResult:
    """Play the distinguishing game of `setup` and bound epsilon from below (module docstring).

    D0's chunks run first (their ledger gives the claimed adjacency), then D1's; every chunk is
    stored under <results>/.cache/audits and reused by later calls unless `force`. With
    `train=False` nothing is trained: the bound comes from the stored chunks, and an AuditError
    says how many are missing.
    """
    from dpbench.store import ResultStore

    started = time.perf_counter()
    resolved = check_setup(setup)
    root = Path(results) / ".cache"
    store = ResultStore(root / "audits", required=CHUNK_FIELDS)
    context = AuditContext(data_dir=None if data_dir is None else str(data_dir), cache_dir=str(root))
    if train:
        _game_for(setup, context.data_dir)  # data or recipe errors: one line here, before any worker starts
    label = setup.display_label
    chunks0 = _chunks(resolved, 0, None)
    summary0, records0 = _run_phase(chunks0, store, context, jobs=jobs, backend=backend, scheduler=scheduler,
                                    progress=progress, force=force, description=f"audit {label}: D0", train=train)
    adjacency = game_adjacency(_one(records0, "adjacency"))
    chunks1 = _chunks(resolved, 1, adjacency)
    summary1, records1 = _run_phase(chunks1, store, context, jobs=jobs, backend=backend, scheduler=scheduler,
                                    progress=progress, force=force, description=f"audit {label}: D1", train=train)
    records = records0 + records1
    claim = _one(records, "claim")
    claimed = _one(records, "target_epsilon")
    scores0 = np.array([s for r in records0 for s in r["scores"]], dtype=float)
    scores1 = np.array([s for r in records1 for s in r["scores"]], dtype=float)
    outcome = audit_bounds.audit_scores(scores0, scores1, float(setup.delta), float(setup.alpha))
    ev = outcome.evaluation
    return AuditResult(
        setup=setup, claimed_epsilon=None if claimed is None else float(claimed), claim=claim, adjacency=adjacency,
        epsilon_lower_bound=ev.epsilon_lower_bound, confidence=ev.confidence, trials=int(setup.trials),
        threshold=ev.threshold, direction=ev.direction, fpr=ev.fpr, fnr=ev.fnr, fpr_upper=ev.fpr_upper,
        fnr_upper=ev.fnr_upper, ceiling=ev.ceiling, seconds=time.perf_counter() - started,
        reused=summary0.reused + summary1.reused, chunks=len(chunks0) + len(chunks1),
        n_selection=min(outcome.n_selection), n_evaluation=min(ev.n0, ev.n1), false_positives=ev.false_positives,
        false_negatives=ev.false_negatives, fit_seconds=float(sum(r.get("fit_seconds", 0.0) for r in records)),
        params=dict(resolved.params), model_options=dict(resolved.model_options), rows=int(records0[0]["n_rows"]),
        game_key=resolved.game_key, scores0=scores0, scores1=scores1,
    )


# re-exported for tests and the harness sanity check
audit_scalar_gaussian = audit_bounds.audit_scalar_gaussian

__all__ = [
    "ADD_REMOVE", "AUDIT_SCHEMA", "AuditChunk", "AuditContext", "AuditError", "AuditResult", "AuditSetup",
    "CANARIES", "CHUNK_TRIALS", "Game", "REPLACE_ONE", "Recipe", "RecipeContext", "ResolvedAudit",
    "audit_scalar_gaussian", "build_game", "check_setup", "game_adjacency", "register_canary", "run_audit",
    "run_chunk", "trial_rng",
]
