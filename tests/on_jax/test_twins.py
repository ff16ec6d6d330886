"""The JAX twins against the numpy path: identical ledgers and release counts, results equal where the
draws are the same (output and input perturbation) and statistically equivalent where they are not
(DP-SGD, DP-LSSGD, DP-GD: paired over seeds, within a stated margin); cells keyed by backend; the device errors."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the JAX path needs the jax extra: pip install 'dpbench[jax]'")

from dpbench import algorithms, models  # noqa: E402
from dpbench.algorithms import releases  # noqa: E402
from dpbench.algorithms.base import PrivacyTarget, Problem  # noqa: E402
from dpbench.core.errors import DpbenchError  # noqa: E402
from dpbench.on_jax import device, twins  # noqa: E402

#: equivalence margins of the paired comparison: |mean difference| of test accuracy and of test loss
#: between the paths, with the two one-sided 95 % tests (the 90 % interval of the mean paired
#: difference inside +-margin). A DP-SGD fit at epsilon 1 on these data has an accuracy std of ~0.035
#: and a test-loss std of ~0.045 across seeds: the margins are about half of that, and the noise of
#: epsilon 4 instead of 1 on one path moves both means by more (`test_the_test_sees_a_wrong_noise`).
ACCURACY_MARGIN = 0.02
LOSS_MARGIN = 0.02
SEEDS = 300


def _problem(model: str = "logreg", n: int = 200, d: int = 8, seed: int = 0, **options):
    """A logistic problem with rows in the unit ball and its held-out half."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(2 * n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.where(X @ w + 0.5 * rng.normal(size=2 * n) > 0, 1.0, -1.0)
    m = models.make(model, d, **options)
    return Problem(model=m, X=X[:n], y=y[:n]), (X[n:], y[n:])


def _scores(problem, test, fits):
    X, y = test
    model = problem.model
    acc = np.array([np.mean(np.sign(model.decision_function(f.theta, X)) == y) for f in fits])
    loss = np.array([model.loss(f.theta, X, y) for f in fits])
    return acc, loss


def _equivalent(a: np.ndarray, b: np.ndarray, margin: float) -> tuple[bool, float, float]:
    """Two one-sided tests at 5 %: the 90 % interval of the mean paired difference within +-margin."""
    diff = a - b
    half = 1.6449 * diff.std(ddof=1) / np.sqrt(diff.size)
    low, high = diff.mean() - half, diff.mean() + half
    return bool(-margin < low and high < margin), float(low), float(high)


def _both(name: str, problem, privacy, hyper, seeds: int = SEEDS):
    info = algorithms.get(name)
    rngs = lambda: [np.random.default_rng(1000 + s) for s in range(seeds)]  # noqa: E731
    numpy_fits = info.fit_many(problem, privacy, rngs(), **hyper) if info.fit_many else \
        [info.fit(problem, privacy, r, **hyper) for r in rngs()]
    with device.on("jax-cpu"):
        jax_fits = twins.twin(name).many(problem, privacy, rngs(), **hyper)
    return numpy_fits, jax_fits


#: the MLP twins (5 s each) run in `make test-slow`; `make test` keeps the logreg twins and, for the
#: MLP, the equalities of test_forms_and_steps.py (per-example gradients, one noise-free DP-SGD and
#: DP-LSSGD step) and the sampling rate of the geometric gaps its batches are drawn from
_SLOW = pytest.mark.slow
CASES = [  # DP-SGD on the logreg case draws Bernoulli weights on every row, on the MLP case (400 rows,
    # expected batch 10) gathered rows from geometric gaps (`on_jax.loops.DENSE_SHARE`)
    pytest.param("dpsgd", "logreg", {}, {"epochs": 3, "batch_size": 20, "lr": 2.0, "clip_norm": 1.0},
                 id="dpsgd-logreg"),
    pytest.param("dpsgd", "mlp", {"hidden": 4, "n": 400},
                 {"epochs": 2, "batch_size": 10, "lr": 0.5, "clip_norm": 1.0}, id="dpsgd-mlp", marks=_SLOW),
    pytest.param("dp_gd", "logreg", {}, {"epochs": 20, "lr": 1.0}, id="dp_gd-logreg"),
    pytest.param("dp_lssgd", "mlp", {"hidden": 4, "n": 400},
                 {"epochs": 2, "batch_size": 10, "lr": 0.5, "smoothing": 1.0}, id="dp_lssgd-mlp", marks=_SLOW),
]


@pytest.fixture(scope="module")
def cpu():
    return device.activate("jax-cpu")


@pytest.mark.parametrize("name,model,options,hyper", CASES)
def test_statistically_equivalent_to_the_numpy_path_with_identical_ledgers(name, model, options, hyper, cpu):
    problem, test = _problem(model, **options)
    privacy = PrivacyTarget(1.0, 1e-5)
    numpy_fits, jax_fits = _both(name, problem, privacy, hyper)
    assert all(f.privacy == numpy_fits[0].privacy for f in numpy_fits + jax_fits)  # the same accounting
    acc_n, loss_n = _scores(problem, test, numpy_fits)
    acc_j, loss_j = _scores(problem, test, jax_fits)
    ok_acc, *acc_ci = _equivalent(acc_j, acc_n, ACCURACY_MARGIN)
    ok_loss, *loss_ci = _equivalent(loss_j, loss_n, LOSS_MARGIN)
    assert ok_acc, f"accuracy difference 90% CI {acc_ci} not within +-{ACCURACY_MARGIN}"
    assert ok_loss, f"loss difference 90% CI {loss_ci} not within +-{LOSS_MARGIN}"
    assert not np.allclose(np.stack([f.theta for f in jax_fits]), np.stack([f.theta for f in numpy_fits]))


def test_the_test_sees_a_wrong_noise(cpu):
    """The equivalence test fails for a JAX run calibrated at epsilon 4 instead of 1 (a noise multiplier
    ~3 times smaller), so the margins above are not too wide to see a calibration bug."""
    problem, test = _problem()
    hyper = CASES[0].values[3]
    numpy_fits, _ = _both("dpsgd", problem, PrivacyTarget(1.0, 1e-5), hyper)
    with device.on("jax-cpu"):
        wrong = twins.twin("dpsgd").many(problem, PrivacyTarget(4.0, 1e-5),
                                         [np.random.default_rng(1000 + s) for s in range(SEEDS)], **hyper)
    (acc_w, loss_w), (acc_n, loss_n) = _scores(problem, test, wrong), _scores(problem, test, numpy_fits)
    assert not _equivalent(acc_w, acc_n, ACCURACY_MARGIN)[0]
    assert not _equivalent(loss_w, loss_n, LOSS_MARGIN)[0]


@pytest.mark.parametrize("name,hyper", [
    ("dpsgd", {"epochs": 2, "batch_size": 64, "lr": 0.5}),
    ("dp_lssgd", {"epochs": 2, "batch_size": 64, "lr": 0.5, "smoothing": 2.0}),
    ("dp_gd", {"epochs": 7, "lr": 1.0}),
])
def test_release_counts_are_the_numpy_paths_per_replica(name, hyper, cpu):
    """Each replica's tally (what the runner checks against its ledger) equals the single numpy fit's,
    replicas at different epsilons (different noise stds) in one batched call."""
    problem, _ = _problem(n=300)
    targets = [PrivacyTarget(e, 1e-5) for e in (0.5, 2.0, 2.0)]
    rngs = [np.random.default_rng(s) for s in range(3)]
    with releases.tallying() as tally, device.on("jax-cpu"):
        fits = twins.twin(name).batch(problem, targets, rngs, [dict(hyper, lr=lr) for lr in (0.5, 1.0, 2.0)])
    info = algorithms.get(name)
    for r, (t, part) in enumerate(zip(targets, tally.split(3))):
        with releases.tallying() as single:
            ref = info.fit(problem, t, np.random.default_rng(r), **dict(hyper, lr=(0.5, 1.0, 2.0)[r]))
        assert part.declared() == single.declared()
        assert fits[r].privacy == ref.privacy


@pytest.mark.parametrize("name,hyper", [
    ("output_perturbation_gd", [{"epochs": 20}, {"epochs": 5, "lr": 1.0}, {"epochs": 12, "l2": 0.1}]),
    ("input_perturbation", [{"epochs": 20}, {"epochs": 5, "lr": 0.5}, {"epochs": 12}]),
])
@pytest.mark.parametrize("model,options", [("logreg", {}), ("mlp", {"hidden": 3})])
def test_output_and_input_perturbation_equal_the_numpy_fits(name, hyper, model, options, cpu):
    """Their noise is drawn on the CPU in the numpy path's order: the same numbers, results equal to rounding."""
    problem, _ = _problem(model, n=120, **options)
    targets = [PrivacyTarget(e, 1e-5) for e in (0.5, 1.0, 3.0)]
    with device.on("jax-cpu"):
        fits = twins.twin(name).batch(problem, targets, [np.random.default_rng(s) for s in range(3)], hyper)
    info = algorithms.get(name)
    for r, (t, h) in enumerate(zip(targets, hyper)):
        ref = info.fit(problem, t, np.random.default_rng(r), **h)
        np.testing.assert_allclose(fits[r].theta, ref.theta, rtol=1e-9, atol=1e-11)
        assert fits[r].privacy == ref.privacy


def test_which_cells_run_on_jax():
    from dpbench.models.base import MODELS
    from dpbench.models.linear import LogisticRegression
    from dpbench.models.mlp import MLP

    assert twins.on_jax("dpsgd", LogisticRegression, {})
    assert twins.on_jax("dp_gd", MLP, {"lr": 0.1})
    assert twins.on_jax("dp_lssgd", MLP, {}) and not twins.on_jax("dp_lssgd", MLP, {"batch_size": 1})
    assert not twins.on_jax("dpsgd", LogisticRegression, {"trace_every": 10})  # traces stay on the CPU path
    assert not twins.on_jax("dpsgd", LogisticRegression, {"batch_size": 1})  # batch 1: the compiled CPU loop
    assert twins.on_jax("dpsgd", LogisticRegression, {"batch_size": twins.MIN_BATCH})
    assert not twins.on_jax("input_perturbation", LogisticRegression, {"noise": "per_example"})
    assert not twins.on_jax("pidp_sgd", LogisticRegression, {})
    assert not twins.on_jax("nonprivate", LogisticRegression, {})
    assert {MODELS.lookup(name).factory for name in MODELS} <= set(twins.MODEL_CLASSES)  # every built-in model

    class Other(LogisticRegression):  # a plugin's model: no JAX form, so the CPU path
        pass

    assert not twins.on_jax("dpsgd", Other, {})


def test_an_observer_is_refused(cpu):
    problem, _ = _problem(n=50)
    with releases.observing(lambda rel: None), device.on("jax-cpu"), pytest.raises(RuntimeError, match="numpy path"):
        twins.twin("dpsgd").many(problem, PrivacyTarget(1.0, 1e-5), [np.random.default_rng(0)])


def test_a_twin_outside_a_jax_device_is_refused():
    problem, _ = _problem(n=50)
    with pytest.raises(RuntimeError, match="jax_device.on|device.on|JAX twin"):
        twins.twin("dpsgd").many(problem, PrivacyTarget(1.0, 1e-5), [np.random.default_rng(0)])


def test_device_errors_name_what_is_missing():
    with pytest.raises(DpbenchError, match="unknown device 'tpu'"):
        device.activate("tpu")
    if not [d for d in jax.devices() if d.platform == "gpu"]:
        with pytest.raises(DpbenchError, match="JAX sees no GPU.*jax-cpu"):
            device.activate("gpu")
