"""A DP-SGD plugin whose clipping can be wrong (`clipping=`), for `dpbench verify`'s tests of the
sensitivity game (`dpbench.audit.sensitivity`) and of the spec mode.

clipping per_example: DP-SGD (Abadi et al. 2016, Alg. 1): Poisson sampling at q = B/n, each
example's gradient clipped to C, N(0, (zC)^2 I) on the sum, z calibrated to (epsilon, delta) by
dpbench's RDP accountant, every step reported with `release`. The two bugs leave the ledger and
every release's declaration (noise std zC, rate q, clip norm C) as the honest run writes them:
  sum     the batch's *sum* of gradients clipped to C, not each example: one example can move the
          clipped sum by up to 2C (from C one way to C the other), so the true epsilon is that of
          noise multiplier z/2 (about 2.9 at a nominal 1 with the defaults on Breast Cancer);
  median  each example clipped to min(C, the batch's median gradient norm) and the noise scaled to
          that clip (z min(C, median)): the noise follows a data-dependent scale, and is smaller than
          declared whenever the median norm is below C (at C = 1 on Breast Cancer, not at C = 0.1).
"""
from typing import Annotated

import numpy as np

from dpbench.algorithms import Fit, Param, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.dpsgd import BatchSize, ClipNorm, Epochs, LearningRate  # DP-SGD's declarations
from dpbench.algorithms.releases import release
from dpbench.core.ledger import Adjacency
from dpbench.privacy import calibrate_dpsgd_noise, dpsgd_epsilon_report
from dpbench.privacy.events import dpsgd_event_json

CLIPPINGS = ("per_example", "sum", "median")


@algorithm("buggy_clipping", title="DP-SGD with a switchable clipping bug (tests of dpbench verify)",
           citation="Abadi et al., CCS 2016", private=True, updates=True)
def fit(
    problem: Problem, privacy: PrivacyTarget, rng: np.random.Generator, *,
    epochs: Epochs = 2.0,
    batch_size: BatchSize = 32.0,
    lr: LearningRate = 0.5,
    clip_norm: ClipNorm = 1.0,
    clipping: Annotated[str, Param("what is clipped", choices=CLIPPINGS)] = "per_example",
) -> Fit:
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    B = min(float(batch_size), float(n))
    q, steps = B / n, max(1, round(epochs * n / B))
    z = calibrate_dpsgd_noise(privacy.epsilon, privacy.delta, q, steps)
    theta = model.init(rng)
    for t in range(1, steps + 1):
        batch = rng.random(n) < q
        clip = clip_norm
        if clipping == "sum":
            total = model.per_example_grads(theta, X[batch], y[batch]).sum(axis=0)
            total = total * min(1.0, clip_norm / max(float(np.linalg.norm(total)), 1e-300))
        else:
            if clipping == "median" and batch.any():
                norms = np.linalg.norm(model.per_example_grads(theta, X[batch], y[batch]), axis=1)
                clip = min(clip_norm, float(np.median(norms)))
            total, _ = model.clipped_grad_sum(theta, X[batch], y[batch], clip)
        noisy = total + rng.normal(0.0, z * clip, size=theta.shape)
        release(t, theta, noisy / B, z * clip_norm, rate=q, clip_norm=clip_norm, weight=1.0 / B)
        theta = theta - lr * (noisy / B + model.reg_grad(theta))
    return Fit(theta=theta, privacy=ledger(
        private=True, mechanism="Poisson-subsampled Gaussian over T steps (DP-SGD)", claim="valid",
        target_epsilon=privacy.epsilon, delta=privacy.delta,
        epsilon_spent=dpsgd_epsilon_report(z, q, steps, privacy.delta), adjacency=Adjacency.ADD_REMOVE,
        sensitivity=clip_norm, event=dpsgd_event_json(z, q, steps),
        sampling={"kind": "poisson", "rate": q, "expected_batch": B}, steps=steps, noise_multiplier=z))
