"""Algorithms. Every module of this package registers its algorithms when imported (`algorithm`
decorator in base.py); importing the package imports them all, so an algorithm is one file.

The public building blocks of a plugin. On the privatiser path (`privatiser`: dpbench runs the
mechanism, so the run can be "valid"): `privatised_algorithm`, `Param`, `PrivacyTarget` and the
`Privatiser` the fit gets (noisy SGD and GD with the plugin's update rule, a clipped Gaussian sum, a
Gaussian or Laplace release of a value whose sensitivity the plugin declares). A plugin that owns its
loop (its claim is at most "declared"): `algorithm`, `Param`, `Fit`, `ledger`, `Problem`,
`PrivacyTarget`; `release` to report a noisy step (`releases`); and for an SGD-family method whose
privacy is DP-SGD's, `fit_noisy_sgd` (calibration, Poisson-sampled clipped noisy steps, each
reported, and the ledger; its `transform` post-processes each noisy gradient, e.g. into an Adam
direction), with `noisy_sgd_plan` / `NoisySGDPlan` for the calibration and ledger alone.
"""

from dpbench.algorithms.base import (
    REGISTRY,
    AlgorithmInfo,
    Fit,
    PrivacyTarget,
    Problem,
    algorithm,
    ledger,
)
from dpbench.algorithms.dpsgd import NoisySGDPlan, fit_noisy_sgd, noisy_sgd_plan
from dpbench.algorithms.privatiser import Privatiser, PrivatiserError, privatised_algorithm
from dpbench.algorithms.releases import release, released_steps
from dpbench.core.registry import Param, import_submodules

import_submodules(__name__)


def get(name: str) -> AlgorithmInfo:
    """The algorithm called `name` (ValueError listing the valid ones)."""
    return REGISTRY.lookup(name)


__all__ = ["REGISTRY", "AlgorithmInfo", "Fit", "NoisySGDPlan", "Param", "PrivacyTarget", "Privatiser", "PrivatiserError",
           "Problem", "algorithm", "fit_noisy_sgd", "get", "ledger", "noisy_sgd_plan", "privatised_algorithm", "release",
           "released_steps"]
