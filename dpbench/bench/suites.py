"""Benchmarks that print figures (speed is measured here, never asserted in tests).

`dpbench bench` runs the selected suites and writes `results/bench.json`: machine info (cores,
BLAS, numpy version) and a list of records with at least `suite`, `algorithm`, `model`, `measure`,
`batch_size`, `n`, `n_params` and `examples_per_s` or `seconds`.

Data: "Adult-sized" means the whole preprocessed Adult data set (train + validation + test rows
stacked: n = 45,222, d = 105 after encoding); the MLP is d -> d -> 1 (11,236 parameters). Every
suite function also accepts `data=(X, y)` (any shape) so the tests run it on a tiny problem.

Suites (micro-benchmarks repeat a call enough times to last `min_time` seconds and keep the best
of `best_of` such runs; examples/s = B * calls/s). Cells run with one BLAS thread per process
(`dpbench` sets it), and so does the benchmark unless OPENBLAS_NUM_THREADS says otherwise;
`make bench` runs the steps suite a second time with 2 BLAS threads (results/bench-blas2.json):
  steps  DP-SGD steps (Poisson sampling from all n rows at rate B/n + clip + Gaussian noise +
         update) at B in {1, 64, 256, 1024}, for logreg and mlp, through `sgd.run_sgd` itself -- the
         loop DP-SGD runs -- on both of its paths (`path`: "compiled", `kernels.glm_sgd_steps`,
         logreg only; "numpy", the model's vectorised methods); examples/s = B * steps/s. Plus one
         whole run of 50,000 batch-1 logreg steps, in seconds. Each point is timed twice, interleaved:
         bare, and with the runner's release check around it (`releases.tallying` + the comparison
         with a ledger, `release_check`, as `run_cell` does for every fit): `examples_per_s_checked`
         (`seconds_checked`) and `release_check_overhead`, the median over >= 5 interleaved pairs
         of the relative extra time.
  grads  per-example gradients alone for the same shapes: `Model.per_example_grads` (the (B, m)
         matrix, what the reference clipping and PIDP's logreg contributions use) and
         `Model.clipped_grad_sum` (gradients + norms + clipped sum, no noise, no update).
  pidp   PIDP-SGD's pieces (`dpbench.algorithms.pidp`): the per-round Hessian build + factorisation
         (`_influence_operator` at the defaults: exact Hessian of L_ref on all n rows + Cholesky of
         H + zeta I for logreg; for the MLP the Gauss-Newton matrix on s = 1024 rows, Woodbury with
         a Cholesky of the s x s system), in seconds; the influence step (`op.full`: clipped
         gradients at theta_g solved against the factor, batched, for B rows), examples/s; and the
         batch-1 SGD step of the PIDP loop, noise-free and noisy, steps/s, on both paths
         (`_compiled_steps`, the compiled kernels; `_step_function`, numpy).
  fits   wall time of one full fit: every registered private algorithm at its default settings on
         Adult's training split (logreg; n_train = 27,134), each stopped at `cap_seconds` (20 s;
         the record then says so); plus PIDP-SGD against DP-SGD at equal T (one epoch of batch-1
         steps) for logreg and mlp. `seconds` is the first (reported) run of each fit, which includes
         the accountant's noise calibration unless an earlier fit in the process already calibrated the
         same (eps, delta, q, T) (calibrations are memoised); `seconds_repeat` is the best of
         `repeats` further runs with warm caches.
  accounting  PLD noise calibrations (`calibrate_dpsgd_noise`, "pld") uncached, in seconds, through
         dp-accounting's accountant and through `privacy.pld_gaussian` (what dpbench runs), at batch-1
         settings on Adult's training split (q = 1/27,134, T = 27,134) and batch 64.
  many   audit-sized trainings: `fits` (1,000) trainings of DP-SGD (20 epochs, batch 200, clip 0.1)
         and DP-GD (20 steps) on 400 random rows x 31 features (logreg), one `fit` at a time vs
         one vectorised `fit_many` (`algorithms.vectorised_fits`); `path` says whether the fits'
         steps were observed (`releases.observing`, as an all-updates audit does: single fits then
         leave the compiled loop); seconds and fits/s.
  opacus (`dpbench bench --against opacus`, not in SUITES: needs the optional extra
         `pip install torch==2.13.0 'dpbench[opacus]'`) the steps suite's DP-SGD steps through Opacus
         (`dpbench.bench.opacus.opacus_suite`: float32, torch's threads, `mode` "hooks" and "ghost"),
         next to the steps suite at the same shapes, and their ratio (`bench_opacus.compare`).
  jax    (`dpbench bench --device gpu | jax-cpu`, not in SUITES: needs `pip install 'dpbench[jax]'`) the
         JAX path's steps, many trainings and a whole audit (`dpbench.bench.jax_suites`), beside this
         steps suite at the same shapes in the same run.
"""

from __future__ import annotations

import math
import os
import platform
import signal
import threading
import time
from typing import Callable

import numpy as np

BATCH_SIZES: tuple[int, ...] = (1, 64, 256, 1024)
MODELS: tuple[str, ...] = ("logreg", "mlp")
MIN_TIME = 0.25  # seconds per timed run of a micro-benchmark point
BEST_OF = 3
CAP_SECONDS = 20.0
PIDP_BLOCK = 256  # `pidp`: rows (and noise rows) cycled through by the batch-1 step timings
LONG_RUN_STEPS = 50_000  # `steps`: one whole batch-1 logreg run of this many steps, in seconds  # `fits`: a fit taking longer is stopped and recorded as capped

# (algorithm, hyperparameters) pairs timed by the `fits` suite: PIDP-SGD against DP-SGD at equal T
FIT_CASES: list[tuple[str, dict]] = [
    ("dpsgd", {"epochs": 1.0, "batch_size": 1.0, "lr": 0.05}),
    ("pidp_sgd", {"epochs": 1.0, "lr": 0.05}),
]

#: algorithms without a batch_size parameter whose steps each use one example (for examples/s of a fit)
BATCH1_ALGORITHMS = frozenset({"pidp_sgd"})

#: (suite, algorithm, model, measure, batch_size) -> target examples/s from the issue (printed, never asserted)
TARGETS: dict[tuple, float] = {
    ("steps", "dpsgd", "logreg", "step", 256): 4_000_000.0,
    ("steps", "dpsgd", "mlp", "step", 256): 500_000.0,
    ("steps", "dpsgd", "logreg", "step", 1): 600_000.0,
}


def machine_info() -> dict:
    blas = {}
    try:
        config = np.show_config(mode="dicts")
        blas = {k: v.get("name") for k, v in config.get("Build Dependencies", {}).items() if isinstance(v, dict)}
    except Exception:  # numpy < 1.25 has no dict mode
        pass
    return {"cores": os.cpu_count(), "numpy": np.__version__, "blas": blas, "python": platform.python_version(),
            "platform": platform.platform(), "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}


def _timed(fn: Callable[[], object], repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def _calls_for(fn: Callable[[int], object], min_time: float) -> tuple[int, float]:
    """(k, seconds of fn(k)): k doubled (or scaled up by the last run's time) until one run of fn(k)
    lasts min_time."""
    k = 1
    while True:
        started = time.perf_counter()
        fn(k)
        elapsed = time.perf_counter() - started
        if elapsed >= min_time or k >= 1 << 24:
            return k, elapsed
        k = k * 2 if elapsed <= 0 else max(k * 2, min(int(k * min_time / elapsed * 1.1) + 1, k * 100))


def _per_call(fn: Callable[[int], object], min_time: float, best_of: int) -> float:
    """Seconds per call of fn(k) / k: k doubled until one run lasts min_time, then the best of best_of runs."""
    k, elapsed = _calls_for(fn, min_time)
    best = elapsed / k
    for _ in range(best_of - 1):
        best = min(best, _timed(lambda: fn(k), 1) / k)
    return best


def adult_sized(data_dir: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All preprocessed Adult rows (train + validation + test): n = 45,222, d = 105."""
    from dpbench import data

    ds = data.load("adult", seed=0, data_dir=data_dir)
    return (np.ascontiguousarray(np.vstack([ds.X_train, ds.X_val, ds.X_test]), dtype=float),
            np.concatenate([ds.y_train, ds.y_val, ds.y_test]).astype(float))


def _data(data, data_dir):
    if data is None:
        return adult_sized(data_dir)
    X, y = data
    return np.ascontiguousarray(X, dtype=float), np.asarray(y, dtype=float)


def _theta(model, rng: np.random.Generator) -> np.ndarray:
    """A generic parameter point: the model's init plus a small random offset (logreg's init is 0)."""
    return model.init(rng) + 0.3 * rng.standard_normal(model.n_params) / math.sqrt(model.n_params)


def _batch(X, y, B, rng):
    idx = np.sort(rng.choice(X.shape[0], size=min(B, X.shape[0]), replace=False))
    return np.ascontiguousarray(X[idx]), y[idx]


def _batches(X, y, models: tuple[str, ...], batch_sizes: tuple[int, ...]):
    """(model name, model, theta, X_B, y_B) per model and batch size: the shapes the step suites time."""
    from dpbench import models as models_mod

    for model_name in models:
        model = models_mod.make(model_name, X.shape[1])
        rng = np.random.default_rng(0)
        theta = _theta(model, rng)
        for B in batch_sizes:
            yield (model_name, model, theta, *_batch(X, y, B, rng))


def _record(suite, algorithm, model_name, measure, batch_size, n, n_params, *, seconds_per_call=None,
            seconds=None, **extra) -> dict:
    rec = {"suite": suite, "algorithm": algorithm, "model": model_name, "measure": measure,
           "batch_size": batch_size, "n": int(n), "n_params": int(n_params)}
    if seconds_per_call is not None:
        rec["calls_per_s"] = 1.0 / seconds_per_call
        rec["examples_per_s"] = batch_size / seconds_per_call
    if seconds is not None:
        rec["seconds"] = seconds
    rec.update(extra)
    target = TARGETS.get((suite, algorithm, model_name, measure, batch_size))
    if target is not None and "examples_per_s" in rec:
        rec["target_examples_per_s"] = target
        rec["meets_target"] = bool(rec["examples_per_s"] >= target)
    return rec


def _pairs(fn: Callable[[], object], other: Callable[[], object], pairs: int) -> tuple[float, float, float]:
    """fn and other timed `pairs` times, interleaved: (best seconds of fn, best of other, the median
    over the pairs of other's time / fn's time). The median of paired ratios is what a shared
    machine's load bursts, which hit one run of a pair more than the other, least move."""
    a, b = [], []
    for _ in range(pairs):
        a.append(_timed(fn, 1))
        b.append(_timed(other, 1))
    return min(a), min(b), float(np.median(np.array(b) / np.array(a)))


def _paired_per_call(fn: Callable[[int], object], other: Callable[[int], object], min_time: float,
                     best_of: int) -> tuple[float, float, float]:
    """`_per_call` of fn and of other at one k (found with fn), interleaved (`_pairs`, at least 5
    pairs): (seconds per call of fn, of other, median ratio other / fn)."""
    k, elapsed = _calls_for(fn, min_time)
    other(k)  # warm-up, as fn's last doubling run was
    a, b, ratio = _pairs(lambda: fn(k), lambda: other(k), max(5, best_of))
    return min(a, elapsed) / k, b / k, ratio


def _release_checked(run: Callable[[int], object], *, rate: float, noise_multiplier: float,
                     clip_norm: float) -> Callable[[int], object]:
    """`run(k)` as the runner runs a fit: its steps tallied (`releases.tallying`), then the tally compared
    with a DP-SGD ledger of k steps at (z, q, C) (`release_check.with_release_check`)."""
    from dpbench.algorithms import release_check, releases
    from dpbench.core.ledger import Adjacency, Ledger

    def checked(k: int) -> None:
        with releases.tallying() as tally:
            run(k)
        ledger = Ledger(private=True, mechanism="DP-SGD", claim="valid", adjacency=Adjacency.ADD_REMOVE,
                        sensitivity=clip_norm, details={"steps": k, "noise_multiplier": noise_multiplier,
                                                        "sampling": {"kind": "poisson", "rate": rate}})
        release_check.with_release_check(ledger, tally)

    return checked


def steps_suite(data_dir: str | None = None, repeats: int = 1, *, data=None, models: tuple[str, ...] = MODELS,
                batch_sizes: tuple[int, ...] = BATCH_SIZES, min_time: float = MIN_TIME, best_of: int = BEST_OF,
                clip_norm: float = 1.0, noise_multiplier: float = 1.0, lr: float = 0.1,
                long_run: int = LONG_RUN_STEPS) -> list[dict]:
    """DP-SGD steps (Poisson sampling + clip + noise + update) through `sgd.run_sgd`, on both paths.

    Every step samples from all n rows at rate B/n, so examples/s = B * steps/s counts expected
    batch rows. `path` is "compiled" (`kernels.glm_sgd_steps`: logreg; what fits run) or "numpy"
    (the model's vectorised methods; the MLP has only this path). Plus one run of `long_run`
    batch-1 logreg steps, in seconds (the speed target: 50,000 steps in about 0.1 s). Every point is
    also timed with the runner's release check (`_release_checked`), interleaved with the bare
    timing: `examples_per_s_checked` / `seconds_checked` (best runs) and `release_check_overhead`
    (the median over the pairs of checked time / bare time, - 1).
    """
    from dpbench import models as models_mod
    from dpbench.algorithms import kernels
    from dpbench.algorithms.base import Problem
    from dpbench.algorithms.sgd import run_sgd

    X, y = _data(data, data_dir)
    n = X.shape[0]
    best_of = max(best_of, repeats)
    records = []
    for model_name in models:
        model = models_mod.make(model_name, X.shape[1])
        problem = Problem(model=model, X=X, y=y)
        theta0 = _theta(model, np.random.default_rng(0))
        paths = [True, False] if kernels.jit_enabled() and kernels.glm_loss_code(model) is not None else [False]
        for B in batch_sizes:
            B = min(B, n - 1) if n > 1 else 1  # rate < 1: a sampled step, never the full-batch branch
            for compiled in paths:
                step_rng = np.random.default_rng(1)

                def run(k: int) -> None:
                    run_sgd(problem, step_rng, steps=k, batch_size=float(B), lr=lr, clip_norm=clip_norm,
                            noise_std=noise_multiplier * clip_norm, theta0=theta0, compiled=compiled)

                run(2)  # compile (or load the compiled cache) outside the timing
                checked = _release_checked(run, rate=float(B) / n, noise_multiplier=noise_multiplier,
                                           clip_norm=clip_norm)
                bare, with_check, ratio = _paired_per_call(run, checked, min_time, best_of)
                records.append(_record("steps", "dpsgd", model_name, "step", B, n, model.n_params,
                                       seconds_per_call=bare, path="compiled" if compiled else "numpy",
                                       examples_per_s_checked=B / with_check, release_check_overhead=ratio - 1.0))
        if model_name == "logreg" and long_run:
            for compiled in paths:
                def whole(k: int, compiled: bool = compiled) -> None:
                    run_sgd(problem, np.random.default_rng(2), steps=k, batch_size=1.0, lr=lr, clip_norm=clip_norm,
                            noise_std=noise_multiplier * clip_norm, theta0=theta0, compiled=compiled)

                checked = _release_checked(whole, rate=1.0 / n, noise_multiplier=noise_multiplier, clip_norm=clip_norm)
                seconds, seconds_checked, ratio = _pairs(lambda whole=whole: whole(long_run),
                                                         lambda checked=checked: checked(long_run), max(5, best_of))
                records.append(_record("steps", "dpsgd", model_name, f"{long_run:,} steps", 1, n, model.n_params,
                                       seconds=seconds, path="compiled" if compiled else "numpy",
                                       seconds_checked=seconds_checked, release_check_overhead=ratio - 1.0))
    return records


def grads_suite(data_dir: str | None = None, repeats: int = 1, *, data=None, models: tuple[str, ...] = MODELS,
                batch_sizes: tuple[int, ...] = BATCH_SIZES, min_time: float = MIN_TIME, best_of: int = BEST_OF,
                clip_norm: float = 1.0) -> list[dict]:
    """Per-example gradients alone: `per_example_grads` and `clipped_grad_sum` on B rows."""
    X, y = _data(data, data_dir)
    best_of = max(best_of, repeats)
    records = []
    for model_name, model, theta, Xb, yb in _batches(X, y, models, batch_sizes):

        def pegs(k: int) -> None:
            for _ in range(k):
                model.per_example_grads(theta, Xb, yb)

        def clipped(k: int) -> None:
            for _ in range(k):
                model.clipped_grad_sum(theta, Xb, yb, clip_norm)

        for measure, fn in (("per_example_grads", pegs), ("clipped_grad_sum", clipped)):
            records.append(_record("grads", "dpsgd", model_name, measure, Xb.shape[0], X.shape[0],
                                   model.n_params, seconds_per_call=_per_call(fn, min_time, best_of)))
    return records


def pidp_suite(data_dir: str | None = None, repeats: int = 1, *, data=None, models: tuple[str, ...] = MODELS,
               batch_sizes: tuple[int, ...] = BATCH_SIZES, min_time: float = MIN_TIME, best_of: int = BEST_OF,
               clip_norm: float = 1.0, zeta: float = 0.1, hessian_samples: int = 1024, lr: float = 0.05) -> list[dict]:
    """PIDP-SGD: Hessian build + factorisation (s), batched influence solve and batch-1 step (examples/s)."""
    from dpbench import models as models_mod
    from dpbench.algorithms import kernels
    from dpbench.algorithms.base import Problem
    from dpbench.algorithms.pidp import _compiled_steps, _influence_operator, _step_function

    X, y = _data(data, data_dir)
    n = X.shape[0]
    best_of = max(best_of, repeats)
    records = []
    for model_name in models:
        model = models_mod.make(model_name, X.shape[1])
        rng = np.random.default_rng(0)
        theta = _theta(model, rng)
        problem = Problem(model=model, X=X, y=y)
        ops: list = []

        def factorise() -> None:
            ops.append(_influence_operator(problem, theta, zeta=zeta, damping="add", hessian="auto",
                                           hessian_samples=hessian_samples, clip_norm=clip_norm,
                                           rng=np.random.default_rng(2)))

        seconds = _timed(factorise, best_of)
        op = ops[-1]
        records.append(_record("pidp", "pidp_sgd", model_name, "hessian+factorise", None, n, model.n_params,
                               seconds=seconds, hessian=op.kind))
        for B in batch_sizes:
            idx = np.sort(rng.choice(n, size=min(B, n), replace=False))

            def influence(k: int) -> None:
                for _ in range(k):
                    op.full(idx)

            records.append(_record("pidp", "pidp_sgd", model_name, "influence solve", len(idx), n, model.n_params,
                                   seconds_per_call=_per_call(influence, min_time, best_of)))
        rows = rng.integers(0, n, size=PIDP_BLOCK)
        noise_rows = 1e-3 * rng.standard_normal((PIDP_BLOCK, model.n_params))
        for noisy in (False, True):
            measure = f"batch-1 step ({'noisy' if noisy else 'noise-free'})"
            free = np.full(PIDP_BLOCK, not noisy)
            step = _step_function(model, X, y, theta.copy(), lr, clip_norm)
            compiled = (_compiled_steps(model, X, y, theta.copy(), lr, clip_norm, 1.0)  # noise_rows: scaled
                        if kernels.jit_enabled() else None)

            def numpy_steps(k: int) -> None:
                for j in range(k):
                    step(int(rows[j % PIDP_BLOCK]), noise_rows[j % PIDP_BLOCK] if noisy else None)

            def compiled_steps(k: int) -> None:
                for a in range(0, k, PIDP_BLOCK):
                    b = min(k - a, PIDP_BLOCK)
                    compiled(rows[:b], free[:b], noise_rows[:b])

            for path, fn in (("compiled", compiled_steps if compiled else None), ("numpy", numpy_steps)):
                if fn is None:
                    continue
                fn(2)  # compile (or load the compiled cache) outside the timing
                records.append(_record("pidp", "pidp_sgd", model_name, measure, 1, n, model.n_params,
                                       seconds_per_call=_per_call(fn, min_time, best_of), path=path))
    return records


class _Capped(Exception):
    pass


def _fit_capped(fit: Callable[[], object], cap_seconds: float | None) -> tuple[float, bool]:
    """(seconds, capped): stops the fit with SIGALRM after cap_seconds (main thread on POSIX only)."""
    use_alarm = (cap_seconds is not None and hasattr(signal, "setitimer")
                 and threading.current_thread() is threading.main_thread())
    if not use_alarm:
        return _timed(fit, 1), False

    def on_alarm(signum, frame):
        raise _Capped()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    started = time.perf_counter()
    try:
        signal.setitimer(signal.ITIMER_REAL, cap_seconds)
        fit()
        capped = False
    except _Capped:
        capped = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return time.perf_counter() - started, capped


def fits_suite(data_dir: str | None = None, repeats: int = 1, *, data=None, models: tuple[str, ...] = MODELS,
               epsilon: float = 1.0, cap_seconds: float | None = CAP_SECONDS,
               algorithms_: tuple[str, ...] | None = None) -> list[dict]:
    """Wall time of one fit: every private algorithm at its defaults (logreg), and PIDP vs DP-SGD at equal T.

    `data=(X, y)` replaces Adult's training split; `algorithms_` restricts the default-settings part.
    """
    from dpbench import algorithms
    from dpbench import data as data_mod
    from dpbench import models as models_mod

    if data is None:
        ds = data_mod.load("adult", seed=0, data_dir=data_dir)
        X, y, dataset = ds.X_train, ds.y_train, "adult"
    else:
        (X, y), dataset = _data(data, data_dir), "given"
    n = X.shape[0]
    target = algorithms.PrivacyTarget(epsilon=epsilon, delta=1.0 / n)
    records = []

    def one(name, model_name, params, measure):
        info = algorithms.get(name)
        model = models_mod.make(model_name, X.shape[1])
        problem = algorithms.Problem(model=model, X=X, y=y)
        fits: list = []
        times, capped, error = [], False, None
        for _ in range(1 + repeats):  # the first run is the one reported; the others have warm caches
            try:
                seconds, capped = _fit_capped(
                    lambda: fits.append(info.fit(problem, target, np.random.default_rng(0), **params)), cap_seconds)
            except Exception as exc:  # record, don't abort the benchmark
                error = f"{type(exc).__name__}: {exc}"[:200]
                break
            times.append(seconds)
            if capped:
                break
        batch_size = params.get("batch_size", info.defaults().get("batch_size"))
        if batch_size is None and name in BATCH1_ALGORITHMS:
            batch_size = 1.0
        rec = {"suite": "fits", "algorithm": name, "model": model_name, "measure": measure, "dataset": dataset,
               "n": n, "n_params": model.n_params, "batch_size": batch_size}
        if error is not None:
            rec["error"] = error
            return rec
        rec["seconds"] = times[0]
        if len(times) > 1:
            rec["seconds_repeat"] = min(times[1:])
        if capped:
            rec["capped"] = True
            rec["note"] = f"stopped after {cap_seconds:g} s (cap); seconds is a lower bound"
            return rec
        steps = fits[-1].privacy.get("steps")
        rec["steps"] = steps
        if steps and rec["batch_size"]:
            rec["examples_per_s"] = steps * float(rec["batch_size"]) / times[0]
        return rec

    chosen = algorithms_ if algorithms_ is not None else tuple(  # dpbench's own: a peer is its library's speed
        sorted(k for k, v in algorithms.REGISTRY.items() if v.private and v.library is None))
    for name in chosen:
        records.append(one(name, "logreg", {}, "fit (defaults)"))
    for model_name in models:
        for name, params in FIT_CASES:
            if name in algorithms.REGISTRY:
                records.append(one(name, model_name, params, "fit (equal T: 1 epoch, batch 1)"))
    return records


MANY_FITS = 1_000  # `many`: trainings per timing
#: (algorithm, hyperparameters) timed by the `many` suite (an audit's setting: 400 rows, 31 features)
MANY_CASES: list[tuple[str, dict]] = [
    ("dpsgd", {"epochs": 20.0, "batch_size": 200.0, "clip_norm": 0.1, "lr": 0.5}),
    ("dpsgd", {"epochs": 1.0, "batch_size": 1.0, "clip_norm": 0.1, "lr": 0.5}),
    ("dp_gd", {"epochs": 20, "clip_norm": 0.1}),
    ("noisy_sgd_bst14", {"steps": 1000, "radius": 10.0}),
]


def audit_sized(n: int = 400, d: int = 31, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n random rows with ||x|| <= 1 and d features, labels of a noisy linear rule in {-1, +1}."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.where(X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n) >= 0, 1.0, -1.0)
    return X, y


def many_suite(data_dir: str | None = None, repeats: int = 1, *, data=None, fits: int = MANY_FITS,
               epsilon: float = 1.0, cases: list[tuple[str, dict]] | None = None) -> list[dict]:
    """`fits` trainings one `fit` at a time vs one `fit_many`, unobserved and observed (seconds, fits/s).

    `data=(X, y)` replaces the 400 x 31 random problem (`audit_sized`); data_dir is unused.
    """
    from dpbench import algorithms
    from dpbench import models as models_mod
    from dpbench.algorithms import releases

    X, y = audit_sized() if data is None else _data(data, data_dir)
    n = X.shape[0]
    problem = algorithms.Problem(model=models_mod.make("logreg", X.shape[1]), X=X, y=y)
    target = algorithms.PrivacyTarget(epsilon=epsilon, delta=1.0 / n)
    records = []
    for name, params in (MANY_CASES if cases is None else cases):
        info = algorithms.get(name)
        info.fit(problem, target, np.random.default_rng(0), **params)  # calibrate, compile outside the timing

        def rngs() -> list[np.random.Generator]:
            return [np.random.default_rng(s) for s in np.random.SeedSequence(0).spawn(fits)]

        one_at_a_time = lambda: [info.fit(problem, target, rng, **params) for rng in rngs()]  # noqa: E731
        vectorised = lambda: info.fit_many(problem, target, rngs(), **params)  # noqa: E731
        for observed in (False, True):
            for measure, run in (("one at a time", one_at_a_time), ("fit_many", vectorised)):
                if observed:
                    def timed(run=run):
                        with releases.observing(lambda rel: None):
                            run()
                else:
                    timed = run
                seconds = _timed(timed, max(1, repeats))
                records.append(_record("many", name, "logreg", f"{fits:,} fits, {measure}",
                                       params.get("batch_size", n), n, problem.model.n_params, seconds=seconds,
                                       fits_per_s=fits / seconds, path="observed" if observed else "unobserved"))
    return records


#: (epsilon, delta, n) timed by the `accounting` suite: batch-1 DP-SGD / PIDP-SGD on Adult's training split
#: (q = 1/n, T = n, the slowest calibrations of the paper experiments) and a minibatch setting
ACCOUNTING_CASES: list[tuple[float, float, int, int]] = [(0.1, 1e-5, 27_134, 1), (1.0, 1e-5, 27_134, 1),
                                                          (0.1, 1e-5, 27_134, 64)]


def accounting_suite(data_dir: str | None = None, repeats: int = 1, *, data=None,
                     cases: list[tuple[float, float, int, int]] | None = None) -> list[dict]:
    """PLD noise calibrations (`calibrate_dpsgd_noise`, accountant "pld"), uncached, in seconds: each case
    (eps, delta, n, batch) with q = batch/n and T = epochs(1) * n / batch, once through dp-accounting's
    PLDAccountant for every evaluation (`path` "library") and once through `privacy.pld_gaussian`, the
    same construction with its per-grid-point loop vectorised ("vectorised", what dpbench runs); the
    records give both z so a reader sees they agree. data_dir and data are unused."""
    from dpbench.privacy import accounting, pld_gaussian

    records, memo = [], accounting.memo_entries()
    for eps, delta, n, batch in (ACCOUNTING_CASES if cases is None else cases):
        q, steps = batch / n, max(1, round(n / batch))
        for path in ("library", "vectorised"):
            saved = pld_gaussian._BUILD
            if path == "library":
                pld_gaussian._BUILD = None  # `subsampled_gaussian_epsilon` then defers to the accountant
            try:
                times, z = [], None
                for _ in range(max(1, repeats)):
                    accounting._MEMO.clear()  # uncached: every evaluation recomputed
                    started = time.perf_counter()
                    z = accounting.calibrate_dpsgd_noise(eps, delta, q, steps, "pld")
                    times.append(time.perf_counter() - started)
            finally:
                pld_gaussian._BUILD = saved
                accounting._MEMO.clear()
                accounting.memo_preload(memo)
            records.append(_record("accounting", "calibrate_dpsgd_noise", "-", f"pld eps={eps:g} q={batch}/{n} T={steps}",
                                   batch, n, 0, seconds=min(times), path=path, noise_multiplier=z))
    return records


#: (experiment spec, algorithm, data set label, model label) whose first repetition's batch the
#: `cells` suite runs both ways: the heaviest groups of the paper experiments
CELLS_CASES: list[tuple[str, str, str, str]] = [
    ("experiments/inputpert.yaml", "output_perturbation_gd", "KDDCup99", "LR"),
    ("experiments/inputpert.yaml", "output_perturbation_gd", "Adult", "LR"),
    ("experiments/inputpert.yaml", "dp_gd", "KDDCup99", "LR"),
    ("experiments/inputpert.yaml", "dp_gd", "Adult", "LR"),
    ("experiments/inputpert.yaml", "dp_gd", "Adult", "MLP"),
    ("experiments/inputpert.yaml", "output_perturbation_gd", "KDDCup99", "MLP"),
    ("experiments/inputpert.yaml", "input_perturbation", "KDDCup99", "LR"),
    ("experiments/inputpert.yaml", "input_perturbation", "Adult", "LR"),
    ("experiments/pidp.yaml", "dpsgd", "Adult", "LR"),
]


def cells_suite(data_dir: str | None = None, repeats: int = 1, *, data=None,
                cases: list[tuple[str, str, str, str]] | None = None) -> list[dict]:
    """Cells of one batch (`run.cells.batch_key`: same split, model, algorithm and shape, other
    epsilons and step sizes) run one at a time (`run_cell` each) and as one batched fit
    (`run_cells`): seconds, cells per second and the ratio. Data, L* and every cell's calibration
    are warmed up first, so both ways time the fits and the evaluation. A case whose cells do not
    batch (`AlgorithmInfo.batch_pays`) gets one record saying so. `data` is unused (the specs name
    theirs).
    """
    import tempfile

    from dpbench.run.cells import CellContext, batch_key, prepare_optimum, run_cell, run_cells
    from dpbench.spec.experiment import load

    records = []
    with tempfile.TemporaryDirectory() as cache:
        context = CellContext(data_dir=data_dir, cache_dir=cache)
        for spec, algorithm, dataset, model in (CELLS_CASES if cases is None else cases):
            cells = [c for c in load(spec).cells() if c.algorithm == algorithm and c.dataset_label == dataset
                     and c.model_label == model and c.rep == 0 and c.tuning is None]
            groups: dict = {}
            for cell in cells:
                groups.setdefault(batch_key(cell), []).append(cell)
            batch = max((g for k, g in groups.items() if k is not None), key=len, default=[])
            if not batch:
                records.append(_record("cells", algorithm, model, f"{dataset}: runs alone (batch_pays is False)",
                                       None, 0, 0, error="no batch"))
                continue
            prepare_optimum(batch[0], context)
            for cell in batch:  # load the data, compile, fill the calibration memo for every epsilon
                run_cell(cell, context)
            alone = _timed(lambda: [run_cell(c, context) for c in batch], max(1, repeats))
            together = _timed(lambda: run_cells(batch, context), max(1, repeats))
            first = run_cell(batch[0], context)
            for measure, seconds in (("one at a time", alone), ("batched", together)):
                records.append(_record("cells", algorithm, model, f"{dataset}, {len(batch)} cells, {measure}",
                                       dict(batch[0].params).get("batch_size"), first["n_train"], first["n_params"],
                                       seconds=seconds, cells_per_s=len(batch) / seconds,
                                       ratio=alone / seconds))
    return records


#: sizes of the noise suite's draws: one DP-SGD step on the MLP of Adult (m = 11,236), a chunk of steps
NOISE_SIZES: tuple[int, ...] = (11_236, 1_000_000)


def noise_suite(data_dir: str | None = None, repeats: int = 1, *, data=None,
                sizes: tuple[int, ...] = NOISE_SIZES, min_time: float = MIN_TIME, best_of: int = BEST_OF) -> list[dict]:
    """Standard normal draws (PCG64) into a reused buffer: numpy's `Generator.standard_normal(out=)`
    against `dpbench.core.gaussian.standard_normal` (the same values from numba's compiled port of the
    same ziggurat), nanoseconds a draw and the ratio. `data` and `data_dir` are unused."""
    from dpbench.core.gaussian import standard_normal

    records = []
    for size in sizes:
        out = np.empty(size)
        rng = np.random.default_rng(0)
        standard_normal(rng, out)  # compile
        numpy_s = _per_call(lambda k: [rng.standard_normal(out=out) for _ in range(k)], min_time, best_of)
        ours_s = _per_call(lambda k: [standard_normal(rng, out) for _ in range(k)], min_time, best_of)
        for measure, seconds in (("numpy standard_normal", numpy_s), ("dpbench standard_normal", ours_s)):
            records.append(_record("noise", "gaussian", "-", f"{size:,} draws, {measure}", None, size, size,
                                   seconds=seconds, ns_per_draw=seconds / size * 1e9, ratio=numpy_s / seconds))
    return records


#: (rows, features = hidden width) of the replicas suite: paper 003's KDDCup99 MLP (42,000 training rows, d = h = 117)
REPLICA_SHAPE: tuple[int, int] = (42_000, 117)
#: replicas stacked into one product in the replicas suite
REPLICA_COUNTS: tuple[int, ...] = (4, 16)


def replicas_suite(data_dir: str | None = None, repeats: int = 1, *, data=None,
                   shape: tuple[int, int] = REPLICA_SHAPE, counts: tuple[int, ...] = REPLICA_COUNTS,
                   best_of: int = BEST_OF) -> list[dict]:
    """What batching the MLP's full-batch families over replicas could gain at most: one replica's
    gradient pass (`MLP.loss_and_grad`, the path the fits take) against R replicas' forward and
    backward products stacked into one (X W^T for all R hidden layers at once, tanh, then the
    transposed product), in GFLOP/s of the 4 n d h flops a replica's two products need. The stacked
    passes leave out everything else a gradient needs, so their ratio bounds the gain from above.
    Random data of paper 003's KDDCup99 shape; `data` and `data_dir` are unused."""
    from dpbench.models.mlp import MLP

    n, d = shape
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    model = MLP(d)
    theta = model.init(rng)
    model.loss_and_grad(theta, X, y)
    flops = 4.0 * n * d * model.hidden
    single = _timed(lambda: model.loss_and_grad(theta, X, y), max(best_of, repeats))
    records = [_record("replicas", "mlp full batch", "mlp", "1 replica, loss_and_grad", None, n, model.n_params,
                       seconds=single, gflops=flops / single / 1e9, ratio=1.0)]
    rows = 2048
    for count in counts:
        W = rng.normal(size=(d, count * model.hidden)) * 0.1

        def stacked() -> None:
            for a in range(0, n, rows):
                Xb = X[a:a + rows]
                Z = Xb @ W
                np.tanh(Z, out=Z)
                Z.T @ Xb

        stacked()
        seconds = _timed(stacked, max(best_of, repeats)) / count
        records.append(_record("replicas", "mlp full batch", "mlp", f"{count} replicas stacked, products and tanh only",
                               None, n, model.n_params, seconds=seconds, gflops=flops / seconds / 1e9,
                               ratio=single / seconds))
    return records


SUITES: dict[str, Callable[..., list[dict]]] = {"steps": steps_suite, "grads": grads_suite, "pidp": pidp_suite,
                                                "fits": fits_suite, "many": many_suite,
                                                "accounting": accounting_suite, "cells": cells_suite,
                                                "noise": noise_suite, "replicas": replicas_suite}


def _target_text(rec: dict) -> str:
    met = "met" if rec.get("meets_target") else "NOT met"
    target = rec.get("target_examples_per_s")
    if target is not None and not (isinstance(target, float) and math.isnan(target)):
        return f">= {target:,.0f} ({met})"
    fits = rec.get("target_fits_per_s")  # the JAX many suite's target on a GPU (`jax_suites.GPU_MANY_TARGET`)
    if fits is not None and not (isinstance(fits, float) and math.isnan(fits)):
        return f">= {fits:,.0f} trainings/s ({met})"
    seconds = rec.get("target_seconds")  # a whole run's target (`jax_suites.TARGET_SECONDS`)
    if seconds is not None and not (isinstance(seconds, float) and math.isnan(seconds)):
        return f"<= {seconds:g} s ({met})"
    return ""


def format_table(records: list[dict]) -> str:
    import pandas as pd

    if not records:
        return "(no records)"
    df = pd.DataFrame(records)
    df["target"] = [_target_text(r) for r in records]
    if "capped" in df or "error" in df:
        df["note"] = ["capped" if r.get("capped") else ("error" if r.get("error") else "") for r in records]
    if "batch_size" in df:
        df["batch_size"] = [("" if b is None or (isinstance(b, float) and math.isnan(b)) else f"{float(b):g}")
                            for b in df["batch_size"]]
    # device, steps_per_s, compile_seconds: the JAX path's records (`dpbench.bench.jax_suites`)
    cols = [c for c in ("suite", "algorithm", "model", "measure", "path", "mode", "device", "batch_size", "n_params",
                        "steps", "seconds", "seconds_repeat", "examples_per_s", "steps_per_s", "compile_seconds",
                        "release_check_overhead", "fits_per_s", "cells_per_s", "ns_per_draw", "gflops", "ratio",
                        "noise_multiplier", "target", "note") if c in df]
    with pd.option_context("display.width", 200, "display.max_rows", 1000, "display.max_colwidth", 40,
                           "display.float_format", lambda v: f"{v:,.4g}"):
        return df[cols].to_string(index=False, na_rep="")
