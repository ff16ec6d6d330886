"""Plugins: your own algorithm (or data set) benchmarked next to the built-in ones, without a fork.

A plugin is ordinary Python that declares a component the way the built-ins do: an algorithm is a
`fit(problem, privacy, rng, *, <annotated hyperparameters>) -> Fit` decorated with
`@dpbench.algorithms.algorithm(...)` (examples/my_algorithm/my_method.py). Importing the plugin
registers the component; this module finds the plugin, imports it and hands the component back.

References (`resolve`), the one way a spec (`plugin:` on an algorithm entry or an audit entry), the
CLI (`dpbench list --plugin`, `dpbench audit --algorithm`) and the cells name a plugin:

* `path/to/file.py:object` -- a Python file (a target ending in `.py` or containing `/` is a file),
  relative to `base` (a spec: the folder of its YAML file) or else to the current folder, `~`
  expanded. Canonical form: `/absolute/path/to/file.py:object`.
* `package.module:object` -- an importable module (an installed package, or one on sys.path).
  Canonical form: as written.

`object` is a (dotted) attribute of the module: the decorated fit, or the component itself.

Trust rule: plugin code runs only when a spec or a command names it. Nothing scans folders, and
installed packages' entry points (groups `dpbench.algorithms`, `dpbench.datasets`, see
`dpbench.core.registry.Registry`) load only when their name is looked up, never to list or validate
something else. Running a spec that names a plugin runs that plugin's code with your rights, like
running any script you were given: read it first.

Provenance: while a plugin is imported, `dpbench.core.registry.plugin_source` is set, so each component
it declares records the canonical reference as its `source` (`dpbench list` shows it), and a
plugin cannot take a built-in's name (the registry refuses a second registration of a name unless it
comes from the same source). `fingerprint` is the SHA-256 of the plugin's source file: it is part
of each cell's identity, so editing the plugin reruns its cells and nothing else.

Loading is once per process per (file, content): `load` hashes the file each time it is called and
imports it anew when the content changed (its components then re-register under the same source,
which the registry allows; all components of one file record the reference it was first loaded
under). A file is imported under the module name `dpbench_plugin_<sha256(absolute path)[:12]>`
(`importlib.util.spec_from_file_location`), put into sys.modules (so dataclasses and pickling by
reference work in it), and executed from the very bytes that were hashed (no stale __pycache__,
none written beside the file); worker processes import it again from the reference each cell
carries. A module-form plugin is imported once per process with `importlib.import_module`.
Every failure is a one-line `PluginError` (a `DpbenchError`: the CLI prints it, exit 2) naming the
file, and the line when known; the original exception is its `__cause__`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
import threading
import traceback
import types
from pathlib import Path
from typing import Any

from dpbench.core import registry
from dpbench.core.errors import DpbenchError

_IDENTIFIERS = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_DIGEST_CHARS = 16  # hex characters of `fingerprint`
_USAGE = "write path/to/file.py:object or package.module:object"


class PluginError(DpbenchError):
    """A plugin reference is malformed, its file is missing, or importing it failed (one line)."""


# ---- references ------------------------------------------------------------------------------
def _split(reference: str) -> tuple[str, str]:
    """(target, object) of a reference, both non-empty and `object` a dotted identifier."""
    if not isinstance(reference, str):
        raise PluginError(f"a plugin reference must be a string, got {reference!r}; {_USAGE}")
    target, colon, obj = reference.strip().rpartition(":")
    if not colon:
        raise PluginError(f"{reference!r} is not a plugin reference (no ':object'); {_USAGE}")
    if not target or not obj:
        raise PluginError(f"{reference!r}: empty {'file or module' if not target else 'object'} part; {_USAGE}")
    if not _IDENTIFIERS.match(obj):
        raise PluginError(f"{reference!r}: {obj!r} is not a Python name (the object after ':'); {_USAGE}")
    return target, obj


def _is_file(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target or target.startswith(("~", "."))


def resolve(reference: str, base: str | os.PathLike | None = None) -> str:
    """The canonical form of a plugin reference, without importing anything.

    `path/to/file.py:object` -> `/abs/path/to/file.py:object` (relative to `base`, else the
    current folder; `~` expanded; symbolic links resolved, so one file has one canonical form);
    `package.module:object` -> unchanged once its syntax is checked. PluginError (one line) for a
    malformed reference or a file that does not exist (naming the path looked at).
    """
    target, obj = _split(reference)
    if not _is_file(target):
        if not _IDENTIFIERS.match(target):
            raise PluginError(f"{reference!r}: {target!r} is neither a .py file nor a dotted module name; {_USAGE}")
        return f"{target}:{obj}"
    if not target.endswith(".py"):
        raise PluginError(f"{reference!r}: a plugin file must be a .py file, got {target!r}; {_USAGE}")
    path = os.path.expanduser(target)
    if not os.path.isabs(path):
        path = os.path.join(os.path.expanduser(os.fspath(base)) if base else os.getcwd(), path)
    path = os.path.realpath(path)
    if not os.path.isfile(path):
        where = f" (relative to {base})" if base and not os.path.isabs(os.path.expanduser(target)) else ""
        raise PluginError(f"plugin file {path} not found{where}; check the path in {reference!r}")
    return f"{path}:{obj}"


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise PluginError(f"plugin file {path} cannot be read: {exc.strerror or exc}") from exc


def _digest(path: str) -> str:
    return hashlib.sha256(_read(path)).hexdigest()


def _module_file(module: str) -> str:
    """The source file of an importable module, found without importing it (its parent packages
    are imported, as Python must to find a submodule)."""
    try:
        spec = importlib.util.find_spec(module)
    except Exception as exc:  # a parent package is missing or fails to import
        raise PluginError(f"plugin module {module}: {_one_line(exc)}") from exc
    if spec is None:
        raise PluginError(f"plugin module {module} not found; is its package installed in this environment "
                          f"(pip install -e .), or its folder on PYTHONPATH?")
    origin = spec.origin
    if not origin or not os.path.isfile(origin):
        raise PluginError(f"plugin module {module} has no source file (origin {origin!r}); give a .py file instead")
    return origin


def fingerprint(reference: str, base: str | os.PathLike | None = None) -> str:
    """SHA-256 (first 16 hex characters) of the plugin's source file: the file of the file form,
    the module's own file of the module form (found with importlib.util.find_spec, the module
    itself not imported). Part of a cell's identity: editing the plugin reruns its cells. Only that
    one file counts; helpers it imports do not."""
    target, _ = _split(resolve(reference, base))
    path = target if _is_file(target) else _module_file(target)
    return _digest(path)[:_DIGEST_CHARS]


def provenance(reference: str, base: str | os.PathLike | None = None) -> dict:
    """Where a plugin's code comes from, as stored with every cell it fits and in the manifest: the
    reference (`resolve`d; a file under the current folder relative to it, so that the tables of a
    checkout do not name the folder it was cloned into), the SHA-256 of its source file (whole;
    `fingerprint` is its first characters) and, for the module form, the version of the installed
    distribution that provides the module (None for a file, or a module no distribution claims)."""
    canonical = resolve(reference, base)
    target, obj = _split(canonical)
    is_file = _is_file(target)
    shown = canonical
    if is_file:
        relative = os.path.relpath(target)
        shown = f"{relative}:{obj}" if not relative.startswith("..") else canonical
    version = None
    if not is_file:
        from importlib import metadata

        top = target.split(".")[0]
        for dist in metadata.packages_distributions().get(top, []):
            try:
                version = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return {"reference": shown, "sha256": _digest(target if is_file else _module_file(target)), "version": version}


# ---- loading ---------------------------------------------------------------------------------
class _Imported:
    """A plugin module as imported: its content digest and the source its components record."""

    def __init__(self, module: types.ModuleType, digest: str | None, source: str):
        self.module, self.digest, self.source = module, digest, source


_IMPORTED: dict[str, _Imported] = {}  # file path or module name -> what was imported
_LOCK = threading.RLock()  # the threading backend runs cells (and so load) in threads


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _where(exc: BaseException, path: str) -> str:
    """'path, line N' of the innermost frame of the plugin file (or of a SyntaxError in it)."""
    if isinstance(exc, SyntaxError) and exc.filename and os.path.realpath(exc.filename) == path:
        return f"{path}, line {exc.lineno}" if exc.lineno else path
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename and os.path.realpath(frame.filename) == path:
            line = frame.lineno
    return f"{path}, line {line}" if line else path


def _import_error(exc: BaseException, path: str) -> PluginError:
    if isinstance(exc, SyntaxError):
        what = f"{type(exc).__name__}: {exc.msg}"
    else:
        what = _one_line(exc)
    return PluginError(f"plugin {_where(exc, path)}: {what}")


def _load_builtins() -> None:
    """Register the built-in algorithms and data sets first, so that a plugin declaring one of
    their names is refused at its own import (naming its line), not when the built-ins load."""
    from dpbench.algorithms.base import REGISTRY

    len(REGISTRY)
    try:
        from dpbench.data import DATASETS
    except ImportError:  # pragma: no cover - the data package failing to import is reported by its users
        return
    if isinstance(DATASETS, registry.Registry):
        len(DATASETS)


def _import_file(path: str, canonical: str) -> _Imported:
    """Import the file's current bytes (compiled from the very bytes that were hashed: no stale
    __pycache__ after an edit within the same second, and none written into the user's folder)."""
    source_bytes = _read(path)
    digest = hashlib.sha256(source_bytes).hexdigest()
    known = _IMPORTED.get(path)
    if known is not None and known.digest == digest:
        return known
    source = known.source if known is not None else canonical  # one source per file, across edits
    name = "dpbench_plugin_" + hashlib.sha256(path.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        code = compile(source_bytes, path, "exec", dont_inherit=True)
        with registry.plugin_source(source):
            exec(code, module.__dict__)
    except BaseException as exc:  # SystemExit too: a plugin's import must not end the run
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _import_error(exc, path) from exc
    imported = _IMPORTED[path] = _Imported(module, digest, source)
    return imported


def _import_module(name: str, canonical: str) -> _Imported:
    known = _IMPORTED.get(name)
    if known is not None:
        return known
    already = name in sys.modules
    try:
        with registry.plugin_source(canonical):
            module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):  # the module itself is missing
            raise PluginError(f"plugin module {name} not found ({exc.name} is missing); is its package installed "
                              f"in this environment, or its folder on PYTHONPATH?") from exc
        raise _import_error(exc, _module_file_or_name(name)) from exc  # something it imports is missing
    except Exception as exc:
        raise _import_error(exc, _module_file_or_name(name)) from exc
    # a module imported before (outside the plugin machinery) declared its components as built-in
    imported = _IMPORTED[name] = _Imported(module, None, registry.BUILT_IN if already else canonical)
    return imported


def _module_file_or_name(name: str) -> str:
    try:
        return os.path.realpath(_module_file(name))
    except PluginError:
        return name


def _attribute(module: types.ModuleType, obj: str, where: str) -> Any:
    value: Any = module
    for part in obj.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            declared = sorted(k for k, v in vars(module).items()
                              if hasattr(v, "dpbench_component") and not k.startswith("_"))
            hint = f"; it declares {', '.join(declared)}" if declared else "; it declares no dpbench component"
            raise PluginError(f"plugin {where} has no object {obj!r}{hint}") from None
    return value


def _same_plugin(source: str, canonical: str) -> bool:
    """Whether a component's source is the plugin `canonical` names (the same file or module: all
    components of one file record the reference it was first imported under)."""
    return source == canonical or source.rpartition(":")[0] == canonical.rpartition(":")[0]


def _check_component(component: Any, obj: str, canonical: str, where: str) -> Any:
    name = getattr(component, "name", None)
    source = getattr(component, "source", None)
    if not isinstance(name, str) or not hasattr(component, "params") or not isinstance(source, str):
        kind = type(component).__name__
        raise PluginError(f"{obj} in {where} (a {kind}) is not a dpbench component; decorate it with "
                          f"@dpbench.algorithms.algorithm(...)")
    if not _same_plugin(source, canonical):
        raise PluginError(f"{obj} in {where} is the component {name!r} declared by {source}, not by this plugin; "
                          f"name it as {name!r} instead")
    from dpbench.algorithms.base import REGISTRY, AlgorithmInfo

    if isinstance(component, AlgorithmInfo) and REGISTRY.get(name) is not component:
        raise PluginError(f"{obj} in {where} declares the algorithm {name!r} but it is not registered "
                          f"(declared with register=False?); drop register=False")
    return component


def load(reference: str, base: str | os.PathLike | None = None) -> Any:
    """Import the plugin `reference` names (once per process and file content) and return its
    component: `obj.dpbench_component` when the object has one (a decorated fit: its
    AlgorithmInfo), else the object itself.

    The component must be registered by this plugin: it has `name`, `params` and `source` (the
    canonical reference, `resolve`); an algorithm must be in `dpbench.algorithms.REGISTRY`.
    PluginError (one line, naming the file and the line when known) for anything else: a
    malformed reference, a missing file or object, an error while importing (SyntaxError,
    ImportError, a name already taken, ...; kept as `__cause__`), an object that is not a component.
    """
    canonical = resolve(reference, base)
    target, obj = _split(canonical)
    with _LOCK:
        _load_builtins()
        if _is_file(target):
            imported, where = _import_file(target, canonical), target
        else:
            imported, where = _import_module(target, canonical), f"module {target}"
        value = _attribute(imported.module, obj, where)
        return _check_component(getattr(value, "dpbench_component", value), obj, canonical, where)


__all__ = ["PluginError", "fingerprint", "load", "resolve"]
