"""The float envelope of a reference: the same experiments rerun in child processes under other
BLAS and numba kernels (`analysis.check.FLOAT_VARIANTS`)."""

from __future__ import annotations

import os

import pandas as pd

from dpbench.analysis.check import variant_environment
from dpbench.core.errors import DpbenchError
from dpbench.experiment.verdicts import seed_points


def variant_points(exps: list, variant: str, scratch: str | os.PathLike, *, jobs: int = 1,
                   data_dir: str | None = None, extra_args: tuple[str, ...] = ()) -> dict[str, pd.DataFrame]:
    """Per-seed points of each experiment, run again in a child process under FLOAT_VARIANTS[variant].

    The kernels are chosen when numpy, OpenBLAS and numba load, so another setting needs another
    process: `dpbench run` of the same spec files and profile into `scratch/<variant>`.
    Returns {experiment name: seed points} (seed_points of that run).
    """
    import subprocess
    import sys
    from pathlib import Path

    sources = []
    for exp in exps:
        if not Path(exp.source).is_file():
            raise DpbenchError(f"{exp.name}: the float envelope reruns the spec file, but this experiment was not "
                               f"loaded from a file ({exp.source})")
        sources.append(exp.source)
    folder = Path(scratch) / variant
    profile = exps[0].profile
    command = [sys.executable, "-m", "dpbench.cli.main", "run", *dict.fromkeys(sources), "--profile", profile,
               "--results", str(folder), "--jobs", str(jobs), "--no-progress", "--allow-large", *extra_args]
    if data_dir is not None:
        command += ["--data", str(data_dir)]
    done = subprocess.run(command, env=variant_environment(variant), capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise DpbenchError(f"the {variant} kernel rerun of {', '.join(sources)} failed (exit {done.returncode}): "
                           f"{last}")
    return {exp.name: seed_points(exp, folder, data_dir=data_dir) for exp in exps}
