"""dpbench's release check (`dpbench.algorithms.release_check`): the steps a fit declared against its
ledger, each rule on hand-made tallies and ledgers (the runs through the runner: tests/run/test_release_check.py)."""

from __future__ import annotations

import dataclasses

import pytest

from dpbench.algorithms import release_check
from dpbench.algorithms.releases import Declared
from dpbench.core.ledger import Adjacency, Ledger


def ledger(claim="valid", adjacency=Adjacency.ADD_REMOVE, sensitivity=1.0, **details) -> Ledger:
    details = {"steps": 20, "noise_multiplier": 1.5, "sampling": {"kind": "poisson", "rate": 0.01}, **details}
    return Ledger(private=True, mechanism="m", claim=claim, target_epsilon=1.0, delta=1e-5,
                  epsilon_spent={"rdp": 0.9}, adjacency=adjacency, sensitivity=sensitivity,
                  details={k: v for k, v in details.items() if v is not None})


def step(noise_std=1.5, rate=0.01, clip_norm=1.0, weight=1.0, kind="gradient_sum") -> Declared:
    return Declared(kind, noise_std, rate, clip_norm, weight)


def statuses(steps, led) -> dict[str, str]:
    return {c.aspect: c.status for c in release_check.compare(steps, led)}


def test_the_honest_steps_are_consistent_and_say_what_was_compared():
    result = release_check.check({step(): 20}, ledger())
    assert result.status == "consistent" and result.problems == []
    assert result.text == "consistent: 20 steps, z 1.5, q 0.01, clip 1"
    assert release_check.mismatches({step(): 20}, ledger()) == []


def test_twice_the_steps_is_a_mismatch_naming_both_counts():
    assert release_check.mismatches({step(): 40}, ledger()) == ["40 noisy steps observed, the ledger says 20"]
    assert statuses({step(): 40}, ledger())["steps"] == "mismatch"


def test_the_noise_multiplier_is_noise_std_over_clip_and_twice_the_clip_under_replace_one():
    assert statuses({step(noise_std=0.75): 20}, ledger())["noise"] == "mismatch"  # half the noise
    replace = ledger(adjacency=Adjacency.REPLACE_ONE, sensitivity=2.0)
    assert statuses({step(noise_std=3.0): 20}, replace)["noise"] == "ok"  # z = 3 / (2 x 1)
    assert statuses({step(noise_std=1.5): 20}, replace)["noise"] == "mismatch"
    # PIDP-SGD: claimed replace-one, epsilon computed add/remove-one: the spent adjacency decides
    pidp = dataclasses.replace(ledger(sensitivity=None), adjacency=Adjacency.REPLACE_ONE,
                               spent_adjacency=Adjacency.ADD_REMOVE)
    assert statuses({step(): 20}, pidp)["noise"] == "ok"
    (problem,) = release_check.mismatches({step(noise_std=0.75): 20}, ledger())
    assert problem == "steps declare noise multiplier 0.75, the ledger 1.5"


def test_a_weighted_mean_declares_its_sum_noise_and_the_sensitivity_may_be_of_the_sum_or_the_statistic():
    """DP-GD releases the mean: noise std s n with weight 1/n, clip C; its ledger's sensitivity is the
    mean's 2C/n (replace-one) and z = s / (2C/n) = s n / (2C)."""
    n, C, s = 200, 0.5, 0.01
    gd = ledger(adjacency=Adjacency.REPLACE_ONE, sensitivity=2 * C / n, noise_multiplier=s / (2 * C / n),
                sampling={"kind": "full batch", "rate": 1.0})
    declared = {step(noise_std=s * n, rate=1.0, clip_norm=C, weight=1.0 / n): 20}
    assert release_check.check(declared, gd).status == "consistent"
    assert statuses({step(noise_std=s * n, rate=1.0, clip_norm=2 * C, weight=1.0 / n): 20}, gd)["clip"] == "mismatch"


def test_the_declared_rate_against_the_ledger_s():
    (problem,) = release_check.mismatches({step(rate=0.04): 20}, ledger())
    assert problem == "steps declare sampling rate 0.04, the ledger 0.01"
    assert statuses({step(rate=0.01 * (1 + 1e-12)): 20}, ledger())["rate"] == "ok"  # float round trips


def test_unclipped_gradient_sums_are_a_mismatch_where_the_ledger_rests_on_clipping():
    (problem,) = release_check.mismatches({step(clip_norm=None): 20}, ledger())
    assert problem == "20 steps not clipped (the ledger's sensitivity 1 rests on clipping)"
    assert statuses({step(clip_norm=None): 20}, ledger(sensitivity=None))["clip"] == "mismatch"  # z given
    # a non-private SGD: no sensitivity, no noise multiplier, steps without noise or clipping
    nonprivate = Ledger(private=False, mechanism="none", claim="none", details={"steps": 20})
    result = release_check.check({step(noise_std=0.0, clip_norm=None): 20}, nonprivate)
    assert result.status == "consistent" and statuses({step(noise_std=0.0, clip_norm=None): 20}, nonprivate) == {
        "steps": "ok", "noise": "not compared", "rate": "not compared", "clip": "not compared"}
    assert result.text == "consistent: 20 steps; not compared: noise multiplier, sampling rate, clip norm"
    assert statuses({step(clip_norm=2.0): 20}, ledger())["clip"] == "mismatch"  # sensitivity 1 from clip 2


def test_noise_free_steps_are_allowed_only_where_the_ledger_counts_them():
    mixed = {step(): 15, step(noise_std=0.0): 5}
    assert release_check.mismatches(mixed, ledger()) == [
        "5 of 20 steps without noise, the ledger's noise multiplier is 1.5"]
    assert release_check.check(mixed, ledger(noise_free_steps=5)).status == "consistent"
    assert release_check.check(mixed, ledger(noise_free_fraction=0.25)).status == "consistent"
    assert release_check.mismatches(mixed, ledger(noise_free_steps=2)) == ["5 steps without noise, the ledger says 2"]
    assert release_check.check(mixed, ledger(noise_free_steps=5)).text.startswith("consistent: 20 steps (5 noise-free)")


def test_noisy_statistics_have_no_clip_norm_and_their_multiplier_is_noise_over_sensitivity():
    """Robust GD: kind noisy_statistic, no clip norm; z = weight noise_std / sensitivity."""
    robust = ledger(adjacency=Adjacency.REPLACE_ONE, sensitivity=0.2, noise_multiplier=2.0 / 0.2,
                    sampling={"kind": "full batch", "rate": 1.0})
    declared = {step(noise_std=2.0, rate=1.0, clip_norm=None, kind="noisy_statistic"): 20}
    assert statuses(declared, robust) == {"steps": "ok", "noise": "ok", "rate": "ok", "clip": "not compared"}
    half = {step(noise_std=1.0, rate=1.0, clip_norm=None, kind="noisy_statistic"): 20}
    assert statuses(half, robust)["noise"] == "mismatch"
    # Bun-Steinke: a noise std per step, no noise multiplier or sensitivity in the ledger: steps only
    bs = Ledger(private=True, mechanism="m", claim="valid", details={"steps": 3})
    varying = {step(noise_std=v, rate=1.0, clip_norm=None, kind="noisy_statistic"): 1 for v in (0.3, 0.31, 0.32)}
    assert statuses(varying, bs) == {"steps": "ok", "noise": "not compared", "rate": "not compared",
                                     "clip": "not compared"}


def test_nothing_to_compare_is_not_checked_and_says_why():
    assert release_check.check({}, ledger()).text == "not checked: the algorithm reports no steps"
    bare = Ledger(private=True, mechanism="m", claim="valid")
    result = release_check.check({step(): 20}, bare)
    assert result.status == "not checked" and result.text.startswith("not checked: the ledger states no steps")
    assert [c.status for c in release_check.compare({}, ledger())] == ["mismatch"]  # verify: 0 of 20 steps


@pytest.mark.parametrize("claim", ["valid", "paper-only", "none"])
def test_a_mismatch_turns_only_a_valid_claim_paper_only_and_the_result_is_in_the_details(claim):
    checked = release_check.with_release_check(ledger(claim=claim), {step(): 40})
    assert checked.details["release_check"] == "mismatch: 40 noisy steps observed, the ledger says 20"
    assert checked.claim == ("paper-only" if claim != "none" else "none")
    if claim == "valid":
        assert checked.claim_reason == "dpbench's release check: 40 noisy steps observed, the ledger says 20"
    consistent = release_check.with_release_check(ledger(claim=claim), {step(): 20})
    assert consistent.claim == claim and consistent.details["release_check"].startswith("consistent: 20 steps")
    assert release_check.with_release_check(ledger(claim=claim), None) == ledger(claim=claim)


def test_the_memoised_check_tells_ledgers_apart_by_every_number_it_reads():
    """`check` remembers results by the steps and the ledger's numbers: a ledger that differs in any
    number compared gets its own result, the same numbers the same one."""
    declared = {step(): 20}
    assert release_check.check(declared, ledger()) is release_check.check(dict(declared), ledger())
    variants = [ledger(steps=21), ledger(noise_multiplier=3.0), ledger(sampling={"kind": "poisson", "rate": 0.02}),
                ledger(sensitivity=2.0), ledger(adjacency=Adjacency.REPLACE_ONE), ledger(noise_free_steps=3),
                ledger(noise_free_fraction=0.5)]
    assert release_check.check(declared, ledger()).status == "consistent"
    assert all(release_check.check(declared, v).status == "mismatch" for v in variants)
