"""The claims of an experiment evaluated on its selected runs and audits, written to claims.csv
and claims.md, and every per-seed point `dpbench check` compares (curve points, audit bounds,
claim verdicts)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dpbench.analysis import curves as curves_mod
from dpbench.core.errors import DataError
from dpbench.core.store import atomic_write_bytes_via
from dpbench.experiment.audits import audit_points, audit_results, stored_audits
from dpbench.experiment.baselines import majority, majority_path
from dpbench.experiment import plan as plan_mod
from dpbench.experiment.inventory import inventory, runs_and_selection
from dpbench.experiment.layout import RUNS_FILE, output_folder
from dpbench.run.metrics import LEDGER_QUANTITIES
from dpbench.spec.experiment import Experiment


def seed_points(exp: Experiment, results: str | Path, data_dir: str | None = None) -> pd.DataFrame:
    """Per-seed values of every curve point (what `check` compares with the reference), the
    audits' bounds and estimates, and the claims' verdicts (metric "claim:<id>")."""
    from dpbench.analysis.check import seed_points as points

    _, selected, _ = runs_and_selection(exp, results)
    parts = [points(selected)]
    found = audit_results(exp, results=results, data_dir=data_dir) if exp.audits else []
    if exp.audits:
        parts.append(audit_points(exp, results, data_dir, found=found))
    if exp.claims:  # a verdict that changes fails the check like a moved point
        from dpbench.analysis import claims as claims_mod

        audits = pd.DataFrame([r.row() for r in found]) if found else None
        parts.append(claims_mod.check_points(claims_from(exp, selected, audits, data_dir, results=results)))
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0] if parts else points(selected)


# =============================================================================================
# claims (dpbench.analysis.claims): verdicts of the experiment's `claims:` block
# =============================================================================================
def selected_for_claims(exp: Experiment, results: str | Path, per: str | None = None,
                        progress: bool = False) -> dict[str, pd.DataFrame]:
    """The selected runs per metric: from the stored cells, or, in a checkout without them, from
    the committed runs table (results/<exp>/runs.csv.gz, what a fresh clone has). `per` ("seed" or
    "pooled", `curves.select`) overrides the spec's `select_per`; `progress`: a bar over the cells read."""
    per = exp.select_per if per is None else per
    records = inventory(exp, results, progress).records
    if records:
        runs = curves_mod.runs_table(records)
    elif (output_folder(exp, results) / RUNS_FILE).is_file():
        from dpbench.experiment.stored import load_runs

        runs = load_runs(exp, results)
    else:
        return {}
    return curves_mod.selected_by_metric(runs, exp.metrics, exp.selection, per)


def audits_for_claims(exp: Experiment, results: str | Path) -> pd.DataFrame | None:
    """The audits table: from the stored audit chunks, else the committed audits.csv."""
    if not exp.audits:
        return None
    found, _ = stored_audits(exp, results)
    if found:
        return pd.DataFrame([r.row() for r in found])
    path = output_folder(exp, results) / "audits.csv"
    return pd.read_csv(path) if path.is_file() else None


def ledger_selection(exp: Experiment, selected: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The runs a claim on a ledger quantity (run.metrics.LEDGER_QUANTITIES, e.g. the share of
    noise-free steps) reads: those the experiment's first metric selects, the hyperparameters of
    its first figure, so the quantity describes the runs that curve draws."""
    wanted = {c.metric for c in exp.claims if getattr(c, "metric", None) in LEDGER_QUANTITIES}
    first = selected.get(exp.metrics[0]) if exp.metrics else None
    return {} if first is None else {q: first for q in sorted(wanted) if q in first}


#: the metric whose claims the majority-class screen reads (dpbench.analysis.claims.screens)
MAJORITY_METRIC = "accuracy"


def claims_from(exp: Experiment, selected: dict[str, pd.DataFrame], audits: pd.DataFrame | None,
                data_dir: str | None = None, *, results: str | Path | None = None) -> list:
    """dpbench.analysis.claims.Verdict of the experiment's claims on these selected runs and audits
    table: the accuracy points carry the majority-class rate of their data set, which the screens
    read (`majority_for`: from the data in `data_dir`, else from majority.csv of the output folder
    under `results`; DataError where neither has it), and with a `decide:` block the claims are
    tested at its looks. Each verdict's status is the plan's (`plan.status`: confirmatory only
    for the seeds of a frozen plan whose analysis the spec still has; exploratory without
    `results`)."""
    from dpbench.analysis import claims as claims_mod

    if not exp.claims:
        return []
    selected = {**selected, **ledger_selection(exp, selected)}
    scored = selected.get(MAJORITY_METRIC)
    labels = [] if scored is None or scored.empty or MAJORITY_METRIC not in scored else \
        sorted(set(scored.loc[scored[MAJORITY_METRIC].notna(), "dataset_label"]))
    points = claims_mod.per_seed_points(selected, majority_for(exp, labels, data_dir, results=results))
    design = claims_mod.Design(exp.decide_looks) if exp.decide_looks else None
    verdicts = claims_mod.evaluate(exp.claims, points, audits, design, dict(exp.decide_scale))
    status = plan_mod.status(exp, results) if results is not None else plan_mod.EXPLORATORY
    for v in verdicts:
        v.status = status
    return verdicts


def majority_for(exp: Experiment, labels: list[str], data_dir: str | None = None, *,
                 results: str | Path | None = None) -> dict[str, float]:
    """The majority-class rate of each of these data set labels, for the claims' screens
    (`baselines.majority`): per seed rep from the data where it can be read, else from the stored
    majority.csv of the output folder under `results` (None: from the data only). The stored table
    is brought up to date with every share the data gave that it lacks or holds differently.

    A label without a rate is left out when its data are not +-1 (regression); one whose data
    cannot be read and which the stored table lacks raises DataError (one line: the experiment,
    the label, the `dpbench data fetch` command and the table), since its verdicts cannot be computed.
    """
    found = majority(exp, labels, data_dir, results, store=True)
    if found.missing:
        table = majority_path(exp, results) if results is not None else "majority.csv (no results folder given)"
        missing = sorted(found.missing.items())
        labels_text = ", ".join(f"{label} ({len(reps)} of {len(found.reps[label])} seeds)"
                                for label, (_, reps) in missing)
        names = " ".join(sorted({name for _, (name, _) in missing}))
        sets, files, them = ("data set", "its raw data file is", "it") if len(missing) == 1 else \
            ("data sets", "their raw files are", "them")
        raise DataError(f"{exp.name} [{exp.profile}]: cannot compute the claims' verdicts without the majority-class "
                        f"rate of {sets} {labels_text}: {files} absent (`dpbench data fetch {names}` downloads {them} "
                        f"into --data / $DPBENCH_DATA) and {table} lacks it")
    return found.rates


def significant_marks(verdicts: list) -> pd.DataFrame | None:
    """The points the figures mark (`dpbench.analysis.claims.significant_points`), or None without claims."""
    from dpbench.analysis import claims as claims_mod

    return claims_mod.significant_points(verdicts) if verdicts else None


def with_marks(shown: pd.DataFrame, marks: pd.DataFrame) -> pd.DataFrame:
    """`shown` with column claim_mark: "+id" / "-id" (several joined by ", ") where a claim marks the point."""
    text = marks.assign(claim_mark=np.where(marks["holds"], "+", "-") + marks["claim"].astype(str))
    text = text.groupby(["label", "dataset_panel", "model_label", "epsilon", "metric"], as_index=False)[
        "claim_mark"].agg(", ".join)
    keyed = shown.assign(_eps=shown["epsilon"].astype(float).round(12))
    text = text.assign(_eps=text["epsilon"].astype(float).round(12)).drop(columns="epsilon")
    out = keyed.merge(text, on=["label", "dataset_panel", "model_label", "_eps", "metric"], how="left")
    return out.drop(columns="_eps")


def claim_verdicts(exp: Experiment, results: str | Path = "results", data_dir: str | None = None,
                   progress: bool = False) -> list:
    """dpbench.analysis.claims.Verdict of every claim of the experiment, from what is stored (nothing
    is trained); `data_dir` is where the raw files are, for majority-class rates majority.csv lacks;
    `progress`: a bar over the stored cells read."""
    if not exp.claims:
        return []
    return claims_from(exp, selected_for_claims(exp, results, progress=progress), audits_for_claims(exp, results), data_dir,
                       results=results)


def selection_flips(exp: Experiment, verdicts: list, results: str | Path = "results") -> list[dict]:
    """The claims whose verdict changes when the hyperparameters are selected the other way (per
    seed vs pooled over seeds, `select_per`): one dict per such claim with its id and both
    verdicts in words (`dpbench.analysis.claims.verdict_text`); `verdicts` are the spec's own."""
    from dpbench.analysis.claims import verdict_text

    if not verdicts:
        return []
    other = "pooled" if exp.select_per == "seed" else "seed"
    others = claims_from(exp, selected_for_claims(exp, results, other), audits_for_claims(exp, results),
                         results=results)
    return [{"experiment": exp.name, "claim": v.claim.id, exp.select_per: verdict_text(v), other: verdict_text(w)}
            for v, w in zip(verdicts, others, strict=True) if v.verdict != w.verdict]


def exploratory_verdicts(exp: Experiment, verdicts: list, results: str | Path = "results") -> dict[str, str] | None:
    """Claim id -> the verdict it had when the experiment's plan was frozen (`plan.EXPLORATORY_FILE`),
    for confirmatory verdicts to carry beside them; None for exploratory verdicts or without that table."""
    earlier = output_folder(exp, results) / plan_mod.EXPLORATORY_FILE
    if not earlier.is_file() or all(v.status == plan_mod.EXPLORATORY for v in verdicts):
        return None
    frame = pd.read_csv(earlier)
    return dict(zip(frame["id"], frame["verdict"], strict=True))


def write_claims(exp: Experiment, verdicts: list, results: str | Path = "results") -> list[Path]:
    """claims.csv and claims.md into the experiment's output folder (left alone when unchanged);
    confirmatory verdicts carry, beside them, the exploratory verdict of each claim
    (`exploratory_verdicts`)."""
    from dpbench.analysis import claims as claims_mod

    if not verdicts:
        return []
    folder = output_folder(exp, results)
    folder.mkdir(parents=True, exist_ok=True)
    exploratory = exploratory_verdicts(exp, verdicts, results)
    table = claims_mod.table(verdicts, exploratory)
    atomic_write_bytes_via(folder / "claims.csv", lambda tmp: table.to_csv(tmp, index=False, float_format="%.6g"))
    text = f"# Claims of {exp.name} ({exp.paper or exp.description})\n\n" + claims_mod.markdown(verdicts, exploratory)
    atomic_write_bytes_via(folder / "claims.md", lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return [folder / "claims.csv", folder / "claims.md"]
