"""The one vocabulary for what a value a user writes may be, and the one error that refuses it.

A constraint says what a value may be: `Interval(Real, 0, None, closed="neither")` (a finite number
> 0), `Interval(Integral, 1, None)` (an integer >= 1), `Options(("panel", "point"))`, `StrOptions`,
`Boolean()`, `Text()`, `Sequence(item)` (a list of items, each checked), `Pair(item)` (a [low, high]
pair), `Mapping()`, `Satisfies(predicate, description)` (any other rule), `Anything()`, and None
(null is allowed).
The design follows scikit-learn's parameter validation (`sklearn.utils._param_validation`).

`validate(path, value, constraints)` returns the value converted to its canonical form (a float
for a real interval, an int for an integral one, a tuple for a list) when some constraint accepts
it, and otherwise raises `InvalidValue`, whose message always has one form:

    <path>: must be <requirement>, got <value>

(with the reason in parentheses after the requirement where the caller gives one). The requirement is the first one the value breaks: for a value of the right type the bound it
breaks (`epochs: must be <= 10000, got 100000`), for a value of no accepted type what each
constraint allows (`seeds: must be an integer >= 1 or a non-empty list ..., got 'three'`), and
`set` for a null where none is allowed. A list of choices is closed by a semicolon
(`must be one of drop, impute; got 'mean'`) so the value does not read as one more choice. A
constraint used alone checks with `constraint.check(name, value)` (a CLI option) and says what
it allows with `describe()` (help texts, docs).

Two structural mistakes have their own one-line forms: a key that is not allowed
(`unknown_key`: `<path>.<key>: unknown key; allowed: a, b`) and a required key that is absent
(`missing`: `<path>: missing; <what to give>`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from numbers import Integral, Real
from typing import Any

from dpbench.core.errors import SpecError


class InvalidValue(SpecError, ValueError):
    """A value is not allowed: `<path>: must be <requirement>, got <value>` (module docstring).

    A SpecError, so the CLI prints it as one line (exit 2), and a ValueError, so that Python
    callers of a component's parameter check catch what they expect. `path` may be empty (a
    check without a name: the message starts with "must be").
    """

    def __init__(self, path: str, requirement: str, value: Any, *, note: str = "", choices: bool = False):
        self.path, self.requirement, self.value, self.note, self.choices = path, requirement, value, note, choices
        reason = f" ({note})" if note else ""
        where = f"{path}: " if path else ""
        super().__init__(f"{where}must be {requirement}{reason}{';' if choices else ','} got {shown(value)}")

    def __reduce__(self) -> tuple:  # pickled whole: a worker process's error reaches the parent intact
        return _invalid_value, (self.path, self.requirement, self.value, self.note, self.choices)


def _invalid_value(path: str, requirement: str, value: Any, note: str, choices: bool) -> InvalidValue:
    return InvalidValue(path, requirement, value, note=note, choices=choices)


def shown(value: Any) -> str:
    """How an error message quotes a value: null for None (the YAML word), else its repr."""
    return "null" if value is None else repr(value)


def unknown_key(path: str, key: Any, allowed: Iterable[str]) -> SpecError:
    """The error for a key no schema allows: `<path>.<key>: unknown key; allowed: a, b`."""
    where = f"{path}.{key}" if path else str(key)
    return SpecError(f"{where}: unknown key; allowed: {', '.join(allowed)}")


def missing(path: str, hint: str = "") -> SpecError:
    """The error for a required key that is absent: `<path>: missing; <hint>`."""
    return SpecError(f"{path}: missing" + (f"; {hint}" if hint else ""))


class Constraint:
    """What a value may be. Subclasses say whether a value is of their type (`matches`), the first
    requirement it breaks (`problem`, None when accepted) and its canonical form (`convert`)."""

    #: the requirement is a list of choices (the message closes it with a semicolon)
    choices: bool = False

    def describe(self) -> str:
        """What the constraint allows, e.g. "a finite number > 0" (help texts and messages)."""
        raise NotImplementedError

    def matches(self, value: Any) -> bool:
        """The value is of this constraint's type (its message then names the broken requirement)."""
        raise NotImplementedError

    def problem(self, value: Any) -> str | None:
        """The first requirement the value breaks; None when it is accepted."""
        raise NotImplementedError

    def convert(self, path: str, value: Any) -> Any:
        """An accepted value in canonical form (containers check their items here, at `path[i]`)."""
        return value

    def check(self, name: str, value: Any) -> Any:
        """`validate(name, value, self)`: the converted value, or InvalidValue naming `name`."""
        return validate(name, value, self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()!r})"


class Anything(Constraint):
    """Any value (a list whose items another check judges later)."""

    def describe(self) -> str:
        return "any value"

    def matches(self, value: Any) -> bool:
        return True

    def problem(self, value: Any) -> str | None:
        return None


class IsNone(Constraint):
    """null (None) is allowed: what a None among `validate`'s constraints stands for."""

    def describe(self) -> str:
        return "null"

    def matches(self, value: Any) -> bool:
        return value is None

    def problem(self, value: Any) -> str | None:
        return None if value is None else "null"


def _number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


class Interval(Constraint):
    """A finite number of `kind` (numbers.Real or numbers.Integral) between `low` and `high`
    (None: unbounded); `closed` says which ends belong to it: "left", "right", "both", "neither".

    Booleans are not numbers here (YAML's true is not 1). `whole_floats` (Integral only) also
    accepts a float with no fractional part, as an int: YAML reads 1e4 as a float.
    """

    def __init__(self, kind: type, low: float | None = None, high: float | None = None, *, closed: str = "both",
                 whole_floats: bool = False):
        if kind not in (Real, Integral):
            raise TypeError(f"Interval kind must be numbers.Real or numbers.Integral, got {kind!r}")
        if closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"closed must be left, right, both or neither, got {closed!r}")
        if low is not None and high is not None and low > high:
            raise ValueError(f"Interval low {low} is above high {high}")
        self.kind, self.low, self.high, self.closed, self.whole_floats = kind, low, high, closed, whole_floats
        self.left_closed = closed in ("left", "both")
        self.right_closed = closed in ("right", "both")

    def lower(self) -> str:
        """The lower bound as a requirement, e.g. "> 0" ("" when unbounded)."""
        return "" if self.low is None else f"{'>=' if self.left_closed else '>'} {self.low:g}"

    def upper(self) -> str:
        """The upper bound as a requirement, e.g. "<= 1" ("" when unbounded)."""
        return "" if self.high is None else f"{'<=' if self.right_closed else '<'} {self.high:g}"

    def bounds(self) -> str:
        """Both bounds in one phrase: "in (0, 1]", "> 0", "<= 1", or "" when unbounded."""
        if self.low is not None and self.high is not None:
            return (f"in {'[' if self.left_closed else '('}{self.low:g}, {self.high:g}"
                    f"{']' if self.right_closed else ')'}")
        return self.lower() or self.upper()

    def describe(self) -> str:
        kind = "an integer" if self.kind is Integral else "a finite number"
        return f"{kind} {self.bounds()}".rstrip()

    def matches(self, value: Any) -> bool:
        return _number(value)

    def problem(self, value: Any) -> str | None:
        if not _number(value):
            return "a number" if self.kind is Real or self.whole_floats else "an integer"
        if self.kind is Integral and not isinstance(value, Integral):
            if not (self.whole_floats and math.isfinite(value) and float(value).is_integer()):
                return "an integer"
        if not math.isfinite(value):
            return "finite"
        if self.low is not None and not (value >= self.low if self.left_closed else value > self.low):
            return self.lower()
        if self.high is not None and not (value <= self.high if self.right_closed else value < self.high):
            return self.upper()
        return None

    def convert(self, path: str, value: Any) -> Any:
        return int(value) if self.kind is Integral else float(value)


class Options(Constraint):
    """One of the given values (compared with ==; booleans only match booleans)."""

    choices = True

    def __init__(self, values: Iterable[Any]):
        self.values = tuple(values)

    def describe(self) -> str:
        return "one of " + ", ".join(map(str, self.values))

    def _allowed(self, value: Any) -> bool:
        return any(value == v and isinstance(value, bool) == isinstance(v, bool) for v in self.values)

    def matches(self, value: Any) -> bool:
        return self._allowed(value) or any(type(value) is type(v) for v in self.values)

    def problem(self, value: Any) -> str | None:
        try:
            return None if self._allowed(value) else self.describe()
        except (TypeError, ValueError):  # an array compared with a string
            return self.describe()


class StrOptions(Options):
    """One of the given strings (names such as relations, schedules, metrics)."""

    def __init__(self, values: Iterable[str]):
        super().__init__(values)
        if not all(isinstance(v, str) for v in self.values):
            raise TypeError(f"StrOptions takes strings, got {self.values!r}")

    def matches(self, value: Any) -> bool:
        return isinstance(value, str)

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, str) and value in self.values else self.describe()


class Boolean(Constraint):
    """true or false (YAML's booleans; 0 and 1 are not)."""

    def describe(self) -> str:
        return "true or false"

    def matches(self, value: Any) -> bool:
        return isinstance(value, bool)

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, bool) else self.describe()


class Text(Constraint):
    """A string: non-empty (after stripping blanks) unless `empty`; matching `pattern` when
    given (`what` then says in words what it allows); returned stripped when `strip`."""

    def __init__(self, *, empty: bool = False, pattern: str | None = None, what: str = "", strip: bool = False):
        self.empty, self.strip, self.what = empty, strip, what
        self.pattern = re.compile(pattern) if pattern is not None else None

    def _kind(self) -> str:
        return "a string" if self.empty else "a non-empty string"

    def describe(self) -> str:
        return self.what or self._kind()

    def matches(self, value: Any) -> bool:
        return isinstance(value, str)

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, str) or not (self.empty or value.strip()):
            return self.describe()
        if self.pattern is not None and not self.pattern.fullmatch(value.strip() if self.strip else value):
            return self.describe()
        return None

    def convert(self, path: str, value: Any) -> Any:
        return value.strip() if self.strip else value


class TextOrNumber(Text):
    """A value written in a data file, as text: a string, or a number as YAML reads one (`positive: 1`),
    returned as its text ("1"; a bool is refused: `yes` in YAML is a bool, write "yes")."""

    def describe(self) -> str:
        return self.what or "a string or a number"

    def matches(self, value: Any) -> bool:
        return isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool))

    def problem(self, value: Any) -> str | None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return None if value == value else self.describe()  # NaN is no value of a file
        return super().problem(value)

    def convert(self, path: str, value: Any) -> Any:
        return value if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)


def _item_path(path: str, i: int) -> str:
    return f"{path}[{i}]"


class Sequence(Constraint):
    """A list (or tuple) of at least `min_len` items, each checked against `item` at `path[i]`,
    pairwise distinct when `unique`; returned as a tuple. `what` describes it in words, e.g.
    "a non-empty list of numbers > 0" (default: "a list" with its length and the item's description)."""

    def __init__(self, item: Constraint | None | Iterable[Constraint | None], *, min_len: int = 1,
                 unique: bool = False, what: str = ""):
        self.item, self.min_len, self.unique, self.what = item, min_len, unique, what

    def describe(self) -> str:
        if self.what:
            return self.what
        size = "a non-empty list" if self.min_len == 1 else \
            (f"a list of at least {self.min_len} items" if self.min_len else "a list")
        items = " or ".join(c.describe() for c in _constraints(self.item))
        return f"{size}{' of distinct items' if self.unique else ''}, each {items}"

    def matches(self, value: Any) -> bool:
        return isinstance(value, (list, tuple))

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, (list, tuple)) or len(value) < self.min_len:
            return self.describe()
        return None

    def convert(self, path: str, value: Any) -> Any:
        out = tuple(validate(_item_path(path, i), v, self.item) for i, v in enumerate(value))
        if self.unique and len(set(map(repr, out))) != len(out):
            raise InvalidValue(path, self.describe(), value)
        return out


class Pair(Sequence):
    """A [low, high] pair of items (each checked at `path[0]`, `path[1]`) with low <= high."""

    def __init__(self, item: Constraint, *, what: str = "a [low, high] pair with low <= high"):
        super().__init__(item, min_len=2, what=what)

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            return self.describe()
        return None

    def convert(self, path: str, value: Any) -> Any:
        low, high = super().convert(path, value)
        if low > high:
            raise InvalidValue(path, self.describe(), value)
        return low, high


class Mapping(Constraint):
    """A mapping (a YAML block of `key: value` lines); `what` describes it, e.g. "a mapping such as
    {restarts: 2}". Its keys are the caller's to check (`unknown_key`)."""

    def __init__(self, what: str = "a mapping"):
        self.what = what

    def describe(self) -> str:
        return self.what

    def matches(self, value: Any) -> bool:
        return isinstance(value, dict)

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, dict) else self.describe()


class Satisfies(Constraint):
    """Any other rule: `predicate(value)` is true (an exception it raises counts as false), for
    values of type `kind` (default: any); `description` says what it allows."""

    def __init__(self, predicate: Callable[[Any], bool], description: str, *, kind: type | tuple = object):
        self.predicate, self.description, self.kind = predicate, description, kind

    def describe(self) -> str:
        return self.description

    def matches(self, value: Any) -> bool:
        return isinstance(value, self.kind)

    def problem(self, value: Any) -> str | None:
        try:
            return None if self.matches(value) and self.predicate(value) else self.description
        except Exception:  # noqa: BLE001 - the rule refuses what it cannot judge
            return self.description


def _constraints(constraints: Constraint | None | Iterable[Constraint | None]) -> list[Constraint]:
    if constraints is None or isinstance(constraints, Constraint):
        constraints = [constraints]
    return [IsNone() if c is None else c for c in constraints]


#: a finite number > 0 (an epsilon, a noise multiplier, a step size)
POSITIVE = Interval(Real, 0, None, closed="neither")
#: a finite number >= 0
NON_NEGATIVE = Interval(Real, 0, None, closed="left")
#: the delta of (epsilon, delta)-DP: a probability in (0, 1) (at 1 the guarantee says nothing)
DELTA = Interval(Real, 0, 1, closed="neither")
#: a sampling rate: in (0, 1]
RATE = Interval(Real, 0, 1, closed="right")
#: a probability strictly between 0 and 1 that is not a delta (an audit's significance level alpha)
OPEN_UNIT = Interval(Real, 0, 1, closed="neither")


def validate(path: str, value: Any, constraints: Constraint | None | Iterable[Constraint | None], *,
             note: str = "") -> Any:
    """`value` converted by the first of `constraints` that accepts it (None among them: null is
    allowed); otherwise InvalidValue `<path>: must be <requirement> (<note>), got <value>`.

    The requirement is the one the value breaks of the only constraint of its type (or of the
    only constraint), else what every constraint but null allows, joined by "or" (module docstring).
    """
    options = _constraints(constraints)
    for constraint in options:
        if constraint.problem(value) is None:
            return constraint.convert(path, value)
    if value is None:
        raise InvalidValue(path, "set", value, note=note)
    real = [c for c in options if not isinstance(c, IsNone)]
    typed = [c for c in real if c.matches(value)]
    if len(typed) == 1 or len(real) == 1:
        one = (typed or real)[0]
        raise InvalidValue(path, one.problem(value), value, note=note, choices=one.choices)
    raise InvalidValue(path, " or ".join(c.describe() for c in real), value, note=note,
                       choices=any(c.choices for c in real))


def entries(path: str, value: Any, keys: tuple[str, ...], what: str) -> list[tuple[str, dict]]:
    """A list of mappings with these keys (None: none): each entry with its YAML path
    ("path[i]"), an unknown key of any entry an error naming its path; `what` describes the list,
    e.g. "a list of {datasets, models, reason}"."""
    items = validate(path, value, [Sequence(Mapping(f"a mapping with keys {', '.join(keys)}"), min_len=0, what=what),
                                   None]) or ()
    out = []
    for i, entry in enumerate(items):
        where = f"{path}[{i}]"
        for key in entry:
            if key not in keys:
                raise unknown_key(where, key, keys)
        out.append((where, entry))
    return out


__all__ = ["DELTA", "NON_NEGATIVE", "OPEN_UNIT", "POSITIVE", "RATE", "Anything", "Boolean", "Constraint", "Integral",
           "Interval", "InvalidValue", "IsNone", "Mapping", "Options", "Pair", "Real", "Satisfies", "Sequence",
           "StrOptions", "Text", "TextOrNumber", "entries", "missing", "shown", "unknown_key", "validate"]
