"""The `dpbench` command: the click group and its verbs.

Each verb lives in its own module (experiments: run, check, plot; claims; report; catalog: list;
audit; data; privacy; bench); the exit codes are those of dpbench.cli.exits.
"""

from __future__ import annotations

import click

# One BLAS thread per process, set (by importing dpbench.cli.blas_threads) before any verb module
# imports numpy: OpenBLAS reads its thread count when numpy is first imported, and a multi-threaded
# BLAS only contends in the small parallel cells and gives other last digits than the workers.
import dpbench.cli.blas_threads  # noqa: F401  (first: before numpy loads)
from dpbench.cli import audit, bench, catalog, claims, data, decide, experiments, privacy, report, verify
from dpbench.cli.exits import ErrorExitGroup


@click.group(cls=ErrorExitGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="dpbench")
def main() -> None:
    """dpbench: reproduce, compare and audit differentially private learning algorithms.

    \b
    Typical use:
      dpbench run experiments/quickstart.yaml          # run, aggregate, plot
      dpbench run experiments/quickstart.yaml --profile ci --jobs 2
      dpbench list                                     # algorithms, datasets, models
      dpbench decide experiments/pidp.yaml --budget 2  # add seeds until each claim is decided
      dpbench privacy calibrate --epsilon 1 --delta 1e-5 --sampling-rate 0.01 --steps 1000
      dpbench verify path/to/plugin.py:fit             # check an algorithm's runs against its ledger
    """


for _command in (experiments.run, experiments.check, experiments.plot, claims.claims, decide.decide, report.report_,
                 catalog.list_, data.data, privacy.privacy, audit.audit, verify.verify, bench.bench):
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
