"""What the per-cell store holds of an experiment's grid, and the runs table and selection read
from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from dpbench.analysis import curves as curves_mod
from dpbench.core.store import ResultStore
from dpbench.experiment import verified
from dpbench.experiment.layout import experiment_root
from dpbench.run.cells import RECORD_FIELDS, Cell
from dpbench.spec.experiment import Experiment


def collect(exp: Experiment, results: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Runs table, curves table and the data files' hashes from this experiment's stored cells."""
    runs, selected, data_files = runs_and_selection(exp, results)
    return runs, curves_mod.curves_table(selected), data_files


def runs_and_selection(exp: Experiment, results: str | Path, records: list[dict] | None = None,
                        missing: list | None = None) -> tuple[pd.DataFrame, dict, dict]:
    """(runs table, selected runs per metric, data files) of the stored records (all of the
    experiment's when `records` is None); `missing` ((cell, why) pairs, `Inventory.missing`) names
    the private searches that lost a draw, whose curves then claim no end-to-end epsilon."""
    if records is None:
        found = inventory(exp, results)
        records, missing = found.records, found.missing
    data_files: dict = {}
    for record in records:
        data_files.update(record.get("data_files") or {})
    runs = verified.annotate(curves_mod.runs_table(records), exp, results)
    return runs, curves_mod.selected_by_metric(runs, exp.metrics, exp.selection, exp.select_per,
                                               lost_draws(missing or [])), data_files


def lost_draws(missing: list) -> frozenset:
    """(label, dataset_label, model_label, epsilon, rep) of every private search with a draw among
    the `missing` cells."""
    out = set()
    for cell, _ in missing:
        if cell.draw:  # draw 0 is an accounting run, not a draw of the search
            labels = cell.labels()
            out.add((labels["label"], labels["dataset_label"], labels["model_label"], cell.epsilon, cell.rep))
    return frozenset(out)


@dataclass
class Inventory:
    """What the store holds of an experiment's grid: the usable records, and every expected cell
    that has none (with why: not stored, failed, damaged)."""

    records: list[dict]
    expected: int
    missing: list[tuple[Cell, str]]
    skipped: tuple[str, ...] = ()  # optional datasets without a single stored cell

    def describe(self, limit: int = 5) -> str:
        shown = "; ".join(f"{c.key} {c.algorithm} {c.dataset_label or c.dataset} {c.model_label or c.model} "
                          f"eps={c.epsilon} rep={c.rep} ({why})" for c, why in self.missing[:limit])
        more = f"; and {len(self.missing) - limit} more" if len(self.missing) > limit else ""
        return f"{len(self.missing)} of {self.expected} cells have no usable result: {shown}{more}"


def inventory(exp: Experiment, results: str | Path, progress: bool = False) -> Inventory:
    """Usable records of the experiment's cells, and the cells without one.

    An `optional: true` dataset none of whose cells is stored counts as skipped (its file was
    absent when the experiment ran), not as missing. Labels are not part of a cell's identity, so
    two entries of a spec (e.g. a figure's dataset and the matching point of a sweep) can share a
    stored cell; each gets its own record, named as the experiment names it. `progress`: a bar over
    the cells read (tens of thousands for a paper's grid).
    """
    store = ResultStore(experiment_root(exp, results), required=RECORD_FIELDS)
    cells = exp.cells()
    found: dict[str, tuple[dict | None, str | None]] = {
        c.key: store.read(c.key)
        for c in tqdm(cells, desc=f"{exp.name}: reading cells", unit="cell", disable=not progress, leave=False)}
    optional = {d.label for d in exp.datasets if d.optional}
    present = {c.dataset_label for c in cells if found[c.key][0] is not None or found[c.key][1] is not None}
    skipped = tuple(sorted(optional - present))
    records, missing = [], []
    for cell in cells:
        if cell.dataset_label in skipped:
            continue
        record, problem = found[cell.key]
        if record is not None and record.get("status") == "ok":
            records.append({**record, **cell.labels()})
        elif record is not None:
            missing.append((cell, f"failed: {record.get('error')}"))
        else:
            missing.append((cell, f"damaged: {problem}" if problem else "not stored"))
    expected = sum(c.dataset_label not in skipped for c in cells)
    return Inventory(records=records, expected=expected, missing=missing, skipped=skipped)
