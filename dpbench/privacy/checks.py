"""Argument checks shared by the pure-maths privacy modules: one-line ValueErrors, one wording.

Every function returns the value converted (float or int) or raises ValueError naming the
argument, the condition and the value given, e.g. "delta must be in (0, 1), got 2.0".
Booleans are rejected where a number is expected (True is not the integer 1 here). What each
allows is a constraint of the validation vocabulary, declared once in dpbench.core.validation
(where the spec, the audit setups and the CLI's options read it too): `DELTA` is the one statement
of what a delta may be.
"""

from __future__ import annotations

from typing import Any

from dpbench.core.validation import DELTA, NON_NEGATIVE, POSITIVE, RATE, Integral, Interval, Real


def _number(name: str, value: Any, condition: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be {condition}, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {condition}, got {value!r}") from None


def _within(name: str, value: Any, interval: Interval) -> float:
    """`value` as a float inside `interval`, else "name must be <its description>, got value"."""
    out = _number(name, value, interval.describe())
    if interval.problem(out) is not None:
        raise ValueError(f"{name} must be {interval.describe()}, got {value!r}")
    return out


def positive(name: str, value: Any) -> float:
    """A finite number > 0."""
    return _within(name, value, POSITIVE)


def non_negative(name: str, value: Any) -> float:
    """A finite number >= 0."""
    return _within(name, value, NON_NEGATIVE)


def integer(name: str, value: Any, minimum: int = 1) -> int:
    """An integer (an integral float is accepted) >= minimum."""
    interval = Interval(Integral, minimum, None, closed="left")
    if isinstance(value, bool):
        raise ValueError(f"{name} must be {interval.describe()}, got {value!r}")
    try:
        out = int(value)
        ok = out == value
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or interval.problem(out) is not None:
        raise ValueError(f"{name} must be {interval.describe()}, got {value!r}")
    return out


def unit_interval(name: str, value: Any, *, include_one: bool = False) -> float:
    """A number in (0, 1) (`DELTA`), or in (0, 1] with include_one (a sampling rate, `RATE`)."""
    interval = RATE if include_one else DELTA
    out = _number(name, value, f"a number {interval.bounds()}")
    if interval.problem(out) is not None:
        raise ValueError(f"{name} must be {interval.bounds()}, got {value!r}")
    return out


__all__ = ["DELTA", "NON_NEGATIVE", "POSITIVE", "RATE", "integer", "non_negative", "positive", "unit_interval"]
