"""Data sets: `load(name)` -> `Dataset` (base.py); each data set is one declaration in the registry `DATASETS`.

Built-in data sets, each declared where it is loaded (every module of this package is imported
on first use, so a new data set is a new module with a decorated loader):

* UCI data (uci.py, one `uci_dataset(UciSpec(...))` each; preprocessing in preprocess.py,
  docs/methods/conventions.md, Preprocessing): `adult`, `bank`, `kddcup99`, `breast_cancer`, `iris`.
* Synthetic heavy-tailed data of paper 004 (synthetic.py; docs/methods/heavy-tailed.md, Synthetic
  data): `synthetic_linear`, `synthetic_logistic`.
* Credit Card Fraud of paper 003 (creditcard.py): `credit_card`, a user-supplied Kaggle file
  ($DPBENCH_DATA/creditcard/creditcard.csv, never downloaded), balanced 492 + 492 rows.
* A fixed finite population for excess population risk (population.py, paper 002):
  `synthetic_population`, whose test split is the whole pool.
* Your own table (tabular.py): `csv`, a .csv (or .parquet) file with a label column, through the
  same preprocessing as the UCI data.

A data set's options are its loader's annotated keyword arguments (base.py, `dataset`) plus the
options common to all (`COMMON_PARAMS`: n, test_fraction, val_fraction, declared in
`base.Common`); `DATASETS[name].validate(options)` checks a spec's `options:` mapping. Installed
packages add data sets through the entry point group `dpbench.datasets`. Importing this package
registers the built-ins and reads no data file.

Feature bounds (bounds.py): every preprocessed data set records in `provenance["feature_bounds"]`
whether its numeric columns were scaled with ranges declared public ("declared": Breast Cancer and
Iris from their UCI documentation, or any data set given the option `bounds`) or with ranges read
from the data ("data-dependent": the training split's min/max), or had no such step ("none":
generated data); `feature_bounds(name, options)` gives the same record without loading anything.
A data set's `revision` (base.py) keys its cells once its arrays change (Iris: 1).

A bad name or option raises ValueError (one line: the valid names, or "option: reason"); a
missing or corrupt raw file raises `dpbench.core.errors.DataError` (one line: data set, paths looked
at, how to get the data).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpbench.core.registry import import_submodules
from dpbench.data.base import COMMON_PARAMS, DATASETS, Common, Dataset, DatasetInfo, dataset

import_submodules(__name__)  # every module of this package declares its data sets: adding one is adding a file

from dpbench.data import creditcard, uci  # noqa: E402 - imported above; verify() and data_dir() use them


def option_names(name: str) -> set[str]:
    """Names of the data set's own options (the **options of `load`; the common ones excluded)."""
    return {p.name for p in DATASETS.lookup(name).own_params}


def data_dir(explicit: str | os.PathLike | None = None) -> pathlib.Path:
    """Data folder: `explicit`, else $DPBENCH_DATA, else ./data (UCI layout, see uci.py)."""
    return uci.data_dir(explicit)


def verify(data_dir: str | os.PathLike | None = None, *, include_absent_optional: bool = False) -> list[dict]:
    """Check every known raw UCI file against its SHA-256 and parse it; then the credit-card file.

    One dict per file: dataset, file, path, expected_sha256, actual_sha256 (None if absent),
    ok (bool), rows (parsed rows, None if absent/bad), error (None or a short reason).

    The user-supplied `creditcard/creditcard.csv` (creditcard.verify_record) has expected_sha256
    None (no known sum: it is parsed, not checked) and the extra key `required: False`. It is
    listed when present; when absent only with `include_absent_optional=True` (then
    actual_sha256=None, ok=False, error="absent (user-supplied)"), because a consumer that counts
    every record with actual_sha256=None as missing (the current `dpbench data verify`) would
    otherwise fail for an optional file.
    """
    records = uci.verify(data_dir)
    card = creditcard.verify_record(data_dir)
    if card["actual_sha256"] is not None or include_absent_optional:
        records.append(card)
    return records


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python number it holds (the Params check Python types)."""
    return value.item() if isinstance(value, np.generic) else value


def feature_bounds(name: str, options: Mapping[str, Any] | None = None, *, revision: int | None = None
                   ) -> dict | None:
    """The `provenance["feature_bounds"]` record (bounds.py: kind, source, columns) that loading data
    set `name` with `options` gives, from the registry alone (no file is read): for records stored
    before loads recorded it.

    `revision`: the data set revision the record was made at -- a stored cell's
    `dataset_revision`, 0 where its identity has none (Iris at 0 was scaled with the training
    split's min/max, at 1 with its published ranges); None: the current one (`DATASETS[name].revision`).
    None where the registry cannot tell: the `csv` data set (its numeric columns are the file's), a
    revision above the current one, a data set that declares no static answer. `options` are
    checked like `load`'s (ValueError "option: reason"); a file-path option may be an os.PathLike.
    """
    info = DATASETS.lookup(name)
    if info.feature_bounds is None:
        return None
    revision = info.revision if revision is None else int(revision)
    if not 0 <= revision <= info.revision:
        return None
    given = {k: os.fspath(v) if isinstance(v, os.PathLike) else _plain(v) for k, v in (options or {}).items()}
    return info.feature_bounds(info.validate(given), revision)


def load(
    name: str,
    *,
    seed: int = 0,
    n: int | None = None,
    test_fraction: float = 0.2,
    val_fraction: float = 0.2,
    data_dir: str | os.PathLike | None = None,
    **options: object,
) -> Dataset:
    """Load and preprocess a data set; same arguments -> bit-identical arrays in any process of one machine.

    `n`: UCI, credit_card and csv -- optional uniform subsample of the cleaned (credit_card:
    balanced) table drawn with `seed` before the split (KDDCup99 papers: 70,000);
    synthetic_linear/logistic -- number of generated rows (default 100,000);
    synthetic_population -- number of TRAINING rows drawn from the pool (default 1,000).
    `test_fraction`/`val_fraction` are fractions of all (used) rows; train is the rest
    (synthetic_population: val = round(val_fraction * n) extra rows, test_fraction ignored, test =
    the whole pool). `options` and the three above are checked by `DATASETS[name].validate`
    (ValueError "option: reason"); a file-path option may be an os.PathLike.
    """
    info = DATASETS.lookup(name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    paths = {p.name for p in info.params if p.path}
    given = {k: os.fspath(v) if k in paths and isinstance(v, os.PathLike) else _plain(v) for k, v in options.items()}
    checked = info.validate({**given, "n": _plain(n), "test_fraction": _plain(test_fraction),
                             "val_fraction": _plain(val_fraction)})
    common = Common(int(seed), data_dir, **{p.name: checked.pop(p.name) for p in COMMON_PARAMS})
    return info.load(common, **checked)


__all__ = [
    "COMMON_PARAMS",
    "Common",
    "DATASETS",
    "Dataset",
    "DatasetInfo",
    "data_dir",
    "dataset",
    "feature_bounds",
    "load",
    "option_names",
    "verify",
]
