"""Vectorised twins (`dpbench.algorithms.vectorised_fits`): R trainings as one fit equal the R
one-at-a-time fits up to float rounding -- iterates, ledgers and every step's release."""

from __future__ import annotations

import numpy as np
import pytest

from dpbench import models
from dpbench.algorithms import PrivacyTarget, Problem, kernels, releases
from dpbench.algorithms import vectorised_fits as vf
from dpbench.algorithms.base import REGISTRY
from tests.problems import logistic_problem

TARGET = PrivacyTarget(1.0, 1e-5)
R = 5


def ridge_problem(n: int = 80, d: int = 5, seed: int = 1) -> Problem:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
    return Problem(model=models.make("ridge", d), X=X, y=y)


def _keep(sink: list):
    return lambda rel: sink.append((rel.step, np.array(rel.theta), np.array(rel.released), rel.noise_std, rel.rate,
                                    rel.clip_norm, rel.weight, rel.kind))


def run_both(name: str, problem: Problem, hyper: dict, seed: int = 3):
    """(single fits, their releases per replica, fit_many's fits, its releases), from the same seeds."""
    info = REGISTRY[name]
    seeds = np.random.SeedSequence(seed).spawn(R)
    singles, single_releases = [], []
    for s in seeds:
        got: list = []
        with releases.observing(_keep(got)):
            singles.append(info.fit(problem, TARGET, np.random.default_rng(s), **hyper))
        single_releases.append(got)
    many_releases: list = []
    with releases.observing(_keep(many_releases)):
        many = info.fit_many(problem, TARGET, [np.random.default_rng(s) for s in seeds], **hyper)
    return singles, single_releases, many, many_releases


def assert_equivalent(singles, single_releases, many, many_releases) -> None:
    assert len(many) == len(singles) == R
    for a, b in zip(singles, many):
        np.testing.assert_allclose(b.theta, a.theta, rtol=1e-9, atol=1e-12)
        assert b.privacy.as_dict() == a.privacy.as_dict()
        assert b.trace == a.trace
    steps = len(single_releases[0])
    assert steps > 0 and len(many_releases) == steps
    for i, (step, theta, released, *rest) in enumerate(many_releases):
        assert theta.shape == released.shape == (R, singles[0].theta.shape[0])
        for r in range(R):
            s_step, s_theta, s_released, *s_rest = single_releases[r][i]
            assert step == s_step and rest == s_rest
            np.testing.assert_allclose(theta[r], s_theta, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(released[r], s_released, rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def logreg():
    return logistic_problem(n=80, d=5, seed=0)


def test_twins_are_registered():
    assert REGISTRY["dpsgd"].fit_many is vf.fit_dpsgd_many
    assert REGISTRY["dp_gd"].fit_many is vf.fit_dp_gd_many
    assert REGISTRY["noisy_sgd_bst14"].fit_many is vf.fit_noisy_sgd_bst14_many


DPSGD_CASES = {
    "poisson, inverse_sqrt, binding radius": dict(epochs=4.0, batch_size=20.0, lr=2.0, lr_schedule="inverse_sqrt",
                                                  clip_norm=0.5, radius=0.3),
    "full batch": dict(epochs=5.0, batch_size=500.0, lr=1.0, clip_norm=0.2),
}


@pytest.mark.parametrize("case", DPSGD_CASES)
def test_dpsgd_many_equals_single_fits(logreg, case):
    out = run_both("dpsgd", logreg, DPSGD_CASES[case])
    assert_equivalent(*out)
    if "radius" in DPSGD_CASES[case]:  # the projection binds, so it is exercised
        assert any(np.isclose(np.linalg.norm(t), 0.3) for _, t, *_ in out[1][0])


def test_dpsgd_many_ridge():
    assert_equivalent(*run_both("dpsgd", ridge_problem(), dict(epochs=3.0, batch_size=16.0, lr=0.3, clip_norm=1.0)))


def test_dpsgd_many_across_chunks_and_blocks(logreg, monkeypatch):
    """Several sampling chunks (the last one short), noise drawn a few steps ahead, replicas in
    blocks (the blocks' releases are stacked per step): still the single fits' draws."""
    monkeypatch.setattr(kernels, "steps_per_chunk", lambda m, cap=1024: 3)  # run_sgd reads it too
    monkeypatch.setattr(vf, "NOISE_STEPS", 2)
    monkeypatch.setattr(vf, "DRAW_BYTES", 2 * (3 * 10 + 2 * 5 * 8))  # 2 replicas per block: 3 x 10 mask bytes
    # and 2 x 5 noise floats each
    hyper = dict(epochs=1.0, batch_size=10.0, lr=0.5, clip_norm=0.5)  # 8 steps: chunks of 3, 3, 2
    out = run_both("dpsgd", logreg, hyper)
    assert len(out[3]) == 8
    assert_equivalent(*out)
    with_observer = [f.theta for f in out[2]]  # and without an observer: one more run, same iterates
    seeds = np.random.SeedSequence(3).spawn(R)
    unobserved = vf.fit_dpsgd_many(logreg, TARGET, [np.random.default_rng(s) for s in seeds], **hyper)
    np.testing.assert_allclose([f.theta for f in unobserved], with_observer, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("radius", [None, 0.2])
def test_dp_gd_many_equals_single_fits(logreg, radius, monkeypatch):
    monkeypatch.setattr(vf, "NOISE_STEPS", 4)  # 10 steps: noise drawn in pieces of 4, 4, 2
    monkeypatch.setattr(vf, "DRAW_BYTES", 2 * 4 * 5 * 8)  # 2 replicas per block
    assert_equivalent(*run_both("dp_gd", logreg, dict(epochs=10, lr=2.0, clip_norm=0.5, radius=radius)))


BST14_CASES = {
    "convex schedule, binding radius": dict(steps=40, radius=0.3),
    "constant step, no clipping bound hit": dict(steps=25, lr_schedule="constant", lr=0.5, clip_norm=5.0),
}


@pytest.mark.parametrize("case", BST14_CASES)
def test_bst14_many_equals_single_fits(logreg, case):
    out = run_both("noisy_sgd_bst14", logreg, BST14_CASES[case])
    assert_equivalent(*out)
    if "radius" in BST14_CASES[case]:  # the projection binds, so it is exercised
        assert any(np.isclose(np.linalg.norm(t), 0.3) for _, t, *_ in out[1][0])


def test_bst14_many_ridge_across_chunks_and_blocks(monkeypatch):
    """Chunks of 3 steps (the last one short) and 2 replicas a block, releases stacked per step."""
    from dpbench.algorithms import gradient_perturbation as gp

    monkeypatch.setattr(gp, "_CHUNK_FLOATS", 3 * 5)  # chunks of 3 steps of 5 noise floats, both paths
    monkeypatch.setattr(vf, "DRAW_BYTES", 2 * 3 * 5 * 8)
    out = run_both("noisy_sgd_bst14", ridge_problem(), dict(steps=8, radius=2.0, clip_norm=1.0))
    assert len(out[3]) == 8
    assert_equivalent(*out)


def test_fallback_for_other_models_and_traces(logreg):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3)) / 2.0
    mlp = Problem(model=models.make("mlp", 3, hidden=2), X=X, y=np.where(X[:, 0] > 0, 1.0, -1.0))
    assert not vf.vectorisable(mlp.model)
    out = run_both("dpsgd", mlp, dict(epochs=1.0, batch_size=10.0, lr=0.5))
    assert_equivalent(*out)
    out = run_both("dp_gd", logreg, dict(epochs=4, trace_every=2))  # a trace: one fit at a time
    assert_equivalent(*out)
    assert [t["step"] for t in out[2][0].trace] == [2, 4]


def test_unknown_hyperparameter_and_no_replicas(logreg):
    with pytest.raises(TypeError, match="bogus"):
        vf.fit_dpsgd_many(logreg, TARGET, [np.random.default_rng(0)], bogus=1)
    assert vf.fit_dp_gd_many(logreg, TARGET, []) == []
