"""A claim may read a quantity of each run's privacy ledger (run.metrics.LEDGER_QUANTITIES, e.g. the
share of PIDP-SGD's noise-free steps) like a metric: its margin comes from the spec's `margins:`,
and it is read on the runs the experiment's first metric selects."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpbench.analysis import claims
from dpbench.core.errors import SpecError
from dpbench.experiment.verdicts import ledger_selection
from dpbench.spec.experiment import from_dict

CLAIM = {"id": "escape", "source": "test", "quote": "more instances escape the noise", "kind": "trend",
         "metric": "noise_free_fraction", "a": "nonprivate", "relation": "increasing"}
SPEC = {"datasets": [{"name": "iris"}], "models": [{"name": "logreg"}], "epsilons": [0.1, 1.0, 10.0],
        "algorithms": [{"name": "nonprivate"}], "metrics": ["accuracy", "optimality_gap"],
        "margins": {"noise_free_fraction": 0.01}, "claims": [CLAIM]}


def _runs(fraction: np.ndarray, epsilons=(0.1, 1.0, 10.0)) -> pd.DataFrame:
    """Selected runs of one curve: fraction[seed, j] the ledger's share at epsilons[j]."""
    rows = [{"label": "nonprivate", "dataset_label": "Iris", "dataset_panel": "Iris", "model_label": "LR",
             "epsilon": eps, "rep": r, "accuracy": 0.9, "noise_free_fraction": float(fraction[r, j])}
            for r in range(fraction.shape[0]) for j, eps in enumerate(epsilons)]
    return pd.DataFrame(rows)


def test_a_ledger_quantity_takes_its_margin_from_the_spec():
    exp = from_dict(SPEC)
    assert exp.claims[0].equivalence == 0.01
    with pytest.raises(SpecError, match="no margin for metric 'noise_free_fraction'"):
        from_dict({**SPEC, "margins": None})
    with pytest.raises(SpecError, match="margins.escape_rate: unknown key"):
        from_dict({**SPEC, "margins": {"escape_rate": 0.01}})


def test_a_ledger_claim_reads_the_runs_the_first_metric_selects():
    exp = from_dict(SPEC)
    rng = np.random.default_rng(5)
    rising = np.clip(np.array([0.1, 0.5, 0.9]) + rng.normal(0, 0.02, (20, 3)), 0, 1)
    by_accuracy, by_gap = _runs(rising), _runs(rising[:, ::-1])  # the gap's selection: other runs
    selected = {"accuracy": by_accuracy, "optimality_gap": by_gap}
    ledger = ledger_selection(exp, selected)
    assert list(ledger) == ["noise_free_fraction"] and ledger["noise_free_fraction"] is by_accuracy
    verdict, = claims.evaluate(exp.claims, claims.per_seed_points(ledger))
    assert verdict.verdict == "reproduced"
    flat = claims.evaluate(exp.claims, claims.per_seed_points(ledger_selection(exp, {"accuracy": _runs(
        np.zeros((20, 3)))})))[0]
    assert flat.verdict == "no difference beyond m"
    assert ledger_selection(from_dict({**SPEC, "claims": None, "margins": None}), selected) == {}
