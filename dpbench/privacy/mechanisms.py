"""Noise samplers used by the DP algorithms (kept deliberately minimal).

Calibration of the noise scale lives in :mod:`dpbench.privacy.accounting`; the
functions here only draw noise from a caller-supplied ``numpy.random.Generator``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["gaussian_noise", "laplace_norm_noise"]


def _check_scale(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return value


def gaussian_noise(rng: np.random.Generator, shape, std: float) -> np.ndarray:
    """i.i.d. N(0, std^2) noise of the given shape (``std = 0`` gives zeros)."""
    std = _check_scale("std", std)
    return rng.normal(0.0, std, size=shape)


def laplace_norm_noise(rng: np.random.Generator, dim: int, scale: float) -> np.ndarray:
    """Vector k in R^dim with density proportional to exp(-||k||_2 / scale).

    In polar coordinates the radius has density proportional to r^(dim-1) exp(-r/scale),
    i.e. ||k|| ~ Gamma(shape=dim, scale=scale), and the direction is uniform on the
    sphere (the sampler of Chaudhuri, Monteleoni, Sarwate 2011 that Bolt-on uses; docs/methods/bolt-on.md).
    """
    if isinstance(dim, bool) or int(dim) != dim or dim < 1:
        raise ValueError(f"dim must be an integer >= 1, got {dim!r}")
    dim = int(dim)
    scale = _check_scale("scale", scale)
    direction = rng.standard_normal(dim)
    norm = np.linalg.norm(direction)
    while norm == 0.0:  # probability zero, but never divide by zero
        direction = rng.standard_normal(dim)
        norm = np.linalg.norm(direction)
    return direction / norm * rng.gamma(shape=dim, scale=scale)
