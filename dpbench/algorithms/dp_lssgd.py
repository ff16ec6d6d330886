"""DP-LSSGD: DP-SGD with Laplacian smoothing of the noisy gradient (Wang, Gu, Boedihardjo,
Barekat, Osher 2019, arXiv:1906.12056; paper 000 ref. [39]; docs/methods/dp-lssgd.md).

Per step, exactly DP-SGD's noisy gradient (`dpsgd`, `sgd.run_sgd`): Poisson sampling at rate
q = B/n, per-example clipping to C, N(0, (zC)^2 I) added to the clipped sum, division by the
expected batch size B, plus the data-independent regulariser gradient; then

    theta_{t+1} = Proj_r(theta_t - eta_t A_sigma^{-1} g~_t),   A_sigma = I - sigma Lap,

with Lap the 1-D periodic discrete Laplacian, (Lap v)_i = v_{i-1} - 2 v_i + v_{i+1} (indices mod
m). A_sigma is circulant, so A_sigma^{-1} v = ifft(fft(v) / (1 + 4 sigma sin^2(pi k / m))), computed
here with the real FFT (`smooth`). Noise is added *before* smoothing [X: BaoWangMath/DP-LSSGD
`RDP-Accountant/lssgd_dp.py`], so smoothing is post-processing and the privacy is DP-SGD's for
the same (q, z, T): z is calibrated with `dpsgd.dpsgd_noise_multiplier` and the ledger reports
the accountants' epsilon for it (claim "valid" whenever it is within the target, as for DP-SGD).

Choices:
* The operator is applied separately to each parameter tensor, as the reference code does
  (`blocks`): logistic/ridge regression one vector; the MLP W1 (flattened row-major), b1, w2,
  b2 (a block of length 1 is left unchanged: A_sigma = 1 there).
* The smoothed vector is the whole noisy gradient including the regulariser's gradient
  lambda theta (LS-SGD preconditions the full objective's gradient; both are post-processing).
* `smoothing` sigma = 0 skips the FFT (A_0 = I exactly), so the run is DP-SGD with the same
  random draws (`sgd.run_sgd` with the smoothing as its `transform`; that runs on the numpy path,
  so it equals DP-SGD's compiled loop to ~1e-12 rather than bit for bit).

Mechanism owner: dpbench, through DP-SGD's `fit_noisy_sgd` (the privatiser's `noisy_sgd`), the smoothing
being its `transform`: the same path a privatised plugin takes.
"""

from __future__ import annotations

from typing import Annotated, Callable

import numpy as np

from dpbench.algorithms.base import Fit, PrivacyTarget, Problem, algorithm
from dpbench.algorithms.dpsgd import (
    BatchSize,
    Calibration,
    ClipNorm,
    Epochs,
    LearningRate,
    LrSchedule,
    PaperC,
    Radius,
    TraceEvery,
    fit_noisy_sgd,
)
from dpbench.core.registry import Param
from dpbench.models.base import Model


def blocks(model: Model) -> list[slice]:
    """Contiguous slices of the flat theta, one per parameter tensor.

    Models with an `unpack` (the MLP: theta -> (W1, b1, w2, b2)) are probed with theta = 0..m-1,
    so the layout comes from the model itself; every other model is a single block. The slices
    are checked to tile [0, m) in order.
    """
    m = model.n_params
    unpack = getattr(model, "unpack", None)
    if unpack is None:
        return [slice(0, m)]
    out, start = [], 0
    for part in unpack(np.arange(m, dtype=float)):
        idx = np.atleast_1d(np.asarray(part)).ravel().astype(np.int64)
        if idx.size == 0:
            continue
        if idx[0] != start or not np.array_equal(idx, np.arange(start, start + idx.size)):
            raise ValueError(f"{model.name}.unpack does not return contiguous blocks in order")
        out.append(slice(start, start + idx.size))
        start += idx.size
    if start != m:
        raise ValueError(f"{model.name}.unpack blocks cover {start} of {m} parameters")
    return out


def smoothing_denominator(m: int, sigma: float) -> np.ndarray:
    """Eigenvalues 1 + 4 sigma sin^2(pi k / m), k = 0..floor(m/2), of A_sigma (rfft frequencies)."""
    k = np.arange(m // 2 + 1)
    return 1.0 + 4.0 * sigma * np.sin(np.pi * k / m) ** 2


def smooth(v: np.ndarray, sigma: float, denominator: np.ndarray | None = None) -> np.ndarray:
    """A_sigma^{-1} v for one vector (periodic 1-D Laplacian), by FFT; sigma = 0 returns v itself."""
    v = np.asarray(v, dtype=float)
    if sigma == 0.0 or v.size <= 1:
        return v
    den = smoothing_denominator(v.size, sigma) if denominator is None else denominator
    return np.fft.irfft(np.fft.rfft(v) / den, n=v.size)


def smoother(model: Model, sigma: float) -> Callable[[np.ndarray], np.ndarray]:
    """g -> blockwise A_sigma^{-1} g for this model's layout (denominators precomputed once)."""
    if not sigma >= 0:
        raise ValueError(f"smoothing must be >= 0, got {sigma}")
    if sigma == 0.0:
        return lambda g: g
    parts = [(sl, smoothing_denominator(sl.stop - sl.start, sigma)) for sl in blocks(model)]

    def apply(g: np.ndarray) -> np.ndarray:
        out = np.empty_like(g)
        for sl, den in parts:
            out[sl] = smooth(g[sl], sigma, den)
        return out

    return apply


@algorithm("dp_lssgd", title="DP-LSSGD: DP-SGD with Laplacian smoothing of the noisy gradient",
           citation="Wang, Gu, Boedihardjo, Barekat, Osher, DP-LSSGD: A Stochastic Optimization Method to Lift "
                    "the Utility in Privacy-Preserving ERM, arXiv:1906.12056 (2019); paper 000 ref. [39]",
           private=True, updates=True)
def fit_dp_lssgd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    smoothing: Annotated[float, Param("Laplacian smoothing sigma of A = I - sigma Lap (0: plain DP-SGD)",
                                      minimum=0)] = 1.0,
    epochs: Epochs = 1.0,
    batch_size: BatchSize = 64.0,
    lr: LearningRate = 0.5,
    lr_schedule: LrSchedule = "constant",
    clip_norm: ClipNorm = 1.0,
    calibration: Calibration = "rdp",
    paper_c: PaperC = 1.0,
    trace_every: TraceEvery = 0,
    radius: Radius = None,
) -> Fit:
    return fit_noisy_sgd(
        problem, privacy, rng, epochs=epochs, batch_size=batch_size, lr=lr, lr_schedule=lr_schedule,
        clip_norm=clip_norm, calibration=calibration, paper_c=paper_c, radius=radius, trace_every=trace_every,
        transform=smoother(problem.model, float(smoothing)), **ledger_details(problem.model, smoothing))


def ledger_details(model: Model, smoothing: float) -> dict:
    """What DP-LSSGD's ledger says beyond DP-SGD's (`dpsgd.noisy_sgd_plan`'s mechanism and details)."""
    return {"mechanism": "Poisson-subsampled Gaussian composed over T steps (DP-SGD), then Laplacian smoothing "
                         "(post-processing)",
            "smoothing": float(smoothing), "smoothing_blocks": [sl.stop - sl.start for sl in blocks(model)]}
