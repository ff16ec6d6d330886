"""End to end through the CLI: run writes runs/curves/manifest/figures; rerun reuses; other verbs."""

from __future__ import annotations

import json

import pandas as pd
from click.testing import CliRunner

from dpbench.cli.main import main


def test_run_writes_tables_manifest_and_figures_then_reuses(tiny_spec, tmp_path, data_dir):
    results = tmp_path / "results"
    args = ["run", str(tiny_spec), "--results", str(results), "--data", str(data_dir), "--no-progress"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    folder = results / "tiny"
    for name in ("runs.csv.gz", "curves.csv", "manifest.json", "accuracy.png", "accuracy.pdf",
                 "optimality_gap.png", "optimality_gap.pdf"):
        assert (folder / name).is_file(), name
    runs = pd.read_csv(folder / "runs.csv.gz")
    assert len(runs) == 10 and set(runs["dp_claim"]) == {"valid", "none"}
    curves = pd.read_csv(folder / "curves.csv")
    assert set(curves["metric"]) == {"accuracy", "optimality_gap"}
    dp = curves[(curves["label"] == "dpsgd") & (curves["metric"] == "accuracy")]
    assert list(dp["epsilon"]) == [0.5, 4.0] and (dp["count"] == 2).all() and (dp["candidates"] == 2).all()
    assert (curves.loc[curves["metric"] == "optimality_gap", "mean"] >= 0).all()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["cells"] == {"total": 10, "finished": 10}
    assert manifest["packages"]["dp-accounting"] and manifest["spec_hash"]
    assert any("breast-cancer-wisconsin.data" in path for path in manifest["data"])
    assert "accuracy (mean ± std over seeds" in first.output and "10 run, 0 reused" in first.output

    memo = json.loads((results / ".cache" / "privacy-memo.json").read_text())  # accounting persisted for reruns
    assert any("_calibrate_cached" in key for key in memo) and any("_pld_epsilon" in key for key in memo)

    second = CliRunner().invoke(main, args)
    assert second.exit_code == 0 and "0 run, 10 reused" in second.output

    ci = CliRunner().invoke(main, args + ["--profile", "ci"])
    assert ci.exit_code == 0 and (folder / "profiles" / "ci" / "curves.csv").is_file()
    assert "reused" in ci.output

    plot = CliRunner().invoke(main, ["plot", str(tiny_spec), "--results", str(results)])
    assert plot.exit_code == 0 and "accuracy.png" in plot.output


def test_list_names_every_registry():
    out = CliRunner().invoke(main, ["list"])
    assert out.exit_code == 0
    for word in ("dpsgd", "nonprivate", "adult", "kddcup99", "logreg", "mlp", "Abadi"):
        assert word in out.output


def test_privacy_epsilon_and_calibrate_round_trip():
    runner = CliRunner()
    cal = runner.invoke(main, ["privacy", "calibrate", "--epsilon", "1", "--delta", "1e-5",
                               "--sampling-rate", "0.01", "--steps", "1000"])
    assert cal.exit_code == 0, cal.output
    z = float(next(l for l in cal.output.splitlines() if "noise multiplier" in l).split("=")[1])
    eps = runner.invoke(main, ["privacy", "epsilon", "-z", str(z), "--delta", "1e-5", "-q", "0.01", "-T", "1000"])
    assert eps.exit_code == 0
    rdp = float(next(l for l in eps.output.splitlines() if "(RDP)" in l).split(":")[1])
    assert 0.99 <= rdp <= 1.0 + 1e-9
    bad = runner.invoke(main, ["privacy", "epsilon", "-z", "1", "--delta", "1e-5"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: give --sampling-rate")


def test_data_verify_on_offline_files(data_dir):
    out = CliRunner().invoke(main, ["data", "verify", "--data", str(data_dir)])
    assert out.exit_code == 0, out.output
    assert "MISMATCH" not in out.output and "MISSING" not in out.output
    assert out.output.count(" ok ") >= 6  # adult.data, adult.test, bank zip, kdd gz, breast cancer, iris
    if not (data_dir / "creditcard" / "creditcard.csv").is_file():  # user-supplied: listed, not an error
        assert "absent    credit_card" in out.output and "user-supplied" in out.output


def test_missing_data_is_one_line_exit_2(tiny_spec, tmp_path):
    out = CliRunner().invoke(main, ["run", str(tiny_spec), "--results", str(tmp_path / "r"),
                                    "--data", str(tmp_path / "empty")])
    assert out.exit_code == 2, out.output
    assert len(out.stderr.strip().splitlines()) == 1 and str(tmp_path / "empty") in out.stderr


def test_plot_without_stored_cells_is_one_line_and_leaves_existing_files_alone(tiny_spec, tmp_path):
    folder = tmp_path / "results" / "tiny"
    folder.mkdir(parents=True)
    (folder / "curves.csv").write_text("committed curves\n")
    out = CliRunner().invoke(main, ["plot", str(tiny_spec), "--results", str(tmp_path / "results")])
    assert out.exit_code == 2 and "no stored cells" in out.stderr and "dpbench run" in out.stderr
    assert (folder / "curves.csv").read_text() == "committed curves\n"
    assert sorted(p.name for p in folder.iterdir()) == ["curves.csv"]
