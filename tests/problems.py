"""Small synthetic problems shared by the algorithm tests."""

from __future__ import annotations

import numpy as np

from dpbench import models
from dpbench.algorithms import Problem


def logistic_problem(n: int = 2000, d: int = 6, seed: int = 0, l2: float = 1e-3) -> Problem:
    """Rows with ||x|| <= 1 and noisy linear labels in {-1, +1}; logreg with the given l2."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    w = rng.normal(size=d) * 3
    y = np.where(X @ w + 0.3 * rng.normal(size=n) >= 0, 1.0, -1.0)
    return Problem(model=models.make("logreg", d, l2=l2), X=X, y=y)


def tiny_rows(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) for the benchmark suites' tests: rows with ||x|| <= 1, labels of a random direction plus a
    little noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.where(X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n) >= 0, 1.0, -1.0)
    return X, y


#: one cell: a peer (or any algorithm) entry on Breast Cancer, logistic regression, epsilon 1, delta 1e-5
ONE_CELL_SPEC = """name: peer
seed: 0
seeds: 1
datasets: [breast_cancer]
models: [logreg]
algorithms: [{entry}]
epsilons: [1.0]
delta: 1.0e-5
metrics: [accuracy]
"""


def one_cell_spec(folder, entry: str):
    """The path of ONE_CELL_SPEC with `entry` (a YAML algorithm entry) written into `folder`."""
    path = folder / "spec.yaml"
    path.write_text(ONE_CELL_SPEC.format(entry=entry))
    return path


def run_one_cell(folder, entry: str, data_dir) -> dict:
    """The record the runner stores for the single cell of `one_cell_spec(folder, entry)`."""
    from dpbench.run.cells import CellContext, run_cell
    from dpbench.spec.experiment import load

    [cell] = load(str(one_cell_spec(folder, entry))).cells()
    return run_cell(cell, CellContext(data_dir=str(data_dir), cache_dir=str(folder / "cache")))
