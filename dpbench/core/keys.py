"""Keys: the identity of a unit of work (`Cell`), stable digests and seeds, and the delta expression.

A `Cell` is one fully specified unit of work: (algorithm + hyperparameters, dataset + options,
model + options, epsilon, delta, seed), plus the data set's revision once it is nonzero (a data set
whose arrays changed). Its `key` (a digest of its identity) names its stored record; the data
split comes from a seed derived from (experiment seed, repetition, dataset), so every algorithm of
one repetition sees the same split (paired comparisons), and the algorithm's randomness from a
SeedSequence derived from (seed, repetition, algorithm, dataset, model, epsilon).
`dpbench.run.cells.run_cell` runs a cell; the spec builds them (this module imports no other part
of dpbench).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import operator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

import numpy as np

CELL_SCHEMA = 1  # bump when the meaning of a stored record changes
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


def content_keyed(options: tuple[tuple[str, Any], ...], path_keys: tuple[str, ...],
                  files_digest: str | None) -> dict:
    """Data set options as they identify the data: the options that name files (`path_keys`) left
    out when the digest of those files' content (`files_digest`) stands for them, so that the same
    file named by a relative or an absolute path gives the same key, split and randomness."""
    if files_digest is None or not path_keys:
        return dict(options)
    return {k: v for k, v in options if k not in path_keys}


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
    # an algorithm from a plugin (dpbench.run.plugins): the digest of its source is part of the key (an
    # edited plugin reruns); the reference where it is loaded from is not (it depends on the checkout)
    plugin_digest: str | None = None
    plugin: str | None = field(default=None, compare=False)
    # the content digest of the files dataset_options name (the csv data set): part of the key (an edited
    # file reruns), unlike the folder relative paths in dataset_options are read from (the YAML's)
    dataset_files: str | None = None
    dataset_base: str = field(default="", compare=False)
    # the options among dataset_options that name files: with dataset_files set, their content stands for them
    dataset_path_keys: tuple[str, ...] = field(default=(), compare=False)
    # the data set's revision (dpbench.data.DatasetInfo.revision, bumped when the arrays it returns change):
    # part of the key and of the problem (its L*) when nonzero, so a data set at revision 0 keeps its keys
    dataset_revision: int = 0
    # the code path that trains the cell: "numpy" (the numpy/numba path) or "jax" (`dpbench.on_jax`, `--device gpu`
    # or jax-cpu), which draws its own random numbers; part of the key when not numpy, so the two never share a record
    backend: str = "numpy"
    # labels name the curves; they are not part of the key
    label: str = field(default="", compare=False)
    dataset_label: str = field(default="", compare=False)
    model_label: str = field(default="", compare=False)
    dataset_panel: str = field(default="", compare=False)  # the panel of a swept dataset (spec `sweep:`)

    def identity(self) -> dict:
        return {"schema": CELL_SCHEMA, "algorithm": self.algorithm, "params": dict(self.params),
                "dataset": self.dataset, "dataset_options": self.data_options, "model": self.model,
                "model_options": dict(self.model_options), "epsilon": self.epsilon, "delta": self.delta,
                "rep": self.rep, "seed": self.seed, "optimum": dict(self.optimum),
                **({"draw": self.draw, "tuning": dict(self.tuning)} if self.tuning is not None else {}),
                **({"plugin": self.plugin_digest} if self.plugin_digest is not None else {}),
                **({"data_files": self.dataset_files} if self.dataset_files is not None else {}),
                **self._revision(), **({"backend": self.backend} if self.backend != "numpy" else {})}

    def _revision(self) -> dict:
        """{"dataset_revision": r} for a revised data set (r > 0), else {} (the keys of revision 0 unchanged)."""
        return {"dataset_revision": self.dataset_revision} if self.dataset_revision else {}

    @cached_property
    def key(self) -> str:
        return digest(self.identity())

    def labels(self) -> dict:
        """How this experiment names the cell in tables and figures (not part of its identity)."""
        dataset_label = self.dataset_label or self.dataset
        return {"label": self.label or self.algorithm, "dataset_label": dataset_label,
                "dataset_panel": self.dataset_panel or dataset_label, "model_label": self.model_label or self.model}

    @property
    def data_options(self) -> dict:
        """The data set options as they identify the data (`content_keyed`)."""
        return content_keyed(self.dataset_options, self.dataset_path_keys, self.dataset_files)

    @property
    def data_seed(self) -> int:
        """Split/subsample seed: shared by every algorithm and model of one repetition."""
        return seed_from("data", self.seed, self.rep, self.dataset, self.data_options) % (2**32)

    @property
    def problem_key(self) -> str:
        """Identifies (data split, model): cells with the same problem share L*."""
        return digest({"dataset": self.dataset, "dataset_options": self.data_options,
                       "data_seed": self.data_seed, "model": self.model, "model_options": dict(self.model_options),
                       "optimum": dict(self.optimum), **self._revision()})

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
        parts = [self.seed, self.rep, self.algorithm, self.dataset, self.data_options, self.model,
                 dict(self.model_options), self.epsilon]
        if self.draw is not None:
            parts += ["draw", self.draw, dict(self.params)]
        return np.random.default_rng(np.random.SeedSequence(seed_from("algorithm", *parts)))

    def score_rng(self) -> np.random.Generator:
        """The noise of a private-selection run's score: independent of the fit's stream."""
        return np.random.default_rng(np.random.SeedSequence(seed_from("score", self.key)))


