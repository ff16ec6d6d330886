"""Benchmarks that print figures (speed is measured here, never asserted in tests).

`dpbench bench` runs the selected suites and writes `results/bench.json`: machine info (cores,
BLAS, numpy version) and a list of records with at least `suite`, `algorithm`, `model`,
`batch_size` and `examples_per_s` or `seconds`.

Suites:
  fits   wall time of one full fit per (algorithm, model) on Adult (n_train = 27,133, d = 105)
         at equal T (one epoch of batch-1 steps for the batch-1 algorithms), one BLAS thread.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Callable

import numpy as np

# (algorithm, hyperparameters) pairs timed by the `fits` suite: PIDP-SGD against DP-SGD at equal T
FIT_CASES: list[tuple[str, dict]] = [
    ("dpsgd", {"epochs": 1.0, "batch_size": 1.0, "lr": 0.05}),
    ("pidp_sgd", {"epochs": 1.0, "lr": 0.05}),
]


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


def fits_suite(data_dir: str | None = None, repeats: int = 1, models: tuple[str, ...] = ("logreg", "mlp"),
               epsilon: float = 1.0) -> list[dict]:
    """Wall time of one fit per (algorithm, model) on Adult; the best of `repeats`."""
    from dpbench import algorithms, data
    from dpbench import models as models_mod

    ds = data.load("adult", seed=0, data_dir=data_dir)
    records = []
    for model_name in models:
        model = models_mod.make(model_name, ds.n_features)
        problem = algorithms.Problem(model=model, X=ds.X_train, y=ds.y_train)
        target = algorithms.PrivacyTarget(epsilon=epsilon, delta=1.0 / ds.n_train)
        for name, params in FIT_CASES:
            if name not in algorithms.REGISTRY:
                continue
            info = algorithms.get(name)
            fits: list = []
            seconds = _timed(lambda: fits.append(info.fit(problem, target, np.random.default_rng(0), **params)),
                             repeats)
            steps = fits[-1].privacy.get("steps")
            records.append({"suite": "fits", "algorithm": name, "model": model_name, "dataset": "adult",
                            "n": ds.n_train, "n_params": model.n_params, "batch_size": params.get("batch_size", 1.0),
                            "steps": steps, "seconds": seconds,
                            "examples_per_s": (steps * params.get("batch_size", 1.0)) / seconds if steps else None})
    return records


SUITES: dict[str, Callable[..., list[dict]]] = {"fits": fits_suite}


def format_table(records: list[dict]) -> str:
    import pandas as pd

    if not records:
        return "(no records)"
    df = pd.DataFrame(records)
    cols = [c for c in ("suite", "algorithm", "model", "batch_size", "steps", "n_params", "seconds", "examples_per_s")
            if c in df]
    with pd.option_context("display.width", 160, "display.float_format", lambda v: f"{v:,.4g}"):
        return df[cols].to_string(index=False)
