"""Synthetic heavy-tailed data of paper 004 (Wang, Xiao, Devadas & Xu, ICML 2020, §6;
docs/methods/heavy-tailed.md, Synthetic data).

Paper 004 gives n = 1e5, x in R^10 and the noise laws, but neither the feature distribution nor
w* (its appendix is not available). Choices made here, all options of the two data sets (the
annotated keywords of `synthetic_linear` and `synthetic_logistic`; same options, own defaults):

* features: `gaussian` (default) x ~ N(0, I_d); `student_t` x_ij ~ t with 3 degrees of freedom
  (variance 3, infinite 4th moment); `lognormal` x_ij = L - E[L], L ~ LogNormal(0, 1) (centred,
  right-skewed). Heavy-tailed features are what makes *logistic* gradients heavy-tailed: the
  logistic gradient is bounded by ||x||, so label noise alone does not.
* w_star: `unit_random` (default) N(0, I_d) rescaled to ||w*|| = 1, drawn from a FIXED generator
  `np.random.default_rng(12345)` independent of the data seed, so w* is the same for every seed
  (and for d' < d its direction is a prefix of the d-dimensional draw before rescaling);
  `ones` w* = 1/sqrt(d) * (1, ..., 1).
* synthetic_linear (task `regression`): y = <w*, x> + e, e = Delta - E[Delta],
  Delta ~ LogNormal(noise_mu, noise_sigma), E[Delta] = exp(mu + sigma^2/2). Defaults mu = 0,
  sigma = 1 (paper: sigma in {1, 1.5}; skewness grows fast with sigma).
* synthetic_logistic (task `classification`): y = sign(<w*, x> + e) in {-1, +1} (sign(0) = +1),
  e = Delta - E[Delta], Delta = exp(mu) * (U / (1 - U))^sigma ~ LogLogistic(mu, sigma), U ~ U(0,1),
  E[Delta] = exp(mu) * pi*sigma / sin(pi*sigma), which needs sigma < 1 (variance needs sigma < 1/2);
  defaults mu = 0, sigma = 0.4. SIGN CONVENTION: the paper writes
  y = sign[1/(1 + exp(<w*,x> + e)) - 1/2] = -sign(<w*,x> + e); we use +sign so that logistic
  regression estimates +w* (up to scale) and ||w - w*|| is meaningful without a flip.
* No intercept feature: the noise is centred, so the model has none.
* normalize: default False -- the heavy tails are the point, and rows then do NOT satisfy
  ||x||_2 <= 1 (provenance["norm_bound"] is None; methods that need a bound must clip). With
  normalize=True every row is projected, x <- x / max(1, ||x||), AFTER y was generated from the
  unprojected x, so w* no longer describes the data exactly (it still gives the labels' direction).

Randomness: one generator `np.random.default_rng(seed)` draws, in order, the features, the noise
and then the split (uniform for regression, stratified by label for classification, same size
rule as the UCI data: test = round(test_fraction*n), val = round(val_fraction*n)). Same
(name, seed, n, options, fractions) -> bit-identical arrays on one machine (another CPU may differ
in last bits; docs/reproducibility.md, One machine and many).
"""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np

from dpbench.core.registry import Param
from dpbench.data import bounds, preprocess
from dpbench.data.base import Common, Dataset, dataset

#: Seed of the fixed generator that draws w* (independent of the data seed).
W_STAR_SEED = 12345
DEFAULT_N = 100_000

CITATION = "paper 004 §6 (Wang, Xiao, Devadas & Xu, ICML 2020)"
FEATURES = ("gaussian", "student_t", "lognormal")
W_STARS = ("unit_random", "ones")

# The options of both generators (each declares its own defaults).
Dim = Annotated[int, Param("feature dimension d", minimum=1, paper="paper 004 §6: d = 10")]
NoiseMu = Annotated[float, Param("mu of the noise law (LogNormal / LogLogistic location)")]
NoiseSigma = Annotated[float, Param("sigma of the noise law (tail heaviness)", minimum=0, exclusive_minimum=True,
                                    paper="paper 004 §6")]
Features = Annotated[str, Param("feature law: N(0, I), Student-t(3) or centred LogNormal(0, 1) coordinates",
                                choices=FEATURES)]
WStar = Annotated[str, Param("true parameter: N(0, I) from a fixed generator rescaled to norm 1, or ones/sqrt(d)",
                             choices=W_STARS)]
Normalize = Annotated[bool, Param("project rows onto ||x|| <= 1 after generating y (w* then no longer exact)")]


def _logistic_sigma_below_one(options: dict) -> None:
    if not options["noise_sigma"] < 1:
        raise ValueError(f"noise_sigma: must be < 1 (the log-logistic mean is infinite otherwise), "
                         f"got {options['noise_sigma']:g}")


@dataset("synthetic_linear", description="y = <w*,x> + centred LogNormal noise (heavy-tailed regression), n=1e5, d=10",
         citation=CITATION, task="regression", origin="synthetic", known_parameter=True,
         feature_bounds=bounds.generated)
def synthetic_linear(common: Common, *, d: Dim = 10, noise_mu: NoiseMu = 0.0, noise_sigma: NoiseSigma = 1.0,
                     features: Features = "gaussian", w_star: WStar = "unit_random",
                     normalize: Normalize = False) -> Dataset:
    """y = <w*, x> + e, e centred LogNormal(noise_mu, noise_sigma) (module docstring)."""
    return make("synthetic_linear", common, dict(d=d, noise_mu=noise_mu, noise_sigma=noise_sigma, features=features,
                                                 w_star=w_star, normalize=normalize))


@dataset("synthetic_logistic", description="y = sign(<w*,x> + centred LogLogistic noise), n=1e5, d=10",
         citation=CITATION, task="classification", origin="synthetic", known_parameter=True,
         check=_logistic_sigma_below_one, feature_bounds=bounds.generated)
def synthetic_logistic(common: Common, *, d: Dim = 10, noise_mu: NoiseMu = 0.0, noise_sigma: NoiseSigma = 0.4,
                       features: Features = "gaussian", w_star: WStar = "unit_random",
                       normalize: Normalize = False) -> Dataset:
    """y = sign(<w*, x> + e), e centred LogLogistic(noise_mu, noise_sigma), noise_sigma < 1 (module docstring)."""
    _logistic_sigma_below_one({"noise_sigma": noise_sigma})
    return make("synthetic_logistic", common, dict(d=d, noise_mu=noise_mu, noise_sigma=noise_sigma,
                                                   features=features, w_star=w_star, normalize=normalize))


def w_star_vector(d: int, kind: str = "unit_random") -> np.ndarray:
    """The true parameter: fixed across data seeds (see module docstring)."""
    if kind == "ones":
        return np.full(d, 1.0 / math.sqrt(d))
    w = np.random.default_rng(W_STAR_SEED).standard_normal(d)
    return w / np.linalg.norm(w)


def _features(rng: np.random.Generator, n: int, d: int, kind: str) -> np.ndarray:
    if kind == "gaussian":
        return rng.standard_normal((n, d))
    if kind == "student_t":
        return rng.standard_t(3.0, size=(n, d))
    if kind == "lognormal":
        return rng.lognormal(0.0, 1.0, size=(n, d)) - math.exp(0.5)
    raise ValueError(kind)  # pragma: no cover - validated before


def lognormal_noise(rng: np.random.Generator, n: int, mu: float, sigma: float) -> np.ndarray:
    """Centred log-normal noise: Delta - E[Delta], Delta ~ LogNormal(mu, sigma)."""
    return rng.lognormal(mu, sigma, size=n) - math.exp(mu + sigma**2 / 2.0)


def loglogistic_noise(rng: np.random.Generator, n: int, mu: float, sigma: float) -> np.ndarray:
    """Centred log-logistic noise: exp(mu) (U/(1-U))^sigma - exp(mu) pi sigma / sin(pi sigma), sigma < 1."""
    if not 0.0 < sigma < 1.0:
        raise ValueError(f"noise_sigma must be in (0, 1) for log-logistic noise (mean exists), got {sigma}")
    u = rng.random(n)
    delta = math.exp(mu) * np.exp(sigma * (np.log(u) - np.log1p(-u)))
    return delta - math.exp(mu) * math.pi * sigma / math.sin(math.pi * sigma)


def make(name: str, common: Common, opts: dict) -> Dataset:
    """Generate `synthetic_linear` or `synthetic_logistic` with checked options `opts` (module docstring)."""
    seed, n, test_fraction, val_fraction = common.seed, common.n, common.test_fraction, common.val_fraction
    preprocess.check_fractions(test_fraction, val_fraction)
    if n is None:
        n = DEFAULT_N
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2 or null, got {n!r}")
    n, d = int(n), int(opts["d"])
    mu, sigma = float(opts["noise_mu"]), float(opts["noise_sigma"])
    w = w_star_vector(d, str(opts["w_star"]))

    rng = np.random.default_rng(seed)
    X = _features(rng, n, d, str(opts["features"]))
    signal = X @ w
    if name == "synthetic_linear":
        e = lognormal_noise(rng, n, mu, sigma)
        y = signal + e
        task = "regression"
        train, val, test = preprocess.split_uniform(n, rng, test_fraction, val_fraction)
        noise_rule = f"e = Delta - exp(mu + sigma^2/2), Delta ~ LogNormal({mu}, {sigma})"
        label_rule = "y = <w*, x> + e"
    else:
        e = loglogistic_noise(rng, n, mu, sigma)
        y = np.where(signal + e >= 0.0, 1.0, -1.0)
        task = "classification"
        train, val, test = preprocess.split_indices(y, rng, test_fraction, val_fraction)
        noise_rule = (
            f"e = Delta - exp(mu) pi sigma / sin(pi sigma), Delta = exp(mu) (U/(1-U))^sigma "
            f"~ LogLogistic({mu}, {sigma})"
        )
        label_rule = "y = sign(<w*, x> + e), sign(0) = +1 (paper 004 writes -sign; flipped so the fit estimates +w*)"

    if opts["normalize"]:
        norms = np.sqrt(np.einsum("ij,ij->i", X, X))
        X = X / np.maximum(1.0, norms)[:, None]
        preprocess.check_unit_norm(X, name)

    splits = {"train": train, "val": val, "test": test}
    arrays = {k: (np.ascontiguousarray(X[idx]), np.ascontiguousarray(y[idx])) for k, idx in splits.items()}
    provenance = {
        "dataset": name,
        "source": "synthetic",
        "citation": CITATION,
        "task": task,
        "generator": "np.random.default_rng(seed): features, then noise, then split",
        "seed": int(seed),
        "n_used": n,
        "rows_raw": n,
        "rows_clean": n,
        "options": dict(opts),
        "w_star_rule": (
            f"N(0, I_{d}) from np.random.default_rng({W_STAR_SEED}) rescaled to norm 1"
            if opts["w_star"] == "unit_random"
            else f"1/sqrt({d}) * ones"
        ),
        "features_rule": {
            "gaussian": "x ~ N(0, I)",
            "student_t": "x_ij ~ Student-t(3)",
            "lognormal": "x_ij = L - exp(1/2), L ~ LogNormal(0, 1)",
        }[str(opts["features"])],
        "noise_rule": noise_rule,
        "label_rule": label_rule,
        "split": {k: int(v.size) for k, v in splits.items()},
        "split_rule": (
            "uniform" if task == "regression" else "stratified by label"
        ) + "; test=round(test_fraction*n), val=round(val_fraction*n), train=rest",
        "test_fraction": float(test_fraction),
        "val_fraction": float(val_fraction),
        "normalize": (
            "rows projected to x / max(1, ||x||) after generating y (w* no longer exact)"
            if opts["normalize"]
            else "none: rows are NOT norm-bounded (heavy tails are the point)"
        ),
        "norm_bound": 1.0 if opts["normalize"] else None,
        "feature_bounds": bounds.generated(opts),
        "n_features": d,
    }
    return Dataset(
        name=name,
        task=task,
        X_train=arrays["train"][0],
        y_train=arrays["train"][1],
        X_val=arrays["val"][0],
        y_val=arrays["val"][1],
        X_test=arrays["test"][0],
        y_test=arrays["test"][1],
        feature_names=tuple(f"x{j}" for j in range(d)),
        provenance=provenance,
        w_star=w,
    )
