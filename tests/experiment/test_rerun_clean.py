"""A rerun that changes no number leaves the committed results as they are (dpbench/experiment/
render.py, stored.same_up_to_float_noise): float noise in the runs table does not rewrite it, and a
figure whose inputs are those recorded in figures.json is not drawn again."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from click.testing import CliRunner

from dpbench.cli.main import main
from dpbench.experiment.stored import same_up_to_float_noise


def test_float_noise_is_not_a_change_and_a_real_change_is():
    table = pd.DataFrame({"key": ["a", "b"], "loss": [0.5, 0.25], "n": [3, 4],
                          "privacy": [json.dumps({"epsilon_spent": {"rdp": 0.9}}), "{}"]})
    noisy = table.assign(loss=table["loss"] * (1 + 5e-10),
                         privacy=[json.dumps({"epsilon_spent": {"rdp": 0.9 * (1 + 1e-12)}}), "{}"])
    assert same_up_to_float_noise(noisy, table)
    assert not same_up_to_float_noise(table.assign(loss=[0.5, 0.26]), table)
    assert not same_up_to_float_noise(table.assign(privacy=[json.dumps({"epsilon_spent": {"rdp": 1.9}}), "{}"]),
                                      table)
    assert not same_up_to_float_noise(table.assign(key=["a", "c"]), table)
    assert not same_up_to_float_noise(table.iloc[:1], table)
    assert same_up_to_float_noise(table.assign(fit_seconds=[1.0, 2.0]), table)  # local, never committed
    assert same_up_to_float_noise(table.assign(loss=[np.nan, 0.25]), table.assign(loss=[np.nan, 0.25]))


SPEC = """
name: rerun
seed: 0
seeds: 2
datasets: [breast_cancer]
models: [logreg]
algorithms: [{name: dpsgd, params: {epochs: 1, batch_size: 64}}]
epsilons: [1, 4]
delta: 1.0e-5
metrics: [accuracy]
"""


def test_a_rerun_of_the_same_numbers_rewrites_no_file(tmp_path, data_dir):
    spec = tmp_path / "rerun.yaml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    args = ["--results", str(results), "--data", str(data_dir), "--no-progress"]
    assert CliRunner().invoke(main, ["run", str(spec), *args]).exit_code == 0
    folder = results / "rerun"
    recorded = json.loads((folder / "figures.json").read_text())
    assert recorded["accuracy"]["files"] == ["accuracy.pdf", "accuracy.png"]
    # another machine rasterises the same rows a few pixels apart: the committed bytes stay
    (folder / "accuracy.png").write_bytes(b"as committed")
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert CliRunner().invoke(main, ["run", str(spec), "--force", *args]).exit_code == 0  # every cell trained again
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    changed = sorted(name for name in before if before[name] != after.get(name))
    assert changed == [], changed
    # a figure whose inputs change (a third seed) is drawn again, and figures.json says what from
    spec.write_text(SPEC.replace("seeds: 2", "seeds: 3"))
    assert CliRunner().invoke(main, ["run", str(spec), *args]).exit_code == 0
    assert (folder / "accuracy.png").read_bytes() != b"as committed"
    assert json.loads((folder / "figures.json").read_text())["accuracy"]["inputs"] != recorded["accuracy"]["inputs"]
