"""Claim kinds: the registry `CLAIM_KINDS` of what a `claims:` entry may test, one declaration each.

A claim kind is its evaluation function declared with `claim_kind(...)`:

    @claim_kind("trend", relations=("increasing", "decreasing"), statement=trend_statement,
                fields=(Field("metric", Text()), Field("a", Text()),
                        Field("over", StrOptions(AXES), default="epsilon")))
    def trend(claim, points, audits) -> list[SubTest]: ...

`relations` are the values its `relation:` key takes; `fields` its own keys, each with its
constraints in the validation vocabulary (dpbench.core.validation), its default (none: the key is
required) and the relations it applies to; `statement(claim)` says the relation in one line (the
claims table's "relation tested" column). The evaluation reads the per-seed points (`points`) or
the audits table (`audits`) and returns either the sub-tests whose paired statistics decide the
verdict (Holm-adjusted across the experiment's claims) or a `Reading`: a verdict read directly,
as an audit claim reads the audits' own bounds. Parsing (`parse_claims`), the verdicts and the
tables read everything else from the declaration; nothing else lists the kinds.

The built-in kinds are declared in dpbench.analysis.claims.builtin (imported on first use of the
registry); installed packages add kinds through the entry point group `dpbench.claim_kinds`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from dpbench.core.registry import BUILT_IN, Registry, current_source

#: a field without a default must be given
REQUIRED = object()


@dataclass(frozen=True)
class Field:
    """One key of a claim kind: its constraints (dpbench.core.validation), its default (REQUIRED:
    none), the relations that take it (None: every one) and those for which it has no default
    (`needed_by`); `hint` says what to give when it is missing."""

    name: str
    constraints: Any
    default: Any = REQUIRED
    relations: tuple[str, ...] | None = None
    needed_by: tuple[str, ...] = ()
    hint: str = ""

    def applies(self, relation: str) -> bool:
        return self.relations is None or relation in self.relations

    def required(self, relation: str) -> bool:
        return self.default is REQUIRED or relation in self.needed_by


@dataclass(frozen=True)
class Reading:
    """A verdict a claim kind reads directly (no p-value: it takes no part in the Holm adjustment),
    and the evidence the table shows for it."""

    verdict: str  # reproduced | contradicted | inconclusive | no data
    evidence: str


@dataclass(frozen=True)
class ClaimKind:
    """A declared claim kind (module docstring)."""

    name: str
    relations: tuple[str, ...]
    fields: tuple[Field, ...]
    evaluate: Callable[..., Any]  # (claim, points, audits) -> list[SubTest] | Reading
    statement: Callable[[Any], str]  # claim -> the relation in one line, without its scope
    description: str = ""
    source: str = BUILT_IN

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


CLAIM_KINDS: Registry[ClaimKind] = Registry("claim kind", builtins="dpbench.analysis.claims.builtin",
                                            group="dpbench.claim_kinds")


def claim_kind(name: str, *, relations: tuple[str, ...], statement: Callable[[Any], str],
               fields: tuple[Field, ...] = (), description: str = "") -> Callable[[Callable], Callable]:
    """Declare an evaluation function as claim kind `name` (module docstring)."""
    if not relations:
        raise ValueError(f"claim kind {name!r} needs at least one relation")

    def declare(evaluate: Callable[..., Any]) -> Callable[..., Any]:
        kind = CLAIM_KINDS.register(ClaimKind(name=name, relations=tuple(relations), fields=tuple(fields),
                                              evaluate=evaluate, statement=statement, description=description,
                                              source=current_source()))
        evaluate.dpbench_component = kind  # type: ignore[attr-defined]  # what an entry point may name
        return evaluate

    return declare


__all__ = ["CLAIM_KINDS", "ClaimKind", "Field", "REQUIRED", "Reading", "claim_kind"]
