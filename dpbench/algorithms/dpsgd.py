"""DP-SGD (Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, CCS 2016, Algorithm 1).

Per step: Poisson sampling at rate q = B/n, per-example clipping to L2 norm C, Gaussian noise
N(0, (zC)^2 I) on the clipped sum, division by the expected batch size B, a gradient step
(`sgd.run_sgd`). Batch size 1 gives the single-example form of paper 000 eq. (2).

Privacy: each step is a Poisson-subsampled Gaussian mechanism with add/remove-one sensitivity C
(clipping makes this hold for any model, the MLP included). T steps are composed by an
accountant from `dp-accounting` and z is calibrated numerically to the target (epsilon, delta)
(`calibration: rdp` default, or `pld`); epsilon is then reported by both the RDP and the PLD
accountant. `calibration: paper` instead uses the closed form sigma = c G sqrt(T log(1/delta))
/ (n eps) of paper 000 eq. (2) (c is never given there; `paper_c`, default 1) as the std of the
noise on the averaged gradient; the ledger then reports what the accountants say that noise
actually buys, and the claim is "valid" only if it is within the target.

Choices where the papers are silent: Poisson sampling (the analysed mechanism, not shuffled
lots), final iterate returned, constant step size unless `lr_schedule` says otherwise, no
projection unless `radius` is set, theta_0 from the model's init.

Mechanism owner: dpbench. `fit_noisy_sgd` is the code the privatiser's `noisy_sgd` runs for a privatised
plugin (`dpbench.algorithms.privatiser`), so DP-SGD and a plugin on that path share one mechanism.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Callable

import numpy as np

from dpbench.algorithms.base import MAX_EPOCHS, Fit, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.sgd import LR_SCHEDULES, run_sgd, steps_for, training_loss_trace
from dpbench.core.ledger import Adjacency, Ledger
from dpbench.core.registry import Param
from dpbench.privacy import calibrate_dpsgd_noise, dpsgd_epsilon_report, paper_dpsgd_sigma
from dpbench.privacy.events import dpsgd_event_json

CALIBRATIONS = ("rdp", "pld", "paper")


# The hyperparameters of DP-SGD, declared once for `dpsgd` and the variants whose privacy is DP-SGD's.
Epochs = Annotated[float, Param("passes over the data; T = round(epochs * n / batch_size)",
                                minimum=0, exclusive_minimum=True, maximum=MAX_EPOCHS)]
BatchSize = Annotated[float, Param("expected (Poisson) batch size B; q = B/n", minimum=1)]
LearningRate = Annotated[float, Param("step size", minimum=0, exclusive_minimum=True)]
LrSchedule = Annotated[str, Param("step-size schedule", choices=LR_SCHEDULES)]
ClipNorm = Annotated[float, Param("per-example L2 clipping norm C (the sensitivity)", minimum=0, exclusive_minimum=True,
                                  paper="Abadi et al. Alg. 1", role="clip_norm")]
Calibration = Annotated[str, Param("noise calibration: rdp or pld accountant, or paper 000's closed form eq. (2)",
                                   choices=CALIBRATIONS, paper="paper 000 eq. (2)")]
PaperC = Annotated[float, Param("the unspecified constant c of paper 000 eq. (2) (calibration: paper)",
                                minimum=0, exclusive_minimum=True, paper="paper 000 eq. (2)")]
TraceEvery = Annotated[int, Param("record the training loss every this many steps (0: no trace)", minimum=0)]
Radius = Annotated[float | None, Param("project iterates onto the L2 ball of this radius (none: no projection)",
                                       minimum=0, exclusive_minimum=True)]


def dpsgd_noise_multiplier(
    privacy: PrivacyTarget, *, sampling_rate: float, steps: int, calibration: str, clip_norm: float,
    batch_size: float, n: int, paper_c: float = 1.0,
) -> float:
    """Noise multiplier z (noise std on the clipped sum / C) for the chosen calibration."""
    if calibration in ("rdp", "pld"):
        return calibrate_dpsgd_noise(privacy.epsilon, privacy.delta, sampling_rate, steps, accountant=calibration)
    if calibration == "paper":
        sigma_mean = paper_dpsgd_sigma(clip_norm, steps, n, privacy.epsilon, privacy.delta, c=paper_c)
        return sigma_mean * batch_size / clip_norm
    raise ValueError(f"unknown calibration {calibration!r}; choose one of {', '.join(CALIBRATIONS)}")


DPSGD_MECHANISM = "Poisson-subsampled Gaussian composed over T steps (DP-SGD)"


@dataclass(frozen=True)
class NoisySGDPlan:
    """What DP-SGD's calibration fixes before any step runs: the same for every training of one
    problem at one setting (`noisy_sgd_plan`; shared by the single fit and its vectorised twin)."""

    batch_size: float  # expected (Poisson) batch size B, at most n
    rate: float  # sampling rate q = B / n
    steps: int  # T
    noise_multiplier: float  # z
    clip_norm: float  # C
    ledger: Ledger

    @property
    def noise_std(self) -> float:
        """Std z C of the Gaussian on the sum of clipped gradients."""
        return self.noise_multiplier * self.clip_norm


def noisy_sgd_plan(
    n: int,
    privacy: PrivacyTarget,
    *,
    epochs: float,
    batch_size: float,
    clip_norm: float,
    calibration: str,
    paper_c: float,
    mechanism: str = DPSGD_MECHANISM,
    **ledger_details,
) -> NoisySGDPlan:
    """DP-SGD's steps, noise calibration and ledger for n rows (no random draws, no training)."""
    batch_size = min(float(batch_size), float(n))
    q = batch_size / n
    steps = steps_for(epochs, batch_size, n)
    z = dpsgd_noise_multiplier(privacy, sampling_rate=q, steps=steps, calibration=calibration,
                               clip_norm=clip_norm, batch_size=batch_size, n=n, paper_c=paper_c)
    spent = dpsgd_epsilon_report(z, q, steps, privacy.delta)
    within = min(spent.values()) <= privacy.epsilon * (1 + 1e-9)
    record = ledger(
        private=True,
        mechanism=mechanism,
        claim="valid" if within else "paper-only",
        target_epsilon=privacy.epsilon,
        delta=privacy.delta,
        epsilon_spent=spent,
        adjacency=Adjacency.ADD_REMOVE,
        sensitivity=clip_norm,
        event=dpsgd_event_json(z, q, steps),
        sampling={"kind": "poisson", "rate": q, "expected_batch": batch_size},
        steps=steps,
        noise_multiplier=z,
        noise_std_sum=z * clip_norm,
        noise_std_mean_gradient=z * clip_norm / batch_size,
        calibration=calibration,
        **ledger_details,
    )
    return NoisySGDPlan(batch_size=batch_size, rate=q, steps=steps, noise_multiplier=z, clip_norm=clip_norm,
                        ledger=record)


def fit_noisy_sgd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    epochs: float,
    batch_size: float,
    lr: float,
    lr_schedule: str,
    clip_norm: float,
    calibration: str,
    paper_c: float,
    radius: float | None,
    trace_every: int,
    transform: Callable[[np.ndarray], np.ndarray] | None = None,
    mechanism: str = DPSGD_MECHANISM,
    **ledger_details,
) -> Fit:
    """DP-SGD's calibration, loop and ledger; `transform` post-processes each noisy gradient.

    Shared by `dpsgd` and the DP-SGD variants whose privacy is DP-SGD's (DP-LSSGD).
    """
    plan = noisy_sgd_plan(problem.n, privacy, epochs=epochs, batch_size=batch_size, clip_norm=clip_norm,
                          calibration=calibration, paper_c=paper_c, mechanism=mechanism, **ledger_details)
    theta, trace = run_sgd(problem, rng, steps=plan.steps, batch_size=plan.batch_size, lr=lr,
                           lr_schedule=lr_schedule, clip_norm=clip_norm, noise_std=plan.noise_std, radius=radius,
                           trace_every=trace_every, on_trace=training_loss_trace(problem), transform=transform)
    return Fit(theta=theta, trace=trace, privacy=plan.ledger)


@algorithm("dpsgd", title="DP-SGD: per-example clipping, Poisson sampling, Gaussian noise",
           citation="Abadi et al., Deep Learning with Differential Privacy, CCS 2016 (Alg. 1); paper 000 eq. (2)",
           private=True, updates=True)
def fit_dpsgd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
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
    return fit_noisy_sgd(problem, privacy, rng, epochs=epochs, batch_size=batch_size, lr=lr,
                         lr_schedule=lr_schedule, clip_norm=clip_norm, calibration=calibration, paper_c=paper_c,
                         radius=radius, trace_every=trace_every)
