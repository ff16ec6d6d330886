"""Batched twins (`dpbench.algorithms.vectorised_fits`, `base.batched`): R trainings whose privacy
targets and step sizes differ, as one fit, equal the R single fits up to float rounding -- iterates
and ledgers."""

from __future__ import annotations

import numpy as np
import pytest

from dpbench import models
from dpbench.algorithms import PrivacyTarget, Problem, releases
from dpbench.algorithms import vectorised_fits as vf
from dpbench.algorithms.base import BATCHED, REGISTRY
from tests.algorithms.test_vectorised_fits import ridge_problem
from tests.problems import logistic_problem

run_many = vf.run_many

EPSILONS = (0.5, 1.0, 4.0)
LRS = (0.5, 1.0)


def grid(hyper: dict) -> tuple[list[PrivacyTarget], list[dict]]:
    """Replicas of the 3 epsilons x 2 step sizes, sharing every other hyperparameter."""
    cells = [(eps, lr) for eps in EPSILONS for lr in LRS]
    return [PrivacyTarget(eps, 1e-5) for eps, _ in cells], [{**hyper, "lr": lr} for _, lr in cells]


def run_both(name: str, problem: Problem, privacies: list[PrivacyTarget], params: list[dict], seed: int = 3,
             loop: bool | None = None):
    """(single fits, the batched twin's fits), replica r from seed r on both sides; loop: whether the
    twin must have run the vectorised loop (None: not checked)."""
    info = REGISTRY[name]
    seeds = np.random.SeedSequence(seed).spawn(len(params))
    singles = [info.fit(problem, p, np.random.default_rng(s), **h) for p, s, h in zip(privacies, seeds, params)]
    calls = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vf, "run_many", lambda *a, **k: calls.append(1) or run_many(*a, **k))
        batch = info.fit_batch(problem, privacies, [np.random.default_rng(s) for s in seeds], params)
    if loop is not None:
        assert bool(calls) == loop
    return singles, batch


def assert_equivalent(singles, batch) -> None:
    assert len(batch) == len(singles)
    for a, b in zip(singles, batch):
        assert np.allclose(b.theta, a.theta, rtol=1e-10, atol=1e-12), (a.theta, b.theta)
        assert b.privacy.as_dict() == a.privacy.as_dict()
        assert b.trace == a.trace


@pytest.fixture(scope="module")
def logreg():
    return logistic_problem(n=300, d=5, seed=0)


def test_registry_exposes_the_batched_twins():
    assert REGISTRY["dpsgd"].fit_batch is vf.fit_dpsgd_batch
    assert REGISTRY["dp_gd"].fit_batch is vf.fit_dp_gd_batch
    assert REGISTRY["dpsgd"].batch_varying == REGISTRY["dp_gd"].batch_varying == ("lr",)
    assert BATCHED[REGISTRY["dp_gd"].fit][:2] == (vf.fit_dp_gd_batch, ("lr",))
    assert REGISTRY["bolt_on"].fit_batch is None and REGISTRY["bolt_on"].batch_varying == ()


@pytest.mark.parametrize("problem", ["logreg", "ridge"])
def test_dp_gd_batch_equals_single_fits(logreg, problem, monkeypatch):
    monkeypatch.setattr(vf, "NOISE_STEPS", 4)  # 10 steps: noise drawn in pieces of 4, 4, 2
    monkeypatch.setattr(vf, "DRAW_BYTES", 2 * 4 * 6 * 8)  # 2 replicas per block (ridge: 6 parameters)
    privacies, params = grid(dict(epochs=10, clip_norm=0.5, radius=0.8))
    singles, batch = run_both("dp_gd", logreg if problem == "logreg" else ridge_problem(), privacies, params,
                              loop=True)
    assert_equivalent(singles, batch)
    stds = [f.privacy.details["noise_std_mean_gradient"] for f in batch]
    assert len(set(stds)) == len(EPSILONS)  # each epsilon its own calibration
    assert [f.privacy.details["lr"] for f in batch] == [p["lr"] for p in params]
    assert len({tuple(f.theta) for f in batch}) == len(batch)  # the replicas did differ


@pytest.mark.parametrize("problem", ["logreg", "ridge"])
@pytest.mark.parametrize("batch_size", [30.0, 1000.0])
def test_dpsgd_batch_equals_single_fits(logreg, problem, batch_size, monkeypatch):
    """Full batches (B >= n) run the vectorised loop, Poisson batches the single fits."""
    monkeypatch.setattr(vf, "NOISE_STEPS", 3)
    privacies, params = grid(dict(epochs=8.0, batch_size=batch_size, lr_schedule="inverse_sqrt", clip_norm=0.5))
    data = logreg if problem == "logreg" else ridge_problem()
    singles, batch = run_both("dpsgd", data, privacies, params, loop=batch_size >= data.n)
    assert_equivalent(singles, batch)
    assert len({f.privacy.details["noise_multiplier"] for f in batch}) == len(EPSILONS)
    assert len({tuple(f.theta) for f in batch}) == len(batch)


def test_equal_replicas_are_the_vectorised_twin(logreg):
    """fit_many is the batched loop with one target and one setting: the same numbers."""
    target, hyper = PrivacyTarget(1.0, 1e-5), dict(epochs=3.0, batch_size=300.0, lr=0.7)
    seeds = np.random.SeedSequence(5).spawn(3)
    many = vf.fit_dpsgd_many(logreg, target, [np.random.default_rng(s) for s in seeds], **hyper)
    batch = vf.fit_dpsgd_batch(logreg, [target] * 3, [np.random.default_rng(s) for s in seeds], [hyper] * 3)
    for a, b in zip(many, batch):
        np.testing.assert_array_equal(a.theta, b.theta)
        assert a.privacy.as_dict() == b.privacy.as_dict()


def test_mlp_and_trace_fall_back_to_single_fits(logreg):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) / 2.0
    mlp = Problem(model=models.make("mlp", 3, hidden=2), X=X, y=np.where(X[:, 0] > 0, 1.0, -1.0))
    assert not vf.vectorisable(mlp.model)
    privacies, params = grid(dict(epochs=1.0, batch_size=10.0))
    assert_equivalent(*run_both("dpsgd", mlp, privacies, params, loop=False))
    privacies, params = grid(dict(epochs=3))
    assert_equivalent(*run_both("dp_gd", mlp, privacies, params, loop=False))
    privacies, params = grid(dict(epochs=4, trace_every=2))
    singles, batch = run_both("dp_gd", logreg, privacies, params, loop=False)
    assert_equivalent(singles, batch)
    assert [t["step"] for t in batch[0].trace] == [2, 4]


def test_observed_batch_reports_each_single_fit(logreg):
    """Replicas of different noise stds cannot share a release: each reports its own steps."""
    privacies, params = grid(dict(epochs=3))
    got: list = []
    with releases.observing(lambda rel: got.append((rel.step, rel.noise_std, np.shape(rel.theta)))):
        singles, batch = run_both("dp_gd", logreg, privacies, params, loop=False)
    assert_equivalent(singles, batch)
    assert got[:len(got) // 2] == got[len(got) // 2:]  # the batch reported what the single fits did
    assert [step for step, *_ in got[len(got) // 2:]] == [1, 2, 3] * len(params)


def test_replicas_must_share_the_other_hyperparameters(logreg):
    privacies, params = grid(dict(epochs=3))
    params[1] = {**params[1], "epochs": 4}
    rngs = [np.random.default_rng(r) for r in range(len(params))]
    with pytest.raises(ValueError, match="epochs differs"):
        vf.fit_dp_gd_batch(logreg, privacies, rngs, params)
    privacies, params = grid(dict(batch_size=30.0))
    params[-1] = {**params[-1], "clip_norm": 2.0}
    with pytest.raises(ValueError, match="clip_norm differs"):
        vf.fit_dpsgd_batch(logreg, privacies, rngs, params)
    with pytest.raises(ValueError, match="per replica"):
        vf.fit_dpsgd_batch(logreg, privacies[:2], rngs, params)
    with pytest.raises(TypeError, match="bogus"):
        vf.fit_dpsgd_batch(logreg, privacies[:1], rngs[:1], [{"bogus": 1}])
    assert vf.fit_dp_gd_batch(logreg, [], [], []) == []


def test_plans_that_disagree_on_a_shape_raise(logreg, monkeypatch):
    """The loop shares the steps between replicas; a calibration that changes them is refused."""
    real = vf.dp_gd_plan
    monkeypatch.setattr(vf, "dp_gd_plan", lambda model, n, privacy, *, epochs, **kw: real(
        model, n, privacy, epochs=epochs + (privacy.epsilon > 1), **kw))
    privacies, params = grid(dict(epochs=3))
    with pytest.raises(ValueError, match="same steps"):
        vf.fit_dp_gd_batch(logreg, privacies, [np.random.default_rng(r) for r in range(len(params))], params)


def test_row_blocks_of_a_large_data_set(logreg, monkeypatch):
    """Where one replica's margins fill a tile, the sums run over blocks of rows for all replicas
    at once (here blocks of 8 rows, the last one short; with Poisson masks too)."""
    monkeypatch.setattr(vf, "TILE_ELEMENTS", 64)  # n = 300 > 64
    privacies, params = grid(dict(epochs=5, clip_norm=0.5))
    assert_equivalent(*run_both("dp_gd", logreg, privacies, params, loop=True))
    target, hyper = PrivacyTarget(1.0, 1e-5), dict(epochs=2.0, batch_size=30.0, lr=0.7)
    seeds = np.random.SeedSequence(7).spawn(4)
    many = vf.fit_dpsgd_many(logreg, target, [np.random.default_rng(s) for s in seeds], **hyper)
    singles = [vf.fit_dpsgd(logreg, target, np.random.default_rng(s), **hyper) for s in seeds]
    assert_equivalent(singles, many)


def test_a_grid_batches_only_where_the_twin_pays():
    from dpbench.models import MODELS

    logreg, mlp = MODELS.lookup("logreg").factory, MODELS.lookup("mlp").factory
    dp_gd, dpsgd = REGISTRY["dp_gd"], REGISTRY["dpsgd"]
    assert dp_gd.batch_pays(logreg, {"epochs": 50}) and not dp_gd.batch_pays(mlp, {"epochs": 50})
    assert not dp_gd.batch_pays(logreg, {"trace_every": 5})
    assert not dpsgd.batch_pays(logreg, {"batch_size": 256})  # Poisson batches: the single fits are faster
    assert not REGISTRY["bolt_on"].batch_pays(logreg, {})  # no twin


def test_output_perturbation_batch_shares_one_descent_and_equals_the_single_fits(monkeypatch):
    """Replicas over epsilons, epoch counts and l2 values: one descent per (l2, start) up to the
    longest T, and each Fit the single fit's, bit for bit (same operations, same draws)."""
    from dpbench import models
    from dpbench.algorithms import output_perturbation as op
    from tests.problems import logistic_problem

    problem = logistic_problem(n=300, d=5, seed=3)
    grid = [(eps, epochs, l2) for eps in (0.5, 1.0, 4.0) for epochs in (10, 30) for l2 in (1e-4, 1e-2)]
    privacies = [PrivacyTarget(epsilon=eps, delta=1e-5) for eps, _, _ in grid]
    params = [{"epochs": epochs, "l2": l2} for _, epochs, l2 in grid]
    descents = []
    real_path = op.output_gd_path
    monkeypatch.setattr(op, "output_gd_path", lambda *a, **k: descents.append(k["steps"]) or real_path(*a, **k))
    together = op.fit_output_perturbation_gd_batch(problem, privacies, [np.random.default_rng(i) for i in range(12)],
                                                   params)
    assert len(descents) == 2 and all(sorted(set(s)) == [10, 30] for s in descents)  # one per l2
    for i, (target, hyper) in enumerate(zip(privacies, params)):
        alone = op.fit_output_perturbation_gd(problem, target, np.random.default_rng(i), **hyper)
        assert np.array_equal(together[i].theta, alone.theta)
        assert dict(together[i].privacy) == dict(alone.privacy)
    assert REGISTRY["output_perturbation_gd"].batch_pays(models.MODELS.lookup("logreg").factory, {})
    assert REGISTRY["output_perturbation_gd"].batch_pays(models.MODELS.lookup("mlp").factory, {})


def test_output_perturbation_batch_on_the_mlp_shares_a_start_across_epoch_counts(monkeypatch):
    """On the MLP the start comes from each replica's stream: replicas whose streams are equal (one
    epsilon and repetition of a grid, `Cell.algorithm_rng`) share one descent across their epoch
    counts, the others get their own; each Fit equals the single fit's."""
    from dpbench import models
    from dpbench.algorithms import output_perturbation as op
    from dpbench.algorithms.base import Problem

    rng = np.random.default_rng(8)
    X = rng.uniform(-1, 1, size=(200, 4)) / 2.0
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(200) > 0, 1.0, -1.0)
    problem = Problem(model=models.make("mlp", n_features=4), X=X, y=y)
    grid = [(seed, eps, epochs) for seed, eps in ((0, 0.5), (1, 2.0)) for epochs in (3, 8)]
    privacies = [PrivacyTarget(epsilon=eps, delta=1e-5) for _, eps, _ in grid]
    params = [{"epochs": epochs, "lr": 0.5} for _, _, epochs in grid]
    descents = []
    real_path = op.output_gd_path
    monkeypatch.setattr(op, "output_gd_path", lambda *a, **k: descents.append(k["steps"]) or real_path(*a, **k))
    together = op.fit_output_perturbation_gd_batch(problem, privacies,
                                                   [np.random.default_rng(seed) for seed, _, _ in grid], params)
    assert sorted(sorted(s) for s in descents) == [[3, 8], [3, 8]]  # one descent per start
    for fit, (seed, _, _), target, hyper in zip(together, grid, privacies, params):
        alone = op.fit_output_perturbation_gd(problem, target, np.random.default_rng(seed), **hyper)
        np.testing.assert_allclose(fit.theta, alone.theta, rtol=1e-12, atol=1e-15)
        assert dict(fit.privacy) == dict(alone.privacy)


@pytest.mark.parametrize("model_name", ["logreg", "ridge"])
def test_input_perturbation_batch_equals_the_single_fits(model_name):
    """Replicas over epsilons, epoch counts and step sizes with shared noise: one product of X with
    the replicas' parameters per step, each Fit the single fit's up to float rounding."""
    from dpbench import models
    from dpbench.algorithms import input_perturbation as ip
    from dpbench.algorithms.base import Problem

    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, size=(400, 6)) / 3.0
    y = (np.where(X @ rng.normal(size=6) > 0, 1.0, -1.0) if model_name == "logreg"
         else X @ rng.normal(size=6) + 0.1 * rng.normal(size=400))
    problem = Problem(model=models.make(model_name, n_features=6), X=X, y=y)
    grid = [(eps, epochs, lr) for eps in (0.5, 2.0) for epochs in (3, 10) for lr in (0.5, 1.0)]
    privacies = [PrivacyTarget(epsilon=eps, delta=1e-5) for eps, _, _ in grid]
    params = [{"epochs": epochs, "lr": lr, "theorem": "pl"} for _, epochs, lr in grid]
    together = ip.fit_input_perturbation_batch(problem, privacies, [np.random.default_rng(i) for i in range(8)], params)
    for i, (target, hyper) in enumerate(zip(privacies, params)):
        alone = ip.fit_input_perturbation(problem, target, np.random.default_rng(i), **hyper)
        np.testing.assert_allclose(together[i].theta, alone.theta, rtol=1e-9, atol=1e-12)
        assert dict(together[i].privacy) == dict(alone.privacy)
    pays = REGISTRY["input_perturbation"].batch_pays
    assert pays(models.MODELS.lookup(model_name).factory, {"epochs": 10})
    assert not pays(models.MODELS.lookup(model_name).factory, {"noise": "per_example"})
    assert not pays(models.MODELS.lookup(model_name).factory, {"trace_every": 5})
    assert not pays(models.MODELS.lookup("mlp").factory, {})


def test_input_perturbation_batch_without_a_shared_product_runs_the_single_fits():
    from dpbench.algorithms import input_perturbation as ip
    from tests.problems import logistic_problem

    problem = logistic_problem(n=120, d=4, seed=1)
    privacies = [PrivacyTarget(epsilon=1.0, delta=1e-5)] * 2
    params = [{"epochs": 4, "noise": "per_example", "theorem": "pl"}] * 2
    together = ip.fit_input_perturbation_batch(problem, privacies, [np.random.default_rng(i) for i in range(2)], params)
    for i in range(2):
        alone = ip.fit_input_perturbation(problem, privacies[i], np.random.default_rng(i), **params[i])
        np.testing.assert_array_equal(together[i].theta, alone.theta)
