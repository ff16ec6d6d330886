"""Tests of the `csv` data set (dpbench/data/tabular.py): your own table through the UCI preprocessing.

Every test writes a small file into tmp_path: numeric, boolean, categorical and text columns
with missing values, and a yes/no label.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpbench import data
from dpbench.core.errors import DataError
from dpbench.core.registry import resolve_paths
from dpbench.data import tabular

ROWS = 200
OPTIONS = {"label": "y", "positive": "yes", "categorical": ["city"], "drop": ["id"]}
DROP = {**OPTIONS, "missing": "drop"}  # the table has rows with a missing value: say what to do with them


def write_table(path: Path, rows: int = ROWS, seed: int = 0) -> Path:
    """age (int, 10 gaps), income (float), member (bool), city (3 levels, 6 gaps), id (text), y (yes/no, 2 gaps)."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 90, rows).astype(float)
    age[rng.choice(rows, 10, replace=False)] = np.nan
    city = rng.choice(np.array(["Paris", "Lyon", "Nice"], dtype=object), rows)
    city[rng.choice(rows, 6, replace=False)] = None
    income = rng.lognormal(10, 1, rows).round(2)
    y = np.where(income + rng.normal(0, 20_000, rows) > np.median(income), "yes", "no").astype(object)
    y[[3, 7]] = None
    frame = pd.DataFrame({"age": pd.array(age, dtype="Int64"), "income": income,
                          "member": rng.random(rows) < 0.3, "city": city,
                          "id": [f"c{i:04d}" for i in range(rows)], "y": y})
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return write_table(tmp_path / "people.csv")


def all_rows(ds: data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([ds.X_train, ds.X_val, ds.X_test]), np.concatenate([ds.y_train, ds.y_val, ds.y_test])


def complete_rows(path: Path) -> int:
    return int(pd.read_csv(path).drop(columns="id").notna().all(axis=1).sum())


def test_norms_labels_and_splits(table: Path) -> None:
    ds = data.load("csv", seed=0, path=str(table), **DROP)
    X, y = all_rows(ds)
    N = complete_rows(table)
    assert N < ROWS - 10  # rows with a gap are dropped by default
    assert X.shape[0] == N and ds.provenance["rows_raw"] == ROWS and ds.provenance["rows_clean"] == N
    assert (len(ds.y_test), len(ds.y_val)) == (round(0.2 * N), round(0.2 * N))
    assert ds.n_train == N - 2 * round(0.2 * N)
    assert np.linalg.norm(X, axis=1).max() <= 1 + 1e-12 and np.isfinite(X).all()
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert ds.feature_names == ("age", "income", "member", "city=Lyon", "city=Nice", "city=Paris", "intercept")
    np.testing.assert_allclose(X[:, -1], 1 / math.sqrt(4 + 1))  # g = 3 numeric + 1 categorical group
    onehot = X[:, 3:6] * math.sqrt(5)
    np.testing.assert_allclose(onehot.sum(axis=1), 1.0)  # exactly one level per row
    raw = pd.read_csv(table)
    expected_rate = (raw.dropna(subset=["age", "city", "y"])["y"] == "yes").mean()
    assert (y == 1).mean() == pytest.approx(expected_rate)
    prov = ds.provenance
    assert prov["files"] == [{"path": str(table.absolute()), "sha256": hashlib.sha256(table.read_bytes()).hexdigest()}]
    assert prov["source"] == "user-supplied file" and prov["file_format"] == "csv"
    assert prov["options"]["path"] == str(table.absolute()) and prov["options"]["categorical"] == ["city"]
    assert prov["label_rule"] == "y = 'yes' -> +1, every other value -> -1"
    assert prov["categorical_columns"] == ["city"] and prov["numeric_columns"] == ["age", "income", "member"]


def test_subsample_and_fractions(table: Path) -> None:
    ds = data.load("csv", seed=1, n=100, test_fraction=0.1, val_fraction=0.0, path=str(table), **DROP)
    assert (ds.n_train, len(ds.y_val), len(ds.y_test)) == (90, 0, 10)
    with pytest.raises(ValueError, match="exceeds"):
        data.load("csv", n=ROWS, path=str(table), **DROP)


def test_impute_keeps_every_labelled_row(table: Path) -> None:
    ds = data.load("csv", seed=0, path=str(table), missing="impute", **OPTIONS)
    X, y = all_rows(ds)
    assert X.shape[0] == ROWS - 2  # only the two rows without a label are dropped
    assert np.isfinite(X).all() and np.linalg.norm(X, axis=1).max() <= 1 + 1e-12
    assert set(np.unique(y)) == {-1.0, 1.0}
    prov = ds.provenance
    assert "age" in prov["imputed_medians"] and prov["imputed_most_frequent"]["city"] in ("Lyon", "Nice", "Paris")
    assert "most frequent" in prov["missing_rule"]
    np.testing.assert_allclose((X[:, 3:6] * math.sqrt(5)).sum(axis=1), 1.0)  # imputed rows get one level too
    # the imputed level is the training split's most frequent one
    train_levels = np.argmax(ds.X_train[:, 3:6], axis=1)
    counts = np.bincount(train_levels, minlength=3)
    assert ["Lyon", "Nice", "Paris"][int(counts.argmax())] == prov["imputed_most_frequent"]["city"]


def test_same_file_and_seed_give_identical_arrays(table: Path, tmp_path: Path) -> None:
    a = data.load("csv", seed=4, path=str(table), **DROP)
    tabular.clear_caches()
    b = data.load("csv", seed=4, path=table, **DROP)  # a Path object is accepted too
    for key in ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    copy = tmp_path / "elsewhere" / "copy.csv"
    copy.parent.mkdir()
    copy.write_bytes(table.read_bytes())
    np.testing.assert_array_equal(data.load("csv", seed=4, path=str(copy), **DROP).X_train, a.X_train)
    c = data.load("csv", seed=5, path=str(table), **DROP)
    assert not np.array_equal(a.X_train, c.X_train)


def test_validate_options(table: Path) -> None:
    info = data.DATASETS["csv"]
    assert info.origin == "user-supplied" and info.param("path").path and data.option_names("csv") == {
        "path", "label", "positive", "categorical", "drop", "missing", "bounds"}
    checked = info.validate({"path": "t.csv", "categorical": ["a", "b"]})
    # a number, as `dpbench list datasets` shows it (positive: 1) and YAML reads it, is its text
    assert info.validate({"path": "t.csv", "positive": 1})["positive"] == "1"
    assert info.validate({"path": "t.csv", "positive": 2.5})["positive"] == "2.5"
    assert checked["categorical"] == ("a", "b") and checked["drop"] == () and checked["missing"] == "refuse"
    for options, message in [
        ({"path": "t.csv", "colour": 1}, "colour: unknown parameter of dataset 'csv'"),
        ({"path": "t.csv", "missing": "mean"}, "missing: must be one of refuse, drop, impute; got 'mean'"),
        ({"path": "t.csv", "categorical": "city"}, "categorical: must be a list of strings"),
        ({"path": "t.csv", "positive": True}, "positive: must be a string or a number, got True"),
        ({}, "path: required"),
        ({"path": "t.csv", "label": "y", "drop": ["y"]}, "drop: lists the label column 'y'"),
        ({"path": "t.csv", "categorical": ["a"], "drop": ["a"]}, "drop: 'a' also listed under categorical"),
    ]:
        with pytest.raises(ValueError, match=message):
            info.validate(options)
    with pytest.raises(ValueError, match="missing: must be one of refuse, drop, impute"):
        data.load("csv", path=str(table), missing="mean", **OPTIONS)
    with pytest.raises(ValueError, match="path: required"):
        data.load("csv", **OPTIONS)
    # a spec's relative path is relative to its YAML file's folder
    assert resolve_paths(info.params, {"path": "t.csv", "label": "y"}, "/specs") == {"path": "/specs/t.csv",
                                                                                     "label": "y"}


def _one_line_error(**options) -> str:
    with pytest.raises(DataError) as err:
        data.load("csv", **options)
    message = str(err.value)
    assert "\n" not in message and message.startswith("dataset 'csv': ")
    return message


def test_clear_one_line_errors(table: Path, tmp_path: Path) -> None:
    absent = tmp_path / "absent.csv"
    msg = _one_line_error(path=str(absent), **OPTIONS)
    assert str(absent.absolute()) in msg and "not found" in msg
    msg = _one_line_error(path=str(table), **{**OPTIONS, "label": "target"})
    assert "label column 'target' not found" in msg and "age, income, member, city, id, y" in msg
    msg = _one_line_error(path=str(table), **{**OPTIONS, "positive": "maybe"})
    assert "positive value 'maybe'" in msg and "its values: no, yes" in msg
    msg = _one_line_error(path=str(table), label="y", positive="yes", categorical=["city"])
    assert "column 'id' is not numeric" in msg and "'c0000'" in msg and "`categorical`" in msg and "`drop`" in msg
    msg = _one_line_error(path=str(table), **{**OPTIONS, "drop": ["id", "zip"]})
    assert "column 'zip' listed under `drop` not found" in msg
    other = tmp_path / "table.xlsx"
    other.write_bytes(b"not a table")
    assert "unknown file type" in _one_line_error(path=str(other), **OPTIONS)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert "no rows: the file is empty" in _one_line_error(path=str(empty), **OPTIONS)
    header = tmp_path / "header.csv"
    header.write_text("age,income,member,city,id,y\n")
    assert "no rows (only the header: 6 columns)" in _one_line_error(path=str(header), **OPTIONS)
    gaps = tmp_path / "gaps.csv"
    gaps.write_text("a,b,y\n1,,yes\n,2,no\n")
    refused = _one_line_error(path=str(gaps), label="y", positive="yes")  # nothing dropped unsaid
    assert "2 of 2 rows (100%) have a missing value" in refused and "missing: drop" in refused
    assert "missing: impute" in _one_line_error(path=str(gaps), label="y", positive="yes", missing="drop")
    infinite = tmp_path / "inf.csv"
    infinite.write_text("a,y\n1,yes\ninf,no\n")
    assert "column 'a' holds infinite values" in _one_line_error(path=str(infinite), label="y", positive="yes")


def test_parquet(table: Path, tmp_path: Path) -> None:
    target = tmp_path / "people.parquet"
    if importlib.util.find_spec("pyarrow") is None and importlib.util.find_spec("fastparquet") is None:
        target.write_bytes(b"PAR1")  # never read: pandas needs an engine first
        msg = _one_line_error(path=str(target), **OPTIONS)
        assert "pip install pyarrow" in msg and str(target.absolute()) in msg
        return
    pd.read_csv(table).to_parquet(target)
    a = data.load("csv", seed=0, path=str(target), **OPTIONS)
    b = data.load("csv", seed=0, path=str(table), **OPTIONS)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert a.provenance["file_format"] == "parquet"


def test_numeric_labels_and_categorical_numbers(tmp_path: Path) -> None:
    """0/1 labels (float when a label is missing) read as "0"/"1"; a numeric code column may be categorical."""
    path = tmp_path / "codes.csv"
    rows = ["x,zone,label"] + [f"{i / 10},{100 + i % 3},{i % 2}" for i in range(30)] + ["0.5,101,"]
    path.write_text("\n".join(rows) + "\n")
    ds = data.load("csv", seed=0, path=str(path), categorical=["zone"], missing="drop")  # label "label", positive "1"
    X, y = all_rows(ds)
    assert X.shape[0] == 30 and (y == 1).sum() == 15
    assert ds.feature_names == ("x", "zone=100", "zone=101", "zone=102", "intercept")
    assert np.linalg.norm(X, axis=1).max() <= 1 + 1e-12


def test_a_spec_keys_cells_by_the_file_content_and_seeds_splits_by_the_path_as_written(tmp_path: Path) -> None:
    """Relative paths start at the YAML's folder; an edited file changes every cell key (its cells rerun),
    while the data split's seed depends on the options as written (not on where the checkout is)."""
    import yaml

    from dpbench.spec import experiment as spec

    write_table(tmp_path / "sub" / "t.csv")
    raw = {"datasets": [{"name": "csv", "options": {"path": "sub/t.csv", "missing": "impute", **OPTIONS}}],
           "models": ["logreg"], "algorithms": ["nonprivate"], "metrics": ["accuracy"]}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(raw))
    before = spec.load(tmp_path / "exp.yaml").cells()[0]
    assert before.dataset_base == str(tmp_path) and dict(before.dataset_options)["path"] == "sub/t.csv"
    write_table(tmp_path / "sub" / "t.csv", seed=1)
    after = spec.load(tmp_path / "exp.yaml").cells()[0]
    assert after.key != before.key and after.data_seed == before.data_seed
    assert spec.load(tmp_path / "exp.yaml").cells()[0].key == after.key


def test_degenerate_files_are_refused_with_one_line(tmp_path: Path) -> None:
    """A file too small for a split to mean anything, or whose split has one class, is refused."""
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("a,y\n1,yes\n2,no\n3,yes\n")
    assert "leaves 1 training row(s) of 3; at least 10" in _one_line_error(path=str(tiny), label="y", positive="yes")
    single = tmp_path / "single.csv"
    single.write_text("a,y\n" + "".join(f"{i},yes\n" for i in range(40)))
    assert "every row of the training split has label +1" in _one_line_error(path=str(single), label="y",
                                                                           positive="yes")
