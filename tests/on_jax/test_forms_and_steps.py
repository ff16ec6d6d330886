"""The JAX path's formulas against the numpy path's: per-example gradients of every JAX form, and one
step of each loop with the noise set to zero, to float64 rounding (JAX's CPU build; CI installs it)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the JAX path needs the jax extra: pip install 'dpbench[jax]'")

from dpbench import models  # noqa: E402
from dpbench.algorithms.output_perturbation import output_gd_path  # noqa: E402
from dpbench.algorithms.sgd import project_to_ball  # noqa: E402
from dpbench.on_jax import device, loops  # noqa: E402
from dpbench.on_jax.forms import jax_form  # noqa: E402

MODELS = [("logreg", {}), ("ridge", {}), ("mlp", {"hidden": 4}), ("mlp", {"hidden": 3, "activation": "softplus"})]


def _data(n: int = 60, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.2, 3.0, size=(n, 1))  # some rows above the clip norm
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return X, y


@pytest.fixture(scope="module")
def cpu():
    return device.activate("jax-cpu")


@pytest.mark.parametrize("name,options", MODELS)
def test_each_form_has_the_numpy_models_per_example_gradients(name, options, cpu):
    X, y = _data()
    model = models.make(name, X.shape[1], **options)
    theta = model.init(np.random.default_rng(1)) + np.random.default_rng(2).normal(size=model.n_params) * 0.3
    form = jax_form(model)
    grads = np.asarray(jax.vmap(jax.grad(form.loss), in_axes=(None, 0, 0))(theta, X, y))
    np.testing.assert_allclose(grads, model.per_example_grads(theta, X, y), rtol=1e-11, atol=1e-13)
    losses = np.asarray(jax.vmap(form.loss, in_axes=(None, 0, 0))(theta, X, y))
    np.testing.assert_allclose(losses, model.per_example_losses(theta, X, y), rtol=1e-12, atol=1e-14)
    if form.slope is not None:  # the GLM path: phi'(z) x is the gradient
        slopes = np.asarray(form.slope(X @ theta, y))
        np.testing.assert_allclose(slopes[:, None] * X, grads, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,options", MODELS[::2])  # ridge and softplus: their gradients above, the loop is one
@pytest.mark.parametrize("kind", ["dpsgd", "dp_gd"])
def test_one_noise_free_step_equals_the_numpy_step(name, options, kind, cpu):
    """Full batch (q = 1), noise scale 0: theta_1 = Proj_r(theta_0 - lr (clipped sum / a / b + l2 theta_0))
    with the model's own `clipped_grad_sum` (the numpy path's clipping), for 3 replicas at once."""
    X, y = _data()
    n = X.shape[0]
    model = models.make(name, X.shape[1], **options)
    C, radius = 0.7, 5.0
    sum_div, grad_div = (1.0, float(n)) if kind == "dpsgd" else (float(n), 1.0)  # DP-SGD at q = 1: q n = n
    starts = np.stack([model.init(np.random.default_rng(r)) + 0.2 * r for r in range(3)])
    lrs = np.array([[0.5], [1.0], [2.0]])
    keys = np.zeros((3, 2), dtype=np.uint32)
    got = loops.noisy_descent(model, X, y, starts, keys, np.zeros(3), lrs, rate=1.0, clip_norm=C,
                              sum_divisor=sum_div, grad_divisor=grad_div, radius=radius, device=cpu)
    for r in range(3):
        gsum, _ = model.clipped_grad_sum(starts[r], X, y, C)
        want = project_to_ball(starts[r] - lrs[r, 0] * (gsum / sum_div / grad_div + model.reg_grad(starts[r])), radius)
        np.testing.assert_allclose(got[r], want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,options", MODELS)
def test_plain_descent_is_output_perturbations_descent(name, options, cpu):
    """plain_descent (no offset) = `output_perturbation.output_gd_path`, replicas of different steps, l2 and radius."""
    X, y = _data(n=40)
    model = models.make(name, X.shape[1], **options)
    starts = np.stack([model.init(np.random.default_rng(r)) for r in range(3)])
    lrs, l2s, radii, steps = [0.5, 0.3, 0.8], [1e-3, 0.1, 0.0], [None, 1.0, 0.5], [7, 3, 5]
    got = loops.plain_descent(model, X, y, starts, np.zeros((3, X.shape[1])), lrs, l2s, radii, steps, device=cpu)
    for r in range(3):
        want = output_gd_path(model, X, y, starts[r], steps=[steps[r]], lr=lrs[r], l2=l2s[r], radius=radii[r])[steps[r]]
        np.testing.assert_allclose(got[r], want, rtol=1e-11, atol=1e-13)


def test_an_offset_is_gradient_descent_on_the_shifted_features(cpu):
    """Input perturbation's shared noise: GD on X + z_r equals numpy GD on the shifted rows."""
    X, y = _data(n=50)
    for name, options in MODELS[::2]:
        model = models.make(name, X.shape[1], **options)
        z = np.random.default_rng(3).normal(size=(2, X.shape[1]))
        starts = np.stack([model.init(np.random.default_rng(r)) for r in range(2)])
        got = loops.plain_descent(model, X, y, starts, z, [0.4, 0.9], [model.l2] * 2, [None] * 2, [6, 4], device=cpu)
        for r, steps in enumerate((6, 4)):
            theta = starts[r].copy()
            for _ in range(steps):
                theta = theta - [0.4, 0.9][r] * model.grad(theta, X + z[r], y)
            np.testing.assert_allclose(got[r], theta, rtol=1e-11, atol=1e-13)


def test_capacity_and_an_overflowing_batch_raises(cpu, monkeypatch):
    assert loops.capacity(100, 1.0) == 100
    K = loops.capacity(45_222, 256 / 45_222)
    assert 256 + 10 * np.sqrt(256) < K <= 256 + 10 * np.sqrt(256) + 21
    X, y = _data(n=200)
    model = models.make("logreg", X.shape[1])
    monkeypatch.setattr(loops, "capacity", lambda n, q: 3)  # batches of ~100 rows cannot fit in 3
    with pytest.raises(loops.BatchOverflow, match="exceeded the capacity of 3 rows"):
        loops.noisy_descent(model, X, y, np.zeros((1, X.shape[1])), np.zeros((1, 2), dtype=np.uint32), np.ones(1),
                            np.full((1, 2), 0.1), rate=0.5, clip_norm=1.0, sum_divisor=1.0, grad_divisor=100.0,
                            radius=None, device=cpu)


@pytest.mark.parametrize("n,q", [(500, 0.1), (4000, 0.01)], ids=["bernoulli-weights", "geometric-gaps"])
def test_poisson_batches_have_the_sampling_rate(n, q, cpu):
    """With every gradient equal to x_i = e_1 (linear ridge slope at theta = 0, y = -1/2: phi' = 1), no
    clipping, lr 1 and no noise, one step moves theta by -(batch size)/grad_divisor: over 400 replicas the
    mean batch size is n q within 5 standard errors and its variance n q (1 - q) within 25 %; on both
    ways of drawing a batch (a Bernoulli weight on every row where the capacity is a large share of n,
    gathered rows from geometric gaps elsewhere)."""
    dense = loops.capacity(n, q) >= loops.DENSE_SHARE * n
    assert dense == (n == 500)
    X = np.zeros((n, 2))
    X[:, 0] = 1.0
    y = np.full(n, -0.5)
    model = models.make("ridge", 2, l2=0.0)
    keys = np.stack([np.random.default_rng(r).integers(0, 2**32, size=2, dtype=np.uint32) for r in range(400)])
    got = loops.noisy_descent(model, X, y, np.zeros((400, 2)), keys, np.zeros(400), np.ones((400, 1)), rate=q,
                              clip_norm=1e9, sum_divisor=1.0, grad_divisor=1.0, radius=None, device=cpu)
    sizes = -got[:, 0]
    assert np.allclose(sizes, np.round(sizes))
    assert abs(sizes.mean() - n * q) < 5 * np.sqrt(n * q * (1 - q) / 400)
    assert sizes.var() == pytest.approx(n * q * (1 - q), rel=0.25)


@pytest.mark.parametrize("activation", ["tanh", "softplus"])
def test_the_mlps_closed_form_clipped_sum_is_the_numpy_models(activation, cpu):
    X, y = _data(n=40)
    model = models.make("mlp", X.shape[1], hidden=6, activation=activation)
    theta = model.init(np.random.default_rng(4)) * 3.0  # large enough that most rows are clipped
    w = (np.arange(40) % 3 != 0).astype(float)  # weight 0: a padding slot
    got = np.asarray(jax_form(model).clipped_sum(theta, X, y, w, 0.2))
    want, norms = model.clipped_grad_sum(theta, X[w > 0], y[w > 0], 0.2)
    assert 0.2 < (norms > 0.2).mean() < 1.0  # some rows clipped, some not
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


def test_poisson_rows_are_distinct_increasing_and_inside(cpu):
    for q, n in ((0.05, 1000), (0.5, 60), (1 / 27_134, 27_134)):
        K = loops.capacity(n, q)
        for seed in range(5):
            rows, w, full = loops.poisson_rows(jax.random.PRNGKey(seed), n, q, K)
            rows, w = np.asarray(rows), np.asarray(w)
            used = rows[w > 0]
            assert not bool(full) and np.all(np.diff(used) > 0) and used.min(initial=0) >= 0 and used.max(initial=0) < n
            assert np.all(w[:used.size] == 1) and np.all(w[used.size:] == 0)  # the used slots come first


def test_a_form_with_only_its_loss_takes_per_example_gradients_in_blocks(cpu, monkeypatch):
    """The fallback for a form without a slope or a closed-form sum: vmap(grad) over blocks of rows (8 rows
    a block here: 20 rows make 3 blocks, the last padded), the same step as the numpy model's."""
    from dpbench.on_jax.forms import JaxForm

    X, y = _data(n=20)
    model = models.make("mlp", X.shape[1], hidden=3)
    monkeypatch.setattr(loops, "form_of", lambda m: JaxForm(loss=jax_form(m).loss))
    monkeypatch.setattr(loops, "ROW_BLOCK_BYTES", 8 * model.n_params * 8)
    start = model.init(np.random.default_rng(5))[None, :]
    got = loops.noisy_descent(model, X, y, start, np.zeros((1, 2), dtype=np.uint32), np.zeros(1), np.full((1, 1), 0.5),
                              rate=1.0, clip_norm=0.2, sum_divisor=1.0, grad_divisor=20.0, radius=None, device=cpu)
    gsum, _ = model.clipped_grad_sum(start[0], X, y, 0.2)
    np.testing.assert_allclose(got[0], start[0] - 0.5 * (gsum / 20.0 + model.reg_grad(start[0])), rtol=1e-12,
                               atol=1e-14)


@pytest.mark.parametrize("name,options", MODELS[::2])
def test_one_noise_free_dp_lssgd_step_smooths_as_the_numpy_path(name, options, cpu):
    """DP-LSSGD's direction A_sigma^{-1} (clipped sum / q n + l2 theta), block by block (the MLP's four
    tensors), = `dp_lssgd.smoother` on the numpy step (sigma 1.5)."""
    from dpbench.algorithms.dp_lssgd import blocks, smoother, smoothing_denominator

    X, y = _data()
    n = X.shape[0]
    model = models.make(name, X.shape[1], **options)
    start = model.init(np.random.default_rng(6))[None, :] + 0.1
    pairs = [(sl, smoothing_denominator(sl.stop - sl.start, 1.5)) for sl in blocks(model)]
    got = loops.noisy_descent(model, X, y, start, np.zeros((1, 2), dtype=np.uint32), np.zeros(1), np.full((1, 1), 0.7),
                              rate=1.0, clip_norm=0.5, sum_divisor=1.0, grad_divisor=float(n), radius=None, device=cpu,
                              smoothing=pairs)
    gsum, _ = model.clipped_grad_sum(start[0], X, y, 0.5)
    direction = smoother(model, 1.5)(gsum / n + model.reg_grad(start[0]))
    np.testing.assert_allclose(got[0], start[0] - 0.7 * direction, rtol=1e-12, atol=1e-14)
