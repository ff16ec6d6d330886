"""The compiled step loops (dpbench.algorithms.kernels) against their numpy twins, and the sampler
they share.

Both paths consume the same random draws, so their iterates must agree to 1e-12 (the issue's
bar): only the order of the additions inside dot products differs. Speed is measured by
`dpbench bench`, never here.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpbench import algorithms, models
from dpbench.algorithms import kernels
from dpbench.algorithms.base import PrivacyTarget, Problem
from dpbench.algorithms.bolt_on import bolt_on_core, plan_bolt_on
from dpbench.algorithms.sgd import poisson_batches, run_sgd
from tests.problems import logistic_problem

TOL = 1e-12


def test_numba_is_installed_so_the_compiled_loops_run(monkeypatch):
    monkeypatch.delenv("DPBENCH_JIT", raising=False)
    assert kernels.HAVE_NUMBA, "numba is a dependency of dpbench (pyproject.toml)"
    assert kernels.jit_enabled()
    monkeypatch.setenv("DPBENCH_JIT", "0")
    assert not kernels.jit_enabled()


def ridge_problem(n: int = 800, d: int = 7, seed: int = 1) -> Problem:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = X @ rng.normal(size=d) + 0.1 * rng.standard_t(3, size=n)
    return Problem(model=models.make("ridge", d), X=X, y=y)


# --------------------------------------------------------------------------------- the sampler
def test_poisson_batches_are_poisson_samples():
    n, q, steps = 200, 0.05, 20_000
    offsets, rows = poisson_batches(np.random.default_rng(0), n, q, steps)
    sizes = np.diff(offsets)
    assert offsets[0] == 0 and offsets[-1] == rows.size and sizes.size == steps
    assert rows.min() >= 0 and rows.max() < n
    for t in range(0, steps, 97):  # each batch: increasing rows, so no row twice
        assert np.all(np.diff(rows[offsets[t]:offsets[t + 1]]) > 0)
    # |S_t| ~ Binomial(n, q): mean nq = 10, variance nq(1-q) = 9.5
    se_mean = np.sqrt(n * q * (1 - q) / steps)
    assert abs(sizes.mean() - n * q) < 5 * se_mean
    assert abs(sizes.var() / (n * q * (1 - q)) - 1) < 0.05
    # every row is included with probability q: counts ~ Binomial(steps, q)
    counts = np.bincount(rows, minlength=n)
    z = (counts - steps * q) / np.sqrt(steps * q * (1 - q))
    assert np.max(np.abs(z)) < 4.5
    # consecutive steps are independent: correlation of their sizes near 0
    assert abs(np.corrcoef(sizes[:-1], sizes[1:])[0, 1]) < 5 / np.sqrt(steps)


class _ShortFirstDraw:
    """A Generator whose first geometric draw is far too short: forces the top-up branch."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.calls = 0

    def geometric(self, p, size):
        self.calls += 1
        return self.rng.geometric(p, size=size if self.calls > 1 else max(1, size // 10))


def test_poisson_batches_top_up_when_the_first_draw_falls_short():
    rng = _ShortFirstDraw(3)
    n, q, steps = 50, 0.2, 400
    offsets, rows = poisson_batches(rng, n, q, steps)
    assert rng.calls > 1
    sizes = np.diff(offsets)
    assert sizes.size == steps and offsets[-1] == rows.size
    assert abs(sizes.mean() - n * q) < 5 * np.sqrt(n * q * (1 - q) / steps)
    assert sizes[-50:].mean() > 5  # the last steps are filled too, not left empty
    for t in range(steps):
        assert np.all(np.diff(rows[offsets[t]:offsets[t + 1]]) > 0)


# ----------------------------------------------------------------------- SGD / DP-SGD: run_sgd
CASES = [
    # batch_size, clip_norm, noise_std, radius, schedule
    (1.0, 1.0, 2.0, None, "constant"),
    (1.0, None, 0.0, 3.0, "inverse_sqrt"),
    (16.0, 0.5, 1.0, 0.7, "inverse_sqrt"),
    (300.0, 1.0, 0.3, None, "constant"),
]


@pytest.mark.parametrize("make", [logistic_problem, ridge_problem], ids=["logreg", "ridge"])
@pytest.mark.parametrize("batch_size,clip_norm,noise_std,radius,schedule", CASES)
def test_run_sgd_compiled_equals_numpy_on_the_same_draws(make, batch_size, clip_norm, noise_std, radius, schedule):
    problem = make()
    runs = []
    for compiled in (True, False):
        theta, trace = run_sgd(problem, np.random.default_rng(11), steps=3000, batch_size=batch_size, lr=0.05,
                               lr_schedule=schedule, clip_norm=clip_norm, noise_std=noise_std, radius=radius,
                               trace_every=700, on_trace=lambda t, th: {"norm": float(np.linalg.norm(th))},
                               compiled=compiled)
        runs.append((theta, trace))
    (a, ta), (b, tb) = runs
    assert np.linalg.norm(a) > 1e-3  # the run moved
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL)
    assert [e["step"] for e in ta] == [e["step"] for e in tb] == [700, 1400, 2100, 2800, 3000]
    np.testing.assert_allclose([e["norm"] for e in ta], [e["norm"] for e in tb], rtol=0, atol=TOL)
    if radius is not None:
        assert np.linalg.norm(a) <= radius * (1 + 1e-12)


def test_run_sgd_compiled_equals_numpy_on_adult(data_dir):
    from dpbench import data

    ds = data.load("adult", seed=0, data_dir=data_dir)
    problem = Problem(model=models.make("logreg", ds.n_features), X=ds.X_train, y=ds.y_train)
    out = [run_sgd(problem, np.random.default_rng(5), steps=20_000, batch_size=1.0, lr=0.05, clip_norm=1.0,
                   noise_std=1.5, compiled=c)[0] for c in (True, False)]
    np.testing.assert_allclose(out[0], out[1], rtol=0, atol=TOL)


def test_the_trace_does_not_change_the_draws():
    problem = logistic_problem()
    plain, _ = run_sgd(problem, np.random.default_rng(2), steps=2500, batch_size=4.0, lr=0.1, clip_norm=1.0,
                       noise_std=1.0)
    traced, trace = run_sgd(problem, np.random.default_rng(2), steps=2500, batch_size=4.0, lr=0.1, clip_norm=1.0,
                            noise_std=1.0, trace_every=333, on_trace=lambda t, th: {})
    np.testing.assert_array_equal(plain, traced)
    assert len(trace) == 8


def test_models_without_a_kernel_take_the_numpy_path():
    class OwnRegulariser(models.LogisticRegression):  # a reg_grad the kernel does not know
        def reg_grad(self, theta):
            return 2.0 * self.l2 * theta

    assert kernels.glm_loss_code(models.make("logreg", 3)) == kernels.LOGISTIC
    assert kernels.glm_loss_code(models.make("ridge", 3)) == kernels.SQUARED
    assert kernels.glm_loss_code(OwnRegulariser(3)) is None
    assert kernels.glm_loss_code(models.make("mlp", 3)) is None
    assert kernels.mlp_activation_code(models.make("mlp", 3)) == 0
    assert kernels.mlp_activation_code(models.make("mlp", 3, activation="softplus")) == 1
    # and a model the kernel would get wrong is not silently run through it: the override counts
    base = logistic_problem(n=300, d=4)
    own = Problem(model=OwnRegulariser(4, l2=0.1), X=base.X, y=base.y)
    plain = Problem(model=models.make("logreg", 4, l2=0.1), X=base.X, y=base.y)
    a, _ = run_sgd(own, np.random.default_rng(0), steps=200, batch_size=1.0, lr=0.5)
    b, _ = run_sgd(plain, np.random.default_rng(0), steps=200, batch_size=1.0, lr=0.5)
    assert np.max(np.abs(a - b)) > 1e-3


# ------------------------------------------------------------------------------------ Bolt-on
@pytest.mark.parametrize("variant,batch_size,epochs", [("convex", 1, 2), ("strongly_convex", 8, 3)])
def test_bolt_on_compiled_equals_numpy(variant, batch_size, epochs):
    problem = logistic_problem(n=1500)
    plan = plan_bolt_on(problem.model, problem.n, variant=variant, epochs=epochs, batch_size=batch_size)
    perm = np.random.default_rng(4).permutation(problem.n)
    a, b = (bolt_on_core(problem.model, problem.X, problem.y, perm, plan, np.zeros(problem.X.shape[1]), compiled=c)
            for c in (True, False))
    assert np.linalg.norm(a) > 1e-2
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL)


# ----------------------------------------------------------------------------------- PIDP-SGD
@pytest.mark.parametrize("model_name,options", [("logreg", {}), ("mlp", {"hidden": 5}),
                                                ("mlp", {"hidden": 5, "activation": "softplus"})])
@pytest.mark.parametrize("radius", [1.0, 1e6])
def test_pidp_compiled_equals_numpy(monkeypatch, model_name, options, radius):
    from dpbench.algorithms import pidp

    base = logistic_problem(n=600, d=5)
    problem = Problem(model=models.make(model_name, 5, **options), X=base.X, y=base.y)
    info = algorithms.get("pidp_sgd")
    # Each round's noise-free decisions (max|c_t| <= tau) are taken at an anchor the two paths
    # reach with different last bits; they are the same decisions only if no step's max|c_t| lies
    # within float noise of tau. Record how close the closest one came (measured: >= 5e-3 tau).
    margins = []
    decide = pidp._decide

    def recording(c_t, radius, epsilon1, delta1, tau):
        if c_t.size:
            margins.append(float(np.min(np.abs(np.max(np.abs(c_t), axis=-1) - tau))) / tau)
        return decide(c_t, radius, epsilon1, delta1, tau)

    monkeypatch.setattr(pidp, "_decide", recording)
    fits = []
    for jit in ("1", "0"):
        monkeypatch.setenv("DPBENCH_JIT", jit)
        fits.append(info.fit(problem, PrivacyTarget(2.0, 1e-5), np.random.default_rng(8), epochs=1.0, lr=0.05,
                             radius=radius, trace_every=120))
    a, b = fits
    assert min(margins) > pidp._TIE_REL_TOL
    np.testing.assert_allclose(a.theta, b.theta, rtol=0, atol=TOL)
    assert a.privacy["noise_free_fraction"] == b.privacy["noise_free_fraction"]
    assert [e["step"] for e in a.trace] == [e["step"] for e in b.trace]
    assert len(a.trace) == 5
    np.testing.assert_allclose([e["train_loss"] for e in a.trace], [e["train_loss"] for e in b.trace],
                               rtol=0, atol=TOL)
