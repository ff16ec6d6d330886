"""Tests of dpbench.data: UCI loaders on the offline files, verify, errors, ucimlrepo fallback, synthetic data.

The UCI tests read the original files from $DPBENCH_DATA (default ../shared/data beside the
repository) and skip, saying where they looked, when a file is absent. No test touches the
network: the ucimlrepo fallback is exercised with a fake `fetch_ucirepo`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpbench import data
from dpbench.core.errors import DataError
from dpbench.core.registry import Param
from dpbench.data import synthetic, uci

REPO = Path(__file__).resolve().parents[2]
OFFLINE = Path(os.environ.get("DPBENCH_DATA") or REPO.parent / "shared" / "data")

# name -> (files, load kwargs, rows_raw, rows_clean, n_used, positive rate, tolerance)
UCI_CASES = {
    "adult": (("adult/adult.data", "adult/adult.test"), {}, 48842, 45222, 45222, 0.2478, 0.002),
    "bank": (("bank/bank-additional.zip",), {}, 41188, 41188, 41188, 0.1127, 0.002),
    "kddcup99": (("kddcup99/kddcup.data_10_percent.gz",), {"n": 70000}, 494021, 494021, 70000, 0.803, 0.01),
    "breast_cancer": (("breast-cancer-wisconsin/breast-cancer-wisconsin.data",), {}, 699, 683, 683, 0.350, 0.002),
    "iris": (("iris/iris.data",), {}, 150, 150, 150, 1 / 3, 1e-9),
}


def need(*rel: str) -> Path:
    for r in rel:
        if not (OFFLINE / r).is_file():
            pytest.skip(f"{r} not found at {OFFLINE}; set DPBENCH_DATA to a folder with the UCI layout")
    return OFFLINE


def digest(ds: data.Dataset) -> str:
    h = hashlib.sha256()
    for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val, ds.X_test, ds.y_test):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def assert_same(a: data.Dataset, b: data.Dataset) -> None:
    for key in ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    assert a.feature_names == b.feature_names


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """ucimlrepo.fetch_ucirepo that fails like an offline machine; records the ids asked for."""
    import ucimlrepo

    calls: list[int] = []

    def offline(name=None, id=None):  # noqa: A002 - ucimlrepo's signature
        calls.append(id)
        raise ConnectionError("Error connecting to server")

    monkeypatch.setattr(ucimlrepo, "fetch_ucirepo", offline)
    return calls


# ----------------------------------------------------------------------------- UCI on real files


@pytest.mark.parametrize("name", list(UCI_CASES))
def test_uci_loader(name: str) -> None:
    files, kw, rows_raw, rows_clean, n_used, rate, tol = UCI_CASES[name]
    root = need(*files)
    ds = data.load(name, seed=0, data_dir=root, **kw)
    p = ds.provenance
    assert ds.task == "classification" and ds.name == name
    assert (p["rows_raw"], p["rows_clean"], p["n_used"]) == (rows_raw, rows_clean, n_used)
    assert p["source"] == "offline file"
    assert [f["sha256"] for f in p["files"]] == [uci.SHA256[f] for f in files]
    assert p["split"] == {"test": round(0.2 * n_used), "val": round(0.2 * n_used),
                          "train": n_used - 2 * round(0.2 * n_used)}  # fmt: skip
    assert (ds.n_train, len(ds.y_val), len(ds.y_test)) == (p["split"]["train"], p["split"]["val"], p["split"]["test"])
    X = np.vstack([ds.X_train, ds.X_val, ds.X_test])
    y = np.concatenate([ds.y_train, ds.y_val, ds.y_test])
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert np.isfinite(X).all() and np.isfinite(y).all()
    assert np.linalg.norm(X, axis=1).max() <= 1 + 1e-12
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert abs((y == 1).mean() - rate) <= tol
    # stratified: every split has (almost) the overall positive rate
    for part in (ds.y_train, ds.y_val, ds.y_test):
        assert abs((part == 1).mean() - (y == 1).mean()) < 0.01 + 1.0 / len(part)
    assert X.shape[1] == len(ds.feature_names) and ds.feature_names[-1] == "intercept"
    g = len(p["numeric_columns"]) + len(p["categorical_columns"])
    np.testing.assert_allclose(X[:, -1], 1 / np.sqrt(g + 1), rtol=0, atol=0)
    assert ds.X_train[:, :-1].min() >= 0.0


def test_uci_details() -> None:
    root = need("adult/adult.data", "adult/adult.test", "iris/iris.data", "bank/bank-additional.zip")
    adult = data.load("adult", data_dir=root)
    assert adult.n_features == 105
    assert "age" in adult.feature_names and "workclass=Private" in adult.feature_names
    assert not any("?" in f for f in adult.feature_names)
    bank = data.load("bank", data_dir=root)
    assert "job=unknown" in bank.feature_names and "duration" in bank.feature_names
    assert "duration" not in data.load("bank", data_dir=root, drop_duration=True).feature_names
    iris = data.load("iris", data_dir=root)
    assert iris.provenance["label_rule"].startswith("'Iris-virginica'")
    assert data.load("iris", data_dir=root, positive_class="setosa").provenance["positive_rate"] == pytest.approx(1 / 3)


def test_kdd_constant_columns_and_cache() -> None:
    root = need("kddcup99/kddcup.data_10_percent.gz")
    ds = data.load("kddcup99", seed=0, n=70000, data_dir=root)
    assert ds.provenance["dropped_constant_columns"] == ["num_outbound_cmds", "is_host_login"]
    assert "service=http" in ds.feature_names and "num_outbound_cmds" not in ds.feature_names
    # parsed once per process: a second load must not re-read the gzip
    before = uci._parse_raw_cached.cache_info().misses
    data.load("kddcup99", seed=1, n=1000, data_dir=root)
    assert uci._parse_raw_cached.cache_info().misses == before


def test_breast_cancer_impute_keeps_699() -> None:
    root = need("breast-cancer-wisconsin/breast-cancer-wisconsin.data")
    ds = data.load("breast_cancer", data_dir=root, missing="impute")
    assert ds.provenance["rows_clean"] == 699 and ds.provenance["n_used"] == 699
    assert "bare_nuclei" in ds.provenance["imputed_medians"]


def test_determinism_and_seed_dependence() -> None:
    root = need("breast-cancer-wisconsin/breast-cancer-wisconsin.data", "adult/adult.data", "adult/adult.test")
    a = data.load("breast_cancer", seed=3, data_dir=root)
    assert_same(a, data.load("breast_cancer", seed=3, data_dir=root))
    b = data.load("breast_cancer", seed=4, data_dir=root)
    assert a.X_train.shape == b.X_train.shape and not np.array_equal(a.X_train, b.X_train)
    # bit-identical in a fresh process
    adult = data.load("adult", seed=7, n=5000, data_dir=root)
    code = (
        "import hashlib,numpy as np; from dpbench import data; "
        f"ds=data.load('adult', seed=7, n=5000, data_dir={str(root)!r}); h=hashlib.sha256(); "
        "[h.update(np.ascontiguousarray(a).tobytes()) for a in "
        "(ds.X_train, ds.y_train, ds.X_val, ds.y_val, ds.X_test, ds.y_test)]; print(h.hexdigest())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == digest(adult)


# ----------------------------------------------------------------------------- verify and errors


def test_verify_real_folder() -> None:
    root = need(*uci.SHA256)
    records = data.verify(root)
    assert {r["file"] for r in records} == set(uci.SHA256)
    assert all(r["ok"] for r in records), [r for r in records if not r["ok"]]
    rows = {r["file"]: r["rows"] for r in records}
    assert rows == {
        "adult/adult.data": 32561,
        "adult/adult.test": 16281,
        "bank/bank-additional.zip": 41188,
        "kddcup99/kddcup.data_10_percent.gz": 494021,
        "breast-cancer-wisconsin/breast-cancer-wisconsin.data": 699,
        "iris/iris.data": 150,
    }


def test_corrupt_file(tmp_path: Path, no_network: list[int]) -> None:
    root = need("iris/iris.data", "breast-cancer-wisconsin/breast-cancer-wisconsin.data")
    for rel in ("iris/iris.data", "breast-cancer-wisconsin/breast-cancer-wisconsin.data"):
        (tmp_path / rel).parent.mkdir(parents=True)
        shutil.copyfile(root / rel, tmp_path / rel)
    bad = tmp_path / "iris" / "iris.data"
    raw = bytearray(bad.read_bytes())
    raw[100] = ord("9") if raw[100] != ord("9") else ord("8")
    bad.write_bytes(bytes(raw))
    records = {r["file"]: r for r in data.verify(tmp_path)}
    assert records["iris/iris.data"]["ok"] is False and records["iris/iris.data"]["rows"] is None
    assert records["iris/iris.data"]["actual_sha256"] not in (None, uci.SHA256["iris/iris.data"])
    assert records["breast-cancer-wisconsin/breast-cancer-wisconsin.data"]["ok"] is True
    assert records["adult/adult.data"]["ok"] is False and records["adult/adult.data"]["actual_sha256"] is None
    with pytest.raises(DataError) as err:
        data.load("iris", data_dir=tmp_path)
    msg = str(err.value)
    assert str(bad.absolute()) in msg and "corrupt" in msg and "DPBENCH_DATA" in msg and "\n" not in msg
    assert no_network == []  # a corrupt file is an error, never a silent fallback
    data.load("breast_cancer", data_dir=tmp_path)  # the intact file still loads


def test_missing_folder(tmp_path: Path, no_network: list[int]) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DataError) as err:
        data.load("adult", data_dir=missing)
    msg = str(err.value)
    assert "\n" not in msg and "'adult'" in msg
    for rel in ("adult/adult.data", "adult/adult.test", "adult/ucimlrepo-adult.csv"):
        assert str((missing / rel).absolute()) in msg
    assert "DPBENCH_DATA" in msg and "ucimlrepo" in msg and "ConnectionError" in msg
    assert no_network == [2]
    assert not missing.exists()  # nothing written on failure


def test_corrupt_ucimlrepo_cache(tmp_path: Path, no_network: list[int]) -> None:
    cache = tmp_path / "iris" / "ucimlrepo-iris.csv"
    cache.parent.mkdir()
    cache.write_text("sepal_length,oops\n1,2\n")
    with pytest.raises(DataError) as err:
        data.load("iris", data_dir=tmp_path)
    msg = str(err.value)
    assert str(cache.absolute()) in msg and "corrupt" in msg and "\n" not in msg
    assert no_network == []


def test_split_options() -> None:
    root = need("adult/adult.data", "adult/adult.test")
    ds = data.load("adult", n=30000, test_fraction=2000 / 30000, val_fraction=0.0, data_dir=root)
    assert (ds.n_train, len(ds.y_val), len(ds.y_test)) == (28000, 0, 2000)  # paper 004's Adult setting
    assert ds.X_val.shape == (0, ds.n_features)
    with pytest.raises(ValueError, match="exceeds"):
        data.load("adult", n=50000, data_dir=root)


def test_bad_name_and_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown dataset 'adults'; choose one of adult, bank, breast_cancer"):
        data.load("adults")
    with pytest.raises(ValueError, match="color: unknown parameter of dataset 'iris'; allowed: positive_class, bounds, "
                                         "n, test_fraction, val_fraction$"):
        data.load("iris", data_dir=tmp_path, color="red")
    with pytest.raises(ValueError, match="positive_class: must be one of virginica, versicolor, setosa; got 'rose'"):
        data.load("iris", data_dir=tmp_path, positive_class="rose")
    with pytest.raises(ValueError, match="foo: unknown parameter of dataset 'adult'; allowed: bounds, n, "
                                         "test_fraction, val_fraction$"):
        data.load("adult", data_dir=tmp_path, foo=1)
    with pytest.raises(ValueError, match="features: must be one of gaussian, student_t, lognormal"):
        data.load("synthetic_linear", features="cauchy")
    with pytest.raises(ValueError, match=r"test_fraction: test_fraction \+ val_fraction must be < 1"):
        data.load("synthetic_linear", n=100, test_fraction=0.6, val_fraction=0.5)
    with pytest.raises(ValueError, match="val_fraction: must be < 1"):
        data.load("iris", data_dir=tmp_path, val_fraction=1.0)
    with pytest.raises(ValueError, match="drop_duration: must be true or false"):
        data.load("bank", data_dir=tmp_path, drop_duration="yes")
    assert data.option_names("iris") == {"positive_class", "bounds"}
    assert data.option_names("breast_cancer") == {"missing", "bounds"}
    assert data.option_names("bank") == {"drop_duration", "bounds"}
    assert data.option_names("adult") == {"bounds"}
    synthetic_options = {"d", "noise_mu", "noise_sigma", "features", "w_star", "normalize"}
    assert data.option_names("synthetic_logistic") == synthetic_options
    assert set(data.DATASETS) == {"adult", "bank", "kddcup99", "breast_cancer", "iris",
                                  "synthetic_linear", "synthetic_logistic", "credit_card",
                                  "synthetic_population", "csv"}  # fmt: skip
    for info in data.DATASETS.values():
        assert info.description and info.citation and info.task in ("classification", "regression")
        assert info.origin in ("uci", "synthetic", "user-supplied") and info.source == "built-in"
        assert [p.name for p in info.params][-3:] == ["n", "test_fraction", "val_fraction"]


def test_validate_checks_a_spec_options_mapping() -> None:
    """DATASETS[name].validate: the whole `options:` of a spec (own and common options), defaults filled."""
    iris = data.DATASETS["iris"]
    assert iris.validate({"n": 60}) == {"positive_class": "virginica", "bounds": None, "n": 60, "test_fraction": 0.2,
                                        "val_fraction": 0.2}
    assert iris.validate({"test_fraction": 0}, fill=False) == {"test_fraction": 0.0}
    for name, options, message in [
        ("adult", {"n": -5}, "n: must be >= 1, got -5"),
        ("adult", {"n": 2.5}, "n: must be an integer, got 2.5"),
        ("adult", {"test_fraction": 1.5}, "test_fraction: must be <= 1, got 1.5"),
        ("adult", {"test_fraction": 1}, "test_fraction: must be < 1, got 1"),
        ("adult", {"test_fraction": 0.5, "val_fraction": 0.5},
         "test_fraction: test_fraction + val_fraction must be < 1"),
        ("breast_cancer", {"missing": "mean"}, "missing: must be one of drop, impute; got 'mean'"),
        ("synthetic_logistic", {"noise_sigma": 1.0}, "noise_sigma: must be < 1"),
        ("synthetic_linear", {"noise_sigma": 0}, "noise_sigma: must be > 0"),
        ("synthetic_linear", {"d": 0}, "d: must be >= 1"),
        ("credit_card", {"path": ""}, "path: must be a file path or null"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            data.DATASETS[name].validate(options)
    # the test split of synthetic_population is the whole pool: test_fraction is ignored, so no sum rule
    assert data.DATASETS["synthetic_population"].validate({"test_fraction": 0.5, "val_fraction": 0.6})["val_fraction"] \
        == 0.6
    assert data.DATASETS["synthetic_linear"].validate({"noise_sigma": 3})["noise_sigma"] == 3.0


def test_a_data_set_declared_once_is_registered_and_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loader decorated with `dataset(...)` is the whole declaration: it is listed, its annotated
    keywords are validated options (with the common ones), and data.load reaches it."""
    monkeypatch.setattr(data.DATASETS, "_entries", dict(data.DATASETS.items()))  # removed again after the test

    @data.dataset("tiny_test_set", description="two clusters", citation="a test", task="classification",
                  origin="synthetic")
    def tiny(common: data.Common, *,
             shift: Annotated[float, Param("distance between the clusters", minimum=0)] = 1.0) -> data.Dataset:
        rng = np.random.default_rng(common.seed)
        n = common.n or 40
        y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
        X = np.clip(rng.normal(size=(n, 2)) * 0.1 + shift * y[:, None] * 0.3, -0.7, 0.7)
        cut = n - round(common.test_fraction * n)
        return data.Dataset(name="tiny_test_set", task="classification", X_train=X[:cut], y_train=y[:cut],
                            X_val=X[:0], y_val=y[:0], X_test=X[cut:], y_test=y[cut:], feature_names=("a", "b"),
                            provenance={"shift": shift})

    info = data.DATASETS["tiny_test_set"]
    assert tiny.dpbench_component is info and info.load is tiny and info.origin == "synthetic"
    assert "tiny_test_set" in data.DATASETS and data.option_names("tiny_test_set") == {"shift"}
    assert [p.name for p in info.params] == ["shift", "n", "test_fraction", "val_fraction"]
    ds = data.load("tiny_test_set", seed=3, n=20, test_fraction=0.25, shift=2)
    assert (ds.n_train, ds.X_test.shape[0], ds.provenance["shift"]) == (15, 5, 2.0)
    with pytest.raises(ValueError, match="shift: must be >= 0"):
        data.load("tiny_test_set", shift=-1)
    with pytest.raises(ValueError, match="registered twice"):
        data.dataset("tiny_test_set", description="again", citation="", task="classification", origin="synthetic")(tiny)

    def clashing(common: data.Common, *, n: Annotated[int, Param("rows")] = 3) -> data.Dataset:
        raise AssertionError

    with pytest.raises(TypeError, match="common to all data sets"):
        data.dataset("clash", description="", citation="", task="classification", origin="synthetic")(clashing)
    assert "clash" not in data.DATASETS


def test_importing_reads_no_data_file(tmp_path: Path) -> None:
    """Registering the built-ins, listing and validating them never opens a data file."""
    code = ("import builtins, io; opened = []; real = io.open\n"
            "def spy(file, *a, **k):\n    opened.append(str(file)); return real(file, *a, **k)\n"
            "builtins.open = io.open = spy\n"
            "from dpbench import data\n"
            "[info.validate({}) for info in data.DATASETS.values() if info.name != 'csv']\n"
            "print([f for f in opened if 'shared' in f or f.endswith(('.data', '.csv', '.gz', '.zip'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "DPBENCH_DATA": str(OFFLINE)})
    assert out.stdout.strip() == "[]"


def test_uci_declarations_are_the_only_place() -> None:
    """Files, sums, label rules and public ranges all come from the UciSpec declarations."""
    assert set(uci.SHA256) == {path for spec in uci.SPECS.values() for path in spec.paths}
    assert [name for name, info in data.DATASETS.items() if info.origin == "uci"] == list(uci.SPECS)
    iris = uci.SPECS["iris"]
    assert iris.label.resolve(iris.labels, {"positive_class": "setosa"}) == (
        {"Iris-setosa"}, "'Iris-setosa' -> +1, the other two species -> -1 (one-vs-rest)")
    kdd = uci.SPECS["kddcup99"]
    assert kdd.label.resolve(["normal", "smurf", "neptune"], {})[0] == {"smurf", "neptune"}
    assert set(uci.SPECS["breast_cancer"].public_ranges.values()) == {(1.0, 10.0)}
    assert list(uci.SPECS["breast_cancer"].public_ranges) == list(uci.SPECS["breast_cancer"].numeric)


def test_data_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DPBENCH_DATA", raising=False)
    assert data.data_dir() == Path("data")
    monkeypatch.setenv("DPBENCH_DATA", str(tmp_path))
    assert data.data_dir() == tmp_path
    assert data.data_dir(tmp_path / "x") == tmp_path / "x"


# ----------------------------------------------------------------------------- ucimlrepo fallback


def _dotdict(d: dict):
    from ucimlrepo.dotdict import dotdict

    return dotdict(d)


def _fake_result(features: pd.DataFrame, targets: pd.DataFrame, ids: pd.DataFrame | None = None):
    """Shaped like ucimlrepo.fetch_ucirepo's answer (see ucimlrepo/fetch.py)."""
    original = pd.concat([x for x in (ids, features, targets) if x is not None], axis=1)
    return _dotdict(
        {
            "data": _dotdict({"ids": ids, "features": features, "targets": targets,
                              "original": original, "headers": original.columns}),  # fmt: skip
            "metadata": _dotdict({"uci_id": 0, "name": "fake"}),
            "variables": pd.DataFrame({"name": original.columns}),
        }
    )


def _fake_iris(root: Path):
    df = pd.read_csv(root / "iris/iris.data", header=None)
    df.columns = ["sepal length", "sepal width", "petal length", "petal width", "class"]
    return _fake_result(df.iloc[:, :4], df[["class"]])


def _fake_breast_cancer(root: Path):
    df = pd.read_csv(root / "breast-cancer-wisconsin/breast-cancer-wisconsin.data", header=None, na_values="?")
    names = ["Sample_code_number", "Clump_thickness", "Uniformity_of_cell_size", "Uniformity_of_cell_shape",
             "Marginal_adhesion", "Single_epithelial_cell_size", "Bare_nuclei", "Bland_chromatin",
             "Normal_nucleoli", "Mitoses", "Class"]  # fmt: skip
    df.columns = names
    return _fake_result(df[names[1:10]], df[["Class"]], df[names[:1]])


def _fake_adult(root: Path):
    cols = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
            "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
            "native-country", "income"]  # fmt: skip
    train = pd.read_csv(root / "adult/adult.data", header=None, names=cols, skipinitialspace=True)
    test = pd.read_csv(root / "adult/adult.test", header=None, names=cols, skipinitialspace=True, skiprows=1)
    df = pd.concat([train, test], ignore_index=True)
    # ucimlrepo's copy mixes NaN and '?' for missing values; mimic both
    df.loc[df.index % 2 == 0, "workclass"] = df.loc[df.index % 2 == 0, "workclass"].replace("?", np.nan)
    return _fake_result(df[cols[:-1]], df[["income"]])


def _fake_bank_full():
    rng = np.random.default_rng(0)
    cols = ["age", "job", "marital", "education", "default", "balance", "housing", "loan", "contact",
            "day_of_week", "month", "duration", "campaign", "pdays", "previous", "poutcome"]  # fmt: skip
    X = pd.DataFrame({c: rng.integers(0, 5, 45211) for c in cols})
    return _fake_result(X, pd.DataFrame({"y": np.where(rng.random(45211) < 0.1, "yes", "no")}))


@pytest.mark.parametrize(
    "name, files, fake",
    [
        ("iris", ("iris/iris.data",), _fake_iris),
        ("breast_cancer", ("breast-cancer-wisconsin/breast-cancer-wisconsin.data",), _fake_breast_cancer),
        ("adult", ("adult/adult.data", "adult/adult.test"), _fake_adult),
    ],
)
def test_ucimlrepo_fallback(name, files, fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ucimlrepo

    root = need(*files)
    calls: list[int] = []

    def fetch(name=None, id=None):  # noqa: A002
        calls.append(id)
        return fake(root)

    monkeypatch.setattr(ucimlrepo, "fetch_ucirepo", fetch)
    offline = data.load(name, seed=5, data_dir=root)
    fetched = data.load(name, seed=5, data_dir=tmp_path)
    assert calls == [data.DATASETS[name].uci_id]
    assert_same(offline, fetched)
    cache = tmp_path / uci.SPECS[name].folder / f"ucimlrepo-{name}.csv"
    assert cache.is_file()
    assert fetched.provenance["source"] == "ucimlrepo cache"
    assert fetched.provenance["rows_raw"] == offline.provenance["rows_raw"]
    # next time: read from the cache, no fetch
    monkeypatch.setattr(ucimlrepo, "fetch_ucirepo", lambda **kw: pytest.fail("fetched twice"))
    uci.clear_caches()
    again = data.load(name, seed=5, data_dir=tmp_path)
    assert_same(offline, again)
    assert again.provenance["files"][0]["path"] == str(cache.absolute())


def test_ucimlrepo_bank_full_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ucimlrepo

    monkeypatch.setattr(ucimlrepo, "fetch_ucirepo", lambda name=None, id=None: _fake_bank_full())
    with pytest.raises(DataError) as err:
        data.load("bank", data_dir=tmp_path)
    msg = str(err.value)
    assert "bank-additional" in msg and "45,211" in msg and "\n" not in msg
    assert not (tmp_path / "bank").exists()


# ----------------------------------------------------------------------------- synthetic


def test_synthetic_shapes_and_w_star() -> None:
    a = data.load("synthetic_linear", seed=0, n=20000)
    b = data.load("synthetic_linear", seed=1, n=20000)
    assert a.task == "regression" and a.X_train.shape == (12000, 10) and a.X_test.shape == (4000, 10)
    assert a.y_val.shape == (4000,) and a.feature_names[0] == "x0"
    np.testing.assert_array_equal(a.w_star, b.w_star)
    assert np.linalg.norm(a.w_star) == pytest.approx(1.0)
    assert not np.array_equal(a.X_train, b.X_train)
    assert_same(a, data.load("synthetic_linear", seed=0, n=20000))
    ones = data.load("synthetic_logistic", n=1000, d=4, w_star="ones")
    np.testing.assert_allclose(ones.w_star, 0.5)
    assert data.load("synthetic_logistic", n=1000, d=4).w_star.shape == (4,)
    assert data.load("synthetic_linear").provenance["n_used"] == 100_000
    assert a.provenance["norm_bound"] is None


def _all(ds: data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([ds.X_train, ds.X_val, ds.X_test]), np.concatenate([ds.y_train, ds.y_val, ds.y_test])


def test_synthetic_linear_noise() -> None:
    ds = data.load("synthetic_linear", seed=2, n=100_000, noise_sigma=1.0)
    X, y = _all(ds)
    e = y - X @ ds.w_star
    se = e.std() / np.sqrt(e.size)
    assert abs(e.mean()) < 4 * se
    assert e.std() == pytest.approx(np.sqrt((np.e - 1) * np.e), rel=0.05)
    heavy = data.load("synthetic_linear", seed=2, n=100_000, noise_sigma=1.5)
    X, y = _all(heavy)
    e = y - X @ heavy.w_star
    skew = np.mean((e - e.mean()) ** 3) / e.std() ** 3
    assert skew > 2


def test_synthetic_logistic() -> None:
    ds = data.load("synthetic_logistic", seed=0, n=50_000)
    assert ds.task == "classification"
    X, y = _all(ds)
    assert set(np.unique(y)) == {-1.0, 1.0}
    agree = np.mean(np.where(X @ ds.w_star >= 0, 1.0, -1.0) == y)
    assert agree > 0.75
    e = synthetic.loglogistic_noise(np.random.default_rng(0), 200_000, 0.0, 0.4)
    assert abs(e.mean()) < 4 * e.std() / np.sqrt(e.size)
    with pytest.raises(ValueError, match="< 1"):
        data.load("synthetic_logistic", n=100, noise_sigma=1.0)


def test_synthetic_heavy_features_and_normalize() -> None:
    for kind in ("student_t", "lognormal"):
        ds = data.load("synthetic_linear", n=20_000, features=kind)
        X, _ = _all(ds)
        assert abs(X.mean()) < 0.1 and np.abs(X).max() > 10
    ds = data.load("synthetic_logistic", n=5000, features="student_t", normalize=True)
    X, _ = _all(ds)
    assert np.linalg.norm(X, axis=1).max() <= 1 + 1e-12 and ds.provenance["norm_bound"] == 1.0


def _hill_tail_index(values: np.ndarray, k: int) -> float:
    """Hill's estimator of alpha in P(X > x) ~ x^-alpha from the k largest values."""
    top = np.sort(values)[-(k + 1):]
    return 1.0 / np.mean(np.log(top[1:] / top[0]))


def test_synthetic_noise_and_features_have_the_stated_tails() -> None:
    """Paper 004 §6 laws (docs/methods/heavy-tailed.md, Synthetic data): log-logistic(0, sigma) has tail
    index 1/sigma,
    log(log-normal) is normal, Student-t(3) features have tail index 3."""
    rng = np.random.default_rng(0)
    sigma = 0.4
    shift = np.pi * sigma / np.sin(np.pi * sigma)  # E[Delta] of LogLogistic(0, sigma)
    delta = synthetic.loglogistic_noise(rng, 400_000, 0.0, sigma) + shift
    assert _hill_tail_index(delta, 2_000) == pytest.approx(1.0 / sigma, rel=0.1)
    e = synthetic.lognormal_noise(rng, 400_000, 0.0, 1.0)
    log_delta = np.log(e + np.exp(0.5))
    assert stats.kstest(log_delta, "norm").pvalue > 0.01
    kurtosis = np.mean((e - e.mean()) ** 4) / e.var() ** 2 - 3.0  # 110.9 in theory, slow to converge
    assert kurtosis > 20
    X, _ = _all(data.load("synthetic_linear", seed=1, n=200_000, features="student_t"))
    assert _hill_tail_index(np.abs(X).ravel(), 4_000) == pytest.approx(3.0, rel=0.15)
    gaussian, _ = _all(data.load("synthetic_linear", seed=1, n=200_000))
    assert _hill_tail_index(np.abs(gaussian).ravel(), 4_000) > 6  # light tails: no power law
