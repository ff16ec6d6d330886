"""An experiment's audits run or read back from their stored trial chunks, and their bounds as
regression-check points."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dpbench.spec.experiment import Experiment


def audit_results(exp: Experiment, *, results: str | Path = "results", data_dir: str | None = None, jobs: int = 1,
                  backend: str = "loky", scheduler: str | None = None, progress: bool = False,
                  force: bool = False) -> list:
    """dpbench.audit.multi_run.AuditResult of every audit of the experiment (stored trials are reused)."""
    if not exp.audits:
        return []
    from dpbench.audit.multi_run import run_audit

    return [run_audit(setup, data_dir=data_dir, results=results, jobs=jobs, backend=backend, scheduler=scheduler,
                      progress=progress, force=force, device=exp.device) for setup in exp.audits]


def audit_points(exp: Experiment, results: str | Path, data_dir: str | None = None,
                 found: list | None = None) -> pd.DataFrame:
    """The audits' lower bounds as check points (metric epsilon_lower_bound, or
    one_run_epsilon_lower_bound for a one-run audit), and the multi-run audits' finite estimates
    (epsilon_estimate), one 'seed' each: an audit is a pure function of its setup, so its numbers
    are compared exactly like curve points. `found`: the audit results if already at hand."""
    from dpbench.analysis.check import POINT

    rows = []
    for r in found if found is not None else audit_results(exp, results=results, data_dir=data_dir):
        where = {"label": r.setup.label, "dataset_label": r.setup.dataset or r.setup.canary,
                 "model_label": r.setup.model, "epsilon": r.setup.epsilon, "rep": 0}
        one_run = r.setup.canaries is not None
        rows.append({**where, "metric": "one_run_epsilon_lower_bound" if one_run else "epsilon_lower_bound",
                     "value": r.epsilon_lower_bound})
        estimate = None if one_run else r.estimate
        if estimate is not None and np.isfinite(estimate[1]):  # a moved estimate shows e.g. a noise edit early
            rows.append({**where, "metric": "epsilon_estimate", "value": float(estimate[1])})
    return pd.DataFrame(rows, columns=[*POINT, "rep", "value"])


def stored_audits(exp: Experiment, results: str | Path) -> tuple[list, list[str]]:
    """The experiment's audits from their stored trial chunks (nothing is trained), and a line for
    each audit that is not fully stored."""
    from dpbench.audit.multi_run import run_audit
    from dpbench.audit.setup import AuditError

    found, gaps = [], []
    for setup in exp.audits:
        try:
            found.append(run_audit(setup, results=results, progress=False, train=False, device=exp.device))
        except AuditError as exc:
            gaps.append(str(exc))
    return found, gaps
