"""`dpbench verify SPEC` keeps its verdicts in RESULTS/<experiment>/verify.csv and the runs it verified
read them in their label (dpbench/experiment/verified.py): "declared (verify mismatch at these
settings)" for a buggy plugin that owns its loop, "consistent" for the honest one; an edited plugin
matches no row."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from dpbench.algorithms.base import REGISTRY
from dpbench.cli.main import main
from dpbench.run import plugins
from tests.conftest import REPO

RED_TEAM = REPO / "examples" / "red_team"


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    """The copy of the plugin loaded here is forgotten after the test (it shares the red team's name)."""
    monkeypatch.setattr(REGISTRY, "_entries", {k: v for k, v in REGISTRY._entries.items() if k != "buggy_dpsgd"})
    monkeypatch.setattr(plugins, "_IMPORTED", dict(plugins._IMPORTED))


def test_the_label_of_a_verified_plugin_run_names_the_verdict(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("DPBENCH_DATA", str(data_dir))
    for name in ("buggy_dpsgd.py",):
        (tmp_path / name).write_bytes((RED_TEAM / name).read_bytes())
    spec = tmp_path / "mini.yaml"
    spec.write_text("""
name: mini
seed: 0
seeds: 1
datasets: [breast_cancer]
models: [logreg]
algorithms:
  - {plugin: buggy_dpsgd.py:fit, label: honest, params: {bug: honest, clip_norm: 0.1}}
  - {plugin: buggy_dpsgd.py:fit, label: half noise, params: {bug: half_noise, clip_norm: 0.1}}
epsilons: [1]
delta: 1.0e-5
metrics: [accuracy]
""")
    results = str(tmp_path / "results")
    runner = CliRunner()
    ran = runner.invoke(main, ["run", str(spec), "--results", results, "--no-progress"])
    assert ran.exit_code == 0, ran.output
    curves = pd.read_csv(tmp_path / "results" / "mini" / "curves.csv")
    assert set(curves["dp_claim"]) == {"declared"}
    checked = runner.invoke(main, ["verify", str(spec), "--results", results, "--no-progress", "--no-sensitivity"])
    assert checked.exit_code == 1, checked.output
    table = pd.read_csv(tmp_path / "results" / "mini" / "verify.csv")
    assert dict(zip(table["label"], table["status"])) == {"honest": "consistent", "half noise": "mismatch"}
    assert runner.invoke(main, ["run", str(spec), "--results", results, "--no-progress"]).exit_code == 0
    curves = pd.read_csv(tmp_path / "results" / "mini" / "curves.csv")
    assert dict(zip(curves["label"], curves["dp_claim"])) == {
        "honest": "declared (verify consistent at these settings)",
        "half noise": "declared (verify mismatch at these settings)"}
    # the plugin edited since: its runs are new and no verification covers them
    (tmp_path / "buggy_dpsgd.py").write_text((tmp_path / "buggy_dpsgd.py").read_text() + "\n# edited\n")
    assert runner.invoke(main, ["run", str(spec), "--results", results, "--no-progress"]).exit_code == 0
    curves = pd.read_csv(tmp_path / "results" / "mini" / "curves.csv")
    assert set(curves["dp_claim"]) == {"declared"}


def test_a_peer_librarys_run_reads_the_verdict_of_its_version_only(tmp_path):
    """A peer's run (stored "declared by <library> <version>") is matched by library and version: the
    same settings run under another version of the library match no row."""
    import json

    from dpbench.experiment import verified
    from dpbench.spec import experiment as spec_mod

    spec = tmp_path / "peer.yaml"
    spec.write_text("name: peer\nseed: 0\ndatasets: [breast_cancer]\nmodels: [logreg]\n"
                    "algorithms:\n  - {name: diffprivlib_logreg, label: dpl}\nepsilons: [1]\ndelta: 1.0e-5\n")
    exp = spec_mod.load(str(spec))
    params = json.dumps({"C": 1.0}, sort_keys=True)
    verified.write(exp, tmp_path, [{"label": "dpl", "params": {"C": 1.0}, "dataset_label": "Breast Cancer",
                                    "model_label": "LR", "epsilon": 1.0,
                                    "plugin_digest": verified.library_code("diffprivlib", "0.6.6"),
                                    "status": "consistent", "checks": ""}])

    def run(version: str, claim: str = "declared") -> dict:
        return {"label": "dpl", "params": params, "dataset_label": "Breast Cancer", "model_label": "LR",
                "epsilon": 1.0, "dp_claim": claim,
                "privacy": json.dumps({"library": "diffprivlib", "library_version": version})}

    runs = pd.DataFrame([run("0.6.6"), run("0.6.5"), run("0.6.6", claim="none")])
    assert verified.annotate(runs, exp, tmp_path)["dp_claim"].tolist() == [
        "declared (verify consistent at these settings)", "declared", "none"]
