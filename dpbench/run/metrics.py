"""Metrics of a trained parameter vector, one formula each.

accuracy            share of test labels predicted right (classification)
optimality_gap      L_ref(theta; D_train) - L*, the excess empirical risk on the *clean* training
                    data (papers 000 §7 and 003 §6; docs/methods/conventions.md). Computed from the stored
                    train_loss and L* when curves are aggregated (curves.py), so L* of a non-convex
                    model can be tightened by the best trained model.
test_loss           L_ref(theta; D_test)
estimation_error    ||theta - w*||_2 (synthetic data with a known w*)
excess_population_risk  L_P(theta) - min L_P for data whose test split is the whole population
                    (`synthetic_population`, paper 002 eq. 17.1); computed in curves.py from the
                    stored test_loss and the population optimum, like optimality_gap.
val_accuracy/val_loss: the validation-split scores used for hyperparameter selection only.
"""

from __future__ import annotations

import numpy as np

from dpbench.data.base import Dataset
from dpbench.models.base import Model

# metric name -> (description, better: "max" | "min")
METRICS: dict[str, tuple[str, str]] = {
    "accuracy": ("test accuracy", "max"),
    "optimality_gap": ("L(theta; D_train) - L*  (excess empirical risk)", "min"),
    "test_loss": ("reference loss on the test split", "min"),
    "estimation_error": ("||theta - w*||_2 (synthetic data only)", "min"),
    "excess_population_risk": ("L_P(theta) - min L_P  (excess population risk)", "min"),
}
# quantities of a run's privacy ledger that claims may read like a metric (name -> description):
# no curve draws them, and a claim reads them on the runs its experiment's first metric selects
LEDGER_QUANTITIES: dict[str, str] = {
    "noise_free_fraction": "share of the run's steps taken without noise (PIDP-SGD, paper 000 Algorithm 1)",
}
# the smallest difference of a metric that counts as meaningful (metric units): the margin of the
# "no difference beyond m" hypothesis every directional claim on it carries (dpbench.analysis.
# claims), unless the spec's `margins:` declares another for the experiment or a claim gives its
# own with a reason; a metric without one here (its scale depends on the problem) needs `margins:`
EQUIVALENCE_MARGINS: dict[str, float] = {"accuracy": 0.01, "optimality_gap": 0.02, "test_loss": 0.02}
# the range a metric's value lies in (figures keep their ±std bands inside it)
BOUNDS: dict[str, tuple[float, float]] = {"accuracy": (0.0, 1.0), "optimality_gap": (0.0, float("inf")),
                                          "test_loss": (0.0, float("inf")), "estimation_error": (0.0, float("inf")),
                                          "excess_population_risk": (0.0, float("inf"))}
# what a metric needs of the model (models.ModelInfo fields) and the data set (data.DatasetInfo
# fields); a spec asking for a metric none of its (dataset, model) pairs can give is refused
NEEDS: dict[str, dict[str, tuple[str, object]]] = {
    "accuracy": {"model": ("task", "classification")},
    "estimation_error": {"dataset": ("known_parameter", True), "model": ("linear", True)},
    "excess_population_risk": {"dataset": ("population", True)},
}
SELECTION_METRICS: dict[str, str] = {"val_accuracy": "max", "val_loss": "min"}
# the validation score that selects hyperparameters for each reported metric, unless a spec says
# otherwise: accuracy by validation accuracy, losses, gaps and errors by validation loss
DEFAULT_SELECTION: dict[str, str] = {"accuracy": "val_accuracy", "optimality_gap": "val_loss",
                                     "test_loss": "val_loss", "estimation_error": "val_loss",
                                     "excess_population_risk": "val_loss"}


def unavailable(metric: str, dataset_info, model_info) -> str | None:
    """Why `metric` cannot be computed for this registry entry pair (None when it can), per NEEDS."""
    for role, info in (("dataset", dataset_info), ("model", model_info)):
        need = NEEDS.get(metric, {}).get(role)
        if need is not None and getattr(info, need[0]) != need[1]:
            what = {"task": f"a {need[1]} model", "linear": "a linear model (theta comparable with w*)",
                    "known_parameter": "data with a known true parameter w* (synthetic)",
                    "population": "data whose test split is the population (synthetic_population)"}[need[0]]
            return f"{metric} needs {what}; {info.name} is not"
    return None


def accuracy(model: Model, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(model.predict(theta, X) == y))


def evaluate(model: Model, theta: np.ndarray, data: Dataset) -> dict[str, float]:
    """Every metric that applies to this model and dataset (optimality_gap is added in curves)."""
    has_val = data.X_val.shape[0] > 0  # a spec may set val_fraction: 0 (then nothing is selected)
    out = {
        "train_loss": model.loss(theta, data.X_train, data.y_train),
        "test_loss": model.loss(theta, data.X_test, data.y_test),
    }
    if has_val:
        out["val_loss"] = model.loss(theta, data.X_val, data.y_val)
    if model.task == "classification":
        out["accuracy"] = accuracy(model, theta, data.X_test, data.y_test)
        if has_val:
            out["val_accuracy"] = accuracy(model, theta, data.X_val, data.y_val)
    if data.w_star is not None and data.w_star.shape == theta.shape:
        out["estimation_error"] = float(np.linalg.norm(theta - data.w_star))
    return out


def private_score(model: Model, theta: np.ndarray, data: Dataset, score: str, noise_multiplier: float,
                  loss_bound: float, rng: np.random.Generator) -> tuple[float, float]:
    """A validation score released with Gaussian noise for private selection (PS22 needs each
    candidate's score to be covered by its own guarantee; dpbench.privacy.tuning accounts it).

    val_accuracy: the mean of 0/1 correctness over the n_val validation rows, sensitivity 1/n_val
    (a mean of values in [0, 1] moves by at most 1/n_val when one row is replaced, added or
    removed). val_loss: the mean of per-row data losses clipped to [0, loss_bound], sensitivity
    loss_bound/n_val. Returns (noisy score, sensitivity); the noise is N(0, (noise_multiplier x
    sensitivity)^2).
    """
    n_val = data.X_val.shape[0]
    if n_val == 0:
        raise ValueError("private selection needs a validation split (val_fraction > 0)")
    if score == "val_accuracy":
        if model.task != "classification":
            raise ValueError(f"score val_accuracy needs a classifier; {model.name} is a regression model")
        value, sensitivity = accuracy(model, theta, data.X_val, data.y_val), 1.0 / n_val
    elif score == "val_loss":
        losses = np.clip(model.per_example_losses(theta, data.X_val, data.y_val), 0.0, loss_bound)
        value, sensitivity = float(np.mean(losses)), loss_bound / n_val
    else:
        raise ValueError(f"unknown private score {score!r}")
    return float(value + rng.normal(0.0, noise_multiplier * sensitivity)), sensitivity
