"""dpbench.audit.multi_run: the distinguishing game end to end (small scale, real fits) and `dpbench audit`."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from dpbench.cli.main import main
from dpbench.privacy import audit_bounds as B

DELTA = 1e-5


def _run(setup, tmp_path, data_dir=None, **kw):
    from dpbench.audit import multi_run
    return multi_run.run_audit(setup, data_dir=data_dir, results=tmp_path / "results", backend="sequential",
                       progress=False, **kw)


# ---- harness sanity ---------------------------------------------------------------------------
def test_nonprivate_hits_the_ceiling_and_a_rerun_reuses_every_chunk(tmp_path, data_dir):
    from dpbench.audit import setup as setup_mod
    setup = setup_mod.AuditSetup.create("nonprivate", dataset="breast_cancer", rows=200, trials=60, label="exact ERM",
                                epsilon=None)
    first = _run(setup, tmp_path, data_dir)
    assert first.claimed_epsilon is None and first.claim == "none" and first.broken is None
    assert first.adjacency == "add/remove-one" and first.rows == 200
    assert np.all(first.scores0 == 0.0) and np.all(first.scores1 > 0.01)  # spare coordinate: 0 without the canary
    assert (first.fpr, first.fnr) == (0.0, 0.0)
    assert first.epsilon_lower_bound == pytest.approx(first.ceiling)
    assert first.ceiling == pytest.approx(B.audit_ceiling(30, DELTA)) and first.n_evaluation == 30
    assert first.reused == 0 and first.chunks == 4  # 2 chunks of <= 50 a side

    second = _run(setup, tmp_path, data_dir)
    assert second.reused == second.chunks == 4
    assert second.epsilon_lower_bound == first.epsilon_lower_bound and second.threshold == first.threshold
    np.testing.assert_array_equal(second.scores1, first.scores1)

    more = _run(setup_mod.AuditSetup.create("nonprivate", dataset="breast_cancer", rows=200, trials=100), tmp_path, data_dir)
    assert more.reused == 2  # the first full chunk of each side is shared with the 60-trial audit
    np.testing.assert_array_equal(more.scores1[:50], first.scores1[:50])

    row = first.row()
    for name in ("label", "algorithm", "dataset", "model", "claimed_epsilon", "epsilon_lower_bound", "ceiling",
                 "claim", "trials", "seconds", "broken"):
        assert name in row
    assert row["label"] == "exact ERM" and row["trials"] == 60


def test_chunks_are_chunking_invariant(tmp_path, data_dir):
    """A trial's fit depends on (game, side, trial) only, not on which chunk runs it."""
    from dpbench.audit import setup as setup_mod
    from dpbench.audit import trials
    setup = setup_mod.AuditSetup.create("dpsgd", dataset="breast_cancer", rows=100, trials=8, epsilon=1.0,
                                params={"epochs": 2, "batch_size": 32})
    resolved = setup_mod.check_setup(setup)
    context = trials.AuditContext(data_dir=str(data_dir))
    whole = trials.run_chunk(trials.AuditChunk(setup, resolved.game_key, 1, 0, 4, "add/remove-one"), context)
    part = trials.run_chunk(trials.AuditChunk(setup, resolved.game_key, 1, 2, 2, "add/remove-one"), context)
    # dpsgd's chunks are vectorised fits: the same draws, sums in another order for another R
    np.testing.assert_allclose(part["scores"], whole["scores"][2:], rtol=1e-10, atol=1e-14)
    assert whole["n_rows"] == 101
    assert whole["claim"] == "valid" and whole["target_epsilon"] == 1.0


# ---- DP-SGD: calibrated vs. broken -----------------------------------------------------------
DPSGD = dict(dataset="breast_cancer", rows=300, params={"epochs": 5, "batch_size": 64})


@pytest.mark.parametrize("epsilon", [1.0, 3.0])
def test_calibrated_dpsgd_is_never_refuted(tmp_path, data_dir, epsilon):
    from dpbench.audit import setup as setup_mod
    result = _run(setup_mod.AuditSetup.create("dpsgd", epsilon=epsilon, trials=300, **DPSGD), tmp_path, data_dir)
    assert result.claim == "valid" and result.claimed_epsilon == epsilon and result.adjacency == "add/remove-one"
    assert result.epsilon_lower_bound <= epsilon and result.broken is False
    assert result.ceiling > epsilon  # the audit could have refuted it


def test_zero_noise_dpsgd_is_caught(tmp_path, data_dir, monkeypatch):
    """A deliberately broken DP-SGD (noise 0, same claim) is refuted at 95% confidence."""
    from dpbench.algorithms import dpsgd
    from dpbench.audit import setup as setup_mod

    monkeypatch.setattr(dpsgd, "dpsgd_noise_multiplier", lambda *args, **kwargs: 0.0)
    monkeypatch.setattr(dpsgd, "dpsgd_epsilon_report", lambda z, q, steps, delta: {"rdp": 0.0, "pld": 0.0})
    result = _run(setup_mod.AuditSetup.create("dpsgd", epsilon=1.0, trials=200, **DPSGD), tmp_path, data_dir)
    # it still claims epsilon = 1; dpbench's own check turns that "valid" paper-only (its stated event has
    # noise multiplier 0, whose recomputed epsilon is infinite), and the audit refutes the claim
    assert result.claim == "paper-only" and result.claimed_epsilon == 1.0
    assert np.all(result.scores0 == 0.0)  # without noise nothing ever moves the spare coordinate
    assert result.confidence == 0.95
    assert result.epsilon_lower_bound > 2.5 > result.claimed_epsilon and result.broken is True


# ---- the unsound claims: the constructions of docs/methods/pidp.md and input-perturbation.md ----
def test_pidp_constant_scenario_separates_perfectly(tmp_path):
    from dpbench.audit import setup as setup_mod
    result = _run(setup_mod.AuditSetup.create("pidp_sgd", canary="pidp_constant", epsilon=1.0, trials=200), tmp_path)
    assert result.params == {"lr": 0.1, "radius": 1e8, "rounds": 1, "steps": 2000, "zeta": 0.01}
    assert result.model_options == {"l2": 0.01}
    assert result.claim == "paper-only" and result.adjacency == "replace-one" and result.rows == 200
    assert result.scores0.max() < 1e-8  # D0: every run stays at theta~
    assert result.scores1.min() > 1e-3  # D1: the canary was sampled and moved theta_2
    assert result.epsilon_lower_bound == pytest.approx(result.ceiling) and result.ceiling > 3.2
    assert result.broken is True


def test_input_perturbation_shared_noise_with_intercept_separates_perfectly(tmp_path):
    """Construction a of docs/methods/input-perturbation.md: converged GD, shared z absorbed by the
    intercept: the weights are deterministic."""
    from dpbench.audit import setup as setup_mod
    result = _run(setup_mod.AuditSetup.create("input_perturbation", canary="input_shared_intercept", epsilon=1.0,
                                      trials=200), tmp_path)
    assert result.params == {"epochs": 300, "lr": 4.0, "noise": "shared", "theorem": "pl"}
    assert result.claim == "paper-only" and result.adjacency == "replace-one"
    assert np.ptp(result.scores0) < 1e-6 and np.ptp(result.scores1) < 1e-6  # deterministic up to the solver
    assert result.scores1.min() - result.scores0.max() > 1e-2
    assert result.epsilon_lower_bound == pytest.approx(result.ceiling) and result.broken is True


def test_input_perturbation_per_example_noise_is_refuted(tmp_path, data_dir):
    """Construction b of docs/methods/input-perturbation.md: the spare-feature canary against per-example
    noise (one GD step, [S3] eq. (12))."""
    from dpbench.audit import setup as setup_mod
    setup = setup_mod.AuditSetup.create("input_perturbation", canary="input_per_example", dataset="adult", epsilon=0.25,
                                trials=200)
    result = _run(setup, tmp_path, data_dir)
    assert result.params == {"epochs": 1, "noise": "per_example", "theorem": "pl"} and result.rows == 1000
    assert result.epsilon_lower_bound > 1.0 > result.claimed_epsilon and result.broken is True


# ---- plumbing -----------------------------------------------------------------------------------
def test_adjacency_and_neighbours():
    # stored adjacencies, typed and as free text (the form stored PIDP-SGD records carry)
    from dpbench.audit import setup as setup_mod
    from dpbench.audit import trials
    assert trials.claimed_adjacency("paper: replace-one; epsilon_spent: add/remove-one") == "replace-one"
    assert trials.claimed_adjacency("replace-one") == "replace-one"
    assert trials.claimed_adjacency("add/remove-one") == "add/remove-one"
    assert trials.claimed_adjacency(None) == "add/remove-one"
    with pytest.raises(ValueError, match="unknown adjacency"):
        trials.claimed_adjacency("swap-two")
    _, game = trials.build_game(setup_mod.AuditSetup.create("pidp_sgd", canary="pidp_constant", rows=10))
    X0, y0, X1, y1 = game.neighbours("replace-one")
    assert X0.shape == X1.shape == (10, 5) and np.array_equal(X1[-1], [0, 1, 0, 0, 0])
    assert np.array_equal(X1[:-1], X0[:-1])
    X0, y0, X1, y1 = game.neighbours("add/remove-one")
    assert X1.shape == (11, 5) and y1[-1] == 1.0
    assert np.allclose(game.model.init(None), game.theta0)  # fits start at theta~


@pytest.mark.parametrize("fields, message", [
    (dict(algorithm="nope", dataset="adult"), "algorithm: unknown algorithm"),
    (dict(algorithm="dpsgd", dataset="adult", canary="nope"), "canary: unknown canary recipe"),
    (dict(algorithm="dpsgd"), "dataset: canary 'spare_feature' takes its base rows"),
    (dict(algorithm="pidp_sgd", canary="pidp_constant", dataset="adult"), "builds its own data"),
    (dict(algorithm="dpsgd", dataset="adult", params=(("nope", 1),)), "params.nope: unknown parameter"),
    (dict(algorithm="dpsgd", dataset="adult", params=(("lr", -1),)), "params.lr: must be > 0"),
    (dict(algorithm="dpsgd", dataset="adult", trials=3), "trials: must be an integer >= 4"),
    (dict(algorithm="dpsgd", dataset="adult", epsilon=None), "epsilon: dpsgd is private"),
])
def test_bad_setups_are_one_line_errors(fields, message):
    from dpbench.audit import setup as setup_mod
    with pytest.raises(setup_mod.AuditError, match=message):
        setup_mod.check_setup(setup_mod.AuditSetup(**fields))


def test_cli_audit_prints_the_numbers(tmp_path, data_dir):
    args = ["audit", "--algorithm", "dpsgd", "--dataset", "breast_cancer", "--rows", "200", "--eps", "1",
            "--trials", "40", "--param", "epochs=2", "--param", "batch_size=32", "--results", str(tmp_path),
            "--data", str(data_dir), "--backend", "sequential", "--no-progress"]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    assert "claimed epsilon: 1 at delta = 1e-05 (claim: valid)" in out.output
    assert "audited lower bound: epsilon >= " in out.output and "at 95% confidence" in out.output
    assert f"ceiling {B.audit_ceiling(20, DELTA):.3f} for 20 evaluation runs a side" in out.output
    assert "trials: 40 per side" in out.output and "wall time:" in out.output

    bad = CliRunner().invoke(main, ["audit", "--algorithm", "nope", "--dataset", "adult", "--eps", "1",
                                    "--trials", "10", "--results", str(tmp_path)])
    assert bad.exit_code == 2
    assert bad.output.strip().count("\n") == 0 and bad.output.startswith("error: algorithm: unknown algorithm")
    bad = CliRunner().invoke(main, ["audit", "--algorithm", "dpsgd", "--dataset", "adult", "--eps", "1",
                                    "--trials", "10", "--param", "lr", "--results", str(tmp_path)])
    assert bad.exit_code == 2 and "--param: expected NAME=VALUE" in bad.output
