"""The privacy modules' argument checks (dpbench.privacy.checks): their wording, and that what each
allows is the validation vocabulary's constraint the spec and the audit setups share (`DELTA`)."""

from __future__ import annotations

import numpy as np
import pytest

from dpbench.core.validation import InvalidValue, validate
from dpbench.privacy import checks


@pytest.mark.parametrize("call, message", [
    (lambda: checks.positive("sigma", 0), "sigma must be a finite number > 0, got 0"),
    (lambda: checks.positive("sigma", float("inf")), "sigma must be a finite number > 0, got inf"),
    (lambda: checks.positive("sigma", "x"), "sigma must be a finite number > 0, got 'x'"),
    (lambda: checks.non_negative("b", -0.1), "b must be a finite number >= 0, got -0.1"),
    (lambda: checks.integer("n", 0), "n must be an integer >= 1, got 0"),
    (lambda: checks.integer("d", 2.5), "d must be an integer >= 1, got 2.5"),
    (lambda: checks.integer("trials", True, 4), "trials must be an integer >= 4, got True"),
    (lambda: checks.unit_interval("delta", 1.0), "delta must be in (0, 1), got 1.0"),
    (lambda: checks.unit_interval("delta", None), "delta must be a number in (0, 1), got None"),
    (lambda: checks.unit_interval("q", 0.0, include_one=True), "q must be in (0, 1], got 0.0"),
])
def test_one_wording_naming_the_argument(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


def test_values_come_back_converted():
    assert checks.positive("x", np.float64(2)) == 2.0 and type(checks.positive("x", 2)) is float
    assert checks.integer("n", 3.0) == 3 and type(checks.integer("n", np.int64(3))) is int
    assert checks.unit_interval("q", 1, include_one=True) == 1.0 and checks.non_negative("x", 0) == 0.0


def test_delta_is_one_constraint_for_the_maths_the_spec_and_the_audits():
    assert checks.DELTA.describe() == "a finite number in (0, 1)"
    for bad in (0, 1, 2.0, float("nan")):
        with pytest.raises(ValueError):
            checks.unit_interval("delta", bad)
        with pytest.raises(InvalidValue):
            validate("delta", bad, checks.DELTA)
    assert validate("delta", 1e-5, checks.DELTA) == checks.unit_interval("delta", 1e-5) == 1e-5
