"""DP-SGD plugins that own their loop, each with one bug of a kind found in real DP code (`bug=`), for
the tests of the run's label and of `dpbench verify`. Each claims "valid" with DP-SGD's ledger for the
target (epsilon, delta); buggy_dpsgd.py (beside this file) holds the bugs of the same loop with `updates=True`.

  quiet (algorithm `quiet_dpsgd`, updates=False): a quarter of DP-SGD's noise and no step reported;
      the ledger composes T steps (true epsilon ~13 at a nominal 1 on Breast Cancer).
  leak (`leaky_dpsgd`): honest DP-SGD, every step reported, but the ledger carries five training rows
      and the last un-noised gradient, and the trace the rows of each traced batch.
  other_delta_q (`shifted_dpsgd`): z calibrated at delta = 1e-3, and the sampling rate the ledger and
      every step declare lowered to the q' at which that z meets the target delta; batches are drawn
      at the true q (true epsilon ~1.4 at a nominal 1).
"""

import numpy as np
from scipy import optimize

from dpbench.algorithms import Fit, PrivacyTarget, Problem, algorithm, ledger, noisy_sgd_plan
from dpbench.algorithms.dpsgd import BatchSize, ClipNorm, Epochs, LearningRate  # DP-SGD's declarations
from dpbench.algorithms.releases import release
from dpbench.core.ledger import Adjacency
from dpbench.privacy import dpsgd_epsilon_report
from dpbench.privacy.events import dpsgd_event_json



def _ledger(privacy: PrivacyTarget, z: float, q: float, steps: int, clip_norm: float, B: float, **extra) -> dict:
    return ledger(private=True, mechanism="Poisson-subsampled Gaussian over T steps (DP-SGD)", claim="valid",
                  target_epsilon=privacy.epsilon, delta=privacy.delta,
                  epsilon_spent=dpsgd_epsilon_report(z, q, steps, privacy.delta), adjacency=Adjacency.ADD_REMOVE,
                  sensitivity=clip_norm, event=dpsgd_event_json(z, q, steps),
                  sampling={"kind": "poisson", "rate": q, "expected_batch": B}, steps=steps, noise_multiplier=z,
                  **extra)


def _plan(problem: Problem, privacy: PrivacyTarget, epochs: float, batch_size: float, clip_norm: float):
    """DP-SGD's B, q, T, z and ledger for the target (`noisy_sgd_plan`, the built-in's calibration)."""
    return noisy_sgd_plan(problem.n, privacy, epochs=epochs, batch_size=batch_size, clip_norm=clip_norm,
                          calibration="rdp", paper_c=1.0)


def _loop(problem, rng, *, rate, sigma, steps, lr, clip_norm, B, report=None, trace_rows=False):
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    theta = model.init(rng)
    trace, clean = [], None
    for t in range(1, steps + 1):
        batch = rng.random(n) < rate
        clean, _ = model.clipped_grad_sum(theta, X[batch], y[batch], clip_norm)
        noisy = clean + rng.normal(0.0, sigma, size=theta.shape)
        if report is not None:
            report(t, theta, noisy / B)
        if trace_rows and t % 10 == 0:
            trace.append({"step": t, "theta": theta.copy(), "rows": X[batch].tolist()})
        theta = theta - lr * (noisy / B + model.reg_grad(theta))
    return theta, trace, clean


@algorithm("quiet_dpsgd", title="DP-SGD with a quarter of the noise, no step reported (tests)", citation="none",
           private=True, updates=False)
def quiet(problem: Problem, privacy: PrivacyTarget, rng: np.random.Generator, *, epochs: Epochs = 2.0,
          batch_size: BatchSize = 32.0, lr: LearningRate = 0.5, clip_norm: ClipNorm = 1.0) -> Fit:
    plan = _plan(problem, privacy, epochs, batch_size, clip_norm)
    theta, _, _ = _loop(problem, rng, rate=plan.rate, sigma=plan.noise_std / 4, steps=plan.steps, lr=lr,
                        clip_norm=clip_norm, B=plan.batch_size)
    return Fit(theta=theta, privacy=plan.ledger)


@algorithm("leaky_dpsgd", title="DP-SGD writing rows into its ledger and trace (tests)", citation="none",
           private=True, updates=True)
def leak(problem: Problem, privacy: PrivacyTarget, rng: np.random.Generator, *, epochs: Epochs = 2.0,
         batch_size: BatchSize = 32.0, lr: LearningRate = 0.5, clip_norm: ClipNorm = 1.0) -> Fit:
    plan = _plan(problem, privacy, epochs, batch_size, clip_norm)
    theta, trace, clean = _loop(
        problem, rng, rate=plan.rate, sigma=plan.noise_std, steps=plan.steps, lr=lr, clip_norm=clip_norm,
        B=plan.batch_size, trace_rows=True,
        report=lambda t, th, r: release(t, th, r, plan.noise_std, rate=plan.rate, clip_norm=clip_norm,
                                        weight=1.0 / plan.batch_size))
    return Fit(theta=theta, trace=trace, privacy=plan.ledger.with_details(rows=problem.X[:5].tolist(),
                                                                          clean_gradient=clean.tolist()))


def lowered_rate(z: float, q: float, steps: int, epsilon: float, delta: float) -> float:
    """The q' <= q at which T Gaussian steps of multiplier z meet (epsilon, delta) (q itself if they do)."""
    def excess(rate: float) -> float:
        return min(dpsgd_epsilon_report(z, rate, steps, delta).values()) - epsilon

    return q if excess(q) <= 0 else float(optimize.brentq(excess, 1e-6, q, xtol=1e-9)) * (1 - 1e-6)  # just inside


@algorithm("shifted_dpsgd", title="DP-SGD calibrated at delta 1e-3, its rate lowered to match (tests)",
           citation="none", private=True, updates=True)
def shifted(problem: Problem, privacy: PrivacyTarget, rng: np.random.Generator, *, epochs: Epochs = 2.0,
            batch_size: BatchSize = 32.0, lr: LearningRate = 0.5, clip_norm: ClipNorm = 1.0) -> Fit:
    plan = _plan(problem, PrivacyTarget(epsilon=privacy.epsilon, delta=1e-3), epochs, batch_size, clip_norm)
    said = lowered_rate(plan.noise_multiplier, plan.rate, plan.steps, privacy.epsilon, privacy.delta)
    B = plan.batch_size
    theta, _, _ = _loop(
        problem, rng, rate=plan.rate, sigma=plan.noise_std, steps=plan.steps, lr=lr, clip_norm=clip_norm, B=B,
        report=lambda t, th, r: release(t, th, r, plan.noise_std, rate=said, clip_norm=clip_norm, weight=1.0 / B))
    return Fit(theta=theta, privacy=_ledger(privacy, plan.noise_multiplier, said, plan.steps, clip_norm, B))
