"""Tests of the `credit_card` loader (dpbench/data/creditcard.py).

Most tests write a small synthetic creditcard.csv (Kaggle layout: quoted header, quoted Class)
into tmp_path; one test reads the real user-supplied file and is skipped when it is absent.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import pytest

from dpbench import data
from dpbench.core.errors import DataError
from dpbench.data import creditcard

REPO = Path(__file__).resolve().parents[2]
OFFLINE = Path(os.environ.get("DPBENCH_DATA") or REPO.parent / "shared" / "data")

ROWS, FRAUDS = 400, 30


def write_creditcard(path: Path, rows: int = ROWS, frauds: int = FRAUDS, seed: int = 7) -> Path:
    """A small file in the Kaggle layout: "Time","V1",...,"V28","Amount","Class"; Class quoted."""
    rng = np.random.default_rng(seed)
    time = np.sort(rng.uniform(0, 172_792, rows)).round()
    v = rng.standard_normal((rows, 28)) * 2.0
    amount = rng.lognormal(3.0, 1.5, rows).round(2)
    cls = np.zeros(rows, dtype=int)
    cls[rng.choice(rows, frauds, replace=False)] = 1
    v[cls == 1, 0] -= 3.0  # frauds differ in V1
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join(f'"{c}"' for c in creditcard.COLUMNS)]
    for i in range(rows):
        vals = [f"{time[i]:.0f}", *(repr(float(x)) for x in v[i]), f"{amount[i]:.2f}", f'"{cls[i]}"']
        lines.append(",".join(vals))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def card_dir(tmp_path: Path) -> Path:
    write_creditcard(tmp_path / "creditcard" / "creditcard.csv")
    return tmp_path


def all_rows(ds: data.Dataset) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([ds.X_train, ds.X_val, ds.X_test]), np.concatenate([ds.y_train, ds.y_val, ds.y_test])


def sorted_rows(X: np.ndarray) -> np.ndarray:
    return X[np.lexsort(X.T[::-1])]


def test_balanced_subsample(card_dir: Path) -> None:
    ds = data.load("credit_card", seed=0, data_dir=card_dir)
    X, y = all_rows(ds)
    assert X.shape == (2 * FRAUDS, 31) and ds.n_features == 31
    assert (y == 1).sum() == FRAUDS and (y == -1).sum() == FRAUDS
    assert set(np.unique(y)) == {-1.0, 1.0}
    # default fractions 0.2/0.2 on 60 rows: 12 test, 12 val, 36 train; stratified: 6 frauds each
    assert (len(ds.y_test), len(ds.y_val), ds.n_train) == (12, 12, 36)
    assert (ds.y_test == 1).sum() == 6 and (ds.y_val == 1).sum() == 6
    assert ds.feature_names == (*creditcard.FEATURES, "intercept")
    prov = ds.provenance
    assert prov["rows_raw"] == ROWS and prov["rows_clean"] == 2 * FRAUDS and prov["n_used"] == 2 * FRAUDS
    assert prov["frauds_in_file"] == FRAUDS and prov["matches_published_counts"] is False
    assert "default_rng(0)" in prov["balance"] and "fixed" in prov["balance"]


def test_norm_bound_and_scaling(card_dir: Path) -> None:
    ds = data.load("credit_card", seed=3, data_dir=card_dir)
    scale = math.sqrt(31)  # g = 30 numeric columns -> divide by sqrt(31), intercept 1/sqrt(31)
    for X in (ds.X_train, ds.X_val, ds.X_test):
        assert np.all(np.einsum("ij,ij->i", X, X) <= 1.0 + 1e-12)
        np.testing.assert_allclose(X[:, -1], 1.0 / scale)
    X, _ = all_rows(ds)
    # min-max with the ranges of the 60 used rows (not of the training split): every column
    # reaches exactly 0 and 1 over the whole subsample, whatever the split
    np.testing.assert_allclose(X[:, :-1].min(axis=0) * scale, 0.0, atol=1e-12)
    np.testing.assert_allclose(X[:, :-1].max(axis=0) * scale, 1.0, atol=1e-12)
    assert "before the split" in ds.provenance["scaling"] and "non-private" in ds.provenance["scaling"]
    assert ds.provenance["max_row_norm"] <= 1.0


def test_determinism_fixed_rows_seed_changes_split(card_dir: Path) -> None:
    a = data.load("credit_card", seed=0, data_dir=card_dir)
    creditcard.clear_caches()
    b = data.load("credit_card", seed=0, data_dir=card_dir)
    for key in ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    c = data.load("credit_card", seed=1, data_dir=card_dir)
    # the 60-row set (and its features) is fixed; only the split changes with the repetition seed
    np.testing.assert_array_equal(sorted_rows(all_rows(a)[0]), sorted_rows(all_rows(c)[0]))
    assert not np.array_equal(a.X_test, c.X_test)
    # balance_seed picks other normal rows (same frauds)
    d = data.load("credit_card", seed=0, data_dir=card_dir, balance_seed=1)
    assert not np.array_equal(sorted_rows(all_rows(a)[0]), sorted_rows(all_rows(d)[0]))
    assert (all_rows(d)[1] == 1).sum() == FRAUDS


def test_balanced_rows_helper() -> None:
    label = np.array([0, 1, 0, 0, 1, 0, 0, 0])
    rows = creditcard.balanced_rows(label, 0)
    assert rows.tolist() == sorted(rows.tolist()) and len(rows) == 4
    assert set(np.flatnonzero(label == 1)) <= set(rows.tolist())
    np.testing.assert_array_equal(rows, creditcard.balanced_rows(label, 0))
    with pytest.raises(ValueError, match="at least as many normal rows"):
        creditcard.balanced_rows(np.array([0, 0]), 0)


def test_unbalanced_n_and_path_option(card_dir: Path, tmp_path: Path) -> None:
    full = data.load("credit_card", seed=0, data_dir=card_dir, balanced=False)
    X, y = all_rows(full)
    assert X.shape[0] == ROWS and (y == 1).sum() == FRAUDS
    sub = data.load("credit_card", seed=0, n=40, data_dir=card_dir)
    assert all_rows(sub)[0].shape[0] == 40
    elsewhere = write_creditcard(tmp_path / "other" / "cards.csv")
    via_path = data.load("credit_card", seed=0, path=str(elsewhere), data_dir=tmp_path / "nowhere")
    base = data.load("credit_card", seed=0, data_dir=card_dir)
    np.testing.assert_array_equal(via_path.X_train, base.X_train)  # same content, same result
    assert via_path.provenance["files"][0]["path"] == str(elsewhere.absolute())
    np.testing.assert_array_equal(data.load("credit_card", seed=0, path=elsewhere).X_train, base.X_train)  # a Path


def test_sha256_recorded_not_verified(card_dir: Path) -> None:
    ds = data.load("credit_card", data_dir=card_dir)
    raw = (card_dir / "creditcard" / "creditcard.csv").read_bytes()
    assert ds.provenance["files"][0]["sha256"] == hashlib.sha256(raw).hexdigest()
    assert ds.provenance["sha256_verified"] is False


def test_absent_file_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        data.load("credit_card", data_dir=tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and "'credit_card'" in msg
    assert str((tmp_path / "creditcard" / "creditcard.csv").absolute()) in msg
    assert "mlg-ulb/creditcardfraud" in msg and "$DPBENCH_DATA/creditcard/creditcard.csv" in msg
    missing = tmp_path / "x.csv"
    with pytest.raises(DataError) as err:
        data.load("credit_card", path=str(missing))
    msg = str(err.value)
    assert "\n" not in msg and str(missing.absolute()) in msg and "option `path`" in msg
    assert not (tmp_path / "creditcard").exists()  # nothing written


def test_bad_file_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "creditcard" / "creditcard.csv"
    bad.parent.mkdir()
    bad.write_text("Time,V1,Class\n0,1.0,0\n")
    with pytest.raises(DataError) as err:
        data.load("credit_card", data_dir=tmp_path)
    msg = str(err.value)
    assert "\n" not in msg and "cannot parse" in msg and str(bad.absolute()) in msg
    write_creditcard(bad, rows=50, frauds=0)
    with pytest.raises(DataError, match="at least as many normal rows"):
        data.load("credit_card", data_dir=tmp_path)
    with pytest.raises(ValueError, match="every row of the training split has label -1"):  # one class: refused
        data.load("credit_card", data_dir=tmp_path, balanced=False)


def test_options() -> None:
    assert data.option_names("credit_card") == {"path", "balanced", "balance_seed", "bounds"}
    info = data.DATASETS["credit_card"]
    assert info.origin == "user-supplied" and info.param("path").path and info.param("path").default is None
    with pytest.raises(ValueError, match="balanced: must be true or false"):
        data.load("credit_card", balanced="yes")
    with pytest.raises(ValueError, match="balance_seed: must be >= 0, got -1"):
        data.load("credit_card", balance_seed=-1)
    with pytest.raises(ValueError, match="balance_seed: must be an integer"):
        data.load("credit_card", balance_seed=1.5)
    with pytest.raises(ValueError, match="path: must be a file path or null"):
        data.load("credit_card", path="")
    with pytest.raises(ValueError, match="colour: unknown parameter of dataset 'credit_card'; allowed: path, balanced, "
                                         "balance_seed, bounds, n, test_fraction, val_fraction$"):
        data.load("credit_card", colour=1)


def test_verify_records(card_dir: Path, tmp_path: Path) -> None:
    uci_keys = set(data.verify(tmp_path / "empty")[0])
    assert all(r["dataset"] != "credit_card" for r in data.verify(tmp_path / "empty"))
    absent = [r for r in data.verify(tmp_path / "empty", include_absent_optional=True) if r["dataset"] == "credit_card"]
    assert len(absent) == 1
    rec = absent[0]
    assert set(rec) == uci_keys | {"required"} and rec["required"] is False
    assert rec["actual_sha256"] is None and rec["ok"] is False and rec["error"] == "absent (user-supplied)"
    present = [r for r in data.verify(card_dir) if r["dataset"] == "credit_card"]
    assert len(present) == 1 and present[0]["ok"] is True and present[0]["rows"] == ROWS
    assert present[0]["expected_sha256"] is None and present[0]["file"] == "creditcard/creditcard.csv"
    assert present[0]["actual_sha256"] == hashlib.sha256((card_dir / "creditcard/creditcard.csv").read_bytes()).hexdigest()


def test_real_file() -> None:
    path = OFFLINE / "creditcard" / "creditcard.csv"
    if not path.is_file():
        pytest.skip(
            f"creditcard.csv not present in $DPBENCH_DATA/creditcard ({path}); see dpbench/data/creditcard.py "
            "(Kaggle mlg-ulb/creditcardfraud, user-supplied)"
        )
    ds = data.load("credit_card", seed=0, data_dir=OFFLINE)
    X, y = all_rows(ds)
    assert X.shape == (984, 31) and (y == 1).sum() == 492
    assert (len(ds.y_test), len(ds.y_val), ds.n_train) == (197, 197, 590)
    assert ds.provenance["rows_raw"] == 284_807 and ds.provenance["matches_published_counts"] is True
    assert np.all(np.einsum("ij,ij->i", X, X) <= 1.0 + 1e-12)
