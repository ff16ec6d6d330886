"""Per-iteration traces: iterate snapshots -> metrics in the cell layer -> long traces table ->
trace curves of the selected fits -> metric-over-iterations figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpbench import data, models
from dpbench.analysis.curves import runs_table, selected_by_metric, trace_curves, traces_table
from dpbench.figures.traces import metric_over_iterations
from dpbench.run.cells import trace_metrics


def test_snapshots_become_metrics_and_other_entries_pass_through():
    ds = data.load("synthetic_linear", seed=0, n=2000, d=4, val_fraction=0.0)
    model = models.make("ridge", ds.n_features, l2=1e-3)
    zero, exact = np.zeros(4), ds.w_star
    trace = [{"step": 0, "theta": zero}, {"step": 5, "theta": exact}, {"step": 7, "train_loss": 1.5}]
    out = trace_metrics(trace, model, ds, lstar=0.25)
    assert [e["step"] for e in out] == [0, 5, 7] and all("theta" not in e for e in out)
    assert out[0]["estimation_error"] == pytest.approx(np.linalg.norm(ds.w_star))
    assert out[1]["estimation_error"] == pytest.approx(0.0, abs=1e-15)
    assert out[1]["test_loss"] == pytest.approx(model.loss(exact, ds.X_test, ds.y_test))
    assert out[1]["optimality_gap"] == pytest.approx(model.loss(exact, ds.X_train, ds.y_train) - 0.25)
    assert out[2] == {"step": 7, "train_loss": 1.5}


def _record(key, label, eps, rep, params, values, val_loss):
    """A stored cell record with a trace of estimation errors `values` at steps 0, 10, 20."""
    return {"status": "ok", "key": key, "label": label, "algorithm": label, "dataset": "d", "dataset_label": "d",
            "model": "m", "model_label": "m", "epsilon": eps, "delta": 1e-5, "rep": rep, "problem": f"p{rep}",
            "n_train": 100, "n_test": 20, "n_params": 3, "lstar": 0.0, "fit_seconds": 0.1, "params": params,
            "metrics": {"train_loss": 1.0, "test_loss": 1.0, "val_loss": val_loss, "estimation_error": values[-1]},
            "privacy": {"claim": "valid", "target_epsilon": eps, "delta": 1e-5, "epsilon_spent": {"rdp": eps},
                        "proof": "a theorem"}
            if eps else {"claim": "none"},
            "trace": [{"step": s, "estimation_error": v} for s, v in zip((0, 10, 20), values)]}


def test_trace_curves_follow_the_hyperparameter_selection():
    records = [
        # private algorithm, two lr values: lr 1 has the lower validation loss and is selected
        _record("a0", "alg", 1.0, 0, {"lr": 1}, [1.0, 0.5, 0.2], 0.1),
        _record("a1", "alg", 1.0, 1, {"lr": 1}, [1.0, 0.7, 0.4], 0.1),
        _record("b0", "alg", 1.0, 0, {"lr": 2}, [1.0, 9.0, 9.0], 0.9),
        _record("b1", "alg", 1.0, 1, {"lr": 2}, [1.0, 9.0, 9.0], 0.9),
        _record("n0", "base", None, 0, {}, [1.0, 0.1, 0.0], 0.0),
    ]
    traces = traces_table(records)
    assert len(traces) == 15 and set(traces["metric"]) == {"estimation_error"}
    curves = trace_curves(selected_by_metric(runs_table(records), ("estimation_error",)), traces)
    alg = curves[curves["label"] == "alg"].sort_values("step")
    assert alg["step"].tolist() == [0, 10, 20]
    assert alg["mean"].tolist() == pytest.approx([1.0, 0.6, 0.3])
    assert alg["std"].tolist() == pytest.approx([0.0, np.std([0.5, 0.7], ddof=1), np.std([0.2, 0.4], ddof=1)])
    assert (alg["count"] == 2).all()
    claim = "valid (by the theorem in a theorem; not recomputed) per run; selection not private (2 candidates)"
    assert set(alg["dp_claim"]) == {claim}  # lr selected of 2
    base = curves[curves["label"] == "base"]
    assert base["epsilon"].isna().all() and base["count"].tolist() == [1, 1, 1]


def test_no_traces_give_an_empty_table_with_the_columns():
    traces = traces_table([{"status": "ok", "key": "k", "trace": []}])
    assert traces.empty and list(traces.columns) == ["key", "step", "metric", "value"]
    assert trace_curves({"estimation_error": pd.DataFrame()}, traces).empty


def test_metric_over_iterations_draws_one_column_per_epsilon(tmp_path):
    rows = []
    for label, eps in (("private", 0.5), ("private", 1.0), ("baseline", np.nan)):
        for step in (0, 10, 20):
            rows.append({"label": label, "dataset_label": "d", "dataset_panel": "d", "model_label": "m",
                         "epsilon": eps, "step": step, "metric": "estimation_error", "mean": 1.0 / (1 + step),
                         "std": 0.01, "dp_claim": "valid" if label == "private" else "none"})
    paths = metric_over_iterations(pd.DataFrame(rows), "estimation_error", tmp_path / "iters", title="t",
                                   algorithm_order=["private", "baseline"])
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 0 for p in paths)
    assert metric_over_iterations(pd.DataFrame(rows), "test_loss", tmp_path / "none") == []


def test_a_cell_shared_by_two_spec_entries_counts_once_per_entry():
    """A figure's dataset and the same point of a sweep share one stored cell (same key): its trace
    enters the traces table once, and each entry's curve counts it once."""
    first = _record("a0", "alg", 1.0, 0, {"lr": 1}, [1.0, 0.5, 0.2], 0.1)
    second = {**first, "dataset_label": "d sweep", "dataset_panel": "sweep"}
    traces = traces_table([first, second])
    assert len(traces) == 3
    curves = trace_curves(selected_by_metric(runs_table([first, second]), ("estimation_error",)), traces)
    assert sorted(set(curves["dataset_label"])) == ["d", "d sweep"] and (curves["count"] == 1).all()
