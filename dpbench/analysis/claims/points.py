"""The per-seed points a claim is tested on: one row per curve point, metric and seed of the
selected runs, and the part of them a claim's scope covers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

#: columns of the per-seed points table the claim kinds read
POINT_COLUMNS = ["label", "dataset_label", "dataset_panel", "model_label", "epsilon", "n_train", "n_features",
                 "metric", "rep", "value", "dp_claim", "majority"]


def per_seed_points(selected: dict[str, pd.DataFrame], majority: dict[str, float] | None = None) -> pd.DataFrame:
    """Long table (`POINT_COLUMNS`) of the selected runs (curves.selected_by_metric): one row per
    curve point, metric and seed, with the run's privacy claim (`dp_claim`) and the accuracy of
    predicting the majority class of the data set's test split (`majority`, from `majority` keyed
    by data set label; NaN where unknown), which the screens read."""
    parts = []
    for metric, runs in selected.items():
        if runs.empty or metric not in runs:
            continue
        part = runs.assign(metric=metric, value=runs[metric])
        if "dataset_panel" not in part:
            part = part.assign(dataset_panel=part["dataset_label"])
        part = part.assign(dataset_panel=part["dataset_panel"].fillna(part["dataset_label"]))
        for column in ("n_train", "n_features", "dp_claim"):
            if column not in part:
                part = part.assign(**{column: np.nan})
        part = part.assign(majority=part["dataset_label"].map(majority or {}).astype(float))
        parts.append(part[POINT_COLUMNS])
    if not parts:
        return pd.DataFrame(columns=POINT_COLUMNS)
    return pd.concat(parts, ignore_index=True).dropna(subset=["value"])


def scope(claim: Any, points: pd.DataFrame) -> pd.DataFrame:
    """The points of the claim's metric inside its scope: its epsilon range (a point without
    epsilon, a non-private method, is kept), data sets (labels or panels) and models."""
    part = points[points["metric"] == claim.metric]
    if claim.epsilons is not None:
        lo, hi = claim.epsilons
        eps = part["epsilon"].astype(float)
        part = part[eps.isna() | ((eps >= lo * (1 - 1e-9)) & (eps <= hi * (1 + 1e-9)))]  # NaN: non-private
    if claim.datasets:
        part = part[part["dataset_panel"].isin(claim.datasets) | part["dataset_label"].isin(claim.datasets)]
    if claim.models:
        part = part[part["model_label"].isin(claim.models)]
    return part


def at_every_epsilon(curve: pd.DataFrame, part: pd.DataFrame) -> pd.DataFrame:
    """A curve without epsilon (a non-private method, drawn as a level line) repeated at every
    epsilon point of its panel, so it pairs with the private curves there; others as they are."""
    if curve.empty or curve["epsilon"].notna().any():
        return curve[curve["epsilon"].notna()] if not curve.empty else curve
    grid = part.loc[part["epsilon"].notna(), ["dataset_panel", "dataset_label", "model_label", "epsilon"]] \
        .drop_duplicates()
    return curve.drop(columns="epsilon").merge(grid, on=["dataset_panel", "dataset_label", "model_label"])


__all__ = ["POINT_COLUMNS", "at_every_epsilon", "per_seed_points", "scope"]
