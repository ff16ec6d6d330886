"""Credit Card Fraud (ULB / Kaggle `creditcard.csv`), as used by paper 003 §6: 984 rows.

Source: Dal Pozzolo, Caelen, Johnson & Bontempi, "Calibrating Probability with Undersampling for
Unbalanced Classification", IEEE SSCI 2015 (Machine Learning Group, ULB); distributed on Kaggle as
the data set `mlg-ulb/creditcardfraud` (https://www.kaggle.com/datasets/mlg-ulb/creditcardfraud,
licence ODbL). One file, `creditcard.csv`: 284,807 card transactions of September 2013, of which
492 are frauds; header `Time, V1, ..., V28, Amount, Class` (Kaggle quotes the header names and
the Class values); Time = seconds since the first transaction, V1..V28 = PCA components,
Amount = transaction amount, Class = 1 for fraud, 0 otherwise. No missing values.

Where the file comes from (choices):

* It is NOT on UCI and cannot be fetched by ucimlrepo, and Kaggle needs a login, so the loader
  never downloads anything: the user supplies the file. Default location
  `<data_dir()>/creditcard/creditcard.csv`, i.e. `$DPBENCH_DATA/creditcard/creditcard.csv`
  (`data_dir()` = the `data_dir` argument, else $DPBENCH_DATA, else ./data, as for the UCI data).
  Option `path` (default None) names the file explicitly instead (in a spec a relative path is
  relative to the YAML file's folder; given to `data.load` directly, to the current directory);
  then only that path is looked at.
* A missing file raises `DataError` with one line: the path looked at and how to get the file.
* SHA-256: the sum of the original Kaggle file is not known here, so the file is NOT checked
  against a known sum; its SHA-256 is computed and recorded in `provenance["files"]` (and
  `provenance["sha256_verified"] = False`) so a run can be traced to the exact file. Whether the
  file has the published counts (284,807 rows, 492 frauds) is recorded in
  `provenance["matches_published_counts"]` but not enforced (a variant of the file still loads).
* Parsing: the header must be exactly the 31 columns above (else `DataError`); every column is
  read as float64; Class must be 0 or 1. Rows with a missing value are dropped (preprocessing step 1; the
  original file has none; the number dropped is recorded).

Subsample (paper 003: "Credit Card Fraud ... 984" = all 492 frauds + 492 normal transactions):

* Option `balanced` (default True): keep every fraud and draw an equal number of normal rows
  uniformly without replacement with `np.random.default_rng(balance_seed)` (option
  `balance_seed`, default 0). The generator is FIXED and independent of the repetition seed, so
  the 984-row set is the same in every repetition and every process; the repetition `seed` only
  changes the train/validation/test split (and the optional `n` subsample). Rows keep their file
  order. `balanced: false` uses all (clean) rows (284,807, 0.17 % frauds).
* The common `n` parameter, if given, draws `n` of those rows uniformly with the repetition seed
  before the split (preprocess.py step 3).

Preprocessing (reusing preprocess.py; docs/methods/conventions.md, Preprocessing):

* Features: the 30 numeric columns Time, V1..V28, Amount (no categorical columns); a column
  constant over the used rows is dropped (preprocess.clean_table).
* Scaling: min-max to [0, 1] with the min/max of the USED ROWS BEFORE THE SPLIT -- the fixed
  984-row subsample (or all rows with `balanced: false`), not the training split. This is a
  small data-dependent, non-private step, like the training-split ranges of the other data sets
  (V1..V28 have no public range); it is recorded in `provenance["scaling"]` and
  `provenance["feature_bounds"]` (kind "data-dependent", bounds.py). Because the
  ranges come from the fixed row set, the features of a row do not depend on the repetition
  seed. Amount is heavy-tailed and is min-max scaled as the recipe says (no log transform).
  Option `bounds` (a mapping column -> [low, high], bounds.py) declares ranges for some columns
  instead: their values are clipped to them and scaled with them; with all 30 bounded the kind is
  "declared".
* Norm bound: preprocess.build_classification divides by sqrt(g + 1), g = 30 numeric columns,
  and appends the intercept 1/sqrt(g + 1), so ||x||_2 <= 1 (30 features + intercept = 31 columns
  when no column is constant).
* Labels: fraud (Class 1) = +1, normal (Class 0) = -1.
* Split: stratified by label with the common `test_fraction`/`val_fraction` (defaults 0.2/0.2:
  984 -> 590 train, 197 validation, 197 test), `np.random.default_rng(seed)`.

Caching: the parsed file and the balanced table are cached in-process (functools.lru_cache keyed
by the resolved path, size, mtime and the subsample options), so only the first load of a
process reads the 150 MB file.
"""

from __future__ import annotations

import functools
import os
import pathlib
from typing import Annotated

import numpy as np
import pandas as pd

from dpbench.core.errors import DataError
from dpbench.core.registry import Param
from dpbench.data import bounds as bounds_mod, preprocess, uci
from dpbench.data.base import Common, Dataset, dataset
from dpbench.data.uci import _abs, _one_line, _stat_key  # one definition of the file helpers

NAME = "credit_card"
FOLDER = "creditcard"
FILE = "creditcard.csv"
REL_PATH = f"{FOLDER}/{FILE}"
FEATURES: tuple[str, ...] = ("Time", *(f"V{i}" for i in range(1, 29)), "Amount")
COLUMNS: tuple[str, ...] = (*FEATURES, "Class")
#: Counts of the published file (recorded, not enforced).
ROWS_PUBLISHED = 284_807
FRAUDS_PUBLISHED = 492
KAGGLE = "mlg-ulb/creditcardfraud"
URL = "https://www.kaggle.com/datasets/mlg-ulb/creditcardfraud"
DESCRIPTION = "Credit Card Fraud (ULB/Kaggle creditcard.csv): fraud vs normal, balanced 492 + 492 = 984 rows"
CITATION = (
    "Dal Pozzolo et al. 2015 (ULB), Kaggle mlg-ulb/creditcardfraud, user-supplied file; "
    "paper 003 §6 (984 rows)"
)

def default_path(root: str | os.PathLike | None = None) -> pathlib.Path:
    """`<data_dir(root)>/creditcard/creditcard.csv` (data_dir: root, else $DPBENCH_DATA, else ./data)."""
    return uci.data_dir(root) / FOLDER / FILE


def how_to_get(explicit: bool = False) -> str:
    """One-line instructions for obtaining the file (it is never downloaded automatically)."""
    where = (
        "put it there, or correct the dataset option `path`"
        if explicit
        else f"put it there (i.e. $DPBENCH_DATA/{REL_PATH}), or give the dataset option `path`"
    )
    return (
        f"the file is user-supplied (not on UCI/ucimlrepo, never downloaded): download {FILE} from "
        f"Kaggle data set '{KAGGLE}' ({URL}; needs a Kaggle login) and {where}"
    )


def resolve_path(path: str | os.PathLike | None, root: str | os.PathLike | None) -> pathlib.Path:
    """The file to read: option `path` if given, else default_path(root)."""
    return pathlib.Path(path).expanduser() if path is not None else default_path(root)


def _missing(target: pathlib.Path, explicit: bool) -> DataError:
    return DataError(f"dataset '{NAME}' not found: looked at {_abs(target)}; {how_to_get(explicit)}")


# --------------------------------------------------------------------------- parsing


def _parse(path: str) -> tuple[pd.DataFrame, int, int]:
    """(canonical frame: FEATURES float64 + categorical `label` '0'/'1', rows in file, rows dropped)."""
    header = pd.read_csv(path, nrows=0).columns.tolist()
    if header != list(COLUMNS):
        raise ValueError(f"unexpected header {header[:4]}...{header[-2:]} (expected Time, V1..V28, Amount, Class)")
    df = pd.read_csv(path, header=0, dtype={c: "float64" for c in COLUMNS}, engine="c")
    rows_raw = len(df)
    keep = df.notna().all(axis=1).to_numpy()
    if not keep.all():
        df = df.loc[keep].reset_index(drop=True)
    cls = df["Class"].to_numpy()
    bad = ~np.isin(cls, (0.0, 1.0))
    if bad.any():
        raise ValueError(f"Class must be 0 or 1; found {sorted(set(cls[bad].tolist()))[:5]}")
    frame = df[list(FEATURES)].copy()
    frame["label"] = pd.Categorical.from_codes(cls.astype(np.int8), categories=["0", "1"])
    return frame, rows_raw, int((~keep).sum())


@functools.lru_cache(maxsize=2)
def _parse_cached(path: str, size: int, mtime_ns: int) -> tuple[pd.DataFrame, int, int]:
    return _parse(path)


def _read(target: pathlib.Path, explicit: bool) -> tuple[pd.DataFrame, int, int, tuple[str, int, int]]:
    if not target.is_file():
        raise _missing(target, explicit)
    key = _stat_key(target)
    try:
        frame, rows_raw, dropped = _parse_cached(*key)
    except Exception as exc:
        raise DataError(
            f"dataset '{NAME}': cannot parse {_abs(target)} ({_one_line(exc)}); expected the original "
            f"{FILE} of Kaggle data set '{KAGGLE}' ({URL})"
        ) from exc
    return frame, rows_raw, dropped, key


def balanced_rows(label: np.ndarray, balance_seed: int) -> np.ndarray:
    """Sorted positions of every fraud plus as many normal rows, drawn with default_rng(balance_seed)."""
    fraud = np.flatnonzero(label == 1)
    normal = np.flatnonzero(label == 0)
    if fraud.size == 0 or normal.size < fraud.size:
        raise ValueError(
            f"a balanced subsample needs at least as many normal rows as frauds (>= 1); "
            f"found {fraud.size} frauds and {normal.size} normal rows"
        )
    picked = np.random.default_rng(balance_seed).choice(normal, size=fraud.size, replace=False)
    return np.sort(np.concatenate([fraud, picked]))


@functools.lru_cache(maxsize=8)
def _clean_cached(
    path: str, size: int, mtime_ns: int, balanced: bool, balance_seed: int
) -> tuple[preprocess.CleanTable, dict[str, tuple[float, float]], int]:
    """(cleaned table of the used rows, their per-column min/max, number of frauds in the file)."""
    frame, _, _ = _parse_cached(path, size, mtime_ns)
    codes = frame["label"].cat.codes.to_numpy()
    n_fraud = int((codes == 1).sum())
    if balanced:
        sub = frame.iloc[balanced_rows(codes, balance_seed)].reset_index(drop=True)
    else:
        sub = frame
    table = preprocess.clean_table(
        sub,
        numeric=FEATURES,
        categorical=(),
        positive={"1"},
        label_rule="Class 1 (fraud) -> +1, Class 0 (normal) -> -1",
        missing="drop",
    )
    ranges = {c: (float(sub[c].min()), float(sub[c].max())) for c in table.numeric}
    return table, ranges, n_fraud


# --------------------------------------------------------------------------- entry points


#: what the data-dependent ranges are (provenance["feature_bounds"]["source"])
DATA_SOURCE = "min/max of the used rows before the split (the fixed balanced subsample, or all rows)"


def _check(options: dict) -> None:
    if options["path"] == "":
        raise ValueError("path: must be a file path or null (null: <data folder>/creditcard/creditcard.csv)")
    bounds_mod.check_columns(options.get("bounds"), numeric=FEATURES, other={"Class": "is the label column"},
                             what=NAME)


def feature_bounds(options: dict, revision: int = 0) -> dict:
    """The `provenance["feature_bounds"]` record of a load with these options, without the file (bounds.py;
    assumes no column is constant over the used rows, as in the published file)."""
    return bounds_mod.resolve(FEATURES, user=bounds_mod.as_ranges(options.get("bounds")), data_source=DATA_SOURCE)[1]


@dataset(NAME, description=DESCRIPTION, citation=CITATION, task="classification", origin="user-supplied",
         check=_check, feature_bounds=feature_bounds)
def load(
    common: Common,
    *,
    path: Annotated[str | None, Param(
        "the file to read instead of <data folder>/creditcard/creditcard.csv", path=True)] = None,
    balanced: Annotated[bool, Param(
        "keep every fraud and as many normal rows drawn with balance_seed (paper 003: 492 + 492 rows); "
        "false: all rows", paper="paper 003 §6 (984 rows)")] = True,
    balance_seed: Annotated[int, Param(
        "seed of the fixed draw of the normal rows (independent of the repetition seed)", minimum=0)] = 0,
    bounds: Annotated[dict | None, Param(bounds_mod.BOUNDS_DOC, constraint=bounds_mod.Bounds())] = None,
) -> Dataset:
    """Load `credit_card` (see the module docstring for every choice)."""
    _check({"path": path, "bounds": bounds})
    user_bounds = bounds_mod.as_ranges(bounds)
    opts = {"path": path, "balanced": balanced, "balance_seed": int(balance_seed)}
    seed, n, test_fraction, val_fraction = common.seed, common.n, common.test_fraction, common.val_fraction
    preprocess.check_fractions(test_fraction, val_fraction)
    target = resolve_path(path, common.data_dir)
    _, rows_raw, dropped, key = _read(target, path is not None)
    try:
        table, ranges, n_fraud = _clean_cached(*key, bool(balanced), int(balance_seed))
    except ValueError as exc:
        raise DataError(f"dataset '{NAME}': {_abs(target)}: {_one_line(exc)}") from exc
    digest = uci.sha256(target)
    used = table.rows_clean
    prov: dict[str, object] = {
        "source": "user-supplied file",
        "files": [{"path": _abs(target), "sha256": digest}],
        "sha256_verified": False,
        "sha256_note": "the original file's SHA-256 is not known here: recorded, not verified",
        "kaggle": KAGGLE,
        "citation": CITATION,
        "options": {**opts, "path": None if opts["path"] is None else _abs(target),
                    **({"bounds": bounds_mod.shown_ranges(user_bounds)} if user_bounds else {})},
    }
    ds = preprocess.build_classification(
        NAME,
        table,
        seed=seed,
        n=n,
        test_fraction=test_fraction,
        val_fraction=val_fraction,
        user_bounds=user_bounds,
        data_ranges=ranges,
        data_source=DATA_SOURCE,
        provenance=prov,
    )
    record = ds.provenance["feature_bounds"]
    used_ranges = {c: user_bounds.get(c, r) for c, r in ranges.items()}
    ds.provenance.update(
        {
            "rows_raw": int(rows_raw),
            "rows_dropped_missing": int(dropped),
            "frauds_in_file": n_fraud,
            "matches_published_counts": bool(rows_raw == ROWS_PUBLISHED and n_fraud == FRAUDS_PUBLISHED),
            "rows_clean": int(used),
            "balance": (
                f"all {n_fraud} frauds + {n_fraud} normal rows drawn uniformly without replacement with "
                f"np.random.default_rng({opts['balance_seed']}) (fixed: independent of the repetition seed)"
                if opts["balanced"]
                else "none: all rows"
            ),
            "scaling": (
                bounds_mod.describe_scaling(record, "")
                if record["kind"] != bounds_mod.DATA_DEPENDENT
                else f"min-max to [0,1] with the min/max of the {used} used rows before the split for "
                f"{len(record['columns'])} column(s) (a small data-dependent, non-private step, "
                "docs/methods/conventions.md, Preprocessing; fixed across repetitions)"
                + (f"; declared ranges for {', '.join(sorted(user_bounds))}, values clipped to them"
                   if user_bounds else "")
            ),
            "scaling_ranges": {c: list(r) for c, r in used_ranges.items()},
        }
    )
    return ds


def verify_record(root: str | os.PathLike | None = None) -> dict:
    """The `data.verify()` record of the default file location (same keys as uci.verify + `required`).

    `expected_sha256` is None (unknown); `ok` means present and parsable; `rows` = rows in the file;
    an absent file gives actual_sha256=None, ok=False, error="absent (user-supplied)";
    `required` is False: the file is optional (user-supplied).
    """
    target = default_path(root)
    rec: dict[str, object] = {
        "dataset": NAME,
        "file": REL_PATH,
        "path": _abs(target),
        "expected_sha256": None,
        "actual_sha256": None,
        "ok": False,
        "rows": None,
        "error": None,
        "source": f"{URL} (needs a Kaggle login)",
        "required": False,
    }
    if not target.is_file():
        rec["error"] = "absent (user-supplied)"
        return rec
    rec["actual_sha256"] = uci.sha256(target)
    try:
        _, rows_raw, _ = _parse_cached(*_stat_key(target))
    except Exception as exc:
        rec["error"] = f"parse failure: {_one_line(exc)}"
        return rec
    rec["rows"] = int(rows_raw)
    rec["ok"] = True
    return rec


def clear_caches() -> None:
    """Forget the parsed file and balanced tables."""
    _parse_cached.cache_clear()
    _clean_cached.cache_clear()


__all__ = [
    "COLUMNS",
    "FEATURES",
    "balanced_rows",
    "clear_caches",
    "default_path",
    "load",
    "verify_record",
]
