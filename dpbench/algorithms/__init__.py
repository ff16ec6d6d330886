"""Algorithms. Every module of this package registers its algorithms when imported (`algorithm`
decorator in base.py); importing the package imports them all, so an algorithm is one file."""

from dpbench.algorithms.base import (
    REGISTRY,
    AlgorithmInfo,
    Fit,
    PrivacyTarget,
    Problem,
    algorithm,
    ledger,
)
from dpbench.core.registry import Param, import_submodules

import_submodules(__name__)


def get(name: str) -> AlgorithmInfo:
    """The algorithm called `name` (ValueError listing the valid ones)."""
    return REGISTRY.lookup(name)


__all__ = ["REGISTRY", "AlgorithmInfo", "Fit", "Param", "PrivacyTarget", "Problem", "algorithm", "get", "ledger"]
