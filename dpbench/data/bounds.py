"""Feature bounds: the ranges numeric columns are min-max scaled with, where they come from, and the
`bounds` option by which a user declares them (docs/methods/conventions.md, Preprocessing).

A numeric column is scaled to [0, 1] with a range [low, high]. That range is either

* declared: public before any data is seen -- published in the data set's documentation
  (`uci.UciSpec.public_ranges` with its `bounds_source`) or declared by the user with the data set
  option `bounds` (a mapping column -> [low, high]; it overrides a data set's own ranges). A value
  outside a declared range is clipped to it, an operation on each record alone, so neighbouring data
  sets stay neighbours and no privacy budget is spent on the range; or
* data-dependent: the training split's min/max (or, for credit_card, the min/max of the rows used
  before the split), a step outside every mechanism that a run's privacy claim then has to name.

Every preprocessed `Dataset` records which in `provenance["feature_bounds"]` (`record`):

    {"kind": "declared" | "data-dependent" | "none",
     "source": where the declared ranges come from, or what the data-dependent scaling used,
     "columns": the numeric columns scaled with data-dependent ranges (empty unless data-dependent)}

"declared": every numeric column has a declared range; "none": no data-dependent scaling step (no
numeric column, or generated data whose rows are drawn and at most projected onto the unit ball:
synthetic.py, population.py); "data-dependent": otherwise. `dpbench.data.feature_bounds(name, options)`
gives the same record from the registry alone (no file read), for records stored before this one
existed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dpbench.core.validation import Constraint, InvalidValue

KINDS = ("declared", "data-dependent", "none")
DECLARED, DATA_DEPENDENT, NONE = KINDS
#: the source of ranges given with the data set option `bounds`
USER_SOURCE = "declared in the spec (bounds)"
#: what the recipe's data-dependent scaling uses (preprocess.build_classification)
TRAINING_SPLIT = "min/max of the training split"
#: the source of the record of generated data (synthetic.py, population.py)
GENERATED = "generated data: rows drawn from a known distribution; no scaling step reads the data"
NO_NUMERIC = "no numeric columns: nothing is min-max scaled"

BOUNDS_DOC = ("public [low, high] range per numeric column, declared by you rather than read from the data, e.g. "
              "{age: [17, 90]}: values are clipped to it and min-max scaled with it; overrides the data set's own "
              "range; a column without one keeps the data set's scaling (its declared range, else the data's min/max)")

Ranges = dict[str, tuple[float, float]]


class Bounds(Constraint):
    """The value of the `bounds` option: a mapping column -> [low, high] of finite numbers with
    low < high, or the same as a list of [column, [low, high]] pairs (how a spec stores it in a
    cell). Converted to a tuple of (column, (low, high)) pairs sorted by column (hashable, one
    canonical form); `as_ranges` turns it into a dict."""

    def describe(self) -> str:
        return "a mapping of column -> [low, high] (finite numbers, low < high), e.g. {age: [17, 90]}"

    def _items(self, value: Any) -> list | None:
        if isinstance(value, Mapping):
            return list(value.items())
        if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
            return [tuple(p) for p in value]
        return None

    def matches(self, value: Any) -> bool:
        return self._items(value) is not None

    def problem(self, value: Any) -> str | None:
        items = self._items(value)
        if items is None or not all(isinstance(k, str) and k for k, _ in items):
            return self.describe()
        if len({k for k, _ in items}) != len(items):
            return self.describe() + " with each column once"
        return None

    def convert(self, path: str, value: Any) -> Any:
        out = []
        for column, pair in self._items(value) or ():
            where = f"{path}.{column}" if path else column
            requirement = "a [low, high] pair of finite numbers with low < high"
            if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(_finite(v) for v in pair):
                raise InvalidValue(where, requirement, _plain(pair))
            low, high = float(pair[0]), float(pair[1])
            if not low < high:
                raise InvalidValue(where, requirement, _plain(pair))
            out.append((column, (low, high)))
        return tuple(sorted(out))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def as_ranges(bounds: Any) -> Ranges:
    """The `bounds` option (None, a mapping or its canonical pairs) as {column: (low, high)}."""
    if not bounds:
        return {}
    checked = Bounds().check("bounds", bounds)
    return dict(checked)


def check_columns(bounds: Any, *, numeric: Iterable[str], categorical: Iterable[str] = (),
                  other: Mapping[str, str] | None = None, what: str = "") -> None:
    """ValueError `bounds: ...` (one line) unless every column of `bounds` is one of `numeric`.

    `categorical`: columns that exist but are one-hot encoded; `other`: column -> why it takes no
    bounds (the label, a column left out); `what` names the data set in the message."""
    numeric, categorical, other = list(numeric), set(categorical), dict(other or {})
    for column in as_ranges(bounds):
        if column in numeric:
            continue
        if column in other:
            raise ValueError(f"bounds: column {column!r} {other[column]}; only numeric features take bounds")
        if column in categorical:
            raise ValueError(f"bounds: column {column!r} is categorical (one-hot encoded); only numeric columns "
                             f"take bounds")
        listing = ", ".join(numeric[:30]) + (", ..." if len(numeric) > 30 else "")
        raise ValueError(f"bounds: unknown column {column!r}{f' of {what}' if what else ''}; its numeric columns: "
                         f"{listing or 'none'}")


def record(kind: str, source: str, columns: Sequence[str] = ()) -> dict:
    """The `provenance["feature_bounds"]` record (module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"feature bounds kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return {"kind": kind, "source": source, "columns": list(columns)}


def generated(options: Mapping[str, Any] | None = None, revision: int = 0) -> dict:
    """The record of generated data (synthetic.py, population.py), whatever its options and revision: kind "none"."""
    return record(NONE, GENERATED)


def resolve(numeric: Sequence[str], *, own: Mapping[str, tuple[float, float]] | None = None, own_source: str = "",
            user: Mapping[str, tuple[float, float]] | None = None, data_source: str = TRAINING_SPLIT
            ) -> tuple[Ranges, dict]:
    """(declared range of each numeric column that has one, the feature-bounds record) for the
    numeric columns `numeric`, given a data set's own public ranges (`own`, from `own_source`) and
    the user's (`user`, the `bounds` option, which wins); the other columns are scaled with
    `data_source`. The loaders and the static answer (`dpbench.data.feature_bounds`) share it, so
    both say the same."""
    own, user = dict(own or {}), dict(user or {})
    own_source = own_source or "public ranges given by the data set's loader (no source named)"
    ranges = {c: tuple(map(float, user[c] if c in user else own[c])) for c in numeric if c in user or c in own}
    by_user = [c for c in numeric if c in user]
    by_own = [c for c in numeric if c not in user and c in own]
    if by_user and by_own:
        declared = f"{USER_SOURCE} for {', '.join(by_user)}; {own_source} for the others"
    else:
        declared = USER_SOURCE if by_user else own_source
    dependent = [c for c in numeric if c not in ranges]
    if not numeric:
        return ranges, record(NONE, NO_NUMERIC)
    if not dependent:
        return ranges, record(DECLARED, declared)
    if ranges:
        data_source = f"{data_source} (declared ranges for {', '.join(c for c in numeric if c in ranges)}: {declared})"
    return ranges, record(DATA_DEPENDENT, data_source, dependent)


def describe_scaling(bounds: Mapping[str, Any], data_clause: str) -> str:
    """The `provenance["scaling"]` sentence for a feature-bounds record; `data_clause` says how the
    data-dependent ranges are used (e.g. "val/test clipped to [0,1]")."""
    if bounds["kind"] == NONE:
        return f"none ({bounds['source']})"
    if bounds["kind"] == DECLARED:
        return (f"min-max to [0,1] with the declared public ranges ({bounds['source']}); a value outside its range "
                f"is clipped to it (per record: no data-dependent step)")
    clause = f", {data_clause}" if data_clause else ""
    return (f"min-max to [0,1]; {len(bounds['columns'])} column(s) with the {bounds['source']}{clause} (a "
            f"data-dependent, non-private step outside every mechanism)")


def shown_ranges(ranges: Mapping[str, tuple[float, float]]) -> dict[str, list[float]]:
    """Ranges as JSON-friendly lists (provenance)."""
    return {c: [float(lo), float(hi)] for c, (lo, hi) in ranges.items()}


__all__ = ["BOUNDS_DOC", "DATA_DEPENDENT", "DECLARED", "GENERATED", "KINDS", "NONE", "NO_NUMERIC", "TRAINING_SPLIT",
           "USER_SOURCE", "Bounds", "as_ranges", "check_columns", "describe_scaling", "generated", "record", "resolve",
           "shown_ranges"]
