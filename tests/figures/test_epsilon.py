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
    assert finished["extra"] == epsilon.CLAIM_MARK_NOTE and finished["order"] == ["dp", "gd"]
    assert epsilon.metric_over_epsilon(pd.DataFrame(rows), "optimality_gap", tmp_path / "none") == []
