"""A Cell is one fully specified unit of work, and `run_cell` is the pure function that runs it.

Cell = (algorithm + hyperparameters, dataset + options, model + options, epsilon, delta, seed).
Running a cell depends on nothing but the cell: the data split comes from a seed derived from
(experiment seed, repetition, dataset), so every algorithm of one repetition sees the same
split (paired comparisons), and the algorithm's randomness from a SeedSequence derived from
(seed, repetition, algorithm, dataset, model, epsilon). Same cell, same numbers, whatever the number of workers or the order.

This module is the only place that ties data, models, algorithms and metrics together; the
runner only sees `Cell.key` and calls `run_cell`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import operator
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import numpy as np

CELL_SCHEMA = 1  # bump when the meaning of a stored record changes
#: what a stored ok-record of `run_cell` must hold to be used (others are moved aside and rerun)
RECORD_FIELDS: dict[str, type] = {"algorithm": str, "params": dict, "dataset": str, "model": str, "rep": int,
                                  "metrics": dict, "privacy": dict, "trace": list}


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def digest(obj: Any, length: int = 16) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]


def seed_from(*parts: Any) -> int:
    """A 64-bit integer seed from any JSON-able parts (stable across processes and machines)."""
    return int(hashlib.sha256(canonical_json(parts).encode()).hexdigest()[:16], 16)


# ---- delta expressions ---------------------------------------------------------------------
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow}
_FUNCS = {"log": math.log, "sqrt": math.sqrt, "exp": math.exp}


@dataclass(frozen=True)
class DeltaFunction:
    """A compiled delta (compile_delta): `of(n)` evaluates it; `uses_n` is False for a constant."""

    of: Callable[[float], float]
    uses_n: bool


def compile_delta(expression: str | float) -> DeltaFunction:
    """A delta given as a number or an arithmetic expression of n (e.g. `1/n`, `1/n**1.1`) as a
    function of the training size n.

    Only numbers, n, + - * / **, unary -, parentheses and log/sqrt/exp of one argument are
    accepted (no eval); anything else is a ValueError naming it, whatever n will be.
    """
    if isinstance(expression, (int, float)) and not isinstance(expression, bool):
        value = float(expression)
        return DeltaFunction(lambda n: value, uses_n=False)
    try:
        tree = ast.parse(str(expression), mode="eval")
    except SyntaxError:
        raise ValueError(f"cannot read delta expression {expression!r}: use a number or an expression of n "
                         f"such as 1/n or 1/n**1.1") from None
    uses_n = False

    def build(node: ast.AST) -> Callable[[float], float]:
        nonlocal uses_n
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            value = float(node.value)
            return lambda n: value
        if isinstance(node, ast.Name) and node.id == "n":
            uses_n = True
            return float
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            op, left, right = _BINOPS[type(node.op)], build(node.left), build(node.right)
            return lambda n: op(left(n), right(n))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = build(node.operand)
            return lambda n: -inner(n)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS \
                and len(node.args) == 1 and not node.keywords:
            func, arg = _FUNCS[node.func.id], build(node.args[0])
            return lambda n: func(arg(n))
        raise ValueError(f"delta expression {expression!r}: {_unsupported(node)}")

    return DeltaFunction(build(tree.body), uses_n=uses_n)


def evaluate_delta(expression: str | float, n: int) -> float:
    """The value of a delta (a number or an expression of n, see compile_delta) at training size n;
    a ValueError says why it has none there (division by zero, log of a negative number, ...)."""
    function = compile_delta(expression)
    at = f" at n = {n}" if function.uses_n else ""
    try:
        value = function.of(n)
    except ZeroDivisionError:
        raise ValueError(f"delta expression {expression!r} divides by zero{at}") from None
    except (ValueError, OverflowError, TypeError) as exc:  # log(-1), 10.0**1000, log of a complex number
        raise ValueError(f"cannot evaluate delta expression {expression!r}{at}: {exc}; use a number or an "
                         f"expression of n such as 1/n or 1/n**1.1") from None
    if isinstance(value, complex):  # a negative number to a fractional power
        raise ValueError(f"delta expression {expression!r} is not a real number{at}")
    return float(value)


def _unsupported(node: ast.AST) -> str:
    """A readable reason why a delta expression element is refused."""
    if isinstance(node, ast.Name):
        return f"unknown name {node.id!r} (only n is allowed)"
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else "this call"
        return f"{name}(...) is not allowed (only {', '.join(_FUNCS)} of one argument)"
    return f"{type(node).__name__.lower()} is not allowed (numbers, n, + - * / **, parentheses, {', '.join(_FUNCS)})"


# ---- the cell ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    algorithm: str
    params: tuple[tuple[str, Any], ...]
    dataset: str
    dataset_options: tuple[tuple[str, Any], ...]
    model: str
    model_options: tuple[tuple[str, Any], ...]
    epsilon: float | None
    delta: str | float
    rep: int
    seed: int
    # budget of the L* estimate for a non-convex model (restarts, maxiter of L-BFGS); ignored for convex
    optimum: tuple[tuple[str, int], ...] = (("maxiter", 500), ("restarts", 2))
    # private selection (spec `tuning:`): the run's number in its random search (1..K; 0: a run that
    # only accounts for a combination no search drew) and the selection settings; None otherwise
    draw: int | None = None
    tuning: tuple[tuple[str, Any], ...] | None = None
    # labels name the curves; they are not part of the key
    label: str = field(default="", compare=False)
    dataset_label: str = field(default="", compare=False)
    model_label: str = field(default="", compare=False)
    dataset_panel: str = field(default="", compare=False)  # the panel of a swept dataset (spec `sweep:`)

    def identity(self) -> dict:
        return {"schema": CELL_SCHEMA, "algorithm": self.algorithm, "params": dict(self.params),
                "dataset": self.dataset, "dataset_options": dict(self.dataset_options), "model": self.model,
                "model_options": dict(self.model_options), "epsilon": self.epsilon, "delta": self.delta,
                "rep": self.rep, "seed": self.seed, "optimum": dict(self.optimum),
                **({"draw": self.draw, "tuning": dict(self.tuning)} if self.tuning is not None else {})}

    @cached_property
    def key(self) -> str:
        return digest(self.identity())

    def labels(self) -> dict:
        """How this experiment names the cell in tables and figures (not part of its identity)."""
        dataset_label = self.dataset_label or self.dataset
        return {"label": self.label or self.algorithm, "dataset_label": dataset_label,
                "dataset_panel": self.dataset_panel or dataset_label, "model_label": self.model_label or self.model}

    @property
    def data_seed(self) -> int:
        """Split/subsample seed: shared by every algorithm and model of one repetition."""
        return seed_from("data", self.seed, self.rep, self.dataset, dict(self.dataset_options)) % (2**32)

    @property
    def problem_key(self) -> str:
        """Identifies (data split, model): cells with the same problem share L*."""
        return digest({"dataset": self.dataset, "dataset_options": dict(self.dataset_options),
                       "data_seed": self.data_seed, "model": self.model, "model_options": dict(self.model_options),
                       "optimum": dict(self.optimum)})

    def algorithm_rng(self) -> np.random.Generator:
        """The fit's randomness: from (seed, repetition, algorithm, dataset, model, epsilon) only.

        Not from the hyperparameters or the rest of the key: every combination of a grid sees the
        same random stream (common random numbers make *comparisons* less noisy), and adding a
        hyperparameter default or a field to the cell does not re-draw every result. Common noise
        makes a selection among the combinations non-private at any epsilon (the noise cancels in
        their differences), so the curves call such a selection what it is. A run of private
        selection (`draw` set) gets its own stream from its draw number and hyperparameters too:
        every candidate has fresh, independent noise, as the selection's proof requires.
        """
        parts = [self.seed, self.rep, self.algorithm, self.dataset, dict(self.dataset_options), self.model,
                 dict(self.model_options), self.epsilon]
        if self.draw is not None:
            parts += ["draw", self.draw, dict(self.params)]
        return np.random.default_rng(np.random.SeedSequence(seed_from("algorithm", *parts)))

    def score_rng(self) -> np.random.Generator:
        """The noise of a private-selection run's score: independent of the fit's stream."""
        return np.random.default_rng(np.random.SeedSequence(seed_from("score", self.key)))


@dataclass(frozen=True)
class CellContext:
    """What a worker needs besides the cell: where data and the L* cache live (picklable)."""

    data_dir: str | None = None
    cache_dir: str | None = None


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

    key = canonical_json([cell.dataset, cell.data_seed, context.data_dir, cell.dataset_options])
    for i, (k, dataset) in enumerate(_DATASETS):
        if k == key:
            _DATASETS.append(_DATASETS.pop(i))
            return dataset
    dataset = data.load(cell.dataset, seed=cell.data_seed, data_dir=context.data_dir, **dict(cell.dataset_options))
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
    from dpbench.store import atomic_write_text

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
    from dpbench.store import atomic_write_text

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
    from dpbench.store import atomic_write_text

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
    table's gap may lower a non-convex L* further, ALGORITHMS.md §0.2). Entries without "theta"
    (e.g. DP-SGD's training-loss trace) are kept as they are.
    """
    from dpbench import metrics

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


def run_cell(cell: Cell, context: CellContext = CellContext()) -> dict:
    """Load data, build the model, fit, evaluate: the record stored for this cell."""
    from dpbench import algorithms, metrics, models

    load_privacy_memo(context)
    dataset = load_dataset(cell, context)
    model = models.make(cell.model, dataset.n_features, **dict(cell.model_options))
    problem = algorithms.Problem(model=model, X=dataset.X_train, y=dataset.y_train)
    info = algorithms.get(cell.algorithm)
    delta = evaluate_delta(cell.delta, dataset.n_train) if info.private else None
    target = algorithms.PrivacyTarget(epsilon=cell.epsilon if info.private else None, delta=delta)
    lstar = optimum(cell, problem, context)
    population_lstar = population_optimum(cell, dataset, model, context)
    started = time.perf_counter()
    fit = info.fit(problem, target, cell.algorithm_rng(), **dict(cell.params))
    fit_seconds = time.perf_counter() - started
    save_privacy_memo(context)
    privacy = dict(fit.privacy)
    if info.convex_only and not model.convex and privacy.get("claim") != "none":
        privacy["claim"] = "none"
        privacy["claim_reason"] = f"{cell.algorithm}'s proof needs a convex loss; {cell.model} is not convex"
    if delta is not None and privacy.get("claim") != "none" and delta >= 1.0 / dataset.n_train:
        privacy["weak_delta"] = (f"delta = {delta:.3g} >= 1/n = {1.0 / dataset.n_train:.3g}: a mechanism that publishes "
                                 f"one random record whole with probability delta per record meets it, so the "
                                 f"guarantee means little; use delta <= 1/n**1.1 or a fixed 1e-5")
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
        "model": cell.model, "model_options": dict(cell.model_options),
        "epsilon": cell.epsilon, "delta_spec": cell.delta, "delta": delta, "rep": cell.rep, "seed": cell.seed,
        "problem": cell.problem_key, "n_train": dataset.n_train, "n_val": int(dataset.X_val.shape[0]),
        "n_test": int(dataset.X_test.shape[0]), "n_features": dataset.n_features, "n_params": model.n_params,
        "lstar": lstar,
        "population_lstar": population_lstar,
        "metrics": {k: _json_float(v) for k, v in metrics.evaluate(model, fit.theta, dataset).items()},
        "privacy": privacy, "trace": trace_metrics(fit.trace, model, dataset, lstar), "fit_seconds": fit_seconds,
        **({"draw": cell.draw, "tuning": tuning} if tuning is not None else {}),
        "data_files": {f"{Path(f['path']).parent.name}/{Path(f['path']).name}": f["sha256"]
                       for f in dataset.provenance.get("files", [])},
    }
