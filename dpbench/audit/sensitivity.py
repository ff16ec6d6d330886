"""The worst-case sensitivity game of `dpbench verify`: can one record move a release by more than
its declared clip norm?

The canary-effect check of `dpbench.audit.verify` adds a unit canary to the rows of a data set;
their gradients are large and varied, so a bug that clips the wrong thing (the batch's *sum* of
gradients, say, instead of each example's) hides there: the canary's share of a clipped sum is
small and looks like a rate. This game puts one record's effect at its worst case instead. Its rows
are logistic-regression records on one feature u (the model's only parameter):

* the canary x_c = A e_u, label +1, with A = CANARY_SCALE * C: at theta_u <= 0 its gradient
  -A sigmoid(-A theta_u) e_u has norm at least A / 2 >> C, so per-example clipping gives it exactly -C;
* n "mirrored" rows x_b = -a e_u, label +1, gradient a sigmoid(a theta_u) e_u, each far below C
  (never clipped), with a chosen so that the expected sum over a Poisson batch, M = q n a
  sigmoid(a theta_u), is MIRRORED_SUM * C at the start (or as close as a row allows there: at
  theta_u = -L one row's gradient is at most 0.28 / L).

Honest per-example clipping: the canary moves a step's sum along u by exactly its clipped gradient
(-C) when sampled. Clipping the batch's sum instead: without the canary the clipped sum is the
mirrored sum M (+u, norm about C); with it the sum points -u with norm about A and is clipped to
C: the canary moves it by C + min(M, C), up to 2C. No data set's rows are added: DP holds on every
data set, and extra rows only dilute the exchange (under sum clipping their gradients make the sum
large, so that the canary's effect along u stays near C while the rest of it goes where the check
does not look). The game's size is chosen for a sampling rate near TARGET_RATE (n = B / TARGET_RATE,
B the expected batch a probe fit declares), which makes each step show the canary's effect best.

The fits start at theta_u = -L (a public start, `Game.theta0`), L START_SPREADS times the spread
of the iterate along u over a probe fit in the game itself (started at -10 / A), and at least
10 / A, where the canary's gradient is 0.99 A, so that theta_u stays below 0 and the canary
clipped on most steps; a deeper start would cap the mirrored rows (0.28 / L each). The canary's
contribution a_t = <clip_C(grad l(theta_t; x_c)), u> is computed at each step's iterate anyway (a
step where it is not clipped counts for what it is). The statistic (one run of the check) is the
least-squares slope of

    D_t = z_t - q m_t,   z_t = <released_t, u> / weight,   m_t = n <clip_C(grad l(theta_t; x_b)), u>,

on a_t over the steps of fits with the canary, divided by the declared rate q: the canary's effect
per inclusion in units of its declared clipped contribution, 1 for an honest release (whose base
rows contribute q m_t on average, the release's own definition, `dpbench.algorithms.releases`).
Its standard error comes from the declared noise std s_t and the sampling variances
q(1-q)(n c_t^2 + a_t^2). A ratio above `factor` (1.25) and more than the one-sided
(1 - level) normal quantile of standard errors above 1 is a mismatch: "one record moves the releases
by ~x times the declared clip norm". Fits run until the standard error resolves 1.25 at that level
(resolution (factor - 1) / quantile) or until MAX_FITS.

The slope has no intercept: a release whose base rows contribute otherwise along u than their
declared clipped gradients moves the ratio too (that release is not the one it declares). Less
reads larger: a mean of normalised gradients, say, or under sum clipping the mirrored sum clipped
when above C, which MIRRORED_SUM = 1 keeps rare (the ratio of sum clipping is then about 2, not
more). More reads smaller: a sampling rate above the declared one takes more mirrored rows, which
hides the canary here (the canary-effect check of `dpbench.audit.verify` is the one for that bug).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats
from scipy.special import expit

from dpbench.algorithms.releases import Release, observing
from dpbench.audit.canaries import Game
from dpbench.audit.whitebox import contribution
from dpbench.core.errors import DpbenchError
from dpbench.core.keys import seed_from

#: the canary's feature value A in units of the declared clip norm (its gradient, norm
#: A sigmoid(-A theta_u), is clipped while theta_u <= log(CANARY_SCALE - 1) / A, at any theta_u <= 0)
CANARY_SCALE = 1e3
#: expected sum of the mirrored rows' gradients over a Poisson batch, in units of the clip norm
MIRRORED_SUM = 1.0
#: the sampling rate the game's size aims at (n = expected batch / TARGET_RATE)
TARGET_RATE = 0.5
#: the start theta_u = -START_SPREADS x (spread of the iterate along u over a probe fit in the game)
START_SPREADS = 1.5
#: most fits with the canary (each small: n rows of one feature)
MAX_FITS = 4000
#: fewest steps before the standard error is trusted to stop
MIN_STEPS = 200


@dataclass
class Effect:
    """The canary's effect per inclusion in units of its declared clipped contribution (`ratio`, 1
    when honest), its standard error, the steps and fits it rests on, and the game's settings."""

    ratio: float
    se: float
    steps: int
    fits: int
    rows: int
    rate: float
    clip_norm: float

    def status(self, level: float, factor: float) -> str:
        """mismatch when the ratio is above `factor` and above 1 by more than the one-sided
        (1 - level) normal quantile of standard errors; else ok."""
        far = self.ratio - 1.0 > stats.norm.ppf(1.0 - level) * self.se
        return "mismatch" if self.ratio > factor and far else "ok"

    def detail(self, level: float, factor: float) -> str:
        shown = (f"one record moves the releases by ~{self.ratio:.2f} times the declared clip norm "
                 f"(standard error {self.se:.2g}; {self.steps} steps of {self.fits} fits on {self.rows} mirrored rows, "
                 f"declared rate {self.rate:.3g}, clip norm {self.clip_norm:.3g})")
        if self.status(level, factor) == "mismatch":
            return shown + ": more than the clip norm allows"
        return shown


@dataclass
class _Steps:
    """What the fits with the canary showed, one entry per noisy step (module docstring)."""

    d: list[float] = field(default_factory=list)  # z_t - q m_t
    a: list[float] = field(default_factory=list)  # the canary's clipped contribution along u
    var: list[float] = field(default_factory=list)  # the honest variance of z_t given theta_t
    rates: set[float] = field(default_factory=set)
    clips: set[float | None] = field(default_factory=set)

    def effect(self, fits: int, rows: int) -> Effect | None:
        a, d, var = np.asarray(self.a), np.asarray(self.d), np.asarray(self.var)
        saa = float(a @ a)
        if len(self.rates) != 1 or len(self.clips) != 1 or saa == 0:
            return None
        q = next(iter(self.rates))
        slope, se = float(d @ a) / saa, math.sqrt(float((a * a) @ var)) / saa
        return Effect(ratio=slope / q, se=se / q, steps=len(a), fits=fits, rows=rows, rate=q,
                      clip_norm=float(next(iter(self.clips))))


class _Observer:
    """Listens to one fit's releases in the game (module docstring): D_t, a_t and the variance."""

    def __init__(self, game: Game, into: _Steps):
        self.game, self.into = game, into
        self.u = np.asarray(game.direction, dtype=float)
        self.xb, self.yb = np.asarray(game.X[0], dtype=float), float(game.y[0])
        self.n = int(game.X.shape[0])

    def __call__(self, release: Release) -> None:
        if release.kind != "gradient_sum":
            return
        g, into = self.game, self.into
        theta = np.atleast_2d(np.asarray(release.theta, dtype=float))[:1]
        released = np.atleast_2d(np.asarray(release.released, dtype=float))[0]
        q, clip = float(release.rate), release.clip_norm
        into.rates.add(q)
        into.clips.add(None if clip is None else float(clip))
        c = float(contribution(g.model, theta, self.xb, self.yb, clip, self.u)[0])  # one mirrored row
        a = float(contribution(g.model, theta, g.canary_x, g.canary_y, clip, self.u)[0])
        into.d.append(float(released @ self.u) / release.weight - q * self.n * c)
        into.a.append(a)
        into.var.append(float(release.noise_std) ** 2 + q * (1 - q) * (self.n * c * c + a * a))


def _mirrored_value(target: float, depth: float) -> float:
    """The a > 0 whose mirrored row's gradient a sigmoid(-a depth) at theta_u = -depth is `target`,
    the smaller root; where no a reaches it, the one that comes closest (a depth = 1.28, where
    a sigmoid(-a depth) peaks at 0.28 / depth)."""
    from scipy.optimize import brentq

    peak = 1.2785 / depth
    if target >= peak * expit(-peak * depth):
        return peak
    return float(brentq(lambda a: a * expit(-a * depth) - target, 0.0, peak, xtol=1e-14 * peak))


def mirrored_game(model, rows: int, clip_norm: float, batch: float, start: float) -> Game:
    """The game of the module docstring: `rows` mirrored rows (-a e_u, +1) whose expected batch sum
    (`batch` rows sampled) is MIRRORED_SUM * clip_norm at theta_u = `start`, the canary
    (CANARY_SCALE * clip_norm e_u, +1), fits starting at theta_u = `start` (`model`, of one feature,
    has its init set to it)."""
    target = MIRRORED_SUM * clip_norm / max(batch, 1e-12)  # per row: a sigmoid(a start)
    a = _mirrored_value(target, -start)
    canary = np.array([CANARY_SCALE * clip_norm])
    origin = np.array([start])
    model.init = lambda rng: origin.copy()  # the public start of every fit
    return Game(X=np.full((rows, 1), -a), y=np.ones(rows), canary_x=canary, canary_y=1.0, model=model,
                score=lambda theta: float(np.asarray(theta, dtype=float)[0]), theta0=np.array([start]),
                direction=np.array([1.0]),
                description=f"{rows} rows (-{a:.3g}, +1); canary ({canary[0]:.3g}, +1); start theta_u = {start:.3g}")


def _probe(info, problem, target, params: dict, seed: int, tag: str) -> list[Release]:
    """The gradient-sum releases of one fit (the probes of `measure`)."""
    seen: list[Release] = []
    rng = np.random.default_rng(np.random.SeedSequence(seed_from("verify-sensitivity-probe", tag, seed)))
    with observing(seen.append):
        info.fit(problem, target, rng, **params)
    return [r for r in seen if r.kind == "gradient_sum"]


def _spread(steps: list[Release], u: np.ndarray) -> float:
    """The spread of the iterate along u over one fit: per-step std of its moves x sqrt(steps)."""
    along = np.array([float(np.atleast_2d(np.asarray(r.theta, dtype=float))[0] @ u) for r in steps])
    moves = np.diff(along)
    return float(np.std(moves) * math.sqrt(len(along))) if len(moves) > 1 else 0.0


def _with_canary(game: Game):
    from dpbench import algorithms

    return algorithms.Problem(model=game.model, X=np.vstack([game.X, game.canary_x[None, :]]),
                              y=np.concatenate([game.y, [game.canary_y]]))


def measure(info, game: Game, params: dict, epsilon: float, delta: float, seed: int, *, level: float,
            factor: float, max_fits: int = MAX_FITS) -> Effect | str:
    """The canary's effect in the mirrored game (module docstring), or why it cannot be measured.
    `game` is verify's spare-feature game (its model must be logistic regression): a probe fit on
    its base rows gives the declared clip norm and rate (so the expected batch); a probe fit in the
    mirrored game started at -10 / A gives the iterate's spread there, from which the start."""
    from dpbench import algorithms, models

    if getattr(game.model, "name", "") != "logreg":
        return f"the game is built for the logistic loss; model {getattr(game.model, 'name', '?')} is not logreg"
    target = algorithms.PrivacyTarget(epsilon=epsilon, delta=delta)
    n0 = int(game.X.shape[0])
    probe = _probe(info, algorithms.Problem(model=game.model, X=game.X, y=game.y), target, params, seed, "base")
    if not probe or probe[0].clip_norm is None:
        return "the steps declare no clip norm: one record's effect is not bounded by the release"
    rate, clip = float(probe[0].rate), float(probe[0].clip_norm)
    batch = rate * n0
    rows = n0 if rate >= 1.0 else int(min(n0, max(4, round(batch / TARGET_RATE))))
    floor = 10.0 / (CANARY_SCALE * clip)  # theta_u <= -floor: the canary's gradient is >= 0.99 A

    def game_from(start: float) -> Game:
        return mirrored_game(models.make("logreg", 1, l2=game.model.l2), rows, clip, min(batch, rows), start)

    u = np.array([1.0])
    spread = _spread(_probe(info, _with_canary(game_from(-floor)), target, params, seed, "mirrored"), u)
    sgame = game_from(-max(START_SPREADS * spread, floor))
    problem = _with_canary(sgame)
    resolution = (factor - 1.0) / stats.norm.ppf(1.0 - level)
    seen = _Steps()
    fits = 0
    effect = None
    while fits < max_fits:
        rng = np.random.default_rng(np.random.SeedSequence(seed_from("verify-sensitivity", seed, fits)))
        with observing(_Observer(sgame, seen)):
            info.fit(problem, target, rng, **params)
        fits += 1
        if len(seen.a) >= MIN_STEPS and fits % 10 == 0:
            effect = seen.effect(fits, rows)
            if effect is not None and effect.se <= resolution:
                break
    effect = seen.effect(fits, rows)
    if effect is None:
        return "no single declared rate and clip norm, or the canary never contributed"
    return effect


def check(info, game: Game, params: dict, epsilon: float, delta: float, seed: int, *, level: float,
          factor: float) -> tuple[str, str]:
    """(status, detail) of the sensitivity check (module docstring): ok, mismatch or skipped (also
    when the algorithm refuses the game's data: one feature, a few rows)."""
    try:
        effect = measure(info, game, params, epsilon, delta, seed, level=level, factor=factor)
    except (DpbenchError, ValueError) as exc:
        return "skipped", f"the algorithm did not run in the game: {exc}"
    if isinstance(effect, str):
        return "skipped", effect
    return effect.status(level, factor), effect.detail(level, factor)


@dataclass
class Power:
    """`sensitivity_power`'s tally: mismatches over repetitions, each repetition's ratio and
    standard error, and the mean wall time of one measurement."""

    mismatches: int
    reps: int
    ratios: list[float]
    ses: list[float]
    seconds: float


def sensitivity_power(setup, reps: int = 50, *, data_dir: str | None = None, level: float = 1e-3,
                      factor: float = 1.25) -> Power:
    """How often the check says mismatch over `reps` independent measurements (seeds 0..reps-1 of
    the fits; the game is the same) for the algorithm of `setup` (an `AuditSetup` with the gradient
    canary, as verify builds it): the detection rate of a bug, the false-alarm rate of an honest
    algorithm, and the wall time per check."""
    import time

    from dpbench import algorithms
    from dpbench.audit.trials import build_game

    resolved, game = build_game(setup, data_dir=data_dir)
    info = algorithms.get(setup.algorithm)
    params = dict(resolved.params)
    found, ratios, ses = 0, [], []
    started = time.perf_counter()
    for rep in range(reps):
        effect = measure(info, game, params, float(setup.epsilon), float(setup.delta), rep, level=level,
                         factor=factor)
        if isinstance(effect, str):
            raise ValueError(f"the sensitivity check does not apply: {effect}")
        found += effect.status(level, factor) == "mismatch"
        ratios.append(effect.ratio)
        ses.append(effect.se)
    return Power(mismatches=found, reps=reps, ratios=ratios, ses=ses,
                 seconds=(time.perf_counter() - started) / max(reps, 1))


__all__ = ["CANARY_SCALE", "Effect", "MAX_FITS", "MIRRORED_SUM", "Power", "TARGET_RATE", "check", "measure",
           "mirrored_game", "sensitivity_power"]
