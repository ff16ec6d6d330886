"""dpbench's own check of a ledger's "valid": the numbers the ledger states must hold the claim.

A fit writes its own ledger (`dpbench.core.ledger.Ledger`), a plugin's fit included; "valid" is kept
only when the ledger's numbers support it:

* every epsilon an accountant computed is finite (an infinite epsilon from any accountant means
  that accountant certifies nothing, and a run is never valid on it);
* an epsilon was computed at all, and the smallest one is within the target (relative 1e-9, the
  calibrations' floating-point slack);
* the ledger's target is the run's target, and its delta is not above the run's delta (an
  epsilon of a larger delta is a weaker guarantee than the one asked for).

Otherwise the claim becomes "paper-only" with the reason. The runner applies it to every fit as it
is stored (`dpbench.run.cells`) and the runs table to every stored record (`dpbench.analysis.curves`),
so a record stored before the check, or edited since, is held to it too. `dpbench verify`
(`dpbench.audit.verify`) goes further: it recomputes epsilon from the mechanism's numbers and
checks the numbers against what the fit does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dpbench.core.ledger import Ledger

#: relative slack of "within the target" (what a calibration to the target may leave above it)
SLACK = 1e-9


def problems(ledger: Ledger, epsilon: float | None, delta: float | None) -> list[str]:
    """Why the ledger's numbers do not hold its "valid" for a run of target (epsilon, delta); []
    when they do (or when it claims nothing valid)."""
    if ledger.claim != "valid":
        return []
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
    return out


def checked(ledger: Ledger, epsilon: float | None, delta: float | None) -> Ledger:
    """The ledger, its "valid" turned "paper-only" (with the reasons) where `problems` finds any."""
    found = problems(ledger, epsilon, delta)
    if not found:
        return ledger
    return ledger.with_claim("paper-only", "dpbench's ledger check: " + "; ".join(found))


def checked_claim(stored: Mapping[str, Any], epsilon: float | None, delta: Any = None) -> str | None:
    """The claim of a stored ledger (its flat form) after `checked` against the run's epsilon and
    delta (a delta that is not a number, e.g. an unevaluated expression, is not checked)."""
    if not stored:
        return None
    if stored.get("claim") != "valid":  # only a "valid" is checked: the others need no Ledger built
        return stored.get("claim")
    try:
        delta = None if delta is None else float(delta)
    except (TypeError, ValueError):
        delta = None
    return checked(Ledger.from_dict(stored), epsilon, delta).claim


__all__ = ["SLACK", "checked", "checked_claim", "problems"]
