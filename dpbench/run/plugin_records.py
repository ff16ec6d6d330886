"""What a stored record takes from a plugin: its claim at most "declared" unless dpbench ran the
mechanism, and only the fields of a declared schema of scalars.

A built-in algorithm, or a plugin on the privatiser path (`dpbench.algorithms.privatiser`), has its
mechanism run by dpbench's own code; a plugin that owns its loop writes its ledger itself. dpbench's
checks (the ledger check, the release check, `dpbench verify`) find bugs in such a ledger, not every
bug, so its "valid" is stored as "declared" (`owned_claim`): the plugin's word, checked where
dpbench could, with the reason in `claim_reason`.

Schema (`schema_ledger`, `schema_trace`): a plugin's ledger keeps its named fields (`Ledger`: the
claim, epsilon spent, adjacency, sensitivity, the event as dp-accounting reads it, ...) and those
details whose values are scalars (`SCALARS`: a bool, a finite or infinite number, None, a string of
at most `MAX_TEXT` characters), plus `sampling`, a mapping of such scalars; every other detail (an
array, a list, a nested mapping, a long string) is dropped and named in the detail `dropped`. A trace
entry keeps its step and, where the plugin gave one, its iterate theta, from which dpbench computes
every metric (`cells.trace_metrics`); the plugin's own trace values are dropped (named in the
ledger's `dropped`). So no stored file of a plugin's run holds more than a scalar the plugin chose,
never a training row, and every metric in it is dpbench's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import Any

import numpy as np

from dpbench.core.ledger import Ledger

#: the longest string a plugin's ledger detail may hold (a mechanism's name, a note)
MAX_TEXT = 300
#: the detail that names what was dropped
DROPPED = "dropped"
#: the reason a plugin's own "valid" is stored as "declared"
OWNED_REASON = ("declared by the plugin: it runs its own mechanism (not dpbench's privatiser), so its epsilon is its "
                "own word, checked by dpbench's ledger and release checks only; `dpbench verify` tests it further")


def owned_claim(ledger: Ledger, mechanism_owner: str, library: str | None = None) -> Ledger:
    """The ledger with a "valid" stored as "declared" when dpbench does not run the mechanism
    (`AlgorithmInfo.mechanism_owner`): a plugin that owns its loop (`OWNED_REASON`), or a peer
    library's implementation ("declared by <library> <version>: ...", `peers.declared_reason`);
    unchanged otherwise."""
    if ledger.claim != "valid" or mechanism_owner == "dpbench":
        return ledger
    if mechanism_owner == "library":
        from dpbench.algorithms.peers import declared_reason

        return ledger.with_claim("declared", declared_reason(library or "the library"))
    return ledger.with_claim("declared", OWNED_REASON)


def _scalar(value: Any) -> bool:
    if value is None or isinstance(value, (bool, np.bool_)):
        return True
    if isinstance(value, str):
        return len(value) <= MAX_TEXT
    return isinstance(value, (Real, np.integer, np.floating)) and np.ndim(value) == 0


def _as_json(value: Any) -> Any:
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


def schema_ledger(ledger: Ledger) -> Ledger:
    """A plugin's ledger reduced to the schema of the module docstring (named fields, scalar details,
    `sampling` of scalars), what was dropped named in `DROPPED`."""
    kept, dropped = {}, []
    for name, value in ledger.details.items():
        if name == DROPPED:
            continue
        if name == "sampling" and isinstance(value, Mapping) and all(
                isinstance(k, str) and _scalar(v) for k, v in value.items()):
            kept[name] = {k: _as_json(v) for k, v in value.items()}
        elif _scalar(value):
            kept[name] = _as_json(value)
        else:
            dropped.append(name)
    texts = {k: getattr(ledger, k) for k in ("mechanism", "claim_reason", "proof")}
    long = [k for k, v in texts.items() if isinstance(v, str) and len(v) > 4 * MAX_TEXT]
    spent = {str(k): float(v) for k, v in ledger.epsilon_spent.items() if _scalar(v) and not isinstance(v, str)}
    if len(spent) != len(ledger.epsilon_spent):
        dropped.append("epsilon_spent (values that are not numbers)")
    out = Ledger(private=bool(ledger.private), claim=ledger.claim, target_epsilon=ledger.target_epsilon,
                 delta=ledger.delta, epsilon_spent=spent, adjacency=ledger.adjacency,
                 spent_adjacency=ledger.spent_adjacency, sensitivity=_number(ledger.sensitivity),
                 event=ledger.event, public=dict(ledger.public), epsilon_recomputed=ledger.epsilon_recomputed,
                 details=kept, **{k: (v[:4 * MAX_TEXT] + " [cut]" if k in long else v) for k, v in texts.items()})
    if long:
        dropped += [f"{k} (cut to {4 * MAX_TEXT} characters)" for k in long]
    return out.with_details(**{DROPPED: ", ".join(dropped)}) if dropped else out


def _number(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number


def schema_trace(trace: list[dict]) -> tuple[list[dict], list[str]]:
    """A plugin's trace reduced to steps and iterates ({"step", "theta"}: dpbench computes the metrics
    from theta), and the names of the plugin's own values that were dropped."""
    out, dropped = [], []
    for entry in trace or []:
        if not isinstance(entry, Mapping) or "step" not in entry:
            dropped.append("trace entries without a step")
            continue
        kept = {"step": int(entry["step"])}
        if "theta" in entry:
            kept["theta"] = np.asarray(entry["theta"], dtype=float)
        out.append(kept)
        dropped += [f"trace {k}" for k in entry if k not in ("step", "theta")]
    return out, list(dict.fromkeys(dropped))


def with_dropped(ledger: Ledger, names: list[str]) -> Ledger:
    """The ledger with `names` added to what `DROPPED` says was dropped."""
    if not names:
        return ledger
    before = ledger.details.get(DROPPED)
    return ledger.with_details(**{DROPPED: ", ".join(([before] if before else []) + names)})


__all__ = ["DROPPED", "MAX_TEXT", "OWNED_REASON", "owned_claim", "schema_ledger", "schema_trace", "with_dropped"]
