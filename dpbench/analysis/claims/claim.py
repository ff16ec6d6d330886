"""One claim of a `claims:` block: the keys every kind has, and its kind's own fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpbench.analysis.claims.kinds import CLAIM_KINDS


@dataclass(frozen=True)
class Claim:
    """A parsed claim (`parse_claims`). Every kind has id, source, quote, kind, relation, note, a
    scope (an epsilon range, data set and model labels), a quantifier over its panels (all, most
    or some: how many must hold) and the panels it declares uninformative (each a mapping with
    datasets, models and reason); `fields` holds the kind's own fields (`ClaimKind.fields`,
    defaults filled in), read as attributes: `claim.metric`, `claim.margin`."""

    id: str
    source: str
    quote: str
    kind: str
    relation: str
    epsilons: tuple[float, float] | None = None
    datasets: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    note: str = ""
    quantifier: str = "all"
    uninformative: tuple[dict, ...] = ()
    fields: tuple[tuple[str, Any], ...] = ()

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("__"):
            for key, value in object.__getattribute__(self, "fields"):
                if key == name:
                    return value
        raise AttributeError(f"a {object.__getattribute__(self, 'kind')} claim has no field {name!r}")

    @property
    def scope(self) -> str:
        """The scope in words, e.g. " (ε in [0.1, 3]; Adult)", or "" when the claim covers everything."""
        parts = []
        if self.epsilons:
            parts.append(f"ε in [{self.epsilons[0]:g}, {self.epsilons[1]:g}]")
        if self.datasets:
            parts.append(", ".join(self.datasets))
        if self.models:
            parts.append(", ".join(self.models))
        if self.quantifier != "all":
            parts.append(f"on {self.quantifier} panel{'s' if self.quantifier == 'most' else ''}")
        return f" ({'; '.join(parts)})" if parts else ""

    @property
    def statement(self) -> str:
        """The relation in one line, e.g. "accuracy: PIDP-SGD > DP-SGD + 0.01 (ε in [0.1, 3])"."""
        return CLAIM_KINDS.lookup(self.kind).statement(self) + self.scope


__all__ = ["Claim"]
