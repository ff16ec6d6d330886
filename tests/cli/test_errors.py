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
