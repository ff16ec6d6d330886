"""dpbench.analysis.curves: hyperparameter selection by mean validation score, its ties, the curves'
confidence intervals (checked against scipy.stats.t) and the optimality gap's floor."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpbench.analysis.curves import (
    SELECTION_TIE_RTOL,
    curves_table,
    mean_ci,
    runs_table,
    select,
    selected_by_metric,
    with_ci,
)


def _runs(rows: list[tuple]) -> pd.DataFrame:
    """A runs table of one algorithm on one (dataset, model): rows (epsilon, lr, rep, val_accuracy, val_loss)."""
    return pd.DataFrame([{"label": "alg", "dataset_label": "d", "model_label": "m", "epsilon": eps, "rep": rep,
                          "params": json.dumps({"lr": lr}), "val_accuracy": acc, "val_loss": loss,
                          "dp_claim": "valid", "accuracy": acc, "test_loss": loss}
                         for eps, lr, rep, acc, loss in rows])


def _chosen(selected: pd.DataFrame, eps: float = 1.0) -> set[float]:
    return {json.loads(p)["lr"] for p in selected.loc[selected["epsilon"] == eps, "params"]}


# ---- selection ------------------------------------------------------------------------------------
def test_pooled_selection_takes_the_best_mean_over_seeds_per_seed_each_seed_its_own_best():
    # lr 1: accuracies 0.9 and 0.5 (mean 0.7, best single seed); lr 2: 0.75 and 0.75 (mean 0.75)
    runs = _runs([(1.0, 1, 0, 0.9, 0.3), (1.0, 1, 1, 0.5, 0.3), (1.0, 2, 0, 0.75, 0.5), (1.0, 2, 1, 0.75, 0.5)])
    per_seed = select(runs, "val_accuracy")  # the default: seed 0 picks lr 1 (0.9), seed 1 lr 2 (0.75)
    assert dict(zip(per_seed["rep"], per_seed["params"].map(lambda p: json.loads(p)["lr"]))) == {0: 1, 1: 2}
    chosen = select(runs, "val_accuracy", per="pooled")
    assert _chosen(chosen) == {2} and sorted(chosen["rep"]) == [0, 1]
    assert set(chosen["selected_by"]) == {"val_accuracy"} and set(chosen["candidates"]) == {2}
    assert set(chosen["curve_claim"]) == {"valid per run; selection not private (2 candidates)"}
    assert _chosen(select(runs, "val_loss", per="pooled")) == {1}  # the lower mean loss, whatever the accuracy
    with pytest.raises(ValueError, match="per must be"):
        select(runs, "val_accuracy", per="each")


def test_per_seed_selection_is_the_best_of_each_seed_alone_ties_and_missing_scores_included():
    """`select(per="seed")` ranks every seed at once; it must pick what `_best` picks on each seed's
    own rows: ties within SELECTION_TIE_RTOL, then the lower validation loss, then parameter order;
    a seed with no finite score keeps its first row."""
    from dpbench.analysis.curves import _best

    rng = np.random.default_rng(3)
    rows = []
    for rep in range(12):
        for lr in (1, 2, 3, 10):
            acc = float(rng.choice([0.7, 0.8, 0.8 * (1 + SELECTION_TIE_RTOL / 3)]))  # ties within the tolerance
            loss = float(rng.choice([0.3, 0.4, np.nan]))
            rows.append((1.0, lr, rep, np.nan if rep == 11 else acc, loss))
    runs = _runs(rows)
    for by in ("val_accuracy", "val_loss"):
        chosen = select(runs, by)
        picked = dict(zip(chosen["rep"], chosen["params"]))
        for rep, seed in runs.groupby("rep"):
            expected = seed["params"].iloc[0] if seed[by].isna().all() else _best(seed, by)
            assert picked[rep] == expected, (by, rep)
        assert list(chosen["rep"]) == sorted(chosen["rep"])  # seed by seed, as the per-seed loop gave them


def test_every_epsilon_is_selected_on_its_own():
    runs = _runs([(1.0, 1, 0, 0.9, 0.3), (1.0, 2, 0, 0.8, 0.3), (4.0, 1, 0, 0.7, 0.3), (4.0, 2, 0, 0.8, 0.3)])
    chosen = select(runs, "val_accuracy")
    assert _chosen(chosen, 1.0) == {1} and _chosen(chosen, 4.0) == {2}


def test_a_tie_in_accuracy_goes_to_the_lower_validation_loss_then_to_parameter_order():
    runs = _runs([(1.0, 1, 0, 0.8, 0.40), (1.0, 2, 0, 0.8, 0.35), (1.0, 3, 0, 0.7, 0.10)])
    assert _chosen(select(runs, "val_accuracy")) == {2}
    full_tie = _runs([(1.0, 3, 0, 0.8, 0.4), (1.0, 2, 0, 0.8, 0.4), (1.0, 10, 0, 0.8, 0.4)])
    assert _chosen(select(full_tie, "val_accuracy")) == {10}  # '{"lr": 10}' sorts first as text


def test_losses_within_the_tie_tolerance_are_a_tie():
    base = 0.5
    close = base * (1 + SELECTION_TIE_RTOL / 10)  # last-bit moves: the first in parameter order wins
    assert _chosen(select(_runs([(1.0, 1, 0, 0.8, close), (1.0, 2, 0, 0.8, base)]), "val_loss")) == {1}
    apart = base * (1 + SELECTION_TIE_RTOL * 10)  # beyond the tolerance: the lower loss wins
    assert _chosen(select(_runs([(1.0, 1, 0, 0.8, apart), (1.0, 2, 0, 0.8, base)]), "val_loss")) == {2}


def test_accuracy_selection_falls_back_to_the_loss_without_validation_accuracy():
    runs = _runs([(1.0, 1, 0, np.nan, 0.2), (1.0, 2, 0, np.nan, 0.1)])
    chosen = select(runs, "val_accuracy")
    assert _chosen(chosen) == {2} and set(chosen["selected_by"]) == {"val_loss"}


def test_without_any_validation_score_only_a_single_setting_can_be_selected():
    runs = _runs([(1.0, 1, 0, np.nan, np.nan), (1.0, 2, 0, np.nan, np.nan)])
    with pytest.raises(ValueError, match="cannot select hyperparameters for alg: no val_loss"):
        select(runs, "val_accuracy")
    one = select(_runs([(1.0, 1, 0, np.nan, np.nan)]), "val_loss")
    assert len(one) == 1 and set(one["curve_claim"]) == {"valid"}


def test_each_metric_is_selected_by_its_own_score():
    runs = _runs([(1.0, 1, 0, 0.9, 0.5), (1.0, 2, 0, 0.8, 0.2)])
    selected = selected_by_metric(runs, ("accuracy", "test_loss"))
    assert _chosen(selected["accuracy"]) == {1} and _chosen(selected["test_loss"]) == {2}
    assert _chosen(selected_by_metric(runs, ("accuracy",), "val_loss")["accuracy"]) == {2}


# ---- intervals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [0.95, 0.9])
def test_mean_ci_is_the_student_t_interval(level):
    values = np.array([0.61, 0.64, 0.58, 0.70, 0.66])
    mean, std, n = values.mean(), values.std(ddof=1), len(values)
    low, high = mean_ci(mean, std, n, level=level)
    expected = stats.t.interval(level, df=n - 1, loc=mean, scale=std / np.sqrt(n))
    assert (float(low), float(high)) == pytest.approx(expected, rel=1e-12)


def test_mean_ci_works_on_arrays_and_gives_no_interval_for_one_seed():
    low, high = mean_ci([1.0, 2.0, 3.0], [0.5, 0.5, 0.0], [1, 2, 10])
    assert np.isnan(low[0]) and np.isnan(high[0])
    half = stats.t.ppf(0.975, 1) * 0.5 / np.sqrt(2)
    assert (low[1], high[1]) == pytest.approx((2.0 - half, 2.0 + half), rel=1e-12)
    assert (low[2], high[2]) == (3.0, 3.0)  # no spread, no width


def test_with_ci_replaces_stale_interval_columns():
    table = pd.DataFrame({"mean": [1.0], "std": [1.0], "count": [4], "ci_low": [-99.0], "ci_high": [99.0]})
    out = with_ci(table)
    half = stats.t.ppf(0.975, 3) / 2
    assert list(out.columns).count("ci_low") == 1
    assert (out["ci_low"][0], out["ci_high"][0]) == pytest.approx((1.0 - half, 1.0 + half), rel=1e-12)


# ---- from records to curves ---------------------------------------------------------------------------
def _record(key: str, lr: float, rep: int, train_loss: float, lstar: float, accuracy: float) -> dict:
    return {"status": "ok", "key": key, "label": "alg", "algorithm": "alg", "dataset": "d", "dataset_label": "d",
            "model": "m", "model_label": "m", "epsilon": 1.0, "delta": 1e-5, "rep": rep, "problem": f"p{rep}",
            "n_train": 100, "n_test": 20, "n_params": 3, "lstar": lstar, "fit_seconds": 0.1, "params": {"lr": lr},
            "metrics": {"train_loss": train_loss, "test_loss": 1.0, "val_loss": 1.0, "val_accuracy": accuracy,
                        "accuracy": accuracy},
            "privacy": {"claim": "valid", "epsilon_spent": {"rdp": 0.9}}}


def test_the_gap_floor_and_the_curves_of_the_selected_runs():
    records = [_record("a", 1, 0, 0.50, 0.40, 0.8), _record("b", 1, 1, 0.45, 0.40, 0.7),
               _record("c", 2, 0, 0.30, 0.40, 0.6), _record("d", 2, 1, 0.60, 0.40, 0.5),
               {"status": "error", "key": "e"}]
    runs = runs_table(records)
    assert len(runs) == 4 and set(runs["eps_rdp"]) == {0.9}
    gaps = dict(zip(runs["key"], runs["optimality_gap"]))
    # problem p0: L* 0.40 lowered to the best training loss 0.30, so no gap is negative
    assert gaps == pytest.approx({"a": 0.20, "c": 0.0, "b": 0.05, "d": 0.20})
    curves = curves_table(selected_by_metric(runs, ("accuracy", "optimality_gap")))
    accuracy = curves[curves["metric"] == "accuracy"].iloc[0]
    assert json.loads(accuracy["params"]) == {"lr": 1} and accuracy["count"] == 2
    assert accuracy["mean"] == pytest.approx(0.75) and accuracy["std"] == pytest.approx(np.std([0.8, 0.7], ddof=1))
    expected = stats.t.interval(0.95, df=1, loc=0.75, scale=accuracy["std"] / np.sqrt(2))
    assert (accuracy["ci_low"], accuracy["ci_high"]) == pytest.approx(expected, rel=1e-12)


def test_a_curve_claim_says_what_its_valid_rests_on_and_when_scaling_used_the_data():
    from dpbench.analysis.curves import SCALING_CAVEAT, curve_claim
    from dpbench.figures.style import claim_kind, claim_status

    assert curve_claim({"valid"}, 1, bases={"recomputed"}) == "valid"
    theorem = "by the theorem in Kifer, Smith, Thakurta 2012, Theorem 2; not recomputed"
    assert curve_claim({"valid"}, 1, bases={theorem}) == f"valid ({theorem})"
    assert curve_claim({"valid"}, 4, bases={theorem, "recomputed"}) == \
        "valid (by the theorem in Kifer, Smith, Thakurta 2012, Theorem 2; not recomputed) per run; " \
        "selection not private (4 candidates)"
    assert curve_claim({"valid"}, 1, bases={theorem, "not recomputed"}) == "valid (partly not recomputed)"
    assert curve_claim({"paper-only"}, 1, bases={theorem}) == "paper-only"
    scaled = curve_claim({"valid"}, 1, bases={"recomputed"}, scaling=True)
    assert scaled == f"valid; {SCALING_CAVEAT}"
    assert curve_claim({"none"}, 1, scaling=True) == "none"
    line = pd.DataFrame({"dp_claim": [scaled]})
    assert claim_kind(line) == "selected" and "scaling data-dependent" in claim_status(line)[2]
    assert claim_kind(pd.DataFrame({"dp_claim": [f"valid ({theorem})"]})) == "valid"
