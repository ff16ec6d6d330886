"""dpbench.figures.epsilon: where a private curve's points sit, and the figure's claim marks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpbench.figures import epsilon
from dpbench.figures.epsilon import x_epsilon


def test_points_sit_at_the_end_to_end_epsilon_where_there_is_one():
    line = pd.DataFrame({"epsilon": [0.5, 1.0], "eps_end_to_end": [0.8, np.nan]})
    assert x_epsilon(line).tolist() == [0.8, 1.0]
    assert x_epsilon(line.drop(columns="eps_end_to_end")).tolist() == [0.5, 1.0]


def test_claim_marks_are_drawn_and_explained_in_the_footer(tmp_path, monkeypatch):
    rows = [{"label": label, "dataset_label": "d", "dataset_panel": "d", "model_label": "m", "epsilon": eps,
             "metric": "accuracy", "mean": 0.8, "std": 0.01, "count": 3, "dp_claim": "valid" if eps else "",
             "claim_mark": {0.5: "-c2", 1.0: "+c1, +c3"}.get(eps, "")}
            for label, eps in (("dp", 0.5), ("dp", 1.0), ("gd", np.nan))]
    finished = {}

    def keep(fig, axes, width, title, stem, **kwargs):
        finished.update(axes=axes, **kwargs)
        return [stem]

    monkeypatch.setattr(epsilon, "finish", keep)
    assert epsilon.metric_over_epsilon(pd.DataFrame(rows), "accuracy", tmp_path / "acc", algorithm_order=["dp"])
    lines = finished["axes"][0][0].get_lines()
    marks = {line.get_marker(): line.get_xdata().tolist() for line in lines if line.get_marker() in ("*", "X")}
    assert marks == {"*": [1.0], "X": [0.5]}  # a star where the claims hold, a cross where one fails
    key = finished["axes"][0][0].figure._dpbench_keys  # explained once in the style key
    assert list(key) == [epsilon.CLAIM_MARKS["+"][2], epsilon.CLAIM_MARKS["-"][2]]
    assert finished["order"] == ["dp", "gd"]
    assert epsilon.metric_over_epsilon(pd.DataFrame(rows), "optimality_gap", tmp_path / "none") == []


def _rows(claims_by_panel: dict, metric: str = "accuracy", majority: float | None = None) -> pd.DataFrame:
    rows = []
    for dataset, claim in claims_by_panel.items():
        for label, eps, mean in (("dp", 0.5, 0.70), ("dp", 1.0, 0.80), ("gd", np.nan, 0.85)):
            rows.append({"label": label, "dataset_label": dataset, "dataset_panel": dataset, "model_label": "m",
                         "epsilon": eps, "metric": metric, "mean": mean, "std": 0.01, "count": 3,
                         "dp_claim": claim if eps == eps else "", "majority_accuracy": majority})
    return pd.DataFrame(rows)


def test_one_legend_entry_per_method_and_the_line_styles_in_a_key(tmp_path, monkeypatch):
    drawn = {}
    real_save = epsilon.finish.__globals__["save"]
    monkeypatch.setitem(epsilon.finish.__globals__, "save",
                        lambda fig, stem: drawn.update(fig=fig) or real_save(fig, stem))
    table = _rows({"a": "valid per run; selection not private (2 candidates)", "b": "none"})
    epsilon.metric_over_epsilon(table, "accuracy", tmp_path / "acc", algorithm_order=["dp", "gd"])
    fig = drawn["fig"]
    legend, key = fig.legends[1], fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["dp", "gd"]  # one per method, no per-panel suffix
    assert [t.get_text() for t in key.get_texts()] == ["ε valid per run only", "ε not certified", "non-private"]
    footer = fig.texts[0].get_text()
    assert footer.count("\n") < 2 and "docs/validity.md" in footer  # at most two lines


def test_the_majority_class_value_sits_in_the_right_margin_clear_of_the_curves(tmp_path, monkeypatch):
    kept = {}

    def keep(fig, axes, width, title, stem, **kwargs):
        kept.update(fig=fig, ax=axes[0][0])
        return [stem]

    monkeypatch.setattr(epsilon, "finish", keep)
    table = _rows({"a": "valid"}, majority=0.80)  # the value of dp's point at epsilon 1: a label there would cover it
    epsilon.metric_over_epsilon(table, "accuracy", tmp_path / "acc", baseline="majority")
    fig, ax = kept["fig"], kept["ax"]
    renderer = fig.canvas.get_renderer()
    (label,) = [t for t in ax.texts if t.get_text() == "0.800"]
    box, area = label.get_window_extent(renderer), ax.get_window_extent(renderer)
    points = np.concatenate([line.get_transform().transform(np.column_stack(line.get_data()))
                             for line in ax.get_lines() if len(line.get_xdata())])
    inside = (points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1)
    assert box.x0 >= area.x1  # outside the data area
    assert not inside.any()  # on no curve's point
