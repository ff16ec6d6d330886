"""The gradient-access recorder (`dpbench.models.access`): every gradient method of the built-in models
(and of a subclass that overrides one) counts its rows once, marked rows are seen, nothing is recorded
outside `recording`."""

from __future__ import annotations

import numpy as np
import pytest

from dpbench import models
from dpbench.models.access import recording


def _rows(n: int = 10, d: int = 3):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, d))
    X[:, -1] = 0.0
    X[2, -1] = 1.0  # the one marked row
    return X, np.where(rng.uniform(size=n) < 0.5, -1.0, 1.0)


@pytest.mark.parametrize("name", ["logreg", "ridge", "mlp"])
def test_each_gradient_call_counts_its_rows_once_and_sees_the_marked_row(name):
    model = models.make(name, 3)
    theta = model.init(np.random.default_rng(1))
    X, y = _rows()
    with recording(lambda rows: rows[:, -1] != 0) as access:
        model.clipped_grad_sum(theta, X, y, 1.0)
        model.data_grad(theta, X[:4], y[:4])
        model.grad(theta, X[3:], y[3:])  # grad -> data_grad: one call
        model.loss_and_grad(theta, X, y)
        model.per_example_grads(theta, X[:1], y[:1])
        model.loss(theta, X, y)  # no gradient: not counted
    assert access.sizes == [10, 4, 7, 10, 1] and access.rows == 32
    assert access.hits == [True, True, False, True, False]
    model.data_grad(theta, X, y)  # nobody records
    assert access.sizes == [10, 4, 7, 10, 1]


def test_a_subclass_override_calling_the_base_counts_once():
    class Doubled(models.LogisticRegression):
        def per_example_grads(self, theta, X, y):
            return 2.0 * super().per_example_grads(theta, X, y)

    model = Doubled(3)
    X, y = _rows()
    with recording() as access:
        model.per_example_grads(np.zeros(3), X, y)
        models.Model.clipped_grad_sum(model, np.zeros(3), X[:5], y[:5], 1.0)  # -> per_example_grads
    assert access.sizes == [10, 5] and access.hits == [] and access.points == []


def test_iterates_are_recorded_by_value():
    from dpbench.models.access import digest

    model = models.make("logreg", 3)
    X, y = _rows()
    theta = np.array([0.5, -0.0, 1.0])
    with recording(iterates=True) as access:
        model.data_grad(theta, X, y)
        model.data_grad(theta.copy() * 1.0, X, y)
        model.data_grad(theta + 1e-9, X, y)
    assert access.points[0] == access.points[1] == digest(np.array([0.5, 0.0, 1.0])) != access.points[2]


def test_evaluated_records_a_batch_as_a_counted_call_would():
    """A peer's loop (its library computes the gradients) tells the recorder each batch itself."""
    from dpbench.models.access import digest, evaluated

    X, _ = _rows()
    theta = np.array([0.5, -1.0, 2.0])
    evaluated(theta, X)  # nobody records: nothing happens
    with recording(lambda rows: rows[:, -1] != 0, iterates=True) as access:
        evaluated(theta, X[:2])
        evaluated(theta, X[2:5])
        evaluated(theta, X[:0])  # an empty batch is a step with no rows
    assert access.sizes == [2, 3, 0] and access.hits == [False, True, False]
    assert access.points == [digest(theta)] * 3
