"""Shared fixtures: where the offline UCI files are, and tiny experiment specs.

The test process runs cells like `dpbench` does (dpbench.cli.blas_threads): one BLAS thread. The
variables must be set before numpy loads OpenBLAS, which is why this comes first. Otherwise
OpenBLAS spreads the small matrix products of the tests over every core and spends most of its
time synchronising: the algorithm, audit and model tests take about twice as long on 2 idle
cores, far longer on a loaded machine. An explicit setting in the environment still wins.

Markers (pyproject.toml, [tool.pytest.ini_options]): `slow` (paper-scale, left out of `make
test`), `browser` (headless Chromium), `cross_cpu` (child processes under other CPU kernels).
"""

from __future__ import annotations

import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
if "numpy" in sys.modules:  # pragma: no cover - a plugin imported numpy before this file
    import warnings

    warnings.warn("numpy was imported before tests/conftest.py: BLAS keeps its default thread count", stacklevel=1)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def offline_data_dir() -> Path:
    """$DPBENCH_DATA if set, else ../shared/data beside the repository."""
    return Path(os.environ.get("DPBENCH_DATA") or SHARED_DATA)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = offline_data_dir()
    if not (path / "breast-cancer-wisconsin" / "breast-cancer-wisconsin.data").is_file():
        pytest.skip(f"offline UCI files not found at {path}; set DPBENCH_DATA to a folder with the UCI layout")
    return path


TINY_SPEC = """
name: tiny
seed: 0
seeds: 2
datasets: [breast_cancer]
models: [logreg]
algorithms:
  - name: nonprivate
  - name: dpsgd
    params: {epochs: 2, batch_size: 32, lr: [0.5, 1.0]}
epsilons: [0.5, 4.0]
delta: 1/n
metrics: [accuracy, optimality_gap]
profiles:
  ci: {seeds: 1, epsilons: [1.0]}
"""


@pytest.fixture
def tiny_spec(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_SPEC)
    return path
