"""dpbench.figures.static: the built-ins module registers every built-in figure kind."""

from __future__ import annotations

from dpbench.figures import FIGURES, static


def test_the_built_in_kinds_are_registered_by_their_modules():
    where = {name: FIGURES.lookup(name).draw.__module__ for name in
             ("metric_over_epsilon", "metric_over_n", "metric_over_d", "metric_over_iterations")}
    assert where == {"metric_over_epsilon": "dpbench.figures.epsilon", "metric_over_n": "dpbench.figures.sweeps",
                     "metric_over_d": "dpbench.figures.sweeps", "metric_over_iterations": "dpbench.figures.traces"}
    assert FIGURES.builtins == static.__name__
    assert FIGURES.lookup("metric_over_iterations").table == "traces"
    assert [p.name for p in FIGURES.lookup("metric_over_epsilon").params] == ["reference", "reference_curve",
                                                                                "baseline"]
