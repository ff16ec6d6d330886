"""What `dpbench verify SPEC` found, kept with the experiment's results and named in the label of the
runs it verified.

A plugin that owns its loop is stored "declared" (`dpbench.run.plugin_records`). `dpbench verify
SPEC` verifies each algorithm entry at the spec's own settings and writes one row per verification
to RESULTS/<experiment>/verify.csv (`write`): the entry's label, its hyperparameters as the grid
holds them, the data set and model labels, epsilon, the plugin's digest and the verdict. A declared
run whose label, hyperparameters, data set, model, epsilon and plugin source match a row reads
"declared (verify consistent at these settings)" (or "mismatch", "suspect"; `annotate`), so the
curve says what the plugin's claim was checked against; a plugin edited since (another digest)
matches no row. A peer library's run (`dpbench.algorithms.peers`, stored "declared by <library>
<version>") is matched the same way, its code named by `library_code` ("opacus 1.6.0") in the
column `plugin_digest`: a run of another version of the library matches no row. The strongest word
stays "declared": verify finds bugs, not every bug.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from dpbench.core.store import atomic_write_text
from dpbench.experiment.layout import output_folder
from dpbench.spec.experiment import Experiment

VERIFY_FILE = "verify.csv"
#: plugin_digest: the verified code, a plugin's source digest or a peer's `library_code`
COLUMNS = ("label", "params", "dataset_label", "model_label", "epsilon", "plugin_digest", "status", "checks")


def library_code(library: str, version: str) -> str:
    """What names a peer library's code in verify.csv: its distribution and version ("opacus 1.6.0")."""
    return f"{library} {version}"


def _code(row: pd.Series) -> str:
    """The code a stored run ran: its plugin's digest (16 hex digits), a peer's `library_code`, or ""."""
    plugin = row.get("plugin")
    if isinstance(plugin, str) and plugin:
        return str(json.loads(plugin).get("sha256") or "")[:16]
    privacy = row.get("privacy")
    ledger = json.loads(privacy) if isinstance(privacy, str) and privacy else {}
    if ledger.get("library"):
        return library_code(str(ledger["library"]), str(ledger.get("library_version", "")))
    return ""


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
    """The runs table with each declared plugin or peer run that verify.csv covers labelled with its
    verdict (module docstring); unchanged without the file or such runs."""
    path = output_folder(exp, results) / VERIFY_FILE
    if runs.empty or not ({"plugin", "privacy"} & set(runs)) or not path.is_file():
        return runs
    table = pd.read_csv(path, dtype={"plugin_digest": str, "params": str})
    found = {(r.label, r.params, r.dataset_label, r.model_label, float(r.epsilon), str(r.plugin_digest)): r.status
             for r in table.itertuples() if pd.notna(r.epsilon)}
    if not found:
        return runs
    out = runs.copy()
    for i, row in out[out["dp_claim"] == "declared"].iterrows():
        code = _code(row)
        status = found.get((row["label"], row["params"], row["dataset_label"], row["model_label"],
                            float(row["epsilon"]), code)) if code else None
        if status is not None:
            out.at[i, "dp_claim"] = f"declared (verify {status} at these settings)"
    return out


__all__ = ["COLUMNS", "VERIFY_FILE", "annotate", "library_code", "write"]
