"""Old module names that still import: `import dpbench.ledger` gives `dpbench.core.ledger`.

Plugins and scripts written when dpbench's modules sat side by side at the top of the package
import them by those names (`from dpbench.ledger import Adjacency`). `install()` puts a finder
on `sys.meta_path` that answers exactly the names in `MOVED`: it imports the module at its
layered place, registers it under the old name too (so both names are one module object, and
`isinstance` and monkeypatching see the same classes and globals), and warns once with a
DeprecationWarning that names the new place. Every other import is left to Python.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

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
    "dpbench.plots": "dpbench.figures.static",
    "dpbench.catalog": "dpbench.spec.catalog",
    "dpbench.pipeline": "dpbench.experiment.pipeline",
    "dpbench.stored_tables": "dpbench.experiment.stored",
    "dpbench.report_figures": "dpbench.report.charts",
    "dpbench.bench_opacus": "dpbench.bench.opacus",
}


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
