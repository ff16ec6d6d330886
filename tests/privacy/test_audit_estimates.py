"""The maths beside the rigorous audit bound: per-step likelihood ratios, the Gaussian-fit test,
the Gaussian-DP estimate and the measured-mechanism estimate (dpbench.privacy.audit_estimates),
each against an independent computation or a simulation with a known answer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbench.privacy import accounting, audit_bounds
from dpbench.privacy.audit_estimates import (
    NOISELESS_LLR,
    STEP_SUMS,
    gdp_estimate,
    mechanism_estimate,
    step_log_likelihood_ratio,
)


@pytest.mark.parametrize("rate", [1.0, 0.3, 0.01])
@pytest.mark.parametrize("a0", [0.0, -0.7])
def test_step_llr_is_the_log_ratio_of_the_two_mixture_densities(rate, a0):
    z = np.linspace(-4.0, 5.0, 37)
    a1, s = 1.3, 0.9
    p1 = (1 - rate) * stats.norm.pdf(z, 0.0, s) + rate * stats.norm.pdf(z, a1, s)
    p0 = (1 - rate) * stats.norm.pdf(z, 0.0, s) + rate * stats.norm.pdf(z, a0, s)
    np.testing.assert_allclose(step_log_likelihood_ratio(z, a0, a1, s, rate), np.log(p1 / p0), rtol=1e-10, atol=1e-12)


def test_noiseless_steps_are_decided_outright():
    llr = step_log_likelihood_ratio(np.array([1.0, -1.0, 0.0]), -1.0, 1.0, 0.0, 1.0)
    np.testing.assert_array_equal(llr, [NOISELESS_LLR, -NOISELESS_LLR, 0.0])
    # subsampled: z = 0 is "not in the batch" on either side, so it decides nothing
    llr = step_log_likelihood_ratio(np.array([0.0, 0.5]), 0.0, 0.5, 0.0, 0.1)
    np.testing.assert_array_equal(llr, [0.0, NOISELESS_LLR])


def test_gdp_epsilon_solves_the_gdp_delta_equation():
    for mu in (0.2, 1.0, 3.0):
        eps = accounting.gdp_epsilon(mu, 1e-5)
        delta = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
        assert delta == pytest.approx(1e-5, rel=1e-6)
    assert accounting.gdp_epsilon(0.0, 1e-5) == 0.0
    with pytest.raises(ValueError, match="mu"):
        accounting.gdp_epsilon(-1.0, 1e-5)


def test_gdp_estimate_recovers_mu_of_two_unit_normals():
    rng = np.random.default_rng(0)
    for mu in (0.5, 1.5):
        est = gdp_estimate(rng.normal(0.0, 1.0, 5000), rng.normal(mu, 1.0, 5000), 1e-5)
        assert est.mu == pytest.approx(mu, abs=0.1)
        assert est.mu_low <= mu <= est.mu_high
        assert est.epsilon_low <= accounting.gdp_epsilon(mu, 1e-5) <= est.epsilon_high
        assert est.direction == 1
    flipped = gdp_estimate(rng.normal(1.0, 1.0, 2000), rng.normal(0.0, 1.0, 2000), 1e-5)
    assert flipped.direction == -1 and flipped.mu == pytest.approx(1.0, abs=0.15)
    same = gdp_estimate(rng.normal(0.0, 1.0, 2000), rng.normal(0.0, 1.0, 2000), 1e-5)
    assert same.mu < 0.15


def test_gaussian_rule_is_valid_and_tighter_on_a_gaussian_statistic():
    """An exactly (eps, delta)-DP scalar Gaussian: the rule never certifies more than eps (over
    40 seeds, at most a few exceed it at 95 %), and with 10^4 runs a side it certifies about
    0.4 eps at eps = 2, beyond the empirical rule's half-and-half split (Nasr et al. 2023)."""
    eps, delta = 2.0, 1e-5
    sigma = accounting.analytic_gaussian_sigma(eps, delta, 1.0)
    rng = np.random.default_rng(1)
    above = 0
    for _ in range(40):
        s0, s1 = rng.normal(0.0, sigma, 2000), rng.normal(1.0, sigma, 2000)
        above += audit_bounds.audit_scores(s0, s1, delta, rule="gaussian").evaluation.epsilon_lower_bound > eps
    assert above <= 6
    s0, s1 = rng.normal(0.0, sigma, 10_000), rng.normal(1.0, sigma, 10_000)
    gaussian = audit_bounds.audit_scores(s0, s1, delta, rule="gaussian")
    assert gaussian.n_selection == (1000, 1000) and gaussian.evaluation.n0 == 9000
    assert 0.3 * eps <= gaussian.evaluation.epsilon_lower_bound <= eps
    with pytest.raises(ValueError, match="threshold rule"):
        audit_bounds.audit_scores(s0, s1, delta, rule="best")


def _simulated_sums(rng, trials: int, steps: int, rate: float, sigma: float, noise_scale: float, side: int,
                    a0: float = 0.0) -> dict:
    """STEP_SUMS of a subsampled Gaussian step sequence: z = b a + N(0, (noise_scale sigma)^2), a = 1
    on side 1 (a0 on side 0), declared std sigma."""
    a = 1.0 if side else a0
    b = rng.random((trials, steps)) < rate
    z = b * a + noise_scale * sigma * rng.standard_normal((trials, steps))
    a1, a0v = np.full_like(z, 1.0), np.full_like(z, a0)
    s2 = sigma ** 2
    return {"steps": np.full(trials, float(steps)), "z2": (z * z).sum(1) / s2, "za0": (z * a0v).sum(1) / s2,
            "a0a0": (a0v * a0v).sum(1) / s2, "za1": (z * a1).sum(1) / s2, "a1a1": (a1 * a1).sum(1) / s2,
            "d2": ((a1 - a0v) ** 2).sum(1) / s2}


def test_mechanism_estimate_measures_noise_rate_and_epsilon():
    rng = np.random.default_rng(2)
    q, T, sigma, delta = 0.5, 20, 2.0, 1e-5
    honest = mechanism_estimate(_simulated_sums(rng, 4000, T, q, sigma, 1.0, 0),
                                _simulated_sums(rng, 4000, T, q, sigma, 1.0, 1), delta, add_remove=True,
                                full_batch=False)
    expected = accounting.dpsgd_epsilon(sigma, q, T, delta, accountant="pld")
    assert honest.noise_ratio == pytest.approx(1.0, abs=0.02)
    assert honest.rate == pytest.approx(q, abs=0.05)
    assert honest.epsilon == pytest.approx(expected, rel=0.2)
    assert honest.epsilon_low <= expected <= honest.epsilon_high
    noisy = mechanism_estimate(_simulated_sums(rng, 4000, T, q, sigma, 2.0, 0),
                               _simulated_sums(rng, 4000, T, q, sigma, 2.0, 1), delta, add_remove=True,
                               full_batch=False)
    assert noisy.noise_ratio == pytest.approx(2.0, abs=0.05)
    assert noisy.epsilon < 0.6 * expected
    # full batch, replace-one (a0 = -1: twice the difference): mu = 2 sqrt(T) / sigma
    full = mechanism_estimate(_simulated_sums(rng, 2000, T, 1.0, sigma, 1.0, 0, a0=-1.0),
                              _simulated_sums(rng, 2000, T, 1.0, sigma, 1.0, 1, a0=-1.0), delta, add_remove=False,
                              full_batch=True)
    assert full.noise_ratio == pytest.approx(1.0, abs=0.02)
    assert full.epsilon == pytest.approx(accounting.gdp_epsilon(2 * math.sqrt(T) / sigma, delta), rel=0.05)
    assert set(STEP_SUMS) == {"steps", "z2", "za0", "a0a0", "za1", "a1a1", "d2"}
    # no accountant here for a replace-one subsampled step
    assert mechanism_estimate(_simulated_sums(rng, 10, T, q, sigma, 1.0, 0), _simulated_sums(rng, 10, T, q, sigma, 1.0, 1),
                              delta, add_remove=False, full_batch=False) is None
