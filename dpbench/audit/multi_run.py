"""Empirical privacy audits: a distinguishing game that lower-bounds the epsilon of any algorithm.

Jagielski, Ullman, Oprea 2020; Nasr et al. 2021 and 2023 (docs/audits.md). Two neighbouring training
sets D0 and D1 differ in one *canary*, a crafted record chosen to be as distinguishable as possible.
The algorithm is trained `trials` times on each with fresh randomness, every training gets a scalar
score, and a threshold test on the scores is turned into an epsilon lower bound with Clopper-Pearson
confidence (`dpbench.privacy.audit_bounds`): the first runs of each side choose the test (half of
them by the best count, rule "empirical"; a tenth by normals fitted to them, rule "gaussian"), the
others estimate its error rates, so the bound holds with the stated confidence (default 95%)
whatever the algorithm does. A bound above the claimed epsilon refutes the claim; no bound can
exceed the ceiling, about ln(N/3.69) for N evaluation runs a side.

The score depends on what the adversary sees (`AuditSetup.threat`): final_model, a function of
the trained theta (the recipe's score, e.g. the canary's margin); all_updates, the privacy loss
of every noisy step the fit reports, along the canary's coordinate (`dpbench.audit.whitebox`).
Beside the bound, `AuditResult` carries two estimates that are not bounds
(`dpbench.privacy.audit_estimates`): the Gaussian-DP estimate of the two score samples and, for
all_updates, the epsilon of the per-step mechanism measured from the steps. A setup with
`canaries` is a one-run audit instead (`dpbench.audit.one_run`).

Neighbours follow the adjacency the algorithm claims (`Ledger.adjacency` of one fit's ledger;
PIDP-SGD's paper claims replace-one, so its game is replace-one):
  add/remove-one: D0 = base rows, D1 = base + canary;
  replace-one:    D0 = base rows, D1 = base with its last row replaced by the canary; for a
                  recipe that names the replaced row (gradient_canary: the canary with the
                  opposite label), D0 = base + that row.
D0 is the base unless the recipe names a replaced row, so the D0 runs go first and their ledger
gives the adjacency for D1; otherwise one probe fit on the base rows gives it first.

Canary recipes (`dpbench.audit.canaries.CANARIES`, declared with `@canary(...)`), each building the
base rows, the canary, the model, the score and recommended algorithm parameters:
* spare_feature (Jagielski, Ullman, Oprea 2020): `rows` rows of a dataset's training split (uniform: the split is a
  random permutation) plus one all-zero column; canary x_c = e_new, y_c = +1; score
  y_c <theta, x_c> = theta_new (for a non-linear model: y_c times its decision function at x_c).
  Nothing else in the data touches that coordinate, so the canary's effect is not masked.
* pidp_constant ("§4.4", docs/methods/pidp.md, Audit): self-contained; n = `rows` (default 200)
  copies of x0 = (0.5,0,0,0,0), y = +1, canary (e2, +1), logistic model with l2 = 0.01; score
  ||theta - theta~|| with theta~ the minimiser of the (regularised) loss at x0. Training starts at
  theta~ (public: it depends on no record), where every base point's gradient is zero, so runs on D0
  stay at theta~ and any canary step moves theta_2. Recommended pidp_sgd parameters: steps 2000,
  rounds 1, zeta = l2 = 0.01, lr 0.1, radius r = 1e8 (delta1 = delta2 = delta/2 by default): then
  tau ~ 1.5e3 >> |c_t| and no step is noisy.
* input_shared_intercept ("§5 a", docs/methods/input-perturbation.md, Audit): self-contained
  synthetic data where the shared-noise argument is exact: n = `rows` (default 1000) points u
  uniform in the disc of radius 0.6, an intercept feature 0.8 (||x|| <= 1), labels drawn from a
  logistic model (not separable); canary u_c = (0.6, 0) with the label the model finds unlikely,
  intercept 0.8. Logistic model with l2 = 0: the shared z shifts every row (canary included) alike,
  the intercept absorbs it, and the optimal weights w (all but the intercept) are a deterministic
  function of the data. Score y_c <w, u_c>. Recommended input_perturbation parameters: noise shared,
  theorem pl (the strongly convex theorem needs l2 > 0), epochs 300, lr 4 -- converged to ~1e-8 at
  eps >= 0.25, so D0 and D1 runs separate perfectly (at eps = 0.1 the paper's sigma is ~0.5 and some
  runs do not converge).
* input_per_example ("§5 b", docs/methods/input-perturbation.md, Audit): the spare_feature
  construction with input_perturbation's per-example noise (noise per_example, theorem pl, epochs
  1). One GD step from 0 makes theta_new exactly Gaussian, shifted by the canary by lr/(2n) against
  a std ~ lr sigma/(2 sqrt n): the strongest exposure of the per-example reading (its
  noise-to-sensitivity ratio grows like sqrt(T)); more epochs or theorem strongly_convex (10x more
  noise at l2 = 1e-4) can be audited by overriding the parameters.

Each side's trials are run in chunks of CHUNK_TRIALS fits (VECTORISED_CHUNK_TRIALS, in one call
of the vectorised twin, for an algorithm that has one: DP-SGD, DP-GD), through `runner.run` into
ResultStore(<results>/.cache/audits): a rerun (or a run with more trials) reuses every stored
chunk. Fit randomness comes from SeedSequence(seed_from("audit", game key, side, trial)), so
results do not depend on the chunking, the order or the number of workers (a vectorised chunk
draws exactly what the single fits draw; its sums differ in the last bits). Timings:
docs/papers/audit.md, Cost.

Measured bounds (1000 trials a side, 400 for output_perturbation_gd; 95%; ceiling 4.91 at 1000
trials a side, 3.98 at 400):
dpsgd eps 1 -> 0.00; output_perturbation_gd eps 1 -> 0.00; pidp_constant eps 1 -> 4.91 (perfect
separation); input_shared_intercept eps 0.25 -> 4.90, eps 0.1 -> 1.21 (not every run converges);
input_per_example eps 0.1 -> 0.93; input_per_example with the algorithm's defaults (epochs 100,
theorem strongly_convex) eps 0.1 -> 0.00, and with epochs 100, theorem pl at eps 0.25 -> 0.00:
with 1000 base rows the per-example reading at T = 100 is not refuted by this canary (its
noise-to-sensitivity ratio ~ sqrt(T log(1/delta)) / (eps sqrt(n)) is O(1) there;
docs/methods/input-perturbation.md, Privacy, item 5).

The threshold is chosen on held-out runs (`audit_bounds.audit_scores`); the alternative of a
fixed grid with a Bonferroni correction is not implemented.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dpbench.audit.setup import AuditError, AuditSetup, check_setup
from dpbench.core.ledger import Adjacency
from dpbench.privacy import audit_bounds, audit_estimates

if TYPE_CHECKING:
    from dpbench.audit.one_run import OneRunAuditResult
from dpbench.audit.trials import (
    CHUNK_FIELDS,
    AuditContext,
    audit_backend,
    claimed_adjacency,
    game_for,
    probe_adjacency,
    run_phase,
    side_chunks,
)


# =============================================================================================
# the audit
# =============================================================================================
@dataclass
class AuditResult:
    """Outcome of `run_audit`; `row()` is its flat table row."""

    setup: AuditSetup
    claimed_epsilon: float | None  # the ledger's target epsilon (None when the algorithm claims nothing)
    claim: str | None  # ledger claim: valid | paper-only | none
    adjacency: str  # the neighbour relation the game used
    epsilon_lower_bound: float
    confidence: float  # 1 - alpha
    trials: int  # per side
    threshold: float
    direction: int  # +1: scores above the threshold are called D1; -1: below
    fpr: float  # on the evaluation half
    fnr: float
    fpr_upper: float  # Clopper-Pearson upper bounds at alpha/2 each
    fnr_upper: float
    ceiling: float  # the largest bound these evaluation runs could give
    seconds: float  # wall time of run_audit
    reused: int  # chunks reused from the store
    chunks: int = 0  # chunks in total
    n_selection: int = 0  # runs a side that chose the test
    n_evaluation: int = 0  # runs a side that estimated its rates
    false_positives: int = 0
    false_negatives: int = 0
    fit_seconds: float = 0.0  # compute time of the fits that were run now or stored (sum over chunks)
    params: dict = field(default_factory=dict)  # the algorithm parameters the fits used (recipe + setup)
    model_options: dict = field(default_factory=dict)
    rows: int = 0  # base rows (D0)
    game_key: str = ""
    scores0: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)  # per trial, in trial order
    scores1: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    threat: str = "final_model"
    threshold_rule: str = "empirical"
    accounted_epsilon: float | None = None  # valid claims: the smallest epsilon the ledger's accountants computed
    gdp: audit_estimates.GdpEstimate | None = None  # Gaussian-DP estimate from the two score samples
    measured: audit_estimates.MechanismEstimate | None = None  # the per-step mechanism measured (all_updates)

    @property
    def broken(self) -> bool | None:
        """True when the bound refutes the claimed epsilon; None when nothing is claimed."""
        if self.claimed_epsilon is None:
            return None
        return bool(self.epsilon_lower_bound > self.claimed_epsilon)

    @property
    def seconds_per_fit(self) -> float:
        return self.fit_seconds / max(1, 2 * self.trials)

    @property
    def estimate(self) -> tuple[str, float, float, float] | None:
        """(kind, epsilon, low, high) of the estimate the report leads with: the measured mechanism
        where there is one (all_updates, gradient-sum steps), else the Gaussian-DP estimate."""
        if self.measured is not None and np.isfinite(self.measured.epsilon):
            m = self.measured
            return "measured mechanism", m.epsilon, m.epsilon_low, m.epsilon_high
        if self.gdp is not None:
            return "GDP", self.gdp.epsilon, self.gdp.epsilon_low, self.gdp.epsilon_high
        return None

    def row(self) -> dict:
        s = self.setup
        return {
            "label": s.display_label, "algorithm": s.algorithm, "dataset": s.dataset or "(recipe)",
            "model": s.model, "canary": s.canary, "epsilon": s.epsilon, "delta": s.delta,
            "claimed_epsilon": self.claimed_epsilon, "claim": self.claim, "adjacency": self.adjacency,
            "epsilon_lower_bound": self.epsilon_lower_bound, "confidence": self.confidence,
            "ceiling": self.ceiling, "broken": self.broken, "trials": self.trials,
            "n_evaluation": self.n_evaluation, "fpr": self.fpr, "fnr": self.fnr,
            "fpr_upper": self.fpr_upper, "fnr_upper": self.fnr_upper, "threshold": self.threshold,
            "direction": self.direction, "rows": self.rows, "seconds": self.seconds,
            "seconds_per_fit": self.seconds_per_fit, "reused": self.reused, "chunks": self.chunks,
            "params": ", ".join(f"{k}={v}" for k, v in sorted(self.params.items())), "key": s.key,
            "threat": self.threat, "method": "multi-run", "threshold_rule": self.threshold_rule,
            "accounted_epsilon": self.accounted_epsilon,
            **_estimate_columns(self),
        }


def _estimate_columns(result: "AuditResult") -> dict:
    """The estimates' table columns (NaN where there is none)."""
    nan = float("nan")
    g, m, lead = result.gdp, result.measured, result.estimate
    return {
        "estimate": lead[0] if lead else None, "epsilon_estimate": lead[1] if lead else nan,
        "epsilon_estimate_low": lead[2] if lead else nan, "epsilon_estimate_high": lead[3] if lead else nan,
        "gdp_mu": g.mu if g else nan, "gdp_epsilon": g.epsilon if g else nan,
        "gdp_epsilon_low": g.epsilon_low if g else nan, "gdp_epsilon_high": g.epsilon_high if g else nan,
        "measured_epsilon": m.epsilon if m else nan, "measured_epsilon_low": m.epsilon_low if m else nan,
        "measured_epsilon_high": m.epsilon_high if m else nan, "noise_ratio": m.noise_ratio if m else nan,
        "measured_rate": m.rate if m else nan,
    }


def _one(records: list[dict], field_name: str):
    values = {repr(r.get(field_name)) for r in records}
    if len(values) != 1:
        raise AuditError(f"the fits of one audit disagree on their ledger's {field_name}: {sorted(values)}")
    return records[0].get(field_name)


def run_audit(setup: AuditSetup, *, data_dir: str | None = None, results: str | Path = "results", jobs: int = 1,
              backend: str = "loky", scheduler: str | None = None, progress: bool = True,
              force: bool = False, train: bool = True, device: str = "cpu") -> "AuditResult | OneRunAuditResult":
    """Play the distinguishing game of `setup` and bound epsilon from below (module docstring);
    a setup with `canaries` is a one-run audit (`dpbench.audit.one_run.run_one_run_audit`).

    D0's chunks run first (their ledger gives the claimed adjacency), then D1's; every chunk is
    stored under <results>/.cache/audits and reused by later calls unless `force`. With
    `train=False` nothing is trained: the bound comes from the stored chunks, and an AuditError
    says how many are missing. `device`: gpu or jax-cpu train the fits on the JAX path where the
    algorithm has a JAX twin (`trials.audit_backend`; such chunks are keyed by backend).
    """
    from dpbench.core.store import ResultStore

    if setup.canaries is not None:
        from dpbench.audit.one_run import run_one_run_audit

        return run_one_run_audit(setup, data_dir=data_dir, results=results, jobs=jobs, backend=backend,
                                 scheduler=scheduler, progress=progress, force=force, train=train)
    started = time.perf_counter()
    resolved = check_setup(setup)
    root = Path(results) / ".cache"
    store = ResultStore(root / "audits", required=CHUNK_FIELDS)
    context = AuditContext(data_dir=None if data_dir is None else str(data_dir), cache_dir=str(root), device=device)
    fits_on = audit_backend(setup, device)  # "numpy" or "jax" (`backend` is joblib's)
    if train:
        game_for(setup, context.data_dir)  # data or recipe errors: one line here, before any worker starts
    label = setup.display_label
    side0_adjacency = None  # D0 is the base rows, whatever the adjacency, unless the game names a replaced row
    if resolved.recipe.replaces:
        if train:
            side0_adjacency = probe_adjacency(setup, context.data_dir)
        else:  # nothing may be trained: the adjacency whose D0 chunks are stored
            stored = [a.value for a in Adjacency
                      if all(store.read(c.key)[0] is not None for c in side_chunks(resolved, 0, a.value, fits_on))]
            side0_adjacency = stored[0] if stored else Adjacency.ADD_REMOVE.value
    chunks0 = side_chunks(resolved, 0, side0_adjacency, fits_on)
    summary0, records0 = run_phase(chunks0, store, context, jobs=jobs, backend=backend, scheduler=scheduler,
                                    progress=progress, force=force, description=f"audit {label}: D0", train=train)
    adjacency = _one([{"adjacency": claimed_adjacency(r.get("adjacency"))} for r in records0], "adjacency")
    chunks1 = side_chunks(resolved, 1, adjacency, fits_on)
    summary1, records1 = run_phase(chunks1, store, context, jobs=jobs, backend=backend, scheduler=scheduler,
                                    progress=progress, force=force, description=f"audit {label}: D1", train=train)
    records = records0 + records1
    claim = _one(records, "claim")
    claimed = _one(records, "target_epsilon")
    if side0_adjacency is not None and adjacency != side0_adjacency:
        raise AuditError(f"the fits of one audit disagree on their adjacency: {side0_adjacency} (probe) vs {adjacency}")
    scores0 = np.array([s for r in records0 for s in r["scores"]], dtype=float)
    scores1 = np.array([s for r in records1 for s in r["scores"]], dtype=float)
    delta, alpha = float(setup.delta), float(setup.alpha)
    outcome = audit_bounds.audit_scores(scores0, scores1, delta, alpha, rule=setup.threshold_rule)
    ev = outcome.evaluation
    spent = [v for v in (records0[0].get("epsilon_spent") or {}).values() if v is not None]
    measured = None
    if all("step_sums" in r for r in records):
        sums0 = {k: [v for r in records0 for v in r["step_sums"][k]] for k in audit_estimates.STEP_SUMS}
        sums1 = {k: [v for r in records1 for v in r["step_sums"][k]] for k in audit_estimates.STEP_SUMS}
        rates = {rate for r in records for rate in r["step_sums"].get("rates", [])}
        if rates and (min(rates) >= 1.0 or max(rates) < 1.0):  # all full batch or all subsampled (D0 and D1
            # may differ in n, hence in B/n): a per-step form the accountant covers
            measured = audit_estimates.mechanism_estimate(sums0, sums1, delta, alpha=alpha,
                                                          add_remove=adjacency == Adjacency.ADD_REMOVE.value,
                                                          full_batch=min(rates) >= 1.0)
    return AuditResult(
        setup=setup, claimed_epsilon=None if claimed is None else float(claimed), claim=claim, adjacency=adjacency,
        epsilon_lower_bound=ev.epsilon_lower_bound, confidence=ev.confidence, trials=int(setup.trials),
        threshold=ev.threshold, direction=ev.direction, fpr=ev.fpr, fnr=ev.fnr, fpr_upper=ev.fpr_upper,
        fnr_upper=ev.fnr_upper, ceiling=ev.ceiling, seconds=time.perf_counter() - started,
        reused=summary0.reused + summary1.reused, chunks=len(chunks0) + len(chunks1),
        n_selection=min(outcome.n_selection), n_evaluation=min(ev.n0, ev.n1), false_positives=ev.false_positives,
        false_negatives=ev.false_negatives, fit_seconds=float(sum(r.get("fit_seconds", 0.0) for r in records)),
        params=dict(resolved.params), model_options=dict(resolved.model_options), rows=int(records0[0]["n_rows"]),
        game_key=resolved.game_key, scores0=scores0, scores1=scores1, threat=setup.threat,
        threshold_rule=setup.threshold_rule, accounted_epsilon=float(min(spent)) if spent and claim == "valid" else None,
        gdp=audit_estimates.gdp_estimate(scores0, scores1, delta, alpha), measured=measured,
    )


# re-exported for tests and the harness sanity check
audit_scalar_gaussian = audit_bounds.audit_scalar_gaussian
