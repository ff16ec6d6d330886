"""The minibatch SGD loop shared by non-private SGD, DP-SGD and DP-LSSGD (which smooths its noisy gradient).

One step (Abadi et al. 2016, Algorithm 1, with Poisson sampling as its analysis assumes):
  S_t ~ Poisson(q): each example independently with probability q = B/n
  g_t = (1/B) * (sum_{i in S_t} clip(grad l(theta_t; z_i), C) + N(0, (z C)^2 I)) + grad reg(theta_t)
  theta_{t+1} = Proj_r(theta_t - lr_t * g_t)
The sum is divided by the *expected* batch size B = q n, never by |S_t| (dividing by the
realised size leaks it; docs/methods/dpsgd.md, Algorithm). The regulariser's gradient is data independent and
is added after noising (post-processing). With clip_norm=None and noise_std=0 this is plain
non-private SGD. Poisson sampling is drawn exactly, for a chunk of steps at once, as geometric gaps
between included (step, row) pairs (`poisson_batches`): O(|S_t|) per step.

Random draws are made in chunks of steps (`poisson_batches`, then the chunk's Gaussian noise),
before the chunk's steps run, so the loop itself is deterministic given its draws and runs on
either of two paths that consume the same draws: the numpy path (`_numpy_steps`, the model's
own `clipped_grad_sum`; every model, any `transform`) and, for logistic/ridge regression, the
compiled twin `kernels.glm_sgd_steps` (batch 1: ~0.1 s per 50,000 steps instead of ~1 s).
The chunk length depends only on the number of parameters (`kernels.steps_per_chunk`), never on
the path or on `trace_every`, so traces and paths never change the draws.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from dpbench.algorithms import kernels, releases
from dpbench.algorithms.base import Problem
from dpbench.core.gaussian import standard_normal

LR_SCHEDULES = ("constant", "inverse_sqrt")


def steps_for(epochs: float, batch_size: float, n: int) -> int:
    """T = round(epochs * n / B), at least 1."""
    return max(1, int(round(epochs * n / batch_size)))


def learning_rates(lr: float, schedule: str, steps: np.ndarray, steps_per_epoch: float) -> np.ndarray:
    """Step sizes at the given (0-based) steps: constant lr, or lr / sqrt(1 + epochs elapsed)."""
    steps = np.asarray(steps, dtype=np.float64)
    if schedule == "constant":
        return np.full(steps.shape, float(lr))
    if schedule == "inverse_sqrt":
        return lr / np.sqrt(1.0 + steps / steps_per_epoch)
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


def stretch_end(position: int, done: int, end: int, trace_every: int) -> int:
    """End (exclusive) of the stretch of steps starting at `position` that stops at the next trace
    point: `done` steps precede `position`, traces fall after every `trace_every`-th step (0: none)."""
    return end if not trace_every else min(end, position + trace_every - done % trace_every)


def poisson_batches(rng: np.random.Generator, n: int, q: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `steps` Poisson-sampled batches at rate q < 1: (offsets (steps+1,), rows); step t is
    rows[offsets[t]:offsets[t+1]], in increasing order.

    Poisson sampling includes each of the steps * n (step, row) pairs independently with
    probability q, so the gaps between included pairs, in the order (step, row), are i.i.d.
    Geometric(q). The pairs are drawn as cumulative sums of geometric gaps, in one vectorised call
    (topped up in further calls in the rare case the first falls short): exact, with no
    rejection and no per-step Python, at ~steps * n * q draws. Pair p is row p mod n of step p div n.
    """
    total = steps * n
    expected = total * q
    gaps = rng.geometric(q, size=int(expected + 6.0 * math.sqrt(expected) + 16))
    positions = np.cumsum(gaps) - 1
    while positions[-1] < total:  # fell short of the last pair: draw further gaps
        more = rng.geometric(q, size=int(0.1 * expected + 6.0 * math.sqrt(expected) + 16))
        positions = np.concatenate([positions, positions[-1] + np.cumsum(more)])
    positions = positions[:np.searchsorted(positions, total)]
    step_of, rows = np.divmod(positions, n)
    offsets = np.searchsorted(step_of, np.arange(steps + 1)).astype(np.int64)
    return offsets, rows


def _numpy_steps(problem: Problem, theta: np.ndarray, offsets: np.ndarray | None, rows: np.ndarray | None,
                 noise: np.ndarray | None, noise_std: float, lrs: np.ndarray, clip_norm: float | None,
                 expected_batch: float, radius: float | None,
                 transform: Callable[[np.ndarray], np.ndarray] | None, t0: int, t1: int, *, rate: float = 1.0,
                 first_step: int = 1) -> np.ndarray:
    """Steps t0..t1-1 of a chunk with the model's vectorised methods (the reference path); offsets
    None: full batch. Step t of the chunk is step first_step + t of the run; each reports its noisy
    sum of clipped gradients (`releases.release`: per-record inclusion `rate`)."""
    model, X, y = problem.model, problem.X, problem.y
    m = theta.shape[0]
    for t in range(t0, t1):
        if offsets is None:
            Xb, yb = X, y
        else:
            idx = rows[offsets[t]:offsets[t + 1]]
            Xb, yb = X[idx], y[idx]
        if Xb.shape[0]:
            if clip_norm is None:
                gsum = model.data_grad(theta, Xb, yb) * Xb.shape[0]
            else:
                gsum, _ = model.clipped_grad_sum(theta, Xb, yb, clip_norm)
        else:
            gsum = np.zeros(m)
        if noise is not None:
            gsum = gsum + noise_std * noise[t]
        releases.release(first_step + t, theta, gsum, noise_std if noise is not None else 0.0, rate=rate,
                         clip_norm=clip_norm)
        g = gsum / expected_batch + model.reg_grad(theta)
        if transform is not None:
            g = transform(g)
        theta = project_to_ball(theta - lrs[t] * g, radius)
    return theta


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
    compiled: bool | None = None,
) -> tuple[np.ndarray, list[dict]]:
    """Run `steps` SGD steps with Poisson sampling at rate batch_size / n.

    noise_std is the std of the Gaussian added to the *sum* of clipped gradients (z * C for
    DP-SGD). `transform` maps the noisy gradient to the update direction (post-processing,
    e.g. DP-LSSGD's Laplacian smoothing). `compiled`: None uses the compiled loop where it
    exists (`kernels.jit_enabled()`), False forces the numpy path (same draws, same result to
    ~1e-12). Every step is reported (`releases.release`); while somebody observes, the numpy path
    runs whatever `compiled` says (the compiled loop cannot report steps), and otherwise the compiled
    loop's steps are reported in bulk after it (`releases.released_steps`, for a tally). Returns the
    final iterate and the trace (one dict per `trace_every` steps).
    """
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    q = min(1.0, batch_size / n)
    expected_batch = q * n
    theta = model.init(rng) if theta0 is None else np.array(theta0, dtype=float)
    m = theta.shape[0]
    steps_per_epoch = max(1.0, n / batch_size)
    loss = kernels.glm_loss_code(model)
    if compiled is None:
        compiled = kernels.jit_enabled()
    compiled = compiled and not releases._observed()  # the compiled loop cannot report its steps
    fast = compiled and loss is not None and transform is None and q < 1.0
    if fast:
        X = np.ascontiguousarray(X, dtype=np.float64)
        y = np.ascontiguousarray(y, dtype=np.float64)
        xnorm = kernels.row_norms(X)
        no_noise = np.empty((0, m))
    chunk = kernels.steps_per_chunk(m)
    noise_buffer = np.empty((min(chunk, steps), m)) if noise_std > 0.0 else None  # reused: no page faults
    trace: list[dict] = []
    for start in range(0, steps, chunk):
        k = min(chunk, steps - start)
        offsets, rows = poisson_batches(rng, n, q, k) if q < 1.0 else (None, None)
        noise = None if noise_buffer is None else standard_normal(rng, noise_buffer[:k])
        lrs = learning_rates(lr, lr_schedule, np.arange(start, start + k), steps_per_epoch)
        a = 0
        while a < k:  # up to the next trace point, or the chunk's end
            b = stretch_end(a, start + a, k, trace_every)
            if fast:
                theta = np.ascontiguousarray(theta)
                kernels.glm_sgd_steps(theta, X, y, xnorm, offsets, rows, no_noise if noise is None else noise,
                                      float(noise_std), lrs, loss, float(clip_norm or 0.0), float(expected_batch),
                                      float(model.l2), float(radius or 0.0), a, b)
            else:
                theta = _numpy_steps(problem, theta, offsets, rows, noise, noise_std, lrs, clip_norm,
                                     expected_batch, radius, transform, a, b, rate=q, first_step=start + 1)
            a = b
            t = start + b
            if trace_every and (t % trace_every == 0 or t == steps) and on_trace is not None:
                trace.append({"step": t, **on_trace(t, theta)})
    if fast:  # the compiled loop reports no step: all of them in bulk, declared as the numpy path declares each
        releases.released_steps(steps, max(0.0, noise_std), rate=q, clip_norm=clip_norm)
    return theta, trace
