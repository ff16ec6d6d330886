"""`dpbench verify SPEC`: every algorithm entry of an experiment verified at the spec's own settings
(dpbench.experiment.verify_plan, dpbench.cli.verify_spec), on tests/audit/specs/clipping.yaml: the
clipping plugin at C = 1, honest and with median clipping, on logistic regression and an MLP."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dpbench.cli.main import main
from dpbench.experiment.verify_plan import plan
from dpbench.spec import experiment as spec_mod

SPEC = str(Path(__file__).parent / "specs" / "clipping.yaml")


def test_the_plan_keeps_the_spec_clip_norm_and_says_why_it_skips():
    rows, notes = plan(spec_mod.load(SPEC))
    assert notes == []
    assert [(r.setting, r.model, r.setup is None) for r in rows] == [
        ("clipping=per_example", "logreg", False), ("clipping=median", "logreg", False),
        ("clipping=per_example", "mlp[hidden=4]", True), ("clipping=median", "mlp[hidden=4]", True)]
    for row in rows[:2]:  # every parameter as the spec's grid has it: no role replaces the clip norm
        assert dict(row.setup.params)["clip_norm"] == 1.0 and row.setup.epsilon == 1.0 and row.setup.delta == 1e-5
    assert all("not linear" in r.skipped for r in rows[2:])
    rows, notes = plan(spec_mod.load(SPEC), max_settings=1)
    assert len(rows) == 2 and "1 of its 2 hyperparameter settings" in notes[0]


def test_median_clipping_is_caught_at_the_spec_settings_and_the_table_and_exit_code_say_so(data_dir):
    runner = CliRunner()
    base = ["verify", SPEC, "--data", str(data_dir), "--no-progress", "--no-sensitivity"]
    out = runner.invoke(main, base)
    assert out.exit_code == 1, out.output
    lines = out.output.splitlines()
    table = {tuple(line.split()[:4]): line for line in lines if line.startswith("clipping ")}
    assert "consistent" in table["clipping", "clipping=per_example", "breast_cancer", "logreg"]
    assert "mismatch (measured noise)" in table["clipping", "clipping=median", "breast_cancer", "logreg"]
    assert "skipped: model mlp is not linear" in table["clipping", "clipping=median", "breast_cancer", "mlp[hidden=4]"]
    assert "no audit (--trials 0)" in lines[0] and lines[-1] == "worst verdict: mismatch"
    # the honest setting alone: consistent, exit 0; the single-algorithm options are refused
    out = runner.invoke(main, base + ["--max-settings", "1"])
    assert out.exit_code == 0 and out.output.splitlines()[-1] == "worst verdict: consistent", out.output
    out = runner.invoke(main, base + ["--param", "clip_norm=0.1"])
    assert out.exit_code == 2 and "--param: a SPEC is verified at its own settings" in out.output, out.output


def test_the_spec_options_are_refused_for_one_algorithm():
    out = CliRunner().invoke(main, ["verify", "dpsgd", "--max-settings", "2", "--trials", "0"])
    assert out.exit_code == 2 and "--max-settings: only for a SPEC" in out.output, out.output


REFUSING = '''
import numpy as np
from dpbench.algorithms import Fit, PrivacyTarget, Problem, algorithm


@algorithm("refusing", title="refuses every budget", citation="a test", private=True)
def fit(problem: Problem, privacy: PrivacyTarget, rng: np.random.Generator) -> Fit:
    raise ValueError("The privacy budget is too low.")
'''


def test_a_setting_the_algorithm_refuses_is_skipped_with_its_error_and_claims_no_verdict(data_dir, tmp_path):
    """An algorithm that raises at a setting (a library's accountant refusing the budget) is a row
    skipped with the exception, not a crash; with every row skipped no verdict is claimed."""
    (tmp_path / "refusing.py").write_text(REFUSING)
    spec = tmp_path / "refusing.yaml"
    spec.write_text(f"name: refusing\nseed: 0\ndatasets: [breast_cancer]\nmodels: [logreg]\n"
                    f"algorithms:\n  - plugin: {tmp_path / 'refusing.py'}:fit\nepsilons: [0.5]\ndelta: 1.0e-5\n")
    runner = CliRunner()
    common = ["--data", str(data_dir), "--results", str(tmp_path / "results"), "--no-progress", "--no-sensitivity"]
    out = runner.invoke(main, ["verify", str(spec), *common])
    assert out.exit_code == 0, out.output
    row = next(line for line in out.output.splitlines() if line.startswith("refusing  "))
    assert ("skipped: refusing does not run at epsilon 0.5, delta 1e-05 with its defaults: "
            "ValueError: The privacy budget is too low.") in row, out.output
    assert out.output.splitlines()[-1] == "worst verdict: none (nothing verified: every row is skipped)"
    assert not (tmp_path / "results" / "refusing" / "verify.csv").exists()
    # one algorithm: the same sentence, as a usage-level error (exit 2), not a traceback
    out = runner.invoke(main, ["verify", f"{tmp_path / 'refusing.py'}:fit", "--eps", "0.5", "--trials", "0", *common])
    assert out.exit_code == 2 and "ValueError: The privacy budget is too low." in out.output, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)


def test_verify_csv_names_a_plugin_by_digest_and_a_peer_by_library_and_version():
    from types import SimpleNamespace

    from dpbench.algorithms import peers
    from dpbench.cli.verify_spec import _code

    assert _code(SimpleNamespace(plugin_digest="59f382ebfab9e6e8", algorithm="buggy_clipping")) == "59f382ebfab9e6e8"
    assert _code(SimpleNamespace(plugin_digest=None, algorithm="diffprivlib_logreg")) == \
        f"diffprivlib {peers.version('diffprivlib')}"
    assert _code(SimpleNamespace(plugin_digest=None, algorithm="dpsgd")) == ""
