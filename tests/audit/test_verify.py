"""`dpbench verify`: each deliberate bug of examples/red_team/buggy_dpsgd.py is caught by the check made
for it, the honest plugins (buggy_dpsgd.py without a bug, the DP-Adam of examples/my_algorithm) and
the built-in DP-SGD are consistent, and the exit codes say so."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dpbench.audit import verify as verify_mod
from dpbench.audit.setup import AuditSetup
from dpbench.cli.main import main
from dpbench.run import plugins

RED_TEAM = Path(__file__).resolve().parents[2] / "examples" / "red_team"
PLUGIN = str(RED_TEAM / "buggy_dpsgd.py") + ":fit"

#: bug -> the checks that must report a mismatch (every other check may pass)
CAUGHT_BY = {
    "ledger_eps": {"ledger"},
    "half_noise": {"measured noise"},
    "twice_steps": {"steps", "recomputed epsilon"},
    "wrong_rate": {"canary effect"},
    "no_clip": {"canary effect"},
    "mean_noise": {"measured noise"},
    "other_delta": {"ledger", "recomputed epsilon"},
    "lying_stream": {"iterates follow releases"},
    "reused_noise": {"serial dependence"},
    "shuffle": {"sampling scheme"},
    "hidden_steps": {"steps taken"},
    "zero_column": {"measured noise"},
    "rate_135": {"sampling scheme"},
}


def _setup(bug: str, **fields) -> AuditSetup:
    reference = plugins.resolve(PLUGIN)
    name = plugins.load(reference).name
    return AuditSetup.create(name, plugin=reference, plugin_digest=plugins.fingerprint(reference),
                             params={"bug": bug}, dataset="breast_cancer", epsilon=1.0, delta=1e-5,
                             canary="gradient_canary", trials=4, **fields)


@pytest.mark.parametrize("bug", sorted(CAUGHT_BY))
def test_each_bug_is_a_mismatch_of_the_check_made_for_it(bug, data_dir):
    result = verify_mod.verify(_setup(bug), data_dir=str(data_dir), sensitivity=False)  # no bug here needs its game
    failed = {f.check for f in result.findings if f.status == "mismatch"}
    assert CAUGHT_BY[bug] <= failed, (bug, [(f.check, f.status, f.detail) for f in result.findings])
    assert result.status == "mismatch" and result.exit_code == 1
    assert result.verdict.startswith("mismatch: ") and all(check in result.verdict for check in CAUGHT_BY[bug])


OWNED = str(RED_TEAM / "buggy_owned.py")
#: the plugins of buggy_owned.py -> the checks that must report a mismatch
OWNED_CAUGHT_BY = {"quiet": {"steps"}, "leak": {"records"}, "shifted": {"sampling scheme"}}


@pytest.mark.parametrize("plugin", sorted(OWNED_CAUGHT_BY))
def test_each_owned_loop_bug_is_a_mismatch_of_its_check(plugin, data_dir):
    reference = plugins.resolve(f"{OWNED}:{plugin}")
    setup = AuditSetup.create(plugins.load(reference).name, plugin=reference, plugin_digest=plugins.fingerprint(reference),
                              dataset="breast_cancer", epsilon=1.0, delta=1e-5, canary="gradient_canary", trials=4)
    result = verify_mod.verify(setup, data_dir=str(data_dir), sensitivity=False)
    failed = {f.check for f in result.findings if f.status == "mismatch"}
    assert OWNED_CAUGHT_BY[plugin] <= failed, (plugin, [(f.check, f.status, f.detail) for f in result.findings])
    assert result.exit_code == 1


def test_the_honest_plugin_passes_every_check_with_the_clip_norm_its_role_recommends(data_dir):
    result = verify_mod.verify(_setup("honest"), data_dir=str(data_dir))
    assert result.params["clip_norm"] == 0.1  # gradient_canary recommends it for the role clip_norm
    statuses = {f.check: f.status for f in result.findings}
    assert statuses == {"ledger": "ok", "steps": "ok", "declared noise": "ok", "recomputed epsilon": "ok",
                        "measured noise": "ok", "canary effect": "ok", "iterates follow releases": "ok",
                        "steps taken": "ok", "sampling scheme": "ok", "serial dependence": "ok", "records": "ok",
                        "sensitivity": "ok"}
    assert result.verdict == "consistent" and result.exit_code == 0


def test_the_ledger_check_recomputes_epsilon_and_refuses_infinity():
    from dpbench.core.ledger import Ledger
    from dpbench.privacy import accounting, events

    def ledger(z=1.1, steps=100, rate=0.01, **overrides):
        base = dict(private=True, mechanism="m", claim="valid", target_epsilon=1.0, delta=1e-5,
                    epsilon_spent={"rdp": 0.9}, event=events.dpsgd_event_json(z, rate, steps),
                    details={"noise_multiplier": z, "steps": steps, "sampling": {"kind": "poisson", "rate": rate}})
        base.update(overrides)
        return Ledger(**base)

    def status(l) -> tuple[str, str]:
        out = verify_mod.Verification("x")
        verify_mod.check_ledger(l, 1.0, 1e-5, out)
        return out.findings[0].status, out.findings[0].detail

    expected = min(accounting.dpsgd_epsilon_report(1.1, 0.01, 100, 1e-5).values())
    ok, detail = status(ledger())
    assert (ok == "ok") == (expected <= 1.01) and f"{expected:.4g}" in detail
    assert status(ledger(epsilon_spent={"rdp": 0.5, "pld": float("inf")}))[0] == "mismatch"
    assert status(ledger(delta=1e-3))[0] == "mismatch"
    assert status(ledger(epsilon_spent={"rdp": 1.2}))[0] == "mismatch"
    # a noise multiplier too small for the target: the ledger's own spent epsilon is not believed
    assert status(ledger(z=0.5, steps=1000, rate=0.05))[0] == "mismatch"
    # numbers that say one thing and an event that says another
    assert "its DpEvent has steps 400" in status(ledger(event=events.dpsgd_event_json(1.1, 0.01, 400)))[1]
    assert "neither its mechanism" in status(ledger(event=None))[1]
    assert status(ledger(claim="paper-only"))[0] == "skipped"


def test_cli_exit_codes_and_the_builtin_dpsgd(data_dir, tmp_path):
    runner = CliRunner()
    base = ["verify", "--data", str(data_dir), "--results", str(tmp_path), "--no-progress", "--trials", "0"]
    out = runner.invoke(main, base + ["dpsgd"])
    assert out.exit_code == 0, out.output
    assert "verdict: consistent" in out.output and "clip_norm=0.1" in out.output
    out = runner.invoke(main, base + [PLUGIN, "--param", "bug=no_clip"])
    assert out.exit_code == 1 and "verdict: mismatch: canary effect" in out.output, out.output
    out = runner.invoke(main, base + ["dpsgd", "--model", "mlp"])
    assert out.exit_code == 2 and "verify a linear model" in out.output, out.output


def test_the_audit_flags_half_the_noise_as_suspect(data_dir, tmp_path):
    result = verify_mod.verify(_setup("half_noise"), data_dir=str(data_dir), trials=300, results=tmp_path,
                               sensitivity=False)
    audit = next(f for f in result.findings if f.check == "audit")
    assert audit.status == "suspect" and "all_updates" in audit.detail, audit.detail


def test_dp_adam_built_from_the_public_sgd_blocks_reports_its_steps_and_is_consistent(data_dir):
    """The shipped plugin example (DP-Adam on the privatiser path: noisy_sgd's transform=) passes every check."""
    reference = plugins.resolve(str(Path(__file__).parents[2] / "examples" / "my_algorithm" / "my_method.py")
                                + ":fit_dpadam")
    name = plugins.load(reference).name
    setup = AuditSetup.create(name, plugin=reference, plugin_digest=plugins.fingerprint(reference),
                              dataset="breast_cancer", epsilon=1.0, delta=1e-5, canary="gradient_canary", trials=4)
    result = verify_mod.verify(setup, data_dir=str(data_dir), sensitivity=False)
    statuses = {f.check: f.status for f in result.findings}
    assert statuses["steps"] == statuses["measured noise"] == statuses["iterates follow releases"] == "ok"
    assert result.params["clip_norm"] == 0.1  # the gradient canary's clip norm, set through role="clip_norm"
    assert result.verdict == "consistent", result.verdict


def test_power_counts_the_verifications_that_find_a_mismatch(data_dir):
    from dpbench.audit.verify_power import power

    caught = power(PLUGIN, params={"bug": "shuffle"}, reps=2, data_dir=str(data_dir), sensitivity=False)
    assert caught.detections == caught.reps == 2 and caught.by_check == {"sampling scheme": 2}
    honest = power(PLUGIN, params={"bug": "honest"}, reps=1, data_dir=str(data_dir), sensitivity=False)
    assert (honest.detections, honest.reps, honest.by_check) == (0, 1, {})
