"""numba, when it is there: `njit` (a no-op decorator without numba) and `jit_enabled()`.

One place for the switch that every compiled loop obeys: `DPBENCH_JIT=0` in the environment forces
the numpy twins everywhere (same results to float rounding, slower); without numba installed the
numpy twins run too.
"""

from __future__ import annotations

import os

try:  # numba is a dependency, but a platform without its wheels still runs (numpy path)
    from numba import njit
    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is absent
    HAVE_NUMBA = False

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        return (lambda f: f) if not args or not callable(args[0]) else args[0]


def jit_enabled() -> bool:
    """True when the compiled loops are used: numba importable and DPBENCH_JIT is not 0."""
    return HAVE_NUMBA and os.environ.get("DPBENCH_JIT", "1").strip().lower() not in ("0", "false", "no", "off")
