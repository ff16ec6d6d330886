"""One contract, checked on every registered component: each algorithm, data set, model, canary
recipe and figure kind passes the same tests, so a new component is tested the day it is declared.

* Declared parameters (every kind): each default passes its own `Param.check`, and each parameter
  is a keyword, with that default, of the function that uses it (an algorithm's `fit`, a data
  set's loader or `Common`, a model's `__init__`, a figure kind's `draw`).
* Algorithms, on a tiny logistic problem with every model their proof allows (convex_only: the
  convex ones): the Fit's theta is finite and has the model's size; its ledger is well formed
  (a known claim; a private fit records the requested epsilon and delta and an adjacency; a
  "valid" claim has a finite epsilon spent within the target; the ledger survives the store);
  the same SeedSequence gives the same theta, and a private fit draws its noise from it.
* Data sets whose files are in $DPBENCH_DATA (skipped, saying which file is missing, otherwise):
  finite features, labels in {-1, +1} for classification, n_train > 0, consistent splits, and
  the same arrays for the same seed.
* Models: per-example gradients agree with the loss (central differences) and with `grad`.
* Canary recipes build a Game whose neighbours differ by the canary, whose canary sits where
  the recipe says, and whose recommended settings pass the algorithms' and models' checks.
* Figure kinds draw a tiny table into a temporary folder and return files that exist there.
"""

from __future__ import annotations

import dataclasses
import inspect
import math

import numpy as np
import pandas as pd
import pytest

from dpbench import data, models
from dpbench.algorithms.base import REGISTRY, Fit, PrivacyTarget, Problem
from dpbench.analysis.curves import curves_table, runs_table, selected_by_metric, trace_curves, traces_table
from dpbench.audit.canaries import CANARIES, Game, RecipeContext
from dpbench.core.errors import DpbenchError
from dpbench.core.ledger import CLAIMS, Adjacency, Ledger
from dpbench.core.registry import validate
from dpbench.core.store import ResultStore
from dpbench.data import Common
from dpbench.data.base import COMMON_PARAMS
from dpbench.figures import FIGURES
from dpbench.models import MODELS
from tests.conftest import offline_data_dir
from tests.problems import logistic_problem

TARGET = PrivacyTarget(epsilon=1.0, delta=1e-5)
#: short runs: the hyperparameters an algorithm declares among these are set to these values
SHORT = {"epochs": 1, "steps": 5, "maxiter": 20, "restarts": 1, "subsets": 10, "rounds": 2, "hessian_samples": 16}
#: rows of the tiny problems and data sets
ROWS = 300


def _keyword_defaults(function) -> dict:
    """name -> default of the keyword arguments of `function`."""
    return {p.name: p.default for p in inspect.signature(function).parameters.values()
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}


def _check_declared(component, function, params=None) -> None:
    """Every declared parameter (`params`, else the component's): its default passes its own check
    and is the keyword's default; checking no values gives the defaults."""
    keywords = _keyword_defaults(function)
    params = component.params if params is None else params
    for param in params:
        assert param.check(param.default) == param.default, f"{param.name}: default fails its own check"
        assert param.name in keywords, f"{param.name} is not a keyword of {function.__qualname__}"
        assert keywords[param.name] == param.default, f"{param.name}: declared default differs from the keyword's"
    assert validate(params, {}, component.name) == {p.name: p.default for p in params}


# ---- algorithms ---------------------------------------------------------------------------------------
#: the models a peer's library implements (its fit refuses the others): diffprivlib's LogisticRegression
PEER_MODELS = {"diffprivlib_logreg": ("logreg",), "jax_privacy_dpsgd": ("logreg", "ridge", "mlp"),
               "opacus_dpsgd": ("logreg", "ridge", "mlp")}


def _algorithm_cases() -> list:
    cases = []
    for name, info in REGISTRY.items():
        for model, model_info in MODELS.items():
            if info.name in PEER_MODELS and model not in PEER_MODELS[info.name]:
                continue
            if model_info.convex or not info.convex_only:
                # a peer's cases beyond its first model: make test-peers (make test: CI's time budget)
                slow = info.name in PEER_MODELS and model != PEER_MODELS[info.name][0]
                cases.append(pytest.param(name, model, id=f"{name}-{model}",
                                          marks=[pytest.mark.slow] if slow else []))
    return cases


@pytest.mark.parametrize("name", list(REGISTRY))
def test_algorithm_declares_its_parameters(name):
    info = REGISTRY[name]
    _check_declared(info, info.fit)
    assert info.fit.dpbench_component is info


def _fit(name: str, model: str, seed: int) -> tuple[Fit, Problem]:
    info = REGISTRY[name]
    base = logistic_problem(n=ROWS, d=4, seed=1)
    problem = Problem(model=models.make(model, 4), X=base.X, y=base.y)
    hyper = info.validate({k: v for k, v in SHORT.items() if k in {p.name for p in info.params}}, fill=False)
    target = TARGET if info.private else PrivacyTarget(None, None)
    return info.fit(problem, target, np.random.default_rng(np.random.SeedSequence(seed)), **hyper), problem


@pytest.mark.parametrize("name, model", _algorithm_cases())
def test_algorithm_fits_with_a_well_formed_ledger_and_its_seed_decides(name, model, tmp_path):
    info = REGISTRY[name]
    try:
        fit, problem = _fit(name, model, seed=2024)
    except DpbenchError as exc:  # a peer whose optional library is not installed, or cannot run here
        if info.library is None:
            raise
        pytest.skip(str(exc))
    assert isinstance(fit, Fit)
    theta = np.asarray(fit.theta, dtype=float)
    assert theta.shape == (problem.model.n_params,) and np.isfinite(theta).all()

    ledger = fit.privacy
    assert isinstance(ledger, Ledger) and ledger.claim in CLAIMS and ledger.mechanism
    assert ledger.private is info.private
    if info.private:
        assert ledger.target_epsilon == TARGET.epsilon
        assert ledger.delta in (TARGET.delta, 0.0), ledger.delta  # 0: a pure eps-DP guarantee (stronger)
        assert isinstance(ledger.adjacency, Adjacency)
    else:
        assert ledger.claim == "none" and ledger.target_epsilon is None and not ledger.epsilon_spent
    if ledger.claim == "valid":
        spent = list(ledger.epsilon_spent.values())
        assert spent and all(math.isfinite(e) and e > 0 for e in spent), ledger.epsilon_spent
        assert min(spent) <= TARGET.epsilon * (1 + 1e-9), f"valid, but every accountant spent more: {spent}"
    store = ResultStore(tmp_path)  # the ledger is stored with the cell and read back
    store.put({"key": "k", "status": "ok", "privacy": ledger.as_dict()})
    assert Ledger.from_dict(store.get("k")["privacy"]).claim == ledger.claim

    again, _ = _fit(name, model, seed=2024)
    np.testing.assert_allclose(again.theta, theta, rtol=1e-12, atol=0, err_msg="same seed, another theta")
    assert again.privacy.epsilon_spent == ledger.epsilon_spent
    if info.private:  # its noise comes from the generator it is given
        other, _ = _fit(name, model, seed=2025)
        assert not np.allclose(other.theta, theta, rtol=1e-9, atol=0), "another seed, the same theta"


# ---- data sets ----------------------------------------------------------------------------------------
def _required_files(name: str, root) -> list:
    """The raw files data set `name` reads from the data folder (none for generated data)."""
    from dpbench.data import creditcard, uci

    if name in uci.SPECS:
        return [root / path for path in uci.SPECS[name].paths]
    if name == creditcard.NAME:
        return [creditcard.default_path(root)]
    return []


#: options that keep the loads small (generated data: fewer rows; the csv data set: a file written here)
DATA_OPTIONS = {"synthetic_population": {"pool": 2000, "n": 100}}


def _write_csv(folder) -> str:
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"age": rng.integers(18, 90, ROWS), "income": rng.normal(5e4, 1e4, ROWS),
                          "colour": rng.choice(["red", "blue"], ROWS), "label": rng.integers(0, 2, ROWS)})
    path = folder / "table.csv"
    table.to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize("name", list(data.DATASETS))
def test_dataset_declares_its_options(name):
    info = data.DATASETS[name]
    loader = inspect.signature(info.load).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in loader):  # a family declared as data (UCI)
        from dpbench.data import uci

        assert [p.name for p in uci.SPECS[name].params] == [p.name for p in info.own_params]
        for param in info.own_params:
            assert param.check(param.default) == param.default, param.name
    else:
        _check_declared(info, info.load, info.own_params)
    common = {f.name: f.default for f in dataclasses.fields(Common)}
    assert [p for p in info.params if p.name in common] == list(COMMON_PARAMS)
    assert all(common[p.name] == p.default for p in COMMON_PARAMS)


@pytest.mark.parametrize("name", list(data.DATASETS))
def test_dataset_loads_finite_features_and_declared_labels(name, tmp_path):
    root = offline_data_dir()
    missing = [str(p) for p in _required_files(name, root) if not p.is_file()]
    if missing:
        pytest.skip(f"{name}: {', '.join(missing)} not found; set DPBENCH_DATA to a folder that has it")
    info = data.DATASETS[name]
    # every declared option given by name: the loader must take each one it declares
    options = {**{p.name: p.default for p in info.own_params}, **DATA_OPTIONS.get(name, {"n": 100})}
    if name == "csv":
        options.update(path=_write_csv(tmp_path), categorical=["colour"])
    ds = data.load(name, seed=3, data_dir=root, **options)

    assert ds.n_train > 0 and ds.task == info.task
    splits = [(ds.X_train, ds.y_train), (ds.X_val, ds.y_val), (ds.X_test, ds.y_test)]
    for X, y in splits:
        assert X.ndim == 2 and X.shape == (len(y), ds.n_features) and np.isfinite(X).all()
        if info.task == "classification":
            assert set(np.unique(y)) <= {-1.0, 1.0}
        else:
            assert np.isfinite(y).all()
    assert len(ds.feature_names) == ds.n_features
    if info.known_parameter:
        assert ds.w_star is not None and ds.w_star.shape == (ds.n_features,)
    again = data.load(name, seed=3, data_dir=root, **options)
    for (X, y), (X2, y2) in zip(splits, [(again.X_train, again.y_train), (again.X_val, again.y_val),
                                         (again.X_test, again.y_test)]):
        assert np.array_equal(X, X2) and np.array_equal(y, y2)


# ---- models -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_model_declares_its_options_and_its_gradients_match_its_loss(name):
    info = MODELS[name]
    _check_declared(info, info.factory.__init__)
    model = models.make(name, 4)
    assert model.name == name and model.task == info.task and model.convex is info.convex
    base = logistic_problem(n=20, d=4, seed=5)
    theta = model.init(np.random.default_rng(0)) + 0.1
    assert theta.shape == (model.n_params,)
    per_example = model.per_example_grads(theta, base.X, base.y)
    assert per_example.shape == (20, model.n_params)
    np.testing.assert_allclose(per_example.mean(axis=0), model.data_grad(theta, base.X, base.y), rtol=1e-10,
                               atol=1e-12)
    h = 1e-6
    numeric = np.array([(model.loss(theta + h * e, base.X, base.y) - model.loss(theta - h * e, base.X, base.y))
                        / (2 * h) for e in np.eye(model.n_params)])
    np.testing.assert_allclose(model.grad(theta, base.X, base.y), numeric, rtol=1e-5, atol=1e-8)


# ---- canary recipes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CANARIES))
def test_canary_recipe_builds_a_game_of_neighbours(name):
    recipe = CANARIES[name]
    for algorithm, params in recipe.params.items():  # what it recommends passes the algorithm's checks
        REGISTRY.lookup(algorithm).validate(dict(params), fill=False)
    model_options = MODELS["logreg"].validate(dict(recipe.model_options), fill=False)
    dataset = data.load("synthetic_logistic", seed=0, n=ROWS, d=4, normalize=True) if recipe.needs_dataset else None
    rows = 40
    game = recipe.build(RecipeContext(dataset=dataset, rows=rows, model="logreg", model_options=model_options,
                                      seed=0, recipe=name))
    assert isinstance(game, Game)
    d = game.n_features
    assert game.X.shape == (rows, d) and game.y.shape == (rows,) and np.isfinite(game.X).all()
    assert set(np.unique(game.y)) <= {-1.0, 1.0} and game.canary_y in (-1.0, 1.0)
    assert np.shape(game.canary_x) == (d,) and game.model.n_features == d
    start = game.theta0 if game.theta0 is not None else game.model.init(np.random.default_rng(0))
    assert math.isfinite(game.score(start))

    X0, y0, X1, y1 = game.neighbours(Adjacency.ADD_REMOVE)
    assert len(X1) == len(X0) + 1 and np.array_equal(X1[:-1], X0) and np.array_equal(X1[-1], game.canary_x)
    X0, y0, X1, y1 = game.neighbours(Adjacency.REPLACE_ONE)
    assert len(X1) == len(X0) and np.array_equal(X1[:-1], X0[:-1]) and np.array_equal(X1[-1], game.canary_x)
    assert (game.replaced is not None) is recipe.replaces
    if recipe.spare_coordinate:  # the canary's direction: no base row touches it
        assert game.direction is not None and float(game.direction @ game.canary_x) != 0
        assert np.all(game.X @ game.direction == 0)


# ---- figure kinds -----------------------------------------------------------------------------------
def _records() -> list[dict]:
    """Finished cells of a private and a non-private algorithm on one data set swept over n and d,
    two seeds each, with traces."""
    records = []
    for n, d in ((100, 3), (400, 6)):
        for label, eps in (("private", 1.0), ("private", 4.0), ("baseline", None)):
            for rep in (0, 1):
                value = 0.5 + 0.1 * rep + (0.0 if eps is None else 0.2 / eps) + 10 / n
                records.append({
                    "status": "ok", "key": f"{label}-{eps}-{n}-{rep}", "label": label, "algorithm": label,
                    "dataset": "d", "dataset_label": f"d (n = {n})", "dataset_panel": "d", "model": "logreg",
                    "model_label": "LR", "epsilon": eps, "delta": 1e-5, "rep": rep, "problem": f"{n}-{rep}",
                    "n_train": n, "n_test": 50, "n_params": d, "n_features": d, "lstar": 0.1, "fit_seconds": 0.1,
                    "params": {}, "privacy": {"claim": "valid" if eps else "none"},
                    "metrics": {"accuracy": 1 - value / 2, "train_loss": value, "test_loss": value,
                                "val_loss": value, "estimation_error": value},
                    "trace": [{"step": s, "estimation_error": value * (1 + 1 / (1 + s))} for s in (0, 5, 10)]})
    return records


@pytest.fixture(scope="module")
def figure_tables() -> dict[str, pd.DataFrame]:
    records = _records()
    metrics = ("accuracy", "estimation_error")
    selected = selected_by_metric(runs_table(records), metrics)
    return {"curves": curves_table(selected), "traces": trace_curves(selected, traces_table(records))}


@pytest.mark.parametrize("name", list(FIGURES))
def test_figure_kind_draws_a_tiny_table(name, figure_tables, tmp_path):
    kind = FIGURES[name]
    _check_declared(kind, kind.draw)
    table = figure_tables[kind.table]
    assert not table.empty
    metric = "estimation_error" if kind.needs in ("n", "d", "trace") else "accuracy"
    paths = kind.draw(table, metric, tmp_path / "figure", title=name, **kind.defaults())
    assert paths, f"{name} drew nothing"
    for path in paths:
        path = tmp_path / path
        assert path.is_file() and path.stat().st_size > 0 and path.parent == tmp_path
