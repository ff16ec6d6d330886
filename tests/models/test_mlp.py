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


@pytest.mark.parametrize("activation", ["tanh", "softplus"])
@pytest.mark.parametrize("jit", ["1", "0"])
def test_compiled_backward_pass_equals_its_numpy_twin(activation, jit, monkeypatch):
    """`MLP._rows` (mlp_kernels.mlp_rows) against the numpy passes: clipped sums with some rows clipped
    and some not, the norms, the mean gradient and loss_and_grad; and the per-example reference."""
    rng = np.random.default_rng(4)
    d, h, n = 9, 6, 200
    model = MLP(d, hidden=h, activation=activation)
    model._row_block = 37  # several blocks and a partial last one
    theta = model.init(rng) + 0.5 * rng.normal(size=model.n_params)
    X = rng.normal(size=(n, d))
    y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    monkeypatch.setenv("DPBENCH_JIT", "0")
    C = float(np.median(np.linalg.norm(model.per_example_grads(theta, X, y), axis=1)))
    ref_sum, ref_norms = model.clipped_grad_sum(theta, X, y, C)
    ref_grad = model.data_grad(theta, X, y)
    ref_loss, ref_lg = model.loss_and_grad(theta, X, y)
    monkeypatch.setenv("DPBENCH_JIT", jit)
    assert model._compiled() is (jit == "1")
    got_sum, got_norms = model.clipped_grad_sum(theta, X, y, C)
    np.testing.assert_allclose(got_norms, ref_norms, rtol=1e-12)
    np.testing.assert_allclose(got_sum, ref_sum, rtol=1e-11, atol=1e-12 * np.abs(ref_sum).max())
    np.testing.assert_allclose(model.data_grad(theta, X, y), ref_grad, rtol=1e-11, atol=1e-13)
    loss, lg = model.loss_and_grad(theta, X, y)
    assert loss == pytest.approx(ref_loss, rel=1e-13)
    np.testing.assert_allclose(lg, ref_lg, rtol=1e-11, atol=1e-13)
    with pytest.raises(ValueError, match="clip_norm"):
        model.clipped_grad_sum(theta, X, y, 0.0)
