"""One registry type for every kind of component, and the one way a component declares its parameters.

Kinds (each a `Registry`, defined next to its entry type): algorithms (`dpbench.algorithms.REGISTRY`),
models (`dpbench.models.MODELS`), data sets (`dpbench.data.DATASETS`), canary recipes
(`dpbench.audit.canaries.CANARIES`) and figure kinds (`dpbench.figures.kinds.FIGURES`).

A component declares each parameter once, as an annotated keyword of the function that uses it:

    def fit(problem, privacy, rng, *,
            lr: Annotated[float, Param("step size", minimum=0, exclusive_minimum=True)] = 0.5):

`params_of(fit)` reads name, type (float, int, str, bool, tuple[str, ...], dict; `X | None` makes it
optional), default (the keyword's default) and the rest (help, range, choices, paper reference) from
that signature; a value no plain type describes (a mapping) gives its own `Param(constraint=...)`.
`Param.constraints()` states the declaration in the validation vocabulary (dpbench.core.validation),
whose one error and message form every check shares. The same `Param` objects then check a spec's
values, an audit's values and the CLI's, fill the defaults of figures and tables, and describe the
component in `dpbench list`: there is nothing left to keep consistent.

Built-in components register when their package is imported (`Registry(builtins=...)` imports it on
first use). Installed packages add components through the entry point group of the kind
(`dpbench.algorithms`, `dpbench.datasets`, ...); an entry point is loaded only when its name is
asked for (a spec or a command names it), never to list or validate something else. A file
plugin (`path/to/file.py:object` or `package.module:object`, `dpbench.run.plugins`) is likewise run only
when a spec or a command names it.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any, Callable, Generic, TypeVar

from dpbench.core.validation import (Boolean, Constraint, Integral, Interval, Mapping as MappingOf, Options, Real,
                                     Sequence, StrOptions, Text, validate as validate_value)

_KINDS = (bool, int, float, str)
#: what a parameter can be to the tools that set parameters by meaning (`Param.role`)
ROLES = ("clip_norm",)


@dataclass(frozen=True)
class Param:
    """One parameter of a component: what it means, its type, default and allowed values.

    Written as the metadata of an `Annotated` keyword (`params_of` fills name, kind, default and
    optional from the signature). `minimum` is inclusive unless `exclusive_minimum`; `paper` cites
    where the paper sets or defines it; `path` marks a file path (a spec resolves it relative to the
    YAML file's folder). `role` names what the parameter is to the tools that set it by meaning, not
    by the component's name (ROLES: "clip_norm", the per-example clipping norm an audit's canary
    recipe recommends).
    """

    doc: str
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: float | None = None
    choices: tuple | None = None
    paper: str = ""
    path: bool = False
    name: str = ""
    kind: type = float
    default: Any = None
    optional: bool = False  # None is an accepted value
    role: str = ""  # one of ROLES, or "" (no role)
    # a constraint of the validation vocabulary that replaces the one of `kind`: for a value no plain type
    # describes (a data set's `bounds`, a mapping of column -> [low, high]); its `convert` gives the checked value
    constraint: Constraint | None = None

    def __post_init__(self) -> None:
        if self.role and self.role not in ROLES:
            raise ValueError(f"unknown parameter role {self.role!r}; expected one of {', '.join(ROLES)}")

    def constraints(self) -> list:
        """The declaration in the validation vocabulary (dpbench.core.validation): the type with its
        range, then the choices, and None when null is allowed."""
        if self.constraint is not None:
            kind: Constraint = self.constraint
        elif self.kind is bool:
            kind = Boolean()
        elif self.kind in (int, float):
            kind = Interval(Integral if self.kind is int else Real, self.minimum, self.maximum,  # maximum: inclusive
                            closed="right" if self.exclusive_minimum else "both", whole_floats=True)
        elif self.kind is str:
            kind = Text(empty=True)
        elif self.kind is dict:
            kind = MappingOf()
        else:
            kind = Sequence(Text(empty=True), min_len=0, what="a list of strings")
        out: list = [kind]
        if self.choices is not None:
            out.append(StrOptions(self.choices) if all(isinstance(c, str) for c in self.choices) else
                       Options(self.choices))
        return out + ([None] if self.optional else [])

    def check(self, value: Any, path: str = "") -> Any:
        """The value converted to `kind` (an int, a float, a tuple of strings), or InvalidValue (a
        ValueError) `<path>: must be ..., got ...`; without a path the message starts at "must"."""
        kind, *rest = self.constraints()
        if value is None and self.optional:
            return None
        out = validate_value(path, value, kind)
        for constraint in rest:
            if constraint is not None:
                validate_value(path, out, constraint)
        return out

    def describe(self) -> str:
        """One line for `dpbench list` and the docs: type, default, range and meaning."""
        kind = ("mapping" if self.kind is dict else self.kind.__name__) + (" or null" if self.optional else "")
        bounds = []
        if self.minimum is not None:
            bounds.append(f"{'>' if self.exclusive_minimum else '>='} {self.minimum:g}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum:g}")
        if self.choices is not None:
            bounds.append("one of " + "|".join(map(str, self.choices)))
        where = f" [{self.paper}]" if self.paper else ""
        rng = f", {', '.join(bounds)}" if bounds else ""
        role = f", role {self.role}" if self.role else ""
        return f"{self.name} ({kind}, default {self.default!r}{rng}{role}): {self.doc}{where}"


def _kind(annotation: Any, where: str) -> tuple[type, bool]:
    """(base type, optional) of `float`, `int | None`, `tuple[str, ...]`, ..."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"{where}: a parameter has one type (optionally `| None`), got {annotation!r}")
        return _kind(args[0], where)[0], True
    if origin in (list, tuple):
        return tuple, False
    if origin is dict or annotation is dict:
        return dict, False
    if annotation in _KINDS:
        return annotation, False
    raise TypeError(f"{where}: parameter type must be bool, int, float, str, tuple[str, ...] or dict (with a "
                    f"Param constraint), got {annotation!r}")


def params_of(function: Callable, *, keyword_only: bool = True) -> tuple[Param, ...]:
    """The declared parameters of `function`: every keyword(-only) argument annotated with a `Param`.

    Each must have a default. A keyword without `Param` metadata raises TypeError at registration
    (a parameter the spec could not set or check). With keyword_only=False every parameter with a
    default counts (a model class's __init__ after n_features).
    """
    where = getattr(function, "__qualname__", repr(function))
    hints = typing.get_type_hints(function, include_extras=True)
    out = []
    for p in inspect.signature(function).parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if keyword_only and p.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        if not keyword_only and p.default is inspect.Parameter.empty:
            continue
        hint = hints.get(p.name)
        meta = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Param)]
        if not meta:
            raise TypeError(f"{where}: keyword {p.name!r} has no Param declaration "
                            f"(write `{p.name}: Annotated[type, Param(\"what it means\")] = default`)")
        if p.default is inspect.Parameter.empty:
            raise TypeError(f"{where}: parameter {p.name!r} has no default")
        kind, optional = _kind(typing.get_args(hint)[0], f"{where}.{p.name}")
        param = replace(meta[0], name=p.name, kind=kind, default=p.default, optional=optional or meta[0].optional)
        if p.default is not None:
            try:
                param.check(p.default)
            except ValueError as exc:
                raise TypeError(f"{where}: default of {p.name!r} {exc}") from None
        out.append(param)
    return tuple(out)


def validate(params: tuple[Param, ...], given: Mapping[str, Any], owner: str, *,
             fill: bool = True) -> dict:
    """`given` checked against `params`: coerced values, defaults filled in (fill=True).

    Raises ValueError "key: reason" naming the first unknown or bad key (the caller adds the path).
    """
    by_name = {p.name: p for p in params}
    for key in given:
        if key not in by_name:
            raise ValueError(f"{key}: unknown parameter of {owner}; allowed: "
                             f"{', '.join(by_name) or '(none)'}")
    out = {}
    for p in params:
        if p.name in given:
            out[p.name] = p.check(given[p.name], p.name)
        elif fill:
            out[p.name] = p.default
    return out


def resolve_paths(params: tuple[Param, ...], options: Mapping[str, Any], base: str | os.PathLike | None
                  ) -> dict[str, Any]:
    """`options` with every file-path value (a `Param` with path=True) that is relative joined to
    `base` (the folder of the YAML file that names it); other values as given. A spec keeps the
    path as written (it keys the cell and seeds the data split, so results do not depend on where
    the checkout is); whoever opens the file calls this first."""
    paths = {p.name for p in params if p.path}
    out = dict(options)
    for name in paths & set(out):
        value = out[name]
        if isinstance(value, str) and value and base and not os.path.isabs(os.path.expanduser(value)):
            out[name] = os.path.join(str(base), value)
    return out


class Declared:
    """What a component with declared parameters (`params`) answers: one parameter, the defaults,
    and a check of given values. Mixed into the entry types of the registries."""

    name: str
    params: tuple[Param, ...]

    def owner(self) -> str:
        """How `validate`'s messages name the component."""
        return self.name

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def validate(self, given: Mapping[str, Any], *, fill: bool = True) -> dict[str, Any]:
        """Checked values (ValueError "name: reason"); defaults filled in unless fill=False."""
        return validate(self.params, given, self.owner(), fill=fill)


class Named(typing.Protocol):
    name: str
    source: str


BUILT_IN = "built-in"
_SOURCE: list[str] = []  # the plugin reference being imported (dpbench.run.plugins), innermost last


@contextlib.contextmanager
def plugin_source(reference: str) -> Iterator[None]:
    """While a plugin module is imported, components it declares record `reference` as their source."""
    _SOURCE.append(reference)
    try:
        yield
    finally:
        _SOURCE.pop()


def current_source() -> str:
    """Where a component being declared comes from: the plugin reference being imported, else built-in."""
    return _SOURCE[-1] if _SOURCE else BUILT_IN


T = TypeVar("T", bound=Named)


class Registry(Mapping[str, T], Generic[T]):
    """Name -> component of one kind.

    `builtins`: the module whose import registers the built-in components (imported on first use);
    `group`: the entry point group through which installed packages add components (loaded by
    name, only when that name is looked up). Unknown names raise ValueError listing the valid ones.
    """

    def __init__(self, kind: str, *, builtins: str | None = None, group: str | None = None):
        self.kind = kind
        self.builtins = builtins
        self.group = group
        self._entries: dict[str, T] = {}
        self._loaded = builtins is None

    def _load_builtins(self) -> None:
        if not self._loaded:
            self._loaded = True  # before the import: its modules register into this registry
            importlib.import_module(self.builtins)

    def register(self, entry: T, *, replace: bool = False) -> T:
        """Add `entry` under its name. A name is taken once; only the same plugin may declare it
        again (its file imported anew), or replace=True overwrites on purpose."""
        if not isinstance(getattr(entry, "name", None), str) or not entry.name:
            raise ValueError(f"a {self.kind} needs a non-empty name")
        old = self._entries.get(entry.name)
        if old is not None and not (replace or getattr(old, "source", BUILT_IN) == getattr(entry, "source", BUILT_IN)
                                    != BUILT_IN):
            raise ValueError(f"{self.kind} {entry.name!r} registered twice (by {getattr(old, 'source', BUILT_IN)} and "
                             f"{getattr(entry, 'source', BUILT_IN)}); give the new one another name")
        self._entries[entry.name] = entry
        return entry

    @contextlib.contextmanager
    def substituted(self, entry: T) -> Iterator[T]:
        """`entry` in place of (or besides) the one of its name while the block runs (tests, benchmarks)."""
        self._load_builtins()
        old = self._entries.get(entry.name)
        self._entries[entry.name] = entry
        try:
            yield entry
        finally:
            if old is None:
                self._entries.pop(entry.name, None)
            else:
                self._entries[entry.name] = old

    def installed(self) -> dict[str, str]:
        """Entry points of this kind's group that are not loaded: name -> 'distribution: module:object'."""
        if self.group is None:
            return {}
        out = {}
        for ep in metadata.entry_points(group=self.group):
            if ep.name not in self._entries:
                dist = getattr(getattr(ep, "dist", None), "name", "?")
                out[ep.name] = f"{dist}: {ep.value}"
        return out

    def _from_entry_point(self, name: str) -> T | None:
        if self.group is None:
            return None
        for ep in metadata.entry_points(group=self.group, name=name):
            obj = ep.load()
            entry = getattr(obj, "dpbench_component", obj)
            if getattr(entry, "name", None) != name:
                raise ValueError(f"entry point {name!r} of group {self.group} loads a component named "
                                 f"{getattr(entry, 'name', None)!r}; the two names must agree")
            return self._entries.get(name) or self.register(entry)
        return None

    def __getitem__(self, name: str) -> T:
        self._load_builtins()
        if isinstance(name, str):
            if name in self._entries:
                return self._entries[name]
            entry = self._from_entry_point(name)
            if entry is not None:
                return entry
        raise KeyError(name)

    def lookup(self, name: str) -> T:
        """The component called `name`; ValueError listing the valid names if there is none."""
        try:
            return self[name]
        except KeyError:
            installed = self.installed()
            more = f"; installed plugins: {', '.join(sorted(installed))}" if installed else ""
            raise ValueError(f"unknown {self.kind} {name!r}; choose one of {', '.join(sorted(self._entries))}"
                             f"{more}") from None

    def __iter__(self) -> Iterator[str]:
        self._load_builtins()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self._load_builtins()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} entries)"


def import_submodules(package: str) -> None:
    """Import every module of `package` (how a built-in package registers all its components:
    adding a component is adding one file)."""
    import pkgutil

    module = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(module.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")


__all__ = ["BUILT_IN", "Declared", "Param", "Registry", "current_source", "import_submodules", "params_of", "plugin_source",
           "resolve_paths", "validate"]
