"""The majority-class rates the claims' screens and the figures read come from the data where it
can be read and from the stored results/<exp>/majority.csv where it cannot, so verdicts are the
same with or without the raw files; with neither, a verdict that needs a rate says so (one line,
non-zero exit). On the committed quickstart runs table (no cells are trained)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpbench.analysis import claims
from dpbench.cli.main import main
from dpbench.core.errors import DpbenchError
from dpbench.experiment import baselines, render
from dpbench.experiment import verdicts as verdicts_mod
from dpbench.experiment.layout import MAJORITY_FILE
from dpbench.spec.experiment import load as load_experiment

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "experiments" / "quickstart.yaml"
LABELS = ["adult", "breast_cancer"]  # the quickstart's data sets (both +-1 classification)

#: a claim the majority-class screen decides: after `_weak_dpsgd`, DP-SGD's accuracy at epsilon 0.05
#: on Breast Cancer is below the majority line, so beating it shows nothing (verdict "vacuous");
#: without the rate the screen is off and the non-private model's 0.97 "reproduces" it
SCREENED_CLAIM = """
  - id: np-beats-weak-dpsgd
    source: test
    quote: the non-private model beats DP-SGD at epsilon 0.05
    kind: comparison
    metric: accuracy
    a: nonprivate
    b: dpsgd
    relation: greater
    epsilons: [0.05, 0.05]
    datasets: [breast_cancer]
"""


@pytest.fixture(scope="module")
def quickstart_data(data_dir: Path) -> Path:
    """The data folder with the raw files of both quickstart data sets."""
    if not (data_dir / "adult" / "adult.data").is_file():
        pytest.skip(f"the raw Adult file is absent from {data_dir} (run `dpbench data fetch adult`)")
    return data_dir


def _results(tmp_path: Path, with_table: bool = False) -> Path:
    """A results folder with the committed quickstart tables, with or without its majority.csv."""
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "quickstart", results / "quickstart")
    table = results / "quickstart" / MAJORITY_FILE
    if not with_table:
        table.unlink(missing_ok=True)
    return results


def _empty(tmp_path: Path) -> Path:
    """A data folder without any raw file."""
    folder = tmp_path / "no-data"
    folder.mkdir(exist_ok=True)
    return folder


def test_rates_from_the_data_equal_those_read_back_from_majority_csv_without_it(quickstart_data, tmp_path):
    exp = load_experiment(SPEC)
    results = _results(tmp_path)
    from_data = verdicts_mod.majority_for(exp, LABELS, str(quickstart_data), results=results)
    table = pd.read_csv(results / "quickstart" / MAJORITY_FILE)
    assert list(table.columns) == baselines.MAJORITY_COLUMNS
    for label in LABELS:  # one row per seed rep of the label; the rate is their mean
        rows = table[table["dataset_label"] == label].sort_values("rep")
        assert rows["rep"].tolist() == list(exp.reps_for(label))
        assert from_data[label] == pytest.approx(rows["majority"].mean(), abs=1e-12)
    assert 0.6 < from_data["breast_cancer"] < 0.7 and 0.7 < from_data["adult"] < 0.8  # 65 % benign, 75 % <=50K
    empty = str(_empty(tmp_path))
    assert verdicts_mod.majority_for(exp, LABELS, empty, results=results) == from_data
    assert baselines.majority_rates(exp, LABELS, empty, results) == from_data  # what the figures draw
    assert baselines.majority_rates(exp, LABELS, empty) == {}  # no table, no data: no line, no error


def test_each_profile_takes_the_mean_over_its_own_reps_of_the_stored_shares(tmp_path):
    shares = {(label, rep): 0.6 + 0.01 * rep for label in LABELS for rep in range(10)}
    full, ci = load_experiment(SPEC), load_experiment(SPEC, "ci")
    assert ci.reps_for("adult") == (0, 1, 2) and full.reps_for("adult") == tuple(range(10))
    for exp in (full, ci):
        baselines.write_shares(baselines.majority_path(exp, tmp_path), shares, exp.seed)
    assert baselines.majority_path(ci, tmp_path) == tmp_path / "quickstart" / "profiles" / "ci" / MAJORITY_FILE
    empty = str(_empty(tmp_path))
    assert verdicts_mod.majority_for(full, LABELS, empty, results=tmp_path) == pytest.approx(
        {label: 0.645 for label in LABELS}, abs=1e-12)
    assert verdicts_mod.majority_for(ci, LABELS, empty, results=tmp_path) == pytest.approx(
        {label: 0.61 for label in LABELS}, abs=1e-12)
    del shares[("adult", 9)]  # the full profile lacks one rep of adult: its verdicts cannot be computed
    baselines.write_shares(baselines.majority_path(full, tmp_path), shares, full.seed)
    with pytest.raises(DpbenchError, match=r"adult \(1 of 10 seeds\)"):
        verdicts_mod.majority_for(full, LABELS, empty, results=tmp_path)
    assert baselines.majority_rates(full, LABELS, empty, tmp_path) == pytest.approx({"breast_cancer": 0.645})


def test_the_data_complete_a_short_majority_csv_and_the_stored_shares_come_first(quickstart_data, tmp_path):
    exp = load_experiment(SPEC)
    results = _results(tmp_path)
    path = results / "quickstart" / MAJORITY_FILE
    right = verdicts_mod.majority_for(exp, LABELS, str(quickstart_data), results=results)
    truth = path.read_bytes()
    shares = baselines.stored_shares(path, exp.seed)
    other = {("other", 0): 0.25}  # a row of another label is kept
    short = {**{k: v for k, v in shares.items() if k != ("adult", 3)}, **other}  # one rep lacking
    baselines.write_shares(path, short, exp.seed)
    assert verdicts_mod.majority_for(exp, LABELS, str(quickstart_data), results=results) == right
    assert baselines.stored_shares(path, exp.seed) == {**shares, **other}
    # a stored share is what the verdicts read, even with the data at hand (the data are read only
    # for what the table lacks)
    baselines.write_shares(path, {**shares, ("breast_cancer", 0): 0.5}, exp.seed)
    moved = verdicts_mod.majority_for(exp, LABELS, str(quickstart_data), results=results)
    n = len([k for k in shares if k[0] == "breast_cancer"])
    assert moved["breast_cancer"] == pytest.approx(right["breast_cancer"] + (0.5 - shares[("breast_cancer", 0)]) / n)
    baselines.write_shares(path, shares, exp.seed)
    assert path.read_bytes() == truth  # same shares, same bytes


def test_the_stored_shares_of_another_seed_stream_are_not_read(quickstart_data, tmp_path):
    """A split depends on the experiment's seed stream as well as the rep: a majority.csv written for
    one stream (e.g. the exploratory seeds) is never read for another (a confirmatory plan's)."""
    exp = load_experiment(SPEC)
    results = _results(tmp_path)
    path = results / "quickstart" / MAJORITY_FILE
    right = verdicts_mod.majority_for(exp, LABELS, str(quickstart_data), results=results)
    shares = baselines.stored_shares(path, exp.seed)
    other_stream = exp.seed + 1
    path.unlink()
    baselines.write_shares(path, {k: 0.5 for k in shares}, other_stream)  # stale rates of another stream
    assert baselines.stored_shares(path, exp.seed) == {}
    with pytest.raises(DpbenchError, match="cannot compute the claims' verdicts"):
        verdicts_mod.majority_for(exp, LABELS, str(_empty(tmp_path)), results=results)
    assert verdicts_mod.majority_for(exp, LABELS, str(quickstart_data), results=results) == right
    every = baselines.stored_shares(path)  # both streams kept, keyed by (seed, label, rep)
    assert {k[0] for k in every} == {exp.seed, other_stream}
    assert baselines.stored_shares(path, other_stream) == {k: 0.5 for k in shares}


def _weak_dpsgd(results: Path) -> None:
    """DP-SGD's test accuracy at epsilon 0.05 on Breast Cancer set to 0.55, below its majority class
    (about 0.65); the validation scores, and so the selection, are left alone."""
    path = results / "quickstart" / "runs.csv.gz"
    runs = pd.read_csv(path, low_memory=False)
    rows = (runs["label"] == "dpsgd") & (runs["dataset_label"] == "breast_cancer") & np.isclose(runs["epsilon"], 0.05)
    assert rows.any()
    runs.loc[rows, "accuracy"] = 0.55
    runs.to_csv(path, index=False)


def _screened_spec(tmp_path: Path) -> Path:
    path = tmp_path / "quickstart.yaml"
    text = SPEC.read_text()
    assert "\nprofiles:" in text
    path.write_text(text.replace("\nprofiles:", SCREENED_CLAIM + "profiles:", 1))
    return path


def test_claim_verdicts_are_the_same_with_and_without_the_raw_data(quickstart_data, tmp_path, monkeypatch):
    exp = load_experiment(_screened_spec(tmp_path))
    results = _results(tmp_path)
    _weak_dpsgd(results)
    monkeypatch.setenv("DPBENCH_DATA", str(quickstart_data))
    with_data = verdicts_mod.claim_verdicts(exp, results)
    assert (results / "quickstart" / MAJORITY_FILE).is_file(), "the claims' path writes majority.csv"
    screened = {v.claim.id: v.verdict for v in with_data}["np-beats-weak-dpsgd"]
    assert screened == "vacuous", "the majority-class screen decides this claim"
    monkeypatch.setenv("DPBENCH_DATA", str(_empty(tmp_path)))
    without = verdicts_mod.claim_verdicts(exp, results)
    pd.testing.assert_frame_equal(claims.table(without), claims.table(with_data))
    # without the rate the screen would be off: the claim reads as reproduced
    selected = verdicts_mod.selected_for_claims(exp, results)
    monkeypatch.setattr(verdicts_mod, "majority_for", lambda *args, **kwargs: {})
    unscreened = verdicts_mod.claims_from(exp, selected, None)
    assert {v.claim.id: v.verdict for v in unscreened}["np-beats-weak-dpsgd"] != "vacuous"


def test_the_figures_majority_line_reads_majority_csv_without_the_data(quickstart_data, tmp_path):
    from dpbench.experiment import stored

    exp = load_experiment(SPEC)
    results = _results(tmp_path)
    curves = stored.load_curves(exp, results)
    rates = verdicts_mod.majority_for(exp, LABELS, str(quickstart_data), results=results)

    def line(data: str) -> dict:
        (shown,) = [s for s in render.figure_tables(exp, curves, pd.DataFrame(), data_dir=data, results=results)
                    if dict(s.figure.options).get("baseline") == "majority"]
        return shown.table.groupby("dataset_label")["majority_accuracy"].first().to_dict()

    assert line(str(quickstart_data)) == line(str(_empty(tmp_path))) == rates


def test_without_data_or_stored_rates_the_verdicts_cannot_be_computed_and_say_so(tmp_path, monkeypatch):
    exp = load_experiment(SPEC)
    results = _results(tmp_path)
    monkeypatch.setenv("DPBENCH_DATA", str(_empty(tmp_path)))
    with pytest.raises(DpbenchError) as caught:
        verdicts_mod.claim_verdicts(exp, results)
    message = str(caught.value)
    assert "\n" not in message
    for part in ("quickstart", "breast_cancer", "adult", "dpbench data fetch", MAJORITY_FILE):
        assert part in message, (part, message)
    assert not (results / "quickstart" / MAJORITY_FILE).exists()

    out = CliRunner().invoke(main, ["claims", str(SPEC), "--results", str(results), "--no-progress"])
    assert out.exit_code == 2, out.output
    errors = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "breast_cancer" in errors[0] and "Traceback" not in out.output
    assert (results / "quickstart" / "claims.csv").read_bytes() == (
        ROOT / "results" / "quickstart" / "claims.csv").read_bytes(), "nothing is written"


def test_a_regression_data_set_has_no_rate_and_raises_nothing(tmp_path):
    exp = load_experiment(ROOT / "experiments" / "heavytailed.yaml", "ci")  # synthetic, generated: always readable
    (label,) = {d.label for d in exp.datasets}
    found = baselines.majority(exp, [label], str(_empty(tmp_path)), tmp_path / "results", store=True)
    assert found.rates == {} and found.missing == {} and found.reps[label] == exp.reps_for(label)
    assert verdicts_mod.majority_for(exp, [label], str(_empty(tmp_path)), results=tmp_path / "results") == {}
    assert not (tmp_path / "results").exists()
