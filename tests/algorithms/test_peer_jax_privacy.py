"""The jax-privacy peer (dpbench/algorithms/peer_jax_privacy.py): DP-SGD from jax-privacy's pieces fits
logreg and the MLP, reports every step consistently with its ledger and with dpsgd's update, its
library's epsilon agrees with dpbench's for the same (z, q, T), the runner stores it "declared by
jax-privacy <version>", and without the library the fit and the spec fail in one line."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax_privacy", reason="the jax-privacy peer needs jax-privacy: pip install 'dpbench[jax-privacy]'")

from dpbench import models  # noqa: E402
from dpbench.algorithms import peers, release_check, releases  # noqa: E402
from dpbench.algorithms.base import PrivacyTarget, Problem  # noqa: E402
from dpbench.algorithms.peer_jax_privacy import fit_jax_privacy_dpsgd, library_epsilons  # noqa: E402
from dpbench.core.errors import DpbenchError  # noqa: E402
from dpbench.privacy import calibrate_dpsgd_noise, dpsgd_epsilon_report  # noqa: E402
from tests.problems import logistic_problem, one_cell_spec, run_one_cell  # noqa: E402

# jax-privacy's clipping calls optax.global_norm, which this optax deprecates: the library's warning, not ours
pytestmark = pytest.mark.filterwarnings("ignore:optax.global_norm is deprecated:DeprecationWarning")

TARGET = PrivacyTarget(epsilon=1.0, delta=1e-5)
SMALL = {"epochs": 1.0, "batch_size": 32.0, "lr": 0.5, "clip_norm": 1.0}


@pytest.fixture(scope="module")
def problem() -> Problem:
    return logistic_problem(n=300, d=4, seed=1)


def _fit(problem: Problem, seed: int = 0, **params):
    observed: list[releases.Release] = []

    def keep(rel: releases.Release) -> None:  # the loop replaces theta, but copy anyway
        observed.append(releases.Release(rel.step, np.array(rel.theta), np.array(rel.released), rel.noise_std,
                                         rel.rate, rel.clip_norm, rel.weight, rel.kind))

    with releases.tallying() as tally, releases.observing(keep):
        fit = fit_jax_privacy_dpsgd(problem, TARGET, np.random.default_rng(seed), **{**SMALL, **params})
    return fit, tally, observed


@pytest.mark.parametrize("model", ["logreg", "mlp"])
def test_fits_and_reports_every_step_as_its_ledger_says(problem, model):
    prob = Problem(model=models.make(model, 4), X=problem.X, y=problem.y)
    fit, tally, observed = _fit(prob)
    theta = np.asarray(fit.theta)
    assert theta.shape == (prob.model.n_params,) and np.isfinite(theta).all()
    led = fit.privacy
    B, n = 32, prob.n
    T = round(n / B)
    assert led.claim == "valid" and led.mechanism == f"DP-SGD (jax-privacy {peers.version('jax-privacy')})"
    assert led.get("steps") == T and led.get("sampling")["rate"] == B / n and led.sensitivity == 1.0
    assert set(led.epsilon_spent) == {"jax-privacy-rdp", "jax-privacy-pld"}
    assert led.epsilon_spent["jax-privacy-rdp"] <= TARGET.epsilon  # the library's calibration: at most the target
    check = release_check.check(tally, led)
    assert check.reason is None and [c.status for c in check.comparisons] == ["ok"] * 4, check
    assert [r.step for r in observed] == list(range(1, T + 1))
    z = led.get("noise_multiplier")
    assert {(r.noise_std, r.rate, r.clip_norm, r.weight) for r in observed} == {(z * 1.0, B / n, 1.0, 1.0 / B)}
    # dpsgd's update: theta_{t+1} = theta_t - lr (noisy_sum / B + l2 theta_t), the release being noisy_sum / B
    for now, after in zip(observed, observed[1:]):
        expected = now.theta - SMALL["lr"] * (now.released + prob.model.reg_grad(now.theta))
        np.testing.assert_allclose(after.theta, expected, rtol=1e-12, atol=1e-15)
    last = observed[-1]
    np.testing.assert_allclose(theta, last.theta - SMALL["lr"] * (last.released + prob.model.reg_grad(last.theta)),
                               rtol=1e-12, atol=1e-15)
    assert prob.model.loss(theta, prob.X, prob.y) < prob.model.loss(prob.model.init(np.random.default_rng(0)),
                                                                     prob.X, prob.y) + 1.0


def test_seed_decides_the_run(problem):
    a, _, _ = _fit(problem, seed=3)
    b, _, _ = _fit(problem, seed=3)
    c, _, _ = _fit(problem, seed=4)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-12, atol=0)
    assert not np.allclose(a.theta, c.theta, rtol=1e-6, atol=0)


@pytest.mark.slow  # make test-peers runs it (make test: CI's time budget)
def test_the_noise_is_the_declared_std(problem):
    """On rows x = 0 every logreg gradient is 0, so B * release is the library's noise alone: its std is z C."""
    zeros = Problem(model=problem.model, X=np.zeros_like(problem.X), y=problem.y)
    fit, _, observed = _fit(zeros, epochs=20.0, clip_norm=0.5)
    noise = np.concatenate([r.released / r.weight for r in observed])
    z, T = fit.privacy.get("noise_multiplier"), fit.privacy.get("steps")
    assert noise.size == 4 * T == 4 * 188
    # 752 draws: the sample std's relative error has sd ~ 1/sqrt(2 * 752) = 0.026, so 0.12 is ~4.6 sd
    assert abs(noise.std() / (z * 0.5) - 1.0) < 0.12
    assert abs(noise.mean()) < 5 * z * 0.5 / np.sqrt(noise.size)


@pytest.mark.slow  # make test-peers runs it (make test: CI's time budget)
def test_library_epsilon_agrees_with_dpbench(problem):
    """jax-privacy's epsilon of the same (z, q, T) against dpbench's accountants. Tolerances: RDP, 1%
    relative (both minimise the same RDP curve of the subsampled Gaussian over different finite grids of
    orders: the library's 116 orders, dpbench's refined grid; measured <= 0.5% at eps <= 10); PLD, 1e-3
    relative (both discretise the same privacy loss distribution at 1e-4 pessimistically; measured <= 2e-4)."""
    fit, _, _ = _fit(problem)
    led = fit.privacy
    z, q, T = led.get("noise_multiplier"), led.get("sampling")["rate"], led.get("steps")
    ours = dpsgd_epsilon_report(z, q, T, TARGET.delta)
    assert led.epsilon_spent["jax-privacy-rdp"] == pytest.approx(ours["rdp"], rel=1e-2)
    assert led.epsilon_spent["jax-privacy-pld"] == pytest.approx(ours["pld"], rel=1e-3)
    # the library's calibration (tolerance 0.01 on z, epsilon at most the target) against dpbench's
    mine = calibrate_dpsgd_noise(TARGET.epsilon, TARGET.delta, q, T)
    assert mine <= z <= mine + 0.02
    for zi, B, n, Ti in [(0.8, 64, 2000, 63), (1.5, 1, 300, 300), (0.6, 32, 455, 14)]:
        lib, ours = library_epsilons(zi, B, n, Ti, 1e-5), dpsgd_epsilon_report(zi, B / n, Ti, 1e-5)
        assert lib["jax-privacy-rdp"] == pytest.approx(ours["rdp"], rel=1e-2), (zi, B, n, Ti)
        assert lib["jax-privacy-pld"] == pytest.approx(ours["pld"], rel=1e-3), (zi, B, n, Ti)


def test_a_non_integer_batch_size_is_rounded_and_recorded(problem):
    fit, tally, _ = _fit(problem, batch_size=32.4)
    assert fit.privacy.get("batch_size_rounded_from") == 32.4 and fit.privacy.get("sampling")["rate"] == 32 / 300
    assert release_check.check(tally, fit.privacy).reason is None


@pytest.mark.slow  # make test-peers runs it (make test: CI's time budget)
def test_the_runner_stores_it_declared_by_jax_privacy(tmp_path, data_dir):
    entry = "{name: jax_privacy_dpsgd, params: {epochs: 1, batch_size: 32}}"
    stored = run_one_cell(tmp_path, entry, data_dir)["privacy"]
    assert stored["claim"] == "declared"
    assert stored["claim_reason"].startswith(f"declared by jax-privacy {peers.version('jax-privacy')}: ")
    assert stored["release_check"].startswith(f"consistent: {stored['steps']} steps")
    recomputed = stored["epsilon_recomputed"]
    assert min(recomputed.values()) <= 1.0 * (1 + 1e-6)  # dpbench's accountants hold the library's z to the target
    assert stored["epsilon_spent"]["jax-privacy-pld"] == pytest.approx(recomputed["pld"], rel=1e-3)


def test_without_the_library_the_fit_and_the_run_fail_in_one_line(problem, monkeypatch, tmp_path):
    """The spec loads (committed results stay readable without the library); a run that would fit
    the peer stops before any cell, in one line naming the install (pipeline.require_libraries)."""
    from click.testing import CliRunner

    from dpbench.cli.main import main
    from dpbench.spec.experiment import load

    monkeypatch.setitem(peers.EXTRAS, "jax-privacy", ("jax_privacy_not_installed_here",
                                                      "pip install 'dpbench[jax-privacy]'"))
    with pytest.raises(DpbenchError) as err:
        fit_jax_privacy_dpsgd(problem, TARGET, np.random.default_rng(0), **SMALL)
    text = str(err.value)
    assert "\n" not in text and text.startswith("jax-privacy is not installed") and \
        "pip install 'dpbench[jax-privacy]'" in text
    spec = one_cell_spec(tmp_path, "{name: jax_privacy_dpsgd}")
    assert load(str(spec)).algorithms[0].name == "jax_privacy_dpsgd"
    out = CliRunner().invoke(main, ["run", str(spec), "--results", str(tmp_path / "results"), "--no-progress"])
    assert out.exit_code == 2, out.output
    error = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "pip install 'dpbench[jax-privacy]'" in error[0], out.output
    assert not list((tmp_path / "results").rglob("cells/*.json"))  # nothing ran


def test_another_model_is_refused_in_one_line(problem):
    class Other(models.LogisticRegression):
        name = "other"

    with pytest.raises(DpbenchError, match="jax_privacy_dpsgd runs logreg, ridge and mlp"):
        fit_jax_privacy_dpsgd(Problem(model=Other(4), X=problem.X, y=problem.y), TARGET, np.random.default_rng(0),
                              **SMALL)
