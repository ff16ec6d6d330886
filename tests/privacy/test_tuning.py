"""Private hyperparameter selection (dpbench.privacy.tuning, spec `tuning:`, curves._select_private) and
the labels of curves whose selection is not private."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, special, stats

from dpbench.analysis.curves import curve_claim, runs_table, select
from dpbench.core.errors import SpecError
from dpbench.figures.style import claim_kind
from dpbench.privacy import analytic_gaussian_sigma, events, tuning
from dpbench.run import cells as cells_mod
from dpbench.spec import experiment as spec

DELTA = 1e-5


# ---- the number of runs ---------------------------------------------------------------------
def _pmf(eta: float, gamma: float, k: np.ndarray) -> np.ndarray:
    """PS22's D_{eta,gamma} written out independently: normalised negative binomial / log-series."""
    if eta == 0:
        return (1 - gamma) ** k / (k * math.log(1 / gamma))
    log_p = special.gammaln(k + eta) - special.gammaln(eta) - special.gammaln(k + 1) + k * math.log(1 - gamma)
    return np.exp(log_p) * gamma**eta / (1 - gamma**eta)


@pytest.mark.parametrize("eta", [0.0, 0.5, 1.0, 2.0])
def test_expected_runs_and_gamma_match_the_distribution(eta):
    runs = tuning.run_count_distribution(8.0, eta)
    k = np.arange(1, 20000, dtype=float)
    pmf = _pmf(eta, runs.gamma, k)
    assert pmf.sum() == pytest.approx(1.0, rel=1e-9)
    assert (k * pmf).sum() == pytest.approx(8.0, rel=1e-8)
    assert runs.mean == pytest.approx(8.0, rel=1e-9)


@pytest.mark.parametrize("eta", [0.0, 1.0])
def test_sampled_run_counts_follow_the_distribution(eta):
    runs = tuning.run_count_distribution(4.0, eta)
    rng = np.random.default_rng(1)
    draws = np.array([runs.sample(rng) for _ in range(20000)])
    assert draws.min() >= 1
    observed = np.array([(draws == k).sum() for k in range(1, 9)] + [(draws >= 9).sum()])
    expected_p = _pmf(eta, runs.gamma, np.arange(1, 9, dtype=float))
    expected = np.append(expected_p, 1 - expected_p.sum()) * draws.size
    assert stats.chisquare(observed, expected).pvalue > 1e-4


# ---- the accounting --------------------------------------------------------------------------
def test_selection_rdp_is_papernot_steinke_theorem_2_for_a_gaussian():
    """Independent evaluation of PS22 Thm 2 for a Gaussian base (RDP lambda/(2 z^2)): lambda_hat is
    minimised continuously over [1, 1e4] with scipy instead of over the order grid."""
    z, runs = 3.0, tuning.run_count_distribution(10.0, 1.0)
    orders = np.array(tuning.TUNING_ORDERS)
    base = orders / (2 * z * z)

    def hat(lh: float) -> float:
        return 2.0 * ((1 - 1 / lh) * lh / (2 * z * z) + math.log(1 / runs.gamma) / lh)

    best = optimize.minimize_scalar(hat, bounds=(1.0, 1e4), method="bounded").fun
    expected = base + best + math.log(runs.mean) / (orders - 1)
    got = tuning.selection_rdp(base, runs)
    assert np.all(got >= expected - 1e-12)  # a grid minimum is never below the true minimum
    assert np.allclose(got, expected, rtol=2e-3)


def test_end_to_end_epsilon_grows_with_runs_and_covers_the_worst_candidate():
    sigma = analytic_gaussian_sigma(1.0, DELTA, 1.0)
    tight = {"claim": "valid", "private": True, "noise_std": sigma, "sensitivity": 1.0}
    loose = {**tight, "noise_std": sigma / 2}
    single = tuning.rdp_to_epsilon(tuning.event_rdp(tuning.candidate_event(tight)), DELTA)
    assert 1.0 <= single < 1.15  # RDP converts a 1-DP analytic Gaussian to a little more than 1
    few = tuning.end_to_end_epsilon([tight, tight], tuning.run_count_distribution(3, 0), DELTA, 1e6)
    many = tuning.end_to_end_epsilon([tight, tight], tuning.run_count_distribution(30, 0), DELTA, 1e6)
    worst = tuning.end_to_end_epsilon([tight, loose], tuning.run_count_distribution(3, 0), DELTA, 1e6)
    assert single < few < many and few < worst
    noisy_score = tuning.end_to_end_epsilon([tight, tight], tuning.run_count_distribution(3, 0), DELTA, 2.0)
    assert noisy_score > few  # the score's own noise is charged


def test_runs_without_an_rdp_description_leave_the_selection_unaccounted():
    gaussian = {"claim": "valid", "private": True, "noise_std": 2.0, "sensitivity": 1.0}
    runs = tuning.run_count_distribution(5, 0)
    assert tuning.end_to_end_epsilon([gaussian, {"claim": "valid", "private": True,
                                                 "epsilon_spent": {"kst12_theorem": 1.0}}], runs, DELTA, 10) is None
    assert tuning.end_to_end_epsilon([{**gaussian, "claim": "paper-only"}], runs, DELTA, 10) is None
    dpsgd = {"claim": "valid", "private": True, "sampling": {"kind": "poisson", "rate": 0.01},
             "noise_multiplier": 1.1, "steps": 1000}
    assert tuning.candidate_event(dpsgd) is not None


# ---- spec -> cells ---------------------------------------------------------------------------
def _spec(tuning_entry: dict | None = None, **over) -> dict:
    algo = {"name": "output_perturbation_gd", "label": "ZZMW17", "params": {"epochs": [5, 10, 20]}}
    if tuning_entry is not None:
        algo["tuning"] = tuning_entry
    return {"name": "t", "seeds": 3, "datasets": ["breast_cancer"], "models": ["logreg"], "algorithms": [algo],
            "epsilons": [0.5, 2.0], "delta": 1e-5, **over}


def test_tuned_cells_are_the_random_search_plus_accounting_runs():
    exp = spec.from_dict(_spec({"mean_runs": 2.0}))
    cells = exp.cells()
    assert exp.n_cells() == len(cells)
    for eps in exp.epsilons:
        mine = [c for c in cells if c.epsilon == eps]
        for rep in exp.seeds:
            draws = sorted(c.draw for c in mine if c.rep == rep and c.draw)
            assert draws == list(range(1, len(draws) + 1))  # draw 1..K of each search
        # every combination of the grid has a run, so the guarantee can cover all of them
        assert {c.params for c in mine} == set(exp.algorithms[0].grid)
        assert all(c.rep == exp.seeds[0] for c in mine if c.draw == 0)
    assert len({c.key for c in cells}) == len(cells)


def test_private_selection_runs_get_independent_noise_and_validation_runs_share_it():
    exp = spec.from_dict(_spec({"mean_runs": 2.0}))
    cell = next(c for c in exp.cells() if c.draw == 1)
    other_draw = cells_mod.Cell(**{**cell.__dict__, "draw": 2})
    other_params = cells_mod.Cell(**{**cell.__dict__, "params": (("epochs", 999),)})
    first = cell.algorithm_rng().normal(size=4)
    assert not np.allclose(first, other_draw.algorithm_rng().normal(size=4))
    assert not np.allclose(first, other_params.algorithm_rng().normal(size=4))
    plain = [c for c in spec.from_dict(_spec()).cells() if c.rep == 0 and c.epsilon == 0.5]
    assert len(plain) == 3 and plain[0].draw is None
    streams = [c.algorithm_rng().normal(size=4) for c in plain]
    assert np.allclose(streams[0], streams[1])  # common random numbers: the reason validation selection is not private


@pytest.mark.parametrize("entry, message", [
    ({"mean_runs": 1}, "mean_runs: must be > 1"),
    ({"eta": -0.5}, "eta: must be >= 0"),
    ({"score": "accuracy"}, "score: must be one of"),
    ({"score_noise": 0}, "score_noise: must be > 0"),
    ({"runs": 3}, "runs: unknown key"),
    ([3], "must be a mapping"),
])
def test_bad_tuning_settings_are_refused_with_their_path(entry, message):
    with pytest.raises(SpecError, match=r"algorithms\[0\]\.tuning"):
        spec.from_dict(_spec(entry))
    with pytest.raises(SpecError, match=message):
        spec.from_dict(_spec(entry))


def test_tuning_a_non_private_baseline_or_a_regressor_by_accuracy_is_refused():
    raw = _spec()
    raw["algorithms"] = [{"name": "nonprivate", "tuning": {}}]
    with pytest.raises(SpecError, match="needs a private algorithm"):
        spec.from_dict(raw)
    raw = _spec({"mean_runs": 3})
    raw["datasets"], raw["models"] = [{"name": "synthetic_linear", "options": {"n": 500, "d": 3}}], ["ridge"]
    raw["algorithms"][0]["name"], raw["algorithms"][0]["params"] = "dp_gd", {"epochs": [2, 4]}
    raw["metrics"] = ["test_loss"]
    with pytest.raises(SpecError, match="val_accuracy needs a classifier"):
        spec.from_dict(raw)


# ---- selection and labels --------------------------------------------------------------------
def _run(key, rep, draw, params, score, claim="valid", noise_std=2.0):
    privacy = {"claim": claim, "private": True, "noise_std": noise_std, "sensitivity": 1.0, "target_epsilon": 1.0,
               "delta": DELTA, "epsilon_spent": {"analytic_gaussian": 1.0},
               "event": events.dpsgd_event_json(noise_std, 1.0, 1), "epsilon_recomputed": {"gdp": 1.0}}
    settings = {"mean_runs": 3.0, "eta": 0.0, "score": "val_accuracy", "score_noise": 10.0, "loss_bound": 1.0,
                "grid_size": 2}
    return {"status": "ok", "key": key, "label": "a", "algorithm": "a", "dataset": "d", "dataset_label": "d",
            "model": "m", "model_label": "m", "epsilon": 1.0, "delta": DELTA, "rep": rep, "problem": f"p{rep}",
            "n_train": 1000, "n_test": 100, "n_params": 3, "lstar": 0.0, "fit_seconds": 0.1, "params": params,
            "metrics": {"train_loss": 1.0, "test_loss": 1.0, "val_loss": 1.0, "accuracy": 0.5 + score / 10,
                        "val_accuracy": 0.9}, "privacy": privacy, "trace": [], "draw": draw,
            "tuning": {**settings, "draw": draw, "score_value": score, "score_sensitivity": 0.01,
                       "score_noise_multiplier": 10.0}}


def test_private_selection_takes_the_best_noisy_score_per_repetition_and_never_an_accounting_run():
    records = [_run("a1", 0, 1, {"lr": 1}, 0.2), _run("a2", 0, 2, {"lr": 1}, 0.7), _run("a3", 0, 3, {"lr": 1}, 0.7),
               _run("b1", 1, 1, {"lr": 1}, 0.4), _run("acc", 0, 0, {"lr": 2}, 0.99)]
    chosen = select(runs_table(records))
    assert sorted(chosen["key"]) == ["a2", "b1"]  # the tie at 0.7 goes to the earlier draw
    assert chosen["candidates"].iloc[0] == 2
    assert np.isfinite(chosen["eps_end_to_end"]).all() and (chosen["eps_end_to_end"] > 1.0).all()
    assert set(chosen["curve_claim"]) == {"valid end to end (private selection, 2 candidates)"}


def test_private_selection_without_a_run_of_every_combination_is_not_accounted():
    records = [_run("a1", 0, 1, {"lr": 1}, 0.2), _run("a2", 0, 2, {"lr": 1}, 0.7)]
    chosen = select(runs_table(records))
    assert chosen["eps_end_to_end"].isna().all()
    assert set(chosen["curve_claim"]) == {"valid per run; private selection not accounted (2 candidates)"}


def test_a_search_that_lost_a_draw_is_not_valid_end_to_end():
    full = [_run("a1", 0, 1, {"lr": 1}, 0.2), _run("a3", 0, 3, {"lr": 1}, 0.7), _run("b1", 1, 1, {"lr": 1}, 0.4),
            _run("acc", 0, 0, {"lr": 2}, 0.99)]
    chosen = select(runs_table(full))  # rep 0 has draws 1 and 3: draw 2 is missing
    assert chosen["eps_end_to_end"].isna().all()
    assert set(chosen["curve_claim"]) == {
        "valid per run; private selection incomplete (a draw of seed 0's search is missing) (2 candidates)"}
    # a lost last draw cannot be seen in the runs: the inventory names it (`incomplete`)
    whole = [r for r in full if r["key"] != "a3"]
    assert set(select(runs_table(whole))["curve_claim"]) == {"valid end to end (private selection, 2 candidates)"}
    lost = frozenset({("a", "d", "m", 1.0, 1)})
    assert set(select(runs_table(whole), incomplete=lost)["curve_claim"]) == {
        "valid per run; private selection incomplete (a draw of seed 1's search is missing) (2 candidates)"}


def test_curve_claims_say_what_the_selection_cost():
    assert curve_claim({"valid"}, 1) == "valid"
    assert curve_claim({"valid"}, 4) == "valid per run; selection not private (4 candidates)"
    assert curve_claim({"paper-only"}, 2) == "paper-only per run; selection not private (2 candidates)"
    assert curve_claim(set(), 3) == "none"
    assert curve_claim({"valid"}, 1, weak_delta=True) == "valid; weak delta (>= 1/n)"
    assert claim_kind(pd.DataFrame({"dp_claim": ["valid"]})) == "valid"
    assert claim_kind(pd.DataFrame({"dp_claim": ["valid end to end (private selection, 3 candidates)"]})) \
        == "valid"
    for weaker in ("valid per run; selection not private (4 candidates)", "valid; weak delta (>= 1/n)"):
        assert claim_kind(pd.DataFrame({"dp_claim": ["valid", weaker]})) == "selected"
    assert claim_kind(pd.DataFrame({"dp_claim": ["paper-only per run; selection not private (2 candidates)"]})) \
        == "paper-only"


def test_a_delta_of_at_least_one_over_n_is_flagged_in_the_ledger_and_the_curve(tmp_path):
    context = cells_mod.CellContext(cache_dir=str(tmp_path))
    base = dict(algorithm="output_perturbation_gd", params=(("epochs", 5),), dataset="breast_cancer",
                dataset_options=(), model="logreg", model_options=(("l2", 1e-4),), epsilon=1.0, rep=0, seed=0)
    weak = cells_mod.run_cell(cells_mod.Cell(**base, delta="1/n"), context)
    strong = cells_mod.run_cell(cells_mod.Cell(**base, delta="1/n**1.1"), context)
    assert "weak_delta" in weak["privacy"] and "weak_delta" not in strong["privacy"]
    for record in (weak, strong):
        record["status"] = "ok"
    runs = runs_table([weak])
    assert select(runs)["curve_claim"].iloc[0] == "valid; weak delta (>= 1/n)"


def test_run_cell_of_private_selection_records_a_noisy_score(tmp_path):
    exp = spec.from_dict(_spec({"mean_runs": 2.0, "score_noise": 1.0}))
    cell = next(c for c in exp.cells() if c.draw == 1)
    record = cells_mod.run_cell(cell, cells_mod.CellContext(cache_dir=str(tmp_path)))
    t = record["tuning"]
    assert record["draw"] == 1 and t["draw"] == 1
    assert t["score_sensitivity"] == pytest.approx(1.0 / record["n_val"])
    assert t["score_noise_multiplier"] == pytest.approx(1.0 / cell.epsilon)
    assert t["score_value"] != record["metrics"]["val_accuracy"]
    assert abs(t["score_value"] - record["metrics"]["val_accuracy"]) < 8 * t["score_noise_multiplier"] * t["score_sensitivity"]
    json.dumps(record)  # storable
