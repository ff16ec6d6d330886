"""Where an experiment's results live: the output folder of a profile, the names of the tables
in it, and what a render returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dpbench.core.errors import DpbenchError
from dpbench.spec.experiment import DEFAULT_PROFILE, Experiment

TRACE_CURVES_FILE = "trace_curves.csv.gz"  # its per-iteration curves (figures over iterations)


RUNS_FILE = "runs.csv.gz"  # the per-cell table of an output folder


CURVES_FILE = "curves.csv"  # its curves (what the figures draw)


FIGURES_FILE = "figures.json"  # what each figure was drawn from (render.draw_figures): name -> inputs digest, files


MAJORITY_FILE = "majority.csv"  # the majority-class share of each test split (dataset_label, rep, majority)


@dataclass
class Outputs:
    folder: Path
    runs: pd.DataFrame
    curves: pd.DataFrame
    figures: list[Path]
    audits: pd.DataFrame | None = None  # one row per audit (AuditResult.row())
    claims: list = field(default_factory=list)  # dpbench.analysis.claims.Verdict per claim of the spec


def experiment_root(exp: Experiment, results: str | Path) -> Path:
    return Path(results) / exp.name


def output_folder(exp: Experiment, results: str | Path) -> Path:
    root = experiment_root(exp, results)
    return root if exp.profile == DEFAULT_PROFILE else root / "profiles" / exp.profile


def cache_dir(results: str | Path) -> Path:
    """L* per (data split, model) is shared by every experiment under the same results folder."""
    return Path(results) / ".cache"


def reference_path(exp: Experiment, results: str | Path = "results") -> Path:
    return experiment_root(exp, results) / f"reference-{exp.profile}.csv"


GROUP_COLUMNS = ["label", "dataset_label", "model_label", "epsilon", "params"]


#: columns of an audit's row that differ between two runs of the same audit: shown by `run`, not
#: written to audits.csv
AUDIT_TIMINGS = ("seconds", "seconds_per_fit", "reused")


class IncompleteError(DpbenchError):
    """The stored results do not cover the experiment's grid (render without `partial`)."""


def run_command(exp: Experiment, results: str | Path, verb: str = "run") -> str:
    """The `dpbench run` command line that computes this experiment's missing cells (or another
    verb's, e.g. "plot", over the same experiment, profile and results)."""
    words = [f"dpbench {verb}", exp.source if not exp.source.startswith("<") else "SPEC"]
    if exp.profile != DEFAULT_PROFILE:
        words.append(f"--profile {exp.profile}")
    if Path(results) != Path("results"):
        words.append(f"--results {results}")
    return " ".join(words)


def titled(title: str, note: str) -> str:
    return f"{title} [{note.upper()}]" if note else title
