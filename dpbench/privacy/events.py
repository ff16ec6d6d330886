"""A mechanism as data: dp-accounting `DpEvent`s in a stored ledger, and epsilon recomputed from them.

A fit that claims "valid" states what it released as a `DpEvent` of the dp-accounting library
(a Gaussian mechanism of noise multiplier z, Poisson-sampled at rate q, composed T times, ...), and
dpbench recomputes epsilon from that event with its own accountants instead of believing the
ledger's `epsilon_spent` (`dpbench.privacy.claim_check`). A mechanism whose guarantee comes from a
theorem with no such event (smooth sensitivity, a sampling scheme no accountant models) names the
theorem instead, and its claim says it was not recomputed.

Stored form (`to_json` / `from_json`): one JSON object per event, `{"type": <the class name in
dp_accounting.dp_event>, <its fields>}`, nested events in place (`"event": {...}`, `"events":
[...]`), e.g. DP-SGD's

    {"type": "SelfComposedDpEvent", "count": 1400,
     "event": {"type": "PoissonSampledDpEvent", "sampling_probability": 0.0071,
               "event": {"type": "GaussianDpEvent", "noise_multiplier": 1.25}}}

Recomputation (`recomputed_epsilon`): the noise multiplier is relative to the sensitivity of the
neighbour relation epsilon is computed under (the ledger's `spent_adjacency`, else `adjacency`).

* T Gaussian steps, each on a Poisson sample of rate q (q = 1: the full data), add/remove-one or
  unsampled: dpbench's DP-SGD accountants (`accounting.dpsgd_epsilon_report`: RDP and PLD, both
  upper bounds), and for q = 1 the exact Gaussian-DP composition (`accounting.gdp_epsilon` of
  mu = sqrt(T)/z, which is exact: T Gaussian steps compose to one Gaussian);
* any other event: the library's `RdpAccountant` (its default orders) and `PLDAccountant`
  (discretisation 1e-4, pessimistic estimate) under the relation, each where it supports the
  event; none supporting it raises `EventError`.

The smallest of the accountants' epsilons is the one a claim is held to (each is an upper bound).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from typing import Any

from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from dpbench.core.ledger import Adjacency

#: PLD discretisation of the generic path (events other than Gaussian steps)
GENERIC_PLD_INTERVAL = 1e-4


def _fields(cls: type) -> list[str]:
    """The fields of an event class (dp_accounting declares its events with attrs)."""
    return [a.name for a in getattr(cls, "__attrs_attrs__", ())]


class EventError(ValueError):
    """A stored event that cannot be read, or that no accountant here evaluates."""


def to_json(event: dp_event.DpEvent) -> dict[str, Any]:
    """The stored form of an event (module docstring)."""
    if not isinstance(event, dp_event.DpEvent):
        raise EventError(f"not a DpEvent: {event!r}")
    out: dict[str, Any] = {"type": type(event).__name__}
    for name in _fields(type(event)):
        value = getattr(event, name)
        if isinstance(value, dp_event.DpEvent):
            value = to_json(value)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, dp_event.DpEvent) for v in value):
            value = [to_json(v) for v in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def from_json(stored: Mapping[str, Any]) -> dp_event.DpEvent:
    """The event of a stored form; `EventError` naming what is wrong when it is not one."""
    if not isinstance(stored, Mapping) or not isinstance(stored.get("type"), str):
        raise EventError(f"an event is an object with a 'type', got {stored!r:.80}")
    cls = getattr(dp_event, stored["type"], None)
    if not (isinstance(cls, type) and issubclass(cls, dp_event.DpEvent)) or cls is dp_event.DpEvent:
        raise EventError(f"unknown event type {stored['type']!r}")
    names = set(_fields(cls))
    given = set(stored) - {"type"}
    if given != names:
        raise EventError(f"{stored['type']} needs the fields {sorted(names)}, got {sorted(given)}")
    kwargs = {}
    for name in names:
        value = stored[name]
        if name == "event":
            value = from_json(value)
        elif name == "events":
            value = [from_json(v) for v in value]
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise EventError(f"{stored['type']}: {exc}") from None


def gaussian_steps(event: dp_event.DpEvent) -> tuple[float, float, int] | None:
    """(z, q, T) when the event is T Gaussian steps of multiplier z on Poisson samples of rate q
    (q = 1: unsampled; T = 1: not composed), else None."""
    count = 1
    if isinstance(event, dp_event.SelfComposedDpEvent):
        event, count = event.event, int(event.count)
    rate = 1.0
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        event, rate = event.event, float(event.sampling_probability)
    if isinstance(event, dp_event.GaussianDpEvent) and count >= 1:
        return float(event.noise_multiplier), rate, count
    return None


def gaussian_steps_epsilon(z: float, q: float, steps: int, delta: float) -> dict[str, float]:
    """Epsilon of T Gaussian steps of multiplier z on Poisson samples of rate q (add/remove-one; q = 1:
    any relation, the multiplier being relative to its sensitivity) by each of dpbench's accountants."""
    from dpbench.privacy import accounting

    if z <= 0:
        return {"noise": math.inf}
    spent = dict(accounting.dpsgd_epsilon_report(z, q, steps, delta))
    if q >= 1.0:
        spent["gdp"] = accounting.gdp_epsilon(math.sqrt(steps) / z, delta)
    return {k: float(v) for k, v in spent.items()}


def _relation(adjacency: Adjacency | None, rdp: bool):
    module = rdp_privacy_accountant if rdp else pld_privacy_accountant
    rel = module.NeighborRel
    return rel.REPLACE_ONE if adjacency is Adjacency.REPLACE_ONE else rel.ADD_OR_REMOVE_ONE


@functools.lru_cache(maxsize=4096)
def _recomputed(stored: str, delta: float, adjacency: str | None) -> tuple[tuple[str, float], ...]:
    event = from_json(json.loads(stored))
    relation = Adjacency.parse(adjacency)
    steps = gaussian_steps(event)
    if steps is not None and (steps[1] >= 1.0 or relation is not Adjacency.REPLACE_ONE):
        return tuple(sorted(gaussian_steps_epsilon(*steps, delta).items()))
    out = {}
    try:
        acc = rdp_privacy_accountant.RdpAccountant(neighboring_relation=_relation(relation, True))
        if acc.supports(event):
            out["rdp"] = float(acc.compose(event).get_epsilon(delta))
    except (NotImplementedError, ValueError, OverflowError):
        pass
    try:
        acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=_relation(relation, False),
                                                   value_discretization_interval=GENERIC_PLD_INTERVAL)
        if acc.supports(event):
            out["pld"] = float(acc.compose(event).get_epsilon(delta))
    except (NotImplementedError, ValueError, OverflowError):
        pass
    if not out:
        raise EventError(f"no accountant here evaluates {type(event).__name__} under "
                         f"{(relation or Adjacency.ADD_REMOVE).value}")
    return tuple(sorted(out.items()))


def recomputed_epsilon(stored: Mapping[str, Any], delta: float,
                       adjacency: Adjacency | str | None = None) -> dict[str, float]:
    """Epsilon at `delta` of a stored event by each accountant that evaluates it (module docstring);
    `EventError` when the event cannot be read or evaluated. Memoised per (event, delta, relation)."""
    adjacency = Adjacency.parse(adjacency)
    key = json.dumps(dict(stored), sort_keys=True, default=str)
    return dict(_recomputed(key, float(delta), adjacency.value if adjacency else None))


def dpsgd_event_json(noise_multiplier: float, sampling_rate: float, steps: int) -> dict[str, Any]:
    """The stored event of T Gaussian steps of multiplier z on Poisson samples of rate q (q = 1: the
    full data; T = 1: one Gaussian mechanism)."""
    event: dp_event.DpEvent = dp_event.GaussianDpEvent(float(noise_multiplier))
    if sampling_rate < 1.0:
        event = dp_event.PoissonSampledDpEvent(float(sampling_rate), event)
    if int(steps) != 1:
        event = dp_event.SelfComposedDpEvent(event, int(steps))
    return to_json(event)


def laplace_event_json(noise_multiplier: float) -> dict[str, Any]:
    """The stored event of one Laplace mechanism of scale noise_multiplier x its L1 sensitivity."""
    return to_json(dp_event.LaplaceDpEvent(float(noise_multiplier)))


__all__ = ["GENERIC_PLD_INTERVAL", "EventError", "dpsgd_event_json", "laplace_event_json", "from_json", "gaussian_steps",
           "gaussian_steps_epsilon", "recomputed_epsilon", "to_json"]
