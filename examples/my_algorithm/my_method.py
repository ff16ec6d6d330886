"""DP-Adam: DP-SGD's noisy clipped gradients, each turned into Adam's update.

Kingma & Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015, Algorithm 1 (bias-corrected
first and second moments m_t, v_t; step -lr m_hat_t / (sqrt(v_hat_t) + eps)), applied to the noisy
gradient of DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016, Algorithm 1):
Poisson sampling at q = B/n, per-example clipping to norm C, N(0, (zC)^2 I) on the clipped sum,
division by B, T = round(epochs n / B) steps.

Privacy: DP-SGD's, unchanged. `fit_noisy_sgd` runs DP-SGD's steps, calibrates z to (epsilon, delta)
with the RDP accountant and writes DP-SGD's ledger; Adam enters only through `transform`, which
sees nothing but the released noisy gradient (plus the l2 term of the iterate, itself computed from
earlier releases). The moments and the update are post-processing of DP-SGD's released steps, so
they spend no privacy, and an adversary who sees every iterate learns nothing DP-SGD's transcript
does not hold. The fit reports every noisy step (`updates=True`): `dpbench verify` checks them
against the ledger and the audits may use the all-updates threat model.

Choices: constant step size, no projection, theta_0 from the model's init, the final iterate
returned; the l2 regulariser's gradient goes through Adam with the data's (as in Algorithm 1 on
the regularised loss; not decoupled weight decay). A dpbench plugin: README, "Benchmark your own
algorithm".
"""
from collections.abc import Callable
from typing import Annotated

import numpy as np

from dpbench.algorithms import Param, PrivacyTarget, Privatiser, privatised_algorithm


def adam(beta1: float, beta2: float, eps_adam: float) -> Callable[[np.ndarray], np.ndarray]:
    """A fresh Adam state (Kingma & Ba, Alg. 1): called once per step, in order, with the noisy gradient g_t,
    it returns the update direction m_hat_t / (sqrt(v_hat_t) + eps_adam)."""
    m = v = 0.0
    t = 0

    def direction(g: np.ndarray) -> np.ndarray:
        nonlocal m, v, t
        t += 1
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        return (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps_adam)

    return direction


@privatised_algorithm("dpadam", title="DP-Adam: DP-SGD's noisy clipped gradients, Adam's update",
                      citation="Kingma & Ba, ICLR 2015 (Alg. 1); Abadi et al., CCS 2016 (Alg. 1)", updates=True)
def fit_dpadam(
    data: Privatiser, privacy: PrivacyTarget, rng: np.random.Generator, *,
    epochs: Annotated[float, Param("passes over the data; T = round(epochs n / B)", minimum=0,
                                   exclusive_minimum=True, maximum=1000)] = 2.0,
    batch_size: Annotated[float, Param("expected Poisson batch size B; q = B/n", minimum=1)] = 32.0,
    lr: Annotated[float, Param("Adam's step size", minimum=0, exclusive_minimum=True)] = 0.05,
    clip_norm: Annotated[float, Param("per-example L2 clipping norm C (the sensitivity)", minimum=0,
                                      exclusive_minimum=True, paper="Abadi et al. 2016, Alg. 1",
                                      role="clip_norm")] = 1.0,
    beta1: Annotated[float, Param("decay rate of the first-moment estimate m_t", minimum=0, maximum=0.9999,
                                  paper="Kingma & Ba 2015, Alg. 1")] = 0.9,
    beta2: Annotated[float, Param("decay rate of the second-moment estimate v_t", minimum=0, maximum=0.9999,
                                  paper="Kingma & Ba 2015, Alg. 1")] = 0.999,
    eps_adam: Annotated[float, Param("Adam's denominator constant", minimum=0, exclusive_minimum=True,
                                     paper="Kingma & Ba 2015, Alg. 1")] = 1e-8,
) -> np.ndarray:
    return data.noisy_sgd(epochs=epochs, batch_size=batch_size, lr=lr, clip_norm=clip_norm,
                          transform=adam(beta1, beta2, eps_adam))
