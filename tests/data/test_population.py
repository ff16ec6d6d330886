"""Tests of `synthetic_population` (dpbench/data/population.py): a fixed pool, test = population."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbench import data
from dpbench.data import population

SMALL = {"pool": 20_000}  # keeps the tests fast; the default pool is 200,000


def test_sizes_and_provenance() -> None:
    ds = data.load("synthetic_population", seed=0)
    info = data.DATASETS["synthetic_population"]
    assert ds.task == "classification" and info.origin == "synthetic" and info.population and info.known_parameter
    assert (ds.n_train, ds.X_val.shape, ds.X_test.shape) == (1000, (200, 10), (200_000, 10))
    assert ds.feature_names == tuple(f"x{j}" for j in range(10))  # no intercept
    prov = ds.provenance
    assert prov["test_is_population"] is True
    assert (prov["pool"], prov["pool_seed"], prov["d"], prov["scale"]) == (200_000, 2022, 10, 4.0)
    assert prov["split"] == {"train": 1000, "val": 200, "test": 200_000}
    np.testing.assert_allclose(prov["w_star"], ds.w_star)
    assert math.isclose(float(np.linalg.norm(ds.w_star)), 1.0, rel_tol=1e-12)
    small = data.load("synthetic_population", seed=0, n=37, val_fraction=0.0, d=3, **SMALL)
    assert (small.n_train, small.X_val.shape, small.y_val.shape, small.X_test.shape) == (37, (0, 3), (0,), (20_000, 3))
    odd = data.load("synthetic_population", seed=0, n=5, val_fraction=0.3, **SMALL)
    assert odd.X_val.shape[0] == 2  # round(1.5) half up


def test_determinism_and_seed_dependence() -> None:
    a = data.load("synthetic_population", seed=4, **SMALL)
    population.make_pool.cache_clear()
    b = data.load("synthetic_population", seed=4, **SMALL)
    for key in ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test", "w_star"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    c = data.load("synthetic_population", seed=5, **SMALL)
    assert not np.array_equal(a.X_train, c.X_train)


def test_pool_fixed_across_seeds_and_cached() -> None:
    population.make_pool.cache_clear()
    a = data.load("synthetic_population", seed=0, **SMALL)
    b = data.load("synthetic_population", seed=1, **SMALL)
    assert population.make_pool.cache_info().misses == 1  # generated once, reused
    assert a.X_test is b.X_test and a.y_test is b.y_test
    assert not a.X_test.flags.writeable and not a.y_test.flags.writeable
    np.testing.assert_array_equal(a.w_star, b.w_star)
    # test_fraction is accepted and ignored
    c = data.load("synthetic_population", seed=0, test_fraction=0.5, **SMALL)
    np.testing.assert_array_equal(a.X_train, c.X_train)
    assert c.X_test is a.X_test
    # w* depends on pool_seed and d only, not on the pool size or scale
    d = data.load("synthetic_population", seed=0, pool=500, scale=1.0)
    np.testing.assert_array_equal(a.w_star, d.w_star)
    e = data.load("synthetic_population", seed=0, pool_seed=7, **SMALL)
    assert not np.array_equal(a.X_test, e.X_test) and not np.array_equal(a.w_star, e.w_star)


def test_training_rows_are_pool_rows() -> None:
    ds = data.load("synthetic_population", seed=2, n=3000, **SMALL)
    index = {row.tobytes(): i for i, row in enumerate(ds.X_test)}
    assert len(index) == ds.X_test.shape[0]  # pool rows are distinct
    for X, y in ((ds.X_train, ds.y_train), (ds.X_val, ds.y_val)):
        pos = np.array([index[row.tobytes()] for row in X])  # KeyError if not a pool row
        np.testing.assert_array_equal(y, ds.y_test[pos])
    # with replacement: 3000 draws from 20,000 repeat some rows (expected ~ 3000^2 / 40,000 = 225)
    train_pos = [index[row.tobytes()] for row in ds.X_train]
    assert len(set(train_pos)) < len(train_pos)


def test_unit_ball() -> None:
    ds = data.load("synthetic_population", seed=0)
    for X in (ds.X_train, ds.X_val, ds.X_test):
        assert np.all(np.einsum("ij,ij->i", X, X) <= 1.0 + 1e-12)
    r = np.linalg.norm(ds.X_test, axis=1)
    d = ds.X_test.shape[1]
    # uniform in the ball: P(r <= t) = t^d; E[r] = d/(d+1). Fixed pool -> deterministic check.
    assert abs(r.mean() - d / (d + 1)) < 0.002
    for t in (0.5, 0.8, 0.95):
        assert abs((r <= t).mean() - t**d) < 0.005
    # directions are isotropic: coordinate means ~ 0
    assert np.abs(ds.X_test.mean(axis=0)).max() < 0.005


def test_labels_follow_sigmoid() -> None:
    # Fixed pool_seed: the pool is deterministic, so these checks cannot flake; the tolerances
    # are still ~5 standard deviations of the Bernoulli sums they test.
    X, y, w, p = population.make_pool(200_000, 2022, 10, 4.0)
    np.testing.assert_allclose(p, 1.0 / (1.0 + np.exp(-4.0 * (X @ w))), rtol=1e-12, atol=1e-15)
    pos = (y > 0).astype(float)
    z = (pos - p).sum() / math.sqrt((p * (1 - p)).sum())
    assert abs(z) < 5.0
    edges = np.linspace(0.0, 1.0, 11)
    bins = np.clip(np.digitize(p, edges) - 1, 0, 9)
    for k in range(10):
        sel = bins == k
        m = int(sel.sum())
        assert m > 1000
        sd = math.sqrt((p[sel] * (1 - p[sel])).sum()) / m
        assert abs(pos[sel].mean() - p[sel].mean()) < 5.0 * sd + 1e-12, k
    # labels carry signal along w*: <w*, x> has sd ~ 1/sqrt(d+2) = 0.29, logit sd ~ 1.15 (measured 0.46)
    assert np.corrcoef(X @ w, pos)[0, 1] > 0.4
    # scale 0: fair coin
    _, y0, _, p0 = population.make_pool(20_000, 2022, 10, 0.0)
    assert np.all(p0 == 0.5) and abs((y0 > 0).mean() - 0.5) < 5 * 0.5 / math.sqrt(20_000)


def test_bad_options() -> None:
    assert data.option_names("synthetic_population") == {"pool", "pool_seed", "d", "scale"}
    with pytest.raises(ValueError, match="pool: must be >= 1, got 0"):
        data.load("synthetic_population", pool=0)
    with pytest.raises(ValueError, match="scale: must be >= 0, got -1"):
        data.load("synthetic_population", scale=-1.0)
    with pytest.raises(ValueError, match="pool_seed: must be >= 0"):
        data.load("synthetic_population", pool_seed=-1)
    with pytest.raises(ValueError, match="d: must be an integer, got 2.5"):
        data.load("synthetic_population", d=2.5)
    with pytest.raises(ValueError, match="n: must be >= 1, got 0"):
        data.load("synthetic_population", n=0)
    with pytest.raises(ValueError, match="val_fraction: must be < 1"):
        data.load("synthetic_population", val_fraction=1.0)
    with pytest.raises(ValueError, match="noise: unknown parameter of dataset 'synthetic_population'; allowed: pool, "
                                         "pool_seed, d, scale, n, test_fraction, val_fraction$"):
        data.load("synthetic_population", noise=1)
