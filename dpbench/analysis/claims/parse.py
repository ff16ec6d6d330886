"""The `claims:` block of an experiment parsed into `Claim`s, every value checked against its
declared constraints (dpbench.core.validation): the keys every claim has here, a kind's own keys
in its declaration (`claim_kind`). Every error is one SpecError line naming the YAML path."""

from __future__ import annotations

from typing import Any

from dpbench.analysis.claims.claim import Claim
from dpbench.analysis.claims.kinds import CLAIM_KINDS, REQUIRED
from dpbench.core.errors import SpecError
from dpbench.core.validation import Interval, Pair, Real, Sequence, StrOptions, Text, entries, missing, validate

#: keys every claim has before its kind's own, and after them (its scope and a note)
HEAD_KEYS = ("id", "source", "quote", "kind", "relation")
SCOPE_KEYS = ("epsilons", "datasets", "models", "quantifier", "uninformative", "note")
#: how many of a claim's panels must hold (dpbench.analysis.claims.stats.needed)
QUANTIFIERS = ("all", "most", "some")
UNINFORMATIVE_KEYS = ("datasets", "models", "reason")
ID = Text(pattern=r"[a-z0-9][a-z0-9-]*", what="lower-case letters, digits and '-'", strip=True)
TEXT = Text(strip=True)
LABELS = Sequence(Text(), what="a non-empty list of labels")
EPSILONS = Pair(Interval(Real))


def claim_keys() -> tuple[str, ...]:
    """Every key a claim may have: the common ones and the fields of every declared kind."""
    own = dict.fromkeys(f.name for kind in CLAIM_KINDS.values() for f in kind.fields)
    return HEAD_KEYS + tuple(k for k in own if k not in HEAD_KEYS + SCOPE_KEYS) + SCOPE_KEYS


def _text(entry: dict, key: str, path: str, required: bool = True) -> str | None:
    value = entry.get(key)
    if value is None:
        if required:
            raise missing(f"{path}.{key}")
        return None
    return validate(f"{path}.{key}", value, TEXT)


def _uninformative(value: Any, path: str) -> tuple[dict, ...]:
    """The panels a claim declares uninformative: a list of {datasets, models, reason} (datasets or
    models may be left out: every one), each with its reason."""
    out = []
    for where, entry in entries(path, value, UNINFORMATIVE_KEYS, "a list of {datasets, models, reason}"):
        if entry.get("reason") is None:
            raise missing(f"{where}.reason", "say why these panels cannot inform the claim")
        out.append({"datasets": tuple(validate(f"{where}.datasets", entry.get("datasets"), [LABELS, None]) or ()),
                    "models": tuple(validate(f"{where}.models", entry.get("models"), [LABELS, None]) or ()),
                    "reason": validate(f"{where}.reason", entry["reason"], TEXT)})
    return tuple(out)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _margin(entry: dict, fields: dict, where: str, margins: dict[str, float] | None) -> None:
    """Fill a directional claim's `equivalence` from the margin rule (`margins`: metric -> margin,
    the spec's `margins:` over dpbench's defaults; None: no rule, a missing margin is 0, none).
    A claim that gives another margin must say why (`equivalence_reason`); a metric the rule has
    no margin for must be given one in `margins:`."""
    if margins is None:
        fields["equivalence"] = fields["equivalence"] or 0.0
        return
    metric = fields.get("metric")
    rule = margins.get(metric)
    given = entry.get("equivalence")
    if given is None:
        if rule is None:
            raise SpecError(f"{where}: no margin for metric {metric!r}: declare the smallest meaningful difference "
                            f"in the spec's `margins:` (e.g. margins: {{{metric}: 0.05}}), or give the claim "
                            f"equivalence and equivalence_reason")
        fields["equivalence"] = float(rule)
    elif not fields.get("equivalence_reason") and (rule is None or abs(float(given) - rule) > 1e-12 * max(rule, 1)):
        raise SpecError(f"{where}.equivalence: {given:g} is not the margin rule's "
                        f"{'(none)' if rule is None else f'{rule:g}'} for {metric}; say why in equivalence_reason")


def parse_claims(value: Any, path: str = "claims", margins: dict[str, float] | None = None) -> tuple[Claim, ...]:
    """A `claims:` block -> Claims; one-line SpecError naming the YAML path for anything wrong.
    With `margins` (the experiment's margin rule) every directional claim carries its metric's
    margin as its "no difference beyond m" margin (`_margin`)."""
    keys = claim_keys()
    out, seen = [], set()
    for where, entry in entries(path, value, keys, "a list of claims"):
        if entry.get("id") is None:
            raise missing(f"{where}.id")
        cid = validate(f"{where}.id", entry["id"], ID)
        if cid in seen:
            raise SpecError(f"{where}.id: repeated id {cid!r}")
        seen.add(cid)
        where = f"{path}[{cid}]"
        try:
            kind = CLAIM_KINDS.lookup(_text(entry, "kind", where))
        except ValueError as exc:
            raise SpecError(f"{where}.kind: {exc}") from None
        a_kind = f"{_article(kind.name)} {kind.name} claim"
        relation = validate(f"{where}.relation", _text(entry, "relation", where), StrOptions(kind.relations),
                            note=f"the relations of {a_kind}")
        fields = {}
        for f in kind.fields:
            given = entry.get(f.name)
            if not f.applies(relation):
                if given is not None:
                    raise SpecError(f"{where}.{f.name}: does not apply to {a_kind} with relation {relation}")
                fields[f.name] = None if f.default is REQUIRED else f.default
            elif given is None:
                if f.required(relation):
                    raise missing(f"{where}.{f.name}", f.hint)
                fields[f.name] = f.default
            else:
                fields[f.name] = validate(f"{where}.{f.name}", given, f.constraints)
        for key in entry:
            if key not in HEAD_KEYS + SCOPE_KEYS and key not in fields:
                raise SpecError(f"{where}.{key}: does not apply to {a_kind}")
        if any(f.name == "equivalence" for f in kind.fields):
            if kind.field("equivalence").applies(relation):
                _margin(entry, fields, where, margins)
            else:
                fields["equivalence"] = 0.0
        epsilons = entry.get("epsilons")
        quantifier = validate(f"{where}.quantifier", entry.get("quantifier", "all"), StrOptions(QUANTIFIERS),
                              note="how many panels must hold")
        out.append(Claim(id=cid, source=_text(entry, "source", where), quote=_text(entry, "quote", where),
                         kind=kind.name, relation=relation, note=_text(entry, "note", where, False) or "",
                         epsilons=None if epsilons is None else validate(f"{where}.epsilons", epsilons, EPSILONS),
                         datasets=validate(f"{where}.datasets", entry.get("datasets"), [LABELS, None]) or (),
                         models=validate(f"{where}.models", entry.get("models"), [LABELS, None]) or (),
                         quantifier=quantifier, uninformative=_uninformative(entry.get("uninformative"),
                                                                             f"{where}.uninformative"),
                         fields=tuple(fields.items())))
    return tuple(out)


__all__ = ["HEAD_KEYS", "QUANTIFIERS", "SCOPE_KEYS", "claim_keys", "parse_claims"]
