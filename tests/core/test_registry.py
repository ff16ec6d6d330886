"""The one registry type, parameters declared once, and the typed ledger."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import pytest

from dpbench.core import registry
from dpbench.core.ledger import Adjacency, Ledger
from dpbench.core.registry import BUILT_IN, Param, Registry, params_of, validate


def _fit(problem, privacy, rng, *,
         lr: Annotated[float, Param("step size", minimum=0, exclusive_minimum=True)] = 0.5,
         steps: Annotated[int, Param("steps", minimum=1, maximum=10)] = 3,
         radius: Annotated[float | None, Param("projection radius")] = None,
         mode: Annotated[str, Param("mode", choices=("a", "b"), paper="eq. (2)")] = "a",
         columns: Annotated[tuple[str, ...], Param("columns")] = ()):
    return lr, steps, radius, mode, columns


def test_params_come_from_the_signature():
    params = {p.name: p for p in params_of(_fit)}
    assert list(params) == ["lr", "steps", "radius", "mode", "columns"]
    assert (params["lr"].kind, params["lr"].default, params["lr"].optional) == (float, 0.5, False)
    assert (params["steps"].kind, params["steps"].maximum) == (int, 10)
    assert params["radius"].optional and params["radius"].default is None
    assert params["mode"].choices == ("a", "b") and "[eq. (2)]" in params["mode"].describe()
    assert params["columns"].kind is tuple


def test_checks_and_validate():
    params = params_of(_fit)
    assert validate(params, {"lr": 1, "columns": ["x", "y"]}, "f") == \
        {"lr": 1.0, "steps": 3, "radius": None, "mode": "a", "columns": ("x", "y")}
    assert validate(params, {"steps": 2}, "f", fill=False) == {"steps": 2}
    for given, message in [({"lr": 0}, "lr: must be > 0"), ({"steps": 1.5}, "steps: must be an integer"),
                           ({"steps": 11}, "steps: must be <= 10"), ({"mode": "c"}, "mode: must be one of a, b"),
                           ({"lr": None}, "lr: must be set"), ({"columns": "x"}, "columns: must be a list"),
                           ({"nope": 1}, "nope: unknown parameter of f; allowed: lr, steps, radius, mode, columns")]:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            validate(params, given, "f")


def test_an_undeclared_keyword_or_a_bad_default_is_refused_at_declaration():
    def plain(problem, privacy, rng, *, lr: float = 0.5):
        return lr

    with pytest.raises(TypeError, match="keyword 'lr' has no Param declaration"):
        params_of(plain)

    def bad_default(problem, privacy, rng, *, lr: Annotated[float, Param("lr", minimum=1)] = 0.5):
        return lr

    with pytest.raises(TypeError, match="default of 'lr' must be >= 1"):
        params_of(bad_default)


@dataclass(frozen=True)
class _Thing:
    name: str
    source: str = BUILT_IN


def test_registry_names_and_sources():
    things: Registry[_Thing] = Registry("thing")
    things.register(_Thing("a"))
    assert "a" in things and list(things) == ["a"] and things.lookup("a").name == "a"
    with pytest.raises(ValueError, match="unknown thing 'b'; choose one of a"):
        things.lookup("b")
    with pytest.raises(ValueError, match="registered twice"):
        things.register(_Thing("a"))
    with pytest.raises(ValueError, match="registered twice"):  # a plugin cannot take a built-in's name
        things.register(_Thing("a", source="/x/plugin.py:fit"))
    things.register(_Thing("p", source="/x/plugin.py:fit"))
    things.register(_Thing("p", source="/x/plugin.py:fit"))  # the same plugin imported anew
    with pytest.raises(ValueError, match="registered twice"):
        things.register(_Thing("p", source="/y/other.py:fit"))


def test_entry_points_load_only_when_named(monkeypatch):
    loaded = []

    class EntryPoint:
        def __init__(self, name):
            self.name, self.value, self.dist = name, f"pkg.mod:{name}", None

        def load(self):
            loaded.append(self.name)
            return _Thing(self.name, source=f"entry point {self.name}")

    def entry_points(group, name=None):
        assert group == "dpbench.things"
        return [EntryPoint(n) for n in ("x", "y") if name in (None, n)]

    monkeypatch.setattr(registry.metadata, "entry_points", entry_points)
    things: Registry[_Thing] = Registry("thing", group="dpbench.things")
    assert sorted(things.installed()) == ["x", "y"] and list(things) == [] and loaded == []
    with pytest.raises(ValueError, match="installed plugins: x, y"):
        things.lookup("z")
    assert things.lookup("y").source == "entry point y" and loaded == ["y"]
    assert list(things) == ["y"] and sorted(things.installed()) == ["x"]


def test_builtin_components_declare_their_parameters_once():
    from dpbench import algorithms, models
    from dpbench.audit import canaries
    from dpbench.figures import kinds as figures

    assert {"dpsgd", "pidp_sgd", "input_perturbation", "nonprivate"} <= set(algorithms.REGISTRY)
    import inspect

    for info in algorithms.REGISTRY.values():  # a fit takes its declared keywords and nothing undeclared
        kinds = {p.kind for p in inspect.signature(info.fit).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{info.name}: **kwargs would take undeclared values"
        assert all(p.doc.strip() for p in info.params), f"{info.name}: a parameter without a meaning"
    assert models.MODELS["mlp"].options == {"hidden": None, "activation": "tanh", "l2": 1e-4}
    assert set(canaries.CANARIES) == {"spare_feature", "gradient_canary", "input_per_example", "pidp_constant",
                                     "input_shared_intercept"}
    assert set(figures.FIGURES) == {"metric_over_epsilon", "metric_over_n", "metric_over_d", "metric_over_iterations"}
    assert [p.name for p in figures.FIGURES["metric_over_n"].params] == ["reference", "reference_curve"]
    assert [p.name for p in figures.FIGURES["metric_over_epsilon"].params] == ["reference", "reference_curve",
                                                                                "baseline"]


def test_resolve_paths_joins_only_relative_file_paths(tmp_path):
    params = (Param("file", path=True, name="path", kind=str, default=""), Param("n", name="n", kind=int, default=1))
    out = registry.resolve_paths(params, {"path": "data.csv", "n": 2}, str(tmp_path))
    assert out == {"path": str(tmp_path / "data.csv"), "n": 2}
    assert registry.resolve_paths(params, {"path": "/abs/data.csv"}, str(tmp_path)) == {"path": "/abs/data.csv"}


# ---- the typed ledger ---------------------------------------------------------------------------
def test_ledger_round_trip_and_mapping_reads():
    ledger = Ledger(private=True, mechanism="Gaussian", claim="valid", target_epsilon=1.0, delta=1e-5,
                    epsilon_spent={"rdp": 0.99}, adjacency="replace-one", spent_adjacency=Adjacency.ADD_REMOVE,
                    sensitivity=2.0, details={"steps": 10, "sampling": {"kind": "poisson", "rate": 0.1}})
    stored = ledger.as_dict()
    assert stored["adjacency"] == "replace-one" and stored["spent_adjacency"] == "add/remove-one"
    assert stored["steps"] == 10 and ledger["sensitivity"] == 2.0 and ledger.get("missing") is None
    assert Ledger.from_dict(stored) == ledger
    assert ledger.audited_adjacency is Adjacency.REPLACE_ONE
    none = ledger.with_claim("none", "not convex")
    assert none["claim"] == "none" and none.claim_reason == "not convex" and ledger.claim == "valid"


def test_ledger_reads_records_stored_before_it_was_typed():
    old = {"private": True, "mechanism": "PIDP-SGD", "claim": "paper-only", "target_epsilon": 1.0, "delta": 1e-5,
           "epsilon_spent": {"rdp": 7.0}, "adjacency": "paper: replace-one; epsilon_spent: add/remove-one",
           "noise_multiplier": 0.5}
    ledger = Ledger.from_dict(old)
    assert ledger.adjacency is Adjacency.REPLACE_ONE and ledger.spent_adjacency is Adjacency.ADD_REMOVE
    assert ledger.details == {"noise_multiplier": 0.5} and ledger.claim == "paper-only"
    assert Ledger.from_dict({"private": False, "mechanism": "none", "claim": "none"}).audited_adjacency \
        is Adjacency.ADD_REMOVE


def test_ledger_refuses_what_it_cannot_mean():
    with pytest.raises(ValueError, match="claim must be one of valid, declared, none, paper-only"):
        Ledger(private=True, mechanism="m", claim="probably")
    with pytest.raises(ValueError, match="unknown adjacency 'swap'"):
        Ledger(private=True, mechanism="m", claim="valid", adjacency="swap")
    with pytest.raises(ValueError, match="repeat named fields: claim"):
        Ledger(private=True, mechanism="m", claim="valid", details={"claim": "valid"})


def test_fits_return_typed_ledgers():
    from dpbench import algorithms, models

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    problem = algorithms.Problem(models.make("logreg", 3), X, np.sign(X[:, 0] + 0.1))
    fit = algorithms.get("dpsgd").fit(problem, algorithms.PrivacyTarget(1.0, 1e-5), rng, epochs=1, batch_size=10)
    assert isinstance(fit.privacy, Ledger) and fit.privacy.adjacency is Adjacency.ADD_REMOVE
    assert fit.privacy.claim == "valid" and max(fit.privacy.epsilon_spent.values()) <= 1.0 + 1e-9


# ---- one file per component, and module boundaries ----------------------------------------------
def test_a_figure_kind_and_a_canary_are_one_declaration_each(monkeypatch):
    """A figure kind declared in one place is accepted by a spec with its own option; a canary recipe
    declared in one place is accepted by an audit setup (nothing else lists them)."""
    from dpbench.audit import canaries
    from dpbench.audit.setup import AuditSetup, check_setup
    from dpbench.figures import kinds as figures
    from dpbench.spec import experiment as spec

    monkeypatch.setattr(figures.FIGURES, "_entries", dict(figures.FIGURES.items()))  # forgets the test's kind
    monkeypatch.setattr(canaries.CANARIES, "_entries", dict(canaries.CANARIES.items()))  # and recipe afterwards

    @figures.figure_kind("metric_table", description="a test kind")
    def metric_table(curves, metric, stem, title="", algorithm_order=None, *,
                     digits: Annotated[int, Param("digits shown", minimum=0)] = 3):
        return []

    @canaries.canary("test_recipe", description="a test recipe", needs_dataset=False, default_rows=10)
    def test_recipe(context):
        raise AssertionError("not built by validation")

    raw = {"datasets": ["iris"], "models": ["logreg"], "algorithms": ["nonprivate"], "metrics": ["accuracy"],
           "figures": [{"name": "t", "kind": "metric_table", "metric": "accuracy", "digits": 2}]}
    exp = spec.from_dict(raw)
    assert exp.figures[0].kind == "metric_table" and dict(exp.figures[0].options) == {"digits": 2}
    raw["figures"][0]["digits"] = -1
    with pytest.raises(spec.SpecError, match=r"figures\[0\]\.digits: must be >= 0"):
        spec.from_dict(raw)
    raw["figures"][0] = {"name": "t", "kind": "metric_over_epsilon", "metric": "accuracy", "digits": 2}
    with pytest.raises(spec.SpecError, match=r"figures\[0\]\.digits: unknown key"):
        spec.from_dict(raw)
    assert check_setup(AuditSetup(algorithm="nonprivate", canary="test_recipe", epsilon=None)).rows == 10


def test_spec_validation_imports_neither_audit_nor_cells():
    import subprocess
    import sys

    code = ("import sys, dpbench.spec.experiment as s; s.load('experiments/audit.yaml'); s.load('experiments/pidp.yaml'); "
            "print(sorted(m for m in ('dpbench.audit.multi_run', 'dpbench.run.cells', 'dpbench.run.runner') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_docs_components_is_the_declarations():
    from pathlib import Path

    # in a fresh process: the built-in declarations only, not plugins that other tests loaded into this one
    code = "from dpbench.spec import catalog; print('\\n'.join(catalog.lines(markdown=True)))"
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    path = Path(__file__).resolve().parents[2] / "docs" / "reference" / "components.md"
    assert path.read_text() == listed, \
        "docs/reference/components.md is out of date: regenerate it with `dpbench list --markdown > docs/reference/components.md`"
