"""The worst-case sensitivity game of `dpbench verify` (dpbench.audit.sensitivity): one record's
effect on the releases against the declared clip norm. Honest DP-SGD (the plugin of
examples/red_team/buggy_clipping.py, the built-in) is within it; clipping the batch's sum is not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpbench.audit import sensitivity
from dpbench.audit import verify as verify_mod
from dpbench.audit.setup import AuditSetup
from dpbench.run import plugins

PLUGIN = str(Path(__file__).resolve().parents[2] / "examples" / "red_team" / "buggy_clipping.py") + ":fit"


def _setup(clipping: str, **params) -> AuditSetup:
    reference = plugins.resolve(PLUGIN)
    name = plugins.load(reference).name
    return AuditSetup.create(name, plugin=reference, plugin_digest=plugins.fingerprint(reference),
                             params={"clipping": clipping, **params}, dataset="breast_cancer", epsilon=1.0,
                             delta=1e-5, canary="gradient_canary", trials=4)


def _finding(result, check: str):
    return next(f for f in result.findings if f.check == check)


def test_the_mirrored_game_puts_the_canary_against_a_batch_sum_of_about_one_clip_norm():
    from dpbench import models

    game = sensitivity.mirrored_game(models.make("logreg", 1), rows=64, clip_norm=0.5, batch=32, start=-0.2)
    model, theta = game.model, game.theta0
    mirrored = model.per_example_grads(theta, game.X, game.y)[:, 0]
    canary = model.per_example_grads(theta, game.canary_x[None, :], np.array([game.canary_y]))[0, 0]
    assert np.all(mirrored > 0) and canary < 0  # opposite directions along u
    assert 32 * mirrored[0] == pytest.approx(sensitivity.MIRRORED_SUM * 0.5, rel=1e-6)  # expected batch sum
    assert abs(canary) > 100 * 0.5  # clipped to exactly C by any per-example clipping


@pytest.mark.parametrize("clipping, status", [("per_example", "ok"), ("sum", "mismatch")])
def test_honest_clipping_passes_and_sum_clipping_is_caught(clipping, status, data_dir):
    result = verify_mod.verify(_setup(clipping), data_dir=str(data_dir))
    found = _finding(result, "sensitivity")
    assert found.status == status, found.detail
    ratio = float(found.detail.split("~")[1].split(" ")[0])
    if status == "ok":
        assert result.verdict == "consistent", result.verdict
        assert 0.6 < ratio < 1.4
    else:  # the other checks pass: only the game sees it
        assert result.verdict.startswith("mismatch: sensitivity: one record moves the releases by ~")
        assert {f.check for f in result.findings if f.status == "mismatch"} == {"sensitivity"}
        assert 1.6 < ratio < 2.6  # C + the mirrored sum (about C), against C


def test_the_builtin_dpsgd_is_within_its_clip_norm(data_dir):
    result = verify_mod.verify(AuditSetup.create("dpsgd", dataset="breast_cancer", epsilon=1.0, delta=1e-5,
                                                 canary="gradient_canary", trials=4), data_dir=str(data_dir))
    assert _finding(result, "sensitivity").status == "ok" and result.verdict == "consistent", result.verdict


def test_median_clipping_passes_at_verify_own_clip_norm(data_dir):
    """At C = 0.1 (the gradient canary's, by role) the batch's median gradient norm on Breast Cancer
    is above C: median clipping is DP-SGD there. `dpbench verify SPEC` runs at the spec's C = 1
    (tests/audit/test_verify_spec.py), where it is caught."""
    result = verify_mod.verify(_setup("median"), data_dir=str(data_dir), sensitivity=False)
    assert result.params["clip_norm"] == 0.1 and result.verdict == "consistent", result.verdict
    at_one = verify_mod.verify(_setup("median", clip_norm=1.0), data_dir=str(data_dir), sensitivity=False)
    assert _finding(at_one, "measured noise").status == "mismatch", at_one.verdict


def test_the_game_says_why_it_does_not_apply(data_dir):
    from dpbench import algorithms
    from dpbench.audit.trials import build_game

    ridge = AuditSetup.create("dpsgd", dataset="breast_cancer", model="ridge", epsilon=1.0, delta=1e-5,
                              canary="gradient_canary", trials=4)
    resolved, game = build_game(ridge, data_dir=str(data_dir))
    status, detail = sensitivity.check(algorithms.get("dpsgd"), game, dict(resolved.params), 1.0, 1e-5, 0,
                                       level=1e-3, factor=1.25)
    assert status == "skipped" and "not logreg" in detail
