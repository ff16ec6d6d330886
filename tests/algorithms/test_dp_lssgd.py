"""DP-LSSGD: the FFT smoothing solves A_sigma v = g, sigma = 0 is DP-SGD bit for bit, ledger, utility."""

from __future__ import annotations

import numpy as np
import pytest

from dpbench import models
from dpbench.algorithms import dp_lssgd
from dpbench.algorithms.base import REGISTRY, PrivacyTarget, Problem
from dpbench.algorithms.dp_lssgd import blocks, fit_dp_lssgd, smooth, smoother
from dpbench.algorithms.dpsgd import fit_dpsgd
from dpbench.algorithms.sgd import run_sgd, steps_for, training_loss_trace
from dpbench.privacy import calibrate_dpsgd_noise, dpsgd_epsilon_report
from tests.problems import logistic_problem


def dense_operator(m: int, sigma: float) -> np.ndarray:
    """A_sigma = I - sigma Lap, Lap the periodic 1-D Laplacian, built entry by entry (circulant)."""
    lap = np.zeros((m, m))
    for i in range(m):
        lap[i, i] -= 2.0
        lap[i, (i - 1) % m] += 1.0  # accumulating handles m = 1, 2 (neighbours coincide)
        lap[i, (i + 1) % m] += 1.0
    return np.eye(m) - sigma * lap


def test_registered():
    assert REGISTRY["dp_lssgd"].fit is dp_lssgd.fit_dp_lssgd and REGISTRY["dp_lssgd"].private


@pytest.mark.parametrize("m", [1, 2, 3, 4, 7, 16, 101, 256])
@pytest.mark.parametrize("sigma", [0.0, 0.25, 1.0, 3.0, 20.0])
def test_fft_smoothing_equals_dense_solve(m, sigma):
    rng = np.random.default_rng(m)
    g = rng.normal(size=m)
    A = dense_operator(m, sigma)
    if m >= 3:  # the documented circulant structure: diagonal 1 + 2 sigma, -sigma off-diagonals and corners
        assert A[0, 0] == 1 + 2 * sigma and A[0, 1] == -sigma and A[0, m - 1] == -sigma
    np.testing.assert_allclose(smooth(g, sigma), np.linalg.solve(A, g), rtol=0, atol=1e-12)
    np.testing.assert_allclose(A @ smooth(g, sigma), g, rtol=0, atol=1e-12)


def test_blocks_follow_the_mlp_layout_and_smoothing_is_per_block():
    d, h = 5, 3
    mlp = models.make("mlp", d, hidden=h)
    bl = blocks(mlp)
    assert [(s.start, s.stop) for s in bl] == [(0, h * d), (h * d, h * d + h), (h * d + h, h * d + 2 * h),
                                              (h * d + 2 * h, h * d + 2 * h + 1)]
    # the slices pick out exactly what unpack returns (W1 row-major, b1, w2, b2)
    theta = np.random.default_rng(0).normal(size=mlp.n_params)
    W1, b1, w2, b2 = mlp.unpack(theta)
    for sl, part in zip(bl, (W1.ravel(), b1, w2, np.array([b2]))):
        np.testing.assert_array_equal(theta[sl], part)
    assert blocks(models.make("logreg", 7)) == [slice(0, 7)]

    g = np.random.default_rng(1).normal(size=mlp.n_params)
    for sigma in (0.5, 2.0):
        A = np.zeros((mlp.n_params, mlp.n_params))
        for sl in bl:  # block-diagonal dense operator
            A[sl, sl] = dense_operator(sl.stop - sl.start, sigma)
        np.testing.assert_allclose(smoother(mlp, sigma)(g), np.linalg.solve(A, g), rtol=0, atol=1e-12)
        # differs from smoothing the whole flat vector at once
        assert not np.allclose(smoother(mlp, sigma)(g), smooth(g, sigma))


def test_sigma_zero_is_dpsgd_on_the_same_draws():
    p = logistic_problem()
    target = PrivacyTarget(epsilon=1.0, delta=1e-5)
    kw = dict(epochs=2, batch_size=50, lr=0.5)
    a = fit_dpsgd(p, target, np.random.default_rng(7), **kw)
    b = fit_dp_lssgd(p, target, np.random.default_rng(7), smoothing=0.0, **kw)
    # DP-SGD runs the compiled loop, DP-LSSGD (a transform) the numpy one: same draws, ~1e-15 apart
    np.testing.assert_allclose(a.theta, b.theta, rtol=0, atol=1e-12)
    assert np.linalg.norm(a.theta) > 0.1
    # the loop itself, with a schedule, a projection and a trace (MLP: several blocks, clipping)
    mlp = Problem(model=models.make("mlp", 6, hidden=4), X=p.X[:500], y=p.y[:500])
    kw2 = dict(steps=40, batch_size=32.0, lr=0.3, lr_schedule="inverse_sqrt", clip_norm=1.0, noise_std=2.0,
               radius=5.0, trace_every=10, on_trace=training_loss_trace(mlp))
    ta, tra = run_sgd(mlp, np.random.default_rng(3), **kw2)
    tb, trb = run_sgd(mlp, np.random.default_rng(3), transform=smoother(mlp.model, 0.0), **kw2)
    assert np.array_equal(ta, tb) and tra == trb
    # and smoothing changes the result (it is really applied)
    tc, _ = run_sgd(mlp, np.random.default_rng(3), transform=smoother(mlp.model, 1.0), **kw2)
    assert not np.allclose(ta, tc)


def test_ledger_epsilon_is_dpsgds_for_the_same_q_z_T():
    p = logistic_problem()
    target = PrivacyTarget(epsilon=0.5, delta=1e-5)
    fit = fit_dp_lssgd(p, target, np.random.default_rng(1), smoothing=2.0, epochs=2, batch_size=50, lr=0.5)
    led = fit.privacy
    q, T = 50 / p.n, steps_for(2, 50, p.n)
    z = calibrate_dpsgd_noise(0.5, 1e-5, q, T, accountant="rdp")
    assert led["steps"] == T and led["sampling"]["rate"] == pytest.approx(q)
    assert led["noise_multiplier"] == pytest.approx(z, rel=1e-12)
    assert led["epsilon_spent"] == dpsgd_epsilon_report(led["noise_multiplier"], q, T, 1e-5)
    assert led["epsilon_spent"]["rdp"] <= 0.5 * (1 + 1e-9)
    assert led["claim"] == "valid" and led["adjacency"] == "add/remove-one"
    assert led["smoothing"] == 2.0 and led["smoothing_blocks"] == [6]
    # smoothing is post-processing: the ledger is DP-SGD's apart from the smoothing fields
    plain = fit_dpsgd(p, target, np.random.default_rng(1), epochs=2, batch_size=50, lr=0.5).privacy
    assert {k: v for k, v in led.items() if k not in ("smoothing", "smoothing_blocks", "mechanism")} == \
        {k: v for k, v in plain.items() if k != "mechanism"}


def test_accuracy_improves_with_epsilon():
    full = logistic_problem(n=2000, d=8, seed=5)
    p = Problem(model=full.model, X=full.X[:1000], y=full.y[:1000])
    Xt, yt = full.X[1000:], full.y[1000:]  # held out, same distribution

    def acc(eps):
        accs = []
        for s in range(3):
            th = fit_dp_lssgd(p, PrivacyTarget(eps, 1e-5), np.random.default_rng(s), smoothing=1.0, epochs=3,
                              batch_size=100, lr=1.0).theta
            accs.append(np.mean(p.model.predict(th, Xt) == yt))
        return float(np.mean(accs))

    hi, lo = acc(8.0), acc(0.05)
    assert hi > 0.85 and hi > lo + 0.1, (hi, lo)
