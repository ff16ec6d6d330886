"""Peer: DP-SGD built from jax-privacy's own pieces (Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar,
Zhang, "Deep Learning with Differential Privacy", CCS 2016, Algorithm 1), as a dpbench algorithm.

What the fit runs (`fit_jax_privacy_dpsgd`), with B the expected batch size, n the rows, q = B/n and
T = round(epochs n / B) steps, as in dpbench's `dpsgd`:

* **noise multiplier**: jax-privacy's `accounting.calibrate_noise_multiplier` for (epsilon, delta),
  T updates, batch size B of n samples, with its `DpsgdTrainingAccountant` over its
  `RdpAccountantConfig` (calibration "rdp", the default) or `PldAccountantConfig` ("pld"), at the
  library's default tolerance (`CALIBRATION_TOL`: its root finder returns a z within 0.01 of the
  root whose epsilon is at most the target, so z is up to ~0.01 larger than dpbench's calibration,
  which solves to a relative 1e-3 of the target). The ledger's `epsilon_spent` holds the library's
  epsilon for that z by both of its accountants ("jax-privacy-rdp", "jax-privacy-pld"); the runner
  recomputes epsilon from the ledger's DpEvent (T self-composed Poisson-subsampled Gaussians of
  multiplier z at rate q, the event the library's accountant composes) with dpbench's accountants.
* **batches**: jax-privacy's `batch_selection.CyclicPoissonSampling(sampling_prob=q, iterations=T,
  cycle_length=1, partition_type=INDEPENDENT)`. With cycle length 1 the one group is every row, and
  each batch is a Binomial(n, q) number of rows drawn without replacement (the library's docstring,
  Lemma 1 of arXiv:2406.17298): plain Poisson sampling, each row independently with probability q,
  the sampling the accountant assumes (INDEPENDENT: the partition the library names for add/remove
  adjacency; with one group the two partition types coincide). Its generator is seeded with an
  integer drawn from the fit's rng. Each batch of indices is padded with -1 to a multiple of
  `PAD_MULTIPLE` (`batch_selection.pad_to_multiple_of`) and the padding rows are marked
  `is_padding_example`, so the library's clipping returns zero for them (its way of keeping few
  compiled shapes; the padding changes no sum).
* **clipped sum**: `clipping.clipped_grad(loss, l2_clip_norm=C, batch_argnums=(1, 2),
  keep_batch_dim=False)` of the model's data loss of one row (`_row_loss`, below), normalize_by 1:
  the SUM over the batch of per-example gradients each clipped to L2 norm C (sensitivity C under
  add/remove, the library's stated guarantee). Jitted, cached per model shape and C.
* **noise**: `noise_addition.gaussian_privatizer(stddev=z C, prng_key=k)`, the library's DP-SGD
  privatizer (matrix_factorization_privatizer with the identity noising matrix: i.i.d. N(0, (zC)^2 I)
  per step, its key split each step), `init` on theta, `update` on each clipped sum; k is an integer
  drawn from the fit's rng.
* **update**: dpbench's `dpsgd` step exactly (`sgd._numpy_steps`): g = noisy_sum / B + l2 theta
  (the model's own regulariser gradient, data independent, added after the noise), theta <- theta -
  lr g, constant step size, no projection, theta_0 from the model's init, the final iterate returned.
  The division is by the expected batch size B, never by the realised one.

Every step is reported (`releases.release(t, theta_t, noisy_sum / B, noise_std=z C, rate=q,
clip_norm=C, weight=1/B)`) in dpbench's flat theta layout, so the release check, `dpbench verify` and
the all-updates audits see it.

Precision: float64. dpbench's JAX path (`dpbench.on_jax.device`) computes in JAX's x64 mode; this fit
does too, inside `jax.enable_x64(True)` (a context: JAX's global setting is left as it was).

Models: logistic regression, ridge regression and the MLP (tanh or softplus), their data losses of
one row written here in jax.numpy with dpbench's parameter layout (`MLP.unpack`: [W1 row-major, b1,
w2, b2]); the layers contract keeps `dpbench.algorithms` below `dpbench.on_jax`, so the forms of
`dpbench.on_jax.forms` are not imported. Another model is refused with a one-line error.

Where jax-privacy cannot say dpbench's setting: its `DpParams.batch_size` is an int (a float batch
size fails its accountant), so a non-integer B is rounded to the nearest integer for everything (q,
T, the division): the ledger's `batch_size_rounded_from` then names the B asked for. No other
difference: plain Poisson sampling with a per-step accountant is what the library's DP-SGD path
states.

Mechanism owner: jax-privacy (`library="jax-privacy"`): the run is stored "declared by jax-privacy
<version>" (`dpbench.run.plugin_records.owned_claim`), never "valid".
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Callable

import numpy as np

from dpbench.algorithms import peers
from dpbench.algorithms.base import Fit, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.dpsgd import BatchSize, ClipNorm, Epochs, LearningRate
from dpbench.algorithms.releases import release
from dpbench.algorithms.sgd import steps_for
from dpbench.core.errors import DpbenchError
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import Param
from dpbench.privacy.accounting import quiet_absl
from dpbench.privacy.events import dpsgd_event_json

LIBRARY = "jax-privacy"
#: calibration name -> the jax-privacy accountant config class it names
ACCOUNTANTS = ("rdp", "pld")
#: jax-privacy's own default tolerance of `calibrate_noise_multiplier` (absolute, on z)
CALIBRATION_TOL = 0.01
#: each batch of indices is padded with -1 to a multiple of this (few compiled shapes)
PAD_MULTIPLE = 16
#: what the batch selection is, for the ledger
BATCH_SELECTION = ("jax-privacy CyclicPoissonSampling(cycle_length=1, partition_type=INDEPENDENT): plain Poisson "
                   "sampling, each row independently with probability q")

Calibration = Annotated[str, Param("noise calibration: jax-privacy's DpsgdTrainingAccountant with its RDP or PLD "
                                   "accountant config", choices=ACCOUNTANTS)]


def _row_loss(model) -> Callable:
    """The model's data loss of one row, loss(theta, x, y), in jax.numpy (module docstring, Models)."""
    import jax
    import jax.numpy as jnp

    from dpbench.models.linear import LogisticRegression, RidgeRegression
    from dpbench.models.mlp import MLP

    if type(model) is LogisticRegression:
        return lambda theta, x, y: jnp.logaddexp(0.0, -y * jnp.dot(x, theta))
    if type(model) is RidgeRegression:
        return lambda theta, x, y: (jnp.dot(x, theta) - y) ** 2
    if type(model) is MLP and model.activation in ("tanh", "softplus"):
        h, d = model.hidden, model.n_features
        act = jnp.tanh if model.activation == "tanh" else jax.nn.softplus

        def loss(theta, x, y):
            W1, b1 = theta[:h * d].reshape(h, d), theta[h * d:h * d + h]
            w2, b2 = theta[h * d + h:h * d + 2 * h], theta[-1]
            return jnp.logaddexp(0.0, -y * (jnp.dot(w2, act(W1 @ x + b1)) + b2))

        return loss
    raise DpbenchError(f"jax_privacy_dpsgd runs logreg, ridge and mlp (tanh, softplus), not {model.name}")


def _model_key(model) -> tuple:
    """What the row loss depends on (the clipped-sum cache's key)."""
    return (type(model).__name__, model.n_features, getattr(model, "hidden", None), getattr(model, "activation", None))


@lru_cache(maxsize=32)
def _clipped_sum(key: tuple, clip_norm: float, loss: Callable) -> Callable:
    """jax-privacy's clipped-gradient sum of `loss`, jitted: f(theta, X, y, is_padding_example) ->
    sum_i clip_C(grad loss(theta; x_i, y_i)) over the rows not marked padding."""
    import jax
    from jax_privacy import clipping

    summed = clipping.clipped_grad(loss, l2_clip_norm=float(clip_norm), batch_argnums=(1, 2), keep_batch_dim=False,
                                   normalize_by=1.0)
    return jax.jit(lambda theta, X, y, pad: summed(theta, X, y, is_padding_example=pad))


_LOSSES: dict[tuple, Callable] = {}


def _loss_for(model) -> Callable:
    """One loss function per model shape, so the jitted clipped sum is reused across fits."""
    key = _model_key(model)
    if key not in _LOSSES:
        _LOSSES[key] = _row_loss(model)
    return _LOSSES[key]


@lru_cache(maxsize=256)
def library_epsilons(noise_multiplier: float, batch_size: int, n: int, steps: int, delta: float) -> dict[str, float]:
    """jax-privacy's epsilon of T DP-SGD steps (multiplier z, Poisson batches of expected size B of n) by
    its `DpsgdTrainingAccountant` over each of its accountant configs: {"jax-privacy-rdp": .., "jax-privacy-pld": ..}
    (memoised: an audit's trials repeat one setting; callers copy the dict)."""
    from jax_privacy import accounting

    params = accounting.DpParams(noise_multipliers=float(noise_multiplier), num_samples=int(n), delta=float(delta),
                                 batch_size=int(batch_size), cycle_length=1,
                                 sampling_method=accounting.SamplingMethod.POISSON)
    with quiet_absl():
        return {f"jax-privacy-{name}": float(_accountant(name).compute_epsilon(int(steps), params))
                for name in ACCOUNTANTS}


def _accountant(calibration: str):
    from jax_privacy import accounting

    if calibration == "rdp":
        return accounting.DpsgdTrainingAccountant(accounting.RdpAccountantConfig())
    if calibration == "pld":
        return accounting.DpsgdTrainingAccountant(accounting.PldAccountantConfig())
    raise ValueError(f"unknown calibration {calibration!r}; choose one of {', '.join(ACCOUNTANTS)}")


@lru_cache(maxsize=256)
def library_noise_multiplier(epsilon: float, delta: float, *, batch_size: int, n: int, steps: int,
                             calibration: str) -> float:
    """jax-privacy's `calibrate_noise_multiplier` for (epsilon, delta), T updates, batch B of n rows
    (memoised, as `library_epsilons`)."""
    from jax_privacy import accounting

    with quiet_absl():
        return float(accounting.calibrate_noise_multiplier(
            target_epsilon=float(epsilon), accountant=_accountant(calibration), batch_sizes=int(batch_size),
            num_updates=int(steps), num_samples=int(n), target_delta=float(delta), cycle_length=1,
            tol=CALIBRATION_TOL))


def _padded(indices: np.ndarray) -> np.ndarray:
    """The batch's indices padded with -1 to a multiple of PAD_MULTIPLE (an empty batch: one block)."""
    from jax_privacy import batch_selection

    if indices.size == 0:
        return np.full(PAD_MULTIPLE, -1, dtype=np.int64)
    return batch_selection.pad_to_multiple_of(np.asarray(indices, dtype=np.int64), PAD_MULTIPLE)


@algorithm("jax_privacy_dpsgd", title="DP-SGD (jax-privacy)",
           citation="Abadi et al., Deep Learning with Differential Privacy, CCS 2016 (Alg. 1); jax-privacy "
                    "(google-deepmind/jax_privacy): clipping.clipped_grad, noise_addition.gaussian_privatizer, "
                    "batch_selection.CyclicPoissonSampling, accounting.calibrate_noise_multiplier",
           private=True, updates=True, library=LIBRARY)
def fit_jax_privacy_dpsgd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    epochs: Epochs = 1.0,
    batch_size: BatchSize = 64.0,
    lr: LearningRate = 0.5,
    clip_norm: ClipNorm = 1.0,
    calibration: Calibration = "rdp",
) -> Fit:
    peers.require(LIBRARY)
    import jax
    from jax_privacy import batch_selection, noise_addition

    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    loss = _loss_for(model)  # refuses an unknown model before any draw
    asked = min(float(batch_size), float(n))
    B = int(min(n, max(1, round(asked))))
    q = B / n
    T = steps_for(epochs, B, n)
    C = float(clip_norm)
    z = library_noise_multiplier(float(privacy.epsilon), float(privacy.delta), batch_size=B, n=n, steps=T,
                                 calibration=calibration)
    noise_std = z * C

    theta = np.array(model.init(rng), dtype=np.float64)
    sampler_seed = int(rng.integers(2**31))
    noise_seed = int(rng.integers(2**31))
    sampler = batch_selection.CyclicPoissonSampling(sampling_prob=q, iterations=T, cycle_length=1,
                                                    partition_type=batch_selection.PartitionType.INDEPENDENT)
    with jax.enable_x64(True):
        clipped_sum = _clipped_sum(_model_key(model), C, loss)
        privatizer = noise_addition.gaussian_privatizer(stddev=noise_std, prng_key=noise_seed)
        noise_state = privatizer.init(jax.numpy.asarray(theta))
        Xj, yj = jax.numpy.asarray(X, dtype=jax.numpy.float64), jax.numpy.asarray(y, dtype=jax.numpy.float64)
        for t, indices in enumerate(sampler.batch_iterator(n, rng=np.random.default_rng(sampler_seed)), start=1):
            idx = _padded(indices)
            pad = idx < 0
            gsum = clipped_sum(jax.numpy.asarray(theta), Xj[idx], yj[idx], jax.numpy.asarray(pad))
            noisy, noise_state = privatizer.update(sum_of_clipped_grads=gsum, noise_state=noise_state)
            released = np.asarray(noisy, dtype=np.float64) / B
            release(t, theta, released, noise_std, rate=q, clip_norm=C, weight=1.0 / B)
            theta = theta - lr * (released + model.reg_grad(theta))

    details: dict[str, Any] = {}
    if B != float(batch_size) and asked != float(n):
        details["batch_size_rounded_from"] = float(batch_size)
    record = ledger(
        private=True,
        mechanism=f"DP-SGD (jax-privacy {peers.version(LIBRARY)})",
        claim="valid",
        target_epsilon=privacy.epsilon,
        delta=privacy.delta,
        epsilon_spent=dict(library_epsilons(z, B, n, T, float(privacy.delta))),
        adjacency=Adjacency.ADD_REMOVE,
        sensitivity=C,
        event=dpsgd_event_json(z, q, T),
        sampling={"kind": "poisson", "rate": q, "expected_batch": float(B)},
        steps=T,
        noise_multiplier=z,
        noise_std_sum=noise_std,
        noise_std_mean_gradient=noise_std / B,
        calibration=calibration,
        calibration_tol=CALIBRATION_TOL,
        library=LIBRARY,
        library_version=peers.version(LIBRARY),
        batch_selection=BATCH_SELECTION,
        dtype="float64",
        **details,
    )
    return Fit(theta=theta, trace=[], privacy=record)
