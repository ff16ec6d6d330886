"""Turn a canonical raw table into a `Dataset` (docs/methods/conventions.md, Preprocessing), and the shared
split logic.

Recipe, in order (every step is deterministic given `seed`; the same (dataset, seed, n,
fractions) gives bit-identical arrays in any process of one machine):

1. Missing values. `missing="drop"` (default) drops every row with a missing value
   in a feature or the label. `missing="impute"` keeps every row with a label and fills a numeric
   gap with the TRAINING split's median and a categorical gap with the training split's most
   frequent level (ties: the first in sorted order; a column with no training value gets no
   level, all its one-hot features 0) -- a tiny non-private step, recorded in the provenance.
   Breast Cancer exposes it to reproduce the 699 rows that paper 003 reports (its gaps are all
   numeric), the `csv` data set for any file.
2. Constant columns. A column with a single observed value in the full cleaned table is dropped
   (KDDCup99: `num_outbound_cmds` and `is_host_login`); it carries no information and would only
   waste a unit of the norm budget.
3. Subsample. If `n` is given, `n` rows are drawn uniformly without replacement from the cleaned
   table with `np.random.default_rng(seed)` (paper 003/000 "a random subsample" of KDDCup99);
   the split below continues with the same generator.
4. Split. Stratified by label for classification, uniform for regression:
   n_test = round(test_fraction * N), n_val = round(val_fraction * N) (N = rows after step 3),
   allocated to classes by largest remainder; each split is returned in a random order. A split
   that leaves fewer than MIN_TRAIN_ROWS training rows, or a training or test split of one class,
   is refused (DegenerateSplit, a ValueError): accuracy on it would be trivially 1 or 0.
5. Encoding. Categorical columns are one-hot encoded with ALL levels (no reference level), the
   levels being the sorted values observed in the full cleaned table: the public schema, so the
   feature dimension never depends on the seed or on `n`. Numeric columns are min-max scaled to
   [0, 1] with a declared public range where the column has one -- published with the data set
   (Breast Cancer 1..10, the Iris ranges; uci.UciSpec.public_ranges) or given by the user with the
   option `bounds`, which wins -- and every value outside it is clipped to it (per record). Every
   other numeric column is scaled with the TRAINING split's min/max and the validation/test values
   are clipped to [0, 1]: a data-dependent step outside every mechanism (the papers do the same
   implicitly). `provenance["feature_bounds"]` records which (bounds.py: kind declared /
   data-dependent / none, the source, the data-dependent columns) and `provenance["scaling"]` says
   it in words.
6. Norm bound, data-independent: with g = #numeric + #categorical groups every row has
   ||x||^2 <= g, so all features are divided by sqrt(g + 1) and an intercept feature of value
   1/sqrt(g + 1) is appended; then ||x||_2 <= 1 for every row by construction (checked).
7. Labels are float64 in {-1, +1}.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpbench.data import bounds as feature_bounds
from dpbench.data.base import Dataset


class DegenerateSplit(ValueError):
    """A split that cannot mean anything: too few training rows, or one class."""


#: Fewest training rows a data set may leave (below it a split is refused: a result would mean nothing).
MIN_TRAIN_ROWS = 10
#: Tolerance of the ||x||_2 <= 1 check (rounding of a sum of g + 1 squares).
NORM_TOL = 1e-12


def check_fractions(test_fraction: float, val_fraction: float) -> None:
    """Raise ValueError unless 0 <= test, val and test + val < 1."""
    for key, value in (("test_fraction", test_fraction), ("val_fraction", val_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"{key} must be a number in [0, 1), got {value!r}")
    if test_fraction + val_fraction >= 1.0:
        raise ValueError(
            f"test_fraction + val_fraction must be < 1 (got {test_fraction} + {val_fraction})"
        )


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def _allocate(total: int, counts: np.ndarray) -> np.ndarray:
    """Split `total` over groups proportionally to `counts` (largest remainder, ties by index)."""
    quotas = total * counts / counts.sum()
    base = np.floor(quotas).astype(np.int64)
    short = int(total - base.sum())
    order = np.argsort(-(quotas - base), kind="stable")
    base[order[:short]] += 1
    return base


def split_indices(
    y: np.ndarray,
    rng: np.random.Generator,
    test_fraction: float,
    val_fraction: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Deterministic (train, val, test) row indices; stratified by the labels `y`.

    Sizes: test = round(test_fraction * N), val = round(val_fraction * N), train = the rest
    (a class too small to give its share keeps at least its test share, then val, then train).
    Each returned index array is in a random order drawn from `rng`.
    """
    check_fractions(test_fraction, val_fraction)
    n_rows = int(len(y))
    n_test = _round_half_up(test_fraction * n_rows)
    n_val = _round_half_up(val_fraction * n_rows)
    classes, inverse = np.unique(y, return_inverse=True)
    counts = np.bincount(inverse, minlength=len(classes))
    t_alloc = _allocate(n_test, counts)
    v_alloc = np.minimum(_allocate(n_val, counts), counts - t_alloc)
    parts: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
    for k in range(len(classes)):
        perm = rng.permutation(np.flatnonzero(inverse == k))
        t, v = int(t_alloc[k]), int(v_alloc[k])
        parts[2].append(perm[:t])
        parts[1].append(perm[t : t + v])
        parts[0].append(perm[t + v :])
    train, val, test = (rng.permutation(np.concatenate(p)) if p else np.empty(0, np.int64) for p in parts)
    return train, val, test


def split_uniform(
    n_rows: int, rng: np.random.Generator, test_fraction: float, val_fraction: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unstratified (train, val, test) indices for regression; same size rule as split_indices."""
    check_fractions(test_fraction, val_fraction)
    n_test = _round_half_up(test_fraction * n_rows)
    n_val = _round_half_up(val_fraction * n_rows)
    perm = rng.permutation(n_rows)
    return perm[n_test + n_val :], perm[n_test : n_test + n_val], perm[:n_test]


def check_unit_norm(X: np.ndarray, what: str) -> float:
    """Return max row norm; raise AssertionError if it exceeds 1 + NORM_TOL (never silently)."""
    if X.shape[0] == 0:
        return 0.0
    max_norm = float(np.sqrt(np.einsum("ij,ij->i", X, X).max()))
    if not max_norm <= 1.0 + NORM_TOL:
        raise AssertionError(f"{what}: max row norm {max_norm!r} exceeds 1 (preprocessing bug)")
    return max_norm


@dataclass(frozen=True)
class CleanTable:
    """Seed-independent result of steps 1, 2 and the label rule (cached once per process).

    Holds a reference to the canonical frame (not a copy): `rows` are the positions of the
    cleaned rows in it (None = all rows), `groups` the one-hot levels and per-clean-row codes.
    """

    frame: pd.DataFrame
    rows: np.ndarray | None
    rows_raw: int
    numeric: tuple[str, ...]
    categorical: tuple[str, ...]
    dropped: tuple[str, ...]
    groups: tuple[tuple[str, tuple[str, ...], np.ndarray], ...]
    y: np.ndarray
    label_rule: str
    missing: str
    n_imputable: int

    @property
    def rows_clean(self) -> int:
        return int(self.y.size)


def clean_table(
    frame: pd.DataFrame,
    *,
    numeric: Sequence[str],
    categorical: Sequence[str],
    positive: Collection[str],
    label_rule: str,
    missing: str = "drop",
) -> CleanTable:
    """Steps 1-2 and the labels on a canonical table (float64 `numeric`, sorted categorical
    `categorical` and `label` columns). Rows whose label is in `positive` get y = +1.
    The frame is not modified (it is the per-process parse cache). With missing="impute" a
    categorical gap is kept as code -1 in `groups` (build_classification fills it)."""
    if missing not in ("drop", "impute"):
        raise ValueError(f"missing must be one of: drop, impute (got {missing!r})")
    numeric, categorical = list(numeric), list(categorical)
    # 1. missing values (a row without a label is always dropped)
    label_gap = frame["label"].isna().to_numpy()
    cat_gap = frame[categorical].isna().any(axis=1).to_numpy()
    num_gap = frame[numeric].isna().any(axis=1).to_numpy()
    keep = ~(label_gap | cat_gap | num_gap) if missing == "drop" else ~label_gap
    rows = None if keep.all() else np.flatnonzero(keep)
    clean = frame if rows is None else frame.iloc[rows]
    # 2. constant columns (public-schema decision on the full cleaned table)
    num_keep = tuple(c for c in numeric if clean[c].nunique(dropna=True) > 1)
    cat_keep = tuple(c for c in categorical if clean[c].nunique(dropna=True) > 1)
    dropped = tuple(c for c in numeric + categorical if c not in num_keep and c not in cat_keep)
    groups = []
    for c in cat_keep:
        col = clean[c].cat.remove_unused_categories()
        groups.append((c, tuple(str(v) for v in col.cat.categories), col.cat.codes.to_numpy()))
    y = np.where(clean["label"].isin(list(positive)).to_numpy(), 1.0, -1.0)
    return CleanTable(
        frame=frame,
        rows=rows,
        rows_raw=len(frame),
        numeric=num_keep,
        categorical=cat_keep,
        dropped=dropped,
        groups=tuple(groups),
        y=y,
        label_rule=label_rule,
        missing=missing,
        n_imputable=int(((num_gap | cat_gap) & ~label_gap).sum()) if missing == "impute" else 0,
    )


def build_classification(
    name: str,
    table: CleanTable,
    *,
    seed: int,
    n: int | None,
    test_fraction: float,
    val_fraction: float,
    public_ranges: Mapping[str, tuple[float, float]] | None = None,
    bounds_source: str = "",
    user_bounds: Mapping[str, tuple[float, float]] | None = None,
    data_ranges: Mapping[str, tuple[float, float]] | None = None,
    data_source: str = feature_bounds.TRAINING_SPLIT,
    provenance: Mapping[str, object] | None = None,
) -> Dataset:
    """Steps 3-7 of the recipe (module docstring) on a cleaned table -> Dataset.

    Ranges of the numeric columns (step 5): `user_bounds` (the `bounds` option), else
    `public_ranges` (the data set's own public ranges, published in `bounds_source`), both declared;
    else `data_ranges` (data-dependent ranges the loader computed, described by `data_source`),
    else the training split's min/max. `provenance["feature_bounds"]` records the outcome (bounds.py).
    """
    check_fractions(test_fraction, val_fraction)
    num_keep, cat_keep = list(table.numeric), list(table.categorical)
    declared, bounds_record = feature_bounds.resolve(num_keep, own=public_ranges, own_source=bounds_source,
                                                     user=user_bounds, data_source=data_source)
    data_ranges = dict(data_ranges or {})
    rows_clean, missing = table.rows_clean, table.missing

    # 3. subsample, 4. split
    rng = np.random.default_rng(seed)
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive integer or null, got {n!r}")
        if n > rows_clean:
            raise ValueError(f"n={n} exceeds the {rows_clean} cleaned rows of dataset '{name}'")
        sel = np.sort(rng.choice(rows_clean, size=int(n), replace=False))
    else:
        sel = None
    m = rows_clean if sel is None else int(sel.size)
    y = table.y if sel is None else table.y[sel]
    train, val, test = split_indices(y, rng, test_fraction, val_fraction)
    if train.size < MIN_TRAIN_ROWS:
        raise DegenerateSplit(f"dataset '{name}': the split leaves {train.size} training row(s) of {m}; at least "
                         f"{MIN_TRAIN_ROWS} are needed for a result to mean anything")
    for part, rows in (("training", train), ("test", test)):
        classes = np.unique(y[rows])
        if rows.size and classes.size < 2:
            raise DegenerateSplit(f"dataset '{name}': every row of the {part} split has label {float(classes[0]):+g} "
                             f"(one class of the {m} rows); accuracy would be trivially 1 or 0")
    frame_rows = table.rows if sel is None else (sel if table.rows is None else table.rows[sel])
    numeric_frame = table.frame[num_keep]
    if frame_rows is not None:
        numeric_frame = numeric_frame.iloc[frame_rows]
    num = numeric_frame.to_numpy(dtype=np.float64, copy=True)

    # 5a. numeric: impute (optional), min-max with the declared ranges, else the data-dependent ones, clip
    medians: dict[str, float] = {}
    if missing == "impute" and num_keep:
        gaps = np.isnan(num)
        if gaps.any():
            med = np.nanmedian(num[train], axis=0)
            med = np.where(np.isnan(med), 0.0, med)
            num = np.where(gaps, med[None, :], num)
            medians = {c: float(v) for c, v in zip(num_keep, med) if gaps[:, num_keep.index(c)].any()}
    if num_keep:
        if bounds_record["columns"] and not set(bounds_record["columns"]) <= set(data_ranges):
            lo, hi = num[train].min(axis=0), num[train].max(axis=0)
        else:  # no column is scaled with the training split's ranges: do not read them
            lo, hi = np.zeros(len(num_keep)), np.ones(len(num_keep))
        for j, c in enumerate(num_keep):
            if c in declared:
                lo[j], hi[j] = declared[c]
            elif c in data_ranges:
                lo[j], hi[j] = data_ranges[c]
        span = np.where(hi > lo, hi - lo, 1.0)
        num -= lo
        num /= span
        np.clip(num, 0.0, 1.0, out=num)

    # 5b. categorical: one-hot with all observed levels of the full cleaned table; with
    # missing="impute" a gap (code -1) takes the training split's most frequent level
    groups = [(c, levels, codes if sel is None else codes[sel]) for c, levels, codes in table.groups]
    modes: dict[str, str | None] = {}
    for i, (c, levels, codes) in enumerate(groups):
        gaps = codes < 0
        if gaps.any():
            observed = codes[train][codes[train] >= 0].astype(np.intp)
            mode = int(np.bincount(observed, minlength=len(levels)).argmax()) if observed.size else -1
            modes[c] = levels[mode] if mode >= 0 else None
            groups[i] = (c, levels, np.where(gaps, mode, codes))

    # 6. data-independent norm bound + intercept. X is built directly in split order
    # (train, val, test) so each split is a contiguous slice; no extra copies.
    g = len(num_keep) + len(cat_keep)
    scale = math.sqrt(g + 1)
    names: list[str] = list(num_keep) + [f"{c}={v}" for c, levels, _ in groups for v in levels] + ["intercept"]
    order = np.concatenate([train, val, test])
    X = np.empty((m, len(names)), dtype=np.float64)
    X.fill(0.0)  # sequential first touch: much faster than np.zeros + strided writes on big arrays
    num = num[order]
    num /= scale
    X[:, : len(num_keep)] = num
    del num
    rows = np.arange(m)
    offset = len(num_keep)
    for _, levels, codes in groups:
        ordered = codes[order].astype(np.intp)  # int8 codes would overflow
        if ordered.size and ordered.min() < 0:  # a gap with no training level to impute: all features 0
            present = ordered >= 0
            X[rows[present], offset + ordered[present]] = 1.0 / scale
        else:
            X[rows, offset + ordered] = 1.0 / scale
        offset += len(levels)
    X[:, -1] = 1.0 / scale
    y_ord = y[order]
    max_norm = check_unit_norm(X, name)

    splits = {"train": train, "val": val, "test": test}
    bounds = np.cumsum([0, train.size, val.size, test.size])
    arrays = {
        k: (X[bounds[i] : bounds[i + 1]], y_ord[bounds[i] : bounds[i + 1]]) for i, k in enumerate(splits)
    }
    prov: dict[str, object] = dict(provenance or {})
    prov.update(
        {
            "dataset": name,
            "task": "classification",
            "rows_raw": int(table.rows_raw),
            "rows_clean": int(rows_clean),
            "n_used": int(m),
            "subsample": (
                "none"
                if n is None
                else f"uniform without replacement, np.random.default_rng({seed}).choice, before the split"
            ),
            "split": {k: int(v.size) for k, v in splits.items()},
            "split_rule": (
                "stratified by label; test=round(test_fraction*N), val=round(val_fraction*N), "
                "train=rest; largest-remainder allocation; rng=np.random.default_rng(seed)"
            ),
            "seed": int(seed),
            "test_fraction": float(test_fraction),
            "val_fraction": float(val_fraction),
            "label_rule": table.label_rule,
            "positive_rate": float(y.mean() / 2 + 0.5) if m else float("nan"),
            "missing_rule": (
                "drop rows with any missing value"
                if missing == "drop"
                else f"impute numeric gaps with the training-split median ({table.n_imputable} rows)"
                if not modes
                else "impute numeric gaps with the training-split median and categorical gaps with its most "
                f"frequent level ({table.n_imputable} rows)"
            ),
            "imputed_medians": medians,
            **({"imputed_most_frequent": modes} if modes else {}),
            "dropped_constant_columns": list(table.dropped),
            "numeric_columns": num_keep,
            "categorical_columns": cat_keep,
            "scaling": feature_bounds.describe_scaling(bounds_record, "val/test clipped to [0,1]"),
            "feature_bounds": bounds_record,
            **({"declared_ranges": feature_bounds.shown_ranges(declared)} if declared else {}),
            "encoding": "one-hot, all levels, sorted levels observed in the full cleaned table",
            "norm_rule": f"divide by sqrt(g+1), g={g} groups; intercept 1/sqrt(g+1)",
            "norm_bound": 1.0,
            "max_row_norm": max_norm,
            "n_features": int(X.shape[1]),
        }
    )
    return Dataset(
        name=name,
        task="classification",
        X_train=arrays["train"][0],
        y_train=arrays["train"][1],
        X_val=arrays["val"][0],
        y_val=arrays["val"][1],
        X_test=arrays["test"][0],
        y_test=arrays["test"][1],
        feature_names=tuple(names),
        provenance=prov,
    )
