"""`dpbench verify`: what an algorithm does, checked against what its ledger claims.

A fit's ledger says what it spent; nothing obliges it to be true (a plugin's least of all). This
module runs the algorithm a few times on the spare-feature game of the audits (base rows of a data
set plus an all-zero column, `dpbench.audit.canaries`) with its feature space turned by a seeded
random rotation (`dpbench.audit.rotation`: no column is all-zero, so a fit cannot tell it is
tested, and the spare direction u is a random unit vector that no base row touches), observes every
noisy step the fit reports and every gradient it evaluates through its model
(`dpbench.models.access`), and checks, independently of the fit's own arithmetic:

* **ledger**: a "valid" claim needs what every stored run is held to (`dpbench.privacy.claim_check`:
  a finite epsilon spent within the target, at the target's delta, and its mechanism stated: a
  DpEvent agreeing with the ledger's numbers, from which dpbench's accountants recompute an
  epsilon within the target, or the theorem it rests on);
* **stream** (algorithms that report their noisy steps, `dpbench.algorithms.releases`):
  - steps: the noisy steps observed per run against the ledger's `steps`;
  - declared noise: each step's noise std / clip norm against the ledger's noise multiplier
    (twice the clip norm under replace-one), its rate against the ledger's sampling rate, its clip
    norm against the ledger's sensitivity. These two are the run-time release check's rule
    (`dpbench.algorithms.release_check.compare`, on each run's tally), the one every stored run is
    held to;
  - measured noise: no base record touches u, so on the base rows a released gradient sum along u is
    its noise alone, z_t = <released_t, u> / weight ~ N(0, s_t^2) with s_t the declared std; the
    99.9 % chi-square interval of sqrt(mean (z_t / s_t)^2) must reach 0.9 (less noise than declared
    is a mismatch; more is reported, not flagged: a noisy statistic that is not linear in the
    records, such as a coordinate-wise robust mean, has some signal along the turned u too);
  - canary effect: with the canary (u, +1) added, z_t = b_t a_t + noise, where a_t is the
    canary's gradient along u clipped to the declared clip norm at the step's iterate (what the
    release says one record can contribute) and b_t ~ Bernoulli(q) its membership of the batch.
    The least-squares slope sum z_t a_t / sum a_t^2 estimates q; one more than 4 standard errors
    and 25 % above the declared rate means a record moves the releases more than rate and clip
    allow (no clipping, a larger batch than declared);
  - the iterates follow the releases: along u an honest first-order step moves the iterate with
    the released statistic (theta_{t+1,u} - theta_{t,u} against z_t, the last step's successor
    being the returned model); no correlation (|r| < 0.1, or its 99.9 % interval containing 0)
    means the reported releases are not what trained the model;
  - recomputed epsilon: the epsilon of the steps as observed (T counted, z and q as each step
    declared them) at the target delta, within 1 % of the target;
  - steps taken, sampling scheme, serial dependence (`dpbench.audit.stream_checks`): rows whose
    gradients were evaluated at iterates no reported step declares, against the rows the steps
    sample; the batch sizes and the canary's inclusions against Poisson sampling at the declared
    rate; the noise along u between the steps of a run against independence;
* **audit** (`trials` > 0): the all-updates audit with the gradient canary (its recommended
  parameters set by role, e.g. the clip norm, `Recipe.roles`), or the final-model audit for an
  algorithm that reports no steps. A lower bound above the claim is a mismatch (a proof, at 95 %
  confidence); an estimate whose interval lies above the claim is a suspicion (a warning, not a
  proof).

The result is `consistent`, `mismatch: ...` or `suspect: ...` (`Verification.verdict`). A fit that
raises (the algorithm refuses the setting, as a library's accountant does for a budget it cannot
reach) is no verdict: `AuditError` names the exception, and a SPEC's table lists the row as skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from dpbench.algorithms import release_check
from dpbench.algorithms.releases import Release, Tally, observing, tallying
from dpbench.audit import sensitivity as sensitivity_game
from dpbench.audit.canaries import Game
from dpbench.audit.rotation import rotated
from dpbench.audit.setup import AuditError, AuditSetup
from dpbench.audit.stream_checks import CHECK_LEVEL, check_sampling, check_serial_dependence, check_steps_taken
from dpbench.audit.whitebox import contribution
from dpbench.core.errors import DpbenchError
from dpbench.core.keys import seed_from
from dpbench.core.ledger import Ledger
from dpbench.models.access import Access, digest, recording
from dpbench.privacy import claim_check, events
from dpbench.run import plugin_records

#: relative slack of a recomputed epsilon over the target: the accountants' discretisation (PLD
#: pessimistic estimates are within ~0.3 % of the exact value, docs/accounting.md)
RECOMPUTE_TOLERANCE = 0.01
#: CHECK_LEVEL (from `dpbench.audit.stream_checks`): a check's false-alarm level (each statistical
#: check of one run of `verify`)
#: measured noise below this fraction of the declared std (upper end of its interval) is a mismatch
NOISE_FLOOR = 0.9
#: a canary-effect slope this many standard errors and this factor above the declared rate is a mismatch
EFFECT_SE, EFFECT_FACTOR = 4.0, 1.25
#: |correlation| of iterate moves and releases along u below this (or not significant) is a mismatch
FOLLOW_MIN = 0.1
VERDICTS = ("consistent", "mismatch", "suspect")
#: exit codes of `dpbench verify` by verdict (2 and 3 are the usage and file-system errors of every command)
EXIT_CODES = {"consistent": 0, "mismatch": 1, "suspect": 4}


@dataclass(frozen=True)
class Finding:
    """One check: its name, `ok`, `mismatch`, `suspect` or `skipped`, and what it saw."""

    check: str
    status: str
    detail: str


@dataclass
class Verification:
    """All checks of one algorithm (with the parameters its fits used); `verdict` sums them up."""

    algorithm: str
    findings: list[Finding] = field(default_factory=list)
    params: dict = field(default_factory=dict)

    def add(self, check: str, status: str, detail: str) -> None:
        self.findings.append(Finding(check, status, detail))

    @property
    def status(self) -> str:
        """mismatch if any check found one, else suspect if any suspects, else consistent."""
        statuses = {f.status for f in self.findings}
        return "mismatch" if "mismatch" in statuses else "suspect" if "suspect" in statuses else "consistent"

    @property
    def verdict(self) -> str:
        """`consistent`, or `mismatch: <checks>` / `suspect: <checks>` naming what failed."""
        status = self.status
        if status == "consistent":
            return status
        return f"{status}: " + "; ".join(f"{f.check}: {f.detail}" for f in self.findings if f.status == status)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


# =============================================================================================
# the ledger
# =============================================================================================
def _gaussian_epsilon(z: float, q: float, steps: int, delta: float) -> float:
    """The smallest epsilon dpbench's accountants give T Gaussian steps of multiplier z on Poisson
    samples of rate q (q = 1: full batch, where Gaussian DP is exact) at this delta."""
    return min(events.gaussian_steps_epsilon(z, q, steps, delta).values())


def check_ledger(ledger: Ledger, epsilon: float, delta: float, into: Verification) -> None:
    """The ledger against its claim and the target (module docstring, ledger): the rules every
    stored run is held to (`claim_check.problems`, which recomputes epsilon from the stated DpEvent)."""
    if ledger.claim != "valid":
        into.add("ledger", "skipped", f"claims {ledger.claim!r}, not valid: nothing to hold it to")
        return
    found = claim_check.problems(ledger, epsilon, delta)
    if found:
        into.add("ledger", "mismatch", "claims valid while " + "; ".join(found))
        return
    if ledger.event is None:
        into.add("ledger", "ok", f"epsilon spent {min(ledger.epsilon_spent.values()):.4g} <= {epsilon:g}, "
                                 f"{claim_check.basis(ledger)}")
        return
    recomputed = events.recomputed_epsilon(ledger.event, delta, ledger.spent_adjacency or ledger.adjacency)
    steps = events.gaussian_steps(events.from_json(ledger.event))
    what = f"z = {steps[0]:.4g}, q = {steps[1]:.4g}, T = {steps[2]}" if steps else ledger.event["type"]
    into.add("ledger", "ok", f"epsilon recomputed from its DpEvent ({what}) at delta {delta:g}: "
                             f"{min(recomputed.values()):.4g} against the target {epsilon:g}")


# =============================================================================================
# the release stream
# =============================================================================================
class StreamRecorder:
    """Records what one fit's noisy steps show along the spare direction u (module docstring); its
    `tally` (filled by `_run_side`'s `tallying`) holds what the steps declared."""

    def __init__(self, game: Game, canary: bool, n: int = 0):
        self.game, self.canary, self.n = game, canary, int(n)  # n: rows of the fit's problem
        self.access = Access()  # the fit's gradient calls (`_run_side`'s `recording`)
        self.iterates: set[int] = set()  # digests of the iterates the reported steps were taken at
        self.u = np.asarray(game.direction, dtype=float)
        self.steps = 0
        self.tally = Tally()
        self.kinds: set[str] = set()
        self.declared: list[tuple[float, float, float | None, float]] = []  # (noise_std, rate, clip, weight)
        self.z: list[float] = []  # <released, u> / weight
        self.s: list[float] = []  # declared noise std of that step
        self.theta_u: list[float] = []  # the iterate along u the step was taken at
        self.a: list[float] = []  # the canary's clipped contribution along u (canary runs)

    def __call__(self, release: Release) -> None:
        theta = np.atleast_2d(np.asarray(release.theta, dtype=float))
        released = np.atleast_2d(np.asarray(release.released, dtype=float))
        self.steps += 1
        self.kinds.add(release.kind)
        self.declared.append((release.noise_std, release.rate, release.clip_norm, release.weight))
        self.z.append(float((released @ self.u)[0] / release.weight))
        self.s.append(float(release.noise_std))
        self.theta_u.append(float(theta[0] @ self.u))
        self.iterates.add(digest(theta[0]))
        if self.canary:
            g = self.game
            self.a.append(float(contribution(g.model, theta[:1], g.canary_x, g.canary_y, release.clip_norm,
                                             self.u)[0]))


@dataclass
class _Runs:
    """The recorders and ledgers of the runs of one side (base rows, or base rows + canary)."""

    recorders: list[StreamRecorder]
    ledgers: list[Ledger]
    finals_u: list[float]
    dropped: set[str] = field(default_factory=set)  # fields of the fits' ledgers and traces outside the schema


def _run_side(info, game: Game, canary: bool, runs: int, epsilon: float, delta: float, params: dict,
              seed: int, min_steps: int = 0, max_runs: int = 0) -> _Runs:
    """`runs` fits on the base rows (canary False) or the base rows + the canary, each observed;
    with min_steps, more fits (up to max_runs) until that many noisy steps are seen."""
    from dpbench import algorithms

    X, y = game.X, game.y
    if canary:
        X = np.vstack([X, np.asarray(game.canary_x, dtype=float)[None, :]])
        y = np.concatenate([y, [float(game.canary_y)]])
    problem = algorithms.Problem(model=game.model, X=X, y=y)
    target = algorithms.PrivacyTarget(epsilon=epsilon, delta=delta)
    out = _Runs([], [], [])
    u = np.asarray(game.direction, dtype=float)
    i = 0

    def marked(rows: np.ndarray) -> np.ndarray:  # the canary: the only row with a component along u
        return np.abs(rows @ u) > 1e-6

    while i < runs or (sum(r.steps for r in out.recorders) < min_steps and i < max(runs, max_runs)):
        rng = np.random.default_rng(np.random.SeedSequence(seed_from("verify", seed, int(canary), i)))
        recorder = StreamRecorder(game, canary, len(y))
        with observing(recorder), tallying() as recorder.tally, recording(marked, iterates=True) as recorder.access:
            try:
                fit = info.fit(problem, target, rng, **params)
            except DpbenchError:
                raise
            except Exception as exc:  # the algorithm refuses this setting (a library's accountant, say)
                setting = ", ".join(f"{k}={v}" for k, v in params.items()) or "its defaults"
                raise AuditError(f"{info.name} does not run at epsilon {epsilon:g}, delta {delta:g} with {setting}: "
                                 f"{type(exc).__name__}: {exc}") from exc
        out.recorders.append(recorder)
        out.ledgers.append(Ledger.from_dict(fit.privacy))
        if info.mechanism_owner == "plugin":  # only what a plugin writes itself can fall outside the schema
            out.dropped.update(_outside_schema(out.ledgers[-1], fit.trace))
        out.finals_u.append(float(np.asarray(fit.theta, dtype=float) @ u))
        i += 1
    return out


def _aspect(recorder: StreamRecorder, ledger: Ledger, aspects: tuple[str, ...]) -> list[release_check.Comparison]:
    return [c for c in release_check.compare(recorder.tally, ledger) if c.aspect in aspects]


def check_stream(base: _Runs, with_canary: _Runs, epsilon: float, delta: float, into: Verification) -> None:
    """The stream checks of the module docstring on the runs of both sides; steps and declared noise
    by the release check's rule (`release_check.compare`), each run's tally against its ledger."""
    ledger = base.ledgers[0]
    runs = [(r, g) for side in (base, with_canary) for r, g in zip(side.recorders, side.ledgers)]
    counts = "/".join(map(str, sorted({r.steps for r, _ in runs})))
    steps = [c for r, g in runs for c in _aspect(r, g, ("steps",))]
    if any(c.status == "not compared" for c in steps):
        into.add("steps", "skipped", f"{counts} noisy steps per run observed; the ledger states no steps")
    elif any(c.status == "mismatch" for c in steps):
        into.add("steps", "mismatch", next(c.detail for c in steps if c.status == "mismatch"))
    else:
        into.add("steps", "ok", f"{counts} noisy steps per run, as each run's ledger says")

    declared = [c for r, g in zip(base.recorders, base.ledgers) for c in _aspect(r, g, ("noise", "rate", "clip"))]
    problems = list(dict.fromkeys(c.detail for c in declared if c.status == "mismatch"))
    seen = list(dict.fromkeys(c.detail for c in declared if c.status == "ok"))
    if problems:
        into.add("declared noise", "mismatch", "; ".join(problems))
    elif seen:
        into.add("declared noise", "ok", f"steps declare {', '.join(seen)}, as the ledger")
    else:
        into.add("declared noise", "skipped", "the steps and the ledger state no noise multiplier, sampling rate "
                                              "or clip-based sensitivity both: nothing to compare")

    gradient = all(r.kinds == {"gradient_sum"} for r in base.recorders)
    steps_declared = [d for r in base.recorders for d in r.tally.declared()]
    z_stream: dict[float, int] = {}
    for r, g in zip(base.recorders, base.ledgers):
        for z, count in release_check.noise_multipliers(r.tally, g).items():
            z_stream[round(z, 9)] = z_stream.get(round(z, 9), 0) + count
    rates = sorted({d.rate for d in steps_declared})
    every_step = sum(z_stream.values()) == sum(r.steps for r in base.recorders)  # clipped, noisy: z known
    if gradient and every_step and len(z_stream) == 1 and len(rates) == 1 and ledger.claim == "valid":
        z = next(iter(z_stream))
        count = max(r.steps for r in base.recorders)
        observed = _gaussian_epsilon(z, rates[0], count, delta)
        status = "ok" if observed <= epsilon * (1 + RECOMPUTE_TOLERANCE) else "mismatch"
        into.add("recomputed epsilon", status, f"{count} steps at z = {z:.4g}, q = {rates[0]:.4g} give "
                                               f"epsilon {observed:.4g} at delta {delta:g} against the target "
                                               f"{epsilon:g}")

    _measured_noise(base, into)
    if gradient:
        _canary_effect(with_canary, into)
    _iterates_follow(base, into)
    check_steps_taken(base.recorders + with_canary.recorders, into)
    check_sampling(base.recorders, with_canary.recorders, into)
    check_serial_dependence(base.recorders, into)


def _measured_noise(base: _Runs, into: Verification) -> None:
    z = np.array([v for r in base.recorders for v in r.z])
    s = np.array([v for r in base.recorders for v in r.s])
    noisy = s > 0
    n = int(noisy.sum())
    if n < 2:
        into.add("measured noise", "skipped", "fewer than 2 noisy steps observed")
        return
    stat = float(np.sum((z[noisy] / s[noisy]) ** 2))
    ratio = math.sqrt(stat / n)
    low = math.sqrt(stat / stats.chi2.ppf(1 - CHECK_LEVEL / 2, n))
    high = math.sqrt(stat / stats.chi2.ppf(CHECK_LEVEL / 2, n))
    text = f"noise along the spare direction x{ratio:.3f} of the declared std [{low:.3f}, {high:.3f}] over {n} steps"
    into.add("measured noise", "mismatch" if high < NOISE_FLOOR else "ok", text)


def _canary_effect(runs: _Runs, into: Verification) -> None:
    z = np.array([v for r in runs.recorders for v in r.z])
    a = np.array([v for r in runs.recorders for v in r.a])
    s = np.array([v for r in runs.recorders for v in r.s])
    rates = sorted({d[1] for r in runs.recorders for d in r.declared})
    if len(rates) != 1 or not np.any(a != 0):
        into.add("canary effect", "skipped", "no single declared rate, or the canary contributes nothing")
        return
    q = rates[0]
    saa = float(np.sum(a * a))
    slope = float(np.sum(z * a) / saa)
    se = math.sqrt(float(np.sum(a * a * (s * s + q * (1 - q) * a * a)))) / saa
    text = (f"a canary record moves the releases {slope:.4g} x its clipped gradient per step (declared rate "
            f"{q:.4g}; standard error {se:.2g})")
    too_much = slope > EFFECT_FACTOR * q and (slope - q) > EFFECT_SE * se
    into.add("canary effect", "mismatch" if too_much else "ok",
             text + (": more than the declared rate and clip norm allow" if too_much else ""))


def _iterates_follow(base: _Runs, into: Verification) -> None:
    moves, z = [], []
    for recorder, final in zip(base.recorders, base.finals_u):
        thetas = recorder.theta_u + [final]
        moves += list(np.diff(thetas))
        z += recorder.z
    moves, z = np.asarray(moves), np.asarray(z)
    if len(z) < 10 or np.std(z) == 0 or np.std(moves) == 0:
        into.add("iterates follow releases", "mismatch" if len(z) >= 10 and np.std(moves) == 0 else "skipped",
                 "the iterate never moves along the spare direction while the releases do" if len(z) >= 10
                 and np.std(moves) == 0 else "too few steps to tell")
        return
    r = float(np.corrcoef(moves, z)[0, 1])
    # 99.9 % interval of the correlation (Fisher z)
    half = stats.norm.ppf(1 - CHECK_LEVEL / 2) / math.sqrt(max(len(z) - 3, 1))
    low, high = math.tanh(math.atanh(max(min(r, 0.999999), -0.999999)) - half), \
        math.tanh(math.atanh(max(min(r, 0.999999), -0.999999)) + half)
    follows = abs(r) >= FOLLOW_MIN and (low > 0 or high < 0)
    into.add("iterates follow releases", "ok" if follows else "mismatch",
             f"correlation of the iterate's moves with the released statistic along the spare direction "
             f"{r:.3f} [{low:.3f}, {high:.3f}] over {len(z)} steps"
             + ("" if follows else ": the reported releases are not what trains the model"))


# =============================================================================================
# the whole verification
# =============================================================================================
#: noisy steps the canary-effect check wants (its standard error is about z / sqrt(steps) in units of
#: the clip norm: 5,000 steps resolve a rate 0.1 above the declared one at z ~ 2), and the most fits for them
CANARY_STEPS, CANARY_MAX_RUNS = 5000, 400
#: noisy steps on the base rows (the noise and iterate checks; the correlation's 99.9 % interval is
#: about +-0.1 wide at 1,000 steps), and the most fits for them
BASE_STEPS, BASE_MAX_RUNS = 1000, 200


def verify(setup: AuditSetup, *, runs: int = 8, trials: int = 0, data_dir: str | None = None,
           results: str | Path = "results", jobs: int = 1, progress: bool = False,
           canary_steps: int = CANARY_STEPS, sensitivity: bool = True) -> Verification:
    """Every check of the module docstring for the algorithm of `setup` (its dataset, model,
    epsilon, delta and parameters; the canary recipe must have a spare coordinate). `runs` fits on
    the base rows for the ledger, noise and iterate checks (more until BASE_STEPS noisy steps are seen,
    at most BASE_MAX_RUNS); fits with the canary until
    `canary_steps` noisy steps are seen (at most CANARY_MAX_RUNS); with `trials` > 0 the audit too
    (stored under RESULTS/.cache/audits like `dpbench audit`); with `sensitivity`, the worst-case
    sensitivity game (`dpbench.audit.sensitivity`) for an algorithm whose steps are gradient sums."""
    from dpbench import algorithms
    from dpbench.audit.trials import build_game

    resolved, game = build_game(setup, data_dir=data_dir)
    if game.direction is not None:  # no all-zero column for a fit to notice (`dpbench.audit.rotation`)
        game, _ = rotated(game, np.random.default_rng(np.random.SeedSequence(seed_from("verify-rotation",
                                                                                         setup.seed))))
    info = algorithms.get(setup.algorithm)
    out = Verification(algorithm=setup.algorithm, params=dict(resolved.params))
    if not info.private:
        out.add("ledger", "skipped", f"{setup.algorithm} is not private: nothing is claimed")
        return out
    if game.direction is None:
        raise AuditError(f"canary {setup.canary!r} has no spare coordinate; verify needs one (gradient_canary)")
    if game.model.n_params != np.asarray(game.direction).size:
        raise AuditError(f"model {setup.model!r} has {game.model.n_params} parameters for {game.n_features} features: "
                         "the checks read the releases along the spare feature's own parameter, which a linear "
                         "model has (logreg, ridge); verify a linear model")
    epsilon, delta = float(setup.epsilon), float(setup.delta)
    params = dict(resolved.params)
    base = _run_side(info, game, False, runs, epsilon, delta, params, setup.seed, BASE_STEPS, BASE_MAX_RUNS)
    check_ledger(base.ledgers[0], epsilon, delta, out)
    if info.mechanism_owner == "plugin":  # dpbench's own mechanisms write dpbench's own records
        check_records(base, out)
    if info.updates and any(r.steps for r in base.recorders):
        with_canary = _run_side(info, game, True, runs, epsilon, delta, params, setup.seed, canary_steps,
                                CANARY_MAX_RUNS)
        check_stream(base, with_canary, epsilon, delta, out)
        # the worst-case sensitivity game: its own rows and canary (dpbench.audit.sensitivity)
        if sensitivity and all(r.kinds == {"gradient_sum"} for r in base.recorders):
            out.add("sensitivity", *sensitivity_game.check(info, game, params, epsilon, delta, setup.seed,
                                                           level=CHECK_LEVEL, factor=EFFECT_FACTOR))
    else:
        _silent_composition(base, out, setup.algorithm)
    if trials:
        _audit(setup, info.updates, trials, data_dir, results, jobs, progress, out)
    return out


def _outside_schema(ledger: Ledger, trace: list) -> list[str]:
    """The fields of a fit's ledger and trace that dpbench's schema of stored records drops
    (`dpbench.run.plugin_records`: anything but scalars, steps and iterates)."""
    kept, dropped = plugin_records.schema_trace(trace)
    reduced = plugin_records.schema_ledger(ledger)
    return [d for d in str(reduced.details.get(plugin_records.DROPPED) or "").split(", ") if d] + dropped


def check_records(base: _Runs, into: Verification) -> None:
    """What the fit returns besides its parameters (its ledger, its trace) holds only scalars, steps and
    iterates: any other field (an array, a list, a long text) may carry training rows, so it is a
    mismatch, and dpbench never stores it (`dpbench.run.plugin_records`)."""
    if base.dropped:
        into.add("records", "mismatch", f"the fit's ledger or trace carries {', '.join(sorted(base.dropped))}: "
                                        "fields outside dpbench's schema of scalars, which may hold training rows "
                                        "(dropped from every stored record)")
    else:
        into.add("records", "ok", "ledger and trace hold scalars, steps and iterates only")


def _silent_composition(base: _Runs, into: Verification, name: str) -> None:
    """An algorithm that reports no step: a ledger composing more than one noisy step is a mismatch
    (nothing dpbench saw holds it: `release_check.composed_steps`), with the rows its fits evaluated
    gradients on; one mechanism (output perturbation, ...) leaves the stream checks to the audit."""
    ledger = base.ledgers[0]
    composed = release_check.composed_steps(ledger)
    rows = sum(r.access.rows for r in base.recorders)
    if ledger.claim == "valid" and composed > 1:
        into.add("steps", "mismatch", f"the ledger composes {composed} noisy steps and none was reported "
                                      f"(the model's gradients evaluated on {rows} rows over {len(base.recorders)} "
                                      "runs): nothing dpbench can observe holds the claim")
        return
    into.add("steps", "skipped", f"{name} reports no noisy steps (final model only): the stream checks do not "
                                 "apply; the final-model audit does")


def _audit(setup: AuditSetup, updates: bool, trials: int, data_dir, results, jobs: int, progress: bool,
           into: Verification) -> None:
    from dataclasses import replace

    from dpbench.audit.multi_run import run_audit

    audit_setup = replace(setup, trials=trials, threat="all_updates" if updates else "final_model",
                          canary=setup.canary if updates else "spare_feature")
    result = run_audit(audit_setup, data_dir=data_dir, results=results, jobs=jobs, progress=progress)
    claimed = result.claimed_epsilon
    estimate = result.estimate
    shown = f"lower bound {result.epsilon_lower_bound:.3g} ({audit_setup.threat}, {trials} trials a side)"
    if estimate is not None:
        shown += f"; {estimate[0]} estimate {estimate[1]:.3g} [{estimate[2]:.3g}, {estimate[3]:.3g}]"
    if claimed is None:
        into.add("audit", "skipped", shown + "; nothing claimed")
    elif result.broken:
        into.add("audit", "mismatch", shown + f" above the claimed {claimed:g}: refuted")
    elif estimate is not None and estimate[2] > claimed:
        into.add("audit", "suspect", shown + f": the estimate's interval lies above the claimed {claimed:g} "
                                             "(a warning, not a proof)")
    else:
        into.add("audit", "ok", shown + f" against the claimed {claimed:g}")


__all__ = ["CHECK_LEVEL", "EXIT_CODES", "Finding", "StreamRecorder", "VERDICTS", "Verification", "check_ledger",
           "check_stream", "verify"]
