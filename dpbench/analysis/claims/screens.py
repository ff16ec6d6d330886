"""Screens that keep a verdict meaningful: the points and panels of a claim that cannot inform it
are marked vacuous, with the reason, instead of counting as support.

Both point screens apply where the comparator B is the side the relation says must lose (the
metric's better direction decides: B for greater / at_least on accuracy, for less / at_most on a
loss or gap). A claim that A is the worse one is a statement about A and is not screened.

* **Majority class.** On accuracy, beating a curve at or below the majority-class line (always
  predicting the test split's largest class, column `majority` of the points) shows nothing: a
  comparison point where B has a mean accuracy within `MAJORITY_TOLERANCE` of that line or
  below it is left out.
* **No guarantee.** A private curve whose runs carry no privacy guarantee at that point
  (`dp_claim` "none": e.g. a method proven for convex losses, run on the MLP) is not a
  comparator a private method can be credited for beating: such points of B are left out.
* **Every method passes.** A claim that credits A (`specific: true`) against a non-private
  reference B (the non-private line) is vacuous on a panel where every other private curve of
  the panel passes the same test at level ALPHA.
* **Declared uninformative.** A claim's `uninformative:` entries name panels (data sets and
  models) and the reason they cannot inform it; their sub-tests are reported vacuous with that
  reason, never dropped silently.

A sub-test left with no points is vacuous; a claim whose every sub-test is vacuous has the
verdict "vacuous" (dpbench.analysis.claims.verdicts).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dpbench.analysis.claims.stats import ALPHA, SIDES
from dpbench.run.metrics import METRICS

#: accuracy within this of the majority-class rate counts as "at" the majority line
MAJORITY_TOLERANCE = 0.01


def losing_side(relation: str, metric: str) -> str | None:
    """Which curve the relation says must be worse ("a" or "b"; None for equivalence and
    differs): for greater / at_least A - B is to be large, so on a metric where larger is
    better B loses; for less / at_most the other way round."""
    side = SIDES.get(relation)
    if side not in ("above", "below"):
        return None
    better = METRICS.get(metric, ("", "max"))[1]
    a_larger = side == "above"
    return "b" if a_larger == (better == "max") else "a"


def declared(claim: Any, panel: str, model: str) -> str:
    """The reason a claim's `uninformative:` entry gives for this panel and model, or ""."""
    for entry in claim.uninformative:
        if (not entry["datasets"] or panel in entry["datasets"]) and (not entry["models"] or model in entry["models"]):
            return f"declared uninformative: {entry['reason']}"
    return ""


def screened_points(claim: Any, curve: pd.DataFrame, private: bool = True) -> pd.DataFrame:
    """The (dataset_panel, dataset_label, model_label, epsilon) points where `curve` (the comparator
    B, where the relation says it must lose) cannot be beaten meaningfully, with column `reason`;
    the no-guarantee screen only for a private curve (`private`: a non-private reference has no
    guarantee by design)."""
    keys = ["dataset_panel", "dataset_label", "model_label", "epsilon"]
    if curve.empty:
        return pd.DataFrame(columns=keys + ["reason"])
    agg = {"value": "mean"}
    if "majority" in curve:
        agg["majority"] = "mean"
    means = curve.groupby(keys, dropna=False).agg(agg).reset_index()
    claims = curve.groupby(keys, dropna=False)["dp_claim"].agg(lambda s: set(s.dropna())).reset_index() \
        if "dp_claim" in curve else None
    reasons = pd.Series("", index=means.index)
    if claim.metric == "accuracy" and "majority" in means:
        low = means["majority"].notna() & (means["value"] <= means["majority"] + MAJORITY_TOLERANCE)
        reasons[low] = "comparator at or below the majority-class line"
    if claims is not None and private:
        none = claims["dp_claim"].map(lambda s: s == {"none"})
        reasons[none & (reasons == "")] = "comparator has no privacy guarantee here"
    out = means.assign(reason=reasons)
    return out.loc[out["reason"] != "", keys + ["reason"]]


def others_pass(claim: Any, part: pd.DataFrame, panel: str, model: str, passes) -> list[str]:
    """The other private curves of the panel (not A or B) that pass the same test as A
    (`passes(label) -> bool`); empty when the claim is not `specific`, B is private, or some
    other curve fails."""
    if not getattr(claim, "specific", False):
        return []
    here = part[(part["dataset_panel"] == panel) & (part["model_label"] == model)]
    if here.empty or here.loc[here["label"] == claim.b, "epsilon"].notna().any():
        return []  # B is private: the screen is for claims against the non-private reference
    labels = sorted(set(here.loc[here["epsilon"].notna(), "label"]) - {claim.a, claim.b})
    if not labels:
        return []
    return labels if all(passes(label) for label in labels) else []


def passes_at(p: float) -> bool:
    """A test passes at the screen's level: ALPHA, unadjusted (the screen asks whether the test
    discriminates A from the other curves at all, not whether any one of them is decided)."""
    return bool(np.isfinite(p) and p <= ALPHA)


__all__ = ["MAJORITY_TOLERANCE", "declared", "losing_side", "others_pass", "passes_at", "screened_points"]
