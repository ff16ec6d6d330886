"""The Algorithm contract (DESIGN.md, Contracts) and the registry every algorithm joins.

An algorithm is `fit(problem, privacy, rng, **hyper) -> Fit`. It knows nothing about files,
YAML or processes: it gets arrays and a model, a privacy target and a numpy Generator, and
returns parameters, an optional trace and a privacy ledger entry that says what it actually
spent (never more than the code computed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

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
    """What `fit` returns. `privacy` is the ledger entry stored with the cell (see `ledger`)."""

    theta: np.ndarray
    privacy: dict
    trace: list[dict] = field(default_factory=list)


#: Upper bounds of the epochs and steps hyperparameters: far above any paper's setting (PIDP-SGD
#: runs 27,134 batch-1 steps, full-batch methods 100-2,000 steps), so a value above them is a typo
#: that would run for days without a word (a fit is one cell: it shows no progress of its own).
MAX_EPOCHS = 10_000
MAX_STEPS = 10_000_000


@dataclass(frozen=True)
class HyperParam:
    """One hyperparameter: its type, default, allowed values and what it means (for `--help`/list)."""

    name: str
    kind: type  # float, int, str or bool
    default: Any
    doc: str
    minimum: float | None = None  # inclusive unless exclusive_minimum
    exclusive_minimum: bool = False
    maximum: float | None = None
    choices: tuple | None = None
    optional: bool = False  # None is an accepted value

    def check(self, value: Any) -> Any:
        """Return the value coerced to `kind`, or raise ValueError with the reason (no path)."""
        if value is None:
            if self.optional:
                return None
            raise ValueError("must be set, got null")
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"must be true or false, got {value!r}")
            return value
        if self.kind in (int, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"must be a number, got {value!r}")
            if self.kind is int and (not float(value).is_integer()):
                raise ValueError(f"must be an integer, got {value!r}")
            value = self.kind(value)
            if not math.isfinite(value):
                raise ValueError(f"must be finite, got {value!r}")
            if self.minimum is not None:
                if self.exclusive_minimum and not value > self.minimum:
                    raise ValueError(f"must be > {self.minimum:g}, got {value:g}")
                if not self.exclusive_minimum and not value >= self.minimum:
                    raise ValueError(f"must be >= {self.minimum:g}, got {value:g}")
            if self.maximum is not None and not value <= self.maximum:
                raise ValueError(f"must be <= {self.maximum:g}, got {value:g}")
        elif self.kind is str:
            if not isinstance(value, str):
                raise ValueError(f"must be a string, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"must be one of {', '.join(map(str, self.choices))}; got {value!r}")
        return value


FitFunction = Callable[..., Fit]


@dataclass(frozen=True)
class AlgorithmInfo:
    """A registered algorithm: name, paper, whether it is private, its hyperparameters and fit."""

    name: str
    title: str
    citation: str
    private: bool
    params: tuple[HyperParam, ...]
    fit: FitFunction
    convex_only: bool = False  # its privacy proof needs a convex loss

    def param(self, name: str) -> HyperParam:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}


REGISTRY: dict[str, AlgorithmInfo] = {}


def register(info: AlgorithmInfo) -> AlgorithmInfo:
    if info.name in REGISTRY:
        raise ValueError(f"algorithm {info.name!r} registered twice")
    REGISTRY[info.name] = info
    return info


def ledger(
    *,
    private: bool,
    mechanism: str,
    claim: str,
    target_epsilon: float | None = None,
    delta: float | None = None,
    epsilon_spent: dict[str, float] | None = None,
    **details: Any,
) -> dict:
    """A privacy ledger entry, the one format every algorithm reports.

    claim: "valid" (the guarantee is proven for this model and the numbers are the
    accountant's), "none" (non-private, or no valid proof for this model, e.g. a convex-only
    method on the MLP: then no epsilon is claimed), or "paper-only" (the paper claims epsilon
    but ALGORITHMS.md §14 finds the proof unsound). epsilon_spent maps accountant name ->
    epsilon that the code computed for the noise it actually used.
    """
    if claim not in ("valid", "none", "paper-only"):
        raise ValueError(f"claim must be valid, none or paper-only, got {claim!r}")
    entry = {
        "private": private,
        "mechanism": mechanism,
        "claim": claim,
        "target_epsilon": target_epsilon,
        "delta": delta,
        "epsilon_spent": dict(epsilon_spent or {}),
    }
    entry.update(details)
    return entry


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


NON_PRIVATE_LEDGER = dict(private=False, mechanism="none (non-private baseline)", claim="none")
