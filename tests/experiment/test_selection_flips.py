"""`dpbench claims --selection`: the claims whose verdict depends on selecting hyperparameters per
seed or pooled over seeds are found by evaluating every claim both ways."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner

from dpbench.analysis import claims, curves
from dpbench.cli.main import main
from dpbench.experiment import verdicts as verdicts_mod
from dpbench.spec.experiment import load as load_experiment

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "experiments" / "quickstart.yaml"


def _trap(results: Path) -> None:
    """Rewrite the quickstart's runs table so that at epsilon = 3 one combination is best on the
    mean validation score over seeds and matches the non-private accuracy (0.83), while another is best on
    the validation split of every other seed and is far worse on test: pooled selection then
    reproduces `qs-reaches-nonprivate-at-3`, selection per seed does not."""
    path = results / "quickstart" / "runs.csv.gz"
    runs = pd.read_csv(path)
    exp = load_experiment(SPEC)
    by = curves.selection_for("accuracy", exp.selection)  # the score that selects the accuracy curve
    higher = by != "val_loss"  # val_accuracy: higher is better
    at3 = (runs["label"] == "dpsgd") & np.isclose(runs["epsilon"], 3.0)
    combos = sorted(runs.loc[at3, "params"].unique())
    assert len(combos) >= 2, "the quickstart grid has fewer than two combinations at epsilon 3"
    runs.loc[runs["label"] == "nonprivate", "accuracy"] = 0.83
    jitter = np.random.default_rng(0).uniform(-0.002, 0.002, size=int(runs["rep"].max()) + 1)
    good, bad = combos[0], combos[1]
    for params in combos:
        rows = at3 & (runs["params"] == params)
        reps = runs.loc[rows, "rep"]
        if params == good:
            val = np.full(len(reps), 0.8 if higher else 0.3)
            runs.loc[rows, "accuracy"] = 0.83 + jitter[reps]
        elif params == bad:  # best on the odd seeds, worst on the even ones: its mean loses
            val = np.where(reps % 2 == 1, 0.81 if higher else 0.29, 0.1 if higher else 2.0)
            runs.loc[rows, "accuracy"] = 0.63 + jitter[reps]
        else:
            val = np.full(len(reps), 0.0 if higher else 5.0)
        runs.loc[rows, by] = val
    runs.to_csv(path, index=False)


def test_a_verdict_that_depends_on_the_selection_is_listed_with_both_verdicts(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "quickstart", results / "quickstart")
    _trap(results)
    exp = load_experiment(SPEC)
    assert exp.select_per == "seed"
    own = verdicts_mod.claim_verdicts(exp, results)
    flips = verdicts_mod.selection_flips(exp, own, results)
    by_claim = {f["claim"]: f for f in flips}
    assert "qs-reaches-nonprivate-at-3" in by_claim, flips
    flip = by_claim["qs-reaches-nonprivate-at-3"]
    assert flip["pooled"] == "reproduced" and flip["seed"] != "reproduced"
    # exactly the claims whose pooled verdict differs are listed
    pooled = verdicts_mod.claims_from(exp, verdicts_mod.selected_for_claims(exp, results, "pooled"), None,
                                      results=results)
    assert set(by_claim) == {w.claim.id for v, w in zip(own, pooled) if v.verdict != w.verdict}

    page = tmp_path / "claims.md"
    page.write_text("# selection\n\n<!-- claims:selection -->\nstale\n<!-- /claims:selection -->\n")
    out = CliRunner().invoke(main, ["claims", str(SPEC), "--results", str(results), "--no-progress", "--selection", str(page)])
    assert out.exit_code == 0, out.output
    text = page.read_text()
    assert "stale" not in text and "| quickstart | `qs-reaches-nonprivate-at-3` |" in text
    assert "qs-reaches-nonprivate-at-3" in out.output


def test_no_flip_is_said_in_words():
    assert claims.selection_markdown([], ["a", "b"]).strip() == (
        "No verdict of a, b changes between selection per seed and pooled.")
    text = claims.selection_markdown([{"experiment": "a", "claim": "x", "seed": "reproduced",
                                       "pooled": "undecided at 5 seeds"}], ["a", "b"])
    assert "| a | `x` | reproduced | undecided at 5 seeds |" in text and "No verdict of b changes." in text
