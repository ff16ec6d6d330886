"""Privacy accounting and noise mechanisms (pure maths: no file I/O, no YAML).

See :mod:`dpbench.privacy.accounting` for the measured tolerance/discretisation choices.
"""

from dpbench.privacy.accounting import (
    ACCOUNTANTS,
    CALIBRATION_REL_TOL,
    add_remove_to_replace_one,
    analytic_gaussian_sigma,
    calibrate_dpsgd_noise,
    classical_gaussian_sigma,
    dpsgd_epsilon,
    dpsgd_epsilon_report,
    gaussian_composition_sigma,
    gaussian_epsilon,
    memo_entries,
    memo_preload,
    paper_dpsgd_sigma,
    pidp_contribution_sigma,
    zcdp_to_dp,
)
from dpbench.privacy.mechanisms import gaussian_noise, laplace_norm_noise

__all__ = [
    "ACCOUNTANTS",
    "CALIBRATION_REL_TOL",
    "add_remove_to_replace_one",
    "analytic_gaussian_sigma",
    "calibrate_dpsgd_noise",
    "classical_gaussian_sigma",
    "dpsgd_epsilon",
    "dpsgd_epsilon_report",
    "gaussian_composition_sigma",
    "gaussian_epsilon",
    "gaussian_noise",
    "laplace_norm_noise",
    "memo_entries",
    "memo_preload",
    "paper_dpsgd_sigma",
    "pidp_contribution_sigma",
    "zcdp_to_dp",
]
