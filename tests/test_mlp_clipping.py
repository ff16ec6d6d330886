"""The MLP's clipped gradient sum (what DP-SGD uses) without the B x m per-example matrix: per-example
norms from ||a_i||^2 ||delta_i||^2 and the clipped sum as one weighted matrix product, checked against
clipping every per-example gradient (the Model base-class path)."""

from __future__ import annotations

import numpy as np
import pytest

from dpbench.models import base as model_base
from dpbench.models.mlp import MLP


@pytest.mark.parametrize("activation", ["tanh", "softplus"])
def test_mlp_clipped_sum_equals_clipping_per_example_gradients(activation):
    rng = np.random.default_rng(1)
    d, h, n = 11, 7, 64
    model = MLP(d, hidden=h, activation=activation)
    theta = model.init(rng)
    theta[d * h:d * h + h] = rng.normal(size=h)  # non-zero biases
    theta[-1] = 0.4
    X = rng.normal(size=(n, d))
    y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    G = model.per_example_grads(theta, X, y)
    ref_norms = np.linalg.norm(G, axis=1)
    for C in (1e-3, np.median(ref_norms), 1e6):
        ref_sum, _ = model_base.Model.clipped_grad_sum(model, theta, X, y, C)
        got_sum, got_norms = model.clipped_grad_sum(theta, X, y, C)
        np.testing.assert_allclose(got_norms, ref_norms, rtol=1e-12, atol=0)
        np.testing.assert_allclose(got_sum, ref_sum, rtol=1e-12, atol=1e-12 * np.abs(ref_sum).max())
