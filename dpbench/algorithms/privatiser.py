"""The privatiser: dpbench's own mechanisms, the only way a privatised plugin reaches its training data.

A plugin declared with `@privatised_algorithm(...)` (the arguments of `algorithm`, private) is written as

    def fit(data: Privatiser, privacy: PrivacyTarget, rng: np.random.Generator, **hyper) -> np.ndarray

and gets a `Privatiser`, not a `Problem`: it sees the model, the number of records n (public under
add/remove-one accounting, as for every built-in) and the number of features, and reaches the rows
only through one of dpbench's mechanisms, each of which samples, clips, adds noise, counts its steps
and writes the ledger itself:

* `noisy_sgd`: DP-SGD (Abadi et al., CCS 2016, Alg. 1): Poisson sampling at q = B/n, per-example
  clipping to C, N(0, (zC)^2 I) on the clipped sum, z calibrated to the target by dpbench's
  accountant (`dpsgd.fit_noisy_sgd`, the built-in DP-SGD's own code). The plugin supplies the update
  rule (`transform`: the released noisy gradient -> the step's direction, e.g. Adam's), which sees
  only released values: post-processing.
* `noisy_gd`: the same with every record in every step (q = 1): T full-batch Gaussian steps, whose
  composition is exact in Gaussian DP.
* `gaussian_sum`: one release of sum_i clip(f(x_i, y_i), C) + N(0, (zC)^2 I): the plugin's f maps one
  record to a vector, dpbench clips each record's vector to norm C and calibrates z (analytic
  Gaussian, Balle & Wang 2018), so its sensitivity C holds by construction.
* `gaussian` and `laplace`: one release of a value g(X, y) whose sensitivity the plugin declares
  (L2 for Gaussian, L1 for Laplace): dpbench adds the calibrated noise, but the sensitivity is the
  plugin's proof obligation, which nothing here checks, so such a run's claim is "declared", not
  "valid".

One mechanism per fit spends the whole target; a second call is an error (compose them in one
mechanism, e.g. one `gaussian_sum` of a stacked vector). The ledger is the privatiser's: the fit
returns its parameters only, and `privatised` (the wrapper `algorithm` registers) stores the
privatiser's ledger, so a plugin cannot write a claim of its own. Reading `data.X` or `data.y` is a
`PrivatiserError` naming the mechanisms.

What "valid by construction" rests on (docs/validity.md, Threat model): the plugin's callables
(`transform`, the per-record f of `gaussian_sum`) are functions of their arguments alone (a callable
that keeps the rows it was given and writes them into the parameters later is an adversary, not a
bug, and outside what any label here promises); the model's per-example gradients are dpbench's.
The privatiser's noise comes from its own generator, spawned from the run's generator before the
plugin gets it, so the plugin's own draws never touch it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpbench.algorithms import releases
from dpbench.algorithms.base import Fit, FitFunction, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.dpsgd import fit_noisy_sgd
from dpbench.algorithms.sgd import LR_SCHEDULES
from dpbench.core.errors import DpbenchError
from dpbench.core.ledger import Adjacency, Ledger
from dpbench.privacy import accounting, events

#: the mechanisms of a Privatiser, by method name
MECHANISMS = ("noisy_sgd", "noisy_gd", "gaussian_sum", "gaussian", "laplace")
#: the ledger detail that names the privatiser's mechanism (the runner reads it)
DETAIL = "privatiser"
#: why a declared-sensitivity release is not "valid"
DECLARED_REASON = "the sensitivity {s:g} ({norm}) is declared by the plugin, a proof obligation dpbench does not check"


class PrivatiserError(DpbenchError):
    """A privatised fit read its rows directly, called a second mechanism, or returned something else
    than its parameters (one line)."""


class Privatiser:
    """What a privatised plugin's fit gets instead of a `Problem` (module docstring)."""

    def __init__(self, problem: Problem, privacy: PrivacyTarget, noise_rng: np.random.Generator, *,
                 owner: str = "the plugin"):
        self._problem, self._privacy, self._rng, self._owner = problem, privacy, noise_rng, owner
        self._ledger: Ledger | None = None
        self._trace: list[dict] = []
        self._used: str | None = None

    # ---- what is public ------------------------------------------------------------------------
    @property
    def model(self):
        """The model (`dpbench.models.Model`): its init, loss and gradients at a given theta are
        functions of the parameters; applied to rows they need the rows, which only the mechanisms hold."""
        return self._problem.model

    @property
    def n(self) -> int:
        """The number of records, public under add/remove-one accounting (q, T and the noise use it)."""
        return self._problem.n

    @property
    def n_features(self) -> int:
        return int(self._problem.X.shape[1])

    @property
    def X(self):  # noqa: N802 - the name a Problem has
        raise PrivatiserError(self._refusal("X"))

    @property
    def y(self):
        raise PrivatiserError(self._refusal("y"))

    def _refusal(self, name: str) -> str:
        return (f"{self._owner} is privatised: its rows ({name}) are reachable only through the privatiser's "
                f"mechanisms ({', '.join(f'data.{m}(...)' for m in MECHANISMS)}; dpbench.algorithms.privatiser)")

    # ---- the mechanisms ------------------------------------------------------------------------
    def _start(self, mechanism: str) -> None:
        if self._privacy.epsilon is None or self._privacy.delta is None:
            raise PrivatiserError(f"{self._owner}: {mechanism} needs a privacy target (epsilon, delta)")
        if self._used is not None:
            raise PrivatiserError(f"{self._owner} called {mechanism} after {self._used}: one mechanism per fit "
                                  "spends the whole target (release one stacked value instead)")
        self._used = mechanism

    def noisy_sgd(self, *, epochs: float, batch_size: float, lr: float, clip_norm: float,
                  lr_schedule: str = "constant", transform: Callable[[np.ndarray], np.ndarray] | None = None,
                  radius: float | None = None, calibration: str = "rdp", trace_every: int = 0) -> np.ndarray:
        """DP-SGD's steps (module docstring) from the model's init; returns the final iterate.
        `transform` maps each released noisy gradient (regulariser's gradient included) to the step's
        direction; `trace_every` > 0 records the training loss every that many steps (dpbench computes it)."""
        self._start("noisy_sgd")
        if lr_schedule not in LR_SCHEDULES:
            raise PrivatiserError(f"lr_schedule {lr_schedule!r}: choose one of {', '.join(LR_SCHEDULES)}")
        fit = fit_noisy_sgd(self._problem, self._privacy, self._rng, epochs=epochs, batch_size=batch_size, lr=lr,
                            lr_schedule=lr_schedule, clip_norm=clip_norm, calibration=calibration, paper_c=1.0,
                            radius=radius, trace_every=trace_every, transform=transform,
                            mechanism="Poisson-subsampled Gaussian composed over T steps (dpbench's noisy SGD, "
                                      "privatiser), then the plugin's update (post-processing)")
        return self._done(fit, "noisy_sgd")

    def noisy_gd(self, *, steps: int, lr: float, clip_norm: float,
                 transform: Callable[[np.ndarray], np.ndarray] | None = None, radius: float | None = None,
                 trace_every: int = 0) -> np.ndarray:
        """T = `steps` full-batch steps, each on the sum of every record's gradient clipped to C plus
        N(0, (zC)^2 I), divided by n; z calibrated to the target (module docstring)."""
        self._start("noisy_gd")
        steps = int(steps)
        if steps < 1:
            raise PrivatiserError(f"{self._owner}: noisy_gd needs steps >= 1, got {steps}")
        n = self._problem.n
        fit = fit_noisy_sgd(self._problem, self._privacy, self._rng, epochs=steps, batch_size=float(n), lr=lr,
                            lr_schedule="constant", clip_norm=clip_norm, calibration="rdp", paper_c=1.0,
                            radius=radius, trace_every=trace_every, transform=transform,
                            mechanism="Gaussian composed over T full-batch steps (dpbench's noisy GD, privatiser), "
                                      "then the plugin's update (post-processing)")
        return self._done(fit, "noisy_gd")

    def gaussian_sum(self, contribution: Callable[[np.ndarray, float], np.ndarray], *,
                     clip_norm: float) -> np.ndarray:
        """sum_i clip(contribution(x_i, y_i), C) + N(0, (zC)^2 I), z the analytic Gaussian
        multiplier of the target (add/remove-one: one record moves the sum by at most C)."""
        self._start("gaussian_sum")
        clip = _positive("clip_norm", clip_norm)
        X, y = self._problem.X, self._problem.y
        rows = np.stack([np.atleast_1d(np.asarray(contribution(X[i], float(y[i])), dtype=float))
                         for i in range(X.shape[0])])
        norms = np.linalg.norm(rows, axis=1)
        total = (rows * np.minimum(1.0, clip / np.maximum(norms, 1e-300))[:, None]).sum(axis=0)
        std = accounting.analytic_gaussian_sigma(self._privacy.epsilon, self._privacy.delta, clip)
        released = total + self._rng.normal(0.0, std, size=total.shape)
        z = std / clip
        spent = {"gdp": accounting.gdp_epsilon(1.0 / z, self._privacy.delta)}
        self._ledger = ledger(
            private=True, mechanism=f"Gaussian mechanism on a sum of per-record values clipped by dpbench "
                                    f"(privatiser) for {self._owner}",
            claim="valid" if min(spent.values()) <= self._privacy.epsilon * (1 + 1e-9) else "paper-only",
            target_epsilon=self._privacy.epsilon, delta=self._privacy.delta, epsilon_spent=spent,
            adjacency=Adjacency.ADD_REMOVE, sensitivity=clip, event=events.dpsgd_event_json(z, 1.0, 1),
            noise_multiplier=z, steps=1, **{DETAIL: "gaussian_sum"},
            rows_clipped=int((norms > clip * (1 + 1e-9)).sum()))
        releases.released_steps(1, std, rate=1.0, clip_norm=clip)  # one clipped, noisy sum: the release check's
        return released

    def gaussian(self, value: Callable[[np.ndarray, np.ndarray], np.ndarray], *, sensitivity: float,
                 adjacency: str = Adjacency.ADD_REMOVE.value) -> np.ndarray:
        """value(X, y) + N(0, s^2 I), s the analytic Gaussian std for the declared L2 sensitivity;
        the claim is "declared" (the sensitivity is the plugin's proof obligation)."""
        self._start("gaussian")
        sens = _positive("sensitivity", sensitivity)
        out = np.atleast_1d(np.asarray(value(self._problem.X, self._problem.y), dtype=float))
        std = accounting.analytic_gaussian_sigma(self._privacy.epsilon, self._privacy.delta, sens)
        released = out + self._rng.normal(0.0, std, size=out.shape)
        z = std / sens
        self._ledger = ledger(
            private=True, mechanism=f"Gaussian mechanism on a value of {self._owner} (privatiser; sensitivity declared)",
            claim="declared", claim_reason=DECLARED_REASON.format(s=sens, norm="L2"),
            target_epsilon=self._privacy.epsilon, delta=self._privacy.delta,
            epsilon_spent={"gdp": accounting.gdp_epsilon(1.0 / z, self._privacy.delta)},
            adjacency=Adjacency.parse(adjacency), sensitivity=sens, event=events.dpsgd_event_json(z, 1.0, 1),
            noise_multiplier=z, steps=1, **{DETAIL: "gaussian"})
        return released

    def laplace(self, value: Callable[[np.ndarray, np.ndarray], np.ndarray], *, sensitivity: float,
                adjacency: str = Adjacency.ADD_REMOVE.value) -> np.ndarray:
        """value(X, y) + i.i.d. Laplace(b) noise, b = (declared L1 sensitivity) / epsilon: pure
        epsilon-DP; the claim is "declared" (the sensitivity is the plugin's proof obligation)."""
        self._start("laplace")
        sens = _positive("sensitivity", sensitivity)
        out = np.atleast_1d(np.asarray(value(self._problem.X, self._problem.y), dtype=float))
        scale = sens / float(self._privacy.epsilon)
        released = out + self._rng.laplace(0.0, scale, size=out.shape)
        self._ledger = ledger(
            private=True, mechanism=f"Laplace mechanism on a value of {self._owner} (privatiser; sensitivity declared)",
            claim="declared", claim_reason=DECLARED_REASON.format(s=sens, norm="L1"),
            target_epsilon=self._privacy.epsilon, delta=self._privacy.delta,
            epsilon_spent={"laplace": sens / scale}, adjacency=Adjacency.parse(adjacency), sensitivity=sens,
            event=events.laplace_event_json(scale / sens), laplace_scale=scale, **{DETAIL: "laplace"})
        return released

    def _done(self, fit: Fit, mechanism: str) -> np.ndarray:
        self._ledger = fit.privacy.with_details(**{DETAIL: mechanism})
        self._trace = list(fit.trace)
        return np.array(fit.theta, dtype=float)

    # ---- what the wrapper reads ----------------------------------------------------------------
    def result(self, theta: Any) -> Fit:
        """The Fit of a privatised run: the fit's parameters, the privatiser's ledger and trace."""
        if self._ledger is None:
            raise PrivatiserError(f"{self._owner} returned without calling a mechanism of the privatiser "
                                  f"({', '.join(MECHANISMS)}): nothing it returns could depend on the data")
        if isinstance(theta, Fit):
            raise PrivatiserError(f"{self._owner} is privatised: return the parameters (an array), not a Fit; "
                                  "dpbench writes the ledger")
        try:
            params = np.asarray(theta, dtype=float)
        except (TypeError, ValueError):
            raise PrivatiserError(f"{self._owner} returned {type(theta).__name__}, not an array of "
                                  "parameters") from None
        if params.shape != (self._problem.model.n_params,):
            raise PrivatiserError(f"{self._owner} returned parameters of shape {params.shape}; the model has "
                                  f"{self._problem.model.n_params}")
        return Fit(theta=params, privacy=self._ledger, trace=self._trace)


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise PrivatiserError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def privatised(fit: Callable[..., Any], owner: str) -> FitFunction:
    """The fit the runner calls for a privatised plugin: builds the Privatiser (its noise generator
    spawned from `rng` before the plugin sees `rng`), calls the plugin's fit with it and returns the
    privatiser's Fit (`Privatiser.result`)."""

    @functools.wraps(fit)
    def run(problem: Problem, privacy: PrivacyTarget, rng: np.random.Generator, **hyper: Any) -> Fit:
        data = Privatiser(problem, privacy, rng.spawn(1)[0], owner=owner)
        return data.result(fit(data, privacy, rng, **hyper))

    return run


def privatised_algorithm(name: str, *, title: str, citation: str, convex_only: bool = False, updates: bool = False,
                         register: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare `fit(data: Privatiser, privacy, rng, *, <annotated hyperparameters>) -> parameters` as
    the private algorithm `name` on the privatiser path (module docstring; the other arguments as
    `algorithm`'s). updates=True for a fit whose mechanism is `noisy_sgd` or `noisy_gd` (every step is
    reported, so the all-updates audit applies)."""
    return algorithm(name, title=title, citation=citation, private=True, convex_only=convex_only, updates=updates,
                     register=register, runs=lambda fit: privatised(fit, owner=f"algorithm {name!r}"))


__all__ = ["DETAIL", "MECHANISMS", "Privatiser", "PrivatiserError", "privatised", "privatised_algorithm"]
