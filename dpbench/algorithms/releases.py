"""What an adversary who sees every update observes: the noisy steps an iterative algorithm releases.

Threat model "all updates" (Nasr, Song, Thakurta, Papernot, Carlini, S&P 2021; Nasr, Hayes,
Steinke, Balle, Tramer, Jagielski, Carlini, Terzis, USENIX Security 2023; docs/audits.md, Threat models):
every iterate theta_0 .. theta_T is public. Seeing theta_t and theta_{t+1} and knowing the
hyperparameters, the adversary can recompute each step's noisy statistic, so an iterative
algorithm describes every noisy step it takes as a `Release`, and the audit harness (which the
algorithm knows nothing about) may listen with `observing(callback)`. With nobody listening,
`release(...)` costs one context-variable lookup and builds nothing.

A step of kind "gradient_sum" releases

    released = weight * ( sum_{i in S_t} clip_C(grad l(theta_t; z_i)) + N(0, noise_std^2 I) ),

with each record in S_t independently with probability `rate` (1: full batch) and clip_C the
per-example clipping to norm `clip_norm` (None: unclipped). Every other noisy step (e.g. a robust
mean estimate of the gradients) is of kind "noisy_statistic": `released` carries Gaussian noise of
std weight * noise_std per coordinate, and a record moves it by at most its sensitivity, but not
by a known function of the record. Arrays carry a leading replica axis (R, m) when R trainings
run as one vectorised fit.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

KINDS = ("gradient_sum", "noisy_statistic")


@dataclass(frozen=True)
class Release:
    """One noisy step as the all-updates adversary sees it (module docstring)."""

    step: int  # 1-based step index
    theta: np.ndarray  # (m,) or (R, m): the iterate the step's gradients were taken at
    released: np.ndarray  # (m,) or (R, m): the noisy statistic (module docstring for its scale)
    noise_std: float  # std of the Gaussian noise, before `weight`; 0 for a step without noise
    rate: float = 1.0  # probability that a given record is in the step's batch
    clip_norm: float | None = None  # per-example clipping norm (None: not clipped)
    weight: float = 1.0  # released = weight * (sum + noise)
    kind: str = "gradient_sum"


_OBSERVER: ContextVar[Callable[[Release], None] | None] = ContextVar("dpbench_release_observer", default=None)


def observed() -> bool:
    """True while somebody listens (a loop may then skip a compiled path that cannot report steps)."""
    return _OBSERVER.get() is not None


def release(step: int, theta: np.ndarray, released: np.ndarray, noise_std: float, *, rate: float = 1.0,
            clip_norm: float | None = None, weight: float = 1.0, kind: str = "gradient_sum") -> None:
    """Report one noisy step to the current observer, if any (copies nothing: the observer must
    read the arrays before the loop changes them)."""
    observer = _OBSERVER.get()
    if observer is not None:
        observer(Release(step=int(step), theta=theta, released=released, noise_std=float(noise_std),
                         rate=float(rate), clip_norm=None if clip_norm is None else float(clip_norm),
                         weight=float(weight), kind=kind))


@contextmanager
def observing(callback: Callable[[Release], None]) -> Iterator[None]:
    """Call `callback(release)` for every noisy step of the fits run inside the block."""
    token = _OBSERVER.set(callback)
    try:
        yield
    finally:
        _OBSERVER.reset(token)


__all__ = ["KINDS", "Release", "observed", "observing", "release"]
