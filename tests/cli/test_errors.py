"""Ordinary mistakes on the command line: one line, exit 2, nothing clamped in silence."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dpbench.cli.main import main


def _run(args: list[str]):
    return CliRunner().invoke(main, args)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_non_finite_numbers_are_usage_errors(value):
    out = _run(["privacy", "epsilon", "-z", value, "-q", "0.01", "-T", "100", "--delta", "1e-5"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "--noise-multiplier" in out.output
    out = _run(["privacy", "epsilon", "-z", "1", "-q", "0.01", "-T", "100", "--delta", value])
    assert out.exit_code == 2 and "--delta" in out.output


@pytest.mark.parametrize("args, option", [
    (["privacy", "epsilon", "-z", "1", "-q", "nan", "-T", "10", "--delta", "1e-5"], "--sampling-rate"),
    (["privacy", "calibrate", "--epsilon", "nan", "-q", "0.01", "-T", "10", "--delta", "1e-5"], "--epsilon"),
    (["privacy", "calibrate", "--epsilon", "1", "-q", "0.01", "--epochs", "inf", "--delta", "1e-5"], "--epochs"),
    (["privacy", "epsilon", "-z", "1", "--batch-size", "nan", "--n", "100", "-T", "10", "--delta", "1e-5"],
     "--batch-size"),
    (["audit", "--algorithm", "dpsgd", "--dataset", "breast_cancer", "--eps", "inf", "--trials", "8"], "--eps"),
    (["audit", "--algorithm", "dpsgd", "--dataset", "breast_cancer", "--eps", "1", "--alpha", "nan", "--trials", "8"],
     "--alpha"),
])
def test_every_float_option_of_privacy_and_audit_refuses_non_finite_values(args, option):
    out = _run(args)
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert f"Invalid value for '{option}'" in out.output and "must be finite, got " in out.output


@pytest.mark.parametrize("args, message", [
    (["privacy", "epsilon", "-z", "1", "-q", "2", "-T", "10", "--delta", "1e-5"],
     "Invalid value for '--sampling-rate' / '-q': must be <= 1, got 2.0"),
    (["privacy", "epsilon", "-z", "1", "-q", "0.1", "-T", "10", "--delta", "1"],
     "Invalid value for '--delta': must be < 1, got 1.0"),
    (["privacy", "epsilon", "-z", "1", "-q", "0.1", "-T", "0", "--delta", "1e-5"],
     "Invalid value for '--steps' / '-T': must be >= 1, got 0"),
])
def test_an_option_out_of_range_gets_the_specs_message_form(args, message):
    """Options are checked by the same declared constraints as spec values (core.validation), so a
    bad --delta reads like a bad `delta:` in a spec."""
    out = _run(args)
    assert out.exit_code == 2 and message in out.output, out.output


def test_a_float_option_names_its_type_plainly():
    out = _run(["privacy", "epsilon", "-z", "abc", "-q", "0.01", "-T", "10", "--delta", "1e-5"])
    assert out.exit_code == 2 and "'abc' is not a valid float." in out.output
    assert "--delta FLOAT" in _run(["privacy", "epsilon", "--help"]).output


def test_a_batch_larger_than_the_data_is_refused_not_clamped():
    out = _run(["privacy", "calibrate", "--epsilon", "1", "--delta", "1e-5", "--batch-size", "256", "--n", "100",
                "--steps", "10"])
    assert out.exit_code == 2
    assert out.stderr == "error: --batch-size 256 is larger than --n 100: the sampling rate B/n must be at most 1\n"


def test_scheduler_without_dask_is_refused_before_any_work(tiny_spec, tmp_path):
    out = _run(["run", str(tiny_spec), "--scheduler", "tcp://127.0.0.1:1", "--results", str(tmp_path / "r")])
    assert out.exit_code == 2 and "--scheduler tcp://127.0.0.1:1 needs --backend dask" in out.stderr
    assert not (tmp_path / "r").exists()


def test_audit_rows_beyond_the_data_are_refused(tmp_path, data_dir):
    out = _run(["audit", "--algorithm", "dpsgd", "--dataset", "breast_cancer", "--eps", "1", "--trials", "8",
                "--rows", "100000", "--data", str(data_dir), "--results", str(tmp_path), "--no-progress"])
    assert out.exit_code == 2
    assert "rows: 100000 base rows asked for, but the training split of breast_cancer has 409" in out.stderr


def test_help_nits():
    run_help = _run(["run", "--help"]).output
    results_line = run_help[run_help.index("--results"):run_help.index("-h, --help")]
    assert results_line.count("default") == 1
    bench_help = _run(["bench", "--help"]).output
    assert "[steps|grads|pidp|fits|many|accounting|cells|noise|replicas]" in bench_help
    epsilon_help = _run(["privacy", "epsilon", "--help"]).output
    delta_line = epsilon_help[epsilon_help.index("--delta"):epsilon_help.index("-q, --sampling-rate")]
    assert "target delta" in delta_line
    assert "reused" in _run(["run", "--help"]).output  # an interrupted run resumes


def test_data_verify_names_where_a_missing_file_comes_from(tmp_path):
    out = _run(["data", "verify", "--data", str(tmp_path)])
    assert out.exit_code == 1
    assert "from https://archive.ics.uci.edu/dataset/2/adult" in out.output
    assert "ucimlrepo" in out.stderr and "bank-additional-full" in out.stderr


def test_check_finds_the_profile_with_a_reference_before_any_work(tmp_path, tiny_spec, data_dir):
    """`check` without --profile compares the profile that has a reference (said on stderr); with a
    profile that has none it exits 2 before any cell runs, naming the profiles that have one."""

    runner = CliRunner()
    results = tmp_path / "results"
    base = ["check", str(tiny_spec), "--results", str(results), "--data", str(data_dir), "--no-progress"]
    made = runner.invoke(main, [*base, "--profile", "ci", "--update", "--no-envelope", "--reuse"])
    assert made.exit_code == 0, made.output
    assert (results / "tiny" / "reference-ci.csv").is_file()
    found = runner.invoke(main, [*base, "--reuse"])  # the ci cells stored by --update: nothing recomputed
    assert found.exit_code == 0, found.output
    assert "no reference for the full profile; checking the ci profile" in found.output
    missing = runner.invoke(main, [*base, "--profile", "full"])
    assert missing.exit_code == 2
    assert "references exist for the ci profile" in missing.output and "--profile full --update" in missing.output
    assert "cells:" not in missing.output  # refused before any cell ran


def test_an_infinite_epsilon_and_an_extreme_budget_are_explained():
    from dpbench.spec.experiment import extreme_epsilons, from_dict

    out = CliRunner().invoke(main, ["privacy", "epsilon", "-z", "0.01", "-q", "0.01", "-T", "1000", "--delta", "1e-5"])
    assert out.exit_code == 0, out.output
    assert "epsilon (PLD): inf  (no finite epsilon" in out.output and "epsilon (RDP): 5.4" in out.output
    raw = {"datasets": ["breast_cancer"], "models": ["logreg"], "algorithms": [{"name": "dpsgd"}, {"name": "nonprivate"}],
           "epsilons": [1e-9, 1.0, 1e6]}
    notes = extreme_epsilons([from_dict(raw, name="x")])
    assert len(notes) == 2 and "epsilon 1e-09 is below 0.001" in notes[0] and "epsilon 1e+06 is above 100" in notes[1]
    assert extreme_epsilons([from_dict({**raw, "epsilons": [0.01, 10]}, name="x")]) == []


def test_claims_on_a_folder_it_cannot_write_shows_the_verdicts_then_one_line(tmp_path, monkeypatch):
    """Like run and plot, exit 2 with one line naming the folder; the verdicts are printed first."""
    import os
    import shutil
    from pathlib import Path

    from dpbench.cli import options

    repo = Path(__file__).resolve().parents[2]
    shutil.copytree(repo / "results" / "quickstart", tmp_path / "quickstart")
    monkeypatch.setattr(options.os, "access", lambda path, mode: not mode & os.W_OK)  # as a read-only folder answers
    out = CliRunner().invoke(main, ["claims", str(repo / "experiments" / "quickstart.yaml"), "--results", str(tmp_path)])
    assert out.exit_code == 2, out.output
    assert "== quickstart [full]: 3 claims" in out.output and "qs-gap-falls" in out.output
    errors = [line for line in out.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot write in" in errors[0] and ".tmp" not in out.output
