"""The validation vocabulary (dpbench.core.validation): each constraint accepts what it allows and
refuses the rest, with one error type and one message form `<path>: must be <requirement>, got <value>`."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest

from dpbench.core.errors import DpbenchError, SpecError
from dpbench.core.validation import (Anything, Boolean, Integral, Interval, InvalidValue, Mapping, Options, Pair, Real,
                                     Satisfies, Sequence, StrOptions, Text, missing, unknown_key, validate)

#: the one message form (the reason in parentheses is optional; a list of choices closes with ';')
FORM = re.compile(r"^(?P<path>[^:]+: )?must be (?P<requirement>.+?)(?: \((?P<note>.+)\))?[,;] got (?P<value>.+)$")


def _refused(value, constraints, path="x", **kwargs) -> InvalidValue:
    with pytest.raises(InvalidValue) as info:
        validate(path, value, constraints, **kwargs)
    message = str(info.value)
    assert FORM.match(message) and "\n" not in message, message
    return info.value


@pytest.mark.parametrize("constraint, value, expected", [
    (Interval(Real, 0, None, closed="neither"), 1, 1.0),
    (Interval(Real, 0, 1, closed="right"), 1, 1.0),
    (Interval(Real, 0, 1, closed="left"), 0, 0.0),
    (Interval(Real), np.float64(-3.5), -3.5),
    (Interval(Integral, 1, None, closed="left"), 3, 3),
    (Interval(Integral, 1, None, closed="left"), np.int64(3), 3),
    (Interval(Integral, 0, 10, whole_floats=True), 1e1, 10),
    (Options((1, "a")), 1, 1),
    (StrOptions(("panel", "point")), "point", "point"),
    (Boolean(), False, False),
    (Text(), "x", "x"),
    (Text(empty=True), "", ""),
    (Text(strip=True), "  x ", "x"),
    (Text(pattern=r"[a-z]+", what="lower-case letters"), "abc", "abc"),
    (Sequence(Interval(Real, 0, None, closed="neither")), [1, 2.5], (1.0, 2.5)),
    (Sequence(Anything(), min_len=0), [], ()),
    (Pair(Interval(Real)), [0, 1], (0.0, 1.0)),
    (Mapping(), {"a": 1}, {"a": 1}),
    (Satisfies(lambda v: v % 2 == 0, "an even integer", kind=int), 4, 4),
    (Anything(), object, object),
])
def test_each_constraint_accepts_what_it_allows_and_converts_it(constraint, value, expected):
    out = validate("x", value, constraint)
    assert out == expected and type(out) is type(expected)
    assert constraint.check("x", value) == expected


@pytest.mark.parametrize("constraint, value, message", [
    (Interval(Real, 0, None, closed="neither"), 0, "x: must be > 0, got 0"),
    (Interval(Real, 0, None, closed="left"), -1.5, "x: must be >= 0, got -1.5"),
    (Interval(Real, 0, 1, closed="neither"), 1, "x: must be < 1, got 1"),
    (Interval(Real, 0, 1, closed="both"), 2, "x: must be <= 1, got 2"),
    (Interval(Real), float("nan"), "x: must be finite, got nan"),
    (Interval(Real), float("inf"), "x: must be finite, got inf"),
    (Interval(Real), "1", "x: must be a number, got '1'"),
    (Interval(Real), True, "x: must be a number, got True"),
    (Interval(Integral, 1, None, closed="left"), 2.0, "x: must be an integer, got 2.0"),
    (Interval(Integral, 1, None, closed="left"), True, "x: must be an integer, got True"),
    (Interval(Integral, 1, None, closed="left"), 0, "x: must be >= 1, got 0"),
    (Interval(Integral, whole_floats=True), 2.5, "x: must be an integer, got 2.5"),
    (Interval(Integral, whole_floats=True), "many", "x: must be a number, got 'many'"),
    (Options((1, 2)), True, "x: must be one of 1, 2; got True"),
    (StrOptions(("drop", "impute")), "mean", "x: must be one of drop, impute; got 'mean'"),
    (Boolean(), 1, "x: must be true or false, got 1"),
    (Text(), "  ", "x: must be a non-empty string, got '  '"),
    (Text(empty=True), 3, "x: must be a string, got 3"),
    (Text(pattern=r"[a-z]+", what="lower-case letters"), "A b", "x: must be lower-case letters, got 'A b'"),
    (Sequence(Interval(Real), what="a non-empty list of numbers"), [], "x: must be a non-empty list of numbers, got []"),
    (Sequence(Interval(Real), what="a list of numbers"), "abc", "x: must be a list of numbers, got 'abc'"),
    (Sequence(Interval(Real, 0, None, closed="neither")), [1, -1], "x[1]: must be > 0, got -1"),
    (Sequence(Interval(Real), unique=True, what="a list of distinct numbers"), [1, 1.0],
     "x: must be a list of distinct numbers, got [1, 1.0]"),
    (Pair(Interval(Real)), [2, 1], "x: must be a [low, high] pair with low <= high, got [2, 1]"),
    (Pair(Interval(Real)), [1, "b"], "x[1]: must be a number, got 'b'"),
    (Pair(Interval(Real)), [1], "x: must be a [low, high] pair with low <= high, got [1]"),
    (Mapping("a mapping such as {n: 1}"), [1], "x: must be a mapping such as {n: 1}, got [1]"),
    (Satisfies(lambda v: v % 2 == 0, "an even integer", kind=int), 3, "x: must be an even integer, got 3"),
    (Satisfies(lambda v: 1 / 0, "a value the rule can judge"), 3, "x: must be a value the rule can judge, got 3"),
])
def test_each_constraint_refuses_the_rest_with_one_message_form(constraint, value, message):
    assert str(_refused(value, constraint)) == message


def test_null_is_refused_unless_allowed():
    assert str(_refused(None, Interval(Real))) == "x: must be set, got null"
    assert validate("x", None, [Interval(Real), None]) is None
    assert validate("x", 2, [Interval(Real), None]) == 2.0


def test_several_constraints_name_the_one_of_the_values_type_else_all_of_them():
    count = Interval(Integral, 1, None, closed="left")
    seeds = Sequence(Interval(Integral, 0, None, closed="left"), what="a list of integers >= 0")
    assert validate("seeds", [0, 3], [count, seeds]) == (0, 3) and validate("seeds", 3, [count, seeds]) == 3
    assert str(_refused(0, [count, seeds], "seeds")) == "seeds: must be >= 1, got 0"  # an int: the count's bound
    assert str(_refused([-1], [count, seeds], "seeds")) == "seeds[0]: must be >= 0, got -1"
    assert str(_refused("three", [count, seeds, None], "seeds")) == \
        "seeds: must be an integer >= 1 or a list of integers >= 0, got 'three'"  # no type matches: all but null
    both = _refused(3, [StrOptions(("a", "b")), Mapping("a mapping")], "s")
    assert str(both) == "s: must be one of a, b or a mapping; got 3"


def test_the_reason_comes_after_the_requirement_and_the_error_keeps_its_parts():
    error = _refused(1, Interval(Real, 1, 1000, closed="right"), "tuning.mean_runs", note="the expected number of runs")
    assert str(error) == "tuning.mean_runs: must be > 1 (the expected number of runs), got 1"
    assert (error.path, error.requirement, error.value, error.note) == ("tuning.mean_runs", "> 1", 1, "the expected "
                                                                                                     "number of runs")
    assert isinstance(error, SpecError) and isinstance(error, DpbenchError) and isinstance(error, ValueError)
    assert str(pickle.loads(pickle.dumps(error))) == str(error)  # a worker's error reaches the parent whole


def test_without_a_path_the_message_starts_at_must():
    with pytest.raises(InvalidValue, match=r"^must be >= 1, got 0$"):
        validate("", 0, Interval(Integral, 1, None, closed="left"))


def test_descriptions_for_help_texts_and_docs():
    assert Interval(Real, 0, None, closed="neither").describe() == "a finite number > 0"
    assert Interval(Real, 0, 1, closed="right").describe() == "a finite number in (0, 1]"
    assert Interval(Real, 0, 1, closed="left").bounds() == "in [0, 1)"
    assert Interval(Integral, 1, None, closed="left").describe() == "an integer >= 1"
    assert Interval(Integral).describe() == "an integer"
    assert StrOptions(("a", "b")).describe() == "one of a, b"
    assert Sequence(Interval(Real, 0, None, closed="neither"), unique=True).describe() == \
        "a non-empty list of distinct items, each a finite number > 0"


def test_a_constraint_is_declared_sensibly():
    with pytest.raises(TypeError):
        Interval(float, 0, 1)
    with pytest.raises(ValueError):
        Interval(Real, 0, 1, closed="open")
    with pytest.raises(ValueError):
        Interval(Real, 2, 1)
    with pytest.raises(TypeError):
        StrOptions((1, 2))


def test_structural_mistakes_have_their_own_one_line_forms():
    assert str(unknown_key("audits", "colour", ("dataset", "rows"))) == "audits.colour: unknown key; allowed: dataset, rows"
    assert str(unknown_key("", "epsilon", ("epsilons",))) == "epsilon: unknown key; allowed: epsilons"
    assert str(missing("claims[x].interval", "the [low, high] interval")) == \
        "claims[x].interval: missing; the [low, high] interval"
    assert str(missing("datasets")) == "datasets: missing"
    assert isinstance(missing("x"), SpecError)
