"""What an experiment's committed results hold, counted: the table the README and
docs/reproducibility.md carry between `<!-- results:counts -->` markers (`dpbench report
--counts`), so the docs never state a count of cells, seeds, audits, claims, figures or stored
reference values that the committed files do not.

Each count is read from a committed file of results/<experiment>/: cells = rows of runs.csv.gz,
seeds per point = the fewest and most seeds (`rep`) of an (algorithm label, data set, model, ε)
point, audits = rows of audits.csv, claims = rows of claims.csv, figures = entries of
figures.json plus the audit figure, reference values = rows of reference-ci.csv (what `dpbench
check` compares).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from dpbench.experiment.layout import FIGURES_FILE, RUNS_FILE, experiment_root, output_folder
from dpbench.spec.experiment import Experiment

#: (kind, name) of the generated block (dpbench.core.blocks)
COUNTS_BLOCK = ("results", "counts")
#: the table's columns, in order
COLUMNS = ("experiment", "cells", "seeds per point", "ε values", "audits", "claims", "figures", "reference values (ci)")
POINT = ["label", "dataset_label", "model_label", "epsilon"]


def _rows(path: Path) -> int:
    return len(pd.read_csv(path, usecols=[0])) if path.is_file() else 0


def counts(exp: Experiment, results: str | Path = "results") -> dict[str, object]:
    """One row of the table (module docstring) for the experiment's committed files; zero where a
    file is absent (an audit-only experiment has no runs table)."""
    folder, root = output_folder(exp, results), experiment_root(exp, results)
    runs_path = folder / RUNS_FILE
    cells, seeds, epsilons = 0, "–", 0
    if runs_path.is_file():
        runs = pd.read_csv(runs_path, usecols=[*POINT, "rep"])
        per_point = runs.groupby(POINT, dropna=False)["rep"].nunique()
        cells, epsilons = len(runs), runs["epsilon"].nunique()
        low, high = int(per_point.min()), int(per_point.max())
        seeds = str(low) if low == high else f"{low}–{high}"
    figures = 0
    if (folder / FIGURES_FILE).is_file():
        figures = len(json.loads((folder / FIGURES_FILE).read_text(encoding="utf-8")))
    elif (folder / "audit.png").is_file():
        figures = 1
    return {"experiment": exp.name, "cells": cells, "seeds per point": seeds, "ε values": epsilons,
            "audits": _rows(folder / "audits.csv"), "claims": _rows(folder / "claims.csv"), "figures": figures,
            "reference values (ci)": _rows(root / "reference-ci.csv")}


def counts_markdown(rows: list[dict[str, object]]) -> str:
    """The Markdown table of `counts` rows, numbers with thousands separators."""
    def cell(value: object) -> str:
        return f"{value:,}" if isinstance(value, int) else str(value)

    lines = ["| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell(row[c]) for c in COLUMNS) + " |" for row in rows]
    return "\n".join(lines) + "\n"
