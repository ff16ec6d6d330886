"""`dpbench data fetch` (dpbench/data/fetch.py) against a loopback mirror; no internet.

A ThreadingHTTPServer on 127.0.0.1 serves a folder in which the offline copies (../shared/data)
are packed into the archive layout of the real UCI URLs (static/public/2/adult.zip holding
adult.data and adult.test, ...), so the same paths work under a mirror base URL.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import shutil
import socket
import threading
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from dpbench import data
from dpbench.cli.main import main
from dpbench.core.errors import DataError
from dpbench.data import fetch as fetch_mod
from dpbench.data import uci


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pack(data_dir: Path, root: Path, corrupt: str | None = None) -> None:
    """Write the mirror of every fetch.SOURCES entry under `root`; `corrupt`: a file (e.g.
    "iris/iris.data") whose served copy gets one byte changed."""
    for name, source in fetch_mod.SOURCES.items():
        spec = uci.SPECS[name]
        target = root / source.path
        target.parent.mkdir(parents=True, exist_ok=True)

        def content(filename: str) -> bytes:
            raw = (data_dir / spec.folder / filename).read_bytes()
            if corrupt == f"{spec.folder}/{filename}":
                raw = raw[:10] + bytes([raw[10] ^ 1]) + raw[11:]
            return raw

        if not source.members:
            target.write_bytes(content(spec.files[0].name))
            continue
        with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            if name == "bank":
                zf.writestr("bank.zip", b"the other variant, not used by dpbench")
            for filename, member in source.members.items():
                zf.writestr(member, content(filename))


class _Mirror:
    def __init__(self, root: Path) -> None:
        self.requests: list[str] = []
        log = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, fmt, *args):  # record instead of printing to stderr
                log.append(self.path)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture(scope="module")
def served(data_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("mirror")
    _pack(data_dir, root)
    mirror = _Mirror(root)
    yield mirror
    mirror.close()


@pytest.fixture
def corrupt_mirror(data_dir: Path, tmp_path: Path):
    root = tmp_path / "bad-mirror"
    _pack(data_dir, root, corrupt="iris/iris.data")
    mirror = _Mirror(root)
    yield mirror
    mirror.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_uci_dataset_has_a_source():
    assert set(fetch_mod.SOURCES) == set(uci.SPECS)
    for name, source in fetch_mod.SOURCES.items():
        assert set(source.members) <= {f.name for f in uci.SPECS[name].files}
    assert fetch_mod.SOURCES["kddcup99"].url().startswith("http://kdd.ics.uci.edu/databases/")
    assert fetch_mod.SOURCES["iris"].url("http://m.example/uci/") == "http://m.example/uci/static/public/53/iris.zip"


@pytest.mark.parametrize("name", ["breast_cancer", "iris", "adult"])
def test_fetch_into_an_empty_folder_gives_the_offline_tables(name, served, data_dir: Path, tmp_path: Path):
    got = fetch_mod.fetch([name], tmp_path, base_url=served.url, progress=False)
    spec = uci.SPECS[name]
    assert [r.status for r in got] == ["fetched"] * len(spec.files)
    for file in spec.files:
        path = tmp_path / spec.folder / file.name
        assert _sha(path) == file.sha256 == _sha(data_dir / spec.folder / file.name)
    assert sorted(p.name for p in (tmp_path / spec.folder).iterdir()) == sorted(f.name for f in spec.files)
    fetched, offline = data.load(name, seed=0, data_dir=tmp_path), data.load(name, seed=0, data_dir=data_dir)
    assert (fetched.X_train == offline.X_train).all() and (fetched.y_test == offline.y_test).all()
    pd.testing.assert_frame_equal(uci.raw_table(name, tmp_path).frame, uci.raw_table(name, data_dir).frame)


def test_full_fetch_then_nothing_is_downloaded_again(served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(fetch_mod.ENV_BASE_URL, served.url)  # the environment variable as the base
    served.requests.clear()
    started = time.perf_counter()
    out = CliRunner().invoke(main, ["data", "fetch", "--data", str(tmp_path), "--no-progress"])
    seconds = time.perf_counter() - started
    assert out.exit_code == 0, out.output
    assert out.output.count("  fetched ") == 6 and "6 fetched" in out.output, out.output
    assert len(served.requests) == 5 and seconds < 15
    assert not [r for r in uci.verify(tmp_path) if not r["ok"]]
    mtimes = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    served.requests.clear()
    again = CliRunner().invoke(main, ["data", "fetch", "--data", str(tmp_path), "--no-progress"])
    assert again.exit_code == 0 and again.output.count("  present ") == 6 and "0 fetched" in again.output
    assert served.requests == []
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == mtimes


def test_bank_keeps_the_inner_zip_as_is(served, data_dir: Path, tmp_path: Path):
    fetch_mod.fetch(["bank"], tmp_path, base_url=served.url, progress=False)
    assert sorted(p.name for p in (tmp_path / "bank").iterdir()) == ["bank-additional.zip"]
    assert _sha(tmp_path / "bank" / "bank-additional.zip") == _sha(data_dir / "bank" / "bank-additional.zip")


def test_a_corrupt_download_is_rejected_and_leaves_nothing(corrupt_mirror, tmp_path: Path):
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(DataError) as err:
        fetch_mod.fetch(["iris"], dest, base_url=corrupt_mirror.url, progress=False)
    msg = str(err.value)
    expected = uci.SHA256["iris/iris.data"]
    assert "iris/iris.data" in msg and expected in msg and "\n" not in msg
    actual = msg.split("sha256 ")[1].split()[0]
    assert len(actual) == 64 and actual != expected
    assert list(dest.rglob("*")) == []  # no file, no temp file, not even the iris/ folder
    out = CliRunner().invoke(main, ["data", "fetch", "iris", "--data", str(dest), "--base-url",
                                    corrupt_mirror.url, "--no-progress"])
    assert out.exit_code == 1 and out.stderr.startswith("error: iris/iris.data") and out.stderr.count("\n") == 1


def test_a_present_file_with_a_wrong_sum_is_not_overwritten(served, tmp_path: Path):
    bad = tmp_path / "iris" / "iris.data"
    bad.parent.mkdir()
    bad.write_text("not iris\n")
    with pytest.raises(DataError, match="present but corrupt"):
        fetch_mod.fetch(["iris"], tmp_path, base_url=served.url, progress=False)
    assert bad.read_text() == "not iris\n"


def test_an_unreachable_server_fails_fast_in_one_line(tmp_path: Path):
    url = f"http://127.0.0.1:{_closed_port()}"
    started = time.perf_counter()
    out = CliRunner().invoke(main, ["data", "fetch", "breast_cancer", "--data", str(tmp_path / "d"),
                                    "--base-url", url, "--no-progress"])
    assert time.perf_counter() - started < 10
    assert out.exit_code == 1
    assert out.stderr.startswith(f"error: cannot download {url}/static/public/15/") and out.stderr.count("\n") == 1
    assert not (tmp_path / "d").exists()


def test_credit_card_is_never_downloaded(tmp_path: Path):
    out = CliRunner().invoke(main, ["data", "fetch", "credit_card", "--data", str(tmp_path)])
    assert out.exit_code == 1 and "Kaggle" in out.stderr and "creditcard/creditcard.csv" in out.stderr
    (tmp_path / "creditcard").mkdir()
    (tmp_path / "creditcard" / "creditcard.csv").write_text("Time,Class\n")
    out = CliRunner().invoke(main, ["data", "fetch", "credit_card", "--data", str(tmp_path)])
    assert out.exit_code == 0 and "present" in out.output


def test_usage_errors(tmp_path: Path):
    out = CliRunner().invoke(main, ["data", "fetch", "mnist", "--data", str(tmp_path)])
    assert out.exit_code == 2 and "unknown data set(s) mnist" in out.stderr
    out = CliRunner().invoke(main, ["data", "fetch", "iris", "--data", str(tmp_path), "--base-url", "mirror"])
    assert out.exit_code == 2 and "scheme://host" in out.stderr


def test_loaders_name_the_fetch_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import ucimlrepo

    def offline(**kw):
        raise ConnectionError("no network")

    monkeypatch.setattr(ucimlrepo, "fetch_ucirepo", offline)
    with pytest.raises(DataError, match="dpbench data fetch iris"):
        data.load("iris", data_dir=tmp_path)


def test_gzip_mirror_file_is_the_kdd_file(served, data_dir: Path, tmp_path: Path):
    fetch_mod.fetch(["kddcup99"], tmp_path, base_url=served.url, progress=False)
    path = tmp_path / "kddcup99" / "kddcup.data_10_percent.gz"
    with gzip.open(path) as fh:
        assert fh.readline().count(b",") == 41
    shutil.rmtree(tmp_path / "kddcup99")
