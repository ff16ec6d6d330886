"""The fast standard normal draws are numpy's draws, and standard normal."""

import numpy as np
import pytest
from scipy import stats

from dpbench.core import gaussian
from dpbench.core.gaussian import COMPILED_MIN, normal, standard_normal


@pytest.mark.parametrize("size", [1, COMPILED_MIN - 1, COMPILED_MIN, 200_001])
def test_same_values_and_state_as_numpy(size):
    ours, theirs = np.random.default_rng(11), np.random.default_rng(11)
    got = standard_normal(ours, np.empty(size))
    want = theirs.standard_normal(size)
    # the ziggurat's tail branch uses numba's exp/log instead of numpy's libm: equal up to rounding
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert ours.integers(0, 2**62, size=4).tolist() == theirs.integers(0, 2**62, size=4).tolist()


def test_fills_a_matrix_in_row_order_and_returns_it():
    out = np.empty((300, 50))
    got = standard_normal(np.random.default_rng(3), out)
    assert got is out
    np.testing.assert_allclose(out, np.random.default_rng(3).standard_normal((300, 50)), rtol=1e-12, atol=0)


def test_normal_is_numpys_normal_with_mean_zero():
    got = normal(np.random.default_rng(5), 0.37, (40, 100))
    np.testing.assert_allclose(got, np.random.default_rng(5).normal(0.0, 0.37, size=(40, 100)), rtol=1e-12, atol=0)


def test_numpy_path_without_the_jit(monkeypatch):
    monkeypatch.setenv("DPBENCH_JIT", "0")
    called = []
    monkeypatch.setattr(gaussian, "_fill", lambda rng, flat: called.append(1))
    got = standard_normal(np.random.default_rng(2), np.empty(10_000))
    assert not called
    np.testing.assert_array_equal(got, np.random.default_rng(2).standard_normal(10_000))


@pytest.mark.parametrize("bad", [np.empty(5000, dtype=np.float32), np.empty((100, 100))[:, ::2]])
def test_refuses_buffers_it_cannot_fill(bad):
    with pytest.raises(ValueError, match="C-contiguous float64"):
        standard_normal(np.random.default_rng(0), bad)


def test_distribution_against_scipy():
    """Kolmogorov-Smirnov on 10^6 draws and the two-sided tail mass beyond 4 (the ziggurat's tail
    branch starts at 3.654) on 4 x 10^6 draws, against scipy's normal distribution function."""
    z = standard_normal(np.random.default_rng(20261126), np.empty(4_000_000))
    assert stats.kstest(z[:1_000_000], "norm").pvalue > 1e-3
    p = 2 * stats.norm.sf(4.0)
    count = int(np.count_nonzero(np.abs(z) > 4.0))
    expected, sd = z.size * p, np.sqrt(z.size * p * (1 - p))
    assert abs(count - expected) < 5 * sd, (count, expected)
    assert abs(z.mean()) < 5 / np.sqrt(z.size) and abs(z.var() - 1.0) < 5 * np.sqrt(2 / z.size)
