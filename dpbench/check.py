"""Regression check: a profile's per-seed curve points against a stored reference.

The reference (`results/<experiment>/reference-<profile>.csv`, committed) holds one row per
(algorithm, dataset, model, epsilon, metric, seed repetition): the selected hyperparameters'
value of that metric. A cell is a pure function of its key, so on one machine a rerun gives
bitwise the same numbers and any difference means the code changed.

Tolerance per curve point (mean over seeds), in this order:
  same   |new_r - ref_r| <= atol + rtol * |ref_r| for every seed r (float noise, e.g. another BLAS);
  within the seeds are shared, so the per-seed differences d_r = new_r - ref_r are paired:
         |mean(d)| <= k * SE(d), SE(d) = std(d) / sqrt(#seeds) — a change that moves seeds
         both ways by seed noise (e.g. a reordered random stream) passes;
  DRIFT  otherwise: a systematic move (every seed the same way) fails, however small
         compared with the spread between seeds. Measured: a 10% larger DP-SGD noise moves the
         curve means by < 0.5 unpaired standard errors, so an unpaired rule could not see it.
missing (in the reference, not produced) and new (produced, not in the reference) also fail.
A point with a single seed (an audit's lower bound, a one-seed profile) has no spread to judge a
move by: anything beyond `same` is DRIFT.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpbench.curves import GROUP

POINT = [*GROUP, "metric"]
DEFAULT_K = 3.0
DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-9


def seed_points(selected: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Long table: one row per (algorithm, dataset, model, epsilon, metric, rep) of the selected runs.

    `selected` maps each metric to the runs selected for it (curves.selected_by_metric).
    """
    parts = [runs[[*GROUP, "rep"]].assign(metric=metric, value=runs[metric])
             for metric, runs in selected.items() if not runs.empty and metric in runs]
    if not parts:
        return pd.DataFrame(columns=[*POINT, "rep", "value"])
    long = pd.concat(parts, ignore_index=True).dropna(subset=["value"])
    return long[[*POINT, "rep", "value"]].sort_values([*POINT, "rep"], na_position="first").reset_index(drop=True)


def _key(df: pd.DataFrame) -> pd.Series:
    eps = df["epsilon"].map(lambda e: "" if pd.isna(e) else repr(float(e)))
    return df["label"].astype(str) + "|" + df["dataset_label"].astype(str) + "|" + df["model_label"].astype(str) \
        + "|" + eps + "|" + df["metric"].astype(str)


def compare(new: pd.DataFrame, reference: pd.DataFrame, *, k: float = DEFAULT_K, rtol: float = DEFAULT_RTOL,
            atol: float = DEFAULT_ATOL) -> pd.DataFrame:
    """One row per curve point with ref/new means, paired difference, its SE and a status."""
    new, reference = new.assign(_k=_key(new)), reference.assign(_k=_key(reference))
    rows = []
    for point in sorted(set(new["_k"]) | set(reference["_k"])):
        a = reference[reference["_k"] == point].set_index("rep")["value"]
        b = new[new["_k"] == point].set_index("rep")["value"]
        first = (reference if len(a) else new)
        meta = first[first["_k"] == point].iloc[0]
        row = {c: meta[c] for c in POINT}
        row.update(ref_mean=a.mean() if len(a) else np.nan, new_mean=b.mean() if len(b) else np.nan,
                   seeds=len(b.index.intersection(a.index)))
        if not len(a):
            row.update(status="new", delta=np.nan, se=np.nan, z=np.nan)
        elif not len(b):
            row.update(status="missing", delta=np.nan, se=np.nan, z=np.nan)
        else:
            common = a.index.intersection(b.index)
            d = (b.loc[common] - a.loc[common]).to_numpy(dtype=float)
            delta = float(b.mean() - a.mean())
            se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else np.inf
            z = abs(delta) / se if se > 0 else (0.0 if delta == 0 else np.inf)
            ref_common = a.loc[common].to_numpy(dtype=float)
            if set(a.index) == set(b.index) and np.all(np.abs(d) <= atol + rtol * np.abs(ref_common)):
                status = "same"
            elif set(a.index) != set(b.index):
                status = "DRIFT"  # the seeds differ: the profile itself changed
            elif d.size == 1:
                status = "DRIFT"  # one seed (e.g. an audit's bound): no spread to excuse a move
            else:
                status = "within" if z <= k else "DRIFT"
            row.update(status=status, delta=delta, se=se, z=z)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*POINT, "ref_mean", "new_mean", "delta", "se", "z", "seeds", "status"])


def failed(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["status"].isin(["DRIFT", "missing", "new"])]


def report(table: pd.DataFrame, k: float) -> str:
    """Readable summary: counts per status, then every point that is not `same`."""
    counts = table["status"].value_counts().to_dict()
    head = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("same", "within", "DRIFT", "missing", "new"))
    lines = [f"{len(table)} curve points: {head} (within = paired difference inside {k:g} standard errors)"]
    moved = table[table["status"] != "same"]
    if not moved.empty:
        show = moved.assign(epsilon=moved["epsilon"].map(lambda e: "-" if pd.isna(e) else f"{e:g}"))
        show = show[["status", "label", "dataset_label", "model_label", "epsilon", "metric", "ref_mean", "new_mean",
                     "delta", "z", "seeds"]]
        with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format",
                               lambda v: f"{v:.6g}"):
            lines.append(show.rename(columns={"dataset_label": "dataset", "model_label": "model",
                                              "z": "|delta|/SE"}).to_string(index=False))
    return "\n".join(lines)
