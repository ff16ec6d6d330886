"""The Dataset contract shared by every loader and the registry every data set joins (docs/contributing.md,
Add a data set).

A data set is one declaration: a loader `load(common, *, <options>) -> Dataset` decorated with
`dataset(name, ...)`. Its keyword-only arguments, each `Annotated[type, Param(...)] = default`,
are its options (`dpbench.core.registry.params_of`); `common` (a `Common`) carries what every data set
gets: the repetition seed, the data folder and the options common to all data sets (n,
test_fraction, val_fraction), which are declared once, in `Common`, and merged into every
entry's `params`. `DatasetInfo.validate` then checks a whole spec `options:` mapping of the data
set, and `dpbench.data.load(name, ...)` validates before it calls the loader.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Callable

import numpy as np

from dpbench.core.registry import BUILT_IN, Declared, Param, Registry, current_source, params_of


@dataclass(frozen=True)
class Dataset:
    """Preprocessed train/validation/test arrays.

    Every row of every X satisfies ||x||_2 <= 1 (docs/methods/conventions.md, Preprocessing); y is in {-1, +1} for
    classification and real for regression. `provenance` records where the data came from
    (source, file SHA-256 sums, raw and cleaned row counts, preprocessing choices) and is
    written into the experiment manifest. `w_star` is the true parameter of synthetic data.
    """

    name: str
    task: str  # "classification" | "regression"
    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple[str, ...]
    provenance: dict = field(default_factory=dict)
    w_star: np.ndarray | None = None

    @property
    def n_train(self) -> int:
        return int(self.X_train.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X_train.shape[1])


@dataclass(frozen=True, kw_only=True)
class Common:
    """What every loader gets besides its own options.

    The keyword-only fields are the options common to all data sets, declared here once (their
    `Param`s are `COMMON_PARAMS`, merged into every `DatasetInfo.params`, so a spec sets them
    under `options:` like any other). `seed` (the repetition's data seed) and `data_dir` (the
    data folder: `--data`, else $DPBENCH_DATA, else ./data) are not options: the runner supplies them.
    """

    seed: int = field(default=0, kw_only=False)
    data_dir: str | os.PathLike | None = field(default=None, kw_only=False)
    n: Annotated[int | None, Param(
        "rows used, drawn with the seed before the split (null: all); synthetic: rows generated "
        "(default 100,000), synthetic_population: training rows (default 1,000)", minimum=1)] = None
    test_fraction: Annotated[float, Param(
        "fraction of the used rows in the test split, < 1 with val_fraction (synthetic_population: "
        "ignored, the test split is the pool)", minimum=0, maximum=1)] = 0.2
    val_fraction: Annotated[float, Param(
        "fraction of the used rows in the validation split, < 1 (synthetic_population: "
        "round(val_fraction * n) extra rows)", minimum=0, maximum=1)] = 0.2


#: The declarations of the options common to all data sets (the keyword-only fields of `Common`).
COMMON_PARAMS: tuple[Param, ...] = params_of(Common)

LoadFunction = Callable[..., Dataset]
CheckFunction = Callable[[dict], None]
BoundsFunction = Callable[[dict, int], "dict | None"]


def _check_common(options: Mapping[str, Any], population: bool) -> None:
    """Constraints of the common options that one `Param` cannot state (ValueError "key: reason")."""
    for key in ("test_fraction", "val_fraction"):
        if not options[key] < 1:
            raise ValueError(f"{key}: must be < 1, got {options[key]:g}")
    if not population and not options["test_fraction"] + options["val_fraction"] < 1:
        raise ValueError(f"test_fraction: test_fraction + val_fraction must be < 1, got "
                         f"{options['test_fraction']:g} + {options['val_fraction']:g}")


@dataclass(frozen=True)
class DatasetInfo(Declared):
    """A registered data set: what it is, where it comes from, its loader and its options.

    `params`: every option a spec may set under the data set's `options:` -- the loader's own
    (its annotated keyword-only arguments, `own_params`) followed by `COMMON_PARAMS`. `origin`:
    "uci", "synthetic" or "user-supplied"; `source`: where the declaration comes from (built-in,
    or the plugin reference it was loaded from, `dpbench.core.registry.current_source`). `check`: an
    optional function of the validated options raising ValueError "key: reason" for a
    constraint one `Param` cannot state (between options, or a strict upper bound).
    `revision`: the data set's revision, 0 at first; bump it when the arrays the data set returns
    for the same options change (a new preprocessing choice): a nonzero revision is part of every
    cell's and audit's identity (`dpbench.core.keys.Cell.dataset_revision`), so results computed
    from the old arrays are not reused, while the keys of a data set at revision 0 stay as they were.
    `feature_bounds`: a function of the validated options and a revision giving the
    `provenance["feature_bounds"]` record of a load at that revision without loading anything
    (`dpbench.data.feature_bounds`; bounds.py), or None where it cannot tell (then, or without
    the function, the answer is None).
    """

    name: str
    description: str
    citation: str  # paper(s) and UCI id
    task: str  # "classification" | "regression"
    origin: str  # "uci" | "synthetic" | "user-supplied"
    load: LoadFunction  # load(common: Common, **own options) -> Dataset
    params: tuple[Param, ...] = COMMON_PARAMS
    uci_id: int | None = None
    known_parameter: bool = False  # the true parameter w* is known (Dataset.w_star)
    population: bool = False  # the test split is the whole population (excess population risk is exact)
    check: CheckFunction | None = None
    source: str = BUILT_IN
    revision: int = 0  # bump when the arrays a data set returns change
    feature_bounds: BoundsFunction | None = None

    @property
    def own_params(self) -> tuple[Param, ...]:
        """The data set's own options (its loader's keywords), without the common ones."""
        common = {p.name for p in COMMON_PARAMS}
        return tuple(p for p in self.params if p.name not in common)

    def owner(self) -> str:
        return f"dataset {self.name!r}"

    def validate(self, given: Mapping[str, Any], *, fill: bool = True) -> dict:
        """A spec's `options:` of this data set checked (unknown key, type, range, then the common
        fraction rule and `check`): ValueError "key: reason". Returns the coerced values with every
        default filled in, or only the given keys (fill=False)."""
        checked = super().validate(given, fill=True)
        _check_common(checked, self.population)
        if self.check is not None:
            self.check(checked)
        return checked if fill else {k: checked[k] for k in given}


DATASETS: Registry[DatasetInfo] = Registry("dataset", builtins="dpbench.data", group="dpbench.datasets")


def declare(name: str, load: LoadFunction, *, params: tuple[Param, ...], description: str, citation: str,
            task: str, origin: str, uci_id: int | None = None, known_parameter: bool = False,
            population: bool = False, check: CheckFunction | None = None, revision: int = 0,
            feature_bounds: BoundsFunction | None = None, register: bool = True) -> DatasetInfo:
    """The DatasetInfo of data set `name` whose loader `load(common, **options)` takes the options
    `params` (the common ones are appended here), registered in DATASETS unless register=False.

    `dataset(...)` is this with `params_of(load)`; a family of data sets declared as data (the UCI
    specs, uci.py) calls it directly with its declared Params.
    """
    if task not in ("classification", "regression"):
        raise ValueError(f"dataset {name!r}: task must be classification or regression, got {task!r}")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise ValueError(f"dataset {name!r}: revision must be an integer >= 0, got {revision!r}")
    common = {p.name for p in COMMON_PARAMS} | {f.name for f in fields(Common)}
    clash = [p.name for p in params if p.name in common]
    if clash:
        raise TypeError(f"dataset {name!r}: option(s) {', '.join(clash)} are common to all data sets; "
                        f"read them from the Common argument instead")
    info = DatasetInfo(name=name, description=description, citation=citation, task=task, origin=origin, load=load,
                       params=(*params, *COMMON_PARAMS), uci_id=uci_id, known_parameter=known_parameter,
                       population=population, check=check, source=current_source(), revision=revision,
                       feature_bounds=feature_bounds)
    if register:
        DATASETS.register(info)
    return info


def dataset(name: str, *, description: str, citation: str, task: str, origin: str, uci_id: int | None = None,
            known_parameter: bool = False, population: bool = False, check: CheckFunction | None = None,
            revision: int = 0, feature_bounds: BoundsFunction | None = None,
            register: bool = True) -> Callable[[LoadFunction], LoadFunction]:
    """Declare `load(common: Common, *, <annotated options>) -> Dataset` as data set `name`.

    The options are the loader's keyword-only arguments, each `Annotated[type, Param(...)]` with
    its default (`dpbench.core.registry.params_of`); the common options (n, test_fraction,
    val_fraction) and the seed and data folder arrive in `common`. The loader gets
    `load.dpbench_component` (its DatasetInfo) and is registered unless register=False.
    `revision` (default 0; bump when the arrays a data set returns change) and `feature_bounds`
    (the static bounds record, bounds.py) are those of `DatasetInfo`.
    """
    def decorate(load: LoadFunction) -> LoadFunction:
        info = declare(name, load, params=params_of(load), description=description, citation=citation, task=task,
                       origin=origin, uci_id=uci_id, known_parameter=known_parameter, population=population,
                       check=check, revision=revision, feature_bounds=feature_bounds, register=register)
        load.dpbench_component = info  # type: ignore[attr-defined]
        return load

    return decorate


def option(name: str, kind: type, default: Any, doc: str, **declaration: Any) -> Param:
    """The Param of option `name` declared as data rather than as a loader keyword (the UCI specs):
    `Param(doc, **declaration)` with its name, type and default; the default must pass its own check."""
    param = Param(doc, name=name, kind=kind, default=default, **declaration)
    try:
        param.check(default)
    except ValueError as exc:
        raise TypeError(f"option {name!r}: default {exc}") from None
    return param


__all__ = ["COMMON_PARAMS", "Common", "DATASETS", "Dataset", "DatasetInfo", "dataset", "declare", "option"]
