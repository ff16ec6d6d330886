"""`dpbench verify`'s checks of what a fit did besides what it reported: gradients taken, batches
sampled, noise drawn (the stream checks of `dpbench.audit.verify` that read the model's gradient
calls, `dpbench.models.access`, or the order of the noise).

Each check reads the recorders of verify's runs (`verify.StreamRecorder`: the steps' declared
numbers, z_t = <released_t, u> / weight and s_t the declared std, and `access`, the rows of every
gradient call the fit made through its model) and adds one finding. Each check keeps the false-alarm
level `CHECK_LEVEL` (two-sided where either direction is a mismatch; the four sub-tests of the
sampling scheme at CHECK_LEVEL / 4 each, Bonferroni).

* **steps taken**: rows evaluated by the model's gradient methods at iterates that no reported step
  declares (its `Release.theta`, matched by value, `dpbench.models.access.digest`), R_h, summed over
  runs, against the rows the reported steps sample, E = sum over steps of rate_t * n (n the rows of
  the fit's problem), with sd^2 = sum rate_t (1 - rate_t) n (Poisson sampling: the batch size is
  Binomial(n, rate_t)). R_h > 4 sd and R_h > 0.1 E (the rows evaluated exceed those of the
  reported steps by both) means gradients were taken for steps that were not reported. Gradients at
  a reported iterate are not counted against it: an honest loop may evaluate more there than the
  step's batch (PIDP-SGD's per-round decision, lines 7-8 of [S0], evaluates the round's rows at
  the round's first iterate; a loop may recompute the step's gradient to report it).
* **sampling scheme** (every step declares one rate q < 1, no run made more gradient calls than it
  reported steps, and the calls missing are as many as empty batches explain: a loop makes none
  for an empty batch, counted as size 0):
  - the rate: the batch sizes b_i summed against Binomial(sum n_i, q) (normal approximation);
    significant and more than 10 % off the declared rate is a mismatch;
  - the dispersion: the index-of-dispersion statistic sum (b_i - n_i q^)^2 / (n_i q^ (1 - q^)),
    q^ the rate the batches show, is chi-square with N - 1 degrees of freedom under Poisson
    sampling (Cochran 1954); too small means batches of (nearly) fixed size (shuffling), too large
    batches more variable than Poisson sampling makes;
  - the canary (runs with it): its inclusions c_r in run r against Binomial(T_r, q): their sum by
    the exact binomial test, their dispersion sum (c_r - T_r q)^2 / (T_r q (1 - q)) against its
    distribution simulated under the null (`CANARY_DRAWS` seeded draws: T_r q is small, the
    chi-square approximation is poor); a canary in exactly one batch per epoch is underdispersed.
* **serial dependence**: on the base rows no record touches u, so an honest gradient step's e_t =
  z_t / s_t is its own noise, i.i.d. N(0, 1) and independent of every other step (the iterate
  does not enter it). The Ljung-Box portmanteau statistic (Ljung & Box, Biometrika 1978) pooled
  over runs, Q = sum_{k=1..L} M_k rho_k^2 with rho_k = sum e_t e_{t+k} / (M_k mean e^2) over the
  M_k pairs k apart within a run, is chi-square with L degrees of freedom (the mean is known
  to be 0, so it is not estimated); above its 1 - CHECK_LEVEL quantile is a mismatch (noise reused
  or correlated between steps, which the accounting of independent steps does not cover).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

#: a check's false-alarm level (as `dpbench.audit.verify.CHECK_LEVEL`, which imports it)
CHECK_LEVEL = 1e-3
#: rows evaluated above the reported steps' expected rows by this many sd and this factor: a mismatch
STEPS_SD, STEPS_FACTOR = 4.0, 1.10
#: batch rate off the declared rate by more than this fraction (and significant): a mismatch
RATE_SLACK = 0.10
#: sub-tests of the sampling-scheme check (batch rate and dispersion, canary sum and dispersion), each
#: at CHECK_LEVEL / SAMPLING_TESTS so that the check as a whole keeps CHECK_LEVEL (Bonferroni)
SAMPLING_TESTS = 4
#: the fewest gradient calls for the batch tests, the fewest canary runs for its dispersion test
MIN_CALLS, MIN_CANARY_RUNS = 50, 20
#: simulated draws of the canary-dispersion statistic's null distribution, and their seed
CANARY_DRAWS, CANARY_SEED = 20000, 20231  # the smallest two-sided p: 2 / 20001 < CHECK_LEVEL / 4
#: lags of the portmanteau test, and the fewest lag-1 pairs it wants
LAGS, MIN_PAIRS = 5, 50


def _two_sided(cdf: float, sf: float) -> float:
    return min(1.0, 2.0 * min(cdf, sf))


def _calls(recorders: Sequence[Any]) -> tuple[list[list[int]] | None, str]:
    """The batch size of each reported step of each run (module docstring: a run with fewer gradient
    calls than steps made none for its empty batches, size 0), or (None, why not) when a run made
    more calls than steps, or more are missing than empty batches explain (E0 + 4 sqrt(E0) + 1,
    E0 = sum over steps (1 - q)^n, the expected empty batches)."""
    sizes = [list(r.access.sizes) for r in recorders]
    if any(len(s) > r.steps for s, r in zip(sizes, recorders)):
        return None, ("more gradient calls than reported steps in a run: batches cannot be matched to steps "
                      "(see steps taken)")
    missing = sum(r.steps - len(s) for s, r in zip(sizes, recorders))
    empty = sum(r.steps * (1 - r.declared[0][1]) ** r.n for r in recorders)
    if missing > empty + 4 * math.sqrt(empty) + 1:
        return None, (f"{missing} reported steps made no gradient call through the model's methods (about "
                      f"{empty:.0f} empty batches expected): its batches are not seen")
    return [s + [0] * (r.steps - len(s)) for s, r in zip(sizes, recorders)], ""


def check_steps_taken(recorders: Sequence[Any], into: Any) -> None:
    """Rows the model evaluated at iterates no reported step was taken at, against the rows the
    reported steps sample (module docstring)."""
    rows = sum(r.access.rows for r in recorders)
    calls = sum(len(r.access.sizes) for r in recorders)
    if calls == 0:
        into.add("steps taken", "skipped", "no gradient was evaluated through the model's methods (a loop of its "
                                           "own): the rows behind the steps cannot be counted")
        return
    unreported = [(size, point) for r in recorders for size, point in zip(r.access.sizes, r.access.points)
                  if point not in r.iterates]
    hidden_rows = sum(size for size, _ in unreported)
    hidden_points = len({point for _, point in unreported})
    rates = np.array([d[1] for r in recorders for d in r.declared], dtype=float)
    n = np.array([r.n for r in recorders for _ in r.declared], dtype=float)
    expected = float(np.sum(rates * n))
    sd = math.sqrt(float(np.sum(rates * (1 - rates) * n)))
    hidden = hidden_rows > STEPS_SD * sd and hidden_rows > (STEPS_FACTOR - 1) * expected
    text = (f"gradients evaluated on {rows} rows in {calls} calls, {hidden_rows} of them at {hidden_points} iterates "
            f"no reported step was taken at; the {len(rates)} reported steps sample about {expected:.0f} +- {sd:.0f}")
    into.add("steps taken", "mismatch" if hidden else "ok", text + (": steps taken but not reported" if hidden else ""))


def check_sampling(recorders: Sequence[Any], canary_recorders: Sequence[Any], into: Any) -> None:
    """The batch sizes and the canary's inclusions against Poisson sampling at the declared rate
    (module docstring)."""
    every = list(recorders) + list(canary_recorders)
    rates = {d[1] for r in every for d in r.declared}
    per_run = [{d[1] for d in r.declared} for r in every]
    if not every or any(len(s) != 1 for s in per_run) or any(q >= 1 or q <= 0 for q in rates):
        into.add("sampling scheme", "skipped", "the steps do not declare one sampling rate below 1 per run")
        return
    sizes, why = _calls(every)
    if sizes is None:
        into.add("sampling scheme", "skipped", why)
        return
    b = np.array([v for s in sizes for v in s], dtype=float)
    n = np.array([r.n for r, s in zip(every, sizes) for _ in s], dtype=float)
    q = np.array([next(iter(p)) for p, s in zip(per_run, sizes) for _ in s], dtype=float)
    if len(b) < MIN_CALLS:
        into.add("sampling scheme", "skipped", f"{len(b)} steps: fewer than {MIN_CALLS} batches to test")
        return
    found, seen = [], []
    expected, var = float(np.sum(n * q)), float(np.sum(n * q * (1 - q)))
    ratio = float(b.sum()) / expected
    z = (float(b.sum()) - expected) / math.sqrt(var)
    p_rate = 2 * stats.norm.sf(abs(z))
    seen.append(f"batches {ratio:.3f} x the declared q n (p = {p_rate:.2g})")
    level = CHECK_LEVEL / SAMPLING_TESTS
    if p_rate < level and abs(ratio - 1) > RATE_SLACK:
        found.append(f"batches {ratio:.3f} x the declared rate q = {q.mean():.4g} times n (p = {p_rate:.2g}): "
                     "sampled at another rate than declared")
    qhat = np.clip(q * ratio, 1e-12, 1 - 1e-12)
    chi = float(np.sum((b - n * qhat) ** 2 / (n * qhat * (1 - qhat))))
    df = len(b) - 1
    p_disp = _two_sided(stats.chi2.cdf(chi, df), stats.chi2.sf(chi, df))
    seen.append(f"index of dispersion {chi / df:.3f} over {len(b)} batches (p = {p_disp:.2g})")
    if p_disp < level:
        found.append(f"index of dispersion of the batch sizes {chi / df:.3f} over {len(b)} batches (p = {p_disp:.2g}; "
                     "1 under Poisson sampling): batch sizes do not vary as Poisson sampling at q makes them"
                     + (": shuffled or fixed-size batches?" if chi < df else ""))
    _canary_inclusions(canary_recorders, found, seen, level)
    into.add("sampling scheme", "mismatch" if found else "ok", "; ".join(found or seen))


def _canary_inclusions(recorders: Sequence[Any], found: list[str], seen: list[str], level: float) -> None:
    runs = [r for r in recorders if len(r.access.hits) == len(r.access.sizes)]
    if len(runs) < MIN_CANARY_RUNS:
        seen.append(f"canary inclusions not tested ({len(runs)} runs with the canary, fewer than {MIN_CANARY_RUNS})")
        return
    c = np.array([sum(r.access.hits) for r in runs], dtype=float)
    T = np.array([r.steps for r in runs], dtype=np.int64)
    q = np.array([r.declared[0][1] for r in runs], dtype=float)
    if not np.allclose(q, q[0], rtol=1e-9, atol=0.0):
        seen.append("canary inclusions not tested (the runs declare different rates)")
        return
    p_sum = stats.binomtest(int(c.sum()), int(T.sum()), float(q[0])).pvalue
    var = T * q * (1 - q)
    stat = float(np.sum((c - T * q) ** 2 / var))
    rng = np.random.default_rng(CANARY_SEED)
    null = np.sum((rng.binomial(T, q, size=(CANARY_DRAWS, len(T))) - T * q) ** 2 / var, axis=1)
    p_disp = _two_sided((1 + np.sum(null <= stat)) / (CANARY_DRAWS + 1), (1 + np.sum(null >= stat)) / (CANARY_DRAWS + 1))
    shown = (f"the canary in {int(c.sum())} of {int(T.sum())} batches over {len(runs)} runs (declared q = {q[0]:.4g}; "
             f"p = {p_sum:.2g}), dispersion {stat / len(T):.3f} across runs (p = {p_disp:.2g})")
    seen.append(shown)
    ratio = float(c.sum()) / float(np.sum(T * q))
    if (p_sum < level and abs(ratio - 1) > RATE_SLACK) or p_disp < level:
        found.append(shown + (": included once per epoch rather than Poisson?" if stat < len(T) else
                              ": not included as Poisson sampling at q includes it"))


def check_serial_dependence(recorders: Sequence[Any], into: Any) -> None:
    """Ljung-Box portmanteau of the standardised noise along u within each base run (module docstring)."""
    runs = []
    for r in recorders:
        e = np.asarray(r.z, dtype=float)
        s = np.asarray(r.s, dtype=float)
        keep = s > 0
        if r.kinds == {"gradient_sum"} and keep.any():
            runs.append(e[keep] / s[keep])
    pairs = sum(max(len(e) - 1, 0) for e in runs)
    scale = float(np.mean(np.concatenate(runs) ** 2)) if runs else 0.0
    if pairs < MIN_PAIRS or scale == 0:
        into.add("serial dependence", "skipped", f"fewer than {MIN_PAIRS} pairs of consecutive noisy gradient steps, "
                                                 "or no noise along the spare direction")
        return
    lags = min(LAGS, max(len(e) for e in runs) - 1)
    rho, q_stat = [], 0.0
    for k in range(1, lags + 1):
        products = [e[:-k] * e[k:] for e in runs if len(e) > k]
        m = sum(len(p) for p in products)
        rho_k = float(sum(p.sum() for p in products)) / (m * scale)
        rho.append(rho_k)
        q_stat += m * rho_k ** 2
    p = float(stats.chi2.sf(q_stat, lags))
    text = (f"autocorrelation of the noise along the spare direction at lags 1..{lags} "
            f"{', '.join(f'{v:.3f}' for v in rho)} over {len(runs)} runs (Ljung-Box Q = {q_stat:.1f}, p = {p:.2g})")
    dependent = p < CHECK_LEVEL
    into.add("serial dependence", "mismatch" if dependent else "ok",
             text + (": the steps' noise is not drawn afresh for each step" if dependent else ""))


__all__ = ["CHECK_LEVEL", "check_sampling", "check_serial_dependence", "check_steps_taken"]
