"""Private hyperparameter selection by random stopping (Papernot & Steinke, ICLR 2022; Liu & Talwar,
STOC 2019; docs/selection.md). Pure maths: no file I/O, no YAML.

The procedure (PS22 §3, Algorithm 1 with the number of runs drawn first): draw K from a truncated
negative binomial distribution D_{eta,gamma}; K times, draw a hyperparameter combination uniformly
from a fixed grid and run the base algorithm Q with fresh, independent noise; each run outputs a
model and a *private* score; release the model with the best score (and its score).

* `run_count_distribution`: P[K = k] = (1 - gamma)^k / (gamma^-eta - 1) prod_{l<k} (l + eta)/(l + 1),
  k >= 1, for eta > 0 (eta = 1: the geometric distribution of Liu-Talwar, P[K = k] = gamma (1 -
  gamma)^(k-1)); for eta = 0 the logarithmic distribution P[K = k] = (1 - gamma)^k / (k log(1/gamma)).
  E[K] = eta (1 - gamma) / (gamma (1 - gamma^eta)) (eta > 0), (1/gamma - 1)/log(1/gamma) (eta = 0).
  The spec gives the mean number of runs; `gamma_for_mean_runs` solves for gamma. Negative eta
  (allowed by PS22) is not offered.
* `selection_rdp` is PS22 Theorem 2: if Q is (lambda, eps(lambda))-RDP at every order, then the
  selection is (lambda, eps'(lambda))-RDP with
      eps'(lambda) = eps(lambda) + min_{lambda_hat >= 1} [(1 + eta)(1 - 1/lambda_hat) eps(lambda_hat)
                     + (1 + eta) log(1/gamma) / lambda_hat] + log(E[K]) / (lambda - 1).
  (lambda_hat = 1 contributes (1 + eta) log(1/gamma): the eps term vanishes there.)
* Q's RDP curve: Q draws a combination c (data-independent weights) and runs candidate c, then
  adds its score. Renyi divergence is jointly quasi-convex, so a mixture over c with fixed weights
  is at most max_c eps_c(lambda); the score is a Gaussian release with noise multiplier z_s (std /
  sensitivity), lambda / (2 z_s^2), composed (added) -- sequential composition, so it holds
  whether the score's rows overlap the training rows or not. Each candidate's curve comes from
  `candidate_event`, which reads the mechanism of a run's privacy ledger as a dp_accounting
  DpEvent; `RdpAccountant` evaluates it. Runs whose ledger is not a "valid" claim, or whose
  mechanism has no event here, leave the selection unaccounted (None): their curve is then not
  called private end to end.
* `end_to_end_epsilon` converts eps' to (eps, delta)-DP with dp_accounting's `compute_epsilon`
  (the RDP -> DP conversion of Balle et al. 2020) at the orders of `TUNING_ORDERS`.

The result is an RDP bound: for DP-SGD calibrated with the PLD accountant at small sampling rates the
RDP curve of one run converts to a larger epsilon than its PLD target (accounting.py docstring);
the end-to-end number inherits that looseness, never the other way round.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from dpbench.privacy import events
from dpbench.privacy.accounting import dpsgd_event
from dpbench.privacy.checks import non_negative, positive, unit_interval

#: RDP orders of the tuning accounting: the library grid extended to 4096 (the optimal order at
#: eps ~ 0.01 is ~ 2 ln(1/delta)/eps ~ 2300).
TUNING_ORDERS: tuple[float, ...] = tuple(sorted({float(a) for a in rdp_privacy_accountant.DEFAULT_RDP_ORDERS}
                                                | {96.0, 192.0, 384.0, 768.0, 1536.0, 2048.0, 3072.0, 4096.0}))


@dataclass(frozen=True)
class RunCount:
    """The distribution D_{eta,gamma} of the number of runs K (PS22 §3)."""

    eta: float
    gamma: float

    @property
    def mean(self) -> float:
        return expected_runs(self.eta, self.gamma)

    def sample(self, rng: np.random.Generator) -> int:
        """One draw of K >= 1."""
        if self.eta == 0:
            return int(rng.logseries(1.0 - self.gamma))
        while True:  # negative binomial conditioned on K >= 1 (rejection of K = 0)
            k = int(rng.negative_binomial(self.eta, self.gamma))
            if k >= 1:
                return k


def expected_runs(eta: float, gamma: float) -> float:
    """E[K] of D_{eta,gamma}."""
    eta, gamma = non_negative("eta", eta), unit_interval("gamma", gamma)
    if eta == 0:
        return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
    return eta * (1.0 - gamma) / (gamma * (1.0 - gamma**eta))


def gamma_for_mean_runs(mean_runs: float, eta: float) -> float:
    """The gamma with E[K] = mean_runs (E[K] decreases in gamma; bisection in log gamma)."""
    mean_runs, eta = positive("mean_runs", mean_runs), non_negative("eta", eta)
    if mean_runs <= 1.0:
        raise ValueError(f"mean_runs must be > 1 (K >= 1 always), got {mean_runs:g}")
    lo, hi = 1e-12, 1.0 - 1e-12  # E[K](lo) huge, E[K](hi) -> 1
    for _ in range(200):
        mid = math.sqrt(lo * hi) if hi < 0.5 else 0.5 * (lo + hi)
        if expected_runs(eta, mid) > mean_runs:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return hi


def run_count_distribution(mean_runs: float, eta: float) -> RunCount:
    return RunCount(eta=float(eta), gamma=gamma_for_mean_runs(mean_runs, eta))


def candidate_event(ledger: dict) -> dp_event.DpEvent | None:
    """The DpEvent of one run, read from its privacy ledger, or None when it has none here.

    Only "valid" claims count. The mechanism the ledger states (`event`, `dpbench.privacy.events`)
    when it states one and it is Gaussian steps (the relation the selection's RDP is composed
    under: add/remove-one, or unsampled), else, for a ledger stored before ledgers stated their
    mechanism, these rules on the fields each algorithm writes:
    * sampling.kind "poisson" (DP-SGD, DP-LSSGD): PoissonSampled(rate, Gaussian(noise_multiplier))
      self-composed `steps` times (add/remove-one);
    * sampling.kind "full batch" (DP-GD): Gaussian(noise_multiplier) self-composed `steps` times;
    * a single Gaussian release (`noise_std` and `sensitivity`, Bolt-on and ZZMW17 with Gaussian
      noise): Gaussian(noise_std / sensitivity).
    Anything else (theorem-only guarantees such as KST12 or BST14's, pure-epsilon noise, smooth
    sensitivity) returns None.
    """
    if ledger.get("claim") != "valid" or not ledger.get("private"):
        return None
    if ledger.get("event") is not None:
        try:
            stated = events.from_json(ledger["event"])
        except events.EventError:
            return None
        steps = events.gaussian_steps(stated)
        relation = ledger.get("spent_adjacency") or ledger.get("adjacency")
        if steps is None or (steps[1] < 1.0 and relation == "replace-one"):
            return None
        return dpsgd_event(*steps)
    sampling = ledger.get("sampling") or {}
    z, steps = ledger.get("noise_multiplier"), ledger.get("steps")
    if sampling.get("kind") in ("poisson", "full batch") and z and steps:
        rate = float(sampling["rate"]) if sampling["kind"] == "poisson" else 1.0
        return dpsgd_event(float(z), rate, int(steps))
    std, sensitivity = ledger.get("noise_std"), ledger.get("sensitivity")
    if not sampling and ledger.get("noise", "gaussian") == "gaussian" and std and sensitivity:
        return dpsgd_event(float(std) / float(sensitivity), 1.0, 1)
    return None


@functools.lru_cache(maxsize=4096)
def event_rdp(event: dp_event.DpEvent, orders: tuple[float, ...] = TUNING_ORDERS) -> np.ndarray:
    """RDP of `event` at `orders` (dp_accounting's RdpAccountant), read-only. Remembered per
    (event, orders): events are frozen values, and a grid's candidates come back for every metric
    that is selected on and every curve that shares them."""
    accountant = rdp_privacy_accountant.RdpAccountant(orders=list(orders))
    accountant.compose(event)
    rdp = np.asarray(accountant.rdp, dtype=float)
    rdp.flags.writeable = False
    return rdp


def gaussian_score_rdp(noise_multiplier: float, orders: tuple[float, ...] = TUNING_ORDERS) -> np.ndarray:
    """RDP of a Gaussian score release with std = noise_multiplier x sensitivity: lambda / (2 z^2)
    (Mironov 2017, Prop. 7)."""
    z = positive("score noise multiplier", noise_multiplier)
    return np.asarray(orders, dtype=float) / (2.0 * z * z)


def selection_rdp(base_rdp: np.ndarray, runs: RunCount, orders: tuple[float, ...] = TUNING_ORDERS) -> np.ndarray:
    """PS22 Theorem 2: the RDP curve of the best of K ~ D_{eta,gamma} runs of a base mechanism whose
    RDP curve at `orders` is `base_rdp` (lambda_hat ranges over `orders` and 1)."""
    orders_a = np.asarray(orders, dtype=float)
    base = np.asarray(base_rdp, dtype=float)
    if base.shape != orders_a.shape:
        raise ValueError("base_rdp must have one value per order")
    factor = 1.0 + runs.eta
    log_inv_gamma = math.log(1.0 / runs.gamma)
    hat_terms = factor * (1.0 - 1.0 / orders_a) * base + factor * log_inv_gamma / orders_a
    overhead = min(float(np.min(hat_terms)), factor * log_inv_gamma)  # lambda_hat = 1 included
    return base + overhead + math.log(runs.mean) / (orders_a - 1.0)


def rdp_to_epsilon(rdp: np.ndarray, delta: float, orders: tuple[float, ...] = TUNING_ORDERS) -> float:
    """(eps, delta)-DP of an RDP curve (dp_accounting `compute_epsilon`, Balle et al. 2020)."""
    eps, _ = rdp_privacy_accountant.compute_epsilon(list(orders), list(np.asarray(rdp, dtype=float)),
                                                    unit_interval("delta", delta))
    return float(eps)


def end_to_end_epsilon(ledgers: list[dict], runs: RunCount, delta: float, score_noise_multiplier: float
                       ) -> float | None:
    """Epsilon at `delta` of private selection over candidates whose run ledgers are `ledgers` (one per
    combination of the grid, each with its calibrated noise) and whose scores carry Gaussian noise
    of `score_noise_multiplier` x their sensitivity, or None when a run has no RDP description
    (`candidate_event`)."""
    events = [candidate_event(entry) for entry in ledgers]
    if not events or any(e is None for e in events):
        return None
    base = np.max([event_rdp(e) for e in events], axis=0) + gaussian_score_rdp(score_noise_multiplier)
    return rdp_to_epsilon(selection_rdp(base, runs), delta)
