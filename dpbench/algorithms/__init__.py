"""Registered algorithms. Importing this package registers every algorithm module."""

from dpbench.algorithms import (  # noqa: F401  (registration side effect)
    bolt_on, bun_steinke, dp_lssgd, dpsgd, gradient_perturbation, input_perturbation, nonprivate,
    objective_perturbation, output_perturbation, pidp, robust_gd, sample_aggregate,
)
from dpbench.algorithms.base import REGISTRY, AlgorithmInfo, Fit, HyperParam, PrivacyTarget, Problem


def get(name: str) -> AlgorithmInfo:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {', '.join(sorted(REGISTRY))}") from None


__all__ = ["REGISTRY", "AlgorithmInfo", "Fit", "HyperParam", "PrivacyTarget", "Problem", "get"]
