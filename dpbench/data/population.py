"""`synthetic_population`: a fixed finite population for excess POPULATION risk over n (DP-SCO).

Paper 002 (lecture notes on DP-SCO, §17) measures an estimator by its excess population risk
L_P(theta) - min_theta' L_P(theta'), which is not computable for a continuous distribution P. Here
P is the uniform distribution over a large FIXED finite pool of rows, so the population risk of
any theta is the exact mean loss over the pool and the population optimum is an ordinary
(deterministic) ERM optimum over the pool: no Monte-Carlo error in either.

Choices (options of `make`, defaults in brackets):

* Pool: `pool` [200,000] rows, generated once by `np.random.default_rng(pool_seed)`
  (`pool_seed` [2022]), independent of the repetition seed, so every repetition, cell and
  process sees the same population. Draw order from that generator: (1) w* ~ N(0, I_d) rescaled
  to ||w*|| = 1 (drawn first, so w* depends on pool_seed and d only, not on `pool` or `scale`);
  (2) directions g ~ N(0, I_d), one row per pool row, normalised to the unit sphere; (3) radii
  r = U^(1/d), U ~ U(0, 1), so x = r g / ||g|| is UNIFORM IN THE UNIT BALL of R^d (`d` [10]) and
  ||x||_2 <= 1 holds by construction (checked); (4) labels y = +1 with probability
  sigmoid(scale * <w*, x>) (`scale` [4.0], >= 0), else -1, via y = +1 iff V < p, V ~ U(0, 1).
  sigmoid(z) is computed as (1 + tanh(z/2)) / 2 (no overflow).
* No intercept feature: the label model has none (P(y=+1 | x=0) = 1/2), so the d features are
  the raw coordinates (feature names x0..x{d-1}).
* The model is well specified for logistic regression: for the continuous distribution the
  unregularised logistic-loss minimiser is scale * w*. `Dataset.w_star` is the UNIT vector w*
  (so a metric ||theta - w_star|| measures the distance to the unit direction, not to scale*w*);
  on the finite pool the optimum differs slightly from scale * w*, and the exact one is the pool
  ERM optimum.
* Each repetition (`seed`) draws, from `np.random.default_rng(seed)`, first the training rows:
  `n` (the common parameter, default 1,000) pool indices i.i.d. uniform WITH replacement, then the
  validation rows: round(val_fraction * n) indices (half up; 0 allowed) the same way. Rows are
  copied (X_train and X_val are fresh arrays).
* TEST split = the whole pool, in pool order, so the mean test loss IS the population risk.
  `test_fraction` is meaningless here: it is accepted (and checked to be in [0, 1)) but ignored;
  `data_dir` is ignored as well.
* provenance["test_is_population"] = True; also pool, pool_seed, d, scale, w_star (list),
  the pool's positive rate and mean sigmoid probability.

Caching: the pool is generated once per process per (pool, pool_seed, d, scale) with
functools.lru_cache (maxsize 4), so thousands of cells reuse it. The cached arrays are READ-ONLY
(`writeable = False`) and `X_test`/`y_test` are those arrays themselves (no copy; 16 MB for the
default pool): writing into them raises instead of corrupting every later cell.
"""

from __future__ import annotations

import functools
import math
from typing import Annotated

import numpy as np

from dpbench.core.registry import Param
from dpbench.data import bounds, preprocess
from dpbench.data.base import Common, Dataset, dataset

NAME = "synthetic_population"
DEFAULT_N = 1000
CITATION = "paper 002 §17 (DP-SCO lecture notes: excess population risk over n); fixed finite pool"
DESCRIPTION = (
    "fixed pool of 200,000 rows, x uniform in the unit ball of R^10, P(y=+1|x)=sigmoid(4<w*,x>); "
    "train/val drawn with replacement per seed, test = the whole pool (exact population risk)"
)


def sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)), computed as (1 + tanh(z/2)) / 2 (no overflow)."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@functools.lru_cache(maxsize=4)
def make_pool(pool: int, pool_seed: int, d: int, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, w_star, p) of the fixed pool; read-only arrays, cached per process.

    p[i] = sigmoid(scale * <w*, X[i]>) = P(y_i = +1 | X[i]). Draw order: module docstring.
    """
    rng = np.random.default_rng(pool_seed)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    g = rng.standard_normal((pool, d))
    norms = np.sqrt(np.einsum("ij,ij->i", g, g))
    norms[norms == 0.0] = 1.0  # probability zero; keeps x = 0 instead of NaN
    radius = rng.random(pool) ** (1.0 / d)
    X = g * (radius / norms)[:, None]
    p = sigmoid(scale * (X @ w))
    y = np.where(rng.random(pool) < p, 1.0, -1.0)
    preprocess.check_unit_norm(X, NAME)
    for a in (X, y, w, p):
        a.setflags(write=False)
    return X, y, w, p


def _half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


@dataset(NAME, description=DESCRIPTION, citation=CITATION, task="classification", origin="synthetic",
         known_parameter=True, population=True, feature_bounds=bounds.generated)
def make(
    common: Common,
    *,
    pool: Annotated[int, Param("rows in the fixed pool (the population)", minimum=1)] = 200_000,
    pool_seed: Annotated[int, Param("seed of the generator that draws the pool and w*", minimum=0)] = 2022,
    d: Annotated[int, Param("feature dimension: x uniform in the unit ball of R^d", minimum=1)] = 10,
    scale: Annotated[float, Param("P(y=+1|x) = sigmoid(scale <w*, x>); 0 gives fair coins", minimum=0)] = 4.0,
) -> Dataset:
    """One repetition of `synthetic_population` (see the module docstring for every choice)."""
    seed, n, val_fraction = common.seed, common.n, common.val_fraction
    for key, value in (("test_fraction", common.test_fraction), ("val_fraction", val_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"{key} must be a number in [0, 1), got {value!r}")
    if n is None:
        n = DEFAULT_N
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer or null, got {n!r}")
    n = int(n)
    opts = {"pool": int(pool), "pool_seed": int(pool_seed), "d": int(d), "scale": float(scale)}
    pool, pool_seed, d, scale = opts["pool"], opts["pool_seed"], opts["d"], opts["scale"]
    X, y, w, p = make_pool(pool, pool_seed, d, scale)

    n_val = _half_up(val_fraction * n)
    rng = np.random.default_rng(seed)
    train = rng.integers(0, pool, size=n)
    val = rng.integers(0, pool, size=n_val)
    X_train, y_train = X[train], y[train]
    X_val, y_val = X[val], y[val]

    provenance: dict[str, object] = {
        "dataset": NAME,
        "source": "synthetic",
        "citation": CITATION,
        "task": "classification",
        "test_is_population": True,
        "pool": pool,
        "pool_seed": pool_seed,
        "d": d,
        "scale": scale,
        "w_star": [float(v) for v in w],
        "options": dict(opts),
        "generator": (
            f"pool: np.random.default_rng({pool_seed}) draws w* ~ N(0,I) normalised, directions "
            "N(0,I) normalised, radii U^(1/d), label uniforms; per repetition np.random.default_rng(seed) "
            "draws train then val indices"
        ),
        "features_rule": "x uniform in the unit ball of R^d (no intercept)",
        "label_rule": "y = +1 with probability sigmoid(scale * <w*, x>), else -1",
        "w_star_rule": f"N(0, I_{d}) from np.random.default_rng({pool_seed}) (first draw) rescaled to norm 1",
        "pool_positive_rate": float((y > 0).mean()),
        "pool_mean_probability": float(p.mean()),
        "seed": int(seed),
        "n_used": n,
        "rows_raw": pool,
        "rows_clean": pool,
        "split": {"train": n, "val": n_val, "test": pool},
        "split_rule": (
            "train: n pool rows i.i.d. uniform with replacement; val: round(val_fraction*n) rows the same "
            "way (after train, same generator); test: the whole pool in pool order (population)"
        ),
        "test_fraction": float(common.test_fraction),
        "test_fraction_note": "ignored: the test split is the whole pool",
        "val_fraction": float(val_fraction),
        "norm_bound": 1.0,
        "feature_bounds": bounds.generated(opts),
        "max_row_norm": float(np.sqrt(np.einsum("ij,ij->i", X, X).max())),
        "n_features": d,
    }
    return Dataset(
        name=NAME,
        task="classification",
        X_train=X_train,
        y_train=y_train,
        X_val=X_val,
        y_val=y_val,
        X_test=X,
        y_test=y,
        feature_names=tuple(f"x{j}" for j in range(d)),
        provenance=provenance,
        w_star=w,
    )


__all__ = ["DEFAULT_N", "make", "make_pool", "sigmoid"]
