"""A data file is identified by its content: the same CSV named by a relative or an absolute path
(or from another folder) gives the same cell keys, splits and fit randomness, and an edited file
gives new ones."""

from __future__ import annotations

import shutil
from pathlib import Path

from dpbench.spec import experiment as spec

DATA = Path(__file__).resolve().parents[2] / "examples" / "my_algorithm" / "data.csv"

SPEC = """
name: paths
seed: 0
seeds: 2
datasets:
  - {{name: csv, label: my-data, options: {{path: {path}, label: outcome, positive: approved,
                                          categorical: [region], missing: impute}}}}
models: [logreg]
algorithms:
  - {{name: dpsgd, params: {{epochs: 1}}}}
epsilons: [1.0]
delta: 1.0e-5
metrics: [accuracy]
"""


def _cells(folder: Path, path: str):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "paths.yaml").write_text(SPEC.format(path=path))
    return spec.load(folder / "paths.yaml").cells()


def test_the_spelling_of_a_data_path_changes_nothing(tmp_path):
    shutil.copy(DATA, tmp_path / "data.csv")
    relative = _cells(tmp_path, "data.csv")
    absolute = _cells(tmp_path / "elsewhere", str(tmp_path / "data.csv"))
    upward = _cells(tmp_path / "a" / "b", "../../data.csv")
    for other in (absolute, upward):
        assert [c.key for c in other] == [c.key for c in relative]
        assert [c.data_seed for c in other] == [c.data_seed for c in relative]
        assert [c.algorithm_rng().integers(1 << 30) for c in other] == \
            [c.algorithm_rng().integers(1 << 30) for c in relative]
    assert relative[0].dataset_options != absolute[0].dataset_options  # the loader still gets each spelling


def test_an_edited_data_file_is_other_data(tmp_path):
    shutil.copy(DATA, tmp_path / "data.csv")
    before = _cells(tmp_path, "data.csv")
    with (tmp_path / "data.csv").open("a") as f:
        f.write("50,40000,0.2,3,0.5,north,approved\n")
    after = _cells(tmp_path, "data.csv")
    assert {c.key for c in before}.isdisjoint(c.key for c in after)
