"""Models: derivatives against central finite differences, clipping, registry (fast)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpbench.models import MLP, MODELS, Model, make
from dpbench.models.base import clip_factors

N, D = 20, 4
FD_STEP = 1e-6
FD_RTOL = 1e-6

# (registry name, options): every model and both MLP activations; a narrow MLP too (h != d).
CONFIGS = [
    ("logreg", {}),
    ("ridge", {}),
    ("mlp", {}),
    ("mlp", {"activation": "softplus", "hidden": 3}),
]
IDS = ["logreg", "ridge", "mlp-tanh", "mlp-softplus-h3"]


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    X = rng.normal(size=(n, d))
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / norms * rng.uniform(0.3, 1.0, size=(n, 1))  # ||x|| <= 1


@pytest.fixture(params=range(len(CONFIGS)), ids=IDS)
def problem(request):
    name, options = CONFIGS[request.param]
    rng = np.random.default_rng(1234 + request.param)
    model = make(name, D, **options)
    X = _unit_rows(rng, N, D)
    if model.task == "classification":
        y = np.where(rng.random(N) < 0.5, -1.0, 1.0)
    else:
        y = rng.normal(size=N)
    theta = rng.normal(size=model.n_params)
    v = rng.normal(size=model.n_params)
    return model, X, y, theta, v


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def _fd(f, theta: np.ndarray, direction: np.ndarray) -> np.ndarray:
    return (f(theta + FD_STEP * direction) - f(theta - FD_STEP * direction)) / (2 * FD_STEP)


def test_grad_matches_finite_differences(problem):
    model, X, y, theta, _ = problem
    E = np.eye(model.n_params)
    fd = np.array([_fd(lambda t: model.loss(t, X, y), theta, e) for e in E])
    assert _rel(fd, model.grad(theta, X, y)) < FD_RTOL


def test_per_example_grads_match_finite_differences(problem):
    model, X, y, theta, _ = problem
    G = model.per_example_grads(theta, X, y)
    assert G.shape == (N, model.n_params)
    E = np.eye(model.n_params)
    fd = np.column_stack([_fd(lambda t: model.per_example_losses(t, X, y), theta, e) for e in E])
    assert _rel(fd, G) < FD_RTOL
    assert np.abs(fd - G).max() <= FD_RTOL * np.abs(G).max()


def test_hvp_matches_finite_differences_of_grad(problem):
    model, X, y, theta, v = problem
    fd = _fd(lambda t: model.grad(t, X, y), theta, v)
    assert _rel(fd, model.hvp(theta, X, y, v)) < FD_RTOL


def test_hessian_columns_match_finite_differences_and_hvp(problem):
    model, X, y, theta, v = problem
    H = model.hessian(theta, X, y)
    assert H.shape == (model.n_params, model.n_params)
    np.testing.assert_array_equal(H, H.T)
    fd = np.column_stack([_fd(lambda t: model.grad(t, X, y), theta, e) for e in np.eye(model.n_params)])
    assert _rel(fd, H) < FD_RTOL
    np.testing.assert_allclose(H @ v, model.hvp(theta, X, y, v), rtol=1e-12, atol=1e-13)


def test_grad_is_mean_per_example_plus_reg(problem):
    model, X, y, theta, _ = problem
    G = model.per_example_grads(theta, X, y)
    np.testing.assert_allclose(G.mean(axis=0) + model.reg_grad(theta), model.grad(theta, X, y),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model.reg_grad(theta), model.l2 * theta)
    assert model.loss(theta, X, y) == pytest.approx(
        model.per_example_losses(theta, X, y).mean() + 0.5 * model.l2 * theta @ theta, rel=1e-14)


def test_loss_and_grad_is_loss_and_grad_bit_for_bit(problem):
    """What the optimisers call: one forward pass for the MLP, the same numbers as the two calls."""
    model, X, y, theta, _ = problem
    value, g = model.loss_and_grad(theta, X, y)
    assert value == model.loss(theta, X, y)
    np.testing.assert_array_equal(g, model.grad(theta, X, y))


def test_clipped_grad_sum_equals_naive_clip_then_sum(problem):
    model, X, y, theta, _ = problem
    G = model.per_example_grads(theta, X, y)
    norms = np.linalg.norm(G, axis=1)
    clips = [0.5 * norms.min(), float(np.median(norms)), 2.0 * norms.max(), np.inf]
    for C in clips:
        naive = sum(g * min(1.0, C / nrm) for g, nrm in zip(G, norms))
        total, got_norms = model.clipped_grad_sum(theta, X, y, C)
        np.testing.assert_allclose(got_norms, norms, rtol=1e-12)
        np.testing.assert_allclose(total, naive, rtol=1e-12, atol=1e-14 * np.abs(naive).max())
        ref, _ = Model.clipped_grad_sum(model, theta, X, y, C)  # base-class reference
        np.testing.assert_allclose(total, ref, rtol=1e-12, atol=1e-14 * np.abs(ref).max())
    below, _ = model.clipped_grad_sum(theta, X, y, clips[0])
    np.testing.assert_allclose(below, clips[0] * (G / norms[:, None]).sum(axis=0), rtol=1e-12)
    above, _ = model.clipped_grad_sum(theta, X, y, clips[2])
    np.testing.assert_allclose(above, G.sum(axis=0), rtol=1e-12)


def test_clip_norm_must_be_positive(problem):
    model, X, y, theta, _ = problem
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="clip_norm"):
            model.clipped_grad_sum(theta, X, y, bad)
    assert clip_factors(np.array([0.0, 2.0]), 1.0).tolist() == [1.0, 0.5]


def test_predict_and_describe(problem):
    model, X, y, theta, _ = problem
    pred = model.predict(theta, X)
    assert pred.shape == (N,)
    if model.task == "classification":
        assert set(np.unique(pred)) <= {-1.0, 1.0}
        np.testing.assert_array_equal(pred, np.where(model.decision_function(theta, X) >= 0, 1.0, -1.0))
    else:
        np.testing.assert_allclose(pred, X @ theta)
    info = model.describe()
    assert info["n_params"] == model.n_params and info["name"] == model.name


def test_init_is_seeded(problem):
    model = problem[0]
    a = model.init(np.random.default_rng(7))
    b = model.init(np.random.default_rng(7))
    assert a.shape == (model.n_params,) and a.dtype == np.float64
    np.testing.assert_array_equal(a, b)


# ---- model-specific ----------------------------------------------------------------------------

def test_logreg_hessian_psd_and_constants():
    rng = np.random.default_rng(0)
    model = make("logreg", D)
    X = _unit_rows(rng, N, D)
    y = np.where(rng.random(N) < 0.5, -1.0, 1.0)
    theta = rng.normal(size=D)
    assert np.linalg.eigvalsh(model.data_hessian(theta, X, y)).min() >= -1e-14
    assert np.linalg.eigvalsh(model.hessian(theta, X, y)).min() >= model.l2 * (1 - 1e-9)
    assert np.linalg.eigvalsh(model.data_hessian(np.zeros(D), X, y)).max() <= 0.25 + 1e-12
    assert np.linalg.norm(model.per_example_grads(theta, X, y), axis=1).max() <= model.lipschitz
    assert (model.lipschitz, model.smoothness, model.l2, model.convex) == (1.0, 0.25, 1e-4, True)
    # loss at theta = 0 is log 2 for every example
    np.testing.assert_allclose(model.per_example_losses(np.zeros(D), X, y), np.log(2.0))


def test_logreg_is_stable_at_huge_margins():
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    y = np.array([1.0, -1.0])
    model = make("logreg", 2, l2=0.0)
    theta = np.array([1e4, 1e4])  # margins +1e4 and -1e4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        losses = model.per_example_losses(theta, X, y)
        g = model.grad(theta, X, y)
        H = model.hessian(theta, X, y)
    np.testing.assert_allclose(losses, [0.0, 1e4], atol=1e-12)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(H))


def test_ridge_convention_is_squared_residual_without_half():
    rng = np.random.default_rng(3)
    model = make("ridge", D)
    X = _unit_rows(rng, N, D)
    y = rng.normal(size=N)
    theta = rng.normal(size=D)
    r = X @ theta - y
    np.testing.assert_allclose(model.per_example_losses(theta, X, y), r ** 2)
    np.testing.assert_allclose(model.hessian(theta, X, y), 2 * X.T @ X / N + 1e-3 * np.eye(D))
    assert model.l2 == 1e-3 and model.task == "regression" and model.lipschitz is None


def test_mlp_layout_and_n_params():
    for d, h in [(4, None), (5, 3), (105, None)]:
        model = make("mlp", d, hidden=h)
        hh = d if h is None else h
        assert model.hidden == hh
        assert model.n_params == hh * d + 2 * hh + 1
    assert make("mlp", 105).n_params == 105 ** 2 + 2 * 105 + 1
    rng = np.random.default_rng(5)
    model = make("mlp", 4, hidden=3)
    theta = rng.normal(size=model.n_params)
    W1, b1, w2, b2 = model.unpack(theta)
    np.testing.assert_array_equal(W1, theta[:12].reshape(3, 4))  # row-major (h, d)
    np.testing.assert_array_equal(model.pack(W1, b1, w2, b2), theta)
    X = _unit_rows(rng, 6, 4)
    np.testing.assert_allclose(model.decision_function(theta, X), np.tanh(X @ W1.T + b1) @ w2 + b2)
    assert not model.convex and model.lipschitz is None


def test_mlp_init_glorot_uniform_zero_biases():
    d, h = 30, 20
    model = make("mlp", d, hidden=h)
    W1, b1, w2, b2 = model.unpack(model.init(np.random.default_rng(0)))
    assert np.abs(W1).max() <= np.sqrt(6 / (d + h)) and np.abs(w2).max() <= np.sqrt(6 / (h + 1))
    assert np.abs(W1).max() > 0.8 * np.sqrt(6 / (d + h))  # uniform over the full range
    assert not b1.any() and b2 == 0.0


def test_mlp_hessian_chunked_equals_one_chunk():
    rng = np.random.default_rng(9)
    model = make("mlp", D)
    X = _unit_rows(rng, N, D)
    y = np.where(rng.random(N) < 0.5, -1.0, 1.0)
    theta = rng.normal(size=model.n_params)
    H1 = model.data_hessian(theta, X, y)
    model._hessian_chunk_floats = 3 * model.n_params  # 3 rows per chunk, last chunk partial
    H2 = model.data_hessian(theta, X, y)
    np.testing.assert_allclose(H2, H1, rtol=1e-12, atol=1e-15)


def test_mlp_hessian_size_bound():
    model = make("mlp", 100)  # 10,201 parameters
    assert model.n_params > model.max_hessian_params
    X = np.zeros((2, 100))
    with pytest.raises(ValueError, match="use hvp"):
        model.data_hessian(np.zeros(model.n_params), X, np.ones(2))


def test_mlp_adult_size_clipped_sum(capsys):
    rng = np.random.default_rng(11)
    n, d = 512, 105
    model = make("mlp", d)
    X = _unit_rows(rng, n, d)
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    theta = model.init(rng) + 0.1 * rng.normal(size=model.n_params)
    G = model.per_example_grads(theta, X, y)
    norms = np.linalg.norm(G, axis=1)
    for C in (0.5 * norms.min(), float(np.median(norms)), 2 * norms.max()):
        total, got_norms = model.clipped_grad_sum(theta, X, y, C)
        ref = clip_factors(norms, C) @ G
        np.testing.assert_allclose(got_norms, norms, rtol=1e-12)
        assert np.abs(total - ref).max() <= 1e-12 * max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(model.data_grad(theta, X, y), G.mean(axis=0), rtol=1e-10, atol=1e-15)
    assert capsys.readouterr().out == ""


# ---- registry ----------------------------------------------------------------------------------

def test_registry_entries():
    assert set(MODELS) == {"logreg", "ridge", "mlp"}
    for name, info in MODELS.items():
        assert info.name == name and info.description and info.citation
        model = make(name, 3)
        assert model.task == info.task and model.convex == info.convex
        assert model.l2 == info.options["l2"]
    assert MODELS["mlp"].options == {"hidden": None, "activation": "tanh", "l2": 1e-4}


def test_make_rejects_unknown_names_and_options():
    with pytest.raises(ValueError, match="valid models: logreg, mlp, ridge") as err:
        make("svm", 3)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="valid options: l2") as err:
        make("logreg", 3, hidden=4)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="activation"):
        make("mlp", 3, activation="relu")
    with pytest.raises(ValueError, match="hidden"):
        make("mlp", 3, hidden=0)
    with pytest.raises(ValueError, match="l2"):
        make("ridge", 3, l2=-1.0)
    with pytest.raises(ValueError, match="n_features"):
        make("logreg", 0)
    assert isinstance(make("mlp", 3, hidden=2, l2=0.0), MLP)
