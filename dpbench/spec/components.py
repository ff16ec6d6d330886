"""The `datasets:` and `models:` entries of a spec: a name, or {name, options, label} (data sets
also `sweep` and `optional`), each checked against its registry's declarations; and the entry
conventions the algorithm and audit entries share (`entry`, `options`, `restriction`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dpbench.core.errors import SpecError
from dpbench.core.keys import digest
from dpbench.core.registry import resolve_paths
from dpbench.core.validation import Anything, Boolean, Mapping, Satisfies, Sequence, StrOptions, Text, missing, \
    unknown_key, validate

SWEEP_KEYS = ("n", "d")  # dataset options a `sweep:` may vary
COMPONENT_KEYS = ("name", "options", "label")
DATASET_KEYS = COMPONENT_KEYS + ("sweep", "optional")


@dataclass(frozen=True)
class Component:
    """A dataset or a model with its options and its label in tables and figures.

    `panel` groups the components one `sweep:` entry expands into (default: the label).
    """

    name: str
    options: tuple[tuple[str, Any], ...]
    label: str
    panel: str = ""
    optional: bool = False  # a user-supplied data file: skip (with a notice) when absent
    base: str = field(default="", compare=False)  # folder of the YAML: relative file paths in options start there
    files_digest: str | None = None  # content of the files its options name (the csv data set): part of the key


def entry(item: Any, path: str, allowed: tuple[str, ...]) -> dict:
    """A list entry as a mapping: a bare name is {name: ...}; keys outside `allowed` are refused,
    and `name` is required unless the entry names a `plugin` instead."""
    if isinstance(item, str):
        return {"name": item}
    validate(path, item, Mapping(f"a name or a mapping with {', '.join(allowed)}"))
    for key in item:
        if key not in allowed:
            raise unknown_key(path, key, allowed)
    if "name" in item or not ("plugin" in allowed and "plugin" in item):
        if item.get("name") is None:
            raise missing(f"{path}.name", "the registered name of the component")
        validate(f"{path}.name", item["name"], Text())
    return item


def options(value: Any, path: str) -> dict:
    """An `options:` or `params:` mapping ({} when absent)."""
    return validate(path, value, [Mapping("a mapping of option -> value"), None]) or {}


def declared(entry: Any, given: dict, path: str) -> None:
    """Check `given` against a registry entry's declared parameters (SpecError `path.options.key: ...`)."""
    try:
        entry.validate(given)
    except ValueError as exc:
        raise SpecError(f"{path}.options.{exc}") from None


def lookup(registry: Any, name: str, path: str) -> Any:
    """The registered component `name`, or SpecError `path.name: unknown ...; choose one of ...`."""
    try:
        return registry.lookup(name)
    except ValueError as exc:
        raise SpecError(f"{path}.name: {exc}") from None


def dataset_check(name: str, given: dict, path: str, base: str = "") -> str | None:
    """Check a data set entry; returns the digest of the files its options name (None: none, or
    a file that is absent: loading it will say so), so that an edited file reruns its cells."""
    from dpbench import data

    info = lookup(data.DATASETS, name, path)
    declared(info, given, path)
    named = {p.name for p in info.params if p.path}
    files = [Path(v) for k, v in sorted(resolve_paths(info.params, given, base).items()) if k in named and v]
    if not files or not all(f.is_file() for f in files):
        return None
    return digest([hashlib.sha256(f.read_bytes()).hexdigest() for f in files])


def path_keys(dataset: str) -> tuple[str, ...]:
    """The options of data set `dataset` that name files (declared `Param(..., path=True)`)."""
    from dpbench import data

    return tuple(sorted(p.name for p in data.DATASETS.lookup(dataset).params if p.path))


def dataset_revision(dataset: str) -> int:
    """The revision of data set `dataset` (`dpbench.data.DatasetInfo.revision`): in its cells' keys when nonzero."""
    from dpbench import data

    return data.DATASETS.lookup(dataset).revision


def model_check(name: str, given: dict, path: str, base: str = "") -> None:
    """Check a model entry against the model's declared options."""
    from dpbench import models

    declared(lookup(models.MODELS, name, path), given, path)


def sweep(value: Any, path: str) -> tuple[str, tuple] | None:
    """`sweep: {n: [..]}` -> ("n", values): one option varied over a list (SWEEP_KEYS)."""
    if value is None:
        return None
    validate(path, value, Satisfies(lambda v: len(v) == 1, "a mapping with one option and its list of values, "
                                    "e.g. {n: [250, 1000]}", kind=dict))
    (option, values), = value.items()
    if option not in SWEEP_KEYS:
        raise SpecError(f"{path}.{option}: only {', '.join(SWEEP_KEYS)} can be swept")
    return option, validate(f"{path}.{option}", values, Sequence(Anything(), min_len=2, unique=True,
                                                                 what="a list of at least two values, all distinct"))


def frozen(given: dict) -> tuple[tuple[str, Any], ...]:
    """Options as sorted (name, value) pairs, list values as tuples and mapping values (a data set's
    `bounds`) as sorted (key, value) pairs, recursively: hashable; a list gives the same JSON in a key."""
    return tuple(sorted((k, _hashable(v)) for k, v in given.items()))


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def components(value: Any, key: str, check: Callable[..., str | None], sweepable: bool = False,
               base: str = "") -> tuple[Component, ...]:
    """The `datasets:` or `models:` list -> Components, each checked by `check` (a sweep expanded
    into one component per value, in one panel); labels must be distinct."""
    validate(key, value, Sequence(Anything(), what="a non-empty list"))
    out: list[Component] = []
    allowed = DATASET_KEYS if sweepable else COMPONENT_KEYS
    for i, item in enumerate(value):
        path = f"{key}[{i}]"
        spec = entry(item, path, allowed)
        given = options(spec.get("options"), f"{path}.options")
        swept = sweep(spec.get("sweep"), f"{path}.sweep")
        optional = validate(f"{path}.optional", spec.get("optional", False), Boolean())
        if swept is not None and swept[0] in given:
            raise SpecError(f"{path}.sweep.{swept[0]}: also set in options; give it in one place")
        label = spec.get("label") or spec["name"] + (
            "" if not given else "[" + ",".join(f"{k}={v}" for k, v in sorted(given.items())) + "]")
        if swept is None:
            files = check(spec["name"], given, path, base)
            out.append(Component(spec["name"], frozen(given), str(label), str(label), optional, base, files))
            continue
        option, values = swept
        for j, v in enumerate(values):
            point = {**given, option: v}
            files = check(spec["name"], point, f"{path}.sweep.{option}[{j}]", base)
            out.append(Component(spec["name"], frozen(point), f"{label} {option}={v}", str(label), optional, base,
                                 files))
    labels = [c.label for c in out]
    if len(set(labels)) != len(labels):
        raise SpecError(f"{key}: two entries share the label {sorted(l for l in labels if labels.count(l) > 1)[0]!r}; "
                        f"give each a distinct label")
    return tuple(out)


def restriction(value: Any, path: str, among: tuple[Component, ...]) -> tuple[str, ...] | None:
    """A `models:` / `datasets:` / `algorithms:` restriction: labels (or sweep panels) of `among`."""
    if value is None:
        return None
    labels = list(dict.fromkeys([c.label for c in among] + [c.panel for c in among if c.panel]))
    if isinstance(value, str):
        value = [value]
    value = validate(path, value, Sequence(Anything(), what=f"a non-empty list of labels from {', '.join(labels)}"))
    for i, label in enumerate(value):
        validate(f"{path}[{i}]", label, StrOptions(labels), note="a label of this experiment")
    return tuple(value)


__all__ = ["COMPONENT_KEYS", "Component", "DATASET_KEYS", "SWEEP_KEYS", "components", "dataset_check",
           "dataset_revision", "declared",
           "entry", "frozen", "lookup", "model_check", "options", "restriction", "sweep"]
