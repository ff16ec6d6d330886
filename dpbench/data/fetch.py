"""Download the papers' original UCI files with pooch (`dpbench data fetch`).

What is fetched (`SOURCES`): for each UCI data set, the public archive UCI serves and the
dpbench file(s) inside it; the files land in their UCI layout under `data_dir()` (explicit
argument, else $DPBENCH_DATA, else ./data), where the loaders of uci.py read them:

=============  ===================================================================  =================================
name           URL (base + path)                                                    dpbench file <- archive member
=============  ===================================================================  =================================
adult          https://archive.ics.uci.edu/static/public/2/adult.zip                adult/adult.data, adult/adult.test
bank           https://archive.ics.uci.edu/static/public/222/bank+marketing.zip     bank/bank-additional.zip (kept as
                                                                                    is; the archive also holds bank.zip)
kddcup99       http://kdd.ics.uci.edu/databases/kddcup99/kddcup.data_10_percent.gz  the file itself
breast_cancer  https://archive.ics.uci.edu/static/public/15/                        breast-cancer-wisconsin/
               breast+cancer+wisconsin+original.zip                                 breast-cancer-wisconsin.data
iris           https://archive.ics.uci.edu/static/public/53/iris.zip                iris/iris.data
=============  ===================================================================  =================================

Verification: the archives' own hashes are not known (UCI rebuilds them), so each archive is
downloaded with `known_hash=None` into a temporary folder (deleted afterwards) and only the
EXTRACTED dpbench file is verified, against the SHA-256 uci.py declares for it (`uci.SHA256`,
the identity of the original UCI files; no sum is repeated here). The member is streamed to a
temporary name in the destination folder (`.<file>.part-<pid>`) while it is hashed; only a
matching file is renamed into place (os.replace, atomic), so a reader never sees a half-written
or wrong file. A mismatch is a DataError naming the file, the URL and both sums; the temporary
file is removed (and the folders this call made, if empty). A file
already present with the right sum is not downloaded again ("present"); one present with a
WRONG sum is an error (it is not overwritten: remove it first).

Mirrors: every URL is `<base>/<path>`, each entry with its own default base (UCI's two hosts).
A base URL given as `base_url=` / `dpbench data fetch --base-url URL`, else the environment
variable DPBENCH_DATA_URL, replaces the base of EVERY entry, so a mirror must serve the same
paths as the originals under that one base, e.g. with base http://mirror.example/uci:
http://mirror.example/uci/static/public/2/adult.zip, .../static/public/222/bank+marketing.zip,
.../static/public/15/breast+cancer+wisconsin+original.zip, .../static/public/53/iris.zip and
http://mirror.example/uci/databases/kddcup99/kddcup.data_10_percent.gz (a plain
`python -m http.server` over a folder of that shape will do; tests/data/test_fetch.py builds one).

Network: pooch.HTTPDownloader with a (connect, read) timeout of `CONNECT_TIMEOUT` and
`READ_TIMEOUT` seconds and one retry (pooch's `retry_if_failed`), so an unreachable server fails
within about 10 s with one line (a DataError whose message starts "cannot download").

Credit Card (Kaggle, needs a login) cannot be fetched: `fetch(["credit_card"])` reports it as
"present" if the user put the file in place, else raises a DataError with creditcard.how_to_get()
(the CLI: exit 1, the file asked for is not there). It is not among the default names.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from dpbench.core.errors import DataError, DpbenchError
from dpbench.data import creditcard, uci

UCI_ARCHIVE = "https://archive.ics.uci.edu"
KDD_ARCHIVE = "http://kdd.ics.uci.edu"
ENV_BASE_URL = "DPBENCH_DATA_URL"
CONNECT_TIMEOUT = 3.0  # seconds to open a connection (an unreachable host fails fast)
READ_TIMEOUT = 60.0  # seconds without a byte from a connected server
RETRIES = 1  # pooch retry_if_failed


@dataclass(frozen=True)
class Source:
    """Where one UCI data set's files come from: `base` + "/" + `path`, and for an archive, which
    member holds each dpbench file (`members`: dpbench file name -> member; empty: the download
    IS the single dpbench file)."""

    name: str
    base: str
    path: str
    members: Mapping[str, str] = field(default_factory=dict)

    def url(self, base_url: str | None = None) -> str:
        return f"{(base_url or self.base).rstrip('/')}/{self.path}"


SOURCES: dict[str, Source] = {s.name: s for s in (
    Source("adult", UCI_ARCHIVE, "static/public/2/adult.zip",
           {"adult.data": "adult.data", "adult.test": "adult.test"}),
    Source("bank", UCI_ARCHIVE, "static/public/222/bank+marketing.zip",
           {"bank-additional.zip": "bank-additional.zip"}),
    Source("kddcup99", KDD_ARCHIVE, "databases/kddcup99/kddcup.data_10_percent.gz"),
    Source("breast_cancer", UCI_ARCHIVE, "static/public/15/breast+cancer+wisconsin+original.zip",
           {"breast-cancer-wisconsin.data": "breast-cancer-wisconsin.data"}),
    Source("iris", UCI_ARCHIVE, "static/public/53/iris.zip", {"iris.data": "iris.data"}),
)}
#: What `dpbench data fetch` without names fetches (credit_card is user-supplied: name it to check it).
DEFAULT_NAMES: tuple[str, ...] = tuple(SOURCES)
NAMES: tuple[str, ...] = (*SOURCES, creditcard.NAME)


@dataclass(frozen=True)
class Fetched:
    """One dpbench file after `fetch`: status "fetched" or "present", its size, the bytes
    downloaded for it (its archive's size counts once, on the archive's first file) and seconds."""

    dataset: str
    file: str  # path under the data folder, e.g. "adult/adult.data"
    path: str
    status: str
    bytes: int
    downloaded: int
    seconds: float


def resolve_base_url(explicit: str | None = None) -> str | None:
    """The mirror base: `explicit`, else $DPBENCH_DATA_URL (if non-empty), else None (the originals)."""
    value = explicit if explicit else os.environ.get(ENV_BASE_URL, "")
    if not value:
        return None
    if "://" not in value:
        raise DpbenchError(f"base URL {value!r}: expected scheme://host[/path] (e.g. https://mirror.example/uci)")
    return value.rstrip("/")


def _check_names(names: Iterable[str]) -> list[str]:
    chosen = list(dict.fromkeys(names)) or list(DEFAULT_NAMES)
    unknown = [n for n in chosen if n not in NAMES]
    if unknown:
        raise DpbenchError(f"data fetch: unknown data set(s) {', '.join(unknown)}; known: {', '.join(NAMES)}")
    return chosen


def _one_line(text: object, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _download(url: str, folder: pathlib.Path, progress: bool) -> pathlib.Path:
    """Download `url` into `folder` with pooch (no known hash: only the extracted files are checked)."""
    import pooch
    import requests

    pooch.get_logger().setLevel("WARNING")  # no "SHA256 hash of downloaded file" notes
    base, _, fname = url.rpartition("/")
    repo = pooch.create(path=folder, base_url=base + "/", registry={fname: None}, retry_if_failed=RETRIES)
    downloader = pooch.HTTPDownloader(timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), progressbar=progress)
    try:
        return pathlib.Path(repo.fetch(fname, downloader=downloader))
    except (requests.exceptions.RequestException, OSError, ValueError) as exc:
        hint = "; check the network, or point --base-url / $DPBENCH_DATA_URL at a mirror (dpbench.data.fetch)"
        raise DataError(f"cannot download {url}: {type(exc).__name__}: {_reason(exc)}{hint}") from exc


def _reason(exc: BaseException) -> str:
    """The innermost reason of a requests error, without urllib3's `HTTPConnection(host=...)` prefix."""
    inner = exc.args[0] if isinstance(exc, _connection_error()) and exc.args else exc
    inner = getattr(inner, "reason", None) or inner
    text = _one_line(inner)
    if text.startswith("HTTP") and "): " in text:
        text = text.split("): ", 1)[1]
    return text


def _connection_error() -> type:
    import requests

    return requests.exceptions.ConnectionError


def _install(open_member: Callable[[], object], dest: pathlib.Path, rel: str, expected: str, url: str) -> int:
    """Stream `open_member()` to a temporary name beside `dest` while hashing it; rename it into
    place if its SHA-256 is `expected`, else remove it and raise. Returns the size."""
    tmp = dest.with_name(f".{dest.name}.part-{os.getpid()}")
    digest = hashlib.sha256()
    size = 0
    try:
        with open_member() as src, open(tmp, "wb") as out:  # type: ignore[attr-defined]
            for chunk in iter(lambda: src.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
        actual = digest.hexdigest()
        if actual != expected:
            raise DataError(
                f"{rel} from {url} does not match the original UCI file: sha256 {actual} differs from the known "
                f"{expected}; nothing was written (a damaged download or a mirror serving another file)")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return size


def fetch(
    names: Iterable[str] = (),
    data_dir: str | os.PathLike | None = None,
    *,
    base_url: str | None = None,
    progress: bool = True,
    report: Callable[[Fetched], None] | None = None,
) -> list[Fetched]:
    """Make the original files of data sets `names` (default: the five UCI sets) present and
    verified under data_dir(data_dir), downloading only those missing (module docstring).

    Raises DataError on a network failure, a checksum mismatch, a present file with a wrong sum or
    an absent credit_card file; files finished before stay. `report` is called per file as it is done.
    """
    chosen = _check_names(names)
    mirror = resolve_base_url(base_url)
    root = uci.data_dir(data_dir)
    done: list[Fetched] = []

    def note(rec: Fetched) -> None:
        done.append(rec)
        if report is not None:
            report(rec)

    for name in chosen:
        if name == creditcard.NAME:
            path = creditcard.default_path(data_dir)
            if not path.is_file():
                raise DataError(f"dataset '{name}' cannot be fetched (Kaggle needs a login) and {path.absolute()} is "
                                f"absent; {creditcard.how_to_get()}")
            note(Fetched(name, creditcard.REL_PATH, str(path.absolute()), "present", path.stat().st_size, 0, 0.0))
            continue
        spec, source = uci.SPECS[name], SOURCES[name]
        url = source.url(mirror)
        folder = root / spec.folder
        missing = []
        for file in spec.files:
            rel = f"{spec.folder}/{file.name}"
            dest = folder / file.name
            if dest.is_file():
                actual = uci.sha256(dest)
                if actual != uci.SHA256[rel]:
                    raise DataError(
                        f"{dest.absolute()} is present but corrupt (sha256 {actual} differs from the original UCI "
                        f"file's {uci.SHA256[rel]}); remove it and rerun `dpbench data fetch {name}`")
                note(Fetched(name, rel, str(dest.absolute()), "present", dest.stat().st_size, 0, 0.0))
            else:
                missing.append(file.name)
        if not missing:
            continue
        made = [p for p in (folder, *folder.parents) if not p.exists()]  # removed again on failure if empty
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory(prefix="dpbench-fetch-") as scratch:
                archive = _download(url, pathlib.Path(scratch), progress)
                downloaded = archive.stat().st_size
                for filename in missing:
                    rel = f"{spec.folder}/{filename}"
                    member = source.members.get(filename)
                    if member is None:
                        def opener(p=archive):
                            return open(p, "rb")
                    else:
                        opener = _member_opener(archive, member, url)
                    size = _install(opener, folder / filename, rel, uci.SHA256[rel], url)
                    note(Fetched(name, rel, str((folder / filename).absolute()), "fetched", size, downloaded,
                                 time.perf_counter() - started))
                    downloaded, started = 0, time.perf_counter()
        except BaseException:
            for made_dir in made:  # innermost first; only empty ones: files finished before stay
                with contextlib.suppress(OSError):
                    made_dir.rmdir()
            raise
    return done


def _member_opener(archive: pathlib.Path, member: str, url: str) -> Callable[[], object]:
    @contextlib.contextmanager
    def opener():
        try:
            zf = zipfile.ZipFile(archive)
        except zipfile.BadZipFile as exc:
            raise DataError(f"{url} is not a zip archive ({_one_line(exc)})") from exc
        with zf:
            try:
                fh = zf.open(member)
            except KeyError:
                raise DataError(f"{url} has no member {member!r} (it holds {', '.join(zf.namelist()[:10])})") from None
            with fh:
                yield fh

    return opener


__all__ = ["DEFAULT_NAMES", "ENV_BASE_URL", "NAMES", "SOURCES", "Fetched", "Source", "fetch", "resolve_base_url"]
