"""dpbench.privacy.one_run: the statistics of Steinke, Nasr, Jagielski (NeurIPS 2023) one-run auditing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, special, stats

from dpbench.privacy import one_run as O

ALPHA = 0.05


def _independent_delta_zero(v: int, r: int, alpha: float) -> float:
    """Solve P[Binomial(r, expit(eps)) >= v] = alpha with brentq on binom.sf (0 if eps = 0 passes)."""
    tail = lambda e: stats.binom.sf(v - 1, r, special.expit(e)) - alpha  # noqa: E731
    if tail(0.0) > 0:
        return 0.0
    return optimize.brentq(tail, 0.0, 40.0, xtol=1e-13, rtol=1e-13)


@pytest.mark.parametrize("v, r", [(60, 100), (75, 100), (100, 100), (450, 500), (880, 1000), (5, 5), (58, 100)])
def test_delta_zero_equals_binomial_inversion(v, r):
    got = O.one_run_epsilon_lower_bound(v, r, 1000, 0.0, ALPHA)
    assert got == pytest.approx(_independent_delta_zero(v, r, ALPHA), abs=1e-9)
    # the returned eps is itself rejected (conservative side of the root)
    if got > 0:
        assert stats.binom.sf(v - 1, r, special.expit(got)) <= ALPHA


def test_nothing_refuted_gives_zero():
    assert O.one_run_epsilon_lower_bound(50, 100, 1000, 0.0, ALPHA) == 0.0  # chance level
    assert O.one_run_epsilon_lower_bound(0, 100, 1000, 1e-5, ALPHA) == 0.0
    assert O.one_run_epsilon_lower_bound(0, 0, 1000, 0.0, ALPHA) == 0.0  # no guesses
    assert O.one_run_epsilon_lower_bound(3, 3, 10, 0.0, ALPHA) == 0.0  # 0.5^3 > 0.05


def test_published_values():
    """Values printed in arXiv 2305.08846v1 (App. D example: m=1000, r=100, v=75, delta=1e-4 -> 0.673;
    Sec. 7: m=1e5, r=1510, v=1439, delta=1e-5 -> 2.675). The second has 2 m delta = 2 > 1 (grid branch)."""
    assert O.one_run_epsilon_lower_bound(75, 100, 1000, 1e-4, 0.05) == pytest.approx(0.673, abs=1e-3)
    assert O.one_run_epsilon_lower_bound(1439, 1510, 100_000, 1e-5, 0.05) == pytest.approx(2.6755, abs=1e-3)


def test_p_value_is_alpha_at_the_bound_and_delta_term_by_hand():
    v, r, m, d = 80, 100, 1000, 1e-4
    eps = O.one_run_epsilon_lower_bound(v, r, m, d, ALPHA)
    assert O.one_run_p_value(v, r, m, eps, d) == pytest.approx(ALPHA, rel=1e-9)
    assert O.one_run_p_value(v, r, m, eps + 1e-6, d) > ALPHA
    # the delta term, written out: max_i P[v - i <= B <= v - 1] / i
    q = special.expit(0.7)
    term = max(sum(stats.binom.pmf(v - j, r, q) for j in range(1, i + 1)) / i for i in range(1, v + 1))
    want = stats.binom.sf(v - 1, r, q) + 2 * m * d * term
    assert O.one_run_p_value(v, r, m, 0.7, d) == pytest.approx(want, rel=1e-10)
    assert O.one_run_p_value(v, r, m, 0.7, 0.0) == pytest.approx(stats.binom.sf(v - 1, r, q), rel=1e-12)


def test_monotone_in_correct_and_delta_and_ceiling():
    r, m = 100, 1000
    for d in (0.0, 1e-5, 1e-3):
        bounds = [O.one_run_epsilon_lower_bound(v, r, m, d, ALPHA) for v in range(r + 1)]
        assert all(b1 >= b0 for b0, b1 in zip(bounds, bounds[1:]))
        pos = [b for b in bounds if b > 0]
        assert all(b1 > b0 for b0, b1 in zip(pos, pos[1:]))
        assert bounds[-1] == O.one_run_ceiling(r, m, d, ALPHA)
    for v in (65, 80, 95, 100):
        by_delta = [O.one_run_epsilon_lower_bound(v, r, m, d, ALPHA) for d in (0.0, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)]
        assert all(b1 <= b0 for b0, b1 in zip(by_delta, by_delta[1:]))
    # delta = 0 ceiling in closed form: logit(alpha^(1/r))
    assert O.one_run_ceiling(1000, 1000, 0.0, ALPHA) == pytest.approx(special.logit(ALPHA ** (1 / 1000)), abs=1e-9)


def test_guesses_extremes_and_ties():
    s = np.array([0.5, 2.0, -1.0, 2.0, 0.0, -1.0, 3.0])
    g = O.guesses(s, 2, 2)
    # ranking (score, index): 2(-1), 5(-1), 4(0), 0(.5), 1(2), 3(2), 6(3): top two are 3 and 6
    assert g.tolist() == [0, 0, -1, 1, 0, -1, 1]
    assert O.guesses(s, 0, 0).tolist() == [0] * 7
    assert O.guesses(s, 7, 0).tolist() == [1] * 7
    flat = O.guesses(np.zeros(5), 1, 1)  # all tied: larger index ranks higher
    assert flat.tolist() == [-1, 0, 0, 0, 1]
    with pytest.raises(ValueError, match="exceeds the number of canaries"):
        O.guesses(s, 4, 4)
    with pytest.raises(ValueError, match="NaN"):
        O.guesses(np.array([0.0, np.nan]), 1, 0)


def test_audit_counts_default_k_and_grid():
    rng = np.random.default_rng(1)
    m = 1000
    inc = rng.random(m) < 0.5
    scores = inc + rng.normal(0, 0.5, m)
    res = O.one_run_audit(scores, inc, 1e-5)
    assert (res.k_pos, res.k_neg, res.r, res.m) == (50, 50, 100, m)
    g = O.guesses(scores, 50, 50)
    assert res.correct == int(np.sum((g == 1) & inc) + np.sum((g == -1) & ~inc))
    assert res.epsilon_lower == O.one_run_epsilon_lower_bound(res.correct, 100, m, 1e-5, ALPHA)
    assert res.alpha == ALPHA and res.delta == 1e-5 and res.n_tests == 1
    ks = [(25, 25), (50, 50), (100, 100)]
    grid = O.one_run_audit_grid(scores, inc, 1e-5, ALPHA, ks)
    assert grid.n_tests == 3 and grid.alpha_per_test == pytest.approx(ALPHA / 3) and grid.alpha == ALPHA
    each = [O.one_run_audit(scores, inc, 1e-5, ALPHA / 3, kp, kn).epsilon_lower for kp, kn in ks]
    assert grid.epsilon_lower == max(each)
    assert O.default_k(7) == (1, 0) and O.default_k(1000) == (50, 50) and O.default_k(30) == (2, 1)


def _randomized_response_audit(eps, m, rng, delta=0.0):
    """An exactly eps-DP mechanism per canary: each inclusion bit released through randomized response."""
    inc = rng.random(m) < 0.5
    keep = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))  # flip with probability 1/(1+e^eps)
    out = np.where(keep, inc, ~inc)
    return O.one_run_audit(out.astype(float), inc, delta, ALPHA)


@pytest.mark.parametrize("eps, delta", [(2.0, 0.0), (1.0, 1e-5)])
def test_validity_and_power_by_simulation(eps, delta):
    rng = np.random.default_rng(20230516)
    reps = 200
    bounds = np.array([_randomized_response_audit(eps, 1000, rng, delta).epsilon_lower for _ in range(reps)])
    # P[bound > eps] <= alpha; 20 is above the 99.9th percentile of Binomial(200, 0.05)
    assert np.sum(bounds > eps) <= 20
    if eps == 2.0:
        assert bounds.mean() > 1.0  # the audit has power (r = 100 guesses, accuracy 0.88)


@pytest.mark.parametrize(
    "args, match",
    [
        ((11, 10, 100, 0.0, 0.05), "correct .* cannot exceed guesses"),
        ((5, 101, 100, 0.0, 0.05), "guesses .* cannot exceed canaries"),
        ((5, 10, 100, 0.0, 0.0), "alpha must be in"),
        ((5, 10, 100, 0.0, 1.0), "alpha must be in"),
        ((5, 10, 100, -1e-9, 0.05), "delta must be in"),
        ((5, 10, 100, 1.0, 0.05), "delta must be in"),
        ((-1, 10, 100, 0.0, 0.05), "correct must be >= 0"),
        ((2.5, 10, 100, 0.0, 0.05), "correct must be an integer"),
    ],
)
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        O.one_run_epsilon_lower_bound(*args)


def test_bad_input_audit_and_ceiling():
    with pytest.raises(ValueError, match="guesses .* cannot exceed canaries"):
        O.one_run_ceiling(11, 10, 0.0, 0.05)
    with pytest.raises(ValueError, match="one bit per canary"):
        O.one_run_audit(np.zeros(5), np.zeros(4, dtype=bool), 0.0)
    with pytest.raises(ValueError, match="boolean"):
        O.one_run_audit(np.zeros(3), np.array([0, 2, 1]), 0.0)
    with pytest.raises(ValueError, match="delta must be in"):
        O.one_run_audit(np.zeros(3), np.zeros(3, dtype=bool), 1.5)
    with pytest.raises(ValueError, match="ks is empty"):
        O.one_run_audit_grid(np.zeros(3), np.zeros(3, dtype=bool), 0.0, 0.05, [])
