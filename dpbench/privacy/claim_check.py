"""dpbench's own check of a ledger's "valid": the mechanism it states must hold the claim.

A fit writes its own ledger (`dpbench.core.ledger.Ledger`), a plugin's fit included; "valid" is kept
only when what the ledger states supports it:

* every epsilon an accountant computed is finite (an infinite epsilon from any accountant means
  that accountant certifies nothing, and a run is never valid on it);
* an epsilon was computed at all, and the smallest one is within the target (relative 1e-9, the
  calibrations' floating-point slack);
* the ledger's target is the run's target, and its delta is not above the run's delta (an
  epsilon of a larger delta is a weaker guarantee than the one asked for);
* the ledger states its mechanism: a dp-accounting `DpEvent` (`dpbench.privacy.events`) whose
  numbers agree with the ledger's own (noise multiplier, sampling rate, steps) and from which
  dpbench's accountants recompute an epsilon within the target at the run's delta (the fit's
  `epsilon_spent` is not what is held to the target then, the recomputation is); or, for a
  guarantee no accountant here evaluates, the theorem it rests on (the claim then says "by the
  theorem in ...; not recomputed"). A ledger with neither is not valid.

Otherwise the claim becomes "paper-only" with the reasons. The runner applies `checked` to every
fit as it is stored (`dpbench.run.cells`), which recomputes epsilon and stores it in the ledger's
`epsilon_recomputed`; the runs table applies `checked_claim` to every stored record
(`dpbench.analysis.curves`), so a record stored before the check, or edited since, is held to it
too (a stored record whose ledger predates stated mechanisms names none: its claim is kept, and
`basis` says it was not recomputed). `dpbench verify` (`dpbench.audit.verify`) goes further: it
checks the numbers against what the fit does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dpbench.core.ledger import Ledger, sampling_rate
from dpbench.privacy import events

#: relative slack of "within the target" (what a calibration to the target may leave above it)
SLACK = 1e-9
#: relative slack of an epsilon recomputed from the event: the same accountants as the
#: calibrations for Gaussian steps (equal numbers), the exact Gaussian-DP epsilon for full-batch
#: steps (a root found to ~1e-12 relative)
RECOMPUTE_SLACK = 1e-6
#: how a ledger's `public["feature_bounds"]` begins when the features were scaled with bounds taken
#: from the data itself (a step no epsilon covers)
DATA_DEPENDENT = "data-dependent"
#: relative slack of the event's numbers against the ledger's (both written from one float)
NUMBERS_SLACK = 1e-9


def _event_problems(ledger: Ledger, epsilon: float | None, delta: float | None,
                    recompute: bool) -> tuple[list[str], dict[str, float] | None]:
    """(problems, epsilon recomputed) of the ledger's stated event (module docstring)."""
    try:
        event = events.from_json(ledger.event)
    except events.EventError as exc:
        return [f"its DpEvent cannot be read ({exc})"], None
    out = []
    steps = events.gaussian_steps(event)
    if steps is not None and ledger.get("noise_multiplier") is not None:  # a ledger of Gaussian steps: z, q, T
        stated = {"noise multiplier": ledger.get("noise_multiplier"), "sampling rate": sampling_rate(ledger),
                  "steps": ledger.get("steps")}
        for (name, said), value in zip(stated.items(), steps):
            if said is not None and abs(float(said) - value) > NUMBERS_SLACK * max(abs(value), 1e-300):
                out.append(f"its DpEvent has {name} {value:.6g}, its ledger {float(said):.6g}")
    at = delta if delta is not None else ledger.delta
    if at is None or epsilon is None:
        return out, None
    recomputed = dict(ledger.epsilon_recomputed or {}) if not recompute else None
    if not recomputed:
        try:
            recomputed = events.recomputed_epsilon(ledger.event, float(at),
                                                   ledger.spent_adjacency or ledger.adjacency)
        except events.EventError as exc:
            return out + [f"its DpEvent is not evaluated: {exc}"], None
    best = min(float(v) for v in recomputed.values())
    if not math.isfinite(best):
        out.append("the epsilon recomputed from its DpEvent is infinite")
    elif best > float(epsilon) * (1 + RECOMPUTE_SLACK):
        out.append(f"the epsilon recomputed from its DpEvent, {best:.4g} at delta {float(at):.3g}, exceeds the "
                   f"target {float(epsilon):g}")
    return out, recomputed


def problems(ledger: Ledger, epsilon: float | None, delta: float | None, *, stored: bool = False) -> list[str]:
    """Why the ledger does not hold its "valid" for a run of target (epsilon, delta); [] when it
    does (or when it claims nothing valid). `stored`: a record read back, whose ledger may predate
    stated mechanisms and whose `epsilon_recomputed` (written when it was stored) is used."""
    return _check(ledger, epsilon, delta, stored)[0]


def _check(ledger: Ledger, epsilon: float | None, delta: float | None,
           stored: bool) -> tuple[list[str], dict[str, float] | None]:
    if ledger.claim != "valid":
        return [], None
    out = []
    spent = {k: v for k, v in (ledger.epsilon_spent or {}).items() if v is not None}
    infinite = sorted(k for k, v in spent.items() if not math.isfinite(float(v)))
    if infinite:
        out.append(f"the {', '.join(infinite)} epsilon is infinite")
    finite = [float(v) for v in spent.values() if math.isfinite(float(v))]
    if not spent:
        out.append("no epsilon spent is stated")
    elif finite and epsilon is not None and min(finite) > float(epsilon) * (1 + SLACK):
        out.append(f"the epsilon spent {min(finite):.4g} exceeds the target {float(epsilon):g}")
    if epsilon is not None and ledger.target_epsilon is not None and \
            abs(float(ledger.target_epsilon) - float(epsilon)) > SLACK * float(epsilon):
        out.append(f"the ledger's target {float(ledger.target_epsilon):g} is not the run's {float(epsilon):g}")
    if delta is not None and (ledger.delta is None or float(ledger.delta) > float(delta) * (1 + SLACK)):
        out.append(f"its epsilon is of delta {ledger.delta}, not the run's {float(delta):.3g}")
    recomputed = None
    if ledger.event is not None:
        found, recomputed = _event_problems(ledger, epsilon, delta, recompute=not stored)
        out.extend(found)
    elif not ledger.proof and not stored:
        out.append("it states neither its mechanism (a DpEvent) nor the theorem its guarantee rests on")
    return out, recomputed


def basis(ledger: Ledger) -> str:
    """What a "valid" rests on, as its label says it: "recomputed" (from the stated DpEvent),
    "by the theorem in <reference>; not recomputed", or "not recomputed" (a stored ledger that
    states neither)."""
    if ledger.event is not None:
        return "recomputed"
    if ledger.proof:
        return f"by the theorem in {ledger.proof}; not recomputed"
    return "not recomputed"


def checked(ledger: Ledger, epsilon: float | None, delta: float | None) -> Ledger:
    """The ledger as the runner stores it: a "valid" with a DpEvent gets `epsilon_recomputed`, and a
    "valid" that `problems` faults is turned "paper-only" (with the reasons)."""
    found, recomputed = _check(ledger, epsilon, delta, stored=False)
    if recomputed is not None:
        ledger = replace(ledger, epsilon_recomputed=recomputed)
    if not found:
        return ledger
    return ledger.with_claim("paper-only", f"{CHECK_PREFIX} ledger check: " + "; ".join(found))


def checked_claim(stored: Mapping[str, Any], epsilon: float | None, delta: Any = None) -> str | None:
    """The claim of a stored ledger (its flat form) after `checked` against the run's epsilon and
    delta (a delta that is not a number, e.g. an unevaluated expression, is not checked)."""
    return stored_check(stored, epsilon, delta)[0]


#: how the reason of a claim dpbench's own checks turned begins (this module's and the runner's release check)
CHECK_PREFIX = "dpbench's"


def stored_check(stored: Mapping[str, Any], epsilon: float | None, delta: Any = None) -> tuple[str | None, str]:
    """(claim, why dpbench's checks turned it) of a stored ledger: `checked_claim`'s claim, and the
    reason when a check of dpbench's (this one now, or the runner's when the run was stored) made
    it paper-only, else ""."""
    if not stored:
        return None, ""
    reason = str(stored.get("claim_reason") or "")
    if stored.get("claim") != "valid":
        return stored.get("claim"), reason if reason.startswith(CHECK_PREFIX) else ""
    try:
        delta = None if delta is None else float(delta)
    except (TypeError, ValueError):
        delta = None
    found = problems(Ledger.from_dict(stored), epsilon, delta, stored=True)
    return ("paper-only", f"{CHECK_PREFIX} ledger check: " + "; ".join(found)) if found else ("valid", "")


def stored_basis(stored: Mapping[str, Any]) -> str | None:
    """`basis` of a stored ledger (its flat form) that claims "valid"; None for any other claim."""
    if not stored or stored.get("claim") != "valid":
        return None
    return basis(Ledger.from_dict(stored))


__all__ = ["CHECK_PREFIX", "DATA_DEPENDENT", "NUMBERS_SLACK", "RECOMPUTE_SLACK", "SLACK", "basis", "checked",
           "checked_claim", "problems", "stored_basis", "stored_check"]
