"""Benchmarks of the optional JAX path (`dpbench bench --device gpu` or `jax-cpu`), beside the numpy path.

`dpbench bench --device D` runs these suites on device D (`dpbench.on_jax.device`; gpu: the first GPU
JAX sees, jax-cpu: JAX's CPU build) together with the numpy path's steps suite at the same shapes, in
one process, and writes the records to the same JSON as `dpbench.bench.suites` (machine info plus the
device's description). The shapes are those of a hand-written JAX DP-SGD (a `jax.jit` over a `lax.scan`
of 1,000 steps of per-example `vmap(grad)`, clipping, Poisson mask and noise, float64), so anyone with
a GPU can re-measure the table.

Every JAX timing is preceded by one untimed warm-up call at exactly the shapes timed (what `jax.jit`
specialises to: rows, capacity, replica block), so compilation never counts in a throughput; it is
reported beside it as `compile_seconds` = the warm-up's time less the best timed call's (compilation
plus the first call's other one-off costs). Every record has `path` ("jax" or "numpy") and `device`
(`device.describe`: e.g. "gpu: NVIDIA H100 80GB HBM3 (jax 0.10.2)"; the numpy path's "cpu: numpy/numba").

  steps  (`jax_steps_suite`) one replica of `on_jax.loops.noisy_descent` -- DP-SGD steps: Poisson
         sampling from all n rows at rate B/n, per-example gradients, clipping to C = 1, Gaussian
         noise z C (z = 1), update (lr 0.1), as in `suites.steps_suite` -- T = 1,000 steps in one jitted
         scan, on the Adult-sized data (`suites.adult_sized`: n = 45,222, d = 105), logreg and the MLP
         105 -> 105 -> 1, B in {1, 256, 1024}; examples/s = B T / seconds (expected batch rows),
         steps/s = T / seconds. The CLI puts `suites.steps_suite` at the same models and batch sizes
         beside it (its `path` "compiled" or "numpy").
  many   (`jax_many_suite`) `fits` (10,000) independent DP-SGD trainings of logistic regression
         (`twins.twin("dpsgd").many`: one jit of the scan, vmapped over the replicas) on 400 random
         rows x 31 features (`suites.audit_sized`), 100 steps at batch 200 (q = 1/2, epochs 50), clip
         0.1, (epsilon, delta) = (1, 1e-5), lr 0.5; trainings/s (`fits_per_s`) and seconds. Beside it, the
         numpy path's vectorised twin (`algorithms.get("dpsgd").fit_many`) at the same shapes for
         min(fits, 1,000) trainings, in the same run.
  audit  (`jax_audit_suite`) a whole final-model audit (`audit.multi_run.run_audit`, device D) of
         DP-SGD with the spare_feature canary on 400 Breast Cancer rows (100 steps of batch 200, clip
         0.1, epsilon 1): `trials` trainings a side (100,000 on the GPU -- the target: <= 30 s --,
         10,000 elsewhere), results in a temporary folder, one process; seconds (everything
         `run_audit` does: data, probe, fits, storing the chunks, the bound) and trainings/s (both
         sides). Its warm-up is an audit of min(trials, JAX chunk) trials a side, the shapes of every
         chunk; `compile_seconds` is that warm-up less its share of the timed audit. Beside it, the
         same audit on the numpy path (device cpu) for min(trials, 1,000) trials a side.

Speed is printed, never asserted (the tests run each suite at tiny shapes on jax-cpu).
"""

from __future__ import annotations

import tempfile
import time
from typing import Callable, Sequence

import numpy as np

from dpbench.bench.suites import _data, _record, _timed, adult_sized, audit_sized

#: (suite, algorithm, model, trials a side) -> target seconds of a whole audit on one GPU (printed, never asserted)
TARGET_SECONDS: dict[tuple, float] = {("audit", "dpsgd", "logreg", 100_000): 30.0}
#: the JAX path's throughput targets on one GPU (an H100 or H200), from a hand-written float64 JAX DP-SGD
#: on an H200: (model, batch) -> examples/s of the steps suite, and trainings/s of the many suite. The
#: numpy path's targets (`suites.TARGETS`) are not the JAX rows'; on jax-cpu they have none.
GPU_STEP_TARGETS: dict[tuple[str, int], float] = {("logreg", 1024): 25_000_000.0, ("mlp", 256): 3_500_000.0}
GPU_MANY_TARGET = 300_000.0

JAX_MODELS: tuple[str, ...] = ("logreg", "mlp")
JAX_BATCH_SIZES: tuple[int, ...] = (1, 256, 1024)
JAX_STEPS = 1_000  # steps of one timed scan (`jax_steps_suite`)
JAX_FITS = 10_000  # trainings of one timed call (`jax_many_suite`)
NUMPY_FITS = 1_000  # at most this many trainings on the numpy path beside them
NUMPY_TRIALS = 1_000  # at most this many trials a side in the numpy path's audit
GPU_TRIALS = 100_000  # `jax_audit_suite`'s trials a side on the GPU
OTHER_TRIALS = 10_000  # and on jax-cpu


def _activate(device: str):
    """The jax.Device of `device` and its description (a DpbenchError naming what is missing)."""
    from dpbench.on_jax import device as jax_device

    found = jax_device.activate(device)
    return found, jax_device.describe(device)


def _warm_then_best(call: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(best seconds of `repeats` timed calls, compile_seconds): one untimed warm-up call first; the
    compile time is the warm-up's time less the best timed call's (never below 0)."""
    started = time.perf_counter()
    call()
    warm = time.perf_counter() - started
    best = _timed(call, max(1, repeats))
    return best, max(0.0, warm - best)


def jax_steps_suite(device: str, data_dir: str | None = None, repeats: int = 1, *, data=None,
                    models: Sequence[str] = JAX_MODELS, batch_sizes: Sequence[int] = JAX_BATCH_SIZES,
                    steps: int = JAX_STEPS, clip_norm: float = 1.0, noise_multiplier: float = 1.0,
                    lr: float = 0.1) -> list[dict]:
    """DP-SGD steps on the JAX path: one replica of `noisy_descent`, `steps` steps in one jitted scan.

    Rate q = B/n (B capped at n - 1, as `suites.steps_suite`: always a sampled step), sum_divisor 1,
    grad_divisor q n, noise z C; theta0 = model.init. One untimed warm-up call (compilation), then the
    best of `repeats` timed calls; examples_per_s = B T / seconds, steps_per_s = T / seconds,
    compile_seconds beside them. `data=(X, y)` replaces the Adult-sized data.
    """
    from dpbench import models as models_mod
    from dpbench.on_jax.loops import noisy_descent

    jax_device, description = _activate(device)
    X, y = adult_sized(data_dir) if data is None else _data(data, data_dir)
    n = X.shape[0]
    records = []
    for model_name in models:
        model = models_mod.make(model_name, X.shape[1])
        rng = np.random.default_rng(0)
        theta0 = np.asarray(model.init(rng), dtype=np.float64)[None, :]
        keys = rng.integers(0, 2**32, size=(1, 2), dtype=np.uint32)
        for B in batch_sizes:
            B = min(int(B), n - 1) if n > 1 else 1
            q = B / n
            lrs = np.full((1, steps), float(lr))
            scale = np.array([noise_multiplier * clip_norm])

            def call() -> np.ndarray:
                return noisy_descent(model, X, y, theta0, keys, scale, lrs, rate=q, clip_norm=clip_norm,
                                     sum_divisor=1.0, grad_divisor=q * n, radius=None, device=jax_device)

            seconds, compile_seconds = _warm_then_best(call, repeats)
            rec = _record("steps", "dpsgd", model_name, "step", B, n, model.n_params,
                          seconds_per_call=seconds / steps, path="jax", device=description,
                          steps=steps, seconds=seconds, steps_per_s=steps / seconds,
                          compile_seconds=compile_seconds)
            records.append(_gpu_target(rec, device, GPU_STEP_TARGETS.get((model_name, B)), "examples_per_s"))
    return records


def _gpu_target(rec: dict, device: str, target: float | None, measure: str) -> dict:
    """The record with the GPU target of its shape (on --device gpu only) in place of the numpy path's."""
    rec.pop("target_examples_per_s", None)
    rec.pop("meets_target", None)
    if device == "gpu" and target is not None:
        rec[f"target_{measure}"] = target
        rec["meets_target"] = bool(rec[measure] >= target)
    return rec


def _rngs(count: int) -> list[np.random.Generator]:
    return [np.random.default_rng(s) for s in np.random.SeedSequence(0).spawn(count)]


def jax_many_suite(device: str, data_dir: str | None = None, repeats: int = 1, *, data=None,
                   fits: int = JAX_FITS, steps: int = 100, batch_size: int = 200, n: int = 400, d: int = 31,
                   clip_norm: float = 0.1, lr: float = 0.5, epsilon: float = 1.0, delta: float = 1e-5,
                   numpy_fits: int = NUMPY_FITS) -> list[dict]:
    """`fits` DP-SGD trainings of logreg in one `twin("dpsgd").many` call (seconds, trainings/s), after a
    warm-up call at the same shapes; and min(fits, numpy_fits) trainings through the numpy path's
    `fit_many` at the same shapes (after one single fit: calibration and compiled kernels warm).

    Data: `suites.audit_sized(n, d)` unless `data=(X, y)`; epochs = steps * batch_size / n (rows).
    """
    from dpbench import algorithms
    from dpbench import models as models_mod
    from dpbench.on_jax import device as jax_device_mod
    from dpbench.on_jax.twins import twin

    _, description = _activate(device)
    X, y = audit_sized(n, d) if data is None else _data(data, data_dir)
    rows = X.shape[0]
    problem = algorithms.Problem(model=models_mod.make("logreg", X.shape[1]), X=X, y=y)
    privacy = algorithms.PrivacyTarget(epsilon=epsilon, delta=delta)
    hyper = {"epochs": steps * batch_size / rows, "batch_size": float(batch_size), "clip_norm": clip_norm, "lr": lr}
    jax_twin = twin("dpsgd")
    planned: list[int] = []

    def on_jax() -> None:
        with jax_device_mod.on(device):
            out = jax_twin.many(problem, privacy, _rngs(fits), **hyper)
        planned.append(int(out[0].privacy.get("steps", steps)))

    seconds, compile_seconds = _warm_then_best(on_jax, repeats)
    common = dict(steps=planned[-1], epsilon=epsilon, delta=delta)
    records = [_gpu_target(_record("many", "dpsgd", "logreg", f"{fits:,} fits, twin.many", batch_size, rows,
                                   problem.model.n_params, seconds=seconds, fits_per_s=fits / seconds, path="jax",
                                   device=description, compile_seconds=compile_seconds, **common),
                           device, GPU_MANY_TARGET if fits >= JAX_FITS else None, "fits_per_s")]
    count = min(fits, numpy_fits)
    if count > 0:
        info = algorithms.get("dpsgd")
        info.fit(problem, privacy, np.random.default_rng(0), **hyper)  # calibrate, compile outside the timing
        seconds = _timed(lambda: info.fit_many(problem, privacy, _rngs(count), **hyper), max(1, repeats))
        records.append(_record("many", "dpsgd", "logreg", f"{count:,} fits, fit_many", batch_size, rows,
                               problem.model.n_params, seconds=seconds, fits_per_s=count / seconds, path="numpy",
                               device=jax_device_mod.describe("cpu"), **common))
    return records


def _audit_setup(trials: int, *, rows: int, steps: int, batch_size: int, clip_norm: float, epsilon: float,
                 delta: float, dataset: str):
    from dpbench.audit.setup import AuditSetup

    return AuditSetup.create("dpsgd", dataset=dataset, rows=rows, trials=int(trials), epsilon=epsilon, delta=delta,
                             canary="spare_feature", label="DP-SGD (bench)",
                             params={"epochs": steps * batch_size / rows, "batch_size": float(batch_size),
                                     "clip_norm": clip_norm})


def _audit_seconds(setup, device: str, data_dir: str | None):
    """(seconds of one `run_audit` in a fresh temporary results folder, its result)."""
    from dpbench.audit import multi_run

    with tempfile.TemporaryDirectory(prefix="dpbench-bench-audit-") as results:
        started = time.perf_counter()
        result = multi_run.run_audit(setup, data_dir=data_dir, results=results, jobs=1, backend="sequential",
                                     progress=False, device=device)
        return time.perf_counter() - started, result


def jax_audit_suite(device: str, data_dir: str | None = None, repeats: int = 1, *, data=None,
                    trials: int | None = None, rows: int = 400, steps: int = 100, batch_size: int = 200,
                    clip_norm: float = 0.1, epsilon: float = 1.0, delta: float = 1e-5,
                    dataset: str = "breast_cancer", numpy_trials: int = NUMPY_TRIALS) -> list[dict]:
    """A whole final-model audit of DP-SGD (spare_feature canary; epochs = steps * batch_size / rows)
    with `trials` trainings a side on `device` (default: 100,000 on the GPU, 10,000 elsewhere): seconds
    and trainings/s (both sides: 2 trials / seconds). Then the same audit on the numpy path for
    min(trials, numpy_trials) a side (0: not run), after a 64-trial warm-up.

    Warm-up: one audit of min(trials, `trials.JAX_CHUNK_TRIALS`) a side, in its own folder (the
    shapes of every chunk; nothing reused); `compile_seconds` = warm-up seconds less the timed audit's
    seconds scaled to the warm-up's trials (an estimate). The best of `repeats` timed audits, each in
    a fresh folder. `data` is unused (the audit's game names its data set).
    """
    from dpbench.audit.trials import JAX_CHUNK_TRIALS, audit_backend, game_for
    from dpbench.on_jax import device as jax_device_mod

    _, description = _activate(device)
    if trials is None:
        trials = GPU_TRIALS if device == "gpu" else OTHER_TRIALS
    shape = dict(steps=steps, batch_size=batch_size, clip_norm=clip_norm, epsilon=epsilon, delta=delta,
                 dataset=dataset)
    _, game = game_for(_audit_setup(trials, rows=rows, **shape), data_dir)
    rows = int(game.X.shape[0])  # the recipe takes at most the data set's training rows
    shape.update(rows=rows)
    setup = _audit_setup(trials, **shape)
    backend = audit_backend(setup, device)
    warm_trials = min(trials, JAX_CHUNK_TRIALS)
    warm, _ = _audit_seconds(_audit_setup(warm_trials, **shape), device, data_dir)
    timed = [_audit_seconds(setup, device, data_dir) for _ in range(max(1, repeats))]
    seconds, result = min(timed, key=lambda pair: pair[0])
    common = dict(n_params=game.model.n_params, steps=steps, batch_size=batch_size)
    records = [_audit_record(result, seconds, trials, path=backend, device=description,
                             compile_seconds=max(0.0, warm - seconds * warm_trials / trials), **common)]
    count = min(trials, numpy_trials)
    if count > 0:
        _audit_seconds(_audit_setup(min(count, 64), **shape), "cpu", data_dir)  # calibration, compiled kernels
        numpy_seconds, numpy_result = _audit_seconds(_audit_setup(count, **shape), "cpu", data_dir)
        records.append(_audit_record(numpy_result, numpy_seconds, count, path="numpy",
                                     device=jax_device_mod.describe("cpu"), **common))
    return records


def _audit_record(result, seconds: float, trials: int, *, n_params: int, batch_size: int, **extra) -> dict:
    measure = f"audit, {trials:,} trials a side"
    rec = _record("audit", "dpsgd", "logreg", measure, batch_size, result.rows, n_params, seconds=seconds,
                  fits_per_s=2 * trials / seconds, trials=trials, fit_seconds=result.fit_seconds,
                  epsilon_lower_bound=result.epsilon_lower_bound, claimed_epsilon=result.claimed_epsilon, **extra)
    target = TARGET_SECONDS.get(("audit", "dpsgd", "logreg", trials))
    if target is not None and extra.get("path") == "jax":
        rec["target_seconds"] = target
        rec["meets_target"] = bool(seconds <= target)
    return rec


__all__ = ["GPU_TRIALS", "JAX_BATCH_SIZES", "JAX_FITS", "JAX_MODELS", "JAX_STEPS", "NUMPY_FITS", "NUMPY_TRIALS",
           "GPU_MANY_TARGET", "GPU_STEP_TARGETS", "OTHER_TRIALS", "TARGET_SECONDS", "jax_audit_suite", "jax_many_suite", "jax_steps_suite"]
