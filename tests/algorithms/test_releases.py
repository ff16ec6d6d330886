"""Per-step releases of the iterative private algorithms (`dpbench.algorithms.releases`, threat
model "all updates"): observing changes no draw and no result, every step is reported, and the
reported noise scale is the one actually added (checked independently on problems where the
noiseless part of the released statistic is known). The tally the runner's release check reads
(`releases.tallying`) counts the same steps on the compiled and numpy paths, observed or not, and
per replica in vectorised and batched fits."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbench.algorithms import (  # noqa: F401
    PrivacyTarget,
    Problem,
    bun_steinke,
    dp_lssgd,
    dpsgd,
    gradient_perturbation,
    pidp,
    releases,
    robust_gd,
)
from dpbench.algorithms.base import REGISTRY
from dpbench.privacy.robust_mean import robust_sum
from dpbench.privacy.smooth_sensitivity import bun_steinke_params, trimmed_mean, trimmed_mean_smooth_sensitivity
from tests.problems import logistic_problem

TARGET = PrivacyTarget(1.0, 1e-5)
ZERO = (3, 4, 5)  # feature columns that are 0 in every row: the data gradient is 0 there

# name -> hyperparameters of the fits run with and without an observer
CASES = {
    "dpsgd": dict(epochs=2.0, batch_size=10.0, lr=0.2),
    "dp_lssgd": dict(epochs=2.0, batch_size=10.0, lr=0.2),
    "dp_gd": dict(epochs=30, lr=0.5),
    "noisy_sgd_bst14": dict(steps=300, lr_schedule="constant", lr=0.01),
    "pidp_sgd": dict(steps=300, rounds=3, radius=8e5),
    "ht_robust_gd": dict(steps=30),
    "ht_bun_steinke": dict(steps=30),
}


def zero_column_problem(n: int = 200, seed: int = 0, l2: float = 1e-3) -> Problem:
    """Logistic regression, d = 6, columns ZERO identically 0: coordinate j in ZERO of every
    per-example data gradient is 0, so that coordinate of a released statistic is pure noise."""
    p = logistic_problem(n=n, d=6, seed=seed, l2=l2)
    X = p.X.copy()
    X[:, ZERO] = 0.0
    return Problem(model=p.model, X=X, y=p.y)


def fit(name: str, problem: Problem, seed: int, observe: bool, **hyper):
    """(Fit, releases) of one fit, observed with `observing(list.append)`: the arrays are kept as
    reported, so the checks below also show that no loop changes a reported array afterwards."""
    got: list[releases.Release] = []
    info = REGISTRY[name]
    if observe:
        with releases.observing(got.append):
            out = info.fit(problem, TARGET, np.random.default_rng(seed), **hyper)
    else:
        out = info.fit(problem, TARGET, np.random.default_rng(seed), **hyper)
    return out, got


def assert_same(a, b, key: str = "") -> None:
    """Equal, floats to 1e-10 (the compiled and numpy loops agree to ~1e-12)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), key
        for k in a:
            assert_same(a[k], b[k], f"{key}.{k}")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-10, abs=1e-300), key
    else:
        assert a == b, key


@pytest.fixture(scope="module")
def problem() -> Problem:
    return zero_column_problem()


@pytest.fixture(scope="module")
def runs(problem):
    """Each algorithm fitted twice from the same seed: without and with an observer."""
    return {name: (fit(name, problem, 7, False, **hyper)[0], *fit(name, problem, 7, True, **hyper))
            for name, hyper in CASES.items()}


# ---- (d) nobody listens outside `observing` ---------------------------------------------------
def test_observed_only_inside_observing():
    assert not releases._observed()
    with releases.observing(lambda r: None):
        assert releases._observed()
    assert not releases._observed()
    with pytest.raises(RuntimeError):
        with releases.observing(lambda r: None):
            raise RuntimeError("boom")
    assert not releases._observed()
    releases.release(1, np.zeros(2), np.zeros(2), 1.0)  # nobody listens: a no-op


# ---- (a), (b): same draws, same result, one release per step ---------------------------------
@pytest.mark.parametrize("name", list(CASES))
def test_observing_changes_nothing_and_reports_every_step(name, runs, problem):
    plain, observed, got = runs[name]
    assert REGISTRY[name].updates
    np.testing.assert_allclose(observed.theta, plain.theta, rtol=1e-10, atol=1e-13)
    assert_same(observed.privacy.as_dict(), plain.privacy.as_dict())
    assert not releases._observed()
    steps = plain.privacy["steps"]
    assert [r.step for r in got] == list(range(1, steps + 1))
    m = problem.model.n_params
    kind = "noisy_statistic" if name in ("ht_robust_gd", "ht_bun_steinke") else "gradient_sum"
    for r in got:
        assert r.kind == kind and r.theta.shape == (m,) and r.released.shape == (m,)
    np.testing.assert_array_equal(got[0].theta, problem.model.init(np.random.default_rng(0)))


@pytest.mark.parametrize("name", ["dpsgd", "dp_gd", "noisy_sgd_bst14", "pidp_sgd", "ht_robust_gd",
                                  "ht_bun_steinke"])
def test_released_statistic_is_what_moved_the_iterate(name, runs, problem):
    """The adversary's recomputation: theta_{t+1} = theta_t - lr (released / B + reg_grad(theta_t))
    (B: DP-SGD's expected batch, else 1; constant step sizes, no projection here), ending at the
    returned theta."""
    plain, observed, got = runs[name]
    led, model = plain.privacy, problem.model
    lr = CASES[name]["lr"] if "lr" in CASES[name] else led["lr"] if "lr" in led else 0.05  # pidp_sgd's default
    divisor = led["sampling"]["expected_batch"] if name == "dpsgd" else 1.0
    nxt = [r.theta for r in got[1:]] + [observed.theta]
    for r, after in zip(got, nxt):
        np.testing.assert_allclose(r.theta - lr * (r.released / divisor + model.reg_grad(r.theta)), after,
                                   rtol=1e-9, atol=1e-12)


# ---- (c) the scale of the noise ----------------------------------------------------------------
def _std_ok(draws: np.ndarray, std: float) -> None:
    draws = np.asarray(draws).ravel()
    assert draws.size >= 2000
    assert abs(np.std(draws) / std - 1.0) < 0.15  # ~10 standard errors at >= 2,000 draws
    assert abs(np.mean(draws)) < 0.15 * std


@pytest.mark.parametrize("name", ["dpsgd", "dp_lssgd"])
def test_dpsgd_noise_scale(name, problem):
    out, got = fit(name, problem, 11, True, epochs=40.0, batch_size=10.0, lr=0.2)
    led = out.privacy
    assert len(got) == led["steps"] >= 700
    for r in got:
        assert r.noise_std == pytest.approx(led["noise_std_sum"], rel=1e-12)
        assert r.rate == pytest.approx(led["sampling"]["rate"], rel=1e-12)
        assert r.clip_norm == led["sensitivity"] and r.weight == 1.0
    _std_ok(np.array([r.released[list(ZERO)] / r.weight for r in got]), got[0].noise_std)


def test_dp_gd_noise_scale(problem):
    """Full batch: the noiseless sum is known, released/weight - sum_i clip(grad_i) is the noise."""
    out, got = fit("dp_gd", problem, 11, True, epochs=400, lr=0.5)
    led, model, n = out.privacy, problem.model, problem.n
    assert len(got) == led["steps"] == 400
    draws = []
    for r in got:
        assert r.noise_std == pytest.approx(led["noise_std_mean_gradient"] * n, rel=1e-12)
        assert r.rate == 1.0 and r.clip_norm == led["clip_norm"] and r.weight == pytest.approx(1.0 / n)
        gsum, _ = model.clipped_grad_sum(r.theta, problem.X, problem.y, r.clip_norm)
        draws.append(r.released / r.weight - gsum)
    _std_ok(np.array(draws), got[0].noise_std)


def test_bst14_noise_scale(problem):
    out, got = fit("noisy_sgd_bst14", problem, 11, True, steps=1000, lr_schedule="constant", lr=0.001)
    led, n = out.privacy, problem.n
    assert len(got) == led["steps"] == 1000
    for r in got:
        assert r.noise_std == pytest.approx(led["noise_std_mean_gradient"], rel=1e-12)
        assert r.rate == pytest.approx(led["sampling"]["rate"]) == pytest.approx(1.0 / n)
        assert r.clip_norm == led["clip_norm"] and r.weight == 1.0
    _std_ok(np.array([r.released[list(ZERO)] for r in got]), got[0].noise_std)


def _is_a_clipped_row_gradient(problem: Problem, r: releases.Release) -> bool:
    """released is clip(grad l(theta; z_i), C) for some row i (a batch of one, no noise)."""
    G = problem.model.per_example_grads(r.theta, problem.X, problem.y)
    norms = np.linalg.norm(G, axis=1, keepdims=True)
    G = G * np.minimum(1.0, r.clip_norm / np.maximum(norms, 1e-300))
    return float(np.min(np.max(np.abs(G - r.released), axis=1))) < 1e-12


def test_bst14_core_without_noise_releases_one_clipped_gradient(problem):
    got = []
    with releases.observing(got.append):
        gradient_perturbation.bst14_core(problem, np.random.default_rng(3), steps=50, clip_norm=0.3,
                                         noise_std=0.0, step_size=lambda t: np.full(np.shape(t), 0.1))
    assert len(got) == 50 and all(r.noise_std == 0.0 and r.clip_norm == 0.3 for r in got)
    assert all(_is_a_clipped_row_gradient(problem, r) for r in got)


def test_pidp_noise_scale_and_noise_free_steps(problem):
    out, got = fit("pidp_sgd", problem, 11, True, steps=2000, rounds=4, radius=8e5)
    led = out.privacy
    assert len(got) == led["steps"] == 2000
    free = [r for r in got if r.noise_std == 0.0]
    noisy = [r for r in got if r.noise_std != 0.0]
    assert len(free) == led["noise_free_steps"] and len(noisy) == led["noisy_steps"]
    assert 100 < len(free) and len(noisy) >= 700  # this radius gives a mix
    for r in got:
        assert r.rate == pytest.approx(1.0 / problem.n) and r.clip_norm == led["lipschitz_G"] and r.weight == 1.0
    for r in noisy:
        assert r.noise_std == pytest.approx(led["sigma"], rel=1e-12)
    for r in free[:50]:  # a noise-free step releases the sampled example's clipped gradient exactly
        assert _is_a_clipped_row_gradient(problem, r)
    assert all(np.all(r.released[list(ZERO)] == 0.0) for r in free)
    _std_ok(np.array([r.released[list(ZERO)] for r in noisy]), led["sigma"])


def test_pidp_observed_run_matches_compiled_run(problem):
    """Observing forces the numpy step loop even when the compiled loop is asked for."""
    common = dict(steps=400, rounds=2, lr=0.05, clip_norm=1.0, sigma=0.7, sigma_c=5.0, radius=4e5, epsilon1=0.75,
                  delta1=5e-6, E=1e-6, zeta=0.1)
    plain = pidp.run_pidp(problem, np.random.default_rng(5), compiled=True, **common)
    got = []
    with releases.observing(got.append):
        seen = pidp.run_pidp(problem, np.random.default_rng(5), compiled=True, **common)
    assert len(got) == 400
    np.testing.assert_array_equal(seen.noise_free, plain.noise_free)
    np.testing.assert_allclose(seen.theta, plain.theta, rtol=1e-10, atol=1e-13)


def test_robust_gd_noise_scale(problem):
    """Full batch: released - robust_mean(U_t) is the Gaussian Z_t, of the ledger's noise_std."""
    out, got = fit("ht_robust_gd", problem, 11, True, steps=400)
    led = out.privacy
    assert len(got) == led["steps"] == 400
    draws = []
    for r in got[:400]:
        assert r.noise_std == pytest.approx(led["noise_std"], rel=1e-12)
        assert r.rate == 1.0 and r.weight == 1.0 and r.clip_norm is None
        U = problem.model.per_example_grads(r.theta, problem.X, problem.y)
        draws.append(r.released - robust_sum(U, led["scale"], led["beta_m"]) / problem.n)
    _std_ok(np.array(draws), got[0].noise_std)


def test_robust_gd_minibatch_rate(problem):
    _, got = fit("ht_robust_gd", problem, 11, True, steps=3, batch_size=50)
    assert [r.rate for r in got] == [50 / problem.n] * 3


def test_rgd_is_not_declared_as_reporting_updates():
    assert not REGISTRY["rgd"].updates and not REGISTRY["rgd"].private


def test_bun_steinke_noise_scale(problem):
    """released - trimmed mean = (S/s) sinh(Y): arsinh of the rescaled difference is N(0, 1), and
    noise_std is the RMS over coordinates of the per-coordinate std (S_j/s) sqrt((e^2-1)/2)."""
    out, got = fit("ht_bun_steinke", problem, 11, True, steps=400)
    led = out.privacy
    assert len(got) == led["steps"] == 400
    a, b = led["interval"]
    s, t = bun_steinke_params(led["eps_c"])
    assert s == pytest.approx(led["noise_s"])
    ys = []
    for r in got:
        assert r.rate == 1.0 and r.weight == 1.0 and r.clip_norm is None
        U = problem.model.per_example_grads(r.theta, problem.X, problem.y)
        S = trimmed_mean_smooth_sensitivity(U, led["trim"], t, a, b)
        sd = (S / s) * math.sqrt(math.expm1(2.0) / 2.0)
        assert r.noise_std == pytest.approx(math.sqrt(np.mean(sd**2)), rel=1e-12)
        ys.append(np.arcsinh((r.released - trimmed_mean(U, led["trim"], a, b)) * s / S))
    _std_ok(np.array(ys), 1.0)
    mean_noise_std = np.mean([r.noise_std for r in got])
    assert mean_noise_std == pytest.approx(led["noise_multiplier_mean"] * bun_steinke.ARSINH_NORMAL_STD, rel=1e-4)


@pytest.mark.parametrize("name, hyper, lr", [
    ("pidp_sgd", dict(steps=200, rounds=2, radius=8e5), 0.05),
    ("noisy_sgd_bst14", dict(steps=200, lr_schedule="constant", lr=0.01), 0.01),
])
def test_mlp_paths_report_the_same_steps(name, hyper, lr, problem):
    """The MLP's own step loops (PIDP's fast MLP step, BST14's generic path): unchanged result, and
    each release is what moved the iterate."""
    from dpbench import models

    mlp = Problem(model=models.make("mlp", 6, l2=1e-3), X=problem.X, y=problem.y)
    plain, _ = fit(name, mlp, 3, False, **hyper)
    observed, got = fit(name, mlp, 3, True, **hyper)
    np.testing.assert_allclose(observed.theta, plain.theta, rtol=1e-10, atol=1e-13)
    assert len(got) == plain.privacy["steps"]
    nxt = [r.theta for r in got[1:]] + [observed.theta]
    for r, after in zip(got, nxt):
        np.testing.assert_allclose(r.theta - lr * (r.released + mlp.model.reg_grad(r.theta)), after,
                                   rtol=1e-9, atol=1e-12)


# ---- the tally (`releases.tallying`): what the runner's release check reads ----------------------
def _tallied(name: str, problem: Problem, seed: int, observe: bool, **hyper):
    """(Fit, tally, releases) of one fit run inside `tallying` (and `observing` when observe)."""
    with releases.tallying() as tally:
        out, got = fit(name, problem, seed, observe, **hyper)
    return out, tally, got


def test_a_tally_is_not_an_observer_and_counts_only_inside_its_block():
    releases.release(1, np.zeros(2), np.zeros(2), 1.0)  # nobody listens
    releases.released_steps(5, 1.0)
    with releases.tallying() as tally:
        assert not releases._observed()  # compiled loops keep running
        releases.release(1, np.zeros(2), np.zeros(2), 2.0, rate=0.1, clip_norm=1.0)
        releases.release(2, np.zeros(2), np.zeros(2), 2.0, rate=0.1, clip_norm=1.0)
        releases.released_steps(3, 0.0, rate=0.1, clip_norm=1.0)
        with releases.tallying() as inner:  # an inner block counts in its own tally only
            releases.release(1, np.zeros(2), np.zeros(2), 2.0)
        with releases.not_tallied():
            releases.release(1, np.zeros(2), np.zeros(2), 2.0)
        with pytest.raises(RuntimeError), releases.tallying():
            raise RuntimeError("boom")
        releases.release(3, np.zeros(2), np.zeros(2), 2.0, rate=0.1, clip_norm=1.0)
    releases.release(4, np.zeros(2), np.zeros(2), 2.0, rate=0.1, clip_norm=1.0)  # after the block: not counted
    D = releases.Declared
    assert tally.declared() == {D("gradient_sum", 2.0, 0.1, 1.0, 1.0): 3, D("gradient_sum", 0.0, 0.1, 1.0, 1.0): 3}
    assert tally.steps == 6 and inner.steps == 1
    with pytest.raises(ValueError, match="kind"), releases.tallying():
        releases.released_steps(1, 1.0, kind="gradient")


def test_bulk_reports_and_replica_rows_split_per_replica():
    D = releases.Declared
    with releases.tallying() as tally:
        releases.released_steps(4, np.array([1.0, 2.0, 2.0]), rate=0.5, clip_norm=1.0)  # one std per replica
        releases.released_steps(2, 3.0, replicas=3)  # the same std for each of 3 replicas
        releases.release(1, np.zeros((3, 2)), np.zeros((3, 2)), 3.0)  # (R, m) arrays: one step of each replica
        with releases.replicas_from(1):  # replicas 1 and 2 run one after the other
            releases.release(1, np.zeros(2), np.zeros(2), 5.0)
            with releases.replicas_from(1):
                releases.released_steps(7, 6.0)
    assert tally.per_replica
    zero, one, two = tally.split(3)
    assert zero.declared() == {D("gradient_sum", 1.0, 0.5, 1.0, 1.0): 4, D("gradient_sum", 3.0, 1.0, None, 1.0): 3}
    assert one.declared() == {D("gradient_sum", 2.0, 0.5, 1.0, 1.0): 4, D("gradient_sum", 3.0, 1.0, None, 1.0): 3,
                              D("gradient_sum", 5.0, 1.0, None, 1.0): 1}
    assert two.declared() == {D("gradient_sum", 2.0, 0.5, 1.0, 1.0): 4, D("gradient_sum", 3.0, 1.0, None, 1.0): 3,
                              D("gradient_sum", 6.0, 1.0, None, 1.0): 7}
    with releases.tallying() as flat:
        releases.release(1, np.zeros(2), np.zeros(2), 1.0)  # no replica named
    assert not flat.per_replica and flat.replica(0).steps == 0


@pytest.mark.parametrize("name", list(CASES))
def test_the_tally_counts_what_an_observer_sees_on_every_path(name, problem):
    """Unobserved, the compiled loops run and report in bulk (`released_steps`), the numpy loops
    per step or in bulk: the tally equals the one of the steps an observer receives one by one."""
    plain, tally, _ = _tallied(name, problem, 5, False, **CASES[name])
    observed, _, got = _tallied(name, problem, 5, True, **CASES[name])
    np.testing.assert_allclose(plain.theta, observed.theta, rtol=1e-10, atol=1e-13)
    assert tally.steps == len(got) == plain.privacy["steps"]
    assert tally.declared() == releases.Tally.of(got).declared()


@pytest.mark.parametrize("model_name", ["logreg", "ridge"])
def test_run_sgd_compiled_and_numpy_paths_tally_the_same_steps(model_name, problem):
    from dpbench import algorithms, models
    from dpbench.algorithms import kernels
    from dpbench.algorithms.sgd import run_sgd

    model = models.make(model_name, problem.X.shape[1], l2=1e-3)
    assert kernels.glm_loss_code(model) is not None and kernels.jit_enabled()  # the compiled loop applies
    task = algorithms.Problem(model=model, X=problem.X, y=problem.y)
    tallies = {}
    for compiled in (True, False):
        for noise_std, clip_norm in ((1.5, 0.5), (0.0, None)):
            with releases.tallying() as tally:
                run_sgd(task, np.random.default_rng(2), steps=333, batch_size=7.0, lr=0.1, clip_norm=clip_norm,
                        noise_std=noise_std, compiled=compiled)
            tallies[compiled, noise_std] = tally.declared()
    D = releases.Declared
    q = 7.0 / problem.n
    assert tallies[True, 1.5] == tallies[False, 1.5] == {D("gradient_sum", 1.5, q, 0.5, 1.0): 333}
    assert tallies[True, 0.0] == tallies[False, 0.0] == {D("gradient_sum", 0.0, q, None, 1.0): 333}


def test_pidp_compiled_and_numpy_paths_tally_the_same_noisy_and_noise_free_steps(problem):
    common = {"steps": 400, "rounds": 2, "lr": 0.05, "clip_norm": 1.0, "sigma": 0.7, "sigma_c": 5.0, "radius": 4e5,
              "epsilon1": 0.75, "delta1": 5e-6, "E": 1e-6, "zeta": 0.1}
    counts = []
    for compiled in (True, False):
        with releases.tallying() as tally:
            run = pidp.run_pidp(problem, np.random.default_rng(5), compiled=compiled, **common)
        counts.append(tally.declared())
    free = int(np.count_nonzero(run.noise_free))
    assert 0 < free < 400
    D = releases.Declared
    assert counts[0] == counts[1] == {D("gradient_sum", 0.7, 1.0 / problem.n, 1.0, 1.0): 400 - free,
                                      D("gradient_sum", 0.0, 1.0 / problem.n, 1.0, 1.0): free}


def _single_tallies(info, problem, privacies, seeds, params) -> list[dict]:
    out = []
    for privacy, seed, hyper in zip(privacies, seeds, params):
        with releases.tallying() as tally:
            info.fit(problem, privacy, np.random.default_rng(seed), **hyper)
        out.append(tally.declared())
    return out


@pytest.mark.parametrize("observe", [False, True])
@pytest.mark.parametrize("twin, params", [
    ("fit_dp_gd_batch", [{"epochs": 12, "lr": lr} for lr in (0.5, 1.0, 2.0)]),
    ("fit_dpsgd_batch", [{"epochs": 3, "batch_size": 1e6, "lr": lr} for lr in (0.5, 1.0, 2.0)]),  # q = 1: the loop
    ("fit_dpsgd_batch", [{"epochs": 1, "batch_size": 20.0, "lr": lr} for lr in (0.5, 1.0, 2.0)]),  # q < 1: one by one
])
def test_a_batched_fit_tallies_each_replica_as_its_single_fit(twin, params, observe, problem, monkeypatch):
    """Replicas with their own targets (their own noise stds): the tally of the batched call split
    per replica is each single fit's tally, whether the replicas run in one block, in blocks of one
    (`DRAW_BYTES`), one after another, or observed (each step counted once)."""
    from dpbench.algorithms import vectorised_fits

    fn = getattr(vectorised_fits, twin)
    info = REGISTRY["dp_gd" if "dp_gd" in twin else "dpsgd"]
    privacies = [PrivacyTarget(e, 1e-5) for e in (0.5, 1.0, 4.0)]
    expected = _single_tallies(info, problem, privacies, (0, 1, 2), params)
    assert len({tuple(e) for e in expected}) == 3  # three different noise stds
    for draw_bytes in (vectorised_fits.DRAW_BYTES, 1):
        monkeypatch.setattr(vectorised_fits, "DRAW_BYTES", draw_bytes)
        with releases.tallying() as tally:
            if observe:
                with releases.observing(lambda rel: None):
                    fn(problem, privacies, [np.random.default_rng(s) for s in (0, 1, 2)], params)
            else:
                fn(problem, privacies, [np.random.default_rng(s) for s in (0, 1, 2)], params)
        assert tally.per_replica
        assert [t.declared() for t in tally.split(3)] == expected


@pytest.mark.parametrize("observe", [False, True])
@pytest.mark.parametrize("name, hyper", [("dpsgd", {"epochs": 2.0, "batch_size": 10.0}), ("dp_gd", {"epochs": 15}),
                                         ("noisy_sgd_bst14", {"steps": 120, "lr_schedule": "constant", "lr": 0.01})])
def test_a_vectorised_fit_tallies_every_replica(name, hyper, observe, problem, monkeypatch):
    from dpbench.algorithms import vectorised_fits

    info = REGISTRY[name]
    expected = _single_tallies(info, problem, [TARGET] * 3, (0, 1, 2), [hyper] * 3)
    for draw_bytes in (vectorised_fits.DRAW_BYTES, 1):  # one block, or blocks of one replica
        monkeypatch.setattr(vectorised_fits, "DRAW_BYTES", draw_bytes)
        with releases.tallying() as tally:
            if observe:
                with releases.observing(lambda rel: None):
                    info.fit_many(problem, TARGET, [np.random.default_rng(s) for s in (0, 1, 2)], **hyper)
            else:
                info.fit_many(problem, TARGET, [np.random.default_rng(s) for s in (0, 1, 2)], **hyper)
        assert tally.per_replica and [t.declared() for t in tally.split(3)] == expected
