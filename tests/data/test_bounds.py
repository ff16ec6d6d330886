"""Feature bounds (dpbench/data/bounds.py): declared public ranges, the `bounds` option, the
`provenance["feature_bounds"]` record, its static answer `data.feature_bounds`, and the data-set
revision that keeps Iris's old cells from being reused.

The UCI tests read the real offline files ($DPBENCH_DATA, else ../shared/data) and are skipped,
saying which file is absent, when it is not there.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpbench import data
from dpbench.audit.setup import AuditSetup
from dpbench.core.keys import Cell
from dpbench.data import bounds, uci
from dpbench.spec.experiment import from_dict
from tests.conftest import offline_data_dir

ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
IRIS_RANGES = {"sepal_length": (4.3, 7.9), "sepal_width": (2.0, 4.4), "petal_length": (1.0, 6.9),
               "petal_width": (0.1, 2.5)}


def root_with(name: str) -> Path:
    """The offline data folder, or a skip naming the absent file of UCI data set `name`."""
    root = offline_data_dir()
    absent = [str(root / p) for p in uci.SPECS[name].paths if not (root / p).is_file()]
    if absent:
        pytest.skip(f"{name}: {', '.join(absent)} not found; set DPBENCH_DATA to a folder with the UCI layout")
    return root


def all_rows(ds: data.Dataset) -> np.ndarray:
    return np.vstack([ds.X_train, ds.X_val, ds.X_test])


def before_norm(ds: data.Dataset) -> np.ndarray:
    """The numeric features as step 5 left them, in [0, 1]: the row norm step divided every feature by sqrt(g + 1)."""
    g = len(ds.provenance["numeric_columns"]) + len(ds.provenance["categorical_columns"])
    return all_rows(ds)[:, : len(ds.provenance["numeric_columns"])] * math.sqrt(g + 1)


# ---- declared ranges of the UCI data sets ------------------------------------------------------------------------
@pytest.mark.parametrize("name, ranges, source", [
    ("breast_cancer", dict.fromkeys(uci.SPECS["breast_cancer"].numeric, (1.0, 10.0)),
     "breast-cancer-wisconsin.names, 'Attribute Information'"),
    ("iris", IRIS_RANGES, "iris.names, 'Summary Statistics'"),
])
def test_breast_cancer_and_iris_are_scaled_with_their_declared_ranges(name, ranges, source):
    root = root_with(name)
    ds = data.load(name, seed=1, data_dir=root)
    record = ds.provenance["feature_bounds"]
    assert record["kind"] == "declared" and source in record["source"] and record["columns"] == []
    assert uci.SPECS[name].public_ranges == ranges and ds.provenance["declared_ranges"] == {
        c: list(r) for c, r in ranges.items()}
    assert "declared public ranges" in ds.provenance["scaling"] and "training split" not in ds.provenance["scaling"]
    assert ds.provenance["numeric_columns"] == list(ranges)
    # every used row (n: null, so the three splits are the whole cleaned table), column by column:
    # the value before the norm step is (raw - low) / (high - low), exactly
    scaled = before_norm(ds)
    assert scaled.min() >= 0.0 and scaled.max() <= 1.0
    frame = uci.raw_table(name, root).frame.dropna()
    for j, (column, (low, high)) in enumerate(ranges.items()):
        expected = np.sort((frame[column].to_numpy() - low) / (high - low))
        np.testing.assert_allclose(np.sort(scaled[:, j]), expected, rtol=0, atol=1e-12, err_msg=column)


def test_the_declared_iris_ranges_are_the_files_own_min_and_max():
    """iris.names publishes the min and max of each feature over the 150 rows: they equal the file's."""
    frame = uci.raw_table("iris", root_with("iris")).frame
    assert {c: (frame[c].min(), frame[c].max()) for c in IRIS_RANGES} == IRIS_RANGES


def test_adult_is_scaled_with_the_training_split_and_says_so():
    ds = data.load("adult", seed=0, n=2000, data_dir=root_with("adult"))
    record = ds.provenance["feature_bounds"]
    assert record == {"kind": "data-dependent", "source": "min/max of the training split", "columns": ADULT_NUMERIC}
    assert "training split" in ds.provenance["scaling"] and "data-dependent" in ds.provenance["scaling"]
    assert "declared_ranges" not in ds.provenance


def test_user_bounds_override_and_complete_a_uci_data_set():
    root = root_with("adult")
    some = data.load("adult", seed=0, n=2000, data_dir=root, bounds={"age": [17, 90]})
    assert some.provenance["feature_bounds"]["kind"] == "data-dependent"
    assert some.provenance["feature_bounds"]["columns"] == ADULT_NUMERIC[1:]
    assert "age: declared in the spec (bounds)" in some.provenance["feature_bounds"]["source"]
    full = {"age": [17, 90], "fnlwgt": [0, 1.5e6], "education-num": [1, 16], "capital-gain": [0, 99999],
            "capital-loss": [0, 4356], "hours-per-week": [1, 99]}
    every = data.load("adult", seed=0, n=2000, data_dir=root, bounds=full)
    assert every.provenance["feature_bounds"] == {"kind": "declared", "source": bounds.USER_SOURCE, "columns": []}
    assert every.provenance["options"]["bounds"] == {c: [float(lo), float(hi)] for c, (lo, hi) in full.items()}
    age = before_norm(every)[:, 0]
    assert age.min() >= 0 and age.max() <= 1
    np.testing.assert_allclose(np.sort(age * 73 + 17), np.sort(age * 73 + 17).round(), atol=1e-9)  # whole years
    # the user's range wins over a data set's own, and the record says which columns it covers
    bc = data.load("breast_cancer", seed=0, data_dir=root_with("breast_cancer"), bounds={"mitoses": [1, 5]})
    record = bc.provenance["feature_bounds"]
    assert record["kind"] == "declared" and record["source"].startswith(f"{bounds.USER_SOURCE} for mitoses; UCI")
    assert before_norm(bc)[:, -1].max() == 1.0 and bc.provenance["declared_ranges"]["mitoses"] == [1.0, 5.0]


@pytest.mark.parametrize("name, options, message", [
    ("adult", {"bounds": {"workclass": [0, 1]}}, "bounds: column 'workclass' is categorical"),
    ("adult", {"bounds": {"height": [0, 1]}}, "bounds: unknown column 'height' of adult; its numeric columns: age,"),
    ("adult", {"bounds": {"age": [90, 17]}}, (r"bounds.age: must be a \[low, high\] pair of finite numbers with "
                                              r"low < high, got \[90, 17\]")),
    ("adult", {"bounds": {"age": [5, 5]}}, r"bounds.age: must be a \[low, high\] pair"),
    ("adult", {"bounds": {"age": [0, float("inf")]}}, r"bounds.age: must be a \[low, high\] pair"),
    ("adult", {"bounds": {"age": "0-90"}}, r"bounds.age: must be a \[low, high\] pair"),
    ("adult", {"bounds": {"age": [0, 1, 2]}}, r"bounds.age: must be a \[low, high\] pair"),
    ("adult", {"bounds": [17, 90]}, r"bounds: must be a mapping of column -> \[low, high\]"),
    ("bank", {"drop_duration": True, "bounds": {"duration": [0, 5000]}},
     r"bounds: column 'duration' is left out \(drop_duration: true\)"),
    ("credit_card", {"bounds": {"Class": [0, 1]}}, "bounds: column 'Class' is the label column"),
])
def test_a_bad_bounds_option_is_a_one_line_error_naming_it(name, options, message):
    with pytest.raises(ValueError, match=message) as info:  # before any file is read
        data.DATASETS[name].validate(options)
    assert "\n" not in str(info.value)


# ---- the csv data set ----------------------------------------------------------------------------------------------
def write_table(path: Path, rows: int = 200) -> Path:
    """age 0..119 (some outside [18, 90]), income, colour (categorical), label 0/1."""
    rng = np.random.default_rng(0)
    pd.DataFrame({"age": rng.integers(0, 120, rows), "income": rng.normal(5e4, 1e4, rows),
                  "colour": rng.choice(["red", "blue"], rows), "label": rng.integers(0, 2, rows)}).to_csv(path,
                                                                                                        index=False)
    return path


def test_csv_without_bounds_is_data_dependent(tmp_path):
    ds = data.load("csv", seed=0, path=str(write_table(tmp_path / "t.csv")), categorical=["colour"])
    assert ds.provenance["feature_bounds"] == {"kind": "data-dependent", "source": "min/max of the training split",
                                               "columns": ["age", "income"]}
    assert ds.provenance["options"]["bounds"] is None


def test_csv_bounds_clip_each_value_and_declare_the_scaling(tmp_path):
    path = write_table(tmp_path / "t.csv")
    raw = pd.read_csv(path)
    assert (raw["age"] < 18).any() and (raw["age"] > 90).any()
    schema = {"age": [18, 90], "income": [0, 100_000]}
    ds = data.load("csv", seed=0, path=str(path), categorical=["colour"], bounds=schema)
    assert ds.provenance["feature_bounds"] == {"kind": "declared", "source": "declared in the spec (bounds)",
                                               "columns": []}
    assert "clipped" in ds.provenance["scaling"]
    scaled = before_norm(ds)
    for j, (column, (low, high)) in enumerate(schema.items()):
        expected = np.sort((raw[column].clip(low, high).to_numpy() - low) / (high - low))
        np.testing.assert_allclose(np.sort(scaled[:, j]), expected, rtol=0, atol=1e-12, err_msg=column)
    assert (scaled[:, 0] == 0).sum() == (raw["age"] <= 18).sum()  # clipped from below
    assert (scaled[:, 0] == 1).sum() == (raw["age"] >= 90).sum()  # and from above
    partial = data.load("csv", seed=0, path=str(path), categorical=["colour"], bounds={"age": [18, 90]})
    assert partial.provenance["feature_bounds"]["kind"] == "data-dependent"
    assert partial.provenance["feature_bounds"]["columns"] == ["income"]
    np.testing.assert_array_equal(before_norm(partial)[:, 0], scaled[:, 0])  # the same split and age column


@pytest.mark.parametrize("options, message", [
    ({"bounds": {"colour": [0, 1]}}, "bounds: column 'colour' is categorical"),
    ({"bounds": {"label": [0, 1]}}, "bounds: column 'label' is the label column"),
    ({"drop": ["income"], "bounds": {"income": [0, 1]}}, "bounds: column 'income' is listed under `drop`"),
    ({"bounds": {"age": [90, 18]}}, r"bounds.age: must be a \[low, high\] pair .*, got \[90, 18\]"),
    ({"bounds": {"age": None}}, r"bounds.age: must be a \[low, high\] pair .*, got null"),
    ({"bounds": "age"}, r"bounds: must be a mapping"),
    ({"bounds": {"height": [0, 2]}}, (r"bounds: column 'height' not found among the numeric columns of .*t.csv: "
                                      r"age, income$")),
])
def test_csv_bounds_errors_name_the_option(tmp_path, options, message):
    path = write_table(tmp_path / "t.csv")
    with pytest.raises(ValueError, match=message) as info:
        data.load("csv", path=str(path), **{"categorical": ["colour"], **options})
    assert "\n" not in str(info.value)


def test_a_spec_with_bad_bounds_is_refused_with_its_yaml_path(tmp_path):
    write_table(tmp_path / "t.csv")
    spec = {"name": "b", "seeds": 1, "models": ["logreg"], "algorithms": ["nonprivate"],
            "datasets": [{"name": "csv", "options": {"path": str(tmp_path / "t.csv"), "categorical": ["colour"],
                                                     "bounds": {"age": [90, 18]}}}]}
    with pytest.raises(Exception, match=r"^datasets\[0\].options.bounds.age: must be") as info:
        from_dict(spec)
    from dpbench.core.errors import SpecError

    assert isinstance(info.value, SpecError)
    spec["datasets"][0]["options"]["bounds"] = {"age": [18, 90]}
    cells = from_dict(spec).cells()  # a mapping option: hashable in the cell, a mapping in its key
    assert {cell for cell in cells} and cells[0].data_options["bounds"] == (("age", (18, 90)),)


# ---- credit card (a small file in its layout) and generated data -------------------------------------------------
def test_credit_card_bounds(tmp_path):
    from tests.data.test_creditcard import write_creditcard

    write_creditcard(tmp_path / "creditcard" / "creditcard.csv")
    plain = data.load("credit_card", seed=0, data_dir=tmp_path)
    assert plain.provenance["feature_bounds"] == data.feature_bounds("credit_card")
    assert plain.provenance["feature_bounds"]["kind"] == "data-dependent"
    assert "before the split" in plain.provenance["scaling"] and "non-private" in plain.provenance["scaling"]
    bounded = data.load("credit_card", seed=0, data_dir=tmp_path, bounds={"Amount": [0, 500]})
    assert bounded.provenance["feature_bounds"] == data.feature_bounds("credit_card", {"bounds": {"Amount": [0, 500]}})
    assert "Amount" not in bounded.provenance["feature_bounds"]["columns"]
    assert bounded.provenance["scaling_ranges"]["Amount"] == [0.0, 500.0]


@pytest.mark.parametrize("name, options", [("synthetic_linear", {"n": 200}), ("synthetic_logistic", {"n": 200}),
                                           ("synthetic_population", {"pool": 500, "n": 50})])
def test_generated_data_has_no_data_dependent_step(name, options):
    ds = data.load(name, seed=0, **options)
    assert ds.provenance["feature_bounds"] == {"kind": "none", "source": bounds.GENERATED, "columns": []}
    assert data.feature_bounds(name, options) == ds.provenance["feature_bounds"]


# ---- the static answer ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, options", [
    ("adult", {}), ("adult", {"bounds": {"age": [17, 90]}}), ("bank", {}), ("bank", {"drop_duration": True}),
    ("breast_cancer", {}), ("breast_cancer", {"missing": "impute", "bounds": {"mitoses": [1, 5]}}), ("iris", {}),
    ("kddcup99", {"n": 5000}),
])
def test_the_static_answer_is_what_a_load_records(name, options):
    ds = data.load(name, seed=0, data_dir=root_with(name), **options)
    assert data.feature_bounds(name, options) == ds.provenance["feature_bounds"]


def test_the_static_answer_knows_the_revision_and_says_when_it_cannot_tell(tmp_path):
    assert data.feature_bounds("iris", revision=1)["kind"] == "declared"
    old = data.feature_bounds("iris", revision=0)  # Iris's cells stored before revision 1
    assert old == {"kind": "data-dependent", "source": "min/max of the training split", "columns": list(IRIS_RANGES)}
    assert data.feature_bounds("iris", revision=2) is None
    assert data.feature_bounds("breast_cancer", revision=0)["kind"] == "declared"
    assert data.feature_bounds("csv", {"path": "t.csv", "bounds": {"a": [0, 1]}}) is None  # the file's columns
    with pytest.raises(ValueError, match="bounds: unknown column 'height' of adult"):
        data.feature_bounds("adult", {"bounds": {"height": [0, 2]}})


# ---- the data-set revision in the keys ------------------------------------------------------------------------------
#: keys computed with the code before data-set revisions existed (same cells, same audit setups)
KEYS_BEFORE = {
    "adult": {"cell": "5b2e24bc9b525193", "problem": "2d8ec8ed88bd8b12", "data_seed": 3427064772,
              "audit": "67f45f02cd746c44"},
    "breast_cancer": {"cell": "05bd8c44f5918382", "problem": "8f1c34b47bc3ce8b", "data_seed": 2533468532,
                      "audit": "60dc53963b903434"},
    "iris": {"cell": "dcc9058dd52dc8e7", "problem": "5dec0a37230a2c51", "data_seed": 3462221831,
             "audit": "dfa543f72f53c68e"},
}


def keys(name: str) -> dict:
    cell = Cell(algorithm="dpsgd", params=(("lr", 0.5),), dataset=name, dataset_options=(("n", 100),),
                model="logreg", model_options=(), epsilon=1.0, delta="1/n", rep=0, seed=0,
                dataset_revision=data.DATASETS[name].revision)
    audit = AuditSetup.create("dpsgd", params={"lr": 0.5}, dataset=name, model="logreg", epsilon=1.0, delta=1e-5,
                              trials=100, rows=100, seed=0)
    return {"cell": cell.key, "problem": cell.problem_key, "data_seed": cell.data_seed, "audit": audit.key}


def test_revision_keeps_the_keys_of_data_sets_never_revised_and_changes_iris():
    assert data.DATASETS["iris"].revision == 1
    assert all(data.DATASETS[name].revision == 0 for name in data.DATASETS if name != "iris")
    for name in ("adult", "breast_cancer"):
        assert keys(name) == KEYS_BEFORE[name], name
    now = keys("iris")
    assert now["data_seed"] == KEYS_BEFORE["iris"]["data_seed"]  # the same split
    for what in ("cell", "problem", "audit"):  # new arrays: new cells, a new L*, new audits
        assert now[what] != KEYS_BEFORE["iris"][what], what


def test_the_spec_gives_its_cells_and_audits_the_data_sets_revision():
    for name, revision in (("adult", 0), ("breast_cancer", 0), ("iris", 1)):
        exp = from_dict({"name": "k", "seeds": 1, "datasets": [name], "models": ["logreg"],
                         "algorithms": ["nonprivate"],
                         "audits": {"dataset": name, "rows": 100, "epsilons": [1.0], "algorithms": ["dpsgd"]}})
        cell, audit = exp.cells()[0], exp.audits[0]
        assert cell.dataset_revision == revision and audit.dataset_revision == revision
        unrevised = dataclasses.replace(cell, dataset_revision=0)
        assert (cell.key == unrevised.key) is (revision == 0)
        assert ("dataset_revision" in cell.identity()) is (revision > 0)
        assert (audit.key == dataclasses.replace(audit, dataset_revision=0).key) is (revision == 0)
