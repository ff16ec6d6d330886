"""The privacy ledger: what a fit says it spent, as a typed record (docs/validity.md, The label of a run).

Every algorithm returns a `Ledger` in `Fit.privacy`. It is stored in a cell's record as a flat JSON
object (`as_dict`): the named fields below plus the mechanism's own details (noise multiplier,
steps, sampling, ...) at the top level, so a stored record reads back with `Ledger.from_dict`. A
Ledger is also a read-only mapping over that flat form (`ledger["claim"]`, `ledger.get("steps")`).

claim: "valid" -- the guarantee is proven for this model and the numbers are the accountant's;
"paper-only" -- the paper claims epsilon but its proof does not hold (or the accountant does not
certify it); "declared" -- epsilon rests on the algorithm's own word where dpbench did not run
or see the mechanism (a plugin's own loop, a sensitivity the plugin declares, a composition of noisy
steps none of which was reported); "none" -- non-private, or no proof applies (then no epsilon is
claimed).
adjacency: the neighbour relation of the claim (what an audit must test); `spent_adjacency` the
one `epsilon_spent` was computed under when it differs (PIDP-SGD: the paper claims replace-one,
the accountant composes add/remove-one steps).
event: what was released, as the stored form of a dp-accounting `DpEvent`
(`dpbench.privacy.events`), from which dpbench recomputes epsilon (`epsilon_recomputed`, written by
dpbench when the run is stored, never by the fit); proof: the reference of the theorem a claim
rests on when its mechanism has no such event (its epsilon is then not recomputed).
public: what the claim treats as public, by name ("n": the number of records, which add/remove-one
accounting uses to fix q, T and the noise; "feature_bounds": the ranges the features were scaled
with), each with a sentence saying so.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

CLAIMS = ("valid", "declared", "none", "paper-only")
Claim = Literal["valid", "declared", "none", "paper-only"]


class Adjacency(str, enum.Enum):
    """Neighbouring data sets: one record added or removed, or one record replaced (n public)."""

    ADD_REMOVE = "add/remove-one"
    REPLACE_ONE = "replace-one"

    @classmethod
    def parse(cls, value: "Adjacency | str | None") -> "Adjacency | None":
        if value is None or isinstance(value, Adjacency):
            return value
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown adjacency {value!r}; expected {cls.ADD_REMOVE.value!r} or "
                             f"{cls.REPLACE_ONE.value!r}") from None


def _legacy_adjacency(text: str) -> tuple[Adjacency, Adjacency | None]:
    """(claim, spent) of a stored free-text adjacency: "replace-one" or
    "paper: replace-one; epsilon_spent: add/remove-one" (the free-text form that stored PIDP-SGD
    records carry)."""
    parts = {}
    for chunk in text.split(";"):
        head, _, tail = chunk.partition(":")
        parts[head.strip() if tail else "claim"] = (tail or head).strip()
    claim = Adjacency.parse(parts.get("paper", parts.get("claim")))
    spent = parts.get("epsilon_spent")
    return claim, Adjacency.parse(spent) if spent else None


@dataclass(frozen=True)
class Ledger(Mapping[str, Any]):
    """One fit's privacy accounting; the named fields are the ones every consumer reads."""

    private: bool
    mechanism: str
    claim: Claim
    target_epsilon: float | None = None
    delta: float | None = None
    epsilon_spent: dict[str, float] = field(default_factory=dict)  # accountant name -> epsilon computed
    adjacency: Adjacency | None = None
    spent_adjacency: Adjacency | None = None  # None: the same as `adjacency`
    sensitivity: float | None = None
    claim_reason: str | None = None
    event: dict[str, Any] | None = None  # stored DpEvent (dpbench.privacy.events)
    proof: str | None = None  # the theorem a claim without an event rests on (its reference)
    public: dict[str, str] = field(default_factory=dict)  # what is treated as public -> why/how
    epsilon_recomputed: dict[str, float] | None = None  # dpbench's epsilon from `event`, per accountant
    details: dict[str, Any] = field(default_factory=dict)  # the mechanism's own numbers

    def __post_init__(self) -> None:
        if self.claim not in CLAIMS:
            raise ValueError(f"claim must be one of {', '.join(CLAIMS)}, got {self.claim!r}")
        object.__setattr__(self, "adjacency", Adjacency.parse(self.adjacency))
        object.__setattr__(self, "spent_adjacency", Adjacency.parse(self.spent_adjacency))
        clash = set(self.details) & _NAMED
        if clash:
            raise ValueError(f"ledger details repeat named fields: {', '.join(sorted(clash))}")

    def as_dict(self) -> dict[str, Any]:
        """The flat JSON form stored with a cell (named fields that are set, then the details)."""
        out: dict[str, Any] = {"private": self.private, "mechanism": self.mechanism, "claim": self.claim,
                               "target_epsilon": self.target_epsilon, "delta": self.delta,
                               "epsilon_spent": dict(self.epsilon_spent)}
        if self.adjacency is not None:
            out["adjacency"] = self.adjacency.value
        if self.spent_adjacency is not None and self.spent_adjacency != self.adjacency:
            out["spent_adjacency"] = self.spent_adjacency.value
        if self.sensitivity is not None:
            out["sensitivity"] = self.sensitivity
        if self.claim_reason is not None:
            out["claim_reason"] = self.claim_reason
        for name in ("event", "proof", "epsilon_recomputed"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.public:
            out["public"] = dict(self.public)
        out.update(self.details)
        return out

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> "Ledger":
        """A ledger from its stored form (`as_dict`, or a record whose adjacency is free text)."""
        if isinstance(stored, Ledger):
            return stored
        data = dict(stored)
        adjacency = data.pop("adjacency", None)
        spent = data.pop("spent_adjacency", None)
        if isinstance(adjacency, str) and (";" in adjacency or ":" in adjacency):
            adjacency, spent = _legacy_adjacency(adjacency)
        named = {k: data.pop(k) for k in list(data) if k in _NAMED}
        return cls(adjacency=adjacency, spent_adjacency=spent, details=data,
                   **{"private": False, "mechanism": "", "claim": "none", **named})

    def with_claim(self, claim: Claim, reason: str | None = None) -> "Ledger":
        """The same ledger with another claim (and its reason)."""
        return replace(self, claim=claim, claim_reason=reason if reason is not None else self.claim_reason)

    def with_details(self, **details: Any) -> "Ledger":
        return replace(self, details={**self.details, **details})

    def with_public(self, **public: str) -> "Ledger":
        """The same ledger with more entries in `public` (name -> the sentence that says so)."""
        return replace(self, public={**self.public, **public})

    @property
    def audited_adjacency(self) -> Adjacency:
        """The relation an audit of this claim builds its neighbours with (add/remove when unset)."""
        return self.adjacency or Adjacency.ADD_REMOVE

    # read-only mapping over the stored form
    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


def sampling_rate(ledger: Mapping[str, Any]) -> float | None:
    """A ledger's `sampling.rate` (its stored form or a Ledger; None where it states none)."""
    sampling = ledger.get("sampling")
    if isinstance(sampling, Mapping) and sampling.get("rate") is not None:
        return float(sampling["rate"])
    return None


_NAMED = {f.name for f in fields(Ledger)} - {"details", "adjacency", "spent_adjacency"}


__all__ = ["Adjacency", "CLAIMS", "Claim", "Ledger", "sampling_rate"]
