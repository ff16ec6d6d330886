"""The JAX path's training loops: R replicas of one problem as one `jax.jit` of a `lax.scan` over the
steps, `jax.vmap`-ed over the replicas (`dpbench.on_jax.twins` calls them with the numpy path's plans).

Needs JAX (the `jax` extra); `device.activate` has switched on float64 before these run.

Noisy clipped-gradient descent (`noisy_descent`), replica r, step t = 1..T -- the numpy path's
`vectorised_fits.StepRule` written for JAX (DP-SGD: Abadi et al. 2016, Alg. 1; DP-GD: Wang, Ye, Xu 2017):

  S_t        each row i independently with probability q (Poisson sampling; q = 1: every row)
  g_sum      sum_{i in S_t} clip_C(grad l(theta; x_i, y_i)), clip_C(g) = g min(1, C / ||g||)
  released   g_sum / sum_divisor + noise_scale[r] N(0, I)
  theta      Proj_radius(theta - lr[r, t] (released / grad_divisor + l2 theta))

DP-SGD: sum_divisor 1, noise_scale z C, grad_divisor q n; DP-GD: sum_divisor n, noise_scale s, grad_divisor 1.
S_t is drawn as the numpy path draws it (`sgd.poisson_batches`): the gaps between included rows are
i.i.d. Geometric(q), so K gaps give the batch's rows in increasing order at O(K) draws a step
(`poisson_rows`). K is a fixed capacity (`capacity`: the expected batch plus 10 standard deviations
plus 20 rows, which a binomial count reaches with probability below 1e-20); a step whose batch might
not fit is counted and the fit raises (`BatchOverflow`) rather than drop a row. Where K would be a
large share of n (`DENSE_SHARE`), S_t is a Bernoulli(q) weight on every row instead (the same
distribution; nothing gathered, nothing to overflow).

Random numbers: replica r has a threefry key (`keys[r]`, two uint32 drawn from its numpy Generator);
step t uses fold_in(key, t), split in two: the batch's geometric gaps (or its Bernoulli weights), then
the standard normal noise. They are the same numbers on every platform, so a CPU run of this path
reproduces a GPU run up to float rounding -- and never the numpy path's draws (its cells are keyed by
backend).

Plain full-batch gradient descent (`plain_descent`), for output perturbation ([S2] Alg. 1) and input
perturbation ([S3] Alg. 1): theta <- Proj_radius[r](theta - lr[r] ((1/n) sum_i grad l(theta; x_i + o_r, y_i)
+ l2[r] theta)) for T_r steps, where o_r is replica r's feature offset (input perturbation's shared
noise vector z_r; zero for output perturbation). No draws: the noise is added on the CPU, by the
numpy path's own code.

Per-example gradients: a generalised linear model through its slope phi' (gradient phi'(z) x, norm
|phi'(z)| ||x||, no (rows, d) matrix), the MLP through its closed-form clipped sum (`forms`: the
norms from the layers' activations, no (rows, m) matrix), any other form through `vmap(grad(loss))`
over rows, in blocks of `ROW_BLOCK_BYTES`. An unclipped sum (plain GD) is one backward pass of the
summed loss. Replicas run in
blocks whose working arrays stay within `REPLICA_BYTES` (the last block padded to the same size, so
each shape compiles once).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dpbench.models.base import Model
from dpbench.on_jax.forms import JaxForm, jax_form

#: bytes of the per-example gradients of one block of rows of one replica (the generic form)
ROW_BLOCK_BYTES = 1 << 24
#: bytes of the working arrays of one block of replicas (per-example gradients or gathered rows)
REPLICA_BYTES = {"cpu": 1 << 28, "gpu": 1 << 32}
#: standard deviations above the expected batch that a sampled batch's capacity allows (`capacity`)
CAPACITY_SDS = 10.0
CAPACITY_EXTRA = 20
#: a batch whose capacity is at least this share of the rows is drawn as a Bernoulli(q) weight on every
#: row (no gather, no capacity): for a small data set (an audit's few hundred rows) the gradient pass is
#: then one product of all replicas' parameters with X, instead of R gathers of K rows
DENSE_SHARE = 0.25


class BatchOverflow(RuntimeError):
    """A Poisson batch exceeded the capacity the loop was compiled for (probability < 1e-20 a step)."""


class Shape(NamedTuple):
    """What one compiled loop is specialised to (static under `jax.jit`)."""

    rows: int  # n
    capacity: int  # K rows gathered per step (n: every row, no sampling)
    block: int  # rows per block of the per-example gradient pass
    clip: bool
    glm: bool
    dense: bool = False  # sampled by a 0/1 weight on every row instead of gathering K rows (`DENSE_SHARE`)
    smooth: tuple[tuple[int, int], ...] = ()  # DP-LSSGD: the (start, stop) blocks smoothed (`_smoothed`); (): none


def capacity(n: int, q: float) -> int:
    """Rows gathered per step at sampling rate q: n for q >= 1, else min(n, ceil(n q + 10 sd + 20))."""
    if q >= 1.0:
        return n
    sd = math.sqrt(n * q * (1.0 - q))
    return int(min(n, math.ceil(n * q + CAPACITY_SDS * sd + CAPACITY_EXTRA)))


@functools.lru_cache(maxsize=64)
def _form(model_class: type, n_features: int, options: tuple) -> JaxForm | None:
    model = model_class(n_features, **dict(options))
    return jax_form(model)


def form_of(model: Model) -> JaxForm:
    """The model's JAX form, one object per (class, options): the compiled loops are cached on it."""
    options = tuple(sorted((k, v) for k, v in model.describe().items()
                           if k in ("hidden", "activation")))
    form = _form(type(model), model.n_features, options)
    if form is None:
        raise ValueError(f"model {model.name} has no JAX form")
    return form


def _clipped_sum(form: JaxForm, shape: Shape, theta, X, y, xnorm, w, C):
    """sum_i w_i clip_C(grad l(theta; x_i, y_i)) over the rows given (w_i = 0 drops a padding row);
    without clipping (shape.clip False) the plain sum sum_i w_i grad l(theta; x_i, y_i)."""
    if shape.glm:
        s = form.slope(X @ theta, y)
        if shape.clip:
            s = s * jnp.minimum(1.0, C / jnp.maximum(jnp.abs(s) * xnorm, 1e-300))
        return X.T @ (w * s)
    if not shape.clip:  # one backward pass of the weighted loss: no per-example gradients
        return jax.grad(lambda t: jnp.sum(w * jax.vmap(form.loss, in_axes=(None, 0, 0))(t, X, y)))(theta)
    if form.clipped_sum is not None:
        return form.clipped_sum(theta, X, y, w, C)
    grads = jax.vmap(jax.grad(form.loss), in_axes=(None, 0, 0))

    def block(Xb, yb, wb):
        G = grads(theta, Xb, yb)
        return (wb * jnp.minimum(1.0, C / jnp.maximum(jnp.sqrt(jnp.sum(G * G, axis=1)), 1e-300))) @ G

    rows = X.shape[0]
    if rows <= shape.block:
        return block(X, y, w)
    blocks = -(-rows // shape.block)
    pad = blocks * shape.block - rows
    Xp = jnp.pad(X, ((0, pad), (0, 0))).reshape(blocks, shape.block, X.shape[1])
    yp = jnp.pad(y, (0, pad)).reshape(blocks, shape.block)
    wp = jnp.pad(w, (0, pad)).reshape(blocks, shape.block)
    total, _ = jax.lax.scan(lambda acc, b: (acc + block(*b), None), jnp.zeros_like(theta), (Xp, yp, wp))
    return total


def poisson_rows(key, n: int, rate, K: int):
    """(rows (K,), weights (K,), overflow): one Poisson batch of n rows at rate q, as the positions of
    the cumulative sums of K Geometric(q) gaps that fall below n (in increasing order; weight 1, the
    remaining slots weight 0 and row 0). Each row is then included independently with probability
    q, as in `sgd.poisson_batches`, at O(K) draws a step instead of O(n). overflow: every slot was
    used, so the batch may have had more than K rows (the caller raises; probability < 1e-20)."""
    positions = jnp.cumsum(jax.random.geometric(key, rate, (K,), dtype=jnp.int64)) - 1
    inside = positions < n
    return jnp.where(inside, positions, 0), inside.astype(jnp.float64), inside[-1]


def _project(theta, radius):
    norm = jnp.sqrt(jnp.dot(theta, theta))
    return jnp.where(norm > radius, theta * (radius / norm), theta)


def _smoothed(shape: Shape, g, denominators):
    """DP-LSSGD's A_sigma^{-1} g (`dp_lssgd.smooth`), block by block: irfft(rfft(g_b) / denominator_b)."""
    if not shape.smooth:
        return g
    parts = [jnp.fft.irfft(jnp.fft.rfft(g[a:b]) / den, n=b - a) if b - a > 1 else g[a:b]
             for (a, b), den in zip(shape.smooth, denominators)]
    return jnp.concatenate(parts)


def _noisy_replica(form: JaxForm, shape: Shape, X, y, xnorm, denominators, theta0, key, scale, lrs, rate, C,
                   sum_divisor, grad_divisor, radius, l2):
    sampled = shape.capacity < shape.rows  # gathered Poisson batches (`poisson_rows`)

    def step(carry, inputs):
        theta, overflow = carry
        lr, t = inputs
        k_rows, k_noise = jax.random.split(jax.random.fold_in(key, t))
        if shape.dense:
            w = jax.random.bernoulli(k_rows, rate, (shape.rows,)).astype(X.dtype)
            g_sum = _clipped_sum(form, shape, theta, X, y, xnorm, w, C)
        elif sampled:
            idx, w, full = poisson_rows(k_rows, shape.rows, rate, shape.capacity)
            g_sum = _clipped_sum(form, shape, theta, X[idx], y[idx], xnorm[idx], w, C)
            overflow = overflow + full.astype(jnp.int32)
        else:
            g_sum = _clipped_sum(form, shape, theta, X, y, xnorm, jnp.ones_like(y), C)
        released = g_sum / sum_divisor + scale * jax.random.normal(k_noise, theta.shape, dtype=theta.dtype)
        theta = _project(theta - lr * _smoothed(shape, released / grad_divisor + l2 * theta, denominators), radius)
        return (theta, overflow), None

    (theta, overflow), _ = jax.lax.scan(step, (theta0, jnp.int32(0)), (lrs, jnp.arange(1, lrs.shape[0] + 1)))
    return theta, overflow


@functools.partial(jax.jit, static_argnums=(0, 1))
def _noisy_block(form, shape, X, y, xnorm, denominators, theta0, keys, scales, lrs, rate, C, sum_divisor, grad_divisor,
                 radius, l2):
    one = functools.partial(_noisy_replica, form, shape, X, y, xnorm, denominators)
    return jax.vmap(one, in_axes=(0, 0, 0, 0, None, None, None, None, None, None))(
        theta0, keys, scales, lrs, rate, C, sum_divisor, grad_divisor, radius, l2)


def _gd_replica(form: JaxForm, shape: Shape, X, y, theta0, offset, lr, l2, radius, steps, total: int):
    n = X.shape[0]

    def step(theta, t):
        if shape.glm:
            s = form.slope(X @ theta + jnp.dot(offset, theta), y)
            data = (X.T @ s + offset * jnp.sum(s)) / n
        else:
            data = jax.grad(lambda t: jnp.sum(jax.vmap(form.loss, in_axes=(None, 0, 0))(t, X + offset, y)))(theta) / n
        new = _project(theta - lr * (data + l2 * theta), radius)
        return jnp.where(t < steps, new, theta), None

    theta, _ = jax.lax.scan(step, theta0, jnp.arange(total))
    return theta


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _gd_block(form, shape, total, X, y, theta0, offsets, lrs, l2s, radii, steps):
    one = functools.partial(_gd_replica, form, shape, X, y)
    return jax.vmap(lambda *a: one(*a, total))(theta0, offsets, lrs, l2s, radii, steps)


def _replica_blocks(R: int, per_replica: int, platform: str) -> int:
    return max(1, min(R, REPLICA_BYTES.get(platform, REPLICA_BYTES["cpu"]) // max(1, per_replica)))


def _in_blocks(R: int, size: int, run: Callable[[np.ndarray], tuple]) -> list[tuple]:
    """run(indices) for blocks of `size` replicas; the last block padded with its first replica
    (results of the padding dropped) so every block has the same shape."""
    out = []
    for a in range(0, R, size):
        idx = np.arange(a, min(R, a + size))
        padded = np.concatenate([idx, np.full(size - idx.size, idx[0])]) if idx.size < size else idx
        out.append(tuple(np.asarray(v)[:idx.size] for v in run(padded)))
    return out


def _row_block(form: JaxForm, m: int) -> int:
    """Rows per block of the per-example gradient pass: all rows unless the form needs (rows, m) gradients."""
    return max(8, ROW_BLOCK_BYTES // (8 * m)) if form.slope is None and form.clipped_sum is None else 1 << 62


def noisy_descent(model: Model, X: np.ndarray, y: np.ndarray, theta0: np.ndarray, keys: np.ndarray,
                  noise_scale: np.ndarray, lrs: np.ndarray, *, rate: float, clip_norm: float, sum_divisor: float,
                  grad_divisor: float, radius: float | None, device,
                  smoothing: Sequence[tuple[slice, np.ndarray]] = ()) -> np.ndarray:
    """(R, m) final iterates of the noisy clipped-gradient loop (module docstring) on jax.Device `device`.

    theta0 (R, m) starting points, keys (R, 2) uint32 threefry keys, noise_scale (R,), lrs (R, T) step
    sizes; `smoothing`: DP-LSSGD's (block, rfft denominator) pairs, each step's direction smoothed block
    by block before the update (`dp_lssgd.smoother`; empty: none). BatchOverflow if a sampled batch ever
    exceeded `capacity`."""
    form = form_of(model)
    n, m = X.shape[0], theta0.shape[1]
    K = capacity(n, rate)
    dense = K < n and K >= DENSE_SHARE * n
    if dense:
        K = n
    shape = Shape(rows=n, capacity=K, block=min(K, _row_block(form, m)), clip=True, glm=form.slope is not None,
                  dense=dense, smooth=tuple((sl.start, sl.stop) for sl, _ in smoothing))
    hidden = getattr(model, "hidden", 0)  # the MLP's closed form holds (rows, h) activations
    per_example = m if form.slope is None and form.clipped_sum is None else 2 * hidden + 2
    per_replica = 8 * (K * X.shape[1] + min(K, shape.block) * per_example + 4 * m)
    size = _replica_blocks(theta0.shape[0], per_replica, device.platform)
    put = functools.partial(jax.device_put, device=device)
    Xd, yd = put(np.ascontiguousarray(X, dtype=np.float64)), put(np.ascontiguousarray(y, dtype=np.float64))
    xnorm = put(np.sqrt(np.einsum("ij,ij->i", X, X)))
    r = math.inf if radius is None else float(radius)

    denominators = tuple(put(np.asarray(den, dtype=np.float64)) for _, den in smoothing)

    def run(idx):
        return _noisy_block(form, shape, Xd, yd, xnorm, denominators, put(theta0[idx]), put(keys[idx]),
                            put(noise_scale[idx]),
                            put(lrs[idx]), float(rate), float(clip_norm), float(sum_divisor), float(grad_divisor),
                            r, float(model.l2))

    parts = _in_blocks(theta0.shape[0], size, run)
    overflow = int(sum(int(p[1].sum()) for p in parts))
    if overflow:
        raise BatchOverflow(f"{overflow} Poisson batches exceeded the capacity of {K} rows (n = {n}, q = {rate:g})")
    return np.concatenate([p[0] for p in parts])


def plain_descent(model: Model, X: np.ndarray, y: np.ndarray, theta0: np.ndarray, offsets: np.ndarray,
                  lrs: Sequence[float], l2s: Sequence[float], radii: Sequence[float | None], steps: Sequence[int], *,
                  device) -> np.ndarray:
    """(R, m) iterates of plain full-batch GD (module docstring) after steps[r] steps, on jax.Device `device`;
    offsets (R, d) added to every row of replica r's features."""
    form = form_of(model)
    n, m = X.shape[0], theta0.shape[1]
    shape = Shape(rows=n, capacity=n, block=min(n, _row_block(form, m)), clip=False, glm=form.slope is not None)
    per_row = 2 * getattr(model, "hidden", 0) + X.shape[1] if form.slope is None else 0  # the MLP's activations
    per_replica = 8 * (2 * n + n * per_row + 4 * m)
    size = _replica_blocks(theta0.shape[0], per_replica, device.platform)
    put = functools.partial(jax.device_put, device=device)
    Xd, yd = put(np.ascontiguousarray(X, dtype=np.float64)), put(np.ascontiguousarray(y, dtype=np.float64))
    as_array = functools.partial(np.asarray, dtype=np.float64)
    lrs, l2s = as_array(lrs), as_array(l2s)
    radii = as_array([math.inf if r is None else r for r in radii])
    steps = np.asarray(steps, dtype=np.int64)
    total = int(steps.max()) if steps.size else 0

    def run(idx):
        return (_gd_block(form, shape, total, Xd, yd, put(theta0[idx]), put(offsets[idx]), put(lrs[idx]),
                          put(l2s[idx]), put(radii[idx]), put(steps[idx])),)

    return np.concatenate([p[0] for p in _in_blocks(theta0.shape[0], size, run)])


__all__ = ["BatchOverflow", "CAPACITY_SDS", "REPLICA_BYTES", "ROW_BLOCK_BYTES", "Shape", "capacity", "form_of",
           "noisy_descent", "plain_descent"]
