"""A mechanism as data (dpbench.privacy.events): stored DpEvents read back exactly, and epsilon
recomputed from them against independent computations."""

from __future__ import annotations

import math

import pytest
from dp_accounting import dp_event
from scipy import optimize, stats

from dpbench.privacy import accounting, events


def _exact_gaussian_epsilon(mu: float, delta: float) -> float:
    """Independent: the (epsilon, delta) curve of one Gaussian of sensitivity/std mu (Balle & Wang 2018,
    Theorem 8), solved for epsilon."""
    def gap(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta
    return optimize.brentq(gap, 0.0, 100.0, xtol=1e-14)


def test_the_stored_form_reads_back_the_same_event():
    event = dp_event.ComposedDpEvent([
        dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.1)), 300),
        dp_event.LaplaceDpEvent(2.0),
        dp_event.SampledWithoutReplacementDpEvent(1000, 10, dp_event.GaussianDpEvent(3.0)),
    ])
    stored = events.to_json(event)
    assert stored["type"] == "ComposedDpEvent" and stored["events"][0]["count"] == 300
    assert events.from_json(stored) == event
    assert events.dpsgd_event_json(1.1, 0.01, 300) == events.to_json(event.events[0])


@pytest.mark.parametrize("stored, says", [
    ({"type": "NoSuchDpEvent"}, "unknown event type"),
    ({"type": "GaussianDpEvent"}, "needs the fields ['noise_multiplier']"),
    ({"type": "GaussianDpEvent", "noise_multiplier": 1.0, "sigma": 2.0}, "needs the fields"),
    ({"type": "SelfComposedDpEvent", "count": 3, "event": {"noise_multiplier": 1.0}}, "with a 'type'"),
    ("GaussianDpEvent", "with a 'type'"),
])
def test_a_malformed_event_is_an_error_naming_what_is_wrong(stored, says):
    with pytest.raises(events.EventError) as caught:
        events.from_json(stored)
    assert says in str(caught.value)


def test_full_batch_gaussian_steps_recompute_to_the_exact_gaussian_epsilon():
    z, steps, delta = 7.0, 20, 1e-5  # 20 steps of multiplier 7 compose to one Gaussian of mu = sqrt(20)/7
    got = events.recomputed_epsilon(events.dpsgd_event_json(z, 1.0, steps), delta)
    exact = _exact_gaussian_epsilon(math.sqrt(steps) / z, delta)
    assert got["gdp"] == pytest.approx(exact, rel=1e-6)
    assert min(got.values()) == pytest.approx(exact, rel=1e-6)
    assert got["rdp"] > exact and got["pld"] >= exact * (1 - 1e-9)  # upper bounds


def test_poisson_sampled_steps_recompute_to_dpbench_accountants_and_bracket_the_truth():
    z, q, steps, delta = 4.0, 0.05, 100, 1e-5
    got = events.recomputed_epsilon(events.dpsgd_event_json(z, q, steps), delta)
    assert got == pytest.approx(accounting.dpsgd_epsilon_report(z, q, steps, delta), rel=1e-12)
    unsampled = _exact_gaussian_epsilon(math.sqrt(steps) / z, delta)  # the same steps on the full data
    assert 0 < got["pld"] < unsampled  # sampling only amplifies


def test_other_events_go_to_the_library_accountants_and_unknown_ones_are_refused():
    laplace = events.to_json(dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(10.0), 3))
    got = events.recomputed_epsilon(laplace, 1e-5)
    assert set(got) == {"rdp", "pld"}
    assert got["pld"] <= 3 / 10 * (1 + 1e-3)  # basic composition of three 0.1-DP Laplace mechanisms
    with pytest.raises(events.EventError, match="no accountant"):
        events.recomputed_epsilon(events.to_json(dp_event.UnsupportedDpEvent()), 1e-5)


def test_replace_one_sampled_steps_use_the_replace_one_relation():
    stored = events.dpsgd_event_json(1.1, 0.01, 200)
    add_remove = min(events.recomputed_epsilon(stored, 1e-5, "add/remove-one").values())
    replace = min(events.recomputed_epsilon(stored, 1e-5, "replace-one").values())
    assert replace > add_remove  # replacing a record moves a sampled sum more than adding one
