"""Old module names that still import: `import dpbench.ledger` gives `dpbench.core.ledger`.

Plugins and scripts may import dpbench's modules by their top-level names
(`from dpbench.ledger import Adjacency`). `install()` puts a finder on `sys.meta_path` that answers
exactly the names in `MOVED`, with a DeprecationWarning that names the new place. A module that
moved whole is the new module itself under the old name too (one module object, so `isinstance`
and monkeypatching see the same classes and globals); a module whose names are spread over several
modules (`SPREAD`) is a stand-in that finds each name where it went. Four old module names are
packages (`dpbench.audit`, `dpbench.spec`, `dpbench.report`, `dpbench.bench`): their `__init__`
forwards the old names with `forward`. Every other import is left to Python.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from typing import Callable

#: old module name -> its place in the layers
MOVED: dict[str, str] = {
    "dpbench.errors": "dpbench.core.errors",
    "dpbench.registry": "dpbench.core.registry",
    "dpbench.keys": "dpbench.core.keys",
    "dpbench.ledger": "dpbench.core.ledger",
    "dpbench.store": "dpbench.core.store",
    "dpbench.jit": "dpbench.core.jit",
    "dpbench.cells": "dpbench.run.cells",
    "dpbench.runner": "dpbench.run.runner",
    "dpbench.metrics": "dpbench.run.metrics",
    "dpbench.plugins": "dpbench.run.plugins",
    "dpbench.curves": "dpbench.analysis.curves",
    "dpbench.claims": "dpbench.analysis.claims",
    "dpbench.check": "dpbench.analysis.check",
    "dpbench.canaries": "dpbench.audit.canaries",
    "dpbench.audit_setup": "dpbench.audit.setup",
    "dpbench.audit_one_run": "dpbench.audit.one_run",
    "dpbench.audit_whitebox": "dpbench.audit.whitebox",
    "dpbench.catalog": "dpbench.spec.catalog",
    "dpbench.stored_tables": "dpbench.experiment.stored",
    "dpbench.report_figures": "dpbench.report.charts",
    "dpbench.bench_opacus": "dpbench.bench.opacus",
}


#: old module name -> the modules its public names are spread over, searched in this order
SPREAD: dict[str, tuple[str, ...]] = {
    "dpbench.plots": ("dpbench.figures.static", "dpbench.figures.style", "dpbench.figures.bands",
                      "dpbench.figures.frame", "dpbench.figures.references", "dpbench.figures.epsilon",
                      "dpbench.figures.sweeps", "dpbench.figures.traces", "dpbench.figures.audit"),
    "dpbench.pipeline": ("dpbench.experiment.pipeline", "dpbench.experiment.layout", "dpbench.experiment.inventory",
                         "dpbench.experiment.audits", "dpbench.experiment.verdicts", "dpbench.experiment.manifest",
                         "dpbench.experiment.render", "dpbench.experiment.stored", "dpbench.experiment.variants"),
}
#: an old module name that is a package -> the modules that hold its old names
PACKAGES: dict[str, tuple[str, ...]] = {
    "dpbench.audit": ("dpbench.audit.multi_run", "dpbench.audit.trials", "dpbench.audit.setup",
                      "dpbench.audit.canaries"),
    "dpbench.spec": ("dpbench.spec.experiment",),
    "dpbench.report": ("dpbench.report.site",),
    "dpbench.bench": ("dpbench.bench.suites",),
}


def _find(name: str, places: tuple[str, ...]) -> tuple[str, object]:
    for place in places:
        module = importlib.import_module(place)
        if name in vars(module):
            return place, vars(module)[name]
    raise AttributeError(name)


def forward(package: str) -> Callable[[str], object]:
    """A module `__getattr__` for `package` that finds a name of its old module (PACKAGES) where it
    went, with a DeprecationWarning naming the new place."""
    places = PACKAGES[package]

    def __getattr__(name: str) -> object:
        if importlib.util.find_spec(f"{package}.{name}") is not None:  # a submodule: let the import system load it
            raise AttributeError(name)
        try:
            place, value = _find(name, places)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        warnings.warn(f"{package}.{name} moved to {place}.{name}; import it from there", DeprecationWarning,
                      stacklevel=2)
        return value

    return __getattr__


def _spread_module(old: str, places: tuple[str, ...]) -> types.ModuleType:
    module = types.ModuleType(old, f"Stand-in for {old}: its names live in {', '.join(places)}.")

    def __getattr__(name: str) -> object:
        try:
            return _find(name, places)[1]
        except AttributeError:
            raise AttributeError(f"module {old!r} has no attribute {name!r} (its names went to "
                                 f"{', '.join(places)})") from None

    module.__getattr__ = __getattr__
    return module


class _Spread(importlib.abc.Loader):
    def __init__(self, places: tuple[str, ...]):
        self.places = places

    def create_module(self, spec):
        return _spread_module(spec.name, self.places)

    def exec_module(self, module) -> None:
        """Nothing to run: names are found when asked for."""


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        """Nothing to run (the target module is executed); the import machinery set the module's
        __spec__ to the alias's, so give it back its own."""
        module.__spec__ = self.own_spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path=None, target=None):
        if fullname in SPREAD:
            places = SPREAD[fullname]
            warnings.warn(f"{fullname} moved: its names are in {', '.join(places)}", DeprecationWarning, stacklevel=3)
            return importlib.util.spec_from_loader(fullname, _Spread(places))
        new = MOVED.get(fullname)
        if new is None:
            return None
        warnings.warn(f"{fullname} moved to {new}; import it from there", DeprecationWarning, stacklevel=3)
        return importlib.util.spec_from_loader(fullname, _Alias(new))


_FINDER = _MovedFinder()


def install() -> None:
    """Put the finder on sys.meta_path (once per process)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
