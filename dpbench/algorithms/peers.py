"""Peers: other libraries' implementations as dpbench algorithms, so dpbench's own are compared
with the libraries people use, in the same grid, and those libraries are audited and verified too.

A peer's fit runs its library's mechanism (Opacus's `PrivacyEngine`, diffprivlib's
`LogisticRegression`, jax-privacy's DP-SGD), so dpbench does not call its guarantee valid: the run
is stored "declared by <library> <version>" (`declared_reason`; `dpbench.run.plugin_records.owned_claim`),
its ledger carries the library's own accountant's ε beside dpbench's recomputation from the same
DpEvent where one exists. The libraries are optional extras, imported only when a peer fits
(`require`): without one, a run that would fit a peer stops before any cell runs, in one line
naming the `pip install` that brings it (`dpbench.experiment.pipeline.require_libraries`); the spec
itself loads, so committed results are redrawn, tested and reported without the library.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from types import ModuleType

from dpbench.core.errors import DpbenchError

#: distribution -> (the module a peer imports, the command that installs it)
EXTRAS = {
    "opacus": ("opacus", "pip install torch==2.13.0 'dpbench[opacus]' (the CPU build of torch first; "
                         "`make install-peers` does both)"),
    "diffprivlib": ("diffprivlib", "pip install 'dpbench[diffprivlib]'"),
    "jax-privacy": ("jax_privacy", "pip install 'dpbench[jax-privacy]'"),
}


def require(library: str) -> ModuleType:
    """The module of peer library `library` (an EXTRAS key), or a DpbenchError naming the install: "not
    installed", or "installed but cannot be imported (<the ImportError>)" when the library is there but
    one of its own imports fails (diffprivlib 0.6.6 under scikit-learn >= 1.9 imports a name that
    scikit-learn removed)."""
    module, install = EXTRAS[library]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] != module:  # the library is there, one of its imports is not
            raise DpbenchError(f"{library} {version(library)} is installed but cannot be imported ({exc}): "
                               f"{install}") from None
        raise DpbenchError(f"{library} is not installed: the peer algorithms that run it need it: {install}") from None
    except ImportError as exc:  # installed, but incompatible with what it imports (e.g. a newer scikit-learn)
        raise DpbenchError(f"{library} {version(library)} is installed but cannot be imported ({exc}): "
                           f"{install}") from None


def available(library: str) -> bool:
    """Whether `library` can be imported (without importing it)."""
    return importlib.util.find_spec(EXTRAS[library][0]) is not None


def version(library: str) -> str:
    """The installed version of `library`, or "not installed"."""
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def declared_reason(library: str) -> str:
    """Why a peer's run is "declared", not "valid": the library runs the mechanism."""
    return (f"declared by {library} {version(library)}: the library runs its own mechanism (not dpbench's), so "
            f"its epsilon is the library's word, recomputed by dpbench from the same event where one exists and "
            f"tested by `dpbench verify` and the audits")
