"""Vectorised and batched twins of DP-SGD and DP-GD (`base.vectorised`, `base.batched`): R trainings of
one problem as one fit.

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

Two twins share this loop. The vectorised twin (`fit_dpsgd_many`, `fit_dp_gd_many`) trains R
replicas of one setting: one privacy target, one set of hyperparameters, R seeds (a privacy
audit). The batched twin (`fit_dpsgd_batch`, `fit_dp_gd_batch`) trains R replicas that may differ
in their privacy target and in the step size (`VARYING`), as a grid's cells do: the gradient pass
above only needs the replicas to share the data, the model, the clipping norm, the number of steps
and the sampling rate, while each replica's noise std (z_r C, resp. s_r, from its own calibration
`dpsgd.noisy_sgd_plan` / `gradient_perturbation.dp_gd_plan`) and step sizes enter per row. The
vectorised twin is the batched loop with equal targets and hyperparameters; a calibration is made
once per distinct target (and step size, which DP-GD's ledger records), not once per replica.
Batched DP-SGD runs the loop for full batches (q = 1) only: with Poisson batches each step's
masks and margins cost O(n) per replica where a single fit (compiled, `kernels.glm_sgd_steps`)
costs O(B), so on a grid's data sets (thousands of rows and more) the single fits are faster,
and the batched twin runs them one after the other.

Random draws. Replica r draws from rngs[r] exactly what `fit(problem, privacy, rngs[r], **hyper)`
draws, in the same order: the model's init, then per chunk of `kernels.steps_per_chunk(m)` steps
(DP-SGD) its Poisson batches (`sgd.poisson_batches`, q < 1 only) followed by the chunk's standard
normal noise, step by step; DP-GD draws N(0, s^2 I) per step. Python loops over the replicas only
to make these draws (a Generator's normals drawn in pieces are the same numbers as drawn at once,
so the noise is drawn a few steps ahead, `NOISE_STEPS`, not a whole chunk ahead). The results
equal the one-at-a-time fits up to floating-point rounding (sums are taken in another order), and
each Fit carries the single fit's ledger (`dpsgd.noisy_sgd_plan`, `gradient_perturbation.dp_gd_plan`).

Releases (`releases`): every step is reported once for all replicas, with (R, m) arrays and the
single fit's step numbers, rate, clip norm, noise std and weight. Replicas are processed in blocks
when the draws held at once for all R would exceed `DRAW_BYTES` (64 MB); while somebody observes, the
blocks' releases are then copied and re-emitted per step at the end (R x T x 2m floats; a tally
counts the re-emitted steps only). A batched twin's replicas may release with different noise
stds, which one `Release` cannot hold: while somebody observes, it runs the single fits one after
the other, each reporting its own (m,) steps. While nobody observes, the loops report no step one
by one but all of them in bulk at the end (`releases.released_steps`, replica r with its own noise
std), and single fits run one after the other report as replica r (`releases.replicas_from`), so a
tally of the whole call splits per replica (`releases.Tally.split`).

Fallback: another model (not a generalised linear model with the plain L2 term, e.g. the MLP), or
a trace (`trace_every` > 0), runs the single fit R times, in a plain loop: the same results, not
faster; the vectorised twin's releases are stacked per step as above.
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator, Sequence, TypeVar

import numpy as np

from dpbench.algorithms import kernels, releases
from dpbench.algorithms.base import Fit, FitFunction, PrivacyTarget, Problem, batched, hyperparameters, vectorised
from dpbench.algorithms.dpsgd import fit_dpsgd, noisy_sgd_plan
from dpbench.algorithms.gradient_perturbation import (Bst14Plan, bst14_chunk, bst14_fit, bst14_plan, dp_gd_plan,
                                                      fit_dp_gd, fit_noisy_sgd_bst14, plain_glm)
from dpbench.algorithms.sgd import learning_rates, poisson_batches
from dpbench.core.gaussian import normal, standard_normal
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
#: the hyperparameters in which a batched twin's replicas may differ: the step size enters the update
#: of each row of Theta on its own and shapes no draw
VARYING = ("lr",)

T = TypeVar("T")


def vectorisable(model: Model) -> bool:
    """A generalised linear model with the base L2 term and the base clipped sum: the vectorised loop applies."""
    return vectorisable_class(type(model))


def vectorisable_class(cls: type) -> bool:
    """`vectorisable` for every model of class `cls`."""
    return (issubclass(cls, _GLM) and cls.reg_grad is Model.reg_grad
            and cls.clipped_grad_sum is _GLM.clipped_grad_sum)


def _dp_gd_pays(model_class: type, params: dict) -> bool:
    """Full-batch DP-GD: one pass over X per step for all replicas, where the loop applies."""
    return vectorisable_class(model_class) and not params.get("trace_every")


def _dpsgd_pays(model_class: type, params: dict) -> bool:
    """DP-SGD with Poisson batches touches ~B rows a step: the single fits' compiled steps are
    faster than a vectorised step over all n rows (measured: 6 fits on 30k rows, batch 256, 0.056 s
    alone against 1.49 s vectorised), and whether a batch is the whole data set is known only
    with the data, so a grid does not batch DP-SGD."""
    return False


def batch_hyperparameters(fit: FitFunction, params: Sequence[dict[str, Any]],
                          varying: Sequence[str] = VARYING) -> list[dict[str, Any]]:
    """Each replica's `hyperparameters`, checked equal across the replicas except in `varying`
    (ValueError naming the first that differs)."""
    full = [hyperparameters(fit, p) for p in params]
    for name in full[0] if full else ():
        values = [h[name] for h in full]
        if name not in varying and any(v != values[0] for v in values[1:]):
            algorithm = fit.dpbench_component.name  # type: ignore[attr-defined]
            raise ValueError(f"{algorithm}: the replicas of one batched fit may differ only in their privacy "
                             f"target and {', '.join(varying)}; {name} differs: {values}")
    return full


def once_each(keys: Sequence[Hashable], make: Callable[[int], T]) -> list[T]:
    """[make(r) for each replica r], made once per distinct keys[r] and shared by the replicas with that key."""
    made: dict[Hashable, T] = {}
    for r, key in enumerate(keys):
        if key not in made:
            made[key] = make(r)
    return [made[key] for key in keys]


def agreed(plans: Sequence[Any], shapes: Sequence[str]) -> None:
    """ValueError naming the first of `shapes` (plan attributes) on which the replicas' plans disagree."""
    for name in shapes:
        values = sorted({getattr(plan, name) for plan in plans})
        if len(values) > 1:
            raise ValueError(f"the replicas of one batched fit need the same {name}; their calibrations give {values}")


# ---------------------------------------------------------------------------------------------
# releases: stacking per-replica (or per-block) reports into one (R, m) report per step
# ---------------------------------------------------------------------------------------------
def _collecting(sink: list[releases.Release]) -> Callable[[releases.Release], None]:
    """An observer that keeps a copy of every release (the loops may reuse the arrays)."""
    return lambda rel: sink.append(dataclasses.replace(rel, theta=np.array(rel.theta, dtype=float),
                                                       released=np.array(rel.released, dtype=float)))


@contextmanager
def _collected(sink: list[releases.Release]) -> Iterator[None]:
    """Observe into `sink` (`_collecting`), the tally paused: the collected steps are reported again,
    stacked (`_emit_stacked`), and counted then."""
    with releases.observing(_collecting(sink)), releases.not_tallied():
        yield


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
    """The fallback: `fit(problem, privacy, rng, **hyper)` for each rng, releases stacked per step
    (unobserved: each fit's steps tallied as its replica's, `releases.replicas_from`)."""
    if not releases._observed():
        return _one_by_one([(privacy, rng, hyper) for rng in rngs], fit, problem)
    fits, groups = [], []
    for rng in rngs:
        got: list[releases.Release] = []
        with _collected(got):
            fits.append(fit(problem, privacy, rng, **hyper))
        groups.append(got)
    _emit_stacked(groups)
    return fits


def _one_by_one(runs: Sequence[tuple[PrivacyTarget, np.random.Generator, dict[str, Any]]], fit: FitFunction,
                problem: Problem) -> list[Fit]:
    """`fit(problem, privacy, rng, **hyper)` for each (privacy, rng, hyper), the r-th fit's steps
    reported as replica r's (`releases.replicas_from`: a tally of the whole call splits per replica)."""
    fits = []
    for r, (privacy, rng, hyper) in enumerate(runs):
        with releases.replicas_from(r):
            fits.append(fit(problem, privacy, rng, **hyper))
    return fits


# ---------------------------------------------------------------------------------------------
# the vectorised loop
# ---------------------------------------------------------------------------------------------
NoiseDraw = Callable[[np.random.Generator, np.ndarray], None]  # fills a (k, m) array with k steps' noise


@dataclass(frozen=True)
class StepRule:
    """One noisy clipped-gradient step of R replicas (module docstring), in the single fits' terms; replica r:

    released_r = (clipped sum_r) / sum_divisor + noise_scale[r] * noise_rt   (noise_rt: draws[r]'s numbers)
    theta_r    = Proj_radius(theta_r - lrs[lr_row[r], t] (released_r / grad_divisor + grad reg(theta_r)))

    The shared fields fix the gradient pass (clipping, sampling, steps); the per-replica ones are
    each replica's own calibration and step sizes.
    """

    lrs: np.ndarray  # (U, steps): the distinct step-size schedules
    lr_row: np.ndarray  # (R,) replica r steps with lrs[lr_row[r]]
    clip_norm: float
    rate: float  # Poisson sampling rate q; 1: full batch (no sampling draws)
    sum_divisor: float
    noise_scale: np.ndarray  # (R,)
    draws: tuple[NoiseDraw | None, ...]  # (R,) replica r's noise draw; None: no noise
    grad_divisor: float
    radius: float | None
    release_noise_std: np.ndarray  # (R,) what `releases.release` reports, as the single fit does
    release_weight: float
    chunk: int  # steps whose sampling is drawn together (`kernels.steps_per_chunk`)

    @property
    def steps(self) -> int:
        return int(self.lrs.shape[1])

    @property
    def noisy(self) -> bool:
        return any(draw is not None for draw in self.draws)

    def replicas(self, a: int, b: int) -> "StepRule":
        """The rule of replicas a..b-1."""
        return dataclasses.replace(self, lr_row=self.lr_row[a:b], noise_scale=self.noise_scale[a:b],
                                   draws=self.draws[a:b], release_noise_std=self.release_noise_std[a:b])


def _table(keys: Sequence[Hashable], make: Callable[[int], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(rows, index): rows[index[r]] = make(r), one row per distinct keys[r] (`StepRule.lrs`, `lr_row`)."""
    first: dict[Hashable, int] = {}
    index = np.array([first.setdefault(key, len(first)) for key in keys], dtype=np.intp)
    owners = {i: r for r, i in reversed(list(enumerate(index.tolist())))}  # row i -> the first replica with it
    return np.stack([make(owners[i]) for i in range(len(first))]), index


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
        """(B, m): row r is sum_i W[r, i] clip_C(grad l(Theta[r]; x_i, y_i)); bits: packed W (None: all rows).

        Tiles of replicas x all rows; where one replica's margins already fill a tile (n >
        TILE_ELEMENTS), tiles of all replicas x a block of rows, so X is read once per step for all.
        """
        B = Theta.shape[0]
        if B > 1 and self.n > TILE_ELEMENTS:
            return self._row_blocked_sums(Theta, bits)
        out = np.empty((B, self.X.shape[1]))
        for i in range(0, B, self.tile_rows):
            j = min(B, i + self.tile_rows)
            S = self.model._dphi(Theta[i:j] @ self.XT, self.y)
            np.clip(S, self.lower, self.bound, out=S)
            if bits is not None:
                S *= np.unpackbits(bits[i:j], axis=1, count=self.n)
            np.matmul(S, self.X, out=out[i:j])
        return out

    def _row_blocked_sums(self, Theta: np.ndarray, bits: np.ndarray | None) -> np.ndarray:
        """`clipped_sums` summed over blocks of rows (a multiple of 8 rows each: whole bytes of `bits`)."""
        B = Theta.shape[0]
        block = max(8, TILE_ELEMENTS // B // 8 * 8)
        out = np.zeros((B, self.X.shape[1]))
        for a in range(0, self.n, block):
            b = min(self.n, a + block)
            X = self.X[a:b]
            S = self.model._dphi(Theta @ X.T, self.y[a:b])
            np.clip(S, self.lower[a:b], self.bound[a:b], out=S)
            if bits is not None:
                S *= np.unpackbits(bits[:, a // 8:(b + 7) // 8], axis=1, count=b - a)
            out += S @ X
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
    """All steps of one block of replicas (Theta (B, m), rngs[r] and rule.replicas' row r for row r);
    reports every step (all rows must then release the same noise std)."""
    B, m = Theta.shape
    model, n = data.model, data.n
    sampled = rule.rate < 1.0
    observe = releases._observed()
    if observe and B and np.any(rule.release_noise_std != rule.release_noise_std[0]):
        raise RuntimeError("replicas with different noise stds cannot report their steps as one release")
    release_std = float(rule.release_noise_std[0]) if B else 0.0
    k_max = min(rule.chunk, rule.steps)
    bits = np.empty((k_max, B, (n + 7) // 8), dtype=np.uint8) if sampled else None
    ahead = min(NOISE_STEPS, k_max)
    noise = np.zeros((B, ahead, m)) if rule.noisy else None  # a replica without noise keeps its zeros
    scale = rule.noise_scale[:, None]
    for start in range(0, rule.steps, rule.chunk):
        k = min(rule.chunk, rule.steps - start)
        if bits is not None:
            for r, rng in enumerate(rngs):  # the chunk's batches, then (below) its noise, per replica
                offsets, rows = poisson_batches(rng, n, rule.rate, k)
                bits[:k, r] = _packed_mask(offsets, rows, k, n)
        for t in range(k):
            if noise is not None and t % ahead == 0:
                for r, (rng, draw) in enumerate(zip(rngs, rule.draws)):
                    if draw is not None:
                        draw(rng, noise[r, :min(ahead, k - t)])
            released = data.clipped_sums(Theta, None if bits is None else bits[t]) / rule.sum_divisor
            if noise is not None:
                released += scale * noise[:, t % ahead]
            if observe:
                releases.release(start + t + 1, Theta, released, release_std, rate=rule.rate,
                                 clip_norm=rule.clip_norm, weight=rule.release_weight)
            g = released / rule.grad_divisor + model.reg_grad(Theta)
            Theta = _project_rows(Theta - rule.lrs[rule.lr_row, start + t][:, None] * g, rule.radius)
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
                   + (min(NOISE_STEPS, k_max) * Theta.shape[1] * 8 if rule.noisy else 0))
    block = R if per_replica == 0 else max(1, min(R, DRAW_BYTES // per_replica))
    observe = releases._observed()
    if block >= R:
        Theta = _run_block(data, Theta, rngs, rule)
    else:
        groups: list[list[releases.Release]] = []
        for a in range(0, R, block):
            b = min(R, a + block)
            if observe:
                groups.append([])
                with _collected(groups[-1]):
                    Theta[a:b] = _run_block(data, Theta[a:b], rngs[a:b], rule.replicas(a, b))
            else:
                Theta[a:b] = _run_block(data, Theta[a:b], rngs[a:b], rule.replicas(a, b))
        if observe:
            _emit_stacked(groups)
    if not observe:  # the blocks reported no step: all of them in bulk, each replica with its own noise std
        releases.released_steps(rule.steps, rule.release_noise_std, rate=rule.rate, clip_norm=rule.clip_norm,
                                weight=rule.release_weight)
    return Theta


def _fits(Theta: np.ndarray, ledgers: Sequence[Ledger]) -> list[Fit]:
    return [Fit(theta=Theta[r].copy(), privacy=ledgers[r], trace=[]) for r in range(Theta.shape[0])]


# ---------------------------------------------------------------------------------------------
# the loops of the two algorithms: R replicas, each with its target and hyperparameters
# ---------------------------------------------------------------------------------------------
def _dpsgd_loop(problem: Problem, privacies: Sequence[PrivacyTarget], rngs: Sequence[np.random.Generator],
                hypers: Sequence[dict[str, Any]]) -> list[Fit]:
    """DP-SGD (`dpsgd.fit_dpsgd`, Abadi et al. 2016 Alg. 1) of R replicas of a vectorisable problem;
    hypers equal except in `VARYING`, privacies any."""
    h = hypers[0]
    n, m = problem.n, problem.model.n_params
    plans = once_each(privacies, lambda r: noisy_sgd_plan(
        n, privacies[r], epochs=h["epochs"], batch_size=h["batch_size"], clip_norm=h["clip_norm"],
        calibration=h["calibration"], paper_c=h["paper_c"]))
    agreed(plans, ("steps", "batch_size"))
    plan = plans[0]
    q = min(1.0, plan.batch_size / n)  # as `run_sgd` derives them
    steps_per_epoch = max(1.0, n / plan.batch_size)
    lrs, lr_row = _table([hr["lr"] for hr in hypers], lambda r: learning_rates(
        hypers[r]["lr"], h["lr_schedule"], np.arange(plan.steps), steps_per_epoch))
    std = np.array([p.noise_std for p in plans], dtype=float)
    noisy = std > 0.0
    rule = StepRule(
        lrs=lrs, lr_row=lr_row, clip_norm=h["clip_norm"], rate=q, sum_divisor=1.0, noise_scale=std,
        draws=tuple(_standard_normal if on else None for on in noisy), grad_divisor=q * n, radius=h["radius"],
        release_noise_std=np.where(noisy, std, 0.0), release_weight=1.0, chunk=kernels.steps_per_chunk(m))
    return _fits(run_many(problem, rngs, rule), [p.ledger for p in plans])


def _standard_normal(rng: np.random.Generator, out: np.ndarray) -> None:
    standard_normal(rng, out)  # `run_sgd`'s draw


def _gaussian(s: float) -> NoiseDraw:
    def draw(rng: np.random.Generator, out: np.ndarray) -> None:
        out[...] = normal(rng, s, out.shape)  # = out.shape[0] calls of rng.normal(0, s, size=m)

    return draw


def _dp_gd_loop(problem: Problem, privacies: Sequence[PrivacyTarget], rngs: Sequence[np.random.Generator],
                hypers: Sequence[dict[str, Any]]) -> list[Fit]:
    """Full-batch DP-GD (`gradient_perturbation.fit_dp_gd`, Wang-Ye-Xu 2017) of R replicas of a
    vectorisable problem; hypers equal except in `VARYING`, privacies any."""
    h = hypers[0]
    n, m = problem.n, problem.model.n_params
    plans = once_each([(p, hr["lr"]) for p, hr in zip(privacies, hypers)], lambda r: dp_gd_plan(
        problem.model, n, privacies[r], epochs=h["epochs"], lr=hypers[r]["lr"], radius=h["radius"],
        clip_norm=h["clip_norm"], calibration=h["calibration"], c=h["c"]))  # its ledger records lr
    agreed(plans, ("steps", "clip_norm"))
    steps = plans[0].steps
    lrs, lr_row = _table([hr["lr"] for hr in hypers], lambda r: np.full(steps, float(hypers[r]["lr"])))
    s = np.array([p.noise_std for p in plans], dtype=float)
    rule = StepRule(
        lrs=lrs, lr_row=lr_row, clip_norm=plans[0].clip_norm, rate=1.0, sum_divisor=float(n),
        noise_scale=np.ones(len(plans)), draws=tuple(_gaussian(float(v)) if v > 0.0 else None for v in s),
        grad_divisor=1.0, radius=h["radius"], release_noise_std=s * n, release_weight=1.0 / n,
        chunk=kernels.steps_per_chunk(m))
    return _fits(run_many(problem, rngs, rule), [p.ledger for p in plans])


Loop = Callable[[Problem, Sequence[PrivacyTarget], Sequence[np.random.Generator], Sequence[dict[str, Any]]], list[Fit]]


def _applies(problem: Problem, hyper: dict[str, Any]) -> bool:
    """The vectorised loop runs (else the fallback, module docstring)."""
    return vectorisable(problem.model) and not hyper["trace_every"]


def _many(fit: FitFunction, loop: Loop, problem: Problem, privacy: PrivacyTarget,
          rngs: Sequence[np.random.Generator], hyper: dict[str, Any]) -> list[Fit]:
    """The vectorised twin of `fit`: R replicas of one target and one setting."""
    h = hyperparameters(fit, hyper)
    rngs = list(rngs)
    if not rngs:
        return []
    if not _applies(problem, h):
        return one_at_a_time(fit, problem, privacy, rngs, h)
    return loop(problem, [privacy] * len(rngs), rngs, [h] * len(rngs))


def _batch(fit: FitFunction, loop: Loop, problem: Problem, privacies: Sequence[PrivacyTarget],
           rngs: Sequence[np.random.Generator], params: Sequence[dict[str, Any]],
           pays: Callable[[Problem, dict[str, Any]], bool] = lambda problem, hyper: True) -> list[Fit]:
    """The batched twin of `fit` (`base.batched`): replica r with privacies[r], rngs[r], params[r];
    the single fits where the loop does not apply or does not `pay` (is not faster than they are)."""
    privacies, rngs, params = list(privacies), list(rngs), list(params)
    if not len(privacies) == len(rngs) == len(params):
        raise ValueError(f"a batched fit needs one privacy target, rng and hyperparameter set per replica; got "
                         f"{len(privacies)}, {len(rngs)} and {len(params)}")
    hypers = batch_hyperparameters(fit, params)
    if not rngs:
        return []
    if not (_applies(problem, hypers[0]) and pays(problem, hypers[0])) or releases._observed():
        return _one_by_one(list(zip(privacies, rngs, hypers)), fit, problem)
    return loop(problem, privacies, rngs, hypers)


def _full_batch(problem: Problem, hyper: dict[str, Any]) -> bool:
    """DP-SGD's batch is the whole data set (q = min(1, B/n) = 1, as `sgd.run_sgd` derives it)."""
    return hyper["batch_size"] >= problem.n


# ---------------------------------------------------------------------------------------------
# the twins
# ---------------------------------------------------------------------------------------------
@vectorised(fit_dpsgd)
def fit_dpsgd_many(problem: Problem, privacy: PrivacyTarget, rngs: Sequence[np.random.Generator],
                   **hyper: Any) -> list[Fit]:
    """R trainings of DP-SGD (`dpsgd.fit_dpsgd`, Abadi et al. 2016 Alg. 1) as one vectorised loop;
    the fallback (module docstring) for a non-GLM model or trace_every > 0."""
    return _many(fit_dpsgd, _dpsgd_loop, problem, privacy, rngs, hyper)


@vectorised(fit_dp_gd)
def fit_dp_gd_many(problem: Problem, privacy: PrivacyTarget, rngs: Sequence[np.random.Generator],
                   **hyper: Any) -> list[Fit]:
    """R trainings of full-batch DP-GD (`gradient_perturbation.fit_dp_gd`, Wang-Ye-Xu 2017) as one
    vectorised loop; the fallback (module docstring) for a non-GLM model or trace_every > 0."""
    return _many(fit_dp_gd, _dp_gd_loop, problem, privacy, rngs, hyper)


# ---------------------------------------------------------------------------------------------
# BST14: one sampled row per step, R replicas at once
# ---------------------------------------------------------------------------------------------
def _bst14_block(problem: Problem, plan: Bst14Plan, rngs: Sequence[np.random.Generator]) -> np.ndarray:
    """(R, m) final iterates of `gradient_perturbation.bst14_core` for R replicas of a plain GLM.

    Each replica draws what the single fit draws, in its order: the model's init, then per chunk
    (`bst14_chunk`) its k row indices and its (k, m) noise. Step t, for every replica r at once:
    s_r = phi'(x_{i_rt} . theta_r; y), clipped to |s_r| ||x_{i_rt}|| <= G; theta_r <- theta_r (1 - eta_t
    l2) - eta_t s_r x_{i_rt} - eta_t b_rt; then the projection on the ball of radius r."""
    model = problem.model
    X = np.asarray(problem.X, dtype=np.float64)
    y = np.asarray(problem.y, dtype=np.float64)
    n = problem.n
    Theta = np.stack([np.asarray(model.init(rng), dtype=np.float64) for rng in rngs])
    R, p = Theta.shape
    xnorm = np.sqrt(np.einsum("ij,ij->i", X, X))
    C, l2, sigma = float(plan.G), model.l2, plan.sigma
    r2 = None if plan.radius is None else float(plan.radius) ** 2
    chunk = bst14_chunk(p)
    observe = releases._observed()
    done = 0
    while done < plan.steps_run:
        k = min(chunk, plan.steps_run - done)
        idx = np.empty((R, k), dtype=np.int64)
        noise = np.empty((R, k, p)) if sigma > 0.0 else None
        for r, rng in enumerate(rngs):
            idx[r] = rng.integers(0, n, size=k)
            if noise is not None:
                noise[r] = normal(rng, sigma, (k, p))
        eta = np.asarray(plan.step_size(np.arange(done + 1, done + k + 1)), dtype=float)
        for j in range(k):
            e = float(eta[j])
            rows = idx[:, j]
            x = X[rows]
            s = model._dphi(np.einsum("rp,rp->r", x, Theta), y[rows])
            norm = np.abs(s) * xnorm[rows]
            coef = s.copy()
            big = norm > C
            coef[big] = s[big] * (C / norm[big])  # min(1, C/||g||) as the single fit's step
            theta_t = Theta
            Theta = Theta * (1.0 - e * l2) - (e * coef)[:, None] * x
            if observe:
                g = coef[:, None] * x
                releases.release(done + j + 1, theta_t, g if noise is None else g + noise[:, j], sigma, rate=1.0 / n,
                                 clip_norm=C)
            if noise is not None:
                Theta -= noise[:, j] * e
            if r2 is not None:
                sq = np.einsum("rp,rp->r", Theta, Theta)
                over = sq > r2
                if over.any():
                    Theta[over] *= np.sqrt(r2 / sq[over])[:, None]
        done += k
    return Theta


@vectorised(fit_noisy_sgd_bst14)
def fit_noisy_sgd_bst14_many(problem: Problem, privacy: PrivacyTarget, rngs: Sequence[np.random.Generator],
                             **hyper: Any) -> list[Fit]:
    """R trainings of BST14 noisy SGD (`gradient_perturbation.fit_noisy_sgd_bst14`, Bassily-Smith-Thakurta
    2014 Alg. 1) as one loop over the steps, each step one numpy pass over the R replicas' sampled rows
    (`_bst14_block`); replicas in blocks whose drawn noise stays within `DRAW_BYTES`, their releases
    stacked per step. The fallback (module docstring) for a model other than a plain GLM or trace_every > 0."""
    h = hyperparameters(fit_noisy_sgd_bst14, hyper)
    rngs = list(rngs)
    if not rngs:
        return []
    if not plain_glm(problem.model) or h["trace_every"]:
        return one_at_a_time(fit_noisy_sgd_bst14, problem, privacy, rngs, h)
    plan = bst14_plan(problem, privacy, steps=h["steps"], lr_schedule=h["lr_schedule"], lr=h["lr"],
                      radius=h["radius"], clip_norm=h["clip_norm"])
    per_replica = min(bst14_chunk(problem.model.n_params), plan.steps_run) * problem.model.n_params * 8
    block = max(1, min(len(rngs), DRAW_BYTES // max(per_replica, 1)))
    Theta = np.empty((len(rngs), problem.model.n_params))
    observe = releases._observed()
    groups: list[list[releases.Release]] = []
    for a in range(0, len(rngs), block):
        b = min(len(rngs), a + block)
        if observe and block < len(rngs):
            groups.append([])
            with _collected(groups[-1]):
                Theta[a:b] = _bst14_block(problem, plan, rngs[a:b])
        else:
            Theta[a:b] = _bst14_block(problem, plan, rngs[a:b])
    if groups:
        _emit_stacked(groups)
    if not observe:  # the blocks reported no step: all of them in bulk, for every replica
        releases.released_steps(plan.steps_run, plan.sigma, rate=1.0 / problem.n, clip_norm=float(plan.G),
                                replicas=len(rngs))
    return [bst14_fit(plan, Theta[r].copy(), []) for r in range(len(rngs))]


@batched(fit_dpsgd, varying=VARYING, pays=_dpsgd_pays)
def fit_dpsgd_batch(problem: Problem, privacies: Sequence[PrivacyTarget], rngs: Sequence[np.random.Generator],
                    params: Sequence[dict[str, Any]]) -> list[Fit]:
    """R trainings of DP-SGD whose targets and step sizes may differ, as one vectorised loop (each
    replica its own noise multiplier, same steps and batch size); the fallback for a non-GLM model
    or trace_every > 0, or while somebody observes the releases, and for Poisson batches (q < 1;
    module docstring)."""
    return _batch(fit_dpsgd, _dpsgd_loop, problem, privacies, rngs, params, pays=_full_batch)


@batched(fit_dp_gd, varying=VARYING, pays=_dp_gd_pays)
def fit_dp_gd_batch(problem: Problem, privacies: Sequence[PrivacyTarget], rngs: Sequence[np.random.Generator],
                    params: Sequence[dict[str, Any]]) -> list[Fit]:
    """R trainings of full-batch DP-GD whose targets and step sizes may differ, as one vectorised
    loop (each replica its own noise std and ledger, same steps); the fallback for a non-GLM model
    or trace_every > 0, or while somebody observes the releases (module docstring)."""
    return _batch(fit_dp_gd, _dp_gd_loop, problem, privacies, rngs, params)


__all__ = ["DRAW_BYTES", "NOISE_STEPS", "StepRule", "TILE_ELEMENTS", "VARYING", "agreed", "batch_hyperparameters",
           "once_each",
           "fit_dp_gd_batch", "fit_dp_gd_many", "fit_dpsgd_batch", "fit_dpsgd_many", "fit_noisy_sgd_bst14_many",
           "one_at_a_time", "run_many", "vectorisable", "vectorisable_class"]
