"""The JAX twins: the families of the optional JAX path, each a batched fit on `dpbench.on_jax.loops`
(`--device gpu` / `jax-cpu`, `dpbench.on_jax.device`).

  dpsgd                   DP-SGD (Abadi et al. 2016, Alg. 1), Poisson sampling; replicas may differ in
                          epsilon and lr
  dp_lssgd                DP-LSSGD (Wang et al. 2019): DP-SGD's loop, each step's direction smoothed by
                          A_sigma^{-1} per parameter block with the FFT (post-processing); as dpsgd
  dp_gd                   full-batch DP-GD (Wang, Ye, Xu 2017); replicas may differ in epsilon and lr
  output_perturbation_gd  the noise-free projected GD of [S2] Alg. 1 on the device, then the numpy
                          path's own release (its noise drawn on the CPU); replicas may differ in epsilon,
                          epochs, lr, l2, radius and lipschitz_bound
  input_perturbation      [S3] Alg. 1 with shared noise: z_r drawn on the CPU as the numpy path draws it,
                          the T full-batch GD steps on X + z_r on the device; replicas may differ in
                          epsilon, epochs and lr

on logistic regression, ridge regression and the MLP (`dpbench.on_jax.forms`), without a trace
(`trace_every` = 0), DP-SGD and DP-LSSGD at an expected batch of at least `MIN_BATCH` rows. Everything
else -- the other algorithms, per-example input noise, traces, plugin algorithms -- runs on the CPU path
in the same run: PIDP-SGD and the batch-1 methods take one row a step, where a GPU's launch latency
loses to the compiled CPU loop; objective perturbation, Bolt-on, the robust and sample-and-aggregate
methods are not gradient loops of this shape; a plugin's per-step `transform` is Python code.

What a twin shares with the numpy path: every calibration, plan and ledger is the numpy path's own
(`dpsgd.noisy_sgd_plan`, `gradient_perturbation.dp_gd_plan`, `output_perturbation.plan_output_gd`,
`input_perturbation`'s calibration), computed on the CPU, so the ledgers are identical and the
accounting never runs on the accelerator; the noisy loops report their steps in bulk
(`releases.released_steps`, replica r with its own noise std), so the run-time release check compares
them with the ledger as it does the numpy path's. What differs: replica r draws `model.init(rng_r)` from
its numpy Generator as the single fit does, then two uint32 words that seed its JAX key; every
sampling mask and noise vector after that is JAX's (`dpbench.on_jax.loops`). Output and input
perturbation draw all their noise on the CPU from the numpy Generator, exactly as the numpy path does,
so their results equal the numpy path's up to float rounding.

Observers: the JAX loops cannot report each step's arrays (`releases.observing`), so a twin refuses to
run while somebody observes; audits of every update run on the numpy path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from dpbench.algorithms import releases
from dpbench.algorithms.base import Fit, FitFunction, PrivacyTarget, Problem, hyperparameters
from dpbench.algorithms.dp_lssgd import blocks as lssgd_blocks
from dpbench.algorithms.dp_lssgd import fit_dp_lssgd, smoothing_denominator
from dpbench.algorithms.dp_lssgd import ledger_details as lssgd_details
from dpbench.algorithms.dpsgd import fit_dpsgd, noisy_sgd_plan
from dpbench.algorithms.gradient_perturbation import dp_gd_plan, fit_dp_gd
from dpbench.algorithms.input_perturbation import _calibration as input_calibration
from dpbench.algorithms.input_perturbation import _fit as input_fit
from dpbench.algorithms.input_perturbation import fit_input_perturbation, perturb_noise
from dpbench.algorithms.output_perturbation import _release as output_release
from dpbench.algorithms.output_perturbation import _target as output_target
from dpbench.algorithms.output_perturbation import _training_rows, fit_output_perturbation_gd, plan_output_gd
from dpbench.algorithms.sgd import learning_rates
from dpbench.algorithms.vectorised_fits import agreed, batch_hyperparameters, once_each
from dpbench.models.linear import LogisticRegression, RidgeRegression
from dpbench.models.mlp import MLP
from dpbench.on_jax import device as jax_device

#: the model classes with a JAX form (`dpbench.on_jax.forms.jax_form`; importing it needs JAX)
MODEL_CLASSES = (LogisticRegression, RidgeRegression, MLP)

BatchFit = Callable[[Problem, Sequence[PrivacyTarget], Sequence[np.random.Generator], Sequence[dict]], list[Fit]]


@dataclass(frozen=True)
class JaxTwin:
    """A family on the JAX path: its batched fit (`base.batched`'s contract, on the device) and the
    hyperparameters in which the replicas of one call may differ."""

    fit: FitFunction
    batch: BatchFit
    varying: tuple[str, ...]
    applies: Callable[[dict], bool] = lambda params: not params.get("trace_every")

    def many(self, problem: Problem, privacy: PrivacyTarget, rngs: Sequence[np.random.Generator],
             **hyper: Any) -> list[Fit]:
        """R trainings of one setting (an audit's trials): the batched fit with equal replicas."""
        rngs = list(rngs)
        return self.batch(problem, [privacy] * len(rngs), rngs, [dict(hyper)] * len(rngs))


def _device():
    device = jax_device.current()
    if not jax_device.uses_jax(device):
        raise RuntimeError("a JAX twin runs inside jax_device.on('gpu' | 'jax-cpu')")
    if releases._observed():
        raise RuntimeError("the JAX path reports its steps in bulk only; an observer of every step needs the "
                           "numpy path (--device cpu)")
    return jax_device.activate(device)


def _replicas(fit: FitFunction, privacies, rngs, params, varying: Sequence[str]):
    """(device, privacies, rngs, hyperparameters) of one batched call: the JAX device (`_device`), the
    replicas as lists, each replica's hyperparameters checked equal outside `varying`."""
    device = _device()
    return device, list(privacies), list(rngs), batch_hyperparameters(fit, params, varying=varying)


def _starts(problem: Problem, rngs: Sequence[np.random.Generator]) -> tuple[np.ndarray, np.ndarray]:
    """Each replica's model.init (drawn as the single fit draws it), then its JAX key (two uint32 words)."""
    theta0 = np.stack([np.asarray(problem.model.init(rng), dtype=np.float64) for rng in rngs])
    keys = np.stack([rng.integers(0, 2**32, size=2, dtype=np.uint32) for rng in rngs])
    return theta0, keys


def _noisy_sgd(fit: FitFunction, problem: Problem, privacies: Sequence[PrivacyTarget],
               rngs: Sequence[np.random.Generator], params: Sequence[dict],
               smoothing: Callable[[dict], tuple[dict, list]] | None = None) -> list[Fit]:
    """DP-SGD's loop (`dpsgd.fit_noisy_sgd`) of R replicas on the device: each replica its own noise
    multiplier and step size, the same steps, batch size and clipping norm. `smoothing(hyper)`: DP-LSSGD's
    ledger details and (block, denominator) pairs (`dp_lssgd`), its direction smoothed each step."""
    device, privacies, rngs, hypers = _replicas(fit, privacies, rngs, params, ("lr",))
    if not rngs:
        return []
    h, n = hypers[0], problem.n
    details, blocks = smoothing(h) if smoothing is not None else ({}, [])
    plans = once_each(privacies, lambda r: noisy_sgd_plan(
        n, privacies[r], epochs=h["epochs"], batch_size=h["batch_size"], clip_norm=h["clip_norm"],
        calibration=h["calibration"], paper_c=h["paper_c"], **details))
    agreed(plans, ("steps", "batch_size"))
    q = min(1.0, plans[0].batch_size / n)  # as `sgd.run_sgd` derives it
    per_epoch = max(1.0, n / plans[0].batch_size)
    lrs = np.stack([learning_rates(hr["lr"], h["lr_schedule"], np.arange(plans[0].steps), per_epoch)
                    for hr in hypers])
    std = np.array([max(0.0, p.noise_std) for p in plans])
    theta0, keys = _starts(problem, rngs)
    from dpbench.on_jax.loops import noisy_descent

    Theta = noisy_descent(problem.model, problem.X, problem.y, theta0, keys, std, lrs, rate=q,
                          clip_norm=h["clip_norm"], sum_divisor=1.0, grad_divisor=q * n, radius=h["radius"],
                          device=device, smoothing=blocks)
    releases.released_steps(plans[0].steps, std, rate=q, clip_norm=h["clip_norm"], replicas=len(rngs))
    return [Fit(theta=Theta[r].copy(), privacy=plans[r].ledger, trace=[]) for r in range(len(rngs))]


def _dpsgd_batch(problem: Problem, privacies: Sequence[PrivacyTarget], rngs: Sequence[np.random.Generator],
                 params: Sequence[dict]) -> list[Fit]:
    """DP-SGD (`dpsgd.fit_dpsgd`, Abadi et al. 2016 Alg. 1) of R replicas on the device (`_noisy_sgd`)."""
    return _noisy_sgd(fit_dpsgd, problem, privacies, rngs, params)


def _dp_lssgd_batch(problem: Problem, privacies: Sequence[PrivacyTarget], rngs: Sequence[np.random.Generator],
                    params: Sequence[dict]) -> list[Fit]:
    """DP-LSSGD (`dp_lssgd.fit_dp_lssgd`, Wang et al. 2019): DP-SGD's loop on the device with each step's
    direction smoothed by A_sigma^{-1} per parameter block (post-processing), DP-SGD's ledger plus its details."""
    model = problem.model

    def smoothing(h: dict) -> tuple[dict, list]:
        sigma = float(h["smoothing"])
        pairs = [] if sigma == 0.0 else [(sl, smoothing_denominator(sl.stop - sl.start, sigma))
                                         for sl in lssgd_blocks(model)]
        return lssgd_details(model, sigma), pairs

    return _noisy_sgd(fit_dp_lssgd, problem, privacies, rngs, params, smoothing)


def _dp_gd_batch(problem: Problem, privacies: Sequence[PrivacyTarget], rngs: Sequence[np.random.Generator],
                 params: Sequence[dict]) -> list[Fit]:
    """Full-batch DP-GD (`gradient_perturbation.fit_dp_gd`) of R replicas on the device: each its own
    noise std and step size, the same steps and clipping norm."""
    device, privacies, rngs, hypers = _replicas(fit_dp_gd, privacies, rngs, params, ("lr",))
    if not rngs:
        return []
    h, n = hypers[0], problem.n
    plans = once_each([(p, hr["lr"]) for p, hr in zip(privacies, hypers)], lambda r: dp_gd_plan(
        problem.model, n, privacies[r], epochs=h["epochs"], lr=hypers[r]["lr"], radius=h["radius"],
        clip_norm=h["clip_norm"], calibration=h["calibration"], c=h["c"]))
    agreed(plans, ("steps", "clip_norm"))
    steps, C = plans[0].steps, plans[0].clip_norm
    lrs = np.stack([np.full(steps, float(hr["lr"])) for hr in hypers])
    s = np.array([p.noise_std for p in plans])
    theta0, keys = _starts(problem, rngs)
    from dpbench.on_jax.loops import noisy_descent

    Theta = noisy_descent(problem.model, problem.X, problem.y, theta0, keys, s, lrs, rate=1.0, clip_norm=C,
                          sum_divisor=float(n), grad_divisor=1.0, radius=h["radius"], device=device)
    releases.released_steps(steps, s * n, rate=1.0, clip_norm=C, weight=1.0 / n, replicas=len(rngs))
    return [Fit(theta=Theta[r].copy(), privacy=plans[r].ledger, trace=[]) for r in range(len(rngs))]


OUTPUT_VARYING = ("epochs", "lr", "l2", "radius", "lipschitz_bound")


def _output_batch(problem: Problem, privacies: Sequence[PrivacyTarget], rngs: Sequence[np.random.Generator],
                  params: Sequence[dict]) -> list[Fit]:
    """Output perturbation of projected full-batch GD ([S2] Alg. 1): the descents on the device (one
    call per set of training rows), each replica's release on the CPU (`output_perturbation._release`)."""
    device, privacies, rngs, hypers = _replicas(fit_output_perturbation_gd, privacies, rngs, params, OUTPUT_VARYING)
    targets = [output_target(p) for p in privacies]
    plans = [plan_output_gd(problem.model, problem.n, **h) for h in hypers]
    starts = np.stack([np.asarray(problem.model.init(rng), dtype=np.float64) for rng in rngs]) if rngs else None
    thetas: dict[int, np.ndarray] = {}
    rows: dict[int, dict] = {}
    from dpbench.on_jax.loops import plain_descent

    for constants in sorted({p.constants for p in plans}):
        members = [r for r, p in enumerate(plans) if p.constants == constants]
        trained, details = _training_rows(problem, plans[members[0]])
        X = np.asarray(trained.X, dtype=np.float64)
        Theta = plain_descent(trained.model, X, trained.y, starts[members], np.zeros((len(members), X.shape[1])),
                              [plans[r].lr for r in members], [plans[r].l2 for r in members],
                              [plans[r].radius for r in members], [plans[r].steps for r in members], device=device)
        for i, r in enumerate(members):
            thetas[r], rows[r] = Theta[i], details
    return [output_release(problem.model, plans[r], thetas[r], rngs[r], *targets[r], rows[r])
            for r in range(len(rngs))]


#: DP-SGD with a smaller expected batch stays on the CPU path: a step of a few rows is one kernel launch
#: and a Bernoulli draw over all n rows on the device, against ~2 microseconds in the compiled CPU loop
#: (one H200: 16k batch-1 steps/s with JAX, 552k on one CPU thread)
MIN_BATCH = 16


def _dpsgd_applies(params: dict) -> bool:
    return not params.get("trace_every") and float(params["batch_size"]) >= MIN_BATCH


def _input_applies(params: dict) -> bool:
    return not params.get("trace_every") and params.get("noise", "shared") == "shared"


def _input_batch(problem: Problem, privacies: Sequence[PrivacyTarget], rngs: Sequence[np.random.Generator],
                 params: Sequence[dict]) -> list[Fit]:
    """Input perturbation ([S3] Alg. 1) with shared noise: z_r and the start drawn on the CPU in the
    single fit's order, the T_r GD steps on X + z_r on the device."""
    device, privacies, rngs, hypers = _replicas(fit_input_perturbation, privacies, rngs, params, ("epochs", "lr"))
    if not rngs:
        return []
    if not _input_applies(hypers[0]):
        raise ValueError("input_perturbation runs on the JAX path with noise: shared and no trace only")
    model, n, d = problem.model, problem.n, problem.X.shape[1]
    calibrations = [input_calibration(model, n, p, h["epochs"], h["c"], h["theorem"])
                    for p, h in zip(privacies, hypers)]
    Z = np.empty((len(rngs), d))
    theta0 = np.empty((len(rngs), model.n_params))
    for r, (rng, (sigma, *_)) in enumerate(zip(rngs, calibrations)):
        Z[r] = perturb_noise(d, sigma, rng)  # the single fit's order: z, then the start
        theta0[r] = model.init(rng)
    from dpbench.on_jax.loops import plain_descent

    Theta = plain_descent(model, problem.X, problem.y, theta0, Z, [h["lr"] for h in hypers],
                          [model.l2] * len(rngs), [None] * len(rngs), [int(h["epochs"]) for h in hypers],
                          device=device)
    return [input_fit(model, p, Theta[r].copy(), [], Z[r], sigma=sigma, strong=strong, G=G, constants=constants,
                      epochs=int(h["epochs"]), lr=h["lr"], noise=h["noise"], c=h["c"], theorem=h["theorem"])
            for r, (p, h, (sigma, strong, G, constants)) in enumerate(zip(privacies, hypers, calibrations))]


#: algorithm name -> its JAX twin
TWINS: dict[str, JaxTwin] = {
    "dpsgd": JaxTwin(fit_dpsgd, _dpsgd_batch, ("lr",), _dpsgd_applies),
    "dp_lssgd": JaxTwin(fit_dp_lssgd, _dp_lssgd_batch, ("lr",), _dpsgd_applies),
    "dp_gd": JaxTwin(fit_dp_gd, _dp_gd_batch, ("lr",)),
    "output_perturbation_gd": JaxTwin(fit_output_perturbation_gd, _output_batch, OUTPUT_VARYING),
    "input_perturbation": JaxTwin(fit_input_perturbation, _input_batch, ("epochs", "lr"), _input_applies),
}


def twin(algorithm: str) -> JaxTwin | None:
    """The JAX twin of a registered algorithm, or None."""
    return TWINS.get(algorithm)


def on_jax(algorithm: str, model_class: type | None, params: dict) -> bool:
    """Whether a cell of `algorithm` on a model of `model_class` with these hyperparameters runs on the
    JAX path (a JAX twin, a model with a JAX form, and the settings the twin handles)."""
    found = TWINS.get(algorithm)
    if found is None or model_class not in MODEL_CLASSES:
        return False
    return found.applies(hyperparameters(found.fit, dict(params)))


__all__ = ["MIN_BATCH", "JaxTwin", "MODEL_CLASSES", "OUTPUT_VARYING", "TWINS", "on_jax", "twin"]
