"""dpbench.privacy.audit_bounds: Clopper-Pearson, the epsilon bound, its ceiling, the held-out threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbench.privacy import audit_bounds as B

DELTA = 1e-5


def test_clopper_pearson_matches_scipy_beta_and_closed_forms():
    for k, n, a in [(0, 10, 0.025), (3, 50, 0.025), (17, 100, 0.05), (99, 100, 0.01)]:
        assert B.clopper_pearson_upper(k, n, a) == pytest.approx(stats.beta.ppf(1 - a, k + 1, n - k), rel=1e-12)
    assert B.clopper_pearson_upper(7, 7, 0.025) == 1.0
    # zero successes: U = 1 - a^(1/n), ~3.7e-3 for n = 1000 at a = 0.025
    assert B.clopper_pearson_upper(0, 1000, 0.025) == pytest.approx(1 - 0.025 ** (1 / 1000), rel=1e-12)
    assert B.clopper_pearson_upper(0, 1000, 0.025) == pytest.approx(3.682e-3, abs=2e-6)
    got = B.clopper_pearson_upper(np.array([0, 3, 50]), 50, 0.025)  # vectorised, k = n included
    assert got.shape == (3,) and got[2] == 1.0 and got[1] == pytest.approx(stats.beta.ppf(0.975, 4, 47))
    with pytest.raises(ValueError):
        B.clopper_pearson_upper(5, 4, 0.05)


def test_clopper_pearson_covers_the_true_rate():
    """One-sided coverage >= 1 - a (exact test): the bound is below p in at most a of the draws."""
    rng = np.random.default_rng(0)
    for p, n in [(0.02, 100), (0.3, 40)]:
        k = rng.binomial(n, p, size=20000)
        miss = np.mean(B.clopper_pearson_upper(k, n, 0.05) < p)
        assert miss <= 0.05 + 0.006


def test_epsilon_lower_bound_by_hand_and_ceiling():
    fp, n0, fn, n1 = 5, 1000, 100, 1000
    u_fpr = stats.beta.ppf(0.975, fp + 1, n0 - fp)
    u_fnr = stats.beta.ppf(0.975, fn + 1, n1 - fn)
    expected = max(math.log((1 - DELTA - u_fnr) / u_fpr), math.log((1 - DELTA - u_fpr) / u_fnr))
    assert B.epsilon_lower_bound(fp, n0, fn, n1, DELTA) == pytest.approx(expected, rel=1e-12)
    # the bound is symmetric in the two error types and 0 when the test is a coin flip
    assert B.epsilon_lower_bound(fn, n1, fp, n0, DELTA) == pytest.approx(expected, rel=1e-12)
    assert B.epsilon_lower_bound(500, 1000, 500, 1000, DELTA) == 0.0
    assert B.epsilon_lower_bound(1000, 1000, 1000, 1000, DELTA) == 0.0  # numerators <= 0: nothing refuted
    # zero errors: the ceiling ~ ln(N / 3.69) at alpha = 0.05 (docs/audits.md)
    for n, approx in [(1000, 5.6), (10_000, 7.9)]:
        ceiling = B.audit_ceiling(n, DELTA)
        assert ceiling == pytest.approx(B.epsilon_lower_bound(0, n, 0, n, DELTA))
        assert ceiling == pytest.approx(math.log(n / 3.69), abs=0.01) and ceiling == pytest.approx(approx, abs=0.05)
    # more confidence, a lower bound; more errors, a lower bound
    assert B.epsilon_lower_bound(5, 1000, 100, 1000, DELTA, alpha=0.01) < expected
    assert B.epsilon_lower_bound(10, 1000, 100, 1000, DELTA) < expected
    vec = B.epsilon_lower_bound(np.array([0, 5, 500]), 1000, np.array([0, 100, 500]), 1000, DELTA)
    assert vec.shape == (3,) and vec[1] == pytest.approx(expected) and vec[2] == 0.0


def test_threshold_is_chosen_on_the_selection_half_only():
    """The evaluation half's own best threshold differs from the selection half's; only the latter is used."""
    sel0, sel1 = np.arange(0.0, 50.0), np.arange(100.0, 150.0)  # selection: separated between 49 and 100
    ev0 = np.concatenate([np.arange(0.0, 49.0), [120.0]])  # evaluation: one D0 run far above ...
    ev1 = np.concatenate([[10.0], np.arange(130.0, 179.0)])  # ... and one D1 run far below
    chosen = B.choose_threshold(sel0, sel1, DELTA)
    assert chosen.direction == 1 and 49.0 < chosen.threshold < 100.0
    outcome = B.audit_scores(np.concatenate([sel0, ev0]), np.concatenate([sel1, ev1]), DELTA)
    assert outcome.chosen == chosen  # the evaluation half did not move the choice
    ev = outcome.evaluation
    assert (ev.false_positives, ev.false_negatives, ev.n0, ev.n1) == (1, 1, 50, 50)
    assert ev.epsilon_lower_bound == pytest.approx(B.epsilon_lower_bound(1, 50, 1, 50, DELTA))
    # maximising over thresholds on the evaluation runs themselves (the mistake to avoid) would
    # pick t in (120, 130) with one false negative and no false positive and claim more
    optimistic = B.choose_threshold(ev0, ev1, DELTA)
    assert 120.0 < optimistic.threshold < 130.0
    assert optimistic.selection_bound > ev.epsilon_lower_bound
    # and the choice is a function of the selection half alone
    shuffled = B.audit_scores(np.concatenate([sel0, ev0[::-1] * 0.5]), np.concatenate([sel1, ev1 + 7]), DELTA)
    assert shuffled.chosen == chosen


def test_direction_and_nan_scores():
    rng = np.random.default_rng(1)
    s0, s1 = rng.normal(0, 1, 400), rng.normal(-4, 1, 400)  # D1 scores are LOW
    low = B.audit_scores(s0, s1, DELTA)
    high = B.audit_scores(-s0, -s1, DELTA)
    assert low.chosen.direction == -1 and high.chosen.direction == 1
    assert low.evaluation.epsilon_lower_bound == pytest.approx(high.evaluation.epsilon_lower_bound)
    assert low.evaluation.epsilon_lower_bound > 1.0
    s0n = s0.copy()
    s0n[:5] = np.nan  # diverged fits count as -inf, on both sides alike
    assert B.audit_scores(s0n, s1, DELTA).evaluation.n0 == 200
    with pytest.raises(ValueError, match="at least 2 runs"):
        B.audit_scores([1.0], [2.0], DELTA)


def test_identical_scores_refute_nothing():
    out = B.audit_scores(np.zeros(100), np.zeros(100), DELTA)
    assert out.evaluation.epsilon_lower_bound == 0.0


def test_scalar_gaussian_audits_below_and_close_to_its_epsilon():
    """Harness sanity (docs/audits.md, What a bound means): a tight (1, 1e-5)-DP Gaussian mechanism, 4e5 runs a side."""
    out = B.audit_scalar_gaussian(1.0, DELTA, 400_000, np.random.default_rng(0))
    assert 0.3 < out.evaluation.epsilon_lower_bound <= 1.0
    # soundness across seeds and budgets at smaller N (the bound never passes the true epsilon here)
    for seed in range(3):
        for eps in (0.5, 2.0):
            bound = B.audit_scalar_gaussian(eps, DELTA, 50_000, np.random.default_rng(10 + seed))
            assert bound.evaluation.epsilon_lower_bound <= eps
