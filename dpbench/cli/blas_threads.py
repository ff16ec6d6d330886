"""The thread settings of the `dpbench` process, fixed before numpy is first imported.

dpbench.cli.main imports this module before any verb module: OpenBLAS reads its thread count when
numpy is first imported, so the settings here must come first.
"""

from __future__ import annotations

import os

#: the thread settings the user gave (before the defaults below): `bench --against opacus` gives torch
#: its own default thread count unless the user set one
USER_THREAD_ENV = {v: os.environ[v] for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if v in os.environ}

# One BLAS thread per process: cells are small and run in parallel, so threads inside a cell only
# contend (measured 5-20x slowdowns), and the last bits of a BLAS sum depend on how many threads
# split it, so with --jobs 1 (cells in this process) a multi-threaded BLAS gave other digits than
# the workers. OpenBLAS reads this when numpy is first imported, which the import of
# dpbench.bench.suites (by dpbench.cli.bench) does: it must be set before. An explicit environment
# setting wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
