"""The Dataset contract shared by every loader (see DESIGN.md, Contracts)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Dataset:
    """Preprocessed train/validation/test arrays.

    Every row of every X satisfies ||x||_2 <= 1 (ALGORITHMS.md §0.3); y is in {-1, +1} for
    classification and real for regression. `provenance` records where the data came from
    (source, file SHA-256 sums, raw and cleaned row counts, preprocessing choices) and is
    written into the experiment manifest. `w_star` is the true parameter of synthetic data.
    """

    name: str
    task: str  # "classification" | "regression"
    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple[str, ...]
    provenance: dict = field(default_factory=dict)
    w_star: np.ndarray | None = None

    @property
    def n_train(self) -> int:
        return int(self.X_train.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X_train.shape[1])
