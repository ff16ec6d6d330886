"""DP-SGD with automatic clipping: each per-example gradient is normalised instead of clipped.

Bu, Wang, Zha, Karypis, "Automatic Clipping: Differentially Private Deep Learning Made Easier and
Stronger", NeurIPS 2023 (arXiv:2206.07136), the AUTO-S rule with stability constant gamma:
    g_i <- C g_i / (||g_i|| + gamma),   of norm C ||g_i|| / (||g_i|| + gamma) < C, whatever the model.
One record therefore changes the batch sum by less than C and DP-SGD's analysis (Abadi et al.,
CCS 2016, Alg. 1) holds unchanged: Poisson sampling at q = B/n, N(0, (zC)^2 I) on the sum, T steps
composed by dp-accounting, z calibrated to (epsilon, delta). A dpbench plugin: README, "Benchmark
your own algorithm"; its ledger fields sampling/steps/noise_multiplier let private selection and
audits treat it as DP-SGD.
"""
from typing import Annotated

import numpy as np

from dpbench.algorithms import Fit, Param, PrivacyTarget, Problem, algorithm, ledger
from dpbench.ledger import Adjacency
from dpbench.privacy import calibrate_dpsgd_noise, dpsgd_epsilon_report


def normalize(G: np.ndarray, clip_norm: float, gamma: float) -> np.ndarray:
    """Rows g of G scaled to C g / (||g|| + gamma) (AUTO-S): every row has norm < C."""
    return G * (clip_norm / (np.linalg.norm(G, axis=1) + gamma))[:, None]


@algorithm("dpsgd_normalized", title="DP-SGD with per-example normalisation (automatic clipping, AUTO-S)",
           citation="Bu, Wang, Zha, Karypis, Automatic Clipping, NeurIPS 2023; Abadi et al., CCS 2016", private=True)
def fit_dpsgd_normalized(
    problem: Problem, privacy: PrivacyTarget, rng: np.random.Generator, *,
    epochs: Annotated[float, Param("passes over the data; T = round(epochs n / B)", minimum=0,
                                   exclusive_minimum=True, maximum=1000)] = 2.0,
    batch_size: Annotated[float, Param("expected Poisson batch size B; q = B/n", minimum=1)] = 64.0,
    lr: Annotated[float, Param("step size", minimum=0, exclusive_minimum=True)] = 1.0,
    clip_norm: Annotated[float, Param("C: normalised gradients have norm < C (the sensitivity)",
                                      minimum=0, exclusive_minimum=True)] = 1.0,
    gamma: Annotated[float, Param("stability constant of the normalisation", minimum=0, exclusive_minimum=True,
                                  paper="Bu et al. 2023, AUTO-S")] = 0.01,
    trace_every: Annotated[int, Param("snapshot the iterate every this many steps (0: no trace)", minimum=0)] = 0,
) -> Fit:
    """T steps theta <- theta - lr ((sum_{i in S_t} normalize(g_i) + N(0, (zC)^2 I)) / B + grad reg(theta))."""
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    B = min(float(batch_size), float(n))
    q, steps = B / n, max(1, round(epochs * n / B))
    z = calibrate_dpsgd_noise(privacy.epsilon, privacy.delta, q, steps)  # RDP accountant
    theta, trace = model.init(rng), []
    for t in range(1, steps + 1):
        batch = rng.random(n) < q  # Poisson sampling: each row independently with probability q
        total = normalize(model.per_example_grads(theta, X[batch], y[batch]), clip_norm, gamma).sum(axis=0)
        noisy = (total + rng.normal(0.0, z * clip_norm, size=theta.shape)) / B  # divide by the expected B
        theta = theta - lr * (noisy + model.reg_grad(theta))
        if trace_every and (t % trace_every == 0 or t == steps):
            trace.append({"step": t, "theta": theta.copy()})
    spent = dpsgd_epsilon_report(z, q, steps, privacy.delta)
    return Fit(theta=theta, trace=trace, privacy=ledger(
        private=True, mechanism="Poisson-subsampled Gaussian over T steps (DP-SGD, normalised gradients)",
        claim="valid" if min(spent.values()) <= privacy.epsilon * (1 + 1e-9) else "paper-only",
        target_epsilon=privacy.epsilon, delta=privacy.delta, epsilon_spent=spent,
        adjacency=Adjacency.ADD_REMOVE, sensitivity=clip_norm,
        sampling={"kind": "poisson", "rate": q, "expected_batch": B}, steps=steps, noise_multiplier=z))
