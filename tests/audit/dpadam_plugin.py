"""DP-Adam as a plugin built from dpbench's public SGD-family blocks: DP-SGD's calibrated,
Poisson-sampled, clipped noisy gradients (`fit_noisy_sgd`), each turned into an Adam direction by
`transform` (Kingma & Ba 2015, bias-corrected moments). The direction is a function of the noisy
gradients alone, post-processing, so the privacy is DP-SGD's, and every noisy step is reported."""
from typing import Annotated

import numpy as np

from dpbench.algorithms import Fit, Param, PrivacyTarget, Problem, algorithm, fit_noisy_sgd


def adam_direction(beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
    """A fresh Adam state: each call takes the next noisy gradient and returns the update direction."""
    state = {"t": 0, "m": 0.0, "v": 0.0}

    def direction(g: np.ndarray) -> np.ndarray:
        state["t"] += 1
        state["m"] = beta1 * state["m"] + (1 - beta1) * g
        state["v"] = beta2 * state["v"] + (1 - beta2) * g * g
        m_hat = state["m"] / (1 - beta1 ** state["t"])
        v_hat = state["v"] / (1 - beta2 ** state["t"])
        return m_hat / (np.sqrt(v_hat) + eps)

    return direction


@algorithm("dpadam_example", title="DP-Adam (DP-SGD's noisy gradients, Adam's update)",
           citation="Abadi et al. 2016; Kingma & Ba 2015", private=True, updates=True)
def fit(problem: Problem, privacy: PrivacyTarget, rng: np.random.Generator, *,
        epochs: Annotated[float, Param("passes over the data", minimum=0, exclusive_minimum=True)] = 2.0,
        batch_size: Annotated[float, Param("expected Poisson batch size B", minimum=1)] = 32.0,
        lr: Annotated[float, Param("step size", minimum=0, exclusive_minimum=True)] = 0.05,
        clip_norm: Annotated[float, Param("per-example clipping norm C", minimum=0, exclusive_minimum=True,
                                          role="clip_norm")] = 1.0) -> Fit:
    return fit_noisy_sgd(problem, privacy, rng, epochs=epochs, batch_size=batch_size, lr=lr, lr_schedule="constant",
                         clip_norm=clip_norm, calibration="rdp", paper_c=1.0, radius=None, trace_every=0,
                         transform=adam_direction(), mechanism="DP-SGD's noisy gradients, Adam's update (DP-Adam)")
