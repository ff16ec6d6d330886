"""All-updates audits (dpbench.audit.whitebox), their estimates and one-run audits
(dpbench.audit.one_run), end to end on small real games."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from dpbench import algorithms
from dpbench.algorithms.releases import observing
from dpbench.audit.one_run import membership, widen
from dpbench.audit.whitebox import WhiteBoxObserver
from dpbench.cli.main import main

DELTA = 1e-5
DPSGD = dict(dataset="breast_cancer", rows=200, canary="gradient_canary", threat="all_updates",
             params={"epochs": 10, "batch_size": 100, "lr": 1.0})


def _run(setup, tmp_path, data_dir=None, **kw):
    from dpbench.audit import multi_run
    return multi_run.run_audit(setup, data_dir=data_dir, results=tmp_path / "results", backend="sequential",
                       progress=False, **kw)


def test_observer_sums_the_log_likelihood_ratios_of_the_observed_steps(data_dir):
    """The observer's score of one DP-GD fit on D1 (replace-one, gradient canary) against the log
    ratio of the two normal densities, recomputed from the recorded releases."""
    from dpbench.audit import setup as setup_mod
    from dpbench.audit import trials
    setup = setup_mod.AuditSetup.create("dp_gd", dataset="breast_cancer", rows=100, epsilon=2.0, canary="gradient_canary",
                                threat="all_updates", params={"epochs": 5})
    resolved, game = trials.build_game(setup, data_dir=str(data_dir))
    X0, y0, X1, y1 = game.neighbours("replace-one")
    assert np.array_equal(X0[-1], game.canary_x) and y0[-1] == -1.0 and y1[-1] == 1.0  # the anti-canary is replaced
    observer, recorded = WhiteBoxObserver(game, "replace-one"), []

    def both(release):
        recorded.append(release)
        observer(release)

    with observing(both):
        algorithms.get("dp_gd").fit(algorithms.Problem(game.model, X1, y1), algorithms.PrivacyTarget(2.0, DELTA),
                                    np.random.default_rng(0), **resolved.params)
    assert len(recorded) == 5 and observer.rates == {1.0}
    u = game.direction
    total = 0.0
    for r in recorded:
        z = float(r.released @ u) / r.weight
        s = r.noise_std
        total += stats.norm.logpdf(z, -r.clip_norm, s) - stats.norm.logpdf(z, r.clip_norm, s)  # saturated: +-C
    assert observer.scores[0] == pytest.approx(total, rel=1e-9)


def test_all_updates_estimates_land_near_the_accountant_and_stay_below_the_claim(tmp_path, data_dir):
    from dpbench.audit import setup as setup_mod
    setup = setup_mod.AuditSetup.create("dp_gd", dataset="breast_cancer", rows=200, epsilon=1.0, trials=2000,
                                canary="gradient_canary", threat="all_updates", params={"epochs": 10})
    result = _run(setup, tmp_path, data_dir)
    assert result.threat == "all_updates" and result.threshold_rule == "gaussian" and result.adjacency == "replace-one"
    assert result.claim == "valid" and result.broken is False
    assert result.measured.noise_ratio == pytest.approx(1.0, abs=0.03)
    assert result.measured.epsilon == pytest.approx(result.accounted_epsilon, rel=0.2)
    assert result.gdp.epsilon == pytest.approx(result.accounted_epsilon, rel=0.35)
    row = result.row()
    assert row["threat"] == "all_updates" and row["estimate"] == "measured mechanism"
    assert row["epsilon_estimate"] == result.measured.epsilon


def test_dpsgd_with_a_quarter_of_its_noise_is_refuted(tmp_path, data_dir, monkeypatch):
    from dpbench.algorithms import dpsgd
    from dpbench.audit import setup as setup_mod

    real = dpsgd.dpsgd_noise_multiplier
    monkeypatch.setattr(dpsgd, "dpsgd_noise_multiplier", lambda *a, **k: real(*a, **k) / 4.0)
    result = _run(setup_mod.AuditSetup.create("dpsgd", epsilon=1.0, trials=1000, **DPSGD), tmp_path, data_dir)
    assert result.claimed_epsilon == 1.0
    assert result.epsilon_lower_bound > 1.0 and result.broken is True
    assert result.measured.noise_ratio == pytest.approx(1.0, abs=0.05)  # the ledger declares the noise it used
    assert result.measured.epsilon > 1.0 and result.gdp.epsilon > 1.0


def test_dpsgd_with_twice_its_noise_shows_a_loose_estimate(tmp_path, data_dir, monkeypatch):
    """An implementation adding twice the calibrated noise while claiming the same epsilon: not
    refuted (it is private), but both estimates fall far below the claim."""
    from dpbench.algorithms import dpsgd
    from dpbench.audit import setup as setup_mod

    calibrated = dpsgd.dpsgd_noise_multiplier
    monkeypatch.setattr(dpsgd, "dpsgd_noise_multiplier", lambda *a, **k: 2.0 * calibrated(*a, **k))
    result = _run(setup_mod.AuditSetup.create("dpsgd", epsilon=1.0, trials=1000, **DPSGD), tmp_path, data_dir)
    assert result.claimed_epsilon == 1.0 and result.broken is False
    kind, estimate, low, high = result.estimate
    assert kind == "measured mechanism" and estimate < 0.6 * result.claimed_epsilon
    assert result.gdp.epsilon < 0.6 * result.claimed_epsilon


def test_threat_and_recipe_are_checked():
    from dpbench.audit import setup as setup_mod
    with pytest.raises(setup_mod.AuditError, match="releases only its final model"):
        setup_mod.check_setup(setup_mod.AuditSetup.create("objective_perturbation", dataset="adult", threat="all_updates"))
    with pytest.raises(setup_mod.AuditError, match="the all-updates statistic needs a canary on a coordinate no base row"):
        setup_mod.check_setup(setup_mod.AuditSetup.create("dpsgd", canary="input_shared_intercept", threat="all_updates"))
    with pytest.raises(setup_mod.AuditError, match="a one-run audit needs a canary on a coordinate no base row"):
        setup_mod.check_setup(setup_mod.AuditSetup.create("input_perturbation", canary="input_shared_intercept", canaries=100))
    with pytest.raises(setup_mod.AuditError, match="threat: must be one of"):
        setup_mod.check_setup(setup_mod.AuditSetup.create("dpsgd", dataset="adult", threat="everything"))
    with pytest.raises(setup_mod.AuditError, match="one-run statistic needs a linear model"):
        setup_mod.check_setup(setup_mod.AuditSetup.create("dpsgd", dataset="adult", model="mlp", threat="all_updates", canaries=10))
    with pytest.raises(setup_mod.AuditError, match="guesses: at most one per canary"):
        setup_mod.check_setup(setup_mod.AuditSetup.create("dpsgd", dataset="adult", canaries=10, guesses=11))


# ---- one-run audits --------------------------------------------------------------------------------
def test_widen_gives_every_canary_its_own_coordinate(data_dir):
    from dpbench.audit import setup as setup_mod
    from dpbench.audit import trials
    _, game = trials.build_game(setup_mod.AuditSetup.create("dpsgd", dataset="breast_cancer", rows=50, canary="gradient_canary"),
                           data_dir=str(data_dir))
    data = widen(game, 5, "replace-one")
    d = game.X.shape[1]
    assert data.X.shape == (50, d + 4) and np.all(data.X[:, d - 1:] == 0)
    assert data.coords.tolist() == [d - 1, d, d + 1, d + 2, d + 3]
    assert np.array_equal(data.Xc[np.arange(5), data.coords], np.ones(5)) and np.all(data.yc == 1)
    assert np.all(data.yr == -1) and np.array_equal(data.Xr, data.Xc)
    included = np.array([True, False, True, False, False])
    X, y = data.training_set(included)
    assert X.shape == (55, d + 4) and y[50:].tolist() == [1, -1, 1, -1, -1]
    assert widen(game, 5, "add/remove-one").training_set(included)[0].shape == (52, d + 4)
    bits = membership("some game", 1000)
    assert np.array_equal(bits, membership("some game", 1000)) and 400 < bits.sum() < 600


def test_one_run_refutes_pidp_and_not_dp_gd(tmp_path, data_dir):
    from dpbench.audit import setup as setup_mod
    pidp = setup_mod.AuditSetup.create("pidp_sgd", canary="pidp_constant", epsilon=1.0, canaries=200)
    result = _run(pidp, tmp_path)
    assert result.claim == "paper-only" and result.adjacency == "replace-one"
    assert result.outcome.correct == result.outcome.r == 20 and result.broken is True
    assert result.epsilon_lower_bound == pytest.approx(result.ceiling)
    again = _run(pidp, tmp_path)
    assert again.reused == 1 and again.epsilon_lower_bound == result.epsilon_lower_bound
    stored = _run(pidp, tmp_path, train=False)
    assert stored.outcome == result.outcome
    row = result.row()
    assert row["method"] == "one-run" and row["canaries"] == 200 and row["guesses"] == 20

    gd = setup_mod.AuditSetup.create("dp_gd", dataset="breast_cancer", rows=200, epsilon=1.0, canaries=300,
                             canary="gradient_canary", threat="all_updates", params={"epochs": 10})
    honest = _run(gd, tmp_path, data_dir)
    assert honest.claim == "valid" and honest.broken is False


def test_cli_one_run(tmp_path):
    args = ["audit", "--algorithm", "pidp_sgd", "--canary", "pidp_constant", "--eps", "1", "--one-run",
            "--canaries", "100", "--results", str(tmp_path), "--no-progress"]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    assert "one-run audit: pidp_sgd" in out.output and "correct 10 of 10" in out.output
    assert "verdict: REFUTED" in out.output
    out = CliRunner().invoke(main, args + ["--trials", "10"])
    assert out.exit_code == 2 and "exactly one of them" in out.output
