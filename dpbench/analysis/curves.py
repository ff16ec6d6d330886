"""Per-cell records -> runs table -> hyperparameter selection -> curves table.

Selection: where an algorithm lists several hyperparameter values, the combination with the
best validation score is chosen separately for every (algorithm, dataset, model, epsilon) and
reported metric — the papers' "chosen by cross-validation": accuracy curves by validation
accuracy, gap and loss curves by validation loss (metrics.DEFAULT_SELECTION), or what the spec's
`selection` says. By default each seed selects on its own validation split (`per="seed"`, spec
`select_per: seed`), as a practitioner selects within their own run, so the spread over seeds
includes the selection's own variance; `per="pooled"` selects one combination for all seeds by
the mean validation score over them. This tuning touches the private data and no epsilon covers it
(docs/selection.md): such a curve's claim says "selection not private (k
candidates)" (`curve_claim`) and the figures draw it apart. An algorithm with `tuning:` is
selected privately instead (`_select_private`, Papernot-Steinke random stopping): its curves
carry the end-to-end epsilon of tuning + training (`eps_end_to_end`) and are drawn at it.

Optimality gap: L_ref(theta; D_train) - L*, with L* the solver's minimum for that data split and
model, lowered to the best training loss of any trained model on that problem (so a non-convex
model's estimated L* never makes a gap negative; docs/methods/conventions.md, Optimality gap).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from dpbench.algorithms.privatiser import DETAIL as PRIVATISER
from dpbench.privacy import claim_check
from dpbench.run.metrics import DEFAULT_SELECTION, METRICS, SELECTION_METRICS

GROUP = ["label", "dataset_label", "model_label", "epsilon"]


def runs_table(records: list[dict]) -> pd.DataFrame:
    """One row per finished cell: identity, metrics, privacy ledger summary."""
    rows = []
    for r in records:
        if r.get("status") != "ok":
            continue
        privacy = r.get("privacy", {})
        spent = privacy.get("epsilon_spent") or {}
        row = {k: r[k] for k in ("key", "label", "algorithm", "dataset", "dataset_label", "model", "model_label",
                                 "epsilon", "delta", "rep", "problem", "n_train", "n_test", "n_params", "lstar",
                                 "fit_seconds")}
        row["dataset_panel"] = r.get("dataset_panel") or r["dataset_label"]
        row["n_features"] = r.get("n_features", np.nan)  # cells stored before it existed lack it
        row["population_lstar"] = r.get("population_lstar")
        row["params"] = json.dumps(r["params"], sort_keys=True)
        row.update(r["metrics"])
        # "valid" checked; dp_check: why dpbench's own checks (read time, or the runner's) turned a claim
        row["dp_claim"], row["dp_check"] = claim_check.stored_check(privacy, r.get("epsilon"), r.get("delta"))
        if r.get("plugin") and not privacy.get(PRIVATISER) and row["dp_claim"] == "valid":  # stored before the rule
            row["dp_claim"] = "declared"  # a plugin that owns its loop (run.plugin_records.owned_claim)
        row["weak_delta"] = bool(privacy.get("weak_delta"))
        row["claim_basis"] = claim_check.stored_basis(privacy) or ""
        row["scaling_data_dependent"] = _scaling_data_dependent(r, privacy)
        row["eps_rdp"] = spent.get("rdp", np.nan)
        row["eps_pld"] = spent.get("pld", np.nan)
        row["noise_multiplier"] = privacy.get("noise_multiplier", np.nan)
        row["noise_free_fraction"] = privacy.get("noise_free_fraction", np.nan)  # PIDP-SGD: steps without noise
        row["privacy"] = json.dumps(privacy, sort_keys=True, default=str)
        tuning = r.get("tuning")
        row["draw"] = r.get("draw") if tuning is not None else np.nan
        row["score"] = tuning["score_value"] if tuning is not None else np.nan
        row["tuning"] = json.dumps({k: v for k, v in tuning.items() if k not in ("draw", "score_value")},
                                   sort_keys=True) if tuning is not None else ""
        if r.get("plugin"):  # where a plugin's code came from (reference, SHA-256, version)
            row["plugin"] = json.dumps(r["plugin"], sort_keys=True)
        if r.get("backend"):  # trained on the JAX path (`--device gpu | jax-cpu`); absent: the numpy path
            row["backend"] = r["backend"]
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    if "plugin" in df:
        df["plugin"] = df["plugin"].fillna("")
    if "backend" in df:
        df["backend"] = df["backend"].fillna("numpy")
    candidates = df.groupby(GROUP, dropna=False)["params"].transform("nunique")
    df["selection"] = np.where(df["draw"].notna(), "private (PS22 random stopping)",
                               np.where(candidates > 1, "on validation data, not private", "none (one setting)"))
    floor = df.groupby("problem")["train_loss"].transform("min")
    lstar = np.minimum(df["lstar"].to_numpy(), floor.to_numpy())
    df["optimality_gap"] = df["train_loss"] - lstar
    population = pd.to_numeric(df["population_lstar"], errors="coerce")
    if population.notna().any():  # exact (convex, solved on the whole pool): never lowered
        df["excess_population_risk"] = df["test_loss"] - population
    return df.sort_values(["dataset_label", "model_label", "label", "epsilon", "params", "rep"],
                          na_position="first").reset_index(drop=True)


def _scaling_data_dependent(record: dict, privacy: dict) -> bool:
    """Whether the run's features were scaled with bounds taken from its own data (not accounted):
    what the ledger's `public.feature_bounds` says, or for a record stored before ledgers said it,
    what the data set's declaration says (`dpbench.data.feature_bounds`)."""
    stated = (privacy.get("public") or {}).get("feature_bounds")
    if stated is not None:
        return str(stated).startswith(claim_check.DATA_DEPENDENT)
    if not privacy.get("private"):
        return False
    return _declared_data_dependent(record.get("dataset", ""),
                                    json.dumps(record.get("dataset_options") or {}, sort_keys=True, default=str),
                                    int(record.get("dataset_revision") or 0))


@functools.lru_cache(maxsize=256)
def _declared_data_dependent(dataset: str, options: str, revision: int) -> bool:
    """What the data set's declaration says of its scaling (`dpbench.data.feature_bounds`), once per
    (data set, options as JSON, revision) rather than once per stored record."""
    from dpbench.data import feature_bounds

    try:
        known = feature_bounds(dataset, json.loads(options), revision=revision)
    except ValueError:  # a data set no longer (or never) registered: nothing known about it
        return False
    return bool(known) and known.get("kind") == "data-dependent"


def selection_for(metric: str, selection: str | dict | None) -> str:
    """The validation score that selects hyperparameters for `metric` (spec value or default)."""
    if isinstance(selection, str):
        return selection
    return (selection or {}).get(metric, DEFAULT_SELECTION.get(metric, "val_loss"))


def _selection_metric(group: pd.DataFrame, selection: str) -> str:
    """val_accuracy where the runs have it (classification), else val_loss."""
    if selection == "val_accuracy" and not ("val_accuracy" in group and group["val_accuracy"].notna().any()):
        return "val_loss"
    return selection


def selected_by_metric(runs: pd.DataFrame, metrics: tuple[str, ...], selection: str | dict | None = None,
                       per: str = "seed", incomplete: frozenset = frozenset()) -> dict[str, pd.DataFrame]:
    """For each reported metric, the runs of the hyperparameters its validation score selects
    (per seed or pooled over seeds, private searches with a missing draw in `incomplete`: `select`)."""
    cache: dict[str, pd.DataFrame] = {}
    out = {}
    for metric in metrics:
        by = selection_for(metric, selection)
        if by not in cache:
            cache[by] = select(runs, by, per, incomplete)
        out[metric] = cache[by]
    return out


#: Validation scores within this relative distance of the best are a tie: another CPU's last bits
#: move a score by ~1e-9 relative (docs/reproducibility.md, One machine and many), and two candidates that
#: reach the same model (e.g. full-batch GD run to convergence at two step sizes) differ by that
#: much, so picking the smaller would let the CPU choose the curve.
SELECTION_TIE_RTOL = 1e-7


#: the caveat a curve's claim carries when its features were scaled with their own data's ranges
SCALING_CAVEAT = "feature scaling data-dependent (training min/max, not accounted)"


def curve_claim(claims: set[str], candidates: int, end_to_end: float | None = None,
                private_selection: bool = False, weak_delta: bool = False, bases: set[str] | frozenset = frozenset(),
                scaling: bool = False) -> str:
    """`_curve_claim`, a "valid" followed by what it rests on when that is not an epsilon recomputed
    from each run's stated mechanism (`bases`, `claim_check.basis`: "valid (by the theorem in
    <reference>; not recomputed)"), with "; weak delta (>= 1/n)" appended when a run's delta is at
    least 1/n (cells.run_cell flags it in the ledger: such a delta allows publishing a record whole)
    and `SCALING_CAVEAT` when the features were scaled with bounds from the data itself."""
    claim = _curve_claim(claims, candidates, end_to_end, private_selection)
    other = sorted(b for b in bases if b and b != "recomputed")
    basis = other[0] if len(other) == 1 else "partly not recomputed" if other else ""
    if basis and claim.startswith("valid end to end ("):  # inside its parenthesis: "valid end to end" stays first
        claim = claim[:-1] + f"; {basis})"
    elif basis and claim.startswith("valid"):
        claim = f"valid ({basis})" + claim[len("valid"):]
    if claim == "none":
        return claim
    return claim + ("; weak delta (>= 1/n)" if weak_delta else "") + (f"; {SCALING_CAVEAT}" if scaling else "")


def _curve_claim(claims: set[str], candidates: int, end_to_end: float | None, private_selection: bool) -> str:
    """What a curve's guarantee covers, from its runs' ledger claims and how it was selected.

    A single combination: the runs' claim ("valid", "paper-only", "none", joined by "/").
    Validation selection among k > 1 combinations: "<claim> per run; selection not private (k
    candidates)" -- the selected model also depends on the validation split, which no epsilon
    covers (and the candidates share their noise, cells.Cell.algorithm_rng). Private selection:
    "valid end to end (private selection, k candidates)" when every run is valid and the
    selection's epsilon was computed (dpbench.privacy.tuning), else "<claim> per run; private
    selection not accounted (k candidates)". A non-private baseline stays "none".
    """
    base = "/".join(sorted(claims)) or "none"
    if base == "none":
        return "none"
    if private_selection:
        if base == "valid" and end_to_end is not None:
            return f"valid end to end (private selection, {_candidates(candidates)})"
        return f"{base} per run; private selection not accounted ({_candidates(candidates)})"
    if candidates > 1:
        return f"{base} per run; selection not private ({_candidates(candidates)})"
    return base


def _candidates(k: int) -> str:
    return f"{k} candidate" + ("s" if k != 1 else "")


def _weak(group: pd.DataFrame) -> bool:
    return bool("weak_delta" in group and group["weak_delta"].fillna(False).astype(bool).any())


def _caveats(group: pd.DataFrame) -> dict:
    """The keywords of `curve_claim` that a group of runs sets besides its claims: weak delta, the
    bases of its valid runs, data-dependent scaling (columns of `runs_table`)."""
    scaling = bool("scaling_data_dependent" in group
                   and group["scaling_data_dependent"].fillna(False).astype(bool).any())
    bases = set(group["claim_basis"].dropna()) if "claim_basis" in group else set()
    return {"weak_delta": _weak(group), "bases": bases, "scaling": scaling}


def _select_private(group: pd.DataFrame, incomplete: frozenset = frozenset()) -> pd.DataFrame:
    """Private selection (spec `tuning`): per repetition, the run of its random search (draw >= 1)
    with the best noisy score; ties by draw order. Accounting runs (draw 0) are never chosen. The
    end-to-end epsilon covers every combination of the grid (one ledger per combination), and only a
    search whose every draw is stored: a repetition in `incomplete` (its GROUP values and rep), or
    whose stored draws are not 1..K, selected among fewer runs than its search drew, which is not
    the mechanism the epsilon is of, so the curve then says so and carries no end-to-end epsilon."""
    from dpbench.privacy.tuning import end_to_end_epsilon, run_count_distribution

    settings = json.loads(group["tuning"].iloc[0])
    sign = -1.0 if settings["score"] == "val_accuracy" else 1.0
    runs_ = group[group["draw"] >= 1]
    chosen = (runs_.assign(_rank=sign * runs_["score"]).sort_values(["rep", "_rank", "draw"])
              .groupby("rep").head(1).drop(columns="_rank"))
    ledgers = [json.loads(p) for p in group.drop_duplicates("params")["privacy"]]
    draws = runs_.groupby("rep")["draw"].agg(lambda d: sorted(int(v) for v in d) == list(range(1, int(d.max()) + 1)))
    key = tuple(group[GROUP].iloc[0])
    lost = sorted({int(r) for r in draws.index[~draws.to_numpy()]} | {r for *k, r in incomplete if tuple(k) == key})
    eps = None
    if not lost and group["params"].nunique() == settings["grid_size"] and group["delta"].nunique() == 1:
        multiplier = float(group["tuning"].map(lambda t: json.loads(t)["score_noise_multiplier"]).min())
        eps = end_to_end_epsilon(ledgers, run_count_distribution(settings["mean_runs"], settings["eta"]),
                                 float(group["delta"].iloc[0]), multiplier)
    chosen["selected_by"] = f"private {settings['score']} (PS22, E[K] = {settings['mean_runs']:g}, eta = {settings['eta']:g})"
    chosen["candidates"] = int(settings["grid_size"])
    chosen["eps_end_to_end"] = np.nan if eps is None else eps
    chosen["curve_claim"] = curve_claim(set(group["dp_claim"].dropna()), int(settings["grid_size"]), eps, True,
                                        **_caveats(group))
    if lost:
        chosen["curve_claim"] = chosen["curve_claim"].str.replace(
            "private selection not accounted", f"private selection incomplete (a draw of seed {lost[0]}'s search "
                                               "is missing)", regex=False)
    return chosen


def select(runs: pd.DataFrame, selection: str = "val_accuracy", per: str = "seed",
           incomplete: frozenset = frozenset()) -> pd.DataFrame:
    """Keep, per (algorithm, dataset, model, epsilon), the rows of the best hyperparameters.

    per "seed": each seed's own best validation score picks its row; per "pooled": the best mean
    validation score across seeds picks one combination for every seed. Ties (common for
    accuracy on small validation splits; within SELECTION_TIE_RTOL for losses) are broken by the
    lower validation loss, then by parameter order. Runs of private selection (`tuning`) are
    selected by `_select_private` instead (always per seed, the same for every metric). Each kept
    row says how it was selected (`selected_by`, `candidates`) and what its curve's guarantee
    covers (`curve_claim`); `incomplete` names the private searches with a draw not stored
    (`_select_private`).
    """
    if per not in ("seed", "pooled"):
        raise ValueError(f"per must be 'seed' or 'pooled', got {per!r}")
    if runs.empty:
        return runs
    kept = []
    for _, group in runs.groupby(GROUP, dropna=False, sort=False):
        if "draw" in group and group["draw"].notna().any():
            kept.append(_select_private(group, incomplete))
            continue
        metric = _selection_metric(group, selection)
        candidates = group["params"].nunique()
        if metric not in group or group[metric].isna().all():  # no validation split: nothing to select on
            if candidates > 1:
                raise ValueError(f"cannot select hyperparameters for {group['label'].iloc[0]}: no {metric} "
                                 f"(the validation split is empty); give a single value per hyperparameter")
            chosen = group.copy()
        elif per == "pooled" or candidates == 1:
            chosen = group[group["params"] == _best(group, metric)].copy()
        else:
            best = _best_per_seed(group, metric)
            chosen = group[group["params"].to_numpy() == group["rep"].map(best).to_numpy()].sort_values(
                "rep", kind="stable")
        chosen["selected_by"] = metric
        chosen["candidates"] = candidates
        chosen["eps_end_to_end"] = np.nan
        claims = set(chosen["dp_claim"].dropna()) if "dp_claim" in chosen else set()
        chosen["curve_claim"] = curve_claim(claims, int(candidates), **_caveats(chosen))
        kept.append(chosen)
    return pd.concat(kept, ignore_index=True)


def _best_per(group: pd.DataFrame, metric: str, by: list[str]) -> pd.Series:
    """For each group of `by` (the index), the params with the best mean validation `metric` over
    its rows. Ties: values within SELECTION_TIE_RTOL of the best are tied, then the lower mean
    validation loss, then the first params in sorted order; a group without a finite score keeps
    its first row's params."""
    keys = list(dict.fromkeys([metric, "val_loss"] if "val_loss" in group else [metric]))
    ranking = group.groupby(by + ["params"], sort=True)[keys].mean().dropna(subset=[metric])
    if SELECTION_METRICS[metric] == "max":
        ranking[metric] = -ranking[metric]
    for key in keys:  # the lowest of each key in turn, up to the tolerance (a key all NaN decides nothing)
        lowest = ranking.groupby(level=by)[key].transform("min")
        ranking = ranking[lowest.isna() | (ranking[key] <= lowest + SELECTION_TIE_RTOL * lowest.abs())]
    best = ranking.reset_index().groupby(by)["params"].first()
    first = group.groupby(by)["params"].first()
    return best.reindex(first.index).fillna(first)


def _best(group: pd.DataFrame, metric: str) -> str:
    """The params of the best mean validation `metric` over all the group's rows (`_best_per`)."""
    return _best_per(group.assign(_pooled=0), metric, ["_pooled"]).iloc[0]


def _best_per_seed(group: pd.DataFrame, metric: str) -> pd.Series:
    """rep -> the params each seed's own rows select (`_best_per` by rep)."""
    return _best_per(group, metric, ["rep"])


#: confidence level of the curves' intervals (`ci_low`, `ci_high`): figures draw them as bands and
#: statistical claims (dpbench.analysis.claims) use intervals of the same kind
CI_LEVEL = 0.95


def mean_ci(mean, std, count, level: float = CI_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Student-t confidence interval of a mean over seeds: mean -/+ t_{(1+level)/2, n-1} std / sqrt(n).

    `std` is the sample standard deviation (ddof = 1) of the `count` = n values. NaN where n < 2
    (one seed gives no interval). Arrays or scalars; returns (low, high) as float arrays.
    """
    from scipy import stats

    mean, std = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    n = np.asarray(count, dtype=float)
    enough = n >= 2
    q = np.where(enough, stats.t.ppf(0.5 + level / 2, np.where(enough, n - 1, 1.0)), np.nan)
    half = q * std / np.sqrt(np.where(enough, n, 1.0))
    return mean - half, mean + half


def with_ci(table: pd.DataFrame) -> pd.DataFrame:
    """`table` (columns mean, std, count) with `ci_low`, `ci_high` (`mean_ci`) replaced or appended."""
    low, high = mean_ci(table["mean"], table["std"], table["count"])
    return table.drop(columns=["ci_low", "ci_high"], errors="ignore").assign(ci_low=low, ci_high=high)


def _one_backend(group: pd.DataFrame, keys: tuple) -> str | None:
    """The one code path that trained a curve's runs (column `backend`; None where the table has none).
    The JAX path draws other random numbers than the numpy path: a curve never averages over both."""
    if "backend" not in group:
        return None
    found = sorted(set(group["backend"]))
    if len(found) > 1:
        raise ValueError(f"the curve {dict(zip(GROUP, keys))} mixes cells of the {' and '.join(found)} paths; "
                         f"draw each path's cells on their own (`--device`)")
    return found[0]


def curves_table(selected: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Long table: mean, std, sem, count and the 95% interval of the mean (`ci_low`, `ci_high`,
    `mean_ci`) per (algorithm, dataset, model, epsilon, metric).

    `selected` maps each metric to the runs selected for it (`selected_by_metric`). `params` is the
    combination most seeds selected (selection per seed may pick different ones).
    """
    rows = []
    for metric, runs in selected.items():
        if runs.empty or metric not in runs:
            continue
        for keys, group in runs.groupby(GROUP, dropna=False, sort=False):
            values = group[metric].dropna().to_numpy(dtype=float)
            if not values.size:
                continue
            backend = _one_backend(group, keys)
            std = float(values.std(ddof=1)) if values.size > 1 else 0.0
            rows.append({**dict(zip(GROUP, keys)), "algorithm": group["algorithm"].iloc[0],
                         "dataset_panel": group["dataset_panel"].iloc[0], "n_train": float(group["n_train"].mean()),
                         "n_params": int(group["n_params"].iloc[0]), "delta": group["delta"].mean(),
                         "n_features": group["n_features"].iloc[0] if "n_features" in group else np.nan,
                         "dataset": group["dataset"].iloc[0], "model": group["model"].iloc[0],
                         "params": group["params"].mode().iloc[0], "selected_by": group["selected_by"].iloc[0],
                         "candidates": int(group["candidates"].iloc[0]),
                         "dp_claim": group["curve_claim"].iloc[0], "dp_check": _checks(group),
                         "eps_end_to_end": group["eps_end_to_end"].max(),
                         "eps_rdp": group["eps_rdp"].max(), "eps_pld": group["eps_pld"].max(),
                         "noise_free_fraction": group["noise_free_fraction"].mean(),
                         "metric": metric, "mean": float(values.mean()), "std": std,
                         "sem": std / np.sqrt(values.size), "count": int(values.size),
                         **({"backend": backend} if backend is not None else {})})
    if not rows:
        return pd.DataFrame(columns=[*GROUP, "algorithm", "dataset_panel", "n_train", "metric", "mean", "std", "sem",
                                     "count", "ci_low", "ci_high"])
    out = with_ci(pd.DataFrame(rows))
    return out.sort_values(["metric", "dataset_label", "model_label", "label", "epsilon"],
                           na_position="first").reset_index(drop=True)


def _checks(group: pd.DataFrame) -> str:
    """What dpbench's own checks found in a curve point's runs (`dp_check` of `runs_table`): the
    first reason, and how many of the runs had one; "" when none did."""
    reasons = [r for r in group.get("dp_check", pd.Series(dtype=object)).fillna("") if r]
    if not reasons:
        return ""
    return reasons[0] + (f" ({len(reasons)} of {len(group)} runs)" if len(group) > 1 else "")


def summary_table(curves: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Wide view for the terminal: rows (dataset, model, algorithm), columns epsilon, 'mean ± std'."""
    part = curves[curves["metric"] == metric]
    if part.empty:
        return pd.DataFrame()
    cells = part.assign(
        eps=part["epsilon"].map(lambda e: "non-private" if pd.isna(e) else f"{e:g}"),
        value=[f"{m:.4g} ± {s:.2g}" for m, s in zip(part["mean"], part["std"])],
    )
    wide = cells.pivot_table(index=["dataset_label", "model_label", "label"], columns="eps", values="value",
                             aggfunc="first")
    order = sorted(wide.columns, key=lambda c: (c != "non-private", float(c) if c != "non-private" else 0.0))
    return wide[order].fillna("")


__all__ = ["runs_table", "select", "selected_by_metric", "curves_table", "summary_table", "METRICS", "mean_ci",
           "with_ci", "CI_LEVEL"]


def traces_table(records: list[dict]) -> pd.DataFrame:
    """Long table of per-iteration traces: one row per (cell key, step, metric) with its value.

    Built from the `trace` of every finished cell (cells.trace_metrics turns iterate snapshots
    into metrics), each cell key once; empty when no algorithm of the experiment records a trace.
    """
    rows = []
    seen: set[str] = set()
    for r in records:
        if r.get("status") != "ok" or r["key"] in seen:  # a cell shared by two spec entries: once
            continue
        seen.add(r["key"])
        for entry in r.get("trace") or []:
            step = entry.get("step")
            rows.extend({"key": r["key"], "step": step, "metric": k, "value": v}
                        for k, v in entry.items() if k != "step" and v is not None)
    return pd.DataFrame(rows, columns=["key", "step", "metric", "value"])


def trace_curves(selected: dict[str, pd.DataFrame], traces: pd.DataFrame) -> pd.DataFrame:
    """Mean, std, sem, count and the 95% interval of the mean (`mean_ci`) of each metric per
    (algorithm, dataset, model, epsilon, step), with the selected hyperparameters (`params`).

    Uses the same hyperparameter selection as `curves_table` (the runs `selected` for that metric),
    so a curve over iterations and the curve point of its final iterate describe the same fits.
    """
    columns = [*GROUP, "algorithm", "dataset_panel", "model", "metric", "step", "mean", "std", "sem", "count",
               "dp_claim", "params", "ci_low", "ci_high"]
    parts = []
    for metric, runs in selected.items():
        values = traces[traces["metric"] == metric]
        if runs.empty or values.empty:
            continue
        meta = runs[[*GROUP, "key", "algorithm", "dataset_panel", "model", "curve_claim", "params"]]
        joined = values.merge(meta, on="key")
        grouped = joined.groupby([*GROUP, "step"], dropna=False, sort=True)
        stats = grouped["value"].agg(["mean", "std", "count"]).reset_index()
        stats["std"] = stats["std"].fillna(0.0)
        stats["sem"] = stats["std"] / np.sqrt(stats["count"])
        first = grouped[["algorithm", "dataset_panel", "model", "curve_claim", "params"]].first().reset_index(drop=True)
        stats = pd.concat([stats, first.rename(columns={"curve_claim": "dp_claim"})], axis=1)
        stats["metric"] = metric
        parts.append(with_ci(stats))
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns]


def dpsco_rate(n: np.ndarray, d: float, epsilon: float, delta: np.ndarray) -> np.ndarray:
    """The DP-SCO lecture notes' excess population risk rate d log(1/delta)/(n^2 eps^2) + 1/n.

    Paper 002, end of §17.2 (output perturbation on GD, strongly convex, Lipschitz, smooth loss:
    O(d log(1/delta)/(n^2 eps^2) + 1/n), optimal). Constants are not given; figures scale it
    (`RATES["dpsco_rate"]`: one constant per term, fitted to output perturbation's curves).
    """
    return d * np.log(1.0 / delta) / (n ** 2 * epsilon ** 2) + 1.0 / n


# =============================================================================================
# reference rates: a paper's O(.) bound drawn beside the curves, its constants fitted to one curve
# =============================================================================================
def _col(points: pd.DataFrame, name: str) -> np.ndarray:
    return points[name].to_numpy(dtype=float)


@dataclass(frozen=True)
class Rate:
    """A rate a paper states, as a sum of terms in (n, d or m, epsilon, delta), each term's constant
    unknown (the O(.) hides it) and fitted to the curve of `algorithm` (`fit_rate`).

    `terms` map a curves table's rows (columns n_train, n_params, epsilon, delta) to each term's
    shape; `formula` is the legend text (matplotlib mathtext, constants written c or a, b), and
    `source` where the paper states it."""

    name: str
    formula: str
    source: str
    algorithm: str  # registry name of the method the rate is about; its curve fixes the constants
    terms: tuple[Callable[[pd.DataFrame], np.ndarray], ...]
    term_names: tuple[str, ...]
    metrics: tuple[str, ...]  # what the rate bounds (a figure of another metric does not draw it)


RATES: dict[str, Rate] = {r.name: r for r in (
    # paper 002 §17.2 (end): output perturbation on GD, strongly convex, Lipschitz, smooth losses
    Rate("dpsco_rate", r"$a\,d\,\log(1/\delta)/(n^2\varepsilon^2) + b/n$", "paper 002 §17.2", "output_perturbation_gd",
         (lambda p: _col(p, "n_params") * np.log(1.0 / _col(p, "delta"))
          / (_col(p, "n_train") * _col(p, "epsilon")) ** 2,
          lambda p: 1.0 / _col(p, "n_train")),
         ("privacy", "statistical"), ("excess_population_risk",)),
    # paper 000 Theorem 1: E[L(theta_priv; D) - L*] <= O(m G^2 log(1/delta) log(n) / (n^2 eps^2)),
    # DP-SGD's excess EMPIRICAL risk (the optimality gap of Figure 2); G is a constant of the loss
    Rate("dpsgd_rate", r"$c\,m\,\log(1/\delta)\,\log n/(n^2\varepsilon^2)$", "paper 000 Thm. 1", "dpsgd",
         (lambda p: _col(p, "n_params") * np.log(1.0 / _col(p, "delta")) * np.log(_col(p, "n_train"))
          / (_col(p, "n_train") * _col(p, "epsilon")) ** 2,),
         ("privacy",), ("optimality_gap",)),
    # paper 004 Theorems 5 and 7: excess population risk O~(d^2 log(1/delta) / (n eps^2)) of Algorithms 3
    # and 4 for strongly convex losses; an alpha-strongly convex L_D has ||w - w*||^2 <= (2/alpha)
    # (L_D(w) - L_D(w*)), so the estimation error the figures show is O~(d sqrt(log(1/delta)) / (sqrt(n) eps))
    Rate("heavy_tailed_rate", r"$c\,\sqrt{d^2\log(1/\delta)/(n\varepsilon^2)}$", "√ of paper 004 Thm. 7, Õ",
         "ht_robust_gd",
         (lambda p: _col(p, "n_params") * np.sqrt(np.log(1.0 / _col(p, "delta")) / _col(p, "n_train"))
          / _col(p, "epsilon"),),
         ("privacy",), ("estimation_error",)),
)}


@dataclass(frozen=True)
class FittedRate:
    """A rate with its constants fitted: `constants[k]` multiplies `rate.terms[k]`; `curve` is the
    label of the curve they were fitted to, `points` how many of its (positive) means were used."""

    rate: Rate
    curve: str
    constants: tuple[float, ...]
    points: int

    def values(self, rows: pd.DataFrame) -> np.ndarray:
        """The fitted rate at these rows (columns n_train, n_params, epsilon, delta)."""
        return sum(c * term(rows) for c, term in zip(self.constants, self.rate.terms))

    def describe(self) -> str:
        """Legend text: formula, source, the fitted constants and the curve they come from."""
        names = "ab" if len(self.constants) > 1 else "c"
        consts = ", ".join(f"{k} = {v:.3g}" for k, v in zip(names, self.constants))
        return f"{self.rate.formula} ({self.rate.source}; {consts}, fitted to {self.curve})"


def reference_curve(panel: pd.DataFrame, rate: Rate, curve: str | None = None) -> pd.DataFrame:
    """The private rows of `panel` the rate's constants are fitted to: those labelled `curve`, or,
    without one, those of the rate's algorithm (the first label of it, in table order)."""
    private = panel[panel["epsilon"].notna()]
    if curve is None:
        labels = list(dict.fromkeys(private.loc[private["algorithm"] == rate.algorithm, "label"]))
        if not labels:
            return private.iloc[:0]
        curve = labels[0]
    return private[private["label"] == curve]


def fit_rate(panel: pd.DataFrame, name: str, curve: str | None = None) -> FittedRate | None:
    """Fit the constants of rate `name` (RATES) to one curve of a panel (`reference_curve`).

    Least squares in log space over the curve's positive means y_i (every epsilon and size of the
    panel): minimise sum_i (log(sum_k c_k term_k(i)) - log y_i)^2 over c_k > 0. One term: the closed
    form c = exp(mean(log(y_i / term(i)))). Several terms (dpsco_rate: privacy a d log(1/delta)/(n^2
    eps^2), statistical b/n): each constant separately, by scipy.optimize.least_squares over
    log c_k, started from each term fitted alone and divided by the number of terms; the sum's
    shape (slope -2 while the privacy term dominates, -1 after) then shows where the curve turns.
    None when the panel has no such curve or none of its means is positive.
    """
    rate = RATES[name]
    points = reference_curve(panel, rate, curve)
    points = points[points["mean"] > 0]
    if points.empty:
        return None
    y = np.log(points["mean"].to_numpy(dtype=float))
    shapes = np.log(np.column_stack([term(points) for term in rate.terms]))
    alone = np.mean(y[:, None] - shapes, axis=0)  # log c_k of each term fitted alone
    if shapes.shape[1] == 1:
        logc = alone
    else:
        from scipy.optimize import least_squares

        def residual(logc: np.ndarray) -> np.ndarray:
            return np.logaddexp.reduce(shapes + logc, axis=1) - y

        logc = least_squares(residual, alone - np.log(shapes.shape[1]), method="lm", xtol=1e-14, ftol=1e-14,
                             gtol=1e-14).x
    return FittedRate(rate=rate, curve=str(points["label"].iloc[0]), constants=tuple(float(v) for v in np.exp(logc)),
                      points=len(points))


def fitted_dpsco_rate(panel: pd.DataFrame, epsilon: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(n, a d log(1/delta)/(n^2 eps^2) + b/n) over the sizes of the reference curve (output
    perturbation GD) at `epsilon`, with a and b fitted separately to that curve at every epsilon
    (`fit_rate(panel, "dpsco_rate")`); None when there is nothing to fit."""
    fitted = fit_rate(panel, "dpsco_rate")
    if fitted is None:
        return None
    rows = reference_curve(panel, fitted.rate, fitted.curve)
    rows = rows[rows["epsilon"] == epsilon].sort_values("n_train")
    if rows.empty:
        return None
    return rows["n_train"].to_numpy(dtype=float), fitted.values(rows)
