"""Privacy accounting for dpbench (pure maths: no file I/O, no configuration).

What is here (docs/accounting.md):

* DP-SGD accounting: the Poisson-subsampled Gaussian mechanism (add/remove-one adjacency)
  composed over ``steps`` iterations, evaluated with the ``dp_accounting`` library as the
  event ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)), T)`` (``q == 1``:
  ``SelfComposedDpEvent(GaussianDpEvent(z), T)``), with two accountants:

  - ``"rdp"``: ``RdpAccountant`` (Mironov-Talwar-Zhang RDP, improved RDP->DP conversion of
    Balle et al. 2020, as implemented by the library) on an order grid that is refined per
    call (see "RDP orders" below);
  - ``"pld"``: ``PLDAccountant`` (privacy loss distributions, connect-the-dots, pessimistic
    estimate, so the number is an upper bound up to floating-point error) with a
    discretisation interval that scales with epsilon (see "PLD discretisation").

* ``calibrate_dpsgd_noise``: the smallest noise multiplier whose epsilon is <= target, to a
  *relative* tolerance (never returns a z whose epsilon exceeds the target).
* Exact Gaussian-mechanism maths: analytic Gaussian (Balle & Wang 2018), exact composition of
  full-batch Gaussian steps via Gaussian DP, the classical bound, the [S0] closed form, zCDP
  conversion and the add/remove -> replace-one group-privacy conversion.

Tolerances (why they are relative)
----------------------------------
The papers go down to eps = 0.01; an absolute tolerance of 0.01 there would double the noise.
Calibration stops once ``target*(1 - CALIBRATION_REL_TOL) <= eps(z) <= target`` with
``CALIBRATION_REL_TOL = 1e-3`` (bisection / safeguarded secant in log z - log eps).

RDP orders (measured, delta = 1e-5)
-----------------------------------
The optimal RDP order is *large* at small epsilon, not small (roughly 2 ln(1/delta)/eps for a
Gaussian): at eps = 0.01 it is 854-855 for (q = 256/36000, T = 1400) and full batch (q = 1,
T = 50) and 476 for (q = 1/36000, T = 1e5); at eps = 0.1 it is 125 / 125 / 66; at eps = 3 it is
4-8.  The library default grid (1.1..10.9 by 0.1, 11..63, 128, 256, 512, 1024) has gaps that
cost real noise: for q = 1/36000, T = 1e5 the default grid needs z = 2.469 at eps = 0.1 (best
order 128) where order 66 gives z = 1.778 (28% less noise); at eps = 0.01, 4.94 vs 4.77; with
q = 256/36000 at eps = 0.01, 74.7 vs 73.6.  Orders below 1.1 are never optimal in the
benchmark range (they only matter for eps >~ 20).  Therefore each epsilon evaluation uses the
library default grid, extends it upwards (doubling, up to 2^16) while the largest order is
optimal, then refines between the neighbours of the best order with an integer golden-section
search (to 0.5% of the order).  Every order gives a valid bound, so refining can only tighten.

PLD discretisation (measured)
-----------------------------
The error of the pessimistic PLD estimate is ~ quadratic in the discretisation interval ``d``
and grows with the number of compositions T: at the calibrated noise, ``d = eps/1000`` gives
+0.1..0.4% for T = 1400 but +10..22% for T = 100000 (e.g. z = 0.756: 0.0684 at d = 1e-4,
0.05794 at 1e-5, 0.05781 at 3e-6).  We use ``d = eps_est / max(1000, 25*sqrt(T))`` (measured
excess <= ~0.3% in all three test regimes), where ``eps_est`` is an upper bound on the answer
obtained by a previous, coarser pass (the first pass uses the RDP epsilon); passes repeat until
``d`` is within 1.5x of the rule for the current estimate.  ``d`` is floored at ``1e-6``:
below that the T-fold FFT self-convolution visibly loses precision (q = 1/36000, T = 1e5,
z = 4.38: eps 0.004468 at d = 3e-7, 0.004494 at 1e-7, 0.004858 at 3e-8; z = 0.684, d = 1e-6
used 17 GB and returned 1.295 instead of 0.077).  ``d`` is also coarsened so that the
single-step PLD has at most 5e5 points (estimated from the Gaussian tail truncation at
e^-50, within 10% of the library's actual sizes), which bounds memory at ~0.6 GB and time at
~5 s per evaluation.

RDP vs PLD (measured): with small q and many steps RDP is very loose.  At (q = 1/36000,
T = 1e5, z = 0.684) RDP gives eps = 1.00, PLD 0.077.  Calibrated z, RDP -> PLD: q = 1/36000,
T = 1e5 (batch 1, the [S0] regime): 4.77 -> 2.26 (eps 0.01), 1.78 -> 0.64 (0.1),
0.684 -> 0.479 (1), 0.463 -> 0.409 (3); q = 256/36000, T = 1400: 6-12% less noise with PLD;
full batch: 7-12% (PLD is exact there up to discretisation: the Gaussian composes exactly;
it matches gaussian_composition_sigma to < 0.5%).  The PLD numbers at small q were checked
for discretisation convergence (eps(z = 2.258) = 0.010536, 0.010035, 0.009993, 0.009986 at
d = 1e-5, 3e-6, 1.26e-6, 6e-7) and agree with a CLT (mu-GDP) estimate of the same order.

Calibration timings (delta = 1e-5, 2-core CPU, single calls, no cache)
----------------------------------------------------------------------
Cases: (a) q = 256/36000, T = 1400; (b) q = 1/36000, T = 100000 (batch 1, ~3 epochs);
(c) q = 1, T = 50 (full batch).  Returned z, and wall time of one calibrate_dpsgd_noise call
(the PLD calibration includes its RDP calibration, used as the upper bracket):

    case  eps    z_rdp      t_rdp    z_pld      t_pld    PLD peak RSS
    a     0.01     73.629   0.28 s     64.979   0.46 s
    a     0.1       9.1229  0.07 s      8.2676  0.14 s
    a     1         1.3295  0.10 s      1.2465  0.34 s
    a     3         0.8084  0.16 s      0.7594  0.34 s   0.1 GB
    b     0.01      4.7658  0.32 s      2.2583  0.58 s
    b     0.1       1.7778  0.22 s      0.6390  22.1 s   0.9 GB
    b     1         0.6840  0.09 s      0.4794   6.7 s   0.9 GB
    b     3         0.4626  0.13 s      0.4093   2.7 s   0.9 GB
    c     0.01   1955.55    0.01 s   1724.30    0.03 s
    c     0.1     240.33    0.01 s    217.52    0.02 s
    c     1        28.618   0.01 s     26.394   0.02 s
    c     3        10.563   0.01 s      9.840   0.02 s

All returned z satisfy target*(1 - 1e-3) <= eps(z) <= target.  RDP is always well under a
second.  PLD is slow only for batch-1 DP-SGD with ~1e5 steps at eps 0.1-3 (3-22 s, ~1 GB: a
single PLD evaluation there costs 1-4 s); calibrations are cached per (eps, delta, q, T), so
this is paid once per cell, not per seed.  The table above was measured with the library's
accountant; for q < 1 each PLD evaluation builds the same PLD through `pld_gaussian` (the
library's construction with its per-grid-point Python loop vectorised), the same z to ~1e-8
relative: 7.8 s against the library's 20.7 s for q = 1/27134, T = 27134, eps = 0.1, and 8.5 s
against 18.5 s for q = 1/42000, T = 42000, eps = 0.15 (`dpbench bench --suite accounting`;
docs/speed.md).  If that is too slow, calibrate with "rdp" and report "pld" -- but note that in
that regime RDP needs 1.1-2.8x more noise than PLD.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
from typing import Callable

from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import special

from dpbench.privacy import pld_gaussian
from dpbench.privacy.checks import integer, positive, unit_interval

__all__ = [
    "ACCOUNTANTS",
    "CALIBRATION_REL_TOL",
    "dpsgd_epsilon",
    "calibrate_dpsgd_noise",
    "dpsgd_epsilon_report",
    "analytic_gaussian_sigma",
    "gaussian_epsilon",
    "gdp_epsilon",
    "gaussian_composition_sigma",
    "classical_gaussian_sigma",
    "paper_dpsgd_sigma",
    "pidp_contribution_sigma",
    "zcdp_to_dp",
    "add_remove_to_replace_one",
    "memo_entries",
    "memo_preload",
]

ACCOUNTANTS = ("rdp", "pld")

#: relative tolerance of calibrate_dpsgd_noise: eps(z) in [target*(1-tol), target]
CALIBRATION_REL_TOL = 1e-3

# --- RDP order grid -------------------------------------------------------------------------
_BASE_ORDERS = tuple(sorted({float(a) for a in rdp_privacy_accountant.DEFAULT_RDP_ORDERS}))
_MAX_ORDER = 2.0**16  # upward extension stops here (optimal order ~ 2 ln(1/delta)/eps ~ 2300 at eps = 0.01)
_ORDER_REL_RESOLUTION = 5e-3  # golden-section refinement stops at 0.5% of the order
_INTEGER_ORDERS_FROM = 11.0  # below this the base grid already has 0.1 spacing

# --- PLD discretisation ---------------------------------------------------------------------
_PLD_EPS_RATIO = 1000.0  # d <= eps / 1000 ...
_PLD_SQRT_T_RATIO = 25.0  # ... and d <= eps / (25 sqrt(T)) for many compositions
_PLD_MIN_INTERVAL = 1e-6  # FFT round-off floor (see module docstring)
_PLD_MAX_SINGLE_STEP_POINTS = 5e5  # memory / time guard
_PLD_REFINE_FACTOR = 1.5
_PLD_MAX_PASSES = 6

_LN_GAUSS_TAIL = 10.0  # sqrt(2*50): the library truncates Gaussian tails at mass e^-50


# =============================================================================================
# input validation
# =============================================================================================
def _delta(value) -> float:
    return unit_interval("delta", value)


def _rate(value) -> float:
    return unit_interval("sampling_rate", value, include_one=True)


def _steps(value) -> int:
    return integer("steps", value, 1)


def _accountant(value) -> str:
    if value not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {value!r}")
    return value


def _round_sig(x: float, digits: int = 12) -> float:
    return float(f"{x:.{digits}g}")


# =============================================================================================
# DP-SGD event and the two accountants
# =============================================================================================
def dpsgd_event(noise_multiplier: float, sampling_rate: float, steps: int) -> dp_event.DpEvent:
    """`steps` Gaussian mechanisms of noise multiplier z, each on a Poisson sample of rate q (q = 1:
    the full data), composed: the DpEvent every accountant here evaluates."""
    gaussian = dp_event.GaussianDpEvent(noise_multiplier)
    if sampling_rate == 1.0:
        return dp_event.SelfComposedDpEvent(gaussian, steps)
    return dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(sampling_rate, gaussian), steps)


def _golden_integer_min(f: Callable[[float], float], lo: int, hi: int) -> None:
    """Integer golden-section search for a minimum of f on [lo, hi] (f memoised by caller)."""
    invphi = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    while b - a > 2 and (b - a) > _ORDER_REL_RESOLUTION * a:
        c = int(round(b - invphi * (b - a)))
        d = int(round(a + invphi * (b - a)))
        if c <= a:
            c = a + 1
        if d >= b:
            d = b - 1
        if c >= d:
            c, d = (a + b) // 2, (a + b) // 2 + 1
        if f(c) <= f(d):
            b = d
        else:
            a = c
    f((a + b) // 2)


@contextlib.contextmanager
def quiet_absl():
    """Silence dp_accounting's absl warnings for one call; the orders it drops only loosen the bound."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@functools.lru_cache(maxsize=8192)
def _rdp_epsilon_and_order(noise_multiplier: float, sampling_rate: float, steps: int,
                           delta: float) -> tuple[float, float]:
    event = dpsgd_event(noise_multiplier, sampling_rate, steps)
    eps_of: dict[float, float] = {}

    def evaluate(orders) -> None:
        new = [float(a) for a in orders if float(a) not in eps_of]
        if not new:
            return
        acc = rdp_privacy_accountant.RdpAccountant(orders=new)
        with quiet_absl():  # the library logs, then drops, fractional orders whose series diverge at large q
            acc.compose(event)
        for a, r in zip(new, acc.rdp):
            eps_of[a] = float(rdp_privacy_accountant.compute_epsilon([a], [r], delta)[0])

    def best_order() -> float:
        return min(eps_of, key=lambda a: (eps_of[a], a))

    evaluate(_BASE_ORDERS)
    while best_order() == max(eps_of) and max(eps_of) < _MAX_ORDER:
        evaluate([2.0 * max(eps_of)])

    a_star = best_order()
    if a_star >= _INTEGER_ORDERS_FROM:
        grid = sorted(eps_of)
        i = grid.index(a_star)
        lo = int(grid[i - 1]) if i > 0 else int(a_star)
        hi = int(grid[i + 1]) if i + 1 < len(grid) else int(a_star)

        def f(a: float) -> float:
            evaluate([a])
            return eps_of[float(a)]

        _golden_integer_min(f, lo, hi)
    a_star = best_order()
    return eps_of[a_star], a_star


def _rdp_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> float:
    return _rdp_epsilon_and_order(noise_multiplier, sampling_rate, steps, delta)[0]


def _pld_single_step_loss_range(noise_multiplier: float, sampling_rate: float, steps: int) -> float:
    """Approximate width of the single-event privacy-loss support that the library builds.

    The library truncates the Gaussian at tail mass e^-50 (|x - mean| <= ~10 std).  For q = 1
    the self-composed Gaussian is a single Gaussian with std z/sqrt(T); for q < 1 the remove-
    direction loss lies in [ln(1-q), ln(1-q+q e^{L_max})], L_max = 10/z + 1/(2 z^2).
    Checked against the actual PMF sizes: within 10%.
    """
    if sampling_rate == 1.0:
        s = noise_multiplier / math.sqrt(steps)
        return 2.0 * _LN_GAUSS_TAIL / s + 1.0 / s**2
    l_max = _LN_GAUSS_TAIL / noise_multiplier + 0.5 / noise_multiplier**2
    upper = math.log(sampling_rate) + l_max if l_max > 700 else math.log1p(sampling_rate * math.expm1(l_max))
    return upper - math.log1p(-sampling_rate)


def _pld_interval(eps_estimate: float, noise_multiplier: float, sampling_rate: float,
                  steps: int) -> float:
    ratio = max(_PLD_EPS_RATIO, _PLD_SQRT_T_RATIO * math.sqrt(steps))
    d = max(eps_estimate / ratio, _PLD_MIN_INTERVAL)
    guard = _pld_single_step_loss_range(noise_multiplier, sampling_rate, steps) / _PLD_MAX_SINGLE_STEP_POINTS
    return max(d, guard)


def _pld_epsilon_at(noise_multiplier: float, sampling_rate: float, steps: int, delta: float,
                    interval: float) -> float:
    """PLD epsilon at one discretisation interval: the library's accountant, or for q < 1 the same
    library construction with its per-grid-point loop vectorised (`pld_gaussian`, ~3x faster,
    equal to ~1e-11 relative)."""
    try:
        if sampling_rate < 1.0:
            eps = pld_gaussian.subsampled_gaussian_epsilon(noise_multiplier, sampling_rate, steps, delta, interval)
            if eps is not None:
                return eps
        acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
        acc.compose(dpsgd_event(noise_multiplier, sampling_rate, steps))
        return float(acc.get_epsilon(delta))
    except (OverflowError, FloatingPointError, MemoryError):
        # only at absurd parameters (e.g. z = 1e-5, where the memory guard makes the interval so
        # coarse that the library's expm1(interval) overflows): no finite guarantee computed
        return math.inf


# --- memo of the slow results, exportable so a caller can persist it ---------------------------
# Pure maths keeps no files: the cell layer (dpbench/cells.py) saves `memo_entries()` to disk
# and calls `memo_preload` in a fresh process, so a PLD calibration that takes seconds is paid
# once per (eps, delta, q, T), not once per worker process and per run.
_MEMO: dict[str, float] = {}


def _memoised(fn: Callable[..., float]) -> Callable[..., float]:
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args) -> float:
        key = json.dumps([name, *args])
        if key not in _MEMO:
            _MEMO[key] = float(fn(*args))
        return _MEMO[key]

    return wrapper


def memo_entries() -> dict[str, float]:
    """A copy of the memo of slow results (PLD epsilons, calibrations): JSON-able."""
    return dict(_MEMO)


def memo_preload(entries: dict[str, float]) -> None:
    """Add previously computed results (from `memo_entries`, e.g. read back from disk)."""
    _MEMO.update({str(k): float(v) for k, v in entries.items()})


@_memoised
def _pld_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> float:
    estimate = _rdp_epsilon(noise_multiplier, sampling_rate, steps, delta)
    if not math.isfinite(estimate) or estimate <= 0:
        estimate = 1.0
    best = math.inf
    interval = _pld_interval(estimate, noise_multiplier, sampling_rate, steps)
    for _ in range(_PLD_MAX_PASSES):
        eps = _pld_epsilon_at(noise_multiplier, sampling_rate, steps, delta, interval)
        best = min(best, eps)  # every pass is a pessimistic (upper) estimate
        if not math.isfinite(best) or best <= 0:
            break
        wanted = _pld_interval(best, noise_multiplier, sampling_rate, steps)
        if interval <= _PLD_REFINE_FACTOR * wanted:
            break
        interval = wanted
    return best


def dpsgd_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float,
                  accountant: str = "rdp") -> float:
    """Epsilon of DP-SGD: Poisson-subsampled Gaussian (add/remove-one) composed ``steps`` times.

    ``noise_multiplier`` z = noise std / L2 sensitivity of the summed clipped gradients;
    ``sampling_rate`` q = expected batch / n (``q == 1``: plain Gaussian, full batch).
    ``accountant``: ``"rdp"`` (default) or ``"pld"`` (tighter; slower at small q, large T).
    """
    z = positive("noise_multiplier", noise_multiplier)
    q = _rate(sampling_rate)
    t = _steps(steps)
    d = _delta(delta)
    if _accountant(accountant) == "rdp":
        return _rdp_epsilon(z, q, t, d)
    return _pld_epsilon(z, q, t, d)


def dpsgd_epsilon_report(noise_multiplier: float, sampling_rate: float, steps: int,
                         delta: float) -> dict:
    """``{"rdp": eps, "pld": eps}`` for the same DP-SGD run, side by side."""
    return {name: dpsgd_epsilon(noise_multiplier, sampling_rate, steps, delta, name)
            for name in ACCOUNTANTS}


# =============================================================================================
# calibration
# =============================================================================================
def _solve_noise(eps_fn: Callable[[float], float], target: float, z_lo: float, e_lo: float,
                 z_hi: float, e_hi: float, rel_tol: float) -> float:
    """Shrink [z_lo, z_hi] (eps(z_lo) > target >= eps(z_hi)) until eps(z_hi) >= target*(1-tol).

    Safeguarded secant on (log z, log eps) aimed at target*(1 - tol/2), falling back to
    bisection in log z when the same end moves twice in a row.  Returns z_hi (always feasible).
    """
    goal = math.log(target * (1.0 - rel_tol / 2.0))
    last_moved = None
    for _ in range(200):
        if e_hi >= target * (1.0 - rel_tol) or z_hi / z_lo - 1.0 < 1e-12:
            return z_hi
        x_lo, x_hi = math.log(z_lo), math.log(z_hi)
        x = 0.5 * (x_lo + x_hi)
        secant_ok = (e_hi > 0 and math.isfinite(e_lo) and e_lo > e_hi)
        if secant_ok and last_moved != "twice":
            y_lo, y_hi = math.log(e_lo) - goal, math.log(e_hi) - goal
            x_s = x_lo - y_lo * (x_hi - x_lo) / (y_hi - y_lo)
            margin = 1e-3 * (x_hi - x_lo)
            x = min(max(x_s, x_lo + margin), x_hi - margin)
        z = math.exp(x)
        e = eps_fn(z)
        moved = "hi" if e <= target else "lo"
        if moved == "hi":
            z_hi, e_hi = z, e
        else:
            z_lo, e_lo = z, e
        last_moved = "twice" if moved == last_moved else moved
    return z_hi


def _gaussian_guess(target: float, delta: float, sampling_rate: float, steps: int) -> float:
    """Cheap starting point: exact GDP for q = 1, the CLT (mu-GDP) approximation for q < 1."""
    mu = 1.0 / analytic_gaussian_sigma(target, delta)
    if sampling_rate == 1.0:
        return math.sqrt(steps) / mu
    ratio = mu**2 / (sampling_rate**2 * steps)
    return 1.0 / math.sqrt(math.log1p(ratio))


def _bracket_and_solve(eps_fn: Callable[[float], float], target: float, z0: float,
                       rel_tol: float, what: str) -> float:
    e0 = eps_fn(z0)
    if e0 <= target:
        z_hi, e_hi = z0, e0
        z_lo, e_lo = z0 / 2.0, eps_fn(z0 / 2.0)
        while e_lo <= target:
            z_hi, e_hi = z_lo, e_lo
            if z_lo < 1e-4 * z0:  # noise is irrelevant for this (eps, delta)
                return z_hi
            z_lo, e_lo = z_lo / 2.0, eps_fn(z_lo / 2.0)
    else:
        z_lo, e_lo = z0, e0
        z_hi, e_hi = 2.0 * z0, eps_fn(2.0 * z0)
        while e_hi > target:
            z_lo, e_lo = z_hi, e_hi
            if z_hi > 1e6 * z0:
                raise ValueError(f"{what}: no noise multiplier up to {z_hi:.3g} reaches the target epsilon")
            z_hi, e_hi = 2.0 * z_hi, eps_fn(2.0 * z_hi)
    return _solve_noise(eps_fn, target, z_lo, e_lo, z_hi, e_hi, rel_tol)


@_memoised
def _calibrate_cached(target: float, delta: float, sampling_rate: float, steps: int,
                      accountant: str) -> float:
    what = f"calibrate_dpsgd_noise(eps={target}, delta={delta}, q={sampling_rate}, T={steps}, {accountant})"
    z0 = _gaussian_guess(target, delta, sampling_rate, steps)

    def rdp_fn(z: float) -> float:
        return _rdp_epsilon(z, sampling_rate, steps, delta)

    z_rdp = _bracket_and_solve(rdp_fn, target, z0, CALIBRATION_REL_TOL, what)
    if accountant == "rdp":
        return z_rdp

    def pld_fn(z: float) -> float:
        return _pld_epsilon(z, sampling_rate, steps, delta)

    # PLD is tighter than RDP, so z_rdp is (almost always) feasible: use it as the upper end and
    # search downwards from there (evaluating PLD at very small z is expensive).
    e_hi = pld_fn(z_rdp)
    if e_hi > target:
        return _bracket_and_solve(pld_fn, target, z_rdp, CALIBRATION_REL_TOL, what)
    z_hi = z_rdp
    z_lo = min(z0, z_hi / 1.25)
    e_lo = pld_fn(z_lo)
    while e_lo <= target:
        z_hi, e_hi = z_lo, e_lo
        if z_lo < 1e-4 * z_rdp:
            return z_hi
        z_lo = z_lo / 1.5
        e_lo = pld_fn(z_lo)
    return _solve_noise(pld_fn, target, z_lo, e_lo, z_hi, e_hi, CALIBRATION_REL_TOL)


def calibrate_dpsgd_noise(target_epsilon: float, delta: float, sampling_rate: float, steps: int,
                          accountant: str = "rdp") -> float:
    """Smallest DP-SGD noise multiplier z with ``dpsgd_epsilon(z, ...) <= target_epsilon``.

    Relative tolerance: the returned z satisfies
    ``target*(1 - CALIBRATION_REL_TOL) <= dpsgd_epsilon(z, q, T, delta, accountant) <= target``
    (the upper inequality always holds; the lower one can fail only in degenerate cases, e.g.
    delta >= 1 - (1-q)^T, where eps = 0 for any z and a negligible z is returned).  Adjacency is
    add/remove-one; see :func:`add_remove_to_replace_one`.  Results are cached on the arguments
    rounded to 12 significant digits (the same (q, T, eps, delta) recurs across seeds).
    Raises ValueError if no noise multiplier reaches the target.
    """
    target = positive("target_epsilon", target_epsilon)
    d = _delta(delta)
    q = _rate(sampling_rate)
    t = _steps(steps)
    acc = _accountant(accountant)
    return _calibrate_cached(_round_sig(target), _round_sig(d), _round_sig(q), t, acc)


# =============================================================================================
# Gaussian mechanism maths (exact)
# =============================================================================================
# Solve delta_mu(eps) <= delta * (1 - 1e-9): the returned sigma / epsilon then also satisfies the
# condition when it is re-evaluated directly with Phi (no log space), at a 1e-9 relative cost.
_GDP_SAFETY = math.log1p(-1e-9)


def _gdp_log_delta(epsilon: float, mu: float) -> float:
    """log of delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) for mu-GDP.

    log Phi is scipy.special.log_ndtr, the function stats.norm.logcdf evaluates (the same numbers
    without its ~90 us of argument handling per call; the bisections below make ~200 calls)."""
    x = float(special.log_ndtr(-epsilon / mu + mu / 2.0))
    y = epsilon + float(special.log_ndtr(-epsilon / mu - mu / 2.0))
    if y >= x:
        return -math.inf
    return float(x + math.log1p(-math.exp(y - x)))


@functools.lru_cache(maxsize=4096)  # pure; audits ask for the same (eps, delta) thousands of times
def _gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest eps >= 0 with delta_mu(eps) <= delta (returned value is always feasible)."""
    log_delta = math.log(delta) + _GDP_SAFETY
    if _gdp_log_delta(0.0, mu) <= log_delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while _gdp_log_delta(hi, mu) > log_delta:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-13 * hi:
        mid = 0.5 * (lo + hi)
        if _gdp_log_delta(mid, mu) > log_delta:
            lo = mid
        else:
            hi = mid
    return hi


@functools.lru_cache(maxsize=4096)
def _gdp_mu(epsilon: float, delta: float) -> float:
    """Largest mu with delta_mu(eps) <= delta (returned value is always feasible)."""
    log_delta = math.log(delta) + _GDP_SAFETY
    lo, hi = 0.0, 1.0  # lo feasible, hi not (after bracketing)
    while _gdp_log_delta(epsilon, hi) <= log_delta:
        lo, hi = hi, 2.0 * hi
    if lo == 0.0:
        lo = hi
        while _gdp_log_delta(epsilon, lo) > log_delta:
            lo = lo / 2.0
        hi = 2.0 * lo
    while hi - lo > 1e-14 * lo:
        mid = 0.5 * (lo + hi)
        if _gdp_log_delta(epsilon, mid) <= log_delta:
            lo = mid
        else:
            hi = mid
    return lo


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon with a mu-GDP mechanism (epsilon, delta)-DP (Dong, Roth, Su 2019, Cor. 2.13):
    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2); 0 for mu = 0."""
    mu = float(mu)
    if not (mu >= 0.0 and math.isfinite(mu)):
        raise ValueError(f"mu must be finite and >= 0, got {mu!r}")
    return 0.0 if mu == 0.0 else _gdp_epsilon(mu, _delta(delta))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest std s such that N(0, s^2) added to an L2-sensitivity-Delta query is (eps, delta)-DP.

    Balle & Wang (2018; docs/accounting.md, Analytic Gaussian): the condition is
    Phi(Delta/(2s) - eps s/Delta) - e^eps Phi(-Delta/(2s) - eps s/Delta) <= delta, solved by
    bisection (relative precision 1e-14); the returned s always satisfies it.  Valid for all eps > 0.
    """
    eps = positive("epsilon", epsilon)
    d = _delta(delta)
    sens = positive("sensitivity", sensitivity)
    return sens / _gdp_mu(eps, d)


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0, steps: int = 1) -> float:
    """Exact epsilon of ``steps`` Gaussian releases (std ``sigma``, L2 sensitivity ``sensitivity``).

    They compose exactly to mu-GDP with mu = sqrt(steps) * sensitivity / sigma (Dong, Roth, Su 2019).
    """
    s = positive("sigma", sigma)
    d = _delta(delta)
    sens = positive("sensitivity", sensitivity)
    t = _steps(steps)
    return _gdp_epsilon(math.sqrt(t) * sens / s, d)


def gaussian_composition_sigma(epsilon: float, delta: float, steps: int, sensitivity: float = 1.0) -> float:
    """Exact (GDP) per-step std for ``steps`` full-batch Gaussian steps to be (eps, delta)-DP.

    sqrt(steps) * analytic_gaussian_sigma(eps, delta, sensitivity).  Noise multiplier = sigma/Delta.
    """
    t = _steps(steps)
    return math.sqrt(t) * analytic_gaussian_sigma(epsilon, delta, sensitivity)


def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Classical Gaussian mechanism: Delta * sqrt(2 ln(1.25/delta)) / eps.

    Only proven for eps < 1 (Dwork & Roth Thm A.1); the papers use it up to eps = 3, where it is
    not a valid guarantee by itself.  Prefer :func:`analytic_gaussian_sigma` (always valid, smaller).
    """
    eps = positive("epsilon", epsilon)
    d = _delta(delta)
    sens = positive("sensitivity", sensitivity)
    return sens * math.sqrt(2.0 * math.log(1.25 / d)) / eps


def pidp_contribution_sigma(lipschitz: float, rounds: int, n: int, zeta: float, epsilon2: float,
                            delta2: float) -> float:
    """sigma_c of paper 000 Theorem 5: 2 sqrt(2) G R sqrt(log(1.25 R / delta2)) / (n zeta eps2).

    From the proof: the contribution c_t has L2 sensitivity 2G/(n zeta) (replace-one, with
    ||H^-1|| <= 1/zeta), each of the R rounds is charged (eps2/R, delta2/R) through the classical
    Gaussian mechanism, and the rounds add up by basic composition; so this *is*
    classical_gaussian_sigma at that sensitivity and budget (c' = 2 sqrt 2 comes out of it). The
    classical mechanism is only proven for eps2/R < 1, and charging only R rounds is itself wrong
    (the noise is drawn at every step; docs/methods/pidp.md, Privacy, item 5): this reproduces the
    paper's number, it certifies nothing.
    """
    if isinstance(rounds, bool) or int(rounds) != rounds or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    sensitivity = 2.0 * positive("lipschitz", lipschitz) / (positive("n", n) * positive("zeta", zeta))
    return classical_gaussian_sigma(positive("epsilon2", epsilon2) / rounds, _delta(delta2) / rounds,
                                    sensitivity=sensitivity)


def paper_dpsgd_sigma(lipschitz: float, steps: int, n: int, epsilon: float, delta: float,
                      c: float = 1.0) -> float:
    """[S0] eq. (2): sigma = c G sqrt(T log(1/delta)) / (n eps).

    The paper never gives c, and the formula is Abadi's asymptotic bound outside its validity
    regime (docs/methods/dpsgd.md, Privacy): for reference only; calibrate with :func:`calibrate_dpsgd_noise`.
    """
    g = positive("lipschitz", lipschitz)
    t = _steps(steps)
    n_int = _steps(n)
    eps = positive("epsilon", epsilon)
    d = _delta(delta)
    cc = positive("c", c)
    return cc * g * math.sqrt(t * math.log(1.0 / d)) / (n_int * eps)


def zcdp_to_dp(rho: float, delta: float) -> float:
    """rho-zCDP => (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun & Steinke 2016).

    This is the closed form of the zCDP route for full-batch Gaussian steps
    (rho = T Delta^2/(2 s^2)). dp_accounting has no standalone zCDP->DP function; its RdpAccountant accepts
    ``ZCDpEvent(rho)`` (RDP rho*alpha) and applies the improved RDP->DP conversion, which is tighter
    (measured at delta = 1e-5: 0.51x this value at rho = 1e-6, 0.66x at 1e-4, 0.79x at 1e-2, 0.89x
    at 0.5, 0.94x at 5).
    """
    r = positive("rho", rho)
    d = _delta(delta)
    return r + 2.0 * math.sqrt(r * math.log(1.0 / d))


def add_remove_to_replace_one(epsilon: float, delta: float) -> tuple[float, float]:
    """Add/remove-one (eps, delta)-DP => replace-one (2 eps, (1 + e^eps) delta)-DP (group privacy)."""
    eps = positive("epsilon", epsilon)
    d = _delta(delta)
    return 2.0 * eps, (1.0 + math.exp(eps)) * d
