"""The `algorithms:` entries of a spec: a registered algorithm or a plugin, its hyperparameters
checked against their declarations (a YAML list is a grid axis), restrictions to some models or
data sets, its own epsilons, and private selection (`tuning`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from dpbench.core.errors import DpbenchError, SpecError
from dpbench.core.validation import Anything, Sequence, Text, validate
from dpbench.spec.components import Component, entry, lookup, options, restriction
from dpbench.spec.sections import epsilons
from dpbench.spec.tuning import tuning

ALGORITHM_KEYS = ("name", "plugin", "params", "label", "models", "datasets", "tuning", "epsilons")
PLUGIN = Text(what="a reference such as my_method.py:fit or my_package.module:fit")


@dataclass(frozen=True)
class AlgorithmSpec:
    """An algorithm entry: its grid of hyperparameter combinations and where it runs."""

    name: str
    label: str
    grid: tuple[tuple[tuple[str, Any], ...], ...]  # every hyperparameter combination, defaults filled in
    private: bool
    models: tuple[str, ...] | None = None  # restrict to these model labels (None: all)
    datasets: tuple[str, ...] | None = None  # restrict to these dataset labels (None: all)
    tuning: tuple[tuple[str, Any], ...] | None = None  # private selection settings (spec.tuning), None: validation
    epsilons: tuple[float, ...] | None = None  # this entry's budgets (None: the experiment's `epsilons`)
    plugin: str | None = None  # where a plugin algorithm is loaded from (dpbench.run.plugins.resolve), None: built-in
    plugin_digest: str | None = None  # digest of the plugin's source (dpbench.run.plugins.fingerprint)

    def applies_to(self, dataset: Component, model: Component) -> bool:
        return (self.models is None or model.label in self.models) and \
            (self.datasets is None or dataset.label in self.datasets or dataset.panel in self.datasets)


def algorithm_of(spec: dict, path: str, base: str) -> tuple[Any, str | None, str | None]:
    """(AlgorithmInfo, plugin reference, plugin digest) of an algorithm entry: a registered `name`, or
    a `plugin:` reference (a file relative to the YAML's folder, or module:object) loaded now."""
    from dpbench import algorithms
    from dpbench.run import plugins

    reference = spec.get("plugin")
    if reference is None:
        return lookup(algorithms.REGISTRY, spec["name"], path), None, None
    validate(f"{path}.plugin", reference, PLUGIN)
    try:
        canonical = plugins.resolve(reference, base or None)
        info = plugins.load(canonical)
        fingerprint = plugins.fingerprint(canonical)
    except DpbenchError as exc:
        raise SpecError(f"{path}.plugin: {exc}") from None
    if not isinstance(info, algorithms.AlgorithmInfo):
        raise SpecError(f"{path}.plugin: {reference} declares a {type(info).__name__}, not an algorithm "
                        f"(decorate its fit with @dpbench.algorithms.algorithm(...))")
    if spec.get("name", info.name) != info.name:
        raise SpecError(f"{path}.name: the plugin declares the algorithm {info.name!r}; leave name out or write that")
    return info, canonical, fingerprint


def entry_epsilons(value: Any, path: str, private: bool) -> tuple[float, ...] | None:
    """An algorithm entry's own `epsilons` (None: the experiment's)."""
    if value is None:
        return None
    if not private:
        raise SpecError(f"{path}: a non-private algorithm runs once, without epsilon; remove `epsilons`")
    return epsilons(value, True, path)


def algorithms(value: Any, datasets: tuple[Component, ...] = (), models: tuple[Component, ...] = (),
               base: str = "") -> tuple[AlgorithmSpec, ...]:
    """The `algorithms:` list -> AlgorithmSpecs; a label repeats only where entries cover disjoint panels."""
    validate("algorithms", value, Sequence(Anything(), what="a non-empty list"))
    out: list[AlgorithmSpec] = []
    for i, item in enumerate(value):
        path = f"algorithms[{i}]"
        spec = entry(item, path, ALGORITHM_KEYS)
        info, plugin, plugin_digest = algorithm_of(spec, path, base)
        axes = param_axes(info, options(spec.get("params"), f"{path}.params"), f"{path}.params")
        grid = tuple(tuple(combo) for combo in itertools.product(*axes))
        out.append(AlgorithmSpec(name=info.name, label=str(spec.get("label") or info.name), grid=grid,
                                 private=info.private,
                                 models=restriction(spec.get("models"), f"{path}.models", models),
                                 datasets=restriction(spec.get("datasets"), f"{path}.datasets", datasets),
                                 tuning=tuning(spec.get("tuning"), f"{path}.tuning", info.private, len(grid)),
                                 epsilons=entry_epsilons(spec.get("epsilons"), f"{path}.epsilons", info.private),
                                 plugin=plugin, plugin_digest=plugin_digest))
    seen: dict[tuple[str, str, str], int] = {}
    for i, algo in enumerate(out):  # a label may repeat only where the entries cover disjoint panels
        for ds, model in itertools.product(datasets, models):
            if algo.applies_to(ds, model):
                key = (algo.label, ds.label, model.label)
                if key in seen:
                    raise SpecError(f"algorithms[{i}].label: {algo.label!r} is also the label of "
                                    f"algorithms[{seen[key]}] on {ds.label} x {model.label}; give each entry a "
                                    f"distinct label there")
                seen[key] = i
    return tuple(out)


def param_axes(info: Any, params: dict, path: str) -> list[list[tuple[str, Any]]]:
    """Per hyperparameter of the algorithm, its checked values (a YAML list is a grid axis), in the
    order the algorithm declares them; defaults filled in."""
    for key in params:
        if all(hp.name != key for hp in info.params):
            raise SpecError(f"{path}.{key}: unknown hyperparameter of {info.name}; allowed: "
                            f"{', '.join(hp.name for hp in info.params)}")
    axes: list[list[tuple[str, Any]]] = []
    for hp in info.params:
        raw = params.get(hp.name, hp.default)
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            raise SpecError(f"{path}.{hp.name}: empty list; give at least one value")
        axes.append([(hp.name, hp.check(v, f"{path}.{hp.name}" + (f"[{j}]" if isinstance(raw, list) else "")))
                     for j, v in enumerate(values)])
    return axes


__all__ = ["ALGORITHM_KEYS", "AlgorithmSpec", "algorithm_of", "algorithms", "entry_epsilons", "param_axes"]
