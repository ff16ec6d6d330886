"""dpbench.figures.audit: the audit rows a figure reads, and the figure of an audits table."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpbench.figures.audit import audit_figure, audit_rows


def _audits() -> pd.DataFrame:
    return pd.DataFrame({"label": ["A", "A", "B"], "claimed_epsilon": [1.0, 2.0, np.nan], "claim": ["valid"] * 3,
                         "epsilon_lower_bound": [0.4, 2.5, 0.1], "ceiling": [4.9] * 3, "trials": [500] * 3})


def test_rows_without_method_or_threat_are_multi_run_final_model_audits_with_no_estimate():
    rows = audit_rows(_audits())
    assert rows["label"].tolist() == ["A", "A"]  # an audit without a claimed epsilon has nothing to compare
    assert set(rows["method"]) == {"multi-run"} and set(rows["threat"]) == {"final_model"}
    assert rows["epsilon_estimate"].isna().all()
    one_run = _audits().assign(method=["one-run", None, None])
    assert audit_rows(one_run)["method"].tolist() == ["one-run", "multi-run"]


def test_audit_figure_writes_png_and_pdf_or_nothing(tmp_path):
    assert [p.name for p in audit_figure(_audits(), tmp_path / "audit", title="t")] == ["audit.png", "audit.pdf"]
    assert audit_figure(_audits().iloc[2:], tmp_path / "none") == []
    assert not (tmp_path / "none.png").exists()
