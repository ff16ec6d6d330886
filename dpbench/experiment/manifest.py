"""manifest.json: the provenance of a results folder (versions, git commit, spec hash, data file
hashes, whether the grid is complete), rewritten only when a result changed."""

from __future__ import annotations

import json
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import pandas as pd

from dpbench.core.store import atomic_write_text
from dpbench.run import runner
from dpbench.spec.experiment import Experiment

PACKAGES = ("numpy", "scipy", "pandas", "matplotlib", "joblib", "dp-accounting", "dpbench", "click", "pyyaml")


#: manifest fields that differ between two runs giving the same results
VOLATILE = ("created", "git", "last_run", "fit_seconds", "platform")  # of the run, not of the results


def write_manifest(path: Path, fresh: dict, results_changed: bool) -> None:
    """Write the manifest unless the results and its stable fields are those already on disk."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = None
    stable = {k: v for k, v in fresh.items() if k not in VOLATILE}
    if not results_changed and isinstance(old, dict) and \
            {k: v for k, v in old.items() if k not in VOLATILE} == json.loads(json.dumps(stable, default=str)):
        return
    atomic_write_text(path, json.dumps(fresh, indent=2, default=str))


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _git_commit() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5)
        if commit.returncode == 0:
            return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {"commit": None, "dirty": None}


def manifest(exp: Experiment, runs: pd.DataFrame, summary: runner.RunSummary | None, data_files: dict,
             partial: str = "") -> dict:
    """Provenance of a results folder: versions, git commit, spec hash, data file hashes, and
    whether the results cover the whole grid (`partial`)."""
    return {
        "experiment": exp.name,
        "profile": exp.profile,
        "source": exp.source,
        "spec_hash": exp.spec_hash,
        "spec": exp.resolved,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git": _git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {p: _version(p) for p in PACKAGES},
        "cells": {"total": len(exp.cells()), "finished": int(len(runs))},
        "partial": partial or None,
        "fit_seconds": round(float(runs["fit_seconds"].sum()), 1) if "fit_seconds" in runs else None,
        "last_run": None if summary is None else {"ran": summary.ran, "reused": summary.reused,
                                                   "failed": len(summary.failed),
                                                   "seconds": round(summary.seconds, 2)},
        "data": data_files,
        "plugins": plugin_provenance(exp),
        **({"device": _device(exp.device)} if exp.device != "cpu" else {}),
    }


def _device(device: str) -> dict:
    """Where the JAX path's cells of this run trained: the device, its description and JAX's version."""
    from dpbench.core.errors import DpbenchError
    from dpbench.on_jax.device import describe

    try:
        description = describe(device)
    except DpbenchError:  # drawn (`dpbench plot --device gpu`) where the device is not
        description = None
    return {"device": device, "description": description, "jax": _version("jax")}


def plugin_provenance(exp: Experiment) -> list[dict]:
    """Reference, SHA-256 and version (`dpbench.run.plugins.provenance`) of every plugin the
    experiment's algorithms and audits name, in the order they appear."""
    from dpbench.run import plugins

    named = [a.plugin for a in exp.algorithms] + [s.plugin for s in exp.audits]
    return [plugins.provenance(ref) for ref in dict.fromkeys(r for r in named if r)]
