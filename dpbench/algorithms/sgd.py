"""The minibatch SGD loop shared by non-private SGD and DP-SGD (and later noisy-SGD variants).

One step (Abadi et al. 2016, Algorithm 1, with Poisson sampling as its analysis assumes):
  S_t ~ Poisson(q): each example independently with probability q = B/n
  g_t = (1/B) * (sum_{i in S_t} clip(grad l(theta_t; z_i), C) + N(0, (z C)^2 I)) + grad reg(theta_t)
  theta_{t+1} = Proj_r(theta_t - lr_t * g_t)
The sum is divided by the *expected* batch size B = q n, never by |S_t| (dividing by the
realised size leaks it, ALGORITHMS.md §1). The regulariser's gradient is data independent and
is added after noising (post-processing). With clip_norm=None and noise_std=0 this is plain
non-private SGD. Poisson sampling is drawn as |S_t| ~ Binomial(n, q) followed by a uniform
subset of that size, which has exactly the same distribution and costs O(|S_t|) per step.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from dpbench.algorithms.base import Problem

LR_SCHEDULES = ("constant", "inverse_sqrt")


def steps_for(epochs: float, batch_size: float, n: int) -> int:
    """T = round(epochs * n / B), at least 1."""
    return max(1, int(round(epochs * n / batch_size)))


def learning_rate(lr: float, schedule: str, step: int, steps_per_epoch: float) -> float:
    if schedule == "constant":
        return lr
    if schedule == "inverse_sqrt":  # lr / sqrt(1 + epochs elapsed)
        return lr / math.sqrt(1.0 + step / steps_per_epoch)
    raise ValueError(f"unknown lr schedule {schedule!r}; choose one of {', '.join(LR_SCHEDULES)}")


def project_to_ball(theta: np.ndarray, radius: float | None) -> np.ndarray:
    """Euclidean projection onto {||theta||_2 <= radius}; identity when radius is None."""
    if radius is None:
        return theta
    norm = float(np.linalg.norm(theta))
    return theta if norm <= radius else theta * (radius / norm)


def training_loss_trace(problem: Problem) -> Callable[[int, np.ndarray], dict]:
    """Trace callback: the reference objective on the full training data (costs one pass)."""
    return lambda step, theta: {"train_loss": problem.model.loss(theta, problem.X, problem.y)}


def run_sgd(
    problem: Problem,
    rng: np.random.Generator,
    *,
    steps: int,
    batch_size: float,
    lr: float,
    lr_schedule: str = "constant",
    clip_norm: float | None = None,
    noise_std: float = 0.0,
    radius: float | None = None,
    theta0: np.ndarray | None = None,
    trace_every: int = 0,
    on_trace: Callable[[int, np.ndarray], dict] | None = None,
    transform: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, list[dict]]:
    """Run `steps` SGD steps with Poisson sampling at rate batch_size / n.

    noise_std is the std of the Gaussian added to the *sum* of clipped gradients (z * C for
    DP-SGD). `transform` maps the noisy gradient to the update direction (post-processing,
    e.g. DP-LSSGD's Laplacian smoothing). Returns the final iterate and the trace (one dict
    per `trace_every` steps).
    """
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    q = min(1.0, batch_size / n)
    expected_batch = q * n
    theta = model.init(rng) if theta0 is None else np.array(theta0, dtype=float)
    m = theta.shape[0]
    steps_per_epoch = max(1.0, n / batch_size)
    trace: list[dict] = []
    for t in range(steps):
        if q >= 1.0:
            Xb, yb = X, y
        else:
            k = int(rng.binomial(n, q))
            idx = rng.choice(n, size=k, replace=False) if k else np.empty(0, dtype=np.intp)
            idx.sort()  # same subset, contiguous-ish memory access
            Xb, yb = X[idx], y[idx]
        if Xb.shape[0]:
            if clip_norm is None:
                gsum = model.data_grad(theta, Xb, yb) * Xb.shape[0]
            else:
                gsum, _ = model.clipped_grad_sum(theta, Xb, yb, clip_norm)
        else:
            gsum = np.zeros(m)
        if noise_std > 0.0:
            gsum = gsum + rng.normal(0.0, noise_std, size=m)
        g = gsum / expected_batch + model.reg_grad(theta)
        if transform is not None:
            g = transform(g)
        theta = project_to_ball(theta - learning_rate(lr, lr_schedule, t, steps_per_epoch) * g, radius)
        if trace_every and ((t + 1) % trace_every == 0 or t + 1 == steps) and on_trace is not None:
            trace.append({"step": t + 1, **on_trace(t + 1, theta)})
    return theta, trace
