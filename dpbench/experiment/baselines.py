"""The majority-class baseline of an experiment's data sets: the accuracy of always predicting the
largest class of each test split, which the figures draw as a line and the claims' screens read
(a comparator at or below it cannot be beaten meaningfully)."""

from __future__ import annotations

import numpy as np

from dpbench.core.errors import DpbenchError
from dpbench.run.cells import Cell, CellContext
from dpbench.spec.experiment import Experiment


def majority_rates(exp: Experiment, dataset_labels: list[str], data_dir: str | None = None) -> dict[str, float]:
    """Per data set label, the accuracy of always predicting the majority class of the test split
    (its largest class share), averaged over the experiment's repetitions (each has its own split).

    The cell records keep n_test but not the label balance, so this reads the data (the cells'
    own splits, `cells.load_dataset`); a data set that cannot be loaded (file absent) or is not a
    +-1 classification set is left out, and its panels draw no line.
    """
    from dpbench.run.cells import load_dataset

    context = CellContext(data_dir=data_dir)
    first: dict[tuple[str, int], Cell] = {}
    for cell in exp.cells():
        if cell.dataset_label in dataset_labels:
            first.setdefault((cell.dataset_label, cell.rep), cell)
    shares: dict[str, list[float]] = {}
    for (label, _), cell in sorted(first.items()):
        try:
            y = np.asarray(load_dataset(cell, context).y_test)
        except (DpbenchError, OSError, ValueError):
            continue
        values, counts = np.unique(y, return_counts=True)
        if y.size and set(values.tolist()) <= {-1.0, 1.0}:
            shares.setdefault(label, []).append(float(counts.max() / y.size))
    return {label: float(np.mean(v)) for label, v in shares.items()}


__all__ = ["majority_rates"]
