"""The majority-class baseline of an experiment's data sets: the accuracy of always predicting the
largest class of each test split, which the figures draw as a line and the claims' screens read
(a comparator at or below it cannot be beaten meaningfully).

The runs keep n_test but not the label balance, so the share of the largest class is read from
the data: the test split of each (data set label, seed rep), as the cells split it. The shares are
also kept in the output folder's majority.csv (`layout.MAJORITY_FILE`; columns dataset_label,
rep, majority), committed with the other tables, so that a checkout without the raw files reads
them from there: verdicts and figures are then the same with or without the data. The stored
table is read first and the data only for the repetitions it lacks, which are then added to it
(`majority(..., store=True)`). A data set's rate is the mean of its shares over the experiment's
repetitions of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from dpbench.core.errors import DpbenchError
from dpbench.core.store import atomic_write_bytes_via
from dpbench.experiment.layout import MAJORITY_FILE, output_folder
from dpbench.run.cells import Cell, CellContext
from dpbench.spec.experiment import Experiment

#: columns of majority.csv: one row per (data set label, seed rep)
MAJORITY_COLUMNS = ["seed", "dataset_label", "rep", "majority"]
#: precision of a stored share; a share read from the data is rounded to it, so that the data and
#: the stored table give the same rates (and verdicts)
MAJORITY_FORMAT = "%.6g"


def majority_share(y_test: np.ndarray) -> float | None:
    """The share of the largest class in the labels `y_test` (the accuracy of always predicting
    it), at the stored precision; None for an empty split or labels that are not +-1 (regression)."""
    y = np.asarray(y_test)
    values, counts = np.unique(y, return_counts=True)
    if not y.size or not set(values.tolist()) <= {-1.0, 1.0}:
        return None
    return float(MAJORITY_FORMAT % (counts.max() / y.size))


@dataclass(frozen=True)
class DataShares:
    """What the data give for some data set labels of an experiment."""

    reps: dict[str, tuple[int, ...]]  # label -> the experiment's repetitions of it
    shares: dict[tuple[str, int], float]  # (label, rep) -> majority share of a +-1 test split
    unread: dict[tuple[str, int], str]  # (label, rep) -> data set name, where the data could not be loaded


_SHARES: dict[tuple, DataShares] = {}


def data_shares(exp: Experiment, labels: list[str], data_dir: str | None = None,
                known: frozenset[tuple[str, int]] = frozenset()) -> DataShares:
    """The majority share of the test split of every (label, rep) of the experiment's cells with
    one of these labels, read from the data in `data_dir` (else $DPBENCH_DATA, else ./data), but
    for the (label, rep) in `known` (their repetitions are listed, their data not read).

    A split that cannot be loaded (file absent or corrupt) is listed in `unread`, and so are the
    other repetitions of its data set entry, which are not tried (the file does not depend on the
    seed, and each failed load of a UCI set also tries a download); a split with labels other than
    +-1 has no share. Kept for the process per experiment, data folder and labels (the claims of
    one experiment are evaluated several times in one command).
    """
    from dpbench import data
    from dpbench.run.cells import load_dataset

    folder = str(data.data_dir(data_dir))  # explicit: cells.load_dataset memoises by this folder
    key = (exp.name, exp.profile, exp.spec_hash, folder, tuple(sorted(set(labels))), known)
    if key in _SHARES:
        return _SHARES[key]
    context = CellContext(data_dir=folder)
    wanted = set(labels)
    first: dict[tuple[str, int], Cell] = {}
    for cell in exp.cells():
        if cell.dataset_label in wanted:
            first.setdefault((cell.dataset_label, cell.rep), cell)
    reps: dict[str, list[int]] = {}
    shares: dict[tuple[str, int], float] = {}
    unread: dict[tuple[str, int], str] = {}
    failed: set[str] = set()  # labels whose data could not be loaded
    for (label, rep), cell in sorted(first.items()):
        reps.setdefault(label, []).append(rep)
        if (label, rep) in known:
            continue
        if label in failed:
            unread[(label, rep)] = cell.dataset
            continue
        try:
            y = load_dataset(cell, context).y_test
        except (DpbenchError, OSError, ValueError):
            failed.add(label)
            unread[(label, rep)] = cell.dataset
            continue
        share = majority_share(y)
        if share is not None:
            shares[(label, rep)] = share
    found = DataShares({label: tuple(r) for label, r in reps.items()}, shares, unread)
    _SHARES[key] = found
    return found


def majority_path(exp: Experiment, results: str | Path) -> Path:
    """majority.csv of the experiment's output folder (that of its profile)."""
    return output_folder(exp, results) / MAJORITY_FILE


def stored_shares(path: str | Path, seed: int | None = None) -> dict[tuple[str, int], float]:
    """(label, rep) -> share of the majority table at `path` for the experiment seed stream `seed`
    (a split, and with it its majority share, depends on the stream as well as the rep; None:
    every stream's rows, keyed by (seed, label, rep)); empty when there is none."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        # the shares as text, parsed by float(): the exact value written (MAJORITY_FORMAT), which
        # the data give too
        table = pd.read_csv(path, dtype={"dataset_label": str, "majority": str}, keep_default_na=False)
        rows = table[MAJORITY_COLUMNS].itertuples(index=False)
        if seed is None:
            return {(int(s), str(label), int(rep)): float(share) for s, label, rep, share in rows}
        return {(str(label), int(rep)): float(share) for s, label, rep, share in rows if int(s) == int(seed)}
    except (ValueError, KeyError, pd.errors.ParserError) as exc:
        raise DpbenchError(f"{path} is not a majority table (columns {', '.join(MAJORITY_COLUMNS)}: "
                           f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); delete it and "
                           f"rerun with the raw data to rewrite it") from None


def write_shares(path: str | Path, shares: dict[tuple[str, int], float], seed: int = 0) -> bool:
    """Write the majority table (`MAJORITY_COLUMNS`, sorted by seed stream, label and rep)
    atomically, `shares` as the rows of the stream `seed` and the other streams' rows kept;
    returns whether the file changed."""
    kept = {k: v for k, v in stored_shares(path).items() if k[0] != int(seed)}
    every = {**kept, **{(int(seed), label, rep): share for (label, rep), share in shares.items()}}
    table = pd.DataFrame([(s, label, rep, share) for (s, label, rep), share in sorted(every.items())],
                         columns=MAJORITY_COLUMNS)
    return atomic_write_bytes_via(path, lambda tmp: table.to_csv(tmp, index=False, float_format=MAJORITY_FORMAT))


@dataclass(frozen=True)
class Majority:
    """The majority-class rates of some data set labels of an experiment (`majority`)."""

    rates: dict[str, float]  # label -> mean share over the experiment's repetitions of it
    # label -> (data set name, the reps whose data could not be read and which the stored table lacks)
    missing: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    reps: dict[str, tuple[int, ...]] = field(default_factory=dict)  # label -> the experiment's repetitions


def majority(exp: Experiment, labels: list[str], data_dir: str | None = None, results: str | Path | None = None,
             *, store: bool = False) -> Majority:
    """The majority-class rate of each of these data set labels: per (label, rep) the share stored
    in majority.csv of the output folder under `results` for the experiment's seed stream (None:
    no stored table), else the one
    read from the data (`data_shares`, only for the repetitions the table lacks); the rate is their
    mean over the experiment's repetitions of the label.

    A label with a repetition that neither gives is left out of `rates` and named in `missing`; a
    label whose data are not +-1 (regression) is left out without being missing. `store`: add the
    shares the data gave to majority.csv (atomically; its other rows are kept, and a folder that
    refuses the write is left as it is)."""
    path = majority_path(exp, results) if results is not None else None
    stored = stored_shares(path, exp.seed) if path is not None else {}
    found = data_shares(exp, labels, data_dir, frozenset(k for k in stored if k[0] in set(labels)))
    if store and path is not None and found.shares:
        try:
            write_shares(path, {**stored, **found.shares}, exp.seed)
        except OSError:  # a read-only checkout: the rates come from the data all the same
            pass
    shares = {**stored, **found.shares}
    rates: dict[str, float] = {}
    missing: dict[str, tuple[str, tuple[int, ...]]] = {}
    for label, reps in found.reps.items():
        values = [shares.get((label, rep)) for rep in reps]
        lacking = tuple(rep for rep, v in zip(reps, values, strict=True) if v is None and (label, rep) in found.unread)
        if lacking:
            missing[label] = (found.unread[(label, lacking[0])], lacking)
        elif all(v is not None for v in values):
            rates[label] = float(np.mean(values))
    return Majority(rates, missing, found.reps)


def majority_rates(exp: Experiment, dataset_labels: list[str], data_dir: str | None = None,
                   results: str | Path | None = None) -> dict[str, float]:
    """Per data set label, the accuracy of always predicting the majority class of the test split,
    averaged over the experiment's repetitions (`majority`: the stored majority.csv under
    `results`, else the data); a label without a rate for every repetition is left out (its
    panels draw no line). Writes nothing."""
    return majority(exp, dataset_labels, data_dir, results).rates


__all__ = ["MAJORITY_COLUMNS", "MAJORITY_FORMAT", "DataShares", "Majority", "data_shares", "majority",
           "majority_path", "majority_rates", "majority_share", "stored_shares", "write_shares"]
