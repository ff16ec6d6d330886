"""Canary recipes of the privacy audits (`dpbench.audit.multi_run`): the registry `CANARIES` and the built-ins.

A recipe builds a distinguishing game (`Game`): base rows D0, one canary record, the model and the
score of a trained theta (docs/audits.md, Canaries). Declared with the `canary(...)` decorator
on its build function; the recipe also recommends hyperparameters per algorithm and model
options (the user's override them). A game may name the canary's direction u, a coordinate no
base row touches (`Game.direction`: what the all-updates statistic and one-run audits need), and
the row the canary replaces under replace-one (`Game.replaced`). The built-ins (details in
dpbench.audit.multi_run's docstring):

* spare_feature (Jagielski, Ullman, Oprea 2020): rows of a data set plus an all-zero column;
  canary e_new, +1; score theta_new.
* gradient_canary (Nasr et al. 2023): spare_feature whose canary, under replace-one, replaces
  (e_new, -1): the neighbours' gradients on e_new are opposite, twice the add/remove difference;
  with the recommended clip norm 0.1 both stay at full clip norm. The canary of the all-updates
  audits.
* input_per_example ("§5 b", docs/methods/input-perturbation.md, Audit): spare_feature with input
  perturbation's per-example noise, one epoch.
* pidp_constant ("§4.4", docs/methods/pidp.md, Audit): n copies of x0 = (0.5,0,0,0,0); canary e2;
  start and score at theta~.
* input_shared_intercept ("§5 a", docs/methods/input-perturbation.md, Audit): synthetic 2-D data
  with an intercept where the shared-noise argument is exact; score y_c <w, u_c> without the
  intercept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from dpbench.core.keys import seed_from
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import BUILT_IN, Registry, current_source


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
    direction: np.ndarray | None = None  # canary direction u no base row touches (all-updates audits)
    replaced: tuple[np.ndarray, float] | None = None  # replace-one: the row (x, y) the canary replaces

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def replaced_row(self) -> tuple[np.ndarray, float]:
        """The row the canary replaces under replace-one: `replaced`, else the base's last row."""
        if self.replaced is not None:
            return np.asarray(self.replaced[0], dtype=float), float(self.replaced[1])
        return np.asarray(self.X[-1], dtype=float), float(self.y[-1])

    def neighbours(self, adjacency: Adjacency | str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(X0, y0, X1, y1) for the claimed adjacency: add/remove-one D0 = base, D1 = base + canary;
        replace-one D1 = D0 with its last row replaced by the canary, where D0 = base, or base + the
        `replaced` row when the game names one (then D0 depends on the adjacency)."""
        adjacency = Adjacency.parse(adjacency)
        X0, y0 = self.X, self.y
        xc = np.asarray(self.canary_x, dtype=float)[None, :]
        yc = np.array([float(self.canary_y)])
        if adjacency is Adjacency.ADD_REMOVE:
            return X0, y0, np.vstack([X0, xc]), np.concatenate([y0, yc])
        if self.replaced is not None:
            xr, yr = self.replaced_row()
            X0, y0 = np.vstack([X0, xr[None, :]]), np.concatenate([y0, [yr]])
        return X0, y0, np.vstack([X0[:-1], xc]), np.concatenate([y0[:-1], yc])


@dataclass(frozen=True)
class RecipeContext:
    """What a recipe gets: the loaded dataset (None for self-contained recipes) and the settings."""

    dataset: Any  # dpbench.data.Dataset | None
    rows: int
    model: str
    model_options: dict
    seed: int
    recipe: str = ""  # the name the recipe was looked up by (one build may back several recipes)


@dataclass(frozen=True)
class Recipe:
    """A canary recipe: `build(context) -> Game`, plus what it recommends.

    needs_dataset: True takes base rows from `--dataset`; False builds its own data (then no
    dataset may be given). roles: parameter role (`dpbench.core.registry.ROLES`) -> recommended
    value, for every algorithm that declares a parameter of that role, built-in or plugin (e.g.
    clip_norm 0.1). params: algorithm name -> recommended hyperparameters of that algorithm alone
    (a construction made for it, such as pidp_constant's). The user's parameters override both;
    model_options: recommended model options (the user's override them).
    """

    name: str
    description: str
    build: Callable[[RecipeContext], Game]
    needs_dataset: bool = True
    default_rows: int = 1000
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    roles: Mapping[str, Any] = field(default_factory=dict)
    model_options: Mapping[str, Any] = field(default_factory=dict)
    source: str = BUILT_IN
    replaces: bool = False  # its games name the row the canary replaces under replace-one (`Game.replaced`)
    spare_coordinate: bool = False  # its canary sits on a coordinate no base row touches (`Game.direction`):
    # what the all-updates statistic and one-run audits need


CANARIES: Registry[Recipe] = Registry("canary recipe", builtins="dpbench.audit.canaries", group="dpbench.canaries")


def canary(name: str, *, description: str, needs_dataset: bool = True, default_rows: int = 1000,
           params: Mapping[str, Mapping[str, Any]] | None = None, model_options: Mapping[str, Any] | None = None,
           replaces: bool = False, spare_coordinate: bool = False, roles: Mapping[str, Any] | None = None
           ) -> Callable[[Callable[[RecipeContext], Game]], Callable[[RecipeContext], Game]]:
    """Declare `build(context) -> Game` as canary recipe `name` (one build may back several recipes).

    Worker processes (loky, dask) rebuild the game from the recipe name, so a recipe must be
    declared at import time of a module the workers import too (a built-in module of dpbench, or a
    plugin named by the spec), not in a notebook cell.
    """
    def declare(build: Callable[[RecipeContext], Game]) -> Callable[[RecipeContext], Game]:
        CANARIES.register(Recipe(name=name, description=description, build=build, needs_dataset=needs_dataset,
                                 default_rows=default_rows, params=dict(params or {}), roles=dict(roles or {}),
                                 model_options=dict(model_options or {}), source=current_source(),
                                 replaces=replaces, spare_coordinate=spare_coordinate))
        return build

    return declare


def _margin_score(model, x_c: np.ndarray, y_c: float) -> Callable[[np.ndarray], float]:
    xc = np.asarray(x_c, dtype=float)[None, :]

    def score(theta: np.ndarray) -> float:
        return float(y_c * model.decision_function(theta, xc)[0])

    return score


#: recommended parameters of the gradient canary, by role: a clip norm of 0.1 keeps the canary's gradient
#: (|d loss/d theta_new| = sigmoid(-y theta_new) >= 0.1 while |theta_new| <= 2.2) at full clip norm, for
#: every algorithm that declares a parameter of role clip_norm (a plugin's too)
GRADIENT_CANARY_ROLES = {"clip_norm": 0.1}


@canary("gradient_canary",
        description="the strongest canary of the spare_feature game (Nasr et al. 2023): e_new with label +1, "
                    "and under replace-one it replaces e_new with label -1 (gradients at opposite full clip norm, "
                    "twice the difference); clip norm 0.1 recommended so both stay clipped",
        roles=GRADIENT_CANARY_ROLES, replaces=True, spare_coordinate=True)
@canary("input_per_example",
        description="input perturbation, per-example noise (construction b of "
                    "docs/methods/input-perturbation.md): the spare_feature canary with "
                    "noise per_example, theorem pl, epochs 1",
        params={"input_perturbation": {"noise": "per_example", "theorem": "pl", "epochs": 1}}, spare_coordinate=True)
@canary("spare_feature",
        description="rows of a dataset + an all-zero column; canary e_new with label +1; score theta_new "
                    "(Jagielski, Ullman, Oprea 2020)", spare_coordinate=True)
def _spare_feature(context: RecipeContext) -> Game:
    from dpbench import models

    ds = context.dataset
    rows = min(int(context.rows), ds.n_train)
    X = np.hstack([np.asarray(ds.X_train[:rows], dtype=float), np.zeros((rows, 1))])
    y = np.asarray(ds.y_train[:rows], dtype=float)
    x_c = np.zeros(X.shape[1])
    x_c[-1] = 1.0
    model = models.make(context.model, X.shape[1], **context.model_options)
    game = Game(X=X, y=y, canary_x=x_c, canary_y=1.0, model=model, score=_margin_score(model, x_c, 1.0),
                description=f"{rows} rows of {ds.name} + an all-zero column; canary e_new, +1; score theta_new",
                direction=x_c.copy())
    if CANARIES.lookup(context.recipe).replaces if context.recipe else False:
        game.replaced = (x_c.copy(), -1.0)
        game.description += "; replace-one: it replaces (e_new, -1)"
    return game


PIDP_X0 = (0.5, 0.0, 0.0, 0.0, 0.0)


@canary("pidp_constant",
        description="PIDP-SGD construction of docs/methods/pidp.md (Audit): n copies of x0=(0.5,0,0,0,0), "
                    "canary e2; start at theta~ = argmin loss(x0); score ||theta - theta~||",
        needs_dataset=False, default_rows=200,
        params={"pidp_sgd": {"steps": 2000, "rounds": 1, "zeta": 0.01, "lr": 0.1, "radius": 1e8}},
        model_options={"l2": 0.01}, spare_coordinate=True)
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
                direction=x_c.copy(),
                description=f"{n} copies of x0 = {PIDP_X0}, +1; canary e2, +1; start and score at theta~ = "
                            f"argmin loss(x0) = {np.round(theta_tilde, 6).tolist()}")


def shared_intercept_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(X, y, x_c, y_c) of the input_shared_intercept recipe (module docstring)."""
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


@canary("input_shared_intercept",
        description="input perturbation, shared noise (construction a of docs/methods/input-perturbation.md): "
                    "synthetic 2-D data with an intercept, l2 = 0, GD run to convergence; score y_c <w, u_c> "
                    "(weights without the intercept)",
        needs_dataset=False, default_rows=1000,
        params={"input_perturbation": {"noise": "shared", "theorem": "pl", "epochs": 300, "lr": 4.0}},
        model_options={"l2": 0.0})
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
