"""`csv`: your own table -- a .csv (or .parquet) file with a label column -- as a binary classification data set.

The table goes through the same preprocessing as the UCI data (preprocess.py;
docs/methods/conventions.md, Preprocessing): missing values dropped (or imputed from the training
split), constant columns dropped, optional `n` subsample, stratified split, numeric columns min-max
scaled with the training split's ranges, categorical columns one-hot encoded with every level, all
divided by sqrt(g + 1) with an intercept 1/sqrt(g + 1), so ||x||_2 <= 1 for every row and the labels
are +-1 by construction.

Options (each a `Param` of the loader below):

* `path` (required): the file. `.csv` (also compressed: .csv.gz, .csv.bz2, .csv.xz, .csv.zip,
  .csv.zst) is read by pandas with a header row; `.parquet` needs pyarrow (pandas.read_parquet),
  else a one-line DataError says to install it. In a spec a relative path is relative to the
  YAML file's folder (`dpbench.core.registry.resolve_paths`); given to `data.load` directly, to the
  current directory.
* `label`: the label column; `positive`: the label value mapped to +1, compared as text as it is
  written in the file (a whole number stored as float, 1.0, reads as "1"); every other value -> -1.
* `categorical`: columns one-hot encoded; `drop`: columns left out. Every other column must be
  numeric (booleans count as 0/1): a text column that is not listed is an error naming it.
* `missing`: "refuse" (default) refuses a file with a missing value anywhere (one line: how many
  rows of how many), so rows never vanish unsaid; "drop" drops every row with a missing value;
  "impute" fills a numeric gap with the training split's median and a categorical gap with its
  most frequent level (a row without a label is dropped, and counted, either way).
* `bounds`: a mapping column -> [low, high] that you declare public (bounds.py), e.g.
  `{age: [17, 90], income: [0, 200000]}`: each value is clipped to its column's range and the column
  is min-max scaled with it instead of the training split's min/max. A numeric column without one
  is scaled with the training split's min/max (a data-dependent step); with every numeric column
  bounded, `provenance["feature_bounds"]["kind"]` is "declared". A column that is the label, listed
  under `categorical` or `drop`, or absent from the file is refused (ValueError `bounds: ...`).

Missing values: empty cells and pandas' NA strings (NA, NaN, null, ...), and `?` (the UCI
convention); text values are stripped of blanks. Provenance records the file's absolute path
and SHA-256 in `files` (the shape of the UCI entries), the options and every preprocessing
choice. The parsed file and the cleaned table are cached per process, keyed by the resolved path,
size and mtime of the file (and the options).
"""

from __future__ import annotations

import functools
import pathlib
from typing import Annotated, Any

import numpy as np
import pandas as pd

from dpbench.core.errors import DataError
from dpbench.core.registry import Param
from dpbench.core.validation import TextOrNumber
from dpbench.data import bounds as bounds_mod, preprocess, uci
from dpbench.data.base import Common, Dataset, dataset
from dpbench.data.uci import _abs, _clean_categorical, _one_line, _stat_key  # one definition of the file helpers

NAME = "csv"
CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zip", ".csv.zst")
MISSING_STRINGS = ("?",)  # besides pandas' defaults ("", NA, NaN, null, ...)


def _check(options: dict) -> None:
    """Constraints between the options (ValueError "option: reason")."""
    if not options["path"]:
        raise ValueError("path: required: the .csv or .parquet file to read")
    if not options["label"]:
        raise ValueError("label: required: the label column")
    for key in ("categorical", "drop"):
        if options["label"] in options[key]:
            raise ValueError(f"{key}: lists the label column {options['label']!r}")
    both = sorted(set(options["categorical"]) & set(options["drop"]))
    if both:
        raise ValueError(f"drop: {', '.join(map(repr, both))} also listed under categorical; give each column once")
    other = {**{c: "is listed under `drop`" for c in options["drop"]}, options["label"]: "is the label column"}
    # the file's columns are unknown here: a column that is not refused below is looked for when it is read (load)
    named = [c for c in bounds_mod.as_ranges(options.get("bounds")) if c not in options["categorical"]]
    bounds_mod.check_columns(options.get("bounds"), numeric=[c for c in named if c not in other],
                             categorical=options["categorical"], other=other)


def _error(target: pathlib.Path, text: str) -> DataError:
    return DataError(f"dataset '{NAME}': {_abs(target)}: {text}")


def _file_format(target: pathlib.Path) -> str:
    name = target.name.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(CSV_SUFFIXES):
        return "csv"
    raise _error(target, "unknown file type; give a .csv (or .csv.gz, ...) or .parquet file")


@functools.lru_cache(maxsize=4)
def _read_cached(path: str, size: int, mtime_ns: int, file_format: str) -> pd.DataFrame:
    """The file as pandas reads it (cached per resolved path, size, mtime)."""
    if file_format == "parquet":
        frame = pd.read_parquet(path)
    else:
        frame = pd.read_csv(path, na_values=list(MISSING_STRINGS), skipinitialspace=True)
    frame.columns = [str(c) for c in frame.columns]
    return frame


def read_table(target: pathlib.Path) -> tuple[pd.DataFrame, str]:
    """(the raw table, "csv" | "parquet"); DataError (one line) if absent, of unknown type or unreadable."""
    if not target.is_file():
        raise DataError(f"dataset '{NAME}': file {_abs(target)} not found (option `path`)")
    file_format = _file_format(target)
    try:
        return _read_cached(*_stat_key(target), file_format), file_format
    except ImportError as exc:
        raise _error(target, "reading parquet needs pyarrow, which is not installed: pip install pyarrow, or save "
                             "the table as .csv") from exc
    except pd.errors.EmptyDataError as exc:
        raise _error(target, "no rows: the file is empty") from exc
    except Exception as exc:  # a parser error, bad encoding: one line
        raise _error(target, f"cannot parse ({type(exc).__name__}: {_one_line(exc)})") from exc


def _numeric(column: pd.Series, name: str, target: pathlib.Path) -> pd.Series:
    """A feature column as float64; DataError naming it if it holds text or infinities."""
    if pd.api.types.is_bool_dtype(column.dtype):
        return column.astype(np.float64)
    if not pd.api.types.is_numeric_dtype(column.dtype):
        as_numbers = pd.to_numeric(column, errors="coerce")
        bad = column[as_numbers.isna() & column.notna()]
        example = f" (e.g. {bad.iloc[0]!r})" if len(bad) else ""
        raise _error(target, f"column {name!r} is not numeric{example}; list it under `categorical` (one-hot "
                             f"encoded) or `drop`")
    values = column.astype(np.float64)
    if np.isinf(values.to_numpy()).any():
        raise _error(target, f"column {name!r} holds infinite values; clean them or list the column under `drop`")
    return values


def canonical(raw: pd.DataFrame, target: pathlib.Path, *, label: str, positive: str,
              categorical: tuple[str, ...], drop: tuple[str, ...]) -> tuple[pd.DataFrame, list[str], list[str]]:
    """(canonical frame, numeric columns, categorical columns): float64 numeric features, sorted
    categorical features and a categorical `label` column, as preprocess.clean_table takes them."""
    columns = list(raw.columns)
    if raw.empty:  # a header without rows (or an empty file): say so before any column's type
        raise _error(target, f"no rows{f' (only the header: {len(columns)} columns)' if columns else ''}; a data set "
                             "needs at least one row per split")
    listing = f"its columns: {', '.join(columns[:30])}{', ...' if len(columns) > 30 else ''}"
    if label not in raw.columns:
        raise _error(target, f"label column {label!r} not found; {listing} (set the option `label`)")
    for key, names in (("categorical", categorical), ("drop", drop)):
        absent = [c for c in names if c not in raw.columns]
        if absent:
            raise _error(target, f"column {absent[0]!r} listed under `{key}` not found; {listing}")
    features = [c for c in columns if c != label and c not in drop]
    numeric = [c for c in features if c not in categorical]
    cat = [c for c in features if c in categorical]
    out: dict[str, pd.Series] = {}
    for c in features:
        out[c] = _clean_categorical(raw[c]) if c in categorical else _numeric(raw[c], c, target)
    labels = _clean_categorical(raw[label])
    found = [str(v) for v in labels.cat.categories]
    if positive not in found:
        shown = ", ".join(found[:20]) + (", ..." if len(found) > 20 else "")
        raise _error(target, f"positive value {positive!r} does not occur in label column {label!r} (its values: "
                             f"{shown or 'none'}); set the option `positive`")
    out["label"] = labels
    frame = pd.DataFrame(out)
    frame.index = pd.RangeIndex(len(frame))
    return frame, numeric, cat


@functools.lru_cache(maxsize=8)
def _clean_cached(path: str, size: int, mtime_ns: int, file_format: str, label: str, positive: str,
                  categorical: tuple[str, ...], drop: tuple[str, ...], missing: str) -> preprocess.CleanTable:
    target = pathlib.Path(path)
    frame, numeric, cat = canonical(_read_cached(path, size, mtime_ns, file_format), target, label=label,
                                    positive=positive, categorical=categorical, drop=drop)
    return preprocess.clean_table(frame, numeric=numeric, categorical=cat, positive={positive},
                                  label_rule=f"{label} = {positive!r} -> +1, every other value -> -1",
                                  missing=missing)


def _feature_bounds(options: dict, revision: int = 0) -> dict | None:
    """The static feature-bounds record: None, since the numeric columns are the file's (unknown without it)."""
    return None


@dataset(NAME, description="your own table: a .csv or .parquet file with a label column (binary classification)",
         citation="user-supplied file", task="classification", origin="user-supplied", check=_check,
         feature_bounds=_feature_bounds)
def load(
    common: Common,
    *,
    path: Annotated[str, Param("the .csv or .parquet file (required); in a spec relative to the YAML file's folder",
                               path=True)] = "",
    label: Annotated[str, Param("the label column")] = "label",
    positive: Annotated[str, Param("the label value mapped to +1, as written in the file (e.g. 1, yes, >50K; a "
                                   "number is read as its text); every other value -> -1",
                                   constraint=TextOrNumber())] = "1",
    categorical: Annotated[tuple[str, ...], Param("columns one-hot encoded (every other column but the label and "
                                                  "`drop` must be numeric)")] = (),
    drop: Annotated[tuple[str, ...], Param("columns left out")] = (),
    missing: Annotated[str, Param("rows with a missing value: refuse the file (saying how many), drop them, or "
                                  "impute the training split's median (numeric) / most frequent level (categorical)",
                                  choices=("refuse", "drop", "impute"))] = "refuse",
    bounds: Annotated[dict | None, Param(bounds_mod.BOUNDS_DOC, constraint=bounds_mod.Bounds())] = None,
) -> Dataset:
    """Load the table at `path` (module docstring)."""
    options = {"path": path, "label": label, "positive": positive, "categorical": tuple(categorical),
               "drop": tuple(drop), "missing": missing, "bounds": bounds}
    _check(options)
    user_bounds = bounds_mod.as_ranges(bounds)
    preprocess.check_fractions(common.test_fraction, common.val_fraction)
    target = pathlib.Path(path).expanduser()
    _, file_format = read_table(target)
    clean = _clean_cached(*_stat_key(target), file_format, label, positive, tuple(categorical), tuple(drop),
                          "impute" if missing == "impute" else "drop")
    gaps = clean.rows_raw - clean.rows_clean
    if missing == "refuse" and gaps:
        raise _error(target, f"{gaps:,} of {clean.rows_raw:,} rows ({gaps / clean.rows_raw:.0%}) have a missing value; "
                             "say what to do with them: the option `missing: drop` (drop those rows) or "
                             "`missing: impute` (fill them from the training split)")
    absent = [c for c in user_bounds if c not in clean.numeric and c not in clean.dropped]
    if absent:
        columns = list(clean.numeric) + [c for c in clean.dropped if c not in categorical]
        raise ValueError(f"bounds: column {absent[0]!r} not found among the numeric columns of {_abs(target)}: "
                         f"{', '.join(columns[:30]) or 'none'}")
    if clean.rows_clean == 0:
        raise _error(target, "no rows left after dropping the rows with a missing value"
                     + ("; try the option `missing: impute`" if missing == "drop" else " in the label column"))
    prov: dict[str, Any] = {
        "source": "user-supplied file",
        "files": [{"path": _abs(target), "sha256": uci.sha256(target)}],
        "file_format": file_format,
        "citation": "user-supplied file",
        "options": {**options, "path": _abs(target), "categorical": list(categorical), "drop": list(drop),
                    "bounds": bounds_mod.shown_ranges(user_bounds) if user_bounds else None},
    }
    try:
        ds = preprocess.build_classification(NAME, clean, seed=common.seed, n=common.n,
                                             test_fraction=common.test_fraction, val_fraction=common.val_fraction,
                                             user_bounds=user_bounds, provenance=prov)
    except preprocess.DegenerateSplit as exc:  # too few rows or one class: the file's fault, said in one line
        raise _error(target, str(exc).removeprefix(f"dataset '{NAME}': ")) from None
    if missing == "impute":
        ds.provenance.setdefault("imputed_most_frequent", {})
    return ds


def clear_caches() -> None:
    """Forget the parsed files and cleaned tables."""
    _read_cached.cache_clear()
    _clean_cached.cache_clear()


__all__ = ["NAME", "canonical", "clear_caches", "load", "read_table"]
