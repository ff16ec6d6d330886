"""Argument checks shared by the pure-maths privacy modules: one-line ValueErrors, one wording.

Every function returns the value converted (float or int) or raises ValueError naming the
argument, the condition and the value given, e.g. "delta must be in (0, 1), got 2.0".
Booleans are rejected where a number is expected (True is not the integer 1 here).
"""

from __future__ import annotations

import math


def _number(name: str, value, condition: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be {condition}, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {condition}, got {value!r}") from None


def positive(name: str, value) -> float:
    """A finite number > 0."""
    out = _number(name, value, "a finite number > 0")
    if not (math.isfinite(out) and out > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return out


def non_negative(name: str, value) -> float:
    """A finite number >= 0."""
    out = _number(name, value, "a finite number >= 0")
    if not (math.isfinite(out) and out >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return out


def integer(name: str, value, minimum: int = 1) -> int:
    """An integer (an integral float is accepted) >= minimum."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    try:
        out = int(value)
        ok = out == value
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or out < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return out


def unit_interval(name: str, value, *, include_one: bool = False) -> float:
    """A number in (0, 1), or in (0, 1] with include_one (a sampling rate)."""
    interval = "(0, 1]" if include_one else "(0, 1)"
    out = _number(name, value, f"a number in {interval}")
    if not (0.0 < out < 1.0 or (include_one and out == 1.0)):
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return out
