"""Vectorised twins of DP-SGD and DP-GD (`base.vectorised`): R trainings of one problem as one fit.

Privacy audits (Nasr et al., S&P 2021; Nasr et al., USENIX Security 2023) train the same
algorithm thousands of times on a few hundred rows. One fit at a time, each step of such a small
problem is a handful of numpy calls on 31-vectors, all overhead. Here the R parameter vectors are
the rows of one (R, m) array and each step is one pass for all of them:

  Z = Theta X^T                            margins of every replica on every row, (R, n)
  S = phi'(Z; y), each entry clipped       per-example clipped coefficients: the gradient of row i is
      to |S| <= C / ||x_i||                S_ri x_i, its norm |S_ri| ||x_i||, so min(1, C/norm) S_ri
                                           is S_ri clipped to +-C/||x_i|| (`models.linear._GLM`)
  S *= W_t                                 W_t[r, i] = 1 if row i is in replica r's batch of step t
  G = S X                                  the R clipped sums, (R, m)

and then, per row of G, the single fit's noise, update and projection: DP-SGD (Abadi et al. 2016,
Alg. 1; `sgd.run_sgd`) releases G + z C N_t and steps with (G + z C N_t) / B + l2 theta; DP-GD
(Wang, Ye, Xu 2017; `gradient_perturbation.dp_gd_core`) releases G / n + N(0, s^2 I) and steps
with it + l2 theta. The (R, n) matrices are only formed in tiles of `TILE_ELEMENTS`, so memory
does not grow with R beyond the parameters and the draws.

Random draws. Replica r draws from rngs[r] exactly what `fit(problem, privacy, rngs[r], **hyper)`
draws, in the same order: the model's init, then per chunk of `kernels.steps_per_chunk(m)` steps
(DP-SGD) its Poisson batches (`sgd.poisson_batches`, q < 1 only) followed by the chunk's standard
normal noise, step by step; DP-GD draws N(0, s^2 I) per step. Python loops over the replicas only
to make these draws (a Generator's normals drawn in pieces are the same numbers as drawn at once,
so the noise is drawn a few steps ahead, `NOISE_STEPS`, not a whole chunk ahead). The results
equal the one-at-a-time fits up to floating-point rounding (sums are taken in another order), and
each Fit carries the single fit's ledger (`dpsgd.noisy_sgd_plan`, `gradient_perturbation.dp_gd_plan`:
one calibration for all R).

Releases (`releases`): every step is reported once for all replicas, with (R, m) arrays and the
single fit's step numbers, rate, clip norm, noise std and weight. Replicas are processed in blocks
when the draws held at once for all R would exceed `DRAW_BYTES` (64 MB); while somebody observes, the
blocks' releases are then copied and re-emitted per step at the end (R x T x 2m floats).

Fallback: another model (not a generalised linear model with the plain L2 term, e.g. the MLP), or
a trace (`trace_every` > 0), runs the single fit R times, in a plain loop: the same results, not
faster; its releases are stacked per step as above.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from dpbench.algorithms import kernels, releases
from dpbench.algorithms.base import Fit, FitFunction, PrivacyTarget, Problem, vectorised
from dpbench.algorithms.dpsgd import fit_dpsgd, noisy_sgd_plan
from dpbench.algorithms.gradient_perturbation import dp_gd_plan, fit_dp_gd
from dpbench.algorithms.sgd import learning_rates, poisson_batches
from dpbench.core.ledger import Ledger
from dpbench.models.base import Model
from dpbench.models.linear import _GLM

#: elements of one (rows, n) tile of margins / coefficients (fits in the CPU's L2 cache)
TILE_ELEMENTS = 1 << 16
#: bytes of the draws held for one block of replicas: a chunk's sampling masks (bit-packed, steps x n
#: bits per replica) and NOISE_STEPS steps of noise (m floats per step and replica)
DRAW_BYTES = 1 << 26
#: steps whose noise is drawn ahead, for every replica of a block
NOISE_STEPS = 8


def vectorisable(model: Model) -> bool:
    """A generalised linear model with the base L2 term and the base clipped sum: the vectorised loop applies."""
    return (isinstance(model, _GLM) and type(model).reg_grad is Model.reg_grad
            and type(model).clipped_grad_sum is _GLM.clipped_grad_sum)


def hyperparameters(fit: FitFunction, given: dict[str, Any]) -> dict[str, Any]:
    """The keyword hyperparameters `fit` would run with: its declared defaults, overridden by `given`
    (TypeError for a name it does not declare, as calling it would)."""
    info = fit.dpbench_component  # type: ignore[attr-defined]
    unknown = sorted(set(given) - {p.name for p in info.params})
    if unknown:
        raise TypeError(f"{info.name}: unknown hyperparameter(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(p.name for p in info.params)}")
    return {**info.defaults(), **given}


# ---------------------------------------------------------------------------------------------
# releases: stacking per-replica (or per-block) reports into one (R, m) report per step
# ---------------------------------------------------------------------------------------------
def _collecting(sink: list[releases.Release]) -> Callable[[releases.Release], None]:
    """An observer that keeps a copy of every release (the loops may reuse the arrays)."""
    return lambda rel: sink.append(dataclasses.replace(rel, theta=np.array(rel.theta, dtype=float),
                                                       released=np.array(rel.released, dtype=float)))


def _emit_stacked(groups: Sequence[Sequence[releases.Release]]) -> None:
    """Report step by step the groups' releases (each (m,) or (B, m)) stacked along the replica axis."""
    if len({len(g) for g in groups}) > 1:
        raise RuntimeError("the replicas reported different numbers of steps")
    for parts in zip(*groups):
        first = parts[0]
        for p in parts[1:]:
            if (p.step, p.noise_std, p.rate, p.clip_norm, p.weight, p.kind) != (
                    first.step, first.noise_std, first.rate, first.clip_norm, first.weight, first.kind):
                raise RuntimeError(f"the replicas' releases of step {first.step} differ in more than their arrays")
        releases.release(first.step, np.concatenate([np.atleast_2d(p.theta) for p in parts]),
                         np.concatenate([np.atleast_2d(p.released) for p in parts]), first.noise_std,
                         rate=first.rate, clip_norm=first.clip_norm, weight=first.weight, kind=first.kind)


def one_at_a_time(fit: FitFunction, problem: Problem, privacy: PrivacyTarget,
                  rngs: Sequence[np.random.Generator], hyper: dict[str, Any]) -> list[Fit]:
    """The fallback: `fit(problem, privacy, rng, **hyper)` for each rng, releases stacked per step."""
    if not releases.observed():
        return [fit(problem, privacy, rng, **hyper) for rng in rngs]
    fits, groups = [], []
    for rng in rngs:
        got: list[releases.Release] = []
        with releases.observing(_collecting(got)):
            fits.append(fit(problem, privacy, rng, **hyper))
        groups.append(got)
    _emit_stacked(groups)
    return fits


# ---------------------------------------------------------------------------------------------
# the vectorised loop
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepRule:
    """One noisy clipped-gradient step of R replicas (module docstring), in the single fits' terms:

    released = (clipped sum) / sum_divisor + noise_scale * noise_t   (noise_t: `draw_noise`'s numbers)
    theta    = Proj_radius(theta - lrs[t] (released / grad_divisor + grad reg(theta)))
    """

    lrs: np.ndarray  # (steps,) the step size of each step
    clip_norm: float
    rate: float  # Poisson sampling rate q; 1: full batch (no sampling draws)
    sum_divisor: float
    noise_scale: float
    draw_noise: Callable[[np.random.Generator, np.ndarray], None] | None  # fills a (k, m) array; None: no noise
    grad_divisor: float
    radius: float | None
    release_noise_std: float  # what `releases.release` reports, as the single fit does
    release_weight: float
    chunk: int  # steps whose sampling is drawn together (`kernels.steps_per_chunk`)

    @property
    def steps(self) -> int:
        return int(self.lrs.shape[0])


def _packed_mask(offsets: np.ndarray, rows: np.ndarray, k: int, n: int) -> np.ndarray:
    """(k, ceil(n/8)) bit-packed inclusion mask of `poisson_batches`'s k batches."""
    mask = np.zeros(k * n, dtype=bool)
    mask[rows + np.repeat(np.arange(0, k * n, n), np.diff(offsets))] = True  # pair (t, i) at t n + i
    return np.packbits(mask.reshape(k, n), axis=1)


class _Data:
    """The problem's arrays as the vectorised steps use them."""

    def __init__(self, problem: Problem, clip_norm: float):
        self.model = problem.model
        self.X = np.ascontiguousarray(problem.X, dtype=np.float64)
        self.XT = np.ascontiguousarray(self.X.T)
        self.y = np.ascontiguousarray(problem.y, dtype=np.float64)
        self.n = self.X.shape[0]
        norms = kernels.row_norms(self.X)
        # |S_ri| ||x_i|| <= C  <=>  |S_ri| <= C / ||x_i||; a zero row has a zero gradient (no clipping)
        self.bound = np.divide(clip_norm, norms, out=np.full(self.n, np.inf), where=norms > 0)
        self.lower = -self.bound
        self.tile_rows = max(1, TILE_ELEMENTS // max(1, self.n))

    def clipped_sums(self, Theta: np.ndarray, bits: np.ndarray | None) -> np.ndarray:
        """(B, m): row r is sum_i W[r, i] clip_C(grad l(Theta[r]; x_i, y_i)); bits: packed W (None: all rows)."""
        B = Theta.shape[0]
        out = np.empty((B, self.X.shape[1]))
        for i in range(0, B, self.tile_rows):
            j = min(B, i + self.tile_rows)
            S = self.model._dphi(Theta[i:j] @ self.XT, self.y)
            np.clip(S, self.lower, self.bound, out=S)
            if bits is not None:
                S *= np.unpackbits(bits[i:j], axis=1, count=self.n)
            np.matmul(S, self.X, out=out[i:j])
        return out


def _project_rows(Theta: np.ndarray, radius: float | None) -> np.ndarray:
    """Each row projected onto {||theta|| <= radius} (`sgd.project_to_ball`), in place."""
    if radius is None:
        return Theta
    norms = np.sqrt(np.einsum("ij,ij->i", Theta, Theta))
    over = norms > radius
    if over.any():
        Theta[over] *= (radius / norms[over])[:, None]
    return Theta


def _run_block(data: _Data, Theta: np.ndarray, rngs: Sequence[np.random.Generator], rule: StepRule) -> np.ndarray:
    """All steps of one block of replicas (Theta (B, m), rngs[r] for row r); reports every step."""
    B, m = Theta.shape
    model, n = data.model, data.n
    sampled = rule.rate < 1.0
    observe = releases.observed()
    k_max = min(rule.chunk, rule.steps)
    bits = np.empty((k_max, B, (n + 7) // 8), dtype=np.uint8) if sampled else None
    ahead = min(NOISE_STEPS, k_max)
    noise = np.empty((B, ahead, m)) if rule.draw_noise is not None else None
    for start in range(0, rule.steps, rule.chunk):
        k = min(rule.chunk, rule.steps - start)
        if bits is not None:
            for r, rng in enumerate(rngs):  # the chunk's batches, then (below) its noise, per replica
                offsets, rows = poisson_batches(rng, n, rule.rate, k)
                bits[:k, r] = _packed_mask(offsets, rows, k, n)
        for t in range(k):
            if noise is not None and t % ahead == 0:
                for r, rng in enumerate(rngs):
                    rule.draw_noise(rng, noise[r, :min(ahead, k - t)])
            released = data.clipped_sums(Theta, None if bits is None else bits[t]) / rule.sum_divisor
            if noise is not None:
                released += rule.noise_scale * noise[:, t % ahead]
            if observe:
                releases.release(start + t + 1, Theta, released, rule.release_noise_std, rate=rule.rate,
                                 clip_norm=rule.clip_norm, weight=rule.release_weight)
            g = released / rule.grad_divisor + model.reg_grad(Theta)
            Theta = _project_rows(Theta - rule.lrs[start + t] * g, rule.radius)
    return Theta


def run_many(problem: Problem, rngs: Sequence[np.random.Generator], rule: StepRule) -> np.ndarray:
    """(R, m) final iterates of R replicas of the noisy clipped-gradient loop `rule` (module docstring)."""
    data = _Data(problem, rule.clip_norm)
    if not rngs:
        return np.empty((0, problem.model.n_params))
    Theta = np.stack([np.asarray(problem.model.init(rng), dtype=np.float64) for rng in rngs])  # draws as fit does
    R = Theta.shape[0]
    k_max = min(rule.chunk, rule.steps)
    per_replica = ((k_max * ((data.n + 7) // 8) if rule.rate < 1.0 else 0)  # bytes of drawn masks and noise
                   + (min(NOISE_STEPS, k_max) * Theta.shape[1] * 8 if rule.draw_noise is not None else 0))
    block = R if per_replica == 0 else max(1, min(R, DRAW_BYTES // per_replica))
    if block >= R:
        return _run_block(data, Theta, rngs, rule)
    groups: list[list[releases.Release]] = []
    observe = releases.observed()
    for a in range(0, R, block):
        b = min(R, a + block)
        if observe:
            groups.append([])
            with releases.observing(_collecting(groups[-1])):
                Theta[a:b] = _run_block(data, Theta[a:b], rngs[a:b], rule)
        else:
            Theta[a:b] = _run_block(data, Theta[a:b], rngs[a:b], rule)
    if observe:
        _emit_stacked(groups)
    return Theta


def _fits(Theta: np.ndarray, ledger: Ledger) -> list[Fit]:
    return [Fit(theta=Theta[r].copy(), privacy=ledger, trace=[]) for r in range(Theta.shape[0])]


# ---------------------------------------------------------------------------------------------
# the twins
# ---------------------------------------------------------------------------------------------
@vectorised(fit_dpsgd)
def fit_dpsgd_many(problem: Problem, privacy: PrivacyTarget, rngs: Sequence[np.random.Generator],
                   **hyper: Any) -> list[Fit]:
    """R trainings of DP-SGD (`dpsgd.fit_dpsgd`, Abadi et al. 2016 Alg. 1) as one vectorised loop;
    the fallback (module docstring) for a non-GLM model or trace_every > 0."""
    h = hyperparameters(fit_dpsgd, hyper)
    rngs = list(rngs)
    if not vectorisable(problem.model) or h["trace_every"]:
        return one_at_a_time(fit_dpsgd, problem, privacy, rngs, h)
    n, m = problem.n, problem.model.n_params
    plan = noisy_sgd_plan(n, privacy, epochs=h["epochs"], batch_size=h["batch_size"], clip_norm=h["clip_norm"],
                          calibration=h["calibration"], paper_c=h["paper_c"])
    q = min(1.0, plan.batch_size / n)  # as `run_sgd` derives them
    steps_per_epoch = max(1.0, n / plan.batch_size)
    noisy = plan.noise_std > 0.0
    rule = StepRule(
        lrs=learning_rates(h["lr"], h["lr_schedule"], np.arange(plan.steps), steps_per_epoch),
        clip_norm=h["clip_norm"], rate=q, sum_divisor=1.0, noise_scale=plan.noise_std,
        draw_noise=(lambda rng, out: rng.standard_normal(out=out)) if noisy else None,
        grad_divisor=q * n, radius=h["radius"], release_noise_std=plan.noise_std if noisy else 0.0,
        release_weight=1.0, chunk=kernels.steps_per_chunk(m))
    return _fits(run_many(problem, rngs, rule), plan.ledger)


@vectorised(fit_dp_gd)
def fit_dp_gd_many(problem: Problem, privacy: PrivacyTarget, rngs: Sequence[np.random.Generator],
                   **hyper: Any) -> list[Fit]:
    """R trainings of full-batch DP-GD (`gradient_perturbation.fit_dp_gd`, Wang-Ye-Xu 2017) as one
    vectorised loop; the fallback (module docstring) for a non-GLM model or trace_every > 0."""
    h = hyperparameters(fit_dp_gd, hyper)
    rngs = list(rngs)
    if not vectorisable(problem.model) or h["trace_every"]:
        return one_at_a_time(fit_dp_gd, problem, privacy, rngs, h)
    n, m = problem.n, problem.model.n_params
    plan = dp_gd_plan(problem.model, n, privacy, epochs=h["epochs"], lr=h["lr"], radius=h["radius"],
                      clip_norm=h["clip_norm"], calibration=h["calibration"], c=h["c"])
    s = plan.noise_std

    def draw(rng: np.random.Generator, out: np.ndarray) -> None:
        out[...] = rng.normal(0.0, s, size=out.shape)  # = out.shape[0] calls of rng.normal(0, s, size=m)

    rule = StepRule(
        lrs=np.full(plan.steps, float(h["lr"])), clip_norm=plan.clip_norm, rate=1.0, sum_divisor=float(n),
        noise_scale=1.0, draw_noise=draw if s > 0.0 else None, grad_divisor=1.0, radius=h["radius"],
        release_noise_std=s * n, release_weight=1.0 / n, chunk=kernels.steps_per_chunk(m))
    return _fits(run_many(problem, rngs, rule), plan.ledger)


__all__ = ["DRAW_BYTES", "NOISE_STEPS", "StepRule", "TILE_ELEMENTS", "fit_dp_gd_many", "fit_dpsgd_many",
           "hyperparameters", "one_at_a_time", "run_many", "vectorisable"]
