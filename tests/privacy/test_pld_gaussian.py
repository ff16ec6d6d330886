"""The vectorised PLD construction (`privacy.pld_gaussian`) against dp-accounting's own accountant."""

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_mechanism as plm

from dpbench.privacy import accounting, pld_gaussian


def _accountant_epsilon(z: float, q: float, steps: int, delta: float, interval: float) -> float:
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    acc.compose(dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps))
    return float(acc.get_epsilon(delta))


@pytest.mark.parametrize("z, q, steps, interval", [
    (0.61249, 1 / 27134, 27134, 3.3e-4),   # batch-1 DP-SGD on Adult (coarse pass of a calibration)
    (0.9, 256 / 36000, 1400, 1e-4),        # minibatch DP-SGD
    (1.2, 0.01, 300, 3e-4),
    (0.3, 0.5, 20, 1e-3),                  # large rate, small noise
    (20.0, 0.2, 50, 1e-4),                 # large noise: epsilon near 0
])
def test_epsilon_equals_the_accountant(z, q, steps, interval):
    ours = pld_gaussian.subsampled_gaussian_epsilon(z, q, steps, 1e-5, interval)
    theirs = _accountant_epsilon(z, q, steps, 1e-5, interval)
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("adjacency", [plm.AdjacencyType.ADD, plm.AdjacencyType.REMOVE])
@pytest.mark.parametrize("q", [1e-4, 0.05, 0.9, 1.0])
def test_hockey_stick_divergence_equals_the_library_pointwise(adjacency, q):
    kwargs = dict(sensitivity=1.0, sampling_prob=q, adjacency_type=adjacency)
    ours = pld_gaussian.GaussianLossVectorised(0.8, **kwargs)
    theirs = plm.GaussianPrivacyLoss(0.8, **kwargs)
    bounds = theirs.connect_dots_bounds()
    grid = np.linspace(bounds.epsilon_lower, bounds.epsilon_upper, 257)
    if q < 1.0:  # the boundary value the library treats with math.isclose
        edge = -math.log1p(-q) if adjacency == plm.AdjacencyType.ADD else math.log1p(-q)
        grid = np.append(grid, edge)
    expected = [theirs.get_delta_for_epsilon(float(e)) for e in grid]
    np.testing.assert_allclose(ours.get_delta_for_epsilon(grid), expected, rtol=1e-9, atol=1e-15)
    assert ours.get_delta_for_epsilon(float(grid[3])) == theirs.get_delta_for_epsilon(float(grid[3]))  # scalars: the library's


def test_accounting_uses_it_and_still_meets_the_target():
    z = accounting.calibrate_dpsgd_noise(0.5, 1e-5, 1 / 5000, 5000, "pld")
    eps = _accountant_epsilon(z, 1 / 5000, 5000, 1e-5, accounting._pld_interval(0.5, z, 1 / 5000, 5000))
    assert eps <= 0.5 * (1 + 1e-9)
    assert eps >= 0.5 * (1 - 2 * accounting.CALIBRATION_REL_TOL)
