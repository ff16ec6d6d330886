"""What `dpbench verify SPEC` found, kept with the experiment's results and named in the label of the
runs it verified.

A plugin that owns its loop is stored "declared" (`dpbench.run.plugin_records`). `dpbench verify
SPEC` verifies each algorithm entry at the spec's own settings and writes one row per verification
to RESULTS/<experiment>/verify.csv (`write`): the entry's label, its hyperparameters as the grid
holds them, the data set and model labels, epsilon, the plugin's digest and the verdict. A declared
run whose label, hyperparameters, data set, model, epsilon and plugin source match a row reads
"declared (verify consistent at these settings)" (or "mismatch", "suspect"; `annotate`), so the
curve says what the plugin's claim was checked against; a plugin edited since (another digest)
matches no row. The strongest word stays "declared": verify finds bugs, not every bug.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from dpbench.core.store import atomic_write_text
from dpbench.experiment.layout import output_folder
from dpbench.spec.experiment import Experiment

VERIFY_FILE = "verify.csv"
COLUMNS = ("label", "params", "dataset_label", "model_label", "epsilon", "plugin_digest", "status", "checks")


def write(exp: Experiment, results: str | Path, rows: list[dict]) -> Path:
    """RESULTS/<experiment>/verify.csv with `rows` (dicts with `COLUMNS`; params a mapping); the rows of
    earlier verifications at other settings are kept, those at the same settings replaced."""
    path = output_folder(exp, results) / VERIFY_FILE
    new = pd.DataFrame([{**r, "params": json.dumps(dict(r["params"]), sort_keys=True)} for r in rows],
                       columns=list(COLUMNS))
    if path.is_file():
        old = pd.read_csv(path, dtype={"plugin_digest": str})
        key = list(COLUMNS[:6])
        new = pd.concat([old, new], ignore_index=True).drop_duplicates(subset=key, keep="last")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, new.to_csv(index=False))
    return path


def annotate(runs: pd.DataFrame, exp: Experiment, results: str | Path) -> pd.DataFrame:
    """The runs table with each declared plugin run that verify.csv covers labelled with its verdict
    (module docstring); unchanged without the file or such runs."""
    path = output_folder(exp, results) / VERIFY_FILE
    if runs.empty or "plugin" not in runs or not path.is_file():
        return runs
    table = pd.read_csv(path, dtype={"plugin_digest": str, "params": str})
    found = {(r.label, r.params, r.dataset_label, r.model_label, float(r.epsilon), str(r.plugin_digest)): r.status
             for r in table.itertuples() if pd.notna(r.epsilon)}
    if not found:
        return runs
    out = runs.copy()
    for i, row in out[(out["dp_claim"] == "declared") & (out["plugin"] != "")].iterrows():
        digest = str(json.loads(row["plugin"]).get("sha256") or "")[:16]
        status = found.get((row["label"], row["params"], row["dataset_label"], row["model_label"],
                            float(row["epsilon"]), digest))
        if status is not None:
            out.at[i, "dp_claim"] = f"declared (verify {status} at these settings)"
    return out


__all__ = ["COLUMNS", "VERIFY_FILE", "annotate", "write"]
