"""Green on any CPU: results and tests must not hinge on the last bits that CPU kernels change.

OpenBLAS, numpy and numba pick kernels by CPU (AVX2 on one machine, AVX-512 on another), so the
last bits of a float differ between machines of the same kind. These tests rerun work in a
child process under kernel settings this process does not use (older instruction sets only,
safe on any x86-64 CPU with AVX2) and require the same verdicts:

- the numerics tests most exposed to ties (PIDP-SGD's decisions, the compiled kernels) pass;
- `dpbench check` passes against a reference written on this machine, for an experiment with a
  float-sensitive point (Bolt-on's convex step size on the non-convex MLP diverges, so its
  iterates amplify last-bit differences into a different model).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from dpbench.analysis import check
from tests.conftest import REPO

#: a CPU none of check.FLOAT_VARIANTS emulates: SSE4.2 kernels in OpenBLAS, numba and numpy
OTHER_CPU = {"OPENBLAS_CORETYPE": "Nehalem", "NUMBA_CPU_NAME": "nehalem",
             "NPY_DISABLE_CPU_FEATURES": f"X86_V3 {check._NUMPY_AVX512} AVX2 FMA3 AVX F16C AVX_VNNI"}

SENSITIVE_SPEC = """
name: portable
seed: 0
seeds: 2
datasets: [{name: adult, label: Adult, options: {n: 4000}}]
models: [{name: mlp, label: MLP}, {name: logreg, label: LR}]
algorithms:
  - {name: bolt_on, label: Bolt-on, params: {epochs: 3, batch_size: 50, variant: convex}, models: [MLP]}
  - {name: dpsgd, label: DP-SGD, params: {epochs: 1, batch_size: 64, lr: 1.0}, models: [LR]}
epsilons: [1.0]
delta: 1/n
metrics: [accuracy, optimality_gap]
optimum: {restarts: 1, maxiter: 30}
"""


def _other_cpu_env() -> dict[str, str]:
    return {**os.environ, **OTHER_CPU}


def _tail(done: subprocess.CompletedProcess) -> str:
    return "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])


@pytest.mark.cross_cpu
def test_exposed_numerics_tests_pass_under_other_cpu_kernels():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/algorithms/test_pidp.py", "tests/algorithms/test_kernels.py"],
        cwd=REPO, env=_other_cpu_env(), capture_output=True, text=True)
    assert done.returncode == 0, _tail(done)
    assert " passed" in done.stdout


@pytest.mark.cross_cpu
def test_check_passes_under_other_cpu_kernels(tmp_path, data_dir):
    spec = tmp_path / "portable.yaml"
    spec.write_text(SENSITIVE_SPEC)
    base = [sys.executable, "-m", "dpbench.cli.main", "check", str(spec), "--results", str(tmp_path / "results"),
            "--data", str(data_dir), "--backend", "sequential", "--no-progress"]
    made = subprocess.run(base + ["--update"], cwd=REPO, capture_output=True, text=True)
    assert made.returncode == 0, _tail(made)
    reference = pd.read_csv(tmp_path / "results" / "portable" / "reference-full.csv")
    assert (reference["envelope"] >= 0).all()
    sensitive = reference[reference["envelope"] > 1e-6 * reference["value"].abs() + 1e-9]
    # Bolt-on on the MLP amplifies last bits (the point the envelope is for); DP-SGD on logistic
    # regression carries them as float noise
    assert set(sensitive["label"]) == {"Bolt-on"}

    other = subprocess.run(base, cwd=REPO, env=_other_cpu_env(), capture_output=True, text=True)
    assert other.returncode == 0, _tail(other)
    assert ": ok" in other.stdout and " 0 DRIFT" in other.stdout, other.stdout
    assert "DP-SGD" not in other.stdout, other.stdout  # only points that are not `same` are listed


def test_float_sensitive_points_are_shown_not_judged_and_the_rest_still_drift():
    def points(values: dict[int, float], label: str = "a", metric: str = "accuracy") -> pd.DataFrame:
        return pd.DataFrame([{"label": label, "dataset_label": "d", "model_label": "m", "epsilon": 1.0,
                              "metric": metric, "rep": r, "value": v} for r, v in values.items()])

    ref = pd.concat([points({0: 0.60, 1: 0.70, 2: 0.65}), points({0: 3.0, 1: 2.0, 2: 2.5}, metric="gap"),
                     points({0: 0.60, 1: 0.70, 2: 0.65}, label="b")], ignore_index=True)
    variant = ref.copy()
    variant.loc[(variant["label"] == "a") & (variant["metric"] == "gap") & (variant["rep"] == 0), "value"] = 3.5
    variant.loc[variant["label"] == "b", "value"] += 1e-12  # last bits only
    stored = check.with_envelope(ref, [variant])
    assert stored["envelope"].max() == pytest.approx(0.5)
    assert check.sensitive_groups(stored) == {"a|d|m|1.0"}
    # every seed of every metric of group a moves the same way: unstable (shown, never a failure),
    # while group b, whose variant moved by float noise only, is judged: a drift
    moved = ref.assign(value=ref["value"] + 0.05)
    table = check.compare(moved, stored)
    assert dict(zip(table["label"] + "/" + table["metric"], table["status"])) == {
        "a/accuracy": "unstable", "a/gap": "unstable", "b/accuracy": "DRIFT"}
    assert check.failed(table)["label"].tolist() == ["b"]
    assert "unstable = float-sensitive" in check.report(table, 3.0)
    # last-bit moves are `same` everywhere; without an envelope column nothing is unstable
    assert set(check.compare(ref.assign(value=ref["value"] * (1 + 1e-9)), stored)["status"]) == {"same"}
    assert set(check.compare(moved, ref)["status"]) == {"DRIFT"}
